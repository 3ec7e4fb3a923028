//! The layering rule, checked: no import cycle between top-level modules, nothing imports `app` (the
//! composition root), translation (`envoy`) never reaches into the protocol (`xds`), and only the
//! composition root and the sandbox it starts touch the Kubernetes API simulator. Scans the source text for `crate::<module>` paths, including those inside
//! `use crate::{…}` groups; comments and `#[cfg(test)]` code (test files, test modules) do not count,
//! since tests may reach across layers.
// Test support only (also gated where the module is declared): a panic here fails a test, not the server.
#![cfg(test)]

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The top-level modules `lib.rs` declares outside tests, with their source files: `src/<m>.rs`, or
/// every file below `src/<m>/`.
fn modules(src: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("read lib.rs");
    let mut out = BTreeMap::new();
    for line in production_code(&lib).lines() {
        let Some(name) = line
            .trim_start_matches("pub ")
            .strip_prefix("mod ")
            .and_then(|rest| rest.strip_suffix(';'))
        else {
            continue;
        };
        let dir = src.join(name);
        let files = if dir.is_dir() {
            let mut files = Vec::new();
            collect(&dir, &mut files);
            files
        } else {
            vec![src.join(format!("{name}.rs"))]
        };
        out.insert(name.to_owned(), files);
    }
    out
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

fn is_test_file(path: &Path) -> bool {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    stem == "tests" || stem.ends_with("_tests")
}

/// The text that counts: no comments, no item behind `#[cfg(test)]`.
fn production_code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        if code.starts_with("#[cfg(test)]") {
            // Skip the next item: up to its `;`, or until its braces balance.
            let mut depth = 0i32;
            for item in lines.by_ref() {
                depth += brace_balance(item);
                if depth <= 0 && (item.contains(';') || item.contains('}')) {
                    break;
                }
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn brace_balance(line: &str) -> i32 {
    line.chars()
        .map(|c| match c {
            '{' => 1,
            '}' => -1,
            _ => 0,
        })
        .sum()
}

/// The first path segment after every `crate::`, and inside `crate::{…}` each segment at the group's
/// top level.
fn imported_modules(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        if code[..at].ends_with('$') {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut segment_start = true;
            let mut ident = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 1 => segment_start = true,
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
                if depth == 1 && segment_start {
                    if c.is_alphanumeric() || c == '_' {
                        ident.push(c);
                    } else if !ident.is_empty() {
                        out.insert(std::mem::take(&mut ident));
                        segment_start = c == ',';
                    }
                }
            }
            if !ident.is_empty() {
                out.insert(ident);
            }
        } else {
            let ident: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !ident.is_empty() {
                out.insert(ident);
            }
        }
    }
    out
}

fn graph(src: &Path) -> Graph {
    let modules = modules(src);
    let mut g = Graph::new();
    for (name, files) in &modules {
        let deps = g.entry(name.clone()).or_default();
        for file in files.iter().filter(|f| !is_test_file(f)) {
            let text = std::fs::read_to_string(file).expect("read source");
            deps.extend(
                imported_modules(&production_code(&text))
                    .into_iter()
                    .filter(|m| m != name && modules.contains_key(m)),
            );
        }
    }
    g
}

/// One cycle per strongly connected group of modules, each as the path that closes it.
fn cycles(g: &Graph) -> Vec<Vec<String>> {
    let mut found: Vec<Vec<String>> = Vec::new();
    for start in g.keys() {
        if found.iter().any(|c| c.contains(start)) {
            continue;
        }
        if let Some(path) = path_back(g, start, start, &mut BTreeSet::new()) {
            let mut cycle = vec![start.clone()];
            cycle.extend(path);
            found.push(cycle);
        }
    }
    found
}

/// A path from `from`'s dependencies to `to`, depth first.
fn path_back(g: &Graph, from: &str, to: &str, seen: &mut BTreeSet<String>) -> Option<Vec<String>> {
    for next in g.get(from).into_iter().flatten() {
        if next == to {
            return Some(vec![next.clone()]);
        }
        if seen.insert(next.clone())
            && let Some(mut rest) = path_back(g, next, to, seen)
        {
            rest.insert(0, next.clone());
            return Some(rest);
        }
    }
    None
}

#[test]
fn top_level_modules_import_each_other_without_cycles() {
    let g = graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(g.len() > 10, "found the modules: {:?}", g.keys());
    let found: Vec<String> = cycles(&g).iter().map(|c| c.join(" → ")).collect();
    assert!(
        found.is_empty(),
        "import cycles between top-level modules:\n{}",
        found.join("\n")
    );
    let into_app: Vec<&String> = g
        .iter()
        .filter(|(_, deps)| deps.contains("app"))
        .map(|(m, _)| m)
        .collect();
    assert!(into_app.is_empty(), "only the binary may use `app`: {into_app:?}");
}

#[test]
fn translation_never_imports_the_protocol() {
    let g = graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let envoy = g.get("envoy").expect("the envoy module");
    assert!(!envoy.contains("xds"), "envoy imports xds: {envoy:?}");
    // What translation may read: the model and the config it translates, nothing that does I/O.
    for below in ["envoy", "traffic", "istio", "model"] {
        let deps = &g[below];
        for io in [
            "app",
            "xds",
            "aggregate",
            "registry",
            "multicluster",
            "sandbox",
            "admin",
        ] {
            assert!(!deps.contains(io), "{below} imports {io}: {deps:?}");
        }
    }
}

#[test]
fn only_the_composition_root_reaches_the_simulator() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = graph(&src);
    let into_sandbox: Vec<&String> = g
        .iter()
        .filter(|(m, deps)| deps.contains("sandbox") && *m != "app")
        .map(|(m, _)| m)
        .collect();
    assert!(
        into_sandbox.is_empty(),
        "only app may use the sandbox: {into_sandbox:?}"
    );
    for (name, files) in modules(&src) {
        if name == "app" || name == "sandbox" {
            continue;
        }
        for file in files.iter().filter(|f| !is_test_file(f)) {
            let code = production_code(&std::fs::read_to_string(file).expect("read source"));
            assert!(
                !code.contains("kube_sim::"),
                "{} uses kube_sim outside app and sandbox",
                file.display()
            );
        }
    }
}

#[test]
fn the_check_sees_grouped_imports_and_reports_cycles() {
    let code = production_code(
        "use crate::{\n    aggregate::{self, Snapshots},\n    drain::Tasks, model,\n};\n\
         // crate::commented\nfn f() { crate::network::routes(); }\n\
         #[cfg(test)]\nmod tests {\n    use crate::xds;\n}\n",
    );
    assert_eq!(
        imported_modules(&code),
        ["aggregate", "drain", "model", "network"]
            .map(String::from)
            .into()
    );
    let edge = |a: &str, b: &[&str]| (a.to_owned(), b.iter().map(|s| s.to_string()).collect());
    let g: Graph = [
        edge("a", &["b"]),
        edge("b", &["c"]),
        edge("c", &["a"]),
        edge("d", &["a"]),
    ]
    .into();
    assert_eq!(cycles(&g), [["a", "b", "c", "a"].map(String::from).to_vec()]);
    let g: Graph = [edge("a", &["b"]), edge("b", &[]), edge("d", &["a", "b"])].into();
    assert!(cycles(&g).is_empty());
}
