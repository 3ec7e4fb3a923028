//! A cluster's `metadata.filter_metadata.istio` as istiod writes it (`AddConfigInfoMetadata`,
//! `AddSubsetToMetadata`, telemetry's `services`): the service, and the DestinationRule and subset
//! the cluster was built from (what `/debug/config_dump` shows).
//!
//! Owns: that metadata as a prost [`Metadata`] (`explain`, tests) and as the bytes CDS writes. The
//! bytes are written directly, keys in order: building the `HashMap`s and `String`s of the prost tree
//! for every cluster of a CDS miss and dropping them was the bulk of what a miss spent beyond the
//! encode. Does NOT: the rest of the cluster ([`super::cds`]).

use std::collections::HashMap;

use envoy_types::pb::{
    envoy::config::core::v3::Metadata,
    google::protobuf::{ListValue, Struct, Value, value::Kind},
};
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};

use crate::{istio::ObjectRef, model::Service};

/// What a cluster's Istio metadata says.
#[derive(Debug, Clone, Copy)]
pub struct IstioMeta<'a> {
    /// The service.
    pub service: &'a Service,
    /// The DestinationRule the cluster was built from.
    pub rule: Option<&'a ObjectRef>,
    /// The rule's subset.
    pub subset: Option<&'a str>,
    /// `alpn_override: "false"`: the cluster originates TLS itself (`SIMPLE` / `MUTUAL`), so Istio's ALPN
    /// filter must not put Istio's ALPN on it (istiod's `AddALPNOverrideToMetadata`).
    pub no_alpn_override: bool,
    /// `external: true`: the service is `MESH_EXTERNAL`.
    pub external: bool,
}

/// `config`'s value: `<CONFIG_PREFIX><namespace><CONFIG_MIDDLE><name>`.
const CONFIG_PREFIX: &str = "/apis/networking.istio.io/v1/namespaces/";
const CONFIG_MIDDLE: &str = "/destination-rule/";

/// A `Value` holding a bool: its key (field 4, varint) and the one-byte value.
const BOOL_VALUE_LEN: usize = 2;

/// `Cluster.metadata`'s field number.
pub(super) const CLUSTER_METADATA: u32 = 25;

impl IstioMeta<'_> {
    /// As a prost message.
    pub fn metadata(&self) -> Metadata {
        let s = |v: &str| Value {
            kind: Some(Kind::StringValue(v.to_owned())),
        };
        let service = self.service;
        let mut svc = HashMap::with_capacity(3);
        svc.insert("host".to_owned(), s(&service.hostname));
        svc.insert("name".to_owned(), s(&service.name));
        svc.insert("namespace".to_owned(), s(&service.namespace));
        let services = Value {
            kind: Some(Kind::ListValue(ListValue {
                values: vec![Value {
                    kind: Some(Kind::StructValue(Struct { fields: svc })),
                }],
            })),
        };
        let mut fields = HashMap::with_capacity(5);
        fields.insert("services".to_owned(), services);
        if self.no_alpn_override {
            fields.insert("alpn_override".to_owned(), s("false"));
        }
        if self.external {
            let yes = Value {
                kind: Some(Kind::BoolValue(true)),
            };
            fields.insert("external".to_owned(), yes);
        }
        if let Some(r) = self.rule {
            let config = format!("{CONFIG_PREFIX}{}{CONFIG_MIDDLE}{}", r.namespace, r.name);
            fields.insert("config".to_owned(), s(&config));
        }
        if let Some(subset) = self.subset {
            fields.insert("subset".to_owned(), s(subset));
        }
        Metadata {
            filter_metadata: [("istio".to_owned(), Struct { fields })].into(),
            ..Default::default()
        }
    }

    /// The length of `Cluster.metadata` (key included) as [`Self::encode_field`] writes it.
    pub fn field_len(&self) -> usize {
        ld_len(CLUSTER_METADATA, self.metadata_len())
    }

    /// Writes `Cluster.metadata` (key included): what prost writes for [`Self::metadata`], its map
    /// entries in key order (prost's follow `HashMap` order), so equal metadata gives equal bytes.
    pub fn encode_field(&self, buf: &mut Vec<u8>) {
        put_ld(CLUSTER_METADATA, self.metadata_len(), buf);
        // Metadata.filter_metadata = {"istio": Struct}.
        let istio = self.istio_len();
        put_ld(1, entry_len("istio", istio), buf);
        put_str(1, "istio", buf);
        put_ld(2, istio, buf);
        // Struct.fields, keys in order: alpn_override, config, external, services, subset.
        if self.no_alpn_override {
            put_string_entry("alpn_override", &["false"], buf);
        }
        if let Some(r) = self.rule {
            let parts = [CONFIG_PREFIX, &r.namespace, CONFIG_MIDDLE, &r.name];
            put_string_entry("config", &parts, buf);
        }
        if self.external {
            put_ld(1, entry_len("external", BOOL_VALUE_LEN), buf);
            put_str(1, "external", buf);
            put_ld(2, BOOL_VALUE_LEN, buf);
            encode_key(4, WireType::Varint, buf);
            encode_varint(1, buf);
        }
        let svc = self.service_struct_len();
        let list = ld_len(1, ld_len(5, svc));
        let value = ld_len(6, list);
        put_ld(1, entry_len("services", value), buf);
        put_str(1, "services", buf);
        put_ld(2, value, buf);
        put_ld(6, list, buf);
        put_ld(1, ld_len(5, svc), buf);
        put_ld(5, svc, buf);
        let service = self.service;
        put_string_entry("host", &[&service.hostname], buf);
        put_string_entry("name", &[&service.name], buf);
        put_string_entry("namespace", &[&service.namespace], buf);
        if let Some(subset) = self.subset {
            put_string_entry("subset", &[subset], buf);
        }
    }

    fn metadata_len(&self) -> usize {
        ld_len(1, entry_len("istio", self.istio_len()))
    }

    /// The `istio` `Struct`.
    fn istio_len(&self) -> usize {
        let config = self.rule.map_or(0, |r| {
            string_entry_len("config", &[CONFIG_PREFIX, &r.namespace, CONFIG_MIDDLE, &r.name])
        });
        let value = ld_len(6, ld_len(1, ld_len(5, self.service_struct_len())));
        let services = ld_len(1, entry_len("services", value));
        let subset = self.subset.map_or(0, |s| string_entry_len("subset", &[s]));
        let alpn = if self.no_alpn_override {
            string_entry_len("alpn_override", &["false"])
        } else {
            0
        };
        let external = if self.external {
            ld_len(1, entry_len("external", BOOL_VALUE_LEN))
        } else {
            0
        };
        alpn + config + external + services + subset
    }

    /// The `services` list's one `Struct`.
    fn service_struct_len(&self) -> usize {
        let s = self.service;
        string_entry_len("host", &[&s.hostname])
            + string_entry_len("name", &[&s.name])
            + string_entry_len("namespace", &[&s.namespace])
    }
}

/// A length-delimited field with `len` bytes of content, key and length included.
fn ld_len(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64) + len
}

fn put_ld(tag: u32, len: usize, buf: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(len as u64, buf);
}

fn put_str(tag: u32, s: &str, buf: &mut Vec<u8>) {
    put_ld(tag, s.len(), buf);
    buf.extend_from_slice(s.as_bytes());
}

/// A map entry's content: key (field 1) and a `value_len`-byte message (field 2).
fn entry_len(key: &str, value_len: usize) -> usize {
    ld_len(1, key.len()) + ld_len(2, value_len)
}

/// A `Struct.fields` entry (field 1) whose value is the string `parts` joined.
fn string_entry_len(key: &str, parts: &[&str]) -> usize {
    let s: usize = parts.iter().map(|p| p.len()).sum();
    ld_len(1, entry_len(key, ld_len(3, s)))
}

fn put_string_entry(key: &str, parts: &[&str], buf: &mut Vec<u8>) {
    let s: usize = parts.iter().map(|p| p.len()).sum();
    let value = ld_len(3, s);
    put_ld(1, entry_len(key, value), buf);
    put_str(1, key, buf);
    put_ld(2, value, buf);
    put_ld(3, s, buf);
    parts.iter().for_each(|p| buf.extend_from_slice(p.as_bytes()));
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use prost::Message;

    use super::*;
    use crate::{envoy::static_mesh::service, istio::Kind as ObjKind};

    #[test]
    fn the_bytes_are_what_prost_writes_in_key_order() {
        let svc = service(
            "reviews",
            "bookinfo",
            &[("http", 9080, crate::model::Protocol::Http)],
        );
        let rule = ObjectRef::new(ObjKind::DestinationRule, "bookinfo", "reviews");
        let cases = [
            (None, None, false, false),
            (Some(&rule), None, true, false),
            (Some(&rule), Some("v1"), false, true),
            (None, Some(""), true, true),
        ];
        for (rule, subset, no_alpn_override, external) in cases {
            let meta = IstioMeta {
                service: &svc,
                rule,
                subset,
                no_alpn_override,
                external,
            };
            let mut buf = Vec::new();
            meta.encode_field(&mut buf);
            assert_eq!(buf.len(), meta.field_len(), "{rule:?} {subset:?}");
            let want = Cluster {
                metadata: Some(meta.metadata()),
                ..Default::default()
            };
            assert_eq!(
                Cluster::decode(&buf[..]).expect("decodes"),
                want,
                "{rule:?} {subset:?}"
            );
            assert_eq!(buf.len(), want.encoded_len(), "prost's length");
        }
    }
}
