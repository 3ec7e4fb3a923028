//! The `/openapi/v2` document in protobuf (gnostic's `openapi.v2.Document`), the only form client-go's
//! `OpenAPISchema` asks for: kubectl needs it to parse before `explain` goes on to the v3 documents.
//! Only the members the generated schemas use are encoded; vendor extensions carry their value as JSON text,
//! which readers parse as YAML.

use serde_json::Value;

/// Protobuf wire writer: length-delimited fields, varints, doubles.
#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.varint(u64::from(field) << 3 | 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn string(&mut self, field: u32, s: &str) {
        self.bytes(field, s.as_bytes());
    }

    fn message(&mut self, field: u32, m: Msg) {
        self.bytes(field, &m.0);
    }

    fn int(&mut self, field: u32, v: u64) {
        self.varint(u64::from(field) << 3);
        self.varint(v);
    }

    fn double(&mut self, field: u32, v: f64) {
        self.varint(u64::from(field) << 3 | 1);
        self.0.extend_from_slice(&v.to_le_bytes());
    }
}

/// `Any { yaml = 2 }` holding a JSON value (JSON is YAML).
fn any(v: &Value) -> Msg {
    let mut m = Msg::default();
    m.string(2, &v.to_string());
    m
}

/// `NamedX { name = 1; value = 2 }`.
fn named(name: &str, value: Msg) -> Msg {
    let mut m = Msg::default();
    m.string(1, name);
    m.message(2, value);
    m
}

fn schema(s: &Value) -> Msg {
    let mut m = Msg::default();
    let Some(map) = s.as_object() else {
        return m;
    };
    for (k, v) in map {
        match (k.as_str(), v) {
            ("$ref", Value::String(r)) => m.string(1, r),
            ("format", Value::String(f)) => m.string(2, f),
            ("title", Value::String(t)) => m.string(3, t),
            ("description", Value::String(d)) => m.string(4, d),
            ("default", v) => m.message(5, any(v)),
            ("multipleOf", Value::Number(n)) => m.double(6, n.as_f64().unwrap_or_default()),
            ("maximum", Value::Number(n)) => m.double(7, n.as_f64().unwrap_or_default()),
            ("minimum", Value::Number(n)) => m.double(9, n.as_f64().unwrap_or_default()),
            ("maxLength", Value::Number(n)) => m.int(11, n.as_u64().unwrap_or_default()),
            ("minLength", Value::Number(n)) => m.int(12, n.as_u64().unwrap_or_default()),
            ("pattern", Value::String(p)) => m.string(13, p),
            ("maxItems", Value::Number(n)) => m.int(14, n.as_u64().unwrap_or_default()),
            ("minItems", Value::Number(n)) => m.int(15, n.as_u64().unwrap_or_default()),
            ("uniqueItems", Value::Bool(b)) => m.int(16, u64::from(*b)),
            ("required", Value::Array(names)) => {
                for n in names.iter().filter_map(Value::as_str) {
                    m.string(19, n);
                }
            }
            ("enum", Value::Array(values)) => {
                for e in values {
                    m.message(20, any(e));
                }
            }
            ("additionalProperties", v) => {
                let mut item = Msg::default();
                match v {
                    Value::Bool(b) => item.int(2, u64::from(*b)),
                    other => item.message(1, schema(other)),
                }
                m.message(21, item);
            }
            ("type", v) => {
                let mut item = Msg::default();
                match v {
                    Value::Array(types) => types
                        .iter()
                        .filter_map(Value::as_str)
                        .for_each(|t| item.string(1, t)),
                    other => item.string(1, other.as_str().unwrap_or_default()),
                }
                m.message(22, item);
            }
            ("items", v) => {
                let mut item = Msg::default();
                match v {
                    Value::Array(list) => list.iter().for_each(|s| item.message(1, schema(s))),
                    one => item.message(1, schema(one)),
                }
                m.message(23, item);
            }
            ("allOf", Value::Array(list)) => list.iter().for_each(|s| m.message(24, schema(s))),
            ("properties", Value::Object(props)) => {
                let mut p = Msg::default();
                for (name, s) in props {
                    p.message(1, named(name, schema(s)));
                }
                m.message(25, p);
            }
            ("readOnly", Value::Bool(b)) => m.int(27, u64::from(*b)),
            ("example", v) => m.message(30, any(v)),
            (x, v) if x.starts_with("x-") => m.message(31, named(x, any(v))),
            _ => {}
        }
    }
    m
}

/// Encodes a Swagger 2.0 JSON document's `swagger`, `info` and `definitions`.
pub(crate) fn encode(doc: &Value) -> Vec<u8> {
    let mut m = Msg::default();
    m.string(1, doc["swagger"].as_str().unwrap_or_default());
    let mut info = Msg::default();
    info.string(1, doc["info"]["title"].as_str().unwrap_or_default());
    info.string(2, doc["info"]["version"].as_str().unwrap_or_default());
    m.message(2, info);
    m.message(8, Msg::default());
    let mut defs = Msg::default();
    for (name, s) in doc["definitions"].as_object().into_iter().flatten() {
        defs.message(1, named(name, schema(s)));
    }
    m.message(9, defs);
    m.0
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn wire_format() {
        let doc = json!({"swagger": "2.0", "info": {"title": "K", "version": "1"},
                         "definitions": {"a": {"type": "object", "x-k": true}}});
        let bytes = super::encode(&doc);
        // swagger = "2.0"; info {title "K", version "1"}; paths {}
        assert_eq!(&bytes[..15], b"\x0a\x032.0\x12\x06\x0a\x01K\x12\x011\x42\x00");
        // definitions { NamedSchema { name "a", value { type { "object" }, x-k: Any { yaml "true" } } } }
        let schema = b"\xb2\x01\x08\x0a\x06object\xfa\x01\x0d\x0a\x03x-k\x12\x06\x12\x04true";
        let named = [b"\x0a\x01a\x12".as_slice(), &[schema.len() as u8], schema].concat();
        let defs = [b"\x0a".as_slice(), &[named.len() as u8], &named].concat();
        assert_eq!(
            &bytes[15..],
            [b"\x4a".as_slice(), &[defs.len() as u8], &defs].concat()
        );
    }
}
