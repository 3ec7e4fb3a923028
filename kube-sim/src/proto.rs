//! Decoding of Kubernetes protobuf request bodies (the `k8s\0` + `runtime.Unknown` envelope) into JSON.
//!
//! kubectl's typed clients (`create token`, `auth whoami`, `create configmap|secret|serviceaccount|namespace`)
//! send protobuf and never fall back to JSON, so the kinds they send have schemas here; other kinds get 415.
//! Responses are always JSON, which those clients accept.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Map, Value, json};

use super::error::Error;

const MAGIC: &[u8] = b"k8s\0";

#[derive(Debug, Clone, Copy)]
enum Ty {
    Str,
    /// Bytes, rendered base64 as in JSON.
    Bytes,
    Int,
    Bool,
    Msg(&'static [Field]),
    MapStr,
    MapBytes,
}

/// One message field: (number, JSON name, type, repeated).
type Field = (u64, &'static str, Ty, bool);

const OBJECT_META: &[Field] = &[
    (1, "name", Ty::Str, false),
    (2, "generateName", Ty::Str, false),
    (3, "namespace", Ty::Str, false),
    (5, "uid", Ty::Str, false),
    (6, "resourceVersion", Ty::Str, false),
    (11, "labels", Ty::MapStr, false),
    (12, "annotations", Ty::MapStr, false),
    (14, "finalizers", Ty::Str, true),
];
const META: Field = (1, "metadata", Ty::Msg(OBJECT_META), false);
const NAME_REF: &[Field] = &[(1, "name", Ty::Str, false)];
const OBJECT_REF: &[Field] = &[
    (1, "kind", Ty::Str, false),
    (2, "namespace", Ty::Str, false),
    (3, "name", Ty::Str, false),
    (4, "uid", Ty::Str, false),
    (5, "apiVersion", Ty::Str, false),
];
const BOUND_REF: &[Field] = &[
    (1, "kind", Ty::Str, false),
    (2, "apiVersion", Ty::Str, false),
    (3, "name", Ty::Str, false),
    (4, "uid", Ty::Str, false),
];

const CONFIG_MAP: &[Field] = &[
    META,
    (2, "data", Ty::MapStr, false),
    (3, "binaryData", Ty::MapBytes, false),
    (4, "immutable", Ty::Bool, false),
];
const SECRET: &[Field] = &[
    META,
    (2, "data", Ty::MapBytes, false),
    (3, "type", Ty::Str, false),
    (4, "stringData", Ty::MapStr, false),
    (5, "immutable", Ty::Bool, false),
];
const SERVICE_ACCOUNT: &[Field] = &[
    META,
    (2, "secrets", Ty::Msg(OBJECT_REF), true),
    (3, "imagePullSecrets", Ty::Msg(NAME_REF), true),
    (4, "automountServiceAccountToken", Ty::Bool, false),
];
const NAMESPACE: &[Field] = &[
    META,
    (2, "spec", Ty::Msg(&[(1, "finalizers", Ty::Str, true)]), false),
];
const TOKEN_REQUEST: &[Field] = &[
    META,
    (
        2,
        "spec",
        Ty::Msg(&[
            (1, "audiences", Ty::Str, true),
            (3, "boundObjectRef", Ty::Msg(BOUND_REF), false),
            (4, "expirationSeconds", Ty::Int, false),
        ]),
        false,
    ),
];
const TOKEN_REVIEW: &[Field] = &[
    META,
    (
        2,
        "spec",
        Ty::Msg(&[(1, "token", Ty::Str, false), (2, "audiences", Ty::Str, true)]),
        false,
    ),
];
const SELF_SUBJECT_REVIEW: &[Field] = &[META];

fn schema(api_version: &str, kind: &str) -> Option<&'static [Field]> {
    Some(match (api_version, kind) {
        ("v1", "ConfigMap") => CONFIG_MAP,
        ("v1", "Secret") => SECRET,
        ("v1", "ServiceAccount") => SERVICE_ACCOUNT,
        ("v1", "Namespace") => NAMESPACE,
        ("authentication.k8s.io/v1", "TokenRequest") => TOKEN_REQUEST,
        ("authentication.k8s.io/v1", "TokenReview") => TOKEN_REVIEW,
        ("authentication.k8s.io/v1", "SelfSubjectReview") => SELF_SUBJECT_REVIEW,
        _ => return None,
    })
}

fn malformed(what: &str) -> Error {
    Error::BadRequest(format!("the protobuf request body is malformed: {what}"))
}

/// Decodes an enveloped protobuf object into its JSON form (with apiVersion and kind).
pub(crate) fn decode(bytes: &[u8]) -> Result<Value, Error> {
    let body = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| malformed("missing the k8s envelope"))?;
    let envelope = Reader(body).fields()?;
    let mut type_meta = (String::new(), String::new());
    let mut raw: &[u8] = &[];
    for (num, value) in envelope {
        match (num, value) {
            (1, Wire::Len(tm)) => {
                for (n, v) in Reader(tm).fields()? {
                    match (n, v) {
                        (1, Wire::Len(s)) => type_meta.0 = text(s)?,
                        (2, Wire::Len(s)) => type_meta.1 = text(s)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Len(r)) => raw = r,
            _ => {}
        }
    }
    let (api_version, kind) = type_meta;
    let fields = schema(&api_version, &kind).ok_or_else(|| {
        Error::UnsupportedMediaType(format!(
            "application/json, application/yaml (protobuf is not served for {kind})"
        ))
    })?;
    let mut obj = message(raw, fields)?;
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    Ok(Value::Object(obj))
}

fn text(b: &[u8]) -> Result<String, Error> {
    String::from_utf8(b.to_vec()).map_err(|_| malformed("a string is not UTF-8"))
}

fn message(bytes: &[u8], schema: &[Field]) -> Result<Map<String, Value>, Error> {
    let mut out = Map::new();
    for (num, wire) in Reader(bytes).fields()? {
        let Some(&(_, name, ty, repeated)) = schema.iter().find(|f| f.0 == num) else {
            continue;
        };
        let value = match (ty, wire) {
            (Ty::Str, Wire::Len(b)) => json!(text(b)?),
            (Ty::Bytes, Wire::Len(b)) => json!(B64.encode(b)),
            (Ty::Int, Wire::Varint(v)) => json!(v as i64),
            (Ty::Bool, Wire::Varint(v)) => json!(v != 0),
            (Ty::Msg(inner), Wire::Len(b)) => Value::Object(message(b, inner)?),
            (Ty::MapStr | Ty::MapBytes, Wire::Len(b)) => {
                let entry = message(
                    b,
                    &[
                        (1, "k", Ty::Str, false),
                        (
                            2,
                            "v",
                            if matches!(ty, Ty::MapStr) {
                                Ty::Str
                            } else {
                                Ty::Bytes
                            },
                            false,
                        ),
                    ],
                )?;
                let key = entry
                    .get("k")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let map = out.entry(name).or_insert_with(|| json!({}));
                map[key] = entry.get("v").cloned().unwrap_or_else(|| json!(""));
                continue;
            }
            _ => return Err(malformed(&format!("field {name} has the wrong wire type"))),
        };
        if repeated {
            if let Value::Array(list) = out.entry(name).or_insert_with(|| json!([])) {
                list.push(value);
            }
        } else {
            out.insert(name.into(), value);
        }
    }
    Ok(out)
}

enum Wire<'a> {
    Varint(u64),
    Len(&'a [u8]),
    Fixed,
}

/// A protobuf wire-format reader over one message's bytes.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, Error> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self
                .0
                .split_first()
                .ok_or_else(|| malformed("truncated varint"))?;
            self.0 = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(malformed("varint too long"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if n > self.0.len() {
            return Err(malformed("truncated field"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn fields(mut self) -> Result<Vec<(u64, Wire<'a>)>, Error> {
        let mut out = Vec::new();
        while !self.0.is_empty() {
            let tag = self.varint()?;
            let wire = match tag & 7 {
                0 => Wire::Varint(self.varint()?),
                1 => self.take(8).map(|_| Wire::Fixed)?,
                2 => {
                    let len = usize::try_from(self.varint()?).map_err(|_| malformed("length overflow"))?;
                    Wire::Len(self.take(len)?)
                }
                5 => self.take(4).map(|_| Wire::Fixed)?,
                other => return Err(malformed(&format!("unsupported wire type {other}"))),
            };
            out.push((tag >> 3, wire));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(num: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![(num << 3 | 2) as u8, payload.len() as u8];
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn decodes_an_enveloped_token_request() {
        let meta = field(1, b"bot");
        let spec = [field(1, b"istio-ca"), vec![4 << 3, 0x90, 0x1c]].concat(); // expirationSeconds = 3600
        let raw = [field(1, &meta), field(2, &spec)].concat();
        let type_meta = [field(1, b"authentication.k8s.io/v1"), field(2, b"TokenRequest")].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(v["metadata"]["name"], "bot");
        assert_eq!(
            v["spec"],
            json!({"audiences": ["istio-ca"], "expirationSeconds": 3600})
        );
        assert_eq!(v["kind"], "TokenRequest");
    }

    #[test]
    fn rejects_garbage_without_panicking() {
        for body in [&b"k8s\0\xff\xff"[..], b"k8s\0\x0a\x05ab", b"nope"] {
            assert!(decode(body).is_err());
        }
    }
}
