//! The wire form of an [`Assignment`]: `ClusterLoadAssignment` bytes written straight from it.
//!
//! Building the prost message first cost more than everything else in an uncached EDS build: two
//! protobuf `Struct` maps of owned strings and an address `String` per endpoint, then prost
//! recomputing every nested length once per level above it. This writes the same message (it decodes
//! to exactly [`Assignment::to_proto`]) with each length computed once, bottom-up, and the metadata
//! written from the assignment's `&str`s, in a fixed order: equal assignments give equal bytes, so
//! the version is a hash of them. Owns: the byte layout. Does NOT: decide any field's value
//! ([`super::eds`] does).

use std::{fmt::Write as _, net::IpAddr};

use prost::encoding::{WireType, encoded_len_varint, key_len};

use super::eds::{Assignment, LbTarget, LocalityGroup};
use crate::model::{Health, TlsMode};

/// The `ClusterLoadAssignment` of `a`: its encoded length, and a writer that appends exactly that
/// many bytes.
pub(super) struct Encoded<'a> {
    a: &'a Assignment,
    /// Per locality group: its `LocalityLbEndpoints` length.
    groups: Vec<usize>,
    /// Per endpoint, in wire order: its nested lengths.
    endpoints: Vec<Lens>,
    len: usize,
}

/// The lengths inside one `LbEndpoint`, innermost first.
#[derive(Clone, Copy)]
struct Lens {
    /// `SocketAddress`.
    socket: usize,
    /// `Address` (holds the socket address).
    addr: usize,
    /// `Endpoint` (holds the address).
    endpoint: usize,
    /// The `envoy.transport_socket_match` and `istio` `Struct`s.
    tsm: usize,
    istio: usize,
    /// `Metadata`.
    metadata: usize,
    /// The whole `LbEndpoint`.
    lb: usize,
}

impl<'a> Encoded<'a> {
    /// Computes every length of `a`'s message once.
    pub(super) fn new(a: &'a Assignment) -> Self {
        let count = a.localities.iter().map(|g| g.endpoints.len()).sum();
        let mut endpoints = Vec::with_capacity(count);
        let mut groups = Vec::with_capacity(a.localities.len());
        let mut len = str_field(1, &a.cluster);
        for g in &a.localities {
            let mut group = locality_len(g);
            for t in &g.endpoints {
                let lens = Lens::of(t);
                group += field(2, lens.lb);
                endpoints.push(lens);
            }
            groups.push(group);
            len += field(2, group);
        }
        Self {
            a,
            groups,
            endpoints,
            len,
        }
    }

    /// The encoded length.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Appends the encoded message to `buf`.
    pub(super) fn write(&self, buf: &mut Vec<u8>) {
        let start = buf.len();
        buf.reserve(self.len);
        put_str(buf, 1, &self.a.cluster);
        let mut lens = self.endpoints.iter();
        for (g, &group) in self.a.localities.iter().zip(&self.groups) {
            put_len(buf, 2, group);
            let (region, zone, subzone) = (&*g.locality.region, &*g.locality.zone, &*g.locality.subzone);
            put_len(
                buf,
                1,
                str_field(1, region) + str_field(2, zone) + str_field(3, subzone),
            );
            put_str(buf, 1, region);
            put_str(buf, 2, zone);
            put_str(buf, 3, subzone);
            for (t, l) in g.endpoints.iter().zip(lens.by_ref()) {
                put_len(buf, 2, l.lb);
                write_lb(buf, t, l);
            }
            put_u32_value(buf, 3, g.weight);
            put_uint(buf, 5, g.priority);
        }
        debug_assert_eq!(buf.len() - start, self.len);
    }
}

/// `LocalityLbEndpoints` without its endpoints: locality, weight, priority.
fn locality_len(g: &LocalityGroup) -> usize {
    let l = &g.locality;
    let locality = str_field(1, &l.region) + str_field(2, &l.zone) + str_field(3, &l.subzone);
    field(1, locality) + u32_value_field(3, g.weight) + uint_field(5, g.priority)
}

impl Lens {
    fn of(t: &LbTarget) -> Self {
        // Formatting an address again when writing is cheaper than carrying its text here.
        let socket = field(2, Ip::new(t.address).len) + key_len(3) + encoded_len_varint(t.port.into());
        let addr = field(1, socket);
        let endpoint = field(1, addr);
        // istiod's `AppendLbEndpointMetadata`: the socket match only for Istio mTLS endpoints (the
        // cluster's catch-all match sends the rest plaintext), and the compressed telemetry string.
        let tsm = string_entry("tlsMode", ISTIO);
        let istio = string_entry("workload", &t.workload_meta);
        let metadata = match t.tls_mode {
            TlsMode::Istio => struct_entry(TSM, tsm),
            TlsMode::Disabled => 0,
        } + struct_entry(ISTIO, istio);
        let lb = field(1, endpoint)
            + uint_field(2, health(t.health))
            + field(3, metadata)
            + u32_value_field(4, t.weight);
        Self {
            socket,
            addr,
            endpoint,
            tsm,
            istio,
            metadata,
            lb,
        }
    }
}

/// One `LbEndpoint` (its header already written).
fn write_lb(buf: &mut Vec<u8>, t: &LbTarget, l: &Lens) {
    put_len(buf, 1, l.endpoint);
    put_len(buf, 1, l.addr);
    put_len(buf, 1, l.socket);
    put_str(buf, 2, Ip::new(t.address).as_str());
    key(buf, 3, WireType::Varint);
    varint(buf, t.port.into());
    put_uint(buf, 2, health(t.health));
    put_len(buf, 3, l.metadata);
    if t.tls_mode == TlsMode::Istio {
        put_struct_entry(buf, TSM, l.tsm);
        put_string_entry(buf, "tlsMode", ISTIO);
    }
    put_struct_entry(buf, ISTIO, l.istio);
    put_string_entry(buf, "workload", &t.workload_meta);
    put_u32_value(buf, 4, t.weight);
}

const TSM: &str = "envoy.transport_socket_match";
const ISTIO: &str = "istio";

/// `envoy.config.core.v3.HealthStatus`.
pub(super) fn health(h: Health) -> u32 {
    match h {
        Health::Healthy => 1,
        Health::Unhealthy => 2,
        Health::Draining => 3,
    }
}

/// A length-delimited field holding `len` bytes, header included.
fn field(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64) + len
}

/// A proto3 string field (omitted when empty).
fn str_field(tag: u32, s: &str) -> usize {
    if s.is_empty() { 0 } else { field(tag, s.len()) }
}

/// A proto3 uint32 field (omitted when 0).
fn uint_field(tag: u32, v: u32) -> usize {
    if v == 0 {
        0
    } else {
        key_len(tag) + encoded_len_varint(v.into())
    }
}

/// A `google.protobuf.UInt32Value` field (always present).
fn u32_value_field(tag: u32, v: u32) -> usize {
    field(tag, uint_field(1, v))
}

/// A `Struct.fields` entry `key: {string_value: value}` (a map entry: key 1, value 2).
fn string_entry(key: &str, value: &str) -> usize {
    let value = field(3, value.len());
    field(1, field(1, key.len()) + field(2, value))
}

/// A `Metadata.filter_metadata` entry `key: Struct` whose fields take `fields` bytes.
fn struct_entry(key: &str, fields: usize) -> usize {
    field(1, field(1, key.len()) + field(2, fields))
}

/// prost's `encode_varint` goes through `BufMut` a byte at a time; most values here fit in one byte.
#[inline]
fn varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

#[inline]
fn key(buf: &mut Vec<u8>, tag: u32, wire_type: WireType) {
    varint(buf, u64::from(tag << 3 | wire_type as u32));
}

#[inline]
fn put_len(buf: &mut Vec<u8>, tag: u32, len: usize) {
    key(buf, tag, WireType::LengthDelimited);
    varint(buf, len as u64);
}

#[inline]
fn put_str(buf: &mut Vec<u8>, tag: u32, s: &str) {
    if !s.is_empty() {
        put_len(buf, tag, s.len());
        buf.extend_from_slice(s.as_bytes());
    }
}

#[inline]
fn put_uint(buf: &mut Vec<u8>, tag: u32, v: u32) {
    if v != 0 {
        key(buf, tag, WireType::Varint);
        varint(buf, v.into());
    }
}

fn put_u32_value(buf: &mut Vec<u8>, tag: u32, v: u32) {
    put_len(buf, tag, uint_field(1, v));
    put_uint(buf, 1, v);
}

#[inline]
fn put_string_entry(buf: &mut Vec<u8>, key: &str, value: &str) {
    let v = field(3, value.len());
    put_len(buf, 1, field(1, key.len()) + field(2, v));
    put_len(buf, 1, key.len());
    buf.extend_from_slice(key.as_bytes());
    put_len(buf, 2, v);
    put_len(buf, 3, value.len());
    buf.extend_from_slice(value.as_bytes());
}

fn put_struct_entry(buf: &mut Vec<u8>, key: &str, fields: usize) {
    put_len(buf, 1, field(1, key.len()) + field(2, fields));
    put_len(buf, 1, key.len());
    buf.extend_from_slice(key.as_bytes());
    put_len(buf, 2, fields);
}

/// An address as `IpAddr`'s `Display` spells it, on the stack (the longest IPv6 form is 45 bytes).
struct Ip {
    text: [u8; 45],
    len: usize,
}

impl Ip {
    fn new(ip: IpAddr) -> Self {
        let mut out = Self {
            text: [0; 45],
            len: 0,
        };
        match ip {
            IpAddr::V4(v4) => {
                for (i, octet) in v4.octets().into_iter().enumerate() {
                    if i > 0 {
                        out.push(b'.');
                    }
                    if octet >= 100 {
                        out.push(b'0' + octet / 100);
                    }
                    if octet >= 10 {
                        out.push(b'0' + octet / 10 % 10);
                    }
                    out.push(b'0' + octet % 10);
                }
            }
            // Rare, and its zero compression has rules: `Display`'s own.
            IpAddr::V6(_) => {
                let _ = write!(out, "{ip}");
            }
        }
        out
    }

    fn push(&mut self, b: u8) {
        self.text[self.len] = b;
        self.len += 1;
    }

    fn as_str(&self) -> &str {
        // Only ASCII digits, dots, colons and hex letters are ever pushed.
        std::str::from_utf8(&self.text[..self.len]).unwrap_or_default()
    }
}

impl std::fmt::Write for Ip {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        self.text
            .get_mut(self.len..end)
            .ok_or(std::fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
#[path = "eds_wire_tests.rs"]
mod tests;
