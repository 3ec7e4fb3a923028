//! Patch types: JSON merge (RFC 7386), JSON patch (RFC 6902), strategic merge, and server-side apply (whose
//! merge and field ownership live in `ssa`).

use serde_json::Value;

use super::error::Error;
use super::http::decode;
use super::strategic;

const ACCEPTED: &str = "application/json-patch+json, application/merge-patch+json, \
                        application/strategic-merge-patch+json, application/apply-patch+yaml";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchType {
    pub(crate) fn from_content_type(ct: &str) -> Result<PatchType, Error> {
        match ct {
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchType::Apply),
            _ => Err(Error::UnsupportedMediaType(ACCEPTED.into())),
        }
    }
}

/// Decodes a patch body of the given type.
pub(crate) fn decode_patch(ptype: PatchType, body: &[u8]) -> Result<Value, Error> {
    decode(
        body,
        if ptype == PatchType::Apply {
            "application/yaml"
        } else {
            "application/json"
        },
    )
}

/// Applies a decoded patch to the current object; `Err` is 422 for a patch that does not apply.
pub(crate) fn apply(
    kind: &str,
    name: &str,
    ptype: PatchType,
    current: &Value,
    patch: &Value,
) -> Result<Value, Error> {
    match ptype {
        PatchType::Merge => {
            if !patch.is_object() {
                return Err(Error::BadRequest("a merge patch must be a JSON object".into()));
            }
            let mut doc = current.clone();
            json_patch::merge(&mut doc, patch);
            Ok(doc)
        }
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| Error::BadRequest(format!("invalid JSON patch: {e}")))?;
            let mut doc = current.clone();
            json_patch::patch(&mut doc, &ops).map_err(|e| {
                Error::invalid(kind, name, "patch", format!("the JSON patch does not apply: {e}"))
            })?;
            Ok(doc)
        }
        PatchType::Strategic => strategic::merge(current, patch),
        PatchType::Apply => Err(Error::Internal(
            "server-side apply is merged by ssa::apply".into(),
        )),
    }
}
