//! YAML read as kubectl and istiod read it (Go's `yaml` package), not as libyaml does.
//!
//! The one divergence that Istio's own files hit: inside a flow collection, libyaml refuses a plain
//! scalar with a `:` right before a flow indicator (`addresses: [1.2.3.4, 001:db8::]` fails with
//! "found unexpected ':'"), while Go's scanner keeps the `:` in the scalar and reads the string
//! `001:db8::`. [`from_str`] quotes each such scalar and reads the text again, so meshd's file source
//! takes what `kubectl apply -f` takes.

use std::borrow::Cow;

/// Most scalars re-quoted in one document; a document with more is reported as libyaml saw it.
const MAX_REQUOTES: usize = 1024;

/// Parses one YAML document as Go's `yaml` would.
pub fn from_str(text: &str) -> Result<serde_yaml::Value, serde_yaml::Error> {
    let mut text = Cow::Borrowed(text);
    let mut first_error = None;
    for _ in 0..=MAX_REQUOTES {
        match serde_yaml::from_str(&text) {
            Ok(value) => return Ok(value),
            Err(e) => {
                let requoted = e
                    .to_string()
                    .contains("found unexpected ':'")
                    .then(|| e.location())
                    .flatten()
                    .and_then(|at| requote(&text, at.index()));
                first_error.get_or_insert(e);
                match requoted {
                    Some(t) => text = Cow::Owned(t),
                    None => break,
                }
            }
        }
    }
    // The loop ran at least once, so there is an error to report.
    Err(first_error.unwrap_or_else(|| serde::de::Error::custom("YAML could not be read")))
}

/// `text` with the plain scalar that ends in the `:` at character `colon` (libyaml's error mark)
/// single-quoted: from the collection's `[`, `{` or `,` (or a flow mapping's `key: `) through that
/// `:`. `None` when the mark is not such a `:`.
fn requote(text: &str, colon: usize) -> Option<String> {
    let (at, c) = text.char_indices().nth(colon)?;
    if c != ':' {
        return None;
    }
    let mut start = text[..at].rfind(|c| ",[]{}".contains(c)).map_or(0, |i| i + 1);
    let value = text[start..at]
        .char_indices()
        .rfind(|&(i, c)| c == ':' && text[start + i + 1..].starts_with(char::is_whitespace));
    if let Some((i, _)) = value {
        start += i + 1;
    }
    start = at - text[start..at].trim_start().len();
    let end = at + 1;
    let scalar = &text[start..end];
    if scalar.starts_with(['\'', '"']) {
        return None;
    }
    Some(format!(
        "{}'{}'{}",
        &text[..start],
        scalar.replace('\'', "''"),
        &text[end..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_go_yaml_reads() {
        let cases: &[(&str, &str)] = &[
            (
                "addresses: [1.2.3.4, 001:db8::]",
                r#"{"addresses":["1.2.3.4","001:db8::"]}"#,
            ),
            ("a: [x:, 'y', b:c]", r#"{"a":["x:","y","b:c"]}"#),
            ("a: {k: v::}", r#"{"a":{"k":"v::"}}"#),
            (
                "a: [fe80::1, '::1', 2001:db8::/32]",
                r#"{"a":["fe80::1","::1","2001:db8::/32"]}"#,
            ),
            ("a: it's:]\n", r#"{"a":"it's:]"}"#),
            ("a: [it's:]\n", r#"{"a":["it's:"]}"#),
            ("k: [a b:, {c: d e:}]", r#"{"k":["a b:",{"c":"d e:"}]}"#),
        ];
        for (yaml, json) in cases {
            let value = from_str(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
            assert_eq!(serde_json::to_string(&value).unwrap(), *json, "{yaml}");
        }
    }

    #[test]
    fn other_errors_are_libyamls() {
        for yaml in ["a: [unclosed", "a: {b: c", "a: [\"x\"y:]"] {
            let e = from_str(yaml).expect_err(yaml);
            assert!(e.location().is_some(), "{yaml}: {e}");
        }
    }
}
