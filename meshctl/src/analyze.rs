//! `meshctl analyze`: istioctl analyze's messages, computed live by meshd on the config in force and
//! every cluster's registry (`/debug/analyzez`), plus meshd's own validation results
//! (`/debug/configz`: rejected objects as IST0106, ignored copies, ignored fields, failing sources).
//! Printed as istioctl prints them (`Error [IST0101] (VirtualService ns/name) …`) or as JSON/YAML;
//! the exit status is istioctl's: 79 when a message reaches `--failure-threshold` (table output only).
//! With `-f`, files are analyzed instead, without meshd (`meshd::analysis::files`).

use std::path::{Path, PathBuf};

use meshd::{
    analysis::{Level, Message, analyze, files::load},
    config_controller::ConfigzView,
    istio::Source,
};
use serde::Serialize;

use crate::output::Output;

/// istioctl's exit status when the analyzers found issues (`ExitAnalyzerFoundIssues`).
pub const EXIT_FOUND_ISSUES: u8 = 79;

/// A level on the command line (`--failure-threshold`, `--output-threshold`), any case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "PascalCase")]
pub enum Threshold {
    /// Info and above.
    Info,
    /// Warning and above.
    Warning,
    /// Error only.
    Error,
}

impl From<Threshold> for Level {
    fn from(t: Threshold) -> Level {
        match t {
            Threshold::Info => Level::Info,
            Threshold::Warning => Level::Warning,
            Threshold::Error => Level::Error,
        }
    }
}

/// Why `meshctl analyze -f` could not read its files.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// A file or folder that cannot be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A document that is not YAML.
    #[error(transparent)]
    Parse(#[from] meshd::analysis::files::FilesError),
}

/// The findings in `paths` (files, or folders of `.yaml`, `.yml` and `.json` files, not recursed) with
/// an optional mesh config file; and what was analyzed, in words.
pub fn files(paths: &[PathBuf], mesh_config: Option<&Path>) -> Result<(Vec<Finding>, String), FilesError> {
    let read = |path: &Path| {
        std::fs::read_to_string(path).map_err(|source| FilesError::Read {
            path: path.to_owned(),
            source,
        })
    };
    let mut texts = Vec::new();
    for path in paths {
        if path.is_dir() {
            let entries = std::fs::read_dir(path).map_err(|source| FilesError::Read {
                path: path.clone(),
                source,
            })?;
            let mut inner: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.extension()
                        .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
                })
                .collect();
            inner.sort();
            for p in inner {
                texts.push((p.display().to_string(), read(&p)?));
            }
        } else {
            texts.push((path.display().to_string(), read(path)?));
        }
    }
    let mesh = mesh_config.map(read).transpose()?;
    let loaded = load(&texts, mesh.as_deref())?;
    let mut messages = loaded.invalid;
    messages.extend(analyze(&loaded.input));
    let view = ConfigzView {
        version: 0,
        sources: Default::default(),
        objects: Vec::new(),
    };
    let what = format!(
        "{} Istio objects in {}",
        loaded.input.configs.len(),
        texts
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok((findings(&view, &messages), what))
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// `Error`, `Warning` or `Info`.
    pub level: Level,
    /// The Istio message code (`IST0101`); `-` for what only meshd reports (an ignored copy, an
    /// ignored field, a source it cannot read).
    pub code: String,
    /// The kind (`-` for a source).
    pub kind: String,
    /// `namespace/name`, or the source's name.
    pub name: String,
    /// Where the object came from (`-` for analyzer messages: they are about the object in force).
    pub source: String,
    /// Why.
    pub reason: String,
}

/// The findings: meshd's validation results, then the analyzers' messages.
pub fn findings(view: &ConfigzView, messages: &[Message]) -> Vec<Finding> {
    let mut out = Vec::new();
    for o in &view.objects {
        let name = format!("{}/{}", o.namespace, o.name);
        let mut push = |level, code: &str, reason: String| {
            out.push(Finding {
                level,
                code: code.into(),
                kind: o.kind.to_string(),
                name: name.clone(),
                source: source(&o.source),
                reason,
            })
        };
        match o.status.as_str() {
            "rejected" => {
                let mut reason = o.reason.clone().unwrap_or_default();
                if let Some(rev) = &o.serving_revision {
                    reason += &format!(" (revision {rev} still serving)");
                }
                push(Level::Error, "IST0106", reason);
            }
            "ignored" => push(Level::Warning, "-", o.reason.clone().unwrap_or_default()),
            _ => {}
        }
        for w in &o.warnings {
            push(Level::Info, "-", w.to_string());
        }
    }
    for (name, state) in &view.sources {
        if let Some(e) = &state.error {
            out.push(Finding {
                level: Level::Warning,
                code: "-".into(),
                kind: "-".into(),
                name: name.clone(),
                source: name.clone(),
                reason: e.clone(),
            });
        }
    }
    out.extend(messages.iter().map(|m| Finding {
        level: m.level,
        code: m.code.clone(),
        kind: m.resource.kind.to_string(),
        name: format!("{}/{}", m.resource.namespace, m.resource.name),
        source: "-".into(),
        reason: m.message.clone(),
    }));
    out
}

fn source(s: &Source) -> String {
    match s {
        Source::Cluster(c) => format!("cluster {c}"),
        Source::File { path, index } => format!("{path}#{index}"),
    }
}

/// istioctl's log format: `Error [IST0101] (VirtualService ns/name) message`, with the source for
/// meshd's own findings.
pub fn lines(findings: &[Finding]) -> String {
    findings
        .iter()
        .map(|f| {
            let code = if f.code == "-" {
                String::new()
            } else {
                format!(" [{}]", f.code)
            };
            let from = if f.source == "-" {
                String::new()
            } else {
                format!(" from {}", f.source)
            };
            format!(
                "{}{code} ({} {}{from}) {}\n",
                f.level.name(),
                f.kind,
                f.name,
                f.reason
            )
        })
        .collect()
}

/// What `meshctl analyze` prints, and whether it fails: the findings at or above `shown`; the exit
/// status is non-zero when, in table output, any finding reaches `failure` (istioctl's rule: JSON
/// and YAML output always exit 0).
pub fn report(
    all: &[Finding],
    output: Output,
    shown: Level,
    failure: Level,
) -> Result<(String, bool), serde_json::Error> {
    let visible: Vec<Finding> = all.iter().filter(|f| f.level >= shown).cloned().collect();
    let text = match output {
        Output::Table if visible.is_empty() => String::new(),
        Output::Table => lines(&visible),
        Output::Json => serde_json::to_string_pretty(&visible)? + "\n",
        Output::Yaml => serde_yaml::to_string(&visible).unwrap_or_default(),
    };
    let failed = output == Output::Table && all.iter().any(|f| f.level >= failure);
    Ok((text, failed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshd::{
        analysis::Code,
        config_controller::ObjectView,
        istio::{Kind, ObjectRef},
    };

    fn view() -> ConfigzView {
        let obj = |name: &str, status: &str, reason: Option<&str>| ObjectView {
            kind: Kind::DestinationRule,
            namespace: "ns".into(),
            name: name.into(),
            source: Source::Cluster("c1".into()),
            revision: "2".into(),
            status: status.into(),
            reason: reason.map(Into::into),
            field: None,
            serving_revision: None,
            warnings: Vec::new(),
        };
        let mut rejected = obj(
            "bad",
            "rejected",
            Some("DestinationRule ns/bad: spec.host: host must not be empty"),
        );
        rejected.serving_revision = Some("1".into());
        ConfigzView {
            version: 3,
            sources: [(
                "cluster c1 Gateway".to_owned(),
                meshd::config_controller::SourceState {
                    synced: false,
                    error: Some("CRD gateways.networking.istio.io is missing".into()),
                },
            )]
            .into(),
            objects: vec![
                obj("ok", "valid", None),
                rejected,
                obj("dup", "ignored", Some("conflict")),
            ],
        }
    }

    fn message() -> Message {
        Message::new(
            Code::ReferencedResourceNotFound,
            &ObjectRef::new(Kind::VirtualService, "sample", "helloworld"),
            "Referenced host not found: \"nowhere\"".into(),
        )
    }

    #[test]
    fn validation_results_and_analyzer_messages_become_findings() {
        let f = findings(&view(), &[message()]);
        let rows: Vec<(Level, &str, &str)> = f
            .iter()
            .map(|f| (f.level, f.code.as_str(), f.name.as_str()))
            .collect();
        assert_eq!(
            rows,
            [
                (Level::Error, "IST0106", "ns/bad"),
                (Level::Warning, "-", "ns/dup"),
                (Level::Warning, "-", "cluster c1 Gateway"),
                (Level::Error, "IST0101", "sample/helloworld"),
            ]
        );
        assert!(
            f[0].reason.ends_with("(revision 1 still serving)"),
            "{}",
            f[0].reason
        );
        assert_eq!(
            lines(&f[3..]),
            "Error [IST0101] (VirtualService sample/helloworld) Referenced host not found: \"nowhere\"\n"
        );
        assert!(lines(&f[..1]).starts_with("Error [IST0106] (DestinationRule ns/bad from cluster c1) "));
    }

    #[test]
    fn files_are_analyzed_without_meshd() {
        let dir = std::env::temp_dir().join(format!("meshctl-analyze-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let yaml = "apiVersion: v1\nkind: Service\nmetadata: {name: hello, namespace: sample}\n\
                    spec: {selector: {app: hello}, ports: [{port: 5000, name: http}]}\n---\n\
                    apiVersion: v1\nkind: Pod\nmetadata: {name: hello-v1, namespace: sample, labels: \
                    {app: hello, version: v1}}\n---\n\
                    apiVersion: networking.istio.io/v1\nkind: DestinationRule\n\
                    metadata: {name: hello, namespace: sample}\nspec: {host: hello, subsets: \
                    [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]}\n---\n\
                    apiVersion: networking.istio.io/v1\nkind: DestinationRule\n\
                    metadata: {name: bad, namespace: sample}\nspec: {host: ''}\n";
        std::fs::write(dir.join("mesh.yaml"), yaml).expect("write");
        std::fs::write(dir.join("notes.txt"), "not read").expect("write");
        let (found, what) = files(std::slice::from_ref(&dir), None).expect("analyze");
        let _ = std::fs::remove_dir_all(&dir);
        let rows: Vec<(&str, &str)> = found.iter().map(|f| (f.code.as_str(), f.name.as_str())).collect();
        assert!(rows.contains(&("IST0173", "sample/hello")), "{found:#?}");
        assert!(rows.contains(&("IST0106", "sample/bad")), "{found:#?}");
        assert!(
            !found.iter().any(|f| f.reason.contains("Subset v1 ")),
            "{found:#?}"
        );
        assert!(what.starts_with("2 Istio objects in "), "{what}");
    }

    #[test]
    fn the_exit_status_follows_istioctls_thresholds() {
        let all = findings(&view(), &[]);
        let warnings: Vec<Finding> = all
            .iter()
            .filter(|f| f.level == Level::Warning)
            .cloned()
            .collect();
        // (findings, output, output threshold, failure threshold) → (lines shown, fails)
        let cases = [
            (&all, Output::Table, Level::Info, Level::Error, 3, true),
            (&warnings, Output::Table, Level::Info, Level::Error, 2, false),
            (&warnings, Output::Table, Level::Info, Level::Warning, 2, true),
            (&all, Output::Table, Level::Error, Level::Error, 1, true),
            (&all, Output::Json, Level::Info, Level::Error, 3, false),
        ];
        for (input, output, shown, failure, count, fails) in cases {
            let (text, failed) = report(input, output, shown, failure).expect("render");
            let shown_rows = match output {
                Output::Table => text.lines().count(),
                _ => serde_json::from_str::<Vec<serde_json::Value>>(&text)
                    .expect("json")
                    .len(),
            };
            assert_eq!(
                (shown_rows, failed),
                (count, fails),
                "{output:?} {shown:?} {failure:?}"
            );
        }
    }
}
