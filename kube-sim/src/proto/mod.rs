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

/// Most length-delimited fields (messages, strings, map entries) a body may hold. prost allocates a whole
/// struct per message (a `Container` is about a kilobyte), so a body of 3 MiB made of empty 2-byte messages
/// would take gigabytes; this bounds that while leaving room for a 1 MiB ConfigMap with thousands of keys.
const MAX_LEN_FIELDS: usize = 100_000;
/// Deeper than any built-in kind nests (CronJob → ... → a label selector's values is 13).
const MAX_DEPTH: usize = 32;

fn malformed(what: &str) -> Error {
    Error::BadRequest(format!("the protobuf request body is malformed: {what}"))
}

/// Decodes an enveloped protobuf object into its JSON form (with apiVersion and kind).
pub(crate) fn decode(bytes: &[u8]) -> Result<Value, Error> {
    let body = bytes.strip_prefix(MAGIC).ok_or_else(|| {
        malformed("provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]")
    })?;
    let envelope = Unknown::decode(body).map_err(|e| malformed(&format!("envelope: {e}")))?;
    if envelope
        .content_encoding
        .as_deref()
        .is_some_and(|e| !e.is_empty())
    {
        return Err(malformed("content encodings are not supported"));
    }
    let type_meta = envelope.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    if kind.is_empty() {
        return Err(malformed("the envelope names no kind"));
    }
    let raw = envelope.raw.unwrap_or_default();
    let mut budget = MAX_LEN_FIELDS;
    count_len_fields(&raw, 0, &mut budget)?;
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

/// The fields of one message on the wire: (length-delimited payloads), or None if `bytes` is not a message.
fn len_fields(mut bytes: &[u8]) -> Option<Vec<&[u8]>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let tag = prost::encoding::decode_varint(&mut bytes).ok()?;
        match tag & 7 {
            0 => {
                prost::encoding::decode_varint(&mut bytes).ok()?;
            }
            1 => bytes = bytes.get(8..)?,
            2 => {
                let len = usize::try_from(prost::encoding::decode_varint(&mut bytes).ok()?).ok()?;
                out.push(bytes.get(..len)?);
                bytes = &bytes[len..];
            }
            5 => bytes = bytes.get(4..)?,
            _ => return None,
        }
    }
    Some(out)
}

/// Counts the length-delimited fields of `bytes` and of every payload that parses as a message (strings may
/// too: an over-count), failing once over the budget.
fn count_len_fields(bytes: &[u8], depth: usize, budget: &mut usize) -> Result<(), Error> {
    let Some(fields) = len_fields(bytes) else {
        return Ok(());
    };
    for payload in fields {
        *budget = budget.checked_sub(1).ok_or_else(|| {
            Error::BadRequest(format!(
                "the protobuf request body has more than {MAX_LEN_FIELDS} fields"
            ))
        })?;
        if depth < MAX_DEPTH {
            count_len_fields(payload, depth + 1, budget)?;
        }
    }
    Ok(())
}

/// Decodes `raw` as a `T` and renders it.
fn to_json<T: Message + Default + ToJson>(raw: &[u8]) -> Result<Value, Error> {
    T::decode(raw).map_err(|e| malformed(&e.to_string()))?.to_json()
}
