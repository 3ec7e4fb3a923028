//! Istio's own test data as meshd's validation conformance suite (issue 31), read in place from
//! `../shared/istio-testdata` (verbatim files of istio/istio; see its SOURCES.md) through the
//! `--config-dir` file source, which is meshd's YAML reading plus `istio::parse`:
//!
//! - `tests/testdata/config/*.yaml`: configuration istiod's own xDS tests load; every object must be
//!   accepted.
//! - `pkg/config/validation/testdata/crds/<kind>-valid.yaml` must be accepted and every document of
//!   `<kind>-invalid.yaml` rejected, with a reason that names a field (the field Istio's `_err`
//!   names, where it names one), for the kinds meshd reads.
//!
//! The match rate is printed per kind (`cargo test --test integration istio_conformance -- --nocapture`); the
//! exact set of known misses is asserted, so a new miss and a fix both fail until this list says so.
//! Without the folder (CI without `shared/`) the test says so and passes.

use std::path::{Path, PathBuf};

use meshd::config_controller::{file::parse_file, store::Parsed};

/// Cases meshd does not yet agree with Istio on: `file#document-index:name`.
const KNOWN_MISSES: &[&str] = &[];

/// The `crds/` files of the kinds meshd reads (the other kinds' files are not meshd's to judge).
const CRD_FILES: &[&str] = &[
    "destinationrule",
    "peerauth",
    "serviceentry",
    "workloadentry",
    "workloadgroup",
];

fn testdata() -> Option<PathBuf> {
    let dir = std::env::var_os("ISTIO_TESTDATA").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/istio-testdata"),
        PathBuf::from,
    );
    dir.join("SOURCES.md").is_file().then_some(dir)
}

/// Tally of one kind of case in one file.
#[derive(Default)]
struct Tally {
    matched: usize,
    total: usize,
}

/// Documents at `---` lines, each with Istio's expected error (its `_err:` line) when it has one.
fn documents(text: &str) -> Vec<(Option<String>, String)> {
    let mut docs = vec![String::new()];
    for line in text.lines() {
        if line == "---" {
            docs.push(String::new());
        } else if let Some(doc) = docs.last_mut() {
            doc.push_str(line);
            doc.push('\n');
        }
    }
    docs.into_iter()
        .filter(|d| d.lines().any(|l| l.starts_with("kind:")))
        .map(|d| {
            let err = d
                .lines()
                .find_map(|l| l.strip_prefix("_err:"))
                .map(|e| e.trim().trim_matches(['\'', '"']).to_owned());
            (err, d)
        })
        .collect()
}

/// The field path Istio's error names, when it starts with one (`spec.ports: Invalid value`).
fn expected_field(err: &str) -> Option<&str> {
    let field = err.split([':', ' ']).next()?;
    field.starts_with("spec").then_some(field)
}

/// `spec.a[1].b` as `spec.a.b`: Istio's CRD errors and meshd's paths index lists differently.
fn without_indices(path: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in path.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// The name in a document's `metadata` (for the case's label).
fn doc_name(doc: &str) -> String {
    doc.lines()
        .find_map(|l| l.trim().strip_prefix("name:"))
        .map_or_else(|| "?".into(), |n| n.trim().to_owned())
}

#[test]
fn istio_testdata_conformance() {
    let Some(root) = testdata() else {
        println!(
            "note: ../shared/istio-testdata is absent (set ISTIO_TESTDATA to Istio's test data); \
             the conformance suite did not run"
        );
        return;
    };
    let mut misses = Vec::new();
    let mut rows = Vec::new();

    // Istio's usable configuration: every object accepted, whole files through the file source.
    let config_dir = root.join("tests/testdata/config");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&config_dir)
        .expect("read tests/testdata/config")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut usable = Tally::default();
    for path in &files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(path).expect("read file");
        match parse_file(&name, &text) {
            Err(e) => {
                usable.total += 1;
                misses.push((format!("config/{name}#file"), e.to_string()));
            }
            Ok((docs, _skipped)) => {
                for doc in docs {
                    usable.total += 1;
                    match doc.parsed {
                        Parsed::Valid(..) => usable.matched += 1,
                        Parsed::Rejected { reason, .. } => {
                            misses.push((format!("config/{name}#{}", doc.object.name), reason))
                        }
                    }
                }
            }
        }
    }
    rows.push(("tests/testdata/config".to_owned(), "accepted", usable));

    // The CRD cases: valid accepted, invalid rejected with the field named.
    let crds = root.join("pkg/config/validation/testdata/crds");
    for kind in CRD_FILES {
        for valid in [true, false] {
            let file = format!("{kind}-{}.yaml", if valid { "valid" } else { "invalid" });
            let text = std::fs::read_to_string(crds.join(&file)).expect("read CRD case file");
            let mut tally = Tally::default();
            for (err, doc) in documents(&text) {
                tally.total += 1;
                let case = format!("{file}#{}:{}", tally.total - 1, doc_name(&doc));
                let outcome = parse_file(&file, &doc).map(|(docs, _)| docs);
                let verdict = match (valid, outcome) {
                    (true, Ok(docs)) => match docs.into_iter().find_map(|d| match d.parsed {
                        Parsed::Rejected { reason, .. } => Some(reason),
                        Parsed::Valid(..) => None,
                    }) {
                        None => Ok(()),
                        Some(reason) => Err(reason),
                    },
                    (true, Err(e)) => Err(e.to_string()),
                    (false, Err(e)) => Err(format!("the file source refused the whole document: {e}")),
                    (false, Ok(docs)) => match docs.into_iter().find_map(|d| match d.parsed {
                        Parsed::Rejected { field, reason } => Some((field, reason)),
                        Parsed::Valid(..) => None,
                    }) {
                        None => Err(format!("accepted; Istio rejects it: {}", err.unwrap_or_default())),
                        Some((field, reason)) => {
                            let want = err.as_deref().and_then(expected_field);
                            let named = field.starts_with("spec") || field.starts_with("metadata");
                            let same = want.is_none_or(|w| {
                                let (got, w) = (without_indices(&field), without_indices(w));
                                got.starts_with(&w) || w.starts_with(&got)
                            });
                            if named && same {
                                Ok(())
                            } else {
                                Err(format!("rejected at {field:?}, Istio names {want:?}: {reason}"))
                            }
                        }
                    },
                };
                match verdict {
                    Ok(()) => tally.matched += 1,
                    Err(why) => misses.push((case, why)),
                }
            }
            rows.push((
                file,
                if valid {
                    "accepted"
                } else {
                    "rejected, field named"
                },
                tally,
            ));
        }
    }

    let (mut matched, mut total) = (0, 0);
    println!("Istio test data through meshd's file source and validation:");
    for (what, verdict, t) in &rows {
        println!("  {what:<40} {verdict:<22} {:>3}/{:<3}", t.matched, t.total);
        matched += t.matched;
        total += t.total;
    }
    println!("  match rate: {matched}/{total}");
    for (case, why) in &misses {
        println!("  miss {case}: {why}");
    }
    let got: Vec<&str> = misses.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(
        got, KNOWN_MISSES,
        "the misses changed: update KNOWN_MISSES (a fix) or fix the regression"
    );
}
