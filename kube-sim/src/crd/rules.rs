//! `x-kubernetes-validations`: the CEL rules of a CRD's schema, checked when the CRD is written (each rule
//! and messageExpression compiles, its estimated cost fits) and run on every custom object the schema
//! admits, each rule with `self` bound to the value at its node, in kube-apiserver's words
//! (`spec.ports: Invalid value: "array": port number cannot be duplicated`).
//!
//! Transition rules (those reading `oldSelf`) compile but are not run: the sandbox keeps no previous
//! object at that point, so a rule comparing with it is skipped on update as on create.

use serde_json::{Value, json};

use super::cel_lib::{self as cel, compile, context, error_text, reads_old_self, to_cel};
use super::cost::{self, PER_CALL_LIMIT, RUNTIME_BUDGET, STATIC_LIMIT, Sizes};

/// The node's type as the error's value: `"object"`, `"string"`, ...
fn type_name(schema: &Value, v: &Value) -> &'static str {
    match schema["type"].as_str() {
        Some("object") => "object",
        Some("array") => "array",
        Some("string") => "string",
        Some("integer") => "integer",
        Some("number") => "number",
        Some("boolean") => "boolean",
        _ => match v {
            Value::Object(_) => "object",
            Value::Array(_) => "array",
            Value::String(_) => "string",
            Value::Number(n) if n.is_f64() => "number",
            Value::Number(_) => "integer",
            Value::Bool(_) => "boolean",
            Value::Null => "null",
        },
    }
}

/// Whether a schema declares any rule (kube-apiserver only runs, and only reports skipping, then).
pub(crate) fn has_rules(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => {
            m.get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
                || m.values().any(has_rules)
        }
        Value::Array(a) => a.iter().any(has_rules),
        _ => false,
    }
}

/// Runs every rule of `schema` on `obj` (already pruned and type-checked), appending the failures.
pub(crate) fn run(schema: &Value, obj: &Value, errors: &mut Vec<(String, String)>) {
    let mut budget = RUNTIME_BUDGET;
    // The root's rules see the object; `metadata` has no rules of the CRD's below it.
    if node(schema, obj, "", errors, &mut budget) {
        return;
    }
    let Some(map) = obj.as_object() else { return };
    for (key, v) in map {
        if key == "metadata" {
            continue;
        }
        if let Some(sub) = schema["properties"].get(key)
            && walk(sub, v, key, errors, &mut budget)
        {
            return;
        }
    }
}

/// Runs the rules at and below one node; true once the budget is spent (nothing more runs).
fn walk(schema: &Value, v: &Value, path: &str, errors: &mut Vec<(String, String)>, budget: &mut f64) -> bool {
    if node(schema, v, path, errors, budget) {
        return true;
    }
    match v {
        Value::Object(map) => {
            let props = schema["properties"].as_object();
            let additional = &schema["additionalProperties"];
            for (key, item) in map {
                let (sub, at) = match props.and_then(|p| p.get(key)) {
                    Some(sub) => (
                        sub,
                        if path.is_empty() {
                            key.clone()
                        } else {
                            format!("{path}.{key}")
                        },
                    ),
                    None if additional.is_object() => (additional, format!("{path}[{key}]")),
                    None => continue,
                };
                if walk(sub, item, &at, errors, budget) {
                    return true;
                }
            }
        }
        Value::Array(items) if schema["items"].is_object() => {
            for (i, item) in items.iter().enumerate() {
                if walk(&schema["items"], item, &format!("{path}[{i}]"), errors, budget) {
                    return true;
                }
            }
        }
        _ => {}
    }
    false
}

/// The rule's own words for a failure: its message, else the rule.
fn rule_words(rule: &Value) -> String {
    match rule["message"].as_str().map(str::trim).filter(|m| !m.is_empty()) {
        Some(m) => m.to_string(),
        None => rule["rule"].as_str().unwrap_or_default().trim().to_string(),
    }
}

/// Runs the rules declared at one node; true once the budget is spent.
fn node(schema: &Value, v: &Value, path: &str, errors: &mut Vec<(String, String)>, budget: &mut f64) -> bool {
    let Some(rules) = schema["x-kubernetes-validations"].as_array() else {
        return false;
    };
    let kind = type_name(schema, v);
    let this = to_cel(schema, v);
    for rule in rules {
        // The CRD check refused rules that do not compile; a stored CRD from before is skipped over.
        let Ok(program) = compile(rule["rule"].as_str().unwrap_or_default()) else {
            continue;
        };
        if reads_old_self(&program) {
            continue;
        }
        let spent = cost::estimate(program.expression(), &Sizes::Data(v));
        if spent > PER_CALL_LIMIT {
            let detail = format!(
                "Invalid value: \"{kind}\": call cost exceeds limit for rule: {}",
                rule_words(rule)
            );
            errors.push((path.to_string(), detail));
            continue;
        }
        if spent > *budget {
            let detail = format!(
                "Invalid value: \"{kind}\": validation failed due to running out of cost budget, no further validation rules will be run"
            );
            errors.push((path.to_string(), detail));
            return true;
        }
        *budget -= spent;
        let ctx = context(this.clone());
        match program.execute(&ctx) {
            Ok(cel::Cel::Bool(true)) => {}
            Ok(cel::Cel::Bool(false)) => errors.push(failure(rule, &ctx, kind, path)),
            Ok(_) => errors.push((
                path.to_string(),
                format!(
                    "Invalid value: \"{kind}\": rule did not evaluate to a bool evaluating rule: {}",
                    rule_words(rule)
                ),
            )),
            Err(e) => errors.push((
                path.to_string(),
                format!(
                    "Invalid value: \"{kind}\": {} evaluating rule: {}",
                    error_text(&e),
                    rule_words(rule)
                ),
            )),
        }
    }
    false
}

/// The error a failed rule gives: its messageExpression's result, else its message, else `failed
/// rule: <rule>`; at `fieldPath` below the node when set; typed by `reason`.
fn failure(rule: &Value, ctx: &cel::Ctx, kind: &str, path: &str) -> (String, String) {
    let from_expression = rule["messageExpression"]
        .as_str()
        .and_then(|src| compile(src).ok())
        .and_then(|p| match p.execute(ctx) {
            Ok(cel::Cel::String(s)) if !s.trim().is_empty() && !s.contains('\n') => {
                Some(s.trim().to_string())
            }
            _ => None,
        });
    let message = from_expression
        .or_else(|| {
            rule["message"]
                .as_str()
                .map(str::trim)
                .filter(|m| !m.is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| {
            format!(
                "failed rule: {}",
                rule["rule"].as_str().unwrap_or_default().trim()
            )
        });
    let field = match rule["fieldPath"].as_str().filter(|f| !f.is_empty()) {
        Some(f) if f.starts_with('[') => format!("{path}{f}"),
        Some(f) => format!(
            "{path}{}{}",
            if path.is_empty() { "" } else { "." },
            f.trim_start_matches('.')
        ),
        None => path.to_string(),
    };
    let detail = match rule["reason"].as_str() {
        Some("FieldValueForbidden") => format!("Forbidden: {message}"),
        Some("FieldValueRequired") => format!("Required value: {message}"),
        Some("FieldValueDuplicate") => format!("Duplicate value: \"{kind}\": {message}"),
        _ => format!("Invalid value: \"{kind}\": {message}"),
    };
    (field, detail)
}

/// The rule as kube-apiserver prints an `apiextensions.ValidationRule` in an error.
fn go_rule(rule: &Value) -> String {
    let text = |k: &str| rule[k].as_str().unwrap_or_default().to_string();
    let opt = |k: &str| {
        if rule[k].is_null() {
            Value::Null
        } else {
            rule[k].clone()
        }
    };
    json!({
        "Rule": text("rule"), "Message": text("message"), "MessageExpression": text("messageExpression"),
        "Reason": opt("reason"), "FieldPath": text("fieldPath"), "OptionalOldSelf": opt("optionalOldSelf"),
    })
    .to_string()
    .replace('<', "\\u003c")
    .replace('>', "\\u003e")
    .replace('&', "\\u0026")
}

/// What a CRD's schema (at `base`, e.g. `spec.validation.openAPIV3Schema`) gets refused for: rules
/// that do not compile or cost too much, messageExpressions that do not compile, and the value
/// validations kube-apiserver forbids ([`super::values::definition_problems`]).
pub(crate) fn definition_errors(schema: &Value, base: &str, errors: &mut Vec<(String, String)>) {
    if let Some((key, detail)) = super::values::definition_problems(schema) {
        errors.push((format!("{base}.{key}"), detail));
    }
    for (i, rule) in schema["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("{base}.x-kubernetes-validations[{i}]");
        match compile(rule["rule"].as_str().unwrap_or_default()) {
            Err(e) => errors.push((
                format!("{at}.rule"),
                format!("Invalid value: {}: compilation failed: {e}", go_rule(rule)),
            )),
            Ok(p) => {
                let estimate = cost::estimate(p.expression(), &Sizes::Schema(schema));
                if estimate > STATIC_LIMIT {
                    errors.push((
                        format!("{at}.rule"),
                        format!(
                            "Forbidden: estimated rule cost exceeds budget by factor of {} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)",
                            cost::factor(estimate)
                        ),
                    ));
                }
            }
        }
        if let Some(src) = rule["messageExpression"].as_str()
            && let Err(e) = compile(src)
        {
            errors.push((
                format!("{at}.messageExpression"),
                format!(
                    "Invalid value: {}: messageExpression compilation failed: {e}",
                    go_rule(rule)
                ),
            ));
        }
    }
    if let Some(props) = schema["properties"].as_object() {
        for (k, sub) in props {
            definition_errors(sub, &format!("{base}.properties[{k}]"), errors);
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if schema[key].is_object() {
            definition_errors(&schema[key], &format!("{base}.{key}"), errors);
        }
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        for (i, sub) in schema[key].as_array().into_iter().flatten().enumerate() {
            definition_errors(sub, &format!("{base}.{key}[{i}]"), errors);
        }
    }
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
