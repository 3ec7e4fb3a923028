//! The field-error list validation builds, and the generic value rules (names, label keys and values,
//! config keys, ports) in kube-apiserver's wording.

use std::collections::BTreeMap;

use crate::error::Error;

/// Field errors in the order found; identical ones are reported once, as field.ErrorList does.
#[derive(Debug, Default)]
pub(crate) struct Errs(Vec<(String, String)>);

impl Errs {
    pub(crate) fn push(&mut self, field: impl Into<String>, detail: impl Into<String>) {
        let e = (field.into(), detail.into());
        if !self.0.contains(&e) {
            self.0.push(e);
        }
    }

    pub(crate) fn required(&mut self, field: impl Into<String>, detail: &str) {
        self.push(field, with_detail("Required value", detail));
    }

    /// `Invalid value: <value>: <detail>`; `value` is already in Go's printed form (see [`q`]).
    pub(crate) fn invalid(&mut self, field: impl Into<String>, value: impl std::fmt::Display, detail: &str) {
        self.push(field, with_detail(&format!("Invalid value: {value}"), detail));
    }

    pub(crate) fn forbidden(&mut self, field: impl Into<String>, detail: &str) {
        self.push(field, with_detail("Forbidden", detail));
    }

    pub(crate) fn duplicate(&mut self, field: impl Into<String>, value: impl std::fmt::Display) {
        self.push(field, format!("Duplicate value: {value}"));
    }

    /// `Unsupported value: "x": supported values: "a", "b"` unless `value` is one of `supported`.
    pub(crate) fn one_of(&mut self, field: impl Into<String>, value: &str, supported: &[&str]) {
        if !supported.contains(&value) {
            let list: Vec<String> = supported.iter().map(|s| q(s)).collect();
            self.push(
                field,
                format!(
                    "Unsupported value: {}: supported values: {}",
                    q(value),
                    list.join(", ")
                ),
            );
        }
    }

    pub(crate) fn into_result(self, kind: &str, name: &str) -> Result<(), Error> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Error::Invalid {
                kind: kind.into(),
                name: name.into(),
                causes: self.0,
            })
        }
    }
}

fn with_detail(head: &str, detail: &str) -> String {
    if detail.is_empty() {
        head.to_string()
    } else {
        format!("{head}: {detail}")
    }
}

/// Go's `%q` of a string.
pub(crate) fn q(s: &str) -> String {
    format!("{s:?}")
}

/// Go's `%#v` of a `map[string]string`.
pub(crate) fn go_map(m: Option<&BTreeMap<String, String>>) -> String {
    match m {
        None => "map[string]string(nil)".into(),
        Some(m) => {
            let items: Vec<String> = m.iter().map(|(k, v)| format!("{}:{}", q(k), q(v))).collect();
            format!("map[string]string{{{}}}", items.join(", "))
        }
    }
}

const LABEL_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const NAME_PART_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const DNS1123_SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";

fn alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?` or empty when `allow_empty`.
fn is_label_like(s: &str) -> bool {
    s.starts_with(alnum) && s.ends_with(alnum) && s.chars().all(|c| alnum(c) || "-_.".contains(c))
}

/// A DNS-1123 label (apimachinery's `IsDNS1123Label`): 1–63 of `[a-z0-9-]`, alphanumeric at both
/// ends. The simulator's one copy: object names, CRD names, service accounts, label values.
pub(crate) fn is_dns1123_label(s: &str) -> bool {
    let lower = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty()
        && s.len() <= 63
        && s.starts_with(lower)
        && s.ends_with(lower)
        && s.chars().all(|c| lower(c) || c == '-')
}

fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

/// Problems with a label value (empty is fine).
pub(crate) fn label_value(v: &str) -> Vec<String> {
    let mut out = Vec::new();
    if v.len() > 63 {
        out.push("must be no more than 63 characters".into());
    }
    if !v.is_empty() && !is_label_like(v) {
        out.push(format!(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and \
             must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', \
             regex used for validation is '{LABEL_FMT}')"
        ));
    }
    out
}

/// Problems with a qualified name (`prefix/name`): label and annotation keys, finalizers.
pub(crate) fn qualified_name(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                out.push("prefix part must be non-empty".into());
            } else if !is_dns1123_subdomain(prefix) {
                out.push(format!("prefix part {}", dns1123_subdomain_msg()));
            }
            name
        }
        _ => {
            out.push(format!(
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end \
                 with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for \
                 validation is '{NAME_PART_FMT}') with an optional DNS subdomain prefix and '/' (e.g. \
                 'example.com/MyName')"
            ));
            return out;
        }
    };
    if name.is_empty() {
        out.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        out.push("name part must be no more than 63 characters".into());
    }
    if !name.is_empty() && !is_label_like(name) {
        out.push(format!(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an \
             alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is \
             '{NAME_PART_FMT}')"
        ));
    }
    out
}

pub(crate) fn dns1123_subdomain_msg() -> String {
    format!(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must \
         start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is \
         '{DNS1123_SUBDOMAIN_FMT}')"
    )
}

pub(crate) fn dns1123_label_msg() -> String {
    format!(
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start \
         and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is \
         '{DNS1123_LABEL_FMT}')"
    )
}

pub(crate) fn dns1035_label_msg() -> String {
    format!(
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic \
         character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for \
         validation is '{DNS1035_LABEL_FMT}')"
    )
}

pub(crate) fn is_dns1035_label(s: &str) -> bool {
    is_dns1123_label(s) && s.starts_with(|c: char| c.is_ascii_lowercase())
}

/// A DNS-1123 label field such as a container or port name.
pub(crate) fn dns_label(errs: &mut Errs, field: &str, v: &str) {
    if v.len() > 63 {
        errs.invalid(field, q(v), "must be no more than 63 characters");
    }
    if !is_dns1123_label(v) || v.len() > 63 {
        errs.invalid(field, q(v), &dns1123_label_msg());
    }
}

/// Labels: qualified-name keys, label values.
pub(crate) fn labels(errs: &mut Errs, field: &str, labels: Option<&BTreeMap<String, String>>) {
    for (k, v) in labels.into_iter().flatten() {
        for msg in qualified_name(k) {
            errs.invalid(field, q(k), &msg);
        }
        for msg in label_value(v) {
            errs.invalid(field, q(v), &msg);
        }
    }
}

/// `data[key]` of ConfigMaps and Secrets.
pub(crate) fn config_key(errs: &mut Errs, field: &str, key: &str) {
    let ok = !key.is_empty() && key.len() <= 253 && key.chars().all(|c| alnum(c) || "-._".contains(c));
    if !ok {
        let f = format!("{field}[{key}]");
        if key.len() > 253 {
            errs.invalid(f.clone(), q(key), "must be no more than 253 characters");
        }
        errs.invalid(
            f,
            q(key),
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or \
             'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
        );
    } else if key == "." || key == ".." || key.starts_with("..") {
        let detail = if key.starts_with("..") && key.len() > 2 {
            "must not start with '..'"
        } else {
            "must not be '.' or '..'"
        };
        errs.invalid(format!("{field}[{key}]"), q(key), detail);
    }
}

/// A port number field: 1–65535.
pub(crate) fn port_number(errs: &mut Errs, field: &str, port: i32) {
    if !(1..=65535).contains(&port) {
        errs.invalid(field, port, "must be between 1 and 65535, inclusive");
    }
}

pub(crate) const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_rules() {
        assert!(label_value("a b")[0].starts_with("a valid label must be an empty string"));
        assert!(label_value("").is_empty());
        assert!(label_value("My_value.1").is_empty());
        assert!(qualified_name("example.com/name").is_empty());
        assert!(qualified_name("Example.com/name")[0].starts_with("prefix part a lowercase RFC 1123"));
        assert!(qualified_name("a b")[0].starts_with("name part must consist"));
        assert!(qualified_name("a/b/c")[0].starts_with("a qualified name must"));
        assert_eq!(
            qualified_name(&"x".repeat(64)),
            ["name part must be no more than 63 characters"]
        );
    }

    #[test]
    fn errors_aggregate_like_field_error_lists() {
        let mut errs = Errs::default();
        errs.required("spec.containers", "");
        errs.required("spec.containers", "");
        errs.one_of(
            "spec.restartPolicy",
            "Sometimes",
            &["Always", "OnFailure", "Never"],
        );
        let err = errs.into_result("Pod", "p").unwrap_err().to_string();
        assert_eq!(
            err,
            "Pod \"p\" is invalid: [spec.containers: Required value, spec.restartPolicy: Unsupported value: \
             \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"]"
        );
    }
}
