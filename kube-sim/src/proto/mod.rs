//! Kubernetes protobuf request bodies (the `k8s\0` magic + `runtime.Unknown` envelope), decoded into
//! k8s-pb's message types and rendered as the JSON the rest of the simulator takes.
//!
//! kubectl's typed clients (`create deployment|role|secret|...`, `create token`, `auth whoami|can-i`) send
//! protobuf and never fall back to JSON. Responses stay JSON, which those clients accept. Kinds without a
//! decoder get 415 like a server that does not serve protobuf for them.

#[cfg(test)]
mod codegen;
#[rustfmt::skip]
mod generated;
mod json;
#[cfg(test)]
mod tests;

use prost::Message;
use serde_json::{Value, json};

use k8s_pb::apimachinery::pkg::runtime::Unknown;

use crate::error::Error;
use json::ToJson;

const MAGIC: &[u8] = b"k8s\0";

fn malformed(what: &str) -> Error {
    Error::BadRequest(format!("the protobuf request body is malformed: {what}"))
}

/// Decodes an enveloped protobuf object into its JSON form (with apiVersion and kind).
pub(crate) fn decode(bytes: &[u8]) -> Result<Value, Error> {
    let body = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| malformed("missing the k8s envelope"))?;
    let envelope = Unknown::decode(body).map_err(|e| malformed(&format!("envelope: {e}")))?;
    if envelope.content_encoding.as_deref().is_some_and(|e| !e.is_empty()) {
        return Err(malformed("content encodings are not supported"));
    }
    let type_meta = envelope.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    if kind.is_empty() {
        return Err(malformed("the envelope names no kind"));
    }
    let raw = envelope.raw.unwrap_or_default();
    let mut obj = generated::decode(&api_version, &kind, &raw).ok_or_else(|| {
        Error::UnsupportedMediaType(format!(
            "application/json, application/yaml (protobuf is not served for {kind})"
        ))
    })??;
    if let Value::Object(fields) = &mut obj {
        fields.insert("apiVersion".into(), json!(api_version));
        fields.insert("kind".into(), json!(kind));
    }
    Ok(obj)
}

/// Decodes `raw` as a `T` and renders it.
fn to_json<T: Message + Default + ToJson>(raw: &[u8]) -> Result<Value, Error> {
    T::decode(raw)
        .map_err(|e| malformed(&e.to_string()))?
        .to_json()
}
