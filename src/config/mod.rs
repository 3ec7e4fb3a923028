//! Configuration files: mesh config and meshNetworks, parsed strictly, watched and hot-reloaded.
//!
//! Parsing is pure ([`MeshConfig::parse`], [`MeshNetworks::parse`]); [`watch`] owns the file I/O and
//! publishes each new good value on a `tokio::sync::watch` channel, keeping the last good value when a
//! reload fails.

pub mod cluster_local;
pub mod duration;
pub mod mesh;
pub mod networks;
pub mod selectors;
pub mod watch;

pub use mesh::MeshConfig;
pub use networks::MeshNetworks;

use std::path::PathBuf;

/// Largest config file meshd reads; bigger files are rejected rather than buffered.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Why a config file could not be loaded. The message names the file, the field and the position.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{kind} file {path}: {source}")]
    Read {
        /// Which config ("mesh config", "meshNetworks").
        kind: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_FILE_BYTES`].
    #[error("{kind} file {path}: {size} bytes is over the {MAX_FILE_BYTES}-byte limit")]
    TooLarge {
        /// Which config.
        kind: &'static str,
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
    },
    /// The content is invalid.
    #[error("{kind} file {path}: {error}")]
    Invalid {
        /// Which config.
        kind: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong, with field path and line.
        error: ParseError,
    },
}

/// A content error: the field path (e.g. `networks.net1.gateways[0].port`) and where in the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}{}", field_prefix(.field), line_suffix(*.line, *.column))]
pub struct ParseError {
    /// Dotted path of the offending field; empty for document-level errors.
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
}

fn field_prefix(field: &str) -> String {
    if field.is_empty() || field == "." {
        String::new()
    } else {
        format!("{field}: ")
    }
}

fn line_suffix(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(" (line {l}, column {c})"),
        (Some(l), None) => format!(" (line {l})"),
        _ => String::new(),
    }
}

/// The known head of a serde_path_to_error path. A YAML syntax error is found before the deserializer
/// knows which field it is in, so the path ends in `?` segments (`networks.?`); those say nothing the
/// line and column do not say better.
fn known_path(path: &str) -> String {
    let mut known = Vec::new();
    for segment in path.split('.') {
        match segment.find('?') {
            Some(0) => break,
            // `gateways[?]`: keep the field, drop the unknown index.
            Some(i) => {
                known.push(segment[..i].trim_end_matches('['));
                break;
            }
            None => known.push(segment),
        }
    }
    known.join(".")
}

/// Deserializes `T` from any serde source (YAML text, a JSON value from the API server), with the
/// failing field's path in the error and `ignored` called with the path (`a.b[0].c`) of every field `T`
/// does not know. The one mechanism behind "unknown fields are tolerated with a warning" for the mesh
/// config and the Istio config objects alike.
pub fn deserialize_tracked<'de, D, T>(
    de: D,
    ignored: &mut impl FnMut(String),
) -> Result<T, serde_path_to_error::Error<D::Error>>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    let mut on_ignored = |path: serde_ignored::Path<'_>| ignored(field_path(&path));
    let de = serde_ignored::Deserializer::new(de, &mut on_ignored);
    serde_path_to_error::deserialize(de)
}

/// A serde_ignored path as a field path: `a.b[0].c`, without the `?` segments serde_ignored prints for
/// `Option`s and newtypes (they are not fields).
fn field_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", field_path(parent)),
        Path::Map { parent, key } => {
            let parent = field_path(parent);
            if parent.is_empty() {
                key.clone()
            } else {
                format!("{parent}.{key}")
            }
        }
        Path::Some { parent } | Path::NewtypeStruct { parent } | Path::NewtypeVariant { parent } => {
            field_path(parent)
        }
    }
}

/// Deserializes YAML into `T`, reporting the failing field's path and position, and calling
/// `ignored` with the path of every field `T` does not know.
fn parse_yaml<T: serde::de::DeserializeOwned>(
    text: &str,
    mut ignored: impl FnMut(String),
) -> Result<T, ParseError> {
    if text.trim().is_empty() {
        // An empty file is an empty document: every field at its default.
        return parse_yaml("{}", ignored);
    }
    let de = serde_yaml::Deserializer::from_str(text);
    deserialize_tracked(de, &mut ignored).map_err(|e| {
        let field = known_path(&e.path().to_string());
        let inner = e.into_inner();
        let (line, column) = inner
            .location()
            .map_or((None, None), |l| (Some(l.line()), Some(l.column())));
        // serde_yaml appends " at line X column Y" to its messages; we report the position separately.
        let mut message = inner.to_string();
        if let Some(i) = message.find(" at line ") {
            message.truncate(i);
        }
        // ...and prefixes its own (coarser) field path, which `field` already gives precisely.
        if let Some((head, rest)) = message.split_once(": ")
            && !head.contains(' ')
            && field.starts_with(head)
        {
            message = rest.to_owned();
        }
        ParseError {
            field,
            message,
            line,
            column,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_path_segments_are_dropped() {
        assert_eq!(
            known_path("networks.n1.gateways[0].port"),
            "networks.n1.gateways[0].port"
        );
        assert_eq!(known_path("networks.?"), "networks");
        assert_eq!(known_path("?"), "");
        assert_eq!(known_path("networks.n1.gateways[?]"), "networks.n1.gateways");
    }

    #[test]
    fn a_syntax_error_gives_line_and_column_not_a_question_mark() {
        let e = MeshNetworks::parse("networks:\n  n1: {}\n - x\n").unwrap_err();
        let shown = e.to_string();
        assert!(!shown.contains('?'), "{shown}");
        assert!(e.line.is_some() && e.column.is_some(), "{e:?}");
        assert_eq!(shown, "did not find expected key (line 3, column 2)");
    }
}
