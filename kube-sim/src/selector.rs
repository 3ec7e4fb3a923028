//! Label and field selectors (the real server's grammar and messages) and the combined list/watch filter.

use std::collections::BTreeMap;

use super::error::Error;
use super::fields::Field;
use super::kinds::Kind;
use super::object::Obj;

#[derive(Debug, Clone, PartialEq)]
enum LabelOp {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LabelSelector(Vec<(String, LabelOp)>);

impl LabelSelector {
    pub(crate) fn parse(s: &str) -> Result<LabelSelector, Error> {
        let mut reqs = Vec::new();
        for req in split_top_level(s) {
            let req = req.trim();
            if req.is_empty() {
                continue;
            }
            reqs.push(parse_requirement(req).map_err(|msg| {
                Error::BadRequest(format!(
                    "unable to parse requirement: {msg} (in label selector {s:?})"
                ))
            })?);
        }
        Ok(LabelSelector(reqs))
    }

    /// A `metav1.LabelSelector` object (matchLabels and matchExpressions) as the same requirements,
    /// by apimachinery's `LabelSelectorAsSelector`: `None` (selects nothing) for a null selector or an
    /// unknown operator, no requirement (selects everything) for `{}`. The one evaluator behind every
    /// selector the simulator's controllers and validation apply.
    pub(crate) fn from_api(selector: &serde_json::Value) -> Option<LabelSelector> {
        let selector = selector.as_object()?;
        let mut reqs: Vec<(String, LabelOp)> = Vec::new();
        for (k, v) in selector
            .get("matchLabels")
            .and_then(|m| m.as_object())
            .into_iter()
            .flatten()
        {
            reqs.push((k.clone(), LabelOp::Eq(v.as_str()?.to_owned())));
        }
        let exprs = selector.get("matchExpressions").and_then(|e| e.as_array());
        for e in exprs.into_iter().flatten() {
            let values = || -> Vec<String> {
                e["values"]
                    .as_array()
                    .map(|v| v.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
                    .unwrap_or_default()
            };
            let op = match e["operator"].as_str()? {
                "In" => LabelOp::In(values()),
                "NotIn" => LabelOp::NotIn(values()),
                "Exists" => LabelOp::Exists,
                "DoesNotExist" => LabelOp::NotExists,
                _ => return None,
            };
            reqs.push((e["key"].as_str()?.to_owned(), op));
        }
        Some(LabelSelector(reqs))
    }

    pub(crate) fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|(key, op)| {
            let v = labels.get(key);
            match op {
                LabelOp::Eq(want) => v == Some(want),
                LabelOp::NotEq(want) => v != Some(want),
                LabelOp::In(set) => v.is_some_and(|v| set.contains(v)),
                LabelOp::NotIn(set) => v.is_none_or(|v| !set.contains(v)),
                LabelOp::Exists => v.is_some(),
                LabelOp::NotExists => v.is_none(),
            }
        })
    }
}

/// Splits on commas that are not inside a `( … )` value set.
fn split_top_level(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_requirement(req: &str) -> Result<(String, LabelOp), String> {
    if let Some(key) = req.strip_prefix('!') {
        return Ok((label_key(key.trim())?, LabelOp::NotExists));
    }
    for (sep, ctor) in [
        ("!=", LabelOp::NotEq as fn(String) -> LabelOp),
        ("==", LabelOp::Eq),
        ("=", LabelOp::Eq),
    ] {
        if let Some((k, v)) = req.split_once(sep) {
            return Ok((label_key(k.trim())?, ctor(label_value(v.trim())?)));
        }
    }
    let Some((key, rest)) = req.split_once(char::is_whitespace) else {
        return Ok((label_key(req)?, LabelOp::Exists));
    };
    let rest = rest.trim_start();
    let (set_op, values): (fn(Vec<String>) -> LabelOp, &str) = if let Some(v) = rest.strip_prefix("notin") {
        (LabelOp::NotIn, v)
    } else if let Some(v) = rest.strip_prefix("in") {
        (LabelOp::In, v)
    } else {
        return Err(format!("found {rest:?}, expected: in, notin, =, ==, !="));
    };
    let inner = values
        .trim()
        .strip_prefix('(')
        .and_then(|v| v.strip_suffix(')'))
        .ok_or_else(|| format!("found {:?}, expected: '(' value set ')'", values.trim()))?;
    let set = inner
        .split(',')
        .map(|v| label_value(v.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((label_key(key)?, set_op(set)))
}

fn label_key(k: &str) -> Result<String, String> {
    let (prefix, name) = k.rsplit_once('/').unwrap_or(("", k));
    let ok_name = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let ok_prefix = prefix.len() <= 253
        && prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-.".contains(c));
    if ok_name && ok_prefix {
        Ok(k.to_string())
    } else {
        Err(format!("invalid label key {k:?}"))
    }
}

fn label_value(v: &str) -> Result<String, String> {
    let ok = v.len() <= 63 && v.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if ok {
        Ok(v.to_string())
    } else {
        Err(format!("invalid label value {v:?}"))
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSelector(Vec<(Field, bool, String)>);

impl FieldSelector {
    /// Parses a selector over the field labels `kind` supports.
    pub(crate) fn parse(kind: &Kind, s: &str) -> Result<FieldSelector, Error> {
        let mut reqs = Vec::new();
        for req in s.split(',').map(str::trim).filter(|r| !r.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = req.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = req.split_once("==").or_else(|| req.split_once('=')) {
                (f, true, v)
            } else {
                return Err(Error::BadRequest(format!(
                    "invalid field selector: {req:?}: expected an operator"
                )));
            };
            let field = kind.fields.resolve(field.trim())?;
            reqs.push((field, equal, value.trim().to_string()));
        }
        Ok(FieldSelector(reqs))
    }

    fn matches(&self, obj: &Obj) -> bool {
        self.0.iter().all(|(field, equal, want)| {
            let have = match field {
                Field::Name => obj.key.1.as_str(),
                Field::Namespace => obj.key.0.as_str(),
                Field::Extra(i) => obj.fields.get(*i).map_or("", String::as_str),
            };
            (have == want) == *equal
        })
    }
}

/// What a list or watch selects: an optional namespace plus label and field selectors.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    pub(crate) namespace: Option<String>,
    pub(crate) labels: LabelSelector,
    pub(crate) fields: FieldSelector,
}

impl Filter {
    /// Whether only the namespace narrows the list (the real server then reports `remainingItemCount`).
    pub(crate) fn is_unselective(&self) -> bool {
        self.labels.0.is_empty() && self.fields.0.is_empty()
    }

    pub(crate) fn matches(&self, obj: &Obj) -> bool {
        self.namespace.as_ref().is_none_or(|ns| *ns == obj.key.0)
            && self.labels.matches(&obj.labels)
            && self.fields.matches(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_grammar() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web, api)", true),
            ("app notin (web)", false),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("app=web,tier=front", true),
            ("app=web,tier in (back)", false),
            ("missing!=x", true),
            ("", true),
        ];
        for (sel, want) in cases {
            assert_eq!(LabelSelector::parse(sel).unwrap().matches(&l), want, "{sel}");
        }
    }

    #[test]
    fn api_selectors_follow_label_selector_as_selector() {
        use serde_json::json;
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let cases = [
            (json!(null), false),
            (json!({}), true),
            (json!({"matchLabels": {"app": "web"}}), true),
            (json!({"matchLabels": {"app": "db"}}), false),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "Exists"}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "Bogus"}]}),
                false,
            ),
        ];
        for (sel, want) in cases {
            let got = LabelSelector::from_api(&sel).is_some_and(|s| s.matches(&l));
            assert_eq!(got, want, "{sel}");
        }
    }

    #[test]
    fn bad_selectors_are_rejected() {
        for sel in ["app in web", "a b c", "=x", "app=(x"] {
            assert!(LabelSelector::parse(sel).is_err(), "{sel}");
        }
        let pods = crate::kinds::by_resource("", "v1", "pods").unwrap();
        for sel in ["spec.foo=x", "metadata.name"] {
            assert!(FieldSelector::parse(pods, sel).is_err(), "{sel}");
        }
    }
}
