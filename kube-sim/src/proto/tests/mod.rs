//! Round trips: k8s-pb values encoded as Go clients send them must decode to the JSON a real API server
//! would hold, for every decoded kind; malformed bodies are 400s, never panics.

mod core_cases;
mod group_cases;

use std::collections::{BTreeMap, BTreeSet};

use k8s_pb::api::{apps::v1 as apps, core::v1 as core, policy::v1 as policy};
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{RawExtension, TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{Value, json};

use super::{MAGIC, decode};
use crate::error::Error;

fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn map<V>(entries: &[(&str, V)]) -> BTreeMap<String, V>
where
    V: Clone,
{
    entries.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

/// The envelope as client-go writes it (empty contentEncoding and contentType included).
fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: s(api_version),
            kind: s(kind),
        }),
        raw: Some(raw),
        content_encoding: s(""),
        content_type: s(""),
    };
    [MAGIC, &unknown.encode_to_vec()].concat()
}

/// ObjectMeta as Go marshals it: every non-pointer field, so empty strings and a zero creationTimestamp.
fn meta(name: &str) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: s(name),
        generate_name: s(""),
        namespace: s(""),
        self_link: s(""),
        uid: s(""),
        resource_version: s(""),
        generation: Some(0),
        creation_timestamp: Some(meta::Time::default()),
        labels: map(&[("app", "web".to_string())]),
        ..Default::default()
    })
}

/// The JSON of [`meta`]: the zero time is `null`, as Go renders it.
fn meta_json(name: &str) -> Value {
    json!({"name": name, "creationTimestamp": null, "labels": {"app": "web"}})
}

fn int(v: i32) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(0),
        int_val: Some(v),
        str_val: s(""),
    })
}

fn text(v: &str) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(1),
        int_val: Some(0),
        str_val: s(v),
    })
}

fn quantity(v: &str) -> Quantity {
    Quantity { string: s(v) }
}

fn template() -> Option<core::PodTemplateSpec> {
    Some(core::PodTemplateSpec {
        metadata: meta(""),
        spec: Some(core::PodSpec {
            containers: vec![core::Container {
                name: s("web"),
                image: s("nginx:1.27"),
                working_dir: s(""),
                resources: Some(Default::default()),
                stdin: Some(false),
                ..Default::default()
            }],
            restart_policy: s(""),
            host_network: Some(false),
            ..Default::default()
        }),
    })
}

fn template_json() -> Value {
    json!({
        "metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "resources": {}}]}
    })
}

fn selector() -> Option<meta::LabelSelector> {
    Some(meta::LabelSelector {
        match_labels: map(&[("app", "web".to_string())]),
        ..Default::default()
    })
}
/// (apiVersion, kind, encoded object, its JSON without apiVersion and kind).
type Case = (&'static str, &'static str, Vec<u8>, Value);

/// Encodes `$msg` into a [`Case`].
macro_rules! case {
    ($api:literal, $kind:literal, $msg:expr, $json:expr) => {
        ($api, $kind, prost::Message::encode_to_vec(&$msg), $json)
    };
}
use case;

fn cases() -> Vec<Case> {
    [core_cases::core_cases(), group_cases::group_cases()].concat()
}

#[test]
fn every_decoded_kind_round_trips_to_kubernetes_json() {
    let cases = cases();
    // Kinds are unique among the decoded ones; a case under the wrong apiVersion fails to decode below.
    let covered: BTreeSet<_> = cases.iter().map(|c| c.1).collect();
    let decoded: BTreeSet<_> = super::codegen::ROOTS.iter().map(|r| r.1).collect();
    assert_eq!(covered, decoded, "every decoded kind has a case");
    for (api_version, kind, raw, mut want) in cases {
        want["apiVersion"] = json!(api_version);
        want["kind"] = json!(kind);
        let got = decode(&envelope(api_version, kind, raw)).unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(got, want, "{kind}");
    }
}

fn bad_request(body: &[u8]) -> String {
    match decode(body) {
        Err(Error::BadRequest(msg)) => msg,
        other => panic!("expected a 400, got {other:?}"),
    }
}

#[test]
fn malformed_bodies_are_bad_requests_that_say_why() {
    assert!(bad_request(b"{\"kind\":\"ConfigMap\"}").contains("expected prefix [107 56 115 0]"));
    assert!(bad_request(b"k8s\0\x0a\x05ab").contains("envelope"));
    assert!(bad_request(&envelope("v1", "", vec![])).contains("names no kind"));
    let not_utf8 = core::ConfigMap {
        data: map(&[("a", "x".to_string())]),
        ..Default::default()
    }
    .encode_to_vec()
    .iter()
    .map(|b| if *b == b'x' { 0xff } else { *b })
    .collect();
    assert!(bad_request(&envelope("v1", "ConfigMap", not_utf8)).contains("UTF-8"));
    let bad_time = core::Event {
        first_timestamp: Some(meta::Time {
            seconds: Some(i64::MAX),
            nanos: None,
        }),
        ..Default::default()
    };
    assert!(bad_request(&envelope("v1", "Event", bad_time.encode_to_vec())).contains("out of range"));
    let bad_int = policy::PodDisruptionBudgetSpec {
        min_available: Some(IntOrString {
            r#type: Some(7),
            ..Default::default()
        }),
        ..Default::default()
    };
    let pdb = policy::PodDisruptionBudget {
        spec: Some(bad_int),
        ..Default::default()
    };
    assert!(
        bad_request(&envelope("policy/v1", "PodDisruptionBudget", pdb.encode_to_vec()))
            .contains("IntOrString")
    );
    let bad_raw = apps::ControllerRevision {
        data: Some(RawExtension {
            raw: Some(b"{".to_vec()),
        }),
        ..Default::default()
    };
    assert!(
        bad_request(&envelope(
            "apps/v1",
            "ControllerRevision",
            bad_raw.encode_to_vec()
        ))
        .contains("not JSON")
    );
}

#[test]
fn kinds_without_a_decoder_are_unsupported_media_types() {
    let body = envelope("example.com/v1", "Widget", vec![]);
    assert!(matches!(decode(&body), Err(Error::UnsupportedMediaType(m)) if m.contains("Widget")));
}

#[test]
fn floods_of_tiny_messages_are_refused_before_decoding() {
    // 150k empty containers: 300 kB on the wire, each a ~1 kB struct once decoded.
    let spec = [0x12u8, 0x00].repeat(150_000);
    let mut pod = vec![0x12];
    prost::encoding::encode_varint(spec.len() as u64, &mut pod);
    pod.extend(spec);
    assert!(bad_request(&envelope("v1", "Pod", pod)).contains("more than 100000 fields"));
}

#[test]
fn truncated_and_corrupted_bodies_never_panic() {
    let (api_version, kind, raw, _) = cases()
        .into_iter()
        .find(|c| c.1 == "Deployment")
        .expect("a Deployment case");
    let body = envelope(api_version, kind, raw);
    for len in 0..body.len() {
        // A cut at a field boundary is a valid (smaller) message; anything else is a 400.
        if let Err(e) = decode(&body[..len]) {
            assert!(matches!(e, Error::BadRequest(_)), "{e:?}");
        }
    }
    let mut state = 0x2545_f491_u32;
    for _ in 0..2000 {
        let mut corrupt = body.clone();
        for _ in 0..3 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let at = MAGIC.len() + state as usize % (corrupt.len() - MAGIC.len());
            corrupt[at] = (state >> 8) as u8;
        }
        if let Err(e) = decode(&corrupt) {
            assert!(
                matches!(e, Error::BadRequest(_) | Error::UnsupportedMediaType(_)),
                "{e:?}"
            );
        }
    }
}
