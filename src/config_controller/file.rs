//! The `--config-dir` source (istiod's `--configDir` file monitor): every `*.yaml`/`*.yml` under the
//! directory, recursively, each possibly multi-document (a `v1` `List` contributes its items), read
//! as kubectl reads YAML (`yaml`), polled like the mesh config (content hash, a
//! change applies once two polls agree). A file that cannot be read or parsed keeps its last good
//! objects and is reported with its path, document index and line; an object that fails validation
//! is rejected on its own with the same position. Entries whose name starts with `.` are skipped
//! (Kubernetes' ConfigMap mounts keep a second copy of every file under `..data`).

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use sha2::{Digest, Sha256};
use tokio::sync::mpsc::UnboundedSender;
use tracing::{info, warn};

use super::{
    Event,
    store::{Parsed, SourceId, SourceState},
    yaml,
};
use crate::{
    config::watch::{Change, ChangeDetector, read_capped, spawn_poller},
    drain::Tasks,
    istio::{self, Kind, ObjectMeta, ObjectRef, Source},
    readiness::Ready,
};

/// Most files read from the directory; more is reported rather than read.
pub const MAX_FILES: usize = 10_000;

/// The namespace of an object whose file names none.
pub const DEFAULT_NAMESPACE: &str = "default";

/// One object read from a file.
#[derive(Debug, Clone)]
pub struct Doc {
    /// Its identity.
    pub object: ObjectRef,
    /// Its metadata (source: the file and document index).
    pub meta: ObjectMeta,
    /// Parsed, or rejected with the field, document and line.
    pub parsed: Parsed,
}

/// Why a whole file was not applied (its last good objects stay).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct FileError {
    /// The file.
    pub path: String,
    /// 0-based document index, when one document is at fault.
    pub document: Option<usize>,
    /// 1-based line in the file.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "file {}", self.path)?;
        if let Some(d) = self.document {
            write!(f, " document {d}")?;
        }
        if let Some(l) = self.line {
            write!(f, " line {l}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Splits multi-document YAML at `---` / `...` lines: each document's text and its first line (1-based).
fn documents(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut start = 1;
    for (i, line) in text.lines().enumerate() {
        if line == "---" || line.starts_with("--- ") || line == "..." {
            out.push((start, std::mem::take(&mut current)));
            start = i + 2;
            if let Some(rest) = line.strip_prefix("--- ") {
                // Content on the marker line belongs to the new document.
                current.push_str(rest);
                current.push('\n');
                start = i + 1;
            }
            continue;
        }
        current.push_str(line);
        current.push('\n');
    }
    out.push((start, current));
    // Documents that hold only comments or blanks are not documents.
    out.retain(|(_, d)| {
        d.lines()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
    });
    out
}

/// The 1-based line (within `doc`) of a field path like `spec.subsets[1].name`: the deepest segment
/// found by following keys and list items down the indentation. Best effort, for block-style YAML.
pub fn locate(doc: &str, path: &str) -> Option<usize> {
    let lines: Vec<&str> = doc.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut found = None;
    // Where the search resumes, the indentation of the enclosing key or list item, and whether that
    // scope is a list item (which its next sibling `- ` ends).
    let (mut pos, mut parent, mut in_item) = (0usize, None::<usize>, false);
    for segment in path.split('.') {
        let (key, index) = match segment.split_once('[') {
            Some((k, rest)) => (k, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (segment, None),
        };
        let mut key_line = None;
        for (i, l) in lines.iter().enumerate().skip(pos) {
            if l.trim().is_empty() {
                continue;
            }
            let item = l.trim_start().starts_with("- ");
            if let Some(p) = parent {
                let ends = if in_item {
                    i > pos && indent(l) <= p
                } else {
                    indent(l) < p || (indent(l) == p && !item)
                };
                if ends {
                    break;
                }
            }
            let t = l.trim_start().trim_start_matches("- ");
            if t.starts_with(&format!("{key}:")) || t.starts_with(&format!("\"{key}\":")) {
                key_line = Some(i);
                break;
            }
        }
        let Some(key_line) = key_line else {
            return found;
        };
        let l = lines[key_line];
        let key_indent = indent(l) + (l.trim_start().len() - l.trim_start().trim_start_matches("- ").len());
        found = Some(key_line + 1);
        (pos, parent, in_item) = (key_line + 1, Some(key_indent), false);
        if let Some(n) = index {
            let items: Vec<usize> = (pos..lines.len())
                .take_while(|&i| lines[i].trim().is_empty() || indent(lines[i]) >= key_indent)
                .filter(|&i| lines[i].trim_start().starts_with("- "))
                .collect();
            let Some(&first) = items.first() else {
                return found;
            };
            let item_indent = indent(lines[first]);
            let Some(&item) = items.iter().filter(|&&i| indent(lines[i]) == item_indent).nth(n) else {
                return found;
            };
            found = Some(item + 1);
            (pos, parent, in_item) = (item, Some(item_indent), true);
        }
    }
    found
}

/// Parses one file into its Istio objects. Documents of other kinds are skipped (returned by
/// description); a `v1` `List` document contributes its items, as `kubectl apply -f` reads it; a
/// document that is not YAML, or an object that lacks `kind` or `metadata.name`, fails the file.
pub fn parse_file(path: &str, text: &str) -> Result<(Vec<Doc>, Vec<String>), FileError> {
    let mut out = (Vec::new(), Vec::new());
    for (index, (start, chunk)) in documents(text).into_iter().enumerate() {
        let doc = Document {
            path,
            index,
            start,
            text: &chunk,
        };
        let value = yaml::from_str(&chunk).map_err(|e| {
            let line = e.location().map(|l| start + l.line() - 1);
            let mut message = e.to_string();
            if let Some(i) = message.find(" at line ") {
                message.truncate(i);
            }
            doc.error(line, message)
        })?;
        let json = serde_json::to_value(&value).map_err(|e| doc.error(Some(start), e.to_string()))?;
        if json["apiVersion"] == "v1" && json["kind"] == "List" {
            let Some(items) = json["items"].as_array() else {
                return Err(doc.error(Some(start), "a List needs `items`, a list".into()));
            };
            for (i, item) in items.iter().enumerate() {
                parse_object(&doc, item, &format!("items[{i}]."), &mut out)?;
            }
        } else {
            parse_object(&doc, &json, "", &mut out)?;
        }
    }
    Ok(out)
}

/// One YAML document of a file: where it is, for reports.
struct Document<'a> {
    path: &'a str,
    index: usize,
    /// Its first line in the file (1-based).
    start: usize,
    text: &'a str,
}

impl Document<'_> {
    fn error(&self, line: Option<usize>, message: String) -> FileError {
        FileError {
            path: self.path.to_owned(),
            document: Some(self.index),
            line,
            message,
        }
    }

    /// The file line of a field path inside this document, when found.
    fn line_of(&self, field: &str) -> Option<usize> {
        locate(self.text, field).map(|l| self.start + l - 1)
    }
}

/// Parses one object of `doc` (the document itself, or a List's item at `prefix`) into `out`'s
/// objects, or its skipped descriptions when meshd does not read its kind.
fn parse_object(
    doc: &Document<'_>,
    json: &serde_json::Value,
    prefix: &str,
    (docs, skipped): &mut (Vec<Doc>, Vec<String>),
) -> Result<(), FileError> {
    let (path, index, start) = (doc.path, doc.index, doc.start);
    let (api_version, kind) = (json["apiVersion"].as_str(), json["kind"].as_str());
    let Some(kind_name) = kind else {
        return Err(doc.error(
            doc.line_of(prefix.trim_end_matches('.')).or(Some(start)),
            format!("{prefix}kind is required"),
        ));
    };
    let Some(kind) = Kind::from_name(kind_name).filter(|k| {
        api_version.is_some_and(|v| {
            v.split_once('/')
                .is_some_and(|(g, ver)| g == k.group() && k.versions().contains(&ver))
        })
    }) else {
        skipped.push(format!(
            "document {index}{}: {} {kind_name} is not a kind meshd reads",
            item_label(prefix),
            api_version.unwrap_or("?")
        ));
        return Ok(());
    };
    let meta_json = &json["metadata"];
    let Some(name) = meta_json["name"].as_str() else {
        return Err(doc.error(
            doc.line_of(&format!("{prefix}metadata")).or(Some(start)),
            format!("{prefix}metadata.name is required"),
        ));
    };
    let strings = |field: &str| -> Result<BTreeMap<String, String>, FileError> {
        match &meta_json[field] {
            serde_json::Value::Null => Ok(BTreeMap::new()),
            v => serde_json::from_value(v.clone()).map_err(|e| {
                doc.error(
                    doc.line_of(&format!("{prefix}metadata.{field}")),
                    format!("{prefix}metadata.{field}: {e}"),
                )
            }),
        }
    };
    let namespace = meta_json["namespace"].as_str().unwrap_or(DEFAULT_NAMESPACE);
    let revision: String = Sha256::digest(json["spec"].to_string().as_bytes())[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let meta = ObjectMeta {
        namespace: namespace.into(),
        name: name.into(),
        labels: strings("labels")?,
        annotations: strings("annotations")?,
        revision,
        creation_timestamp: None,
        source: Source::File {
            path: path.into(),
            index,
        },
    };
    let object = ObjectRef::new(kind, namespace, name);
    let parsed = match istio::parse(kind, meta.clone(), &json["spec"]) {
        Ok((cfg, warnings)) => Parsed::Valid(Arc::new(cfg), warnings),
        Err(e) => {
            let line = doc.line_of(&format!("{prefix}{}", e.field())).unwrap_or(start);
            Parsed::Rejected {
                field: e.field().to_owned(),
                reason: format!(
                    "{e} (file {path} document {index}{} line {line})",
                    item_label(prefix)
                ),
            }
        }
    };
    docs.push(Doc { object, meta, parsed });
    Ok(())
}

/// ` items[2]` for a List's item (its prefix `items[2].`), empty for a document.
fn item_label(prefix: &str) -> String {
    match prefix.strip_suffix('.') {
        Some(item) => format!(" {item}"),
        None => String::new(),
    }
}

/// Each file's path and its text, or why it could not be read.
type Files = Vec<(PathBuf, Result<String, String>)>;

/// Every YAML file under `dir` (sorted), each read or failed on its own.
fn read_dir(dir: &Path) -> Result<Files, String> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(d) = pending.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                files.push(path);
            }
        }
    }
    if files.len() > MAX_FILES {
        return Err(format!(
            "{}: {} YAML files, over the {MAX_FILES}-file limit",
            dir.display(),
            files.len()
        ));
    }
    files.sort();
    Ok(files
        .into_iter()
        .map(|p| {
            let text = read_capped("Istio config", &p).map_err(|e| e.to_string());
            (p, text)
        })
        .collect())
}

fn digest(files: &Files) -> [u8; 32] {
    let mut h = Sha256::new();
    for (p, t) in files {
        h.update(p.to_string_lossy().as_bytes());
        match t {
            Ok(t) => h.update(t.as_bytes()),
            Err(e) => h.update(e.as_bytes()),
        }
        h.update([0]);
    }
    h.finalize().into()
}

/// The source's memory: each file's last good objects, and which files are reported bad.
#[derive(Default)]
struct DirState {
    good: BTreeMap<PathBuf, Vec<Doc>>,
    bad: BTreeSet<String>,
}

impl DirState {
    /// Applies one stable read: good files replace their objects, bad ones keep them; sends every
    /// object, then the list (so the store drops what no file has any more).
    fn apply(&mut self, files: Files, tx: &UnboundedSender<Event>) {
        let present: BTreeSet<PathBuf> = files.iter().map(|(p, _)| p.clone()).collect();
        self.good.retain(|p, _| present.contains(p));
        let mut bad = BTreeSet::new();
        for (path, text) in files {
            let shown = path.display().to_string();
            let result = text
                .map_err(|message| FileError {
                    path: shown.clone(),
                    document: None,
                    line: None,
                    message,
                })
                .and_then(|t| parse_file(&shown, &t));
            match result {
                Ok((docs, skipped)) => {
                    for s in skipped {
                        info!(file = %shown, "{s}; skipped");
                    }
                    self.good.insert(path, docs);
                }
                Err(e) => {
                    if !self.bad.contains(&shown) {
                        warn!(error = %e, "config file rejected; its last good objects stay in force");
                    }
                    let _ = tx.send(Event::State {
                        name: format!("file {shown}"),
                        state: Some(SourceState {
                            synced: false,
                            error: Some(e.to_string()),
                        }),
                    });
                    bad.insert(shown);
                }
            }
        }
        for fixed in self.bad.difference(&bad) {
            let _ = tx.send(Event::State {
                name: format!("file {fixed}"),
                state: None,
            });
        }
        self.bad = bad;
        let mut listed = BTreeSet::new();
        let mut first: BTreeMap<ObjectRef, String> = BTreeMap::new();
        for doc in self.good.values().flatten() {
            let mut doc = doc.clone();
            let here = doc.meta.source.to_string();
            if let Some(other) = first.get(&doc.object) {
                doc.parsed = Parsed::Rejected {
                    field: "metadata.name".into(),
                    reason: format!("{}: duplicate of {other}; the first one is used", doc.object),
                };
            } else {
                first.insert(doc.object.clone(), here);
            }
            listed.insert(doc.object.clone());
            let _ = tx.send(Event::Apply {
                source: SourceId::Directory,
                object: doc.object,
                meta: doc.meta,
                parsed: doc.parsed,
            });
        }
        let _ = tx.send(Event::Retain {
            source: SourceId::Directory,
            kind: None,
            listed,
        });
    }
}

/// Starts polling `dir`: the first read is applied at once (readiness waits for it), then changes
/// once two polls agree.
pub(crate) fn spawn(tasks: &Tasks, ready: &Ready, dir: PathBuf, poll: Duration, tx: UnboundedSender<Event>) {
    let guard = ready.register("config directory");
    let name = "config directory".to_owned();
    let mut state = DirState::default();
    let first = read_dir(&dir);
    let mut changes = ChangeDetector::new(first.as_ref().map_or([0; 32], digest));
    match first {
        Ok(files) => {
            state.apply(files, &tx);
            report(&tx, &name, None);
        }
        Err(e) => {
            warn!(error = %e, "config directory unreadable; retrying");
            report(&tx, &name, Some(e));
        }
    }
    drop(guard);
    spawn_poller(
        tasks,
        &format!("config-dir {}", dir.display()),
        poll,
        move || match changes.observe_by(read_dir(&dir), digest) {
            Change::None => {}
            Change::Failed(e) => {
                warn!(error = %e, "config directory unreadable; keeping its last good objects");
                report(&tx, &name, Some(e));
            }
            Change::Stable(files) => {
                state.apply(files, &tx);
                report(&tx, &name, None);
            }
        },
    );
}

fn report(tx: &UnboundedSender<Event>, name: &str, error: Option<String>) {
    let state = SourceState {
        synced: error.is_none(),
        error,
    };
    let _ = tx.send(Event::State {
        name: name.to_owned(),
        state: Some(state),
    });
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
