//! Rendering of k8s-pb messages as Kubernetes JSON.
//!
//! Go marshals every non-pointer field, so a protobuf body carries `generateName: ""`, `minReadySeconds: 0`
//! and the like. The Go server cannot tell those from absent fields either, and its JSON drops them
//! (`omitempty`); so do we, except for pointer fields, whose zero is a value (`replicas: 0`), and fields
//! without `omitempty`, which Go always renders.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Map, Value};
use time::OffsetDateTime;

use k8s_pb::api::{authentication, authorization};
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{FieldsV1, MicroTime, Time};
use k8s_pb::apimachinery::pkg::runtime::RawExtension;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;

use super::malformed;
use crate::error::Error;

/// A value with a JSON form.
pub(super) trait ToJson {
    fn to_json(&self) -> Result<Value, Error>;
    /// Whether this is Go's zero value, which `omitempty` leaves out.
    fn is_zero(&self) -> bool {
        false
    }
}

/// How a field is rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// `omitempty` on a non-pointer field: the zero value is left out.
    Omit,
    /// A pointer, or a field without `omitempty`: the zero value is rendered.
    Keep,
    /// Go's `json:",inline"`: the message's fields are the parent's.
    Inline,
}

/// A message field as prost holds it: optional, repeated or a map.
pub(super) trait Field {
    fn put(&self, out: &mut Map<String, Value>, name: &str, mode: Mode) -> Result<(), Error>;
}

impl<T: ToJson> Field for Option<T> {
    fn put(&self, out: &mut Map<String, Value>, name: &str, mode: Mode) -> Result<(), Error> {
        match (self, mode) {
            (Some(v), Mode::Inline) => {
                if let Value::Object(fields) = v.to_json()? {
                    out.extend(fields);
                }
            }
            (Some(v), Mode::Keep) => {
                out.insert(name.into(), v.to_json()?);
            }
            (Some(v), Mode::Omit) if !v.is_zero() => {
                out.insert(name.into(), v.to_json()?);
            }
            _ => {}
        }
        Ok(())
    }
}

impl<T: ToJson> Field for Vec<T> {
    fn put(&self, out: &mut Map<String, Value>, name: &str, _: Mode) -> Result<(), Error> {
        if !self.is_empty() {
            let items = self.iter().map(ToJson::to_json).collect::<Result<_, _>>()?;
            out.insert(name.into(), Value::Array(items));
        }
        Ok(())
    }
}

impl<T: ToJson> Field for BTreeMap<String, T> {
    fn put(&self, out: &mut Map<String, Value>, name: &str, _: Mode) -> Result<(), Error> {
        if !self.is_empty() {
            let entries = self
                .iter()
                .map(|(k, v)| Ok((k.clone(), v.to_json()?)))
                .collect::<Result<_, Error>>()?;
            out.insert(name.into(), Value::Object(entries));
        }
        Ok(())
    }
}

impl ToJson for String {
    fn to_json(&self) -> Result<Value, Error> {
        Ok(Value::String(self.clone()))
    }
    fn is_zero(&self) -> bool {
        self.is_empty()
    }
}

macro_rules! numbers {
    ($($ty:ty),*) => {$(
        impl ToJson for $ty {
            fn to_json(&self) -> Result<Value, Error> {
                Ok(Value::from(*self))
            }
            fn is_zero(&self) -> bool {
                *self == <$ty>::default()
            }
        }
    )*};
}
numbers!(i32, i64, bool);

/// Bytes are base64 in JSON.
impl ToJson for Vec<u8> {
    fn to_json(&self) -> Result<Value, Error> {
        Ok(Value::String(B64.encode(self)))
    }
    fn is_zero(&self) -> bool {
        self.is_empty()
    }
}

impl ToJson for Quantity {
    fn to_json(&self) -> Result<Value, Error> {
        Ok(Value::String(self.string.clone().unwrap_or_default()))
    }
}

/// `type` 0 is an int, 1 a string.
impl ToJson for IntOrString {
    fn to_json(&self) -> Result<Value, Error> {
        match self.r#type.unwrap_or_default() {
            0 => Ok(Value::from(self.int_val.unwrap_or_default())),
            1 => Ok(Value::String(self.str_val.clone().unwrap_or_default())),
            other => Err(malformed(&format!("IntOrString has the unknown type {other}"))),
        }
    }
}

/// Go sends the zero time as an empty message and renders it `null`.
fn timestamp(seconds: Option<i64>, nanos: Option<i32>, micros: bool) -> Result<Value, Error> {
    if seconds.unwrap_or_default() == 0 && nanos.unwrap_or_default() == 0 {
        return Ok(Value::Null);
    }
    let nanos = u32::try_from(nanos.unwrap_or_default())
        .ok()
        .filter(|n| *n < 1_000_000_000)
        .ok_or_else(|| malformed("a timestamp has out-of-range nanoseconds"))?;
    let t = OffsetDateTime::from_unix_timestamp(seconds.unwrap_or_default())
        .map_err(|_| malformed("a timestamp is out of range"))?;
    let (year, month, day) = (t.year(), u8::from(t.month()), t.day());
    let (hour, minute, second) = (t.hour(), t.minute(), t.second());
    let fraction = if micros {
        format!(".{:06}", nanos / 1000)
    } else {
        String::new()
    };
    Ok(Value::String(format!(
        "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}{fraction}Z"
    )))
}

impl ToJson for Time {
    fn to_json(&self) -> Result<Value, Error> {
        timestamp(self.seconds, self.nanos, false)
    }
}

impl ToJson for MicroTime {
    fn to_json(&self) -> Result<Value, Error> {
        timestamp(self.seconds, self.nanos, true)
    }
}

/// Embedded JSON, as Go clients send it.
fn raw_json(raw: Option<&Vec<u8>>, what: &str) -> Result<Value, Error> {
    match raw {
        None => Ok(Value::Null),
        Some(bytes) => {
            serde_json::from_slice(bytes).map_err(|e| malformed(&format!("{what} is not JSON: {e}")))
        }
    }
}

impl ToJson for RawExtension {
    fn to_json(&self) -> Result<Value, Error> {
        raw_json(self.raw.as_ref(), "an embedded object")
    }
}

impl ToJson for FieldsV1 {
    fn to_json(&self) -> Result<Value, Error> {
        raw_json(self.raw.as_ref(), "fieldsV1")
    }
}

/// `ExtraValue` is a Go `[]string`: a list in JSON.
macro_rules! string_lists {
    ($($ty:ty),*) => {$(
        impl ToJson for $ty {
            fn to_json(&self) -> Result<Value, Error> {
                Ok(Value::from(self.items.clone()))
            }
        }
    )*};
}
string_lists!(authentication::v1::ExtraValue, authorization::v1::ExtraValue);

/// Implements [`ToJson`] for a message from its fields: `rust_name "jsonName" keep?`, where `keep`
/// marks fields whose zero value is rendered and `inline` embedded messages.
macro_rules! message {
    ($ty:path { $($field:ident $json:literal $($keep:ident)?),* $(,)? }) => {
        impl $crate::proto::json::ToJson for $ty {
            fn to_json(&self) -> Result<serde_json::Value, $crate::error::Error> {
                #[allow(unused_mut)]
                let mut out = serde_json::Map::new();
                $( $crate::proto::json::Field::put(&self.$field, &mut out, $json, message!(@mode $($keep)?))?; )*
                Ok(serde_json::Value::Object(out))
            }
        }
    };
    (@mode) => { $crate::proto::json::Mode::Omit };
    (@mode keep) => { $crate::proto::json::Mode::Keep };
    (@mode inline) => { $crate::proto::json::Mode::Inline };
}
pub(super) use message;
