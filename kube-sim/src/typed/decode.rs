//! Decoding a body into its typed value the way kube-apiserver's JSON decoder does: type errors answer
//! 400 with Go's `json: cannot unmarshal …` wording, unknown fields are collected for `fieldValidation`.

use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::{Segment, Track};

use crate::error::Error;
use crate::kinds::Kind;

/// The typed value, or 400 with the decoding error in Go's words.
pub(super) fn decode<T: DeserializeOwned>(kind: &Kind, body: &Value) -> Result<T, Error> {
    match try_decode::<T>(body) {
        Ok(decoded) => Ok(decoded),
        // Go leaves a field alone on `null`; serde refuses it for required fields, so drop them and retry.
        Err(_) if has_null(body) => {
            let cleaned = without_nulls(body);
            try_decode::<T>(&cleaned).map_err(|(path, msg)| type_error::<T>(kind, &cleaned, &path, &msg))
        }
        Err((path, msg)) => Err(type_error::<T>(kind, body, &path, &msg)),
    }
}

fn try_decode<T: DeserializeOwned>(body: &Value) -> Result<T, (Vec<Segment>, String)> {
    T::deserialize(body).map_err(|e| {
        // Path tracking costs on every value, so it only runs again to explain a failure.
        let mut track = Track::new();
        let err = T::deserialize(serde_path_to_error::Deserializer::new(body, &mut track))
            .err()
            .map_or_else(|| e.to_string(), |e| e.to_string());
        (track.path().iter().cloned().collect(), err)
    })
}

/// Strict decoding's complaints: fields of `input` the typed re-serialization `output` does not have
/// (`unknown field "spec.ports[0].foo"`). Nulls and empty strings decode to "absent", so they are not
/// counted; map keys survive decoding, so only struct fields can go missing.
pub(super) fn unknown_fields(input: &Value, output: &Value) -> Vec<String> {
    let mut found = Vec::new();
    walk_unknown(input, output, &mut String::new(), &mut found);
    found
}

fn walk_unknown(input: &Value, output: &Value, path: &mut String, found: &mut Vec<String>) {
    match (input, output) {
        (Value::Object(i), Value::Object(o)) => {
            for (k, v) in i {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                match o.get(k) {
                    Some(out) => walk_unknown(v, out, path, found),
                    None if v.is_null() || v.as_str() == Some("") => {}
                    None => found.push(format!("unknown field {path:?}")),
                }
                path.truncate(len);
            }
        }
        (Value::Array(i), Value::Array(o)) => {
            for (n, (v, out)) in i.iter().zip(o).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{n}]"));
                walk_unknown(v, out, path, found);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

fn has_null(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.iter().any(has_null),
        Value::Object(o) => o.values().any(has_null),
        _ => false,
    }
}

fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// 400 `Service in version "v1" cannot be handled as a Service: <detail>`.
pub(super) fn cannot_handle(kind: &Kind, detail: &str) -> Error {
    Error::BadRequest(format!(
        "{} in version {:?} cannot be handled as a {}: {detail}",
        kind.kind, kind.version, kind.kind
    ))
}

/// Go's `json: cannot unmarshal string into Go struct field ServicePort.spec.ports.port of type int32`.
fn type_error<T: DeserializeOwned>(kind: &Kind, body: &Value, path: &[Segment], msg: &str) -> Error {
    let Some((got, want)) = split_serde_message(msg) else {
        return cannot_handle(kind, msg);
    };
    // Struct fields in the path, and the innermost struct type holding the failing value: a parent whose
    // expectation is a map or a sequence is not a struct, so its key is no field name.
    let mut fields = Vec::new();
    let mut owner = kind.kind.to_string();
    for (i, seg) in path.iter().enumerate() {
        if let Segment::Map { key } = seg {
            let parent = expectation::<T>(body, &path[..i]);
            if parent.as_deref().is_none_or(is_struct_name) {
                fields.push(key.clone());
                owner = parent.unwrap_or_else(|| kind.kind.to_string());
            }
        }
    }
    let go_type = go_type::<T>(body, path, want);
    let value = go_value(got, want);
    Error::BadRequest(format!(
        "{} in version {:?} cannot be handled as a {}: json: cannot unmarshal {value} into Go struct field \
         {owner}.{} of type {go_type}",
        kind.kind,
        kind.version,
        kind.kind,
        fields.join(".")
    ))
}

/// ("string \"80\"", "i32") from serde's `invalid type: string "80", expected i32`.
fn split_serde_message(msg: &str) -> Option<(&str, &str)> {
    let rest = msg
        .strip_prefix("invalid type: ")
        .or_else(|| msg.strip_prefix("invalid value: "))?;
    let (got, want) = rest.rsplit_once(", expected ")?;
    Some((got, want))
}

fn is_struct_name(expected: &str) -> bool {
    !matches!(expected, "a map" | "a sequence")
}

/// What the decoder expects at `prefix`: found by putting a `false` there and reading the complaint.
fn expectation<T: DeserializeOwned>(body: &Value, prefix: &[Segment]) -> Option<String> {
    if prefix.is_empty() {
        return None;
    }
    let mut probe = body.clone();
    let slot = pointer_mut(&mut probe, prefix)?;
    *slot = Value::Bool(false);
    let mut track = Track::new();
    let err = T::deserialize(serde_path_to_error::Deserializer::new(&probe, &mut track)).err()?;
    split_serde_message(&err.to_string()).map(|(_, want)| want.to_string())
}

fn pointer_mut<'a>(v: &'a mut Value, path: &[Segment]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, seg| match seg {
        Segment::Map { key } => v.get_mut(key.as_str()),
        Segment::Seq { index } => v.get_mut(*index),
        _ => Some(v),
    })
}

/// Go's name for the expected type.
fn go_type<T: DeserializeOwned>(body: &Value, path: &[Segment], want: &str) -> String {
    match want {
        "i32" | "IntOrString" => "int32".into(),
        "i64" => "int64".into(),
        "f64" => "float64".into(),
        "a string" | "Quantity" => "string".into(),
        "a boolean" => "bool".into(),
        "a base64-encoded string" => "[]uint8".into(),
        "a map" => "map[string]string".into(),
        "a sequence" => {
            // The element type: what an element put in its place would have to be.
            let mut probe = body.clone();
            let elem = match pointer_mut(&mut probe, path) {
                Some(slot) => {
                    *slot = Value::Array(vec![Value::Bool(false)]);
                    let mut inner = path.to_vec();
                    inner.push(Segment::Seq { index: 0 });
                    let mut track = Track::new();
                    T::deserialize(serde_path_to_error::Deserializer::new(&probe, &mut track))
                        .err()
                        .and_then(|e| split_serde_message(&e.to_string()).map(|(_, w)| w.to_string()))
                        .map(|w| go_type::<T>(&probe, &inner, &w))
                }
                None => None,
            };
            format!("[]{}", elem.unwrap_or_else(|| "interface {}".into()))
        }
        other => format!("v1.{other}"),
    }
}

/// Go's description of the JSON value found: `string`, `bool`, `object`, `array`, `number 1.5`.
fn go_value(got: &str, want: &str) -> String {
    let number = |n: &str| {
        let n = n.trim_matches('`');
        if matches!(want, "i32" | "i64" | "IntOrString") {
            format!("number {n}")
        } else {
            "number".to_string()
        }
    };
    match got.split_once(' ') {
        Some(("string", _)) => "string".into(),
        Some(("boolean", _)) => "bool".into(),
        Some(("integer", n)) | Some(("floating", n)) => number(n.trim_start_matches("point ")),
        Some(("unsigned", n)) => number(n.trim_start_matches("integer ")),
        _ => match got {
            "map" => "object".into(),
            "sequence" => "array".into(),
            other => other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds;
    use k8s_openapi::api::core::v1::{Pod, Service};
    use serde_json::json;

    fn service() -> &'static Kind {
        kinds::by_type("v1", "Service").unwrap()
    }

    #[test]
    fn type_errors_read_like_go() {
        let cases = [
            (
                json!({"spec": {"ports": [{"port": "80"}]}}),
                "Service in version \"v1\" cannot be handled as a Service: json: cannot unmarshal string into Go \
                 struct field ServicePort.spec.ports.port of type int32",
            ),
            (
                json!({"metadata": {"labels": {"a": 5}}}),
                "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string",
            ),
            (
                json!({"spec": "x"}),
                "json: cannot unmarshal string into Go struct field Service.spec of type v1.ServiceSpec",
            ),
            (
                json!({"spec": {"ports": [{"port": 99999999999i64}]}}),
                "cannot unmarshal number 99999999999 into Go struct field ServicePort.spec.ports.port of type int32",
            ),
            (
                json!({"spec": {"ports": {"a": 1}}}),
                "cannot unmarshal object into Go struct field ServiceSpec.spec.ports of type []v1.ServicePort",
            ),
        ];
        for (body, want) in cases {
            let err = decode::<Service>(service(), &body).err().unwrap().to_string();
            assert!(err.contains(want), "{err}\nwant {want}");
        }
        let pod = kinds::by_type("v1", "Pod").unwrap();
        let body = json!({"spec": {"containers": [{"name": "a", "image": true}]}});
        let err = decode::<Pod>(pod, &body).err().unwrap().to_string();
        assert!(
            err.ends_with(
                "cannot unmarshal bool into Go struct field Container.spec.containers.image of type string"
            ),
            "{err}"
        );
    }

    #[test]
    fn unknown_fields_are_listed_with_their_paths() {
        let body = json!({"metadata": {"name": "a", "bogus": 1, "generateName": ""}, "spec": {"foo": 1, "ports": [{"port": 80, "x": null, "y": 2}], "type": null}});
        let svc = decode::<Service>(service(), &body).unwrap();
        let unknown = unknown_fields(&body, &serde_json::to_value(&svc).unwrap());
        assert_eq!(
            unknown,
            [
                "unknown field \"metadata.bogus\"",
                "unknown field \"spec.foo\"",
                "unknown field \"spec.ports[0].y\""
            ]
        );
        assert_eq!(svc.spec.unwrap().ports.unwrap()[0].port, 80);
        let clean = json!({"metadata": {"labels": {"a": ""}}, "spec": {"ports": [{"port": 80}]}});
        let svc = decode::<Service>(service(), &clean).unwrap();
        assert!(unknown_fields(&clean, &serde_json::to_value(&svc).unwrap()).is_empty());
    }
}
