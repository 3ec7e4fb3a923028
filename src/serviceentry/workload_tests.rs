//! WorkloadEntry → instance, table-driven: spec JSON in, one summary line out.

use serde_json::json;

use super::*;
use crate::{config::MeshNetworks, model::WorkloadKind};

fn ctx() -> Context {
    let nets =
        MeshNetworks::parse("networks:\n  vm-net: {endpoints: [{fromCidr: 192.168.0.0/16}]}\n").unwrap();
    Context {
        cluster: "cluster1".into(),
        trust_domain: "td".into(),
        networks: NetworkResolver::new(&nets, &"cluster1".into()),
    }
}

fn summary(i: &Instance) -> String {
    format!(
        "{} net={} loc={} sa={} tls={:?} w={} app={} ports={:?}",
        i.address,
        i.network.as_deref().unwrap_or("-"),
        i.locality,
        i.service_account.as_deref().unwrap_or("-"),
        i.tls_mode,
        i.weight,
        i.labels.get("app").map_or("-", String::as_str),
        i.ports,
    )
}

#[test]
fn workload_entries_become_instances_like_istiod() {
    let cases = [
        (
            "every field",
            json!({"address": "10.202.0.5", "ports": {"http": 8080}, "labels": {"app": "hello"},
                   "network": "network2", "locality": "eu-west1/eu-west1-a/rack1", "weight": 3,
                   "serviceAccount": "vm"}),
            json!({}),
            Some(
                "10.202.0.5 net=network2 loc=eu-west1/eu-west1-a/rack1 sa=spiffe://td/ns/ns/sa/vm tls=Istio w=3 app=hello ports={\"http\": 8080}",
            ),
        ),
        (
            "metadata labels win over spec labels; tlsMode label wins over the identity",
            json!({"address": "10.0.0.1", "labels": {"app": "spec"}, "serviceAccount": "vm"}),
            json!({"app": "meta", "security.istio.io/tlsMode": "disabled"}),
            Some("10.0.0.1 net=- loc= sa=spiffe://td/ns/ns/sa/vm tls=Disabled w=1 app=meta ports={}"),
        ),
        (
            "no identity, no label: plaintext; weight 0 is 1",
            json!({"address": "10.0.0.2", "weight": 0}),
            json!({}),
            Some("10.0.0.2 net=- loc= sa=- tls=Disabled w=1 app=- ports={}"),
        ),
        (
            "tlsMode label alone",
            json!({"address": "10.0.0.3", "labels": {"security.istio.io/tlsMode": "istio"}}),
            json!({}),
            Some("10.0.0.3 net=- loc= sa=- tls=Istio w=1 app=- ports={}"),
        ),
        (
            "network: label, then meshNetworks fromCidr; locality from the istio-locality label",
            json!({"address": "192.168.1.1", "labels": {"istio-locality": "r.z"}}),
            json!({}),
            Some("192.168.1.1 net=vm-net loc=r/z/ sa=- tls=Disabled w=1 app=- ports={}"),
        ),
        (
            "network label",
            json!({"address": "192.168.1.2", "labels": {"topology.istio.io/network": "n9"}}),
            json!({}),
            Some("192.168.1.2 net=n9 loc= sa=- tls=Disabled w=1 app=- ports={}"),
        ),
        (
            "DNS name: not routable by IP here",
            json!({"address": "vm.example.com"}),
            json!({}),
            None,
        ),
        (
            "unix socket",
            json!({"address": "unix:///var/run/a.sock"}),
            json!({}),
            None,
        ),
        (
            "gateway-only entry without an address",
            json!({"network": "network2"}),
            json!({}),
            None,
        ),
    ];
    for (name, spec, meta, want) in cases {
        let we: WorkloadEntry = serde_json::from_value(spec).unwrap();
        let meta: std::collections::BTreeMap<String, String> = serde_json::from_value(meta).unwrap();
        let w = (WorkloadKind::WorkloadEntry, "vm-1".into());
        let got = instance(&we, Some(&meta), "ns", w, &ctx());
        assert_eq!(got.as_ref().map(summary).as_deref(), want, "{name}");
    }
}

#[test]
fn selection_needs_every_selector_label_and_an_empty_selector_selects_nothing() {
    let we: WorkloadEntry =
        serde_json::from_value(json!({"address": "10.0.0.1", "labels": {"app": "a", "v": "1"}})).unwrap();
    let w = (WorkloadKind::WorkloadEntry, "vm".into());
    let i = instance(&we, None, "ns", w, &ctx()).unwrap();
    let sel = |v: serde_json::Value| -> std::collections::BTreeMap<String, String> {
        serde_json::from_value(v).unwrap()
    };
    assert!(i.selected_by(&sel(json!({"app": "a"}))));
    assert!(i.selected_by(&sel(json!({"app": "a", "v": "1"}))));
    assert!(!i.selected_by(&sel(json!({"app": "a", "v": "2"}))));
    assert!(!i.selected_by(&sel(json!({}))));
}

#[test]
fn telemetry_names_the_entry_as_istiod() {
    let cases = [
        (
            WorkloadKind::WorkloadEntry,
            json!({"app": "hello", "version": "vm"}),
            "vm-1;ns;hello;vm;cluster1",
        ),
        (
            WorkloadKind::WorkloadEntry,
            json!({"service.istio.io/workload-name": "hello-vms"}),
            "hello-vms;ns;hello-vms;;cluster1",
        ),
        // An inline endpoint: no workload, no namespace (istiod's empty config key).
        (
            WorkloadKind::ServiceEntry,
            json!({"app": "hello"}),
            ";;hello;;cluster1",
        ),
    ];
    for (kind, labels, want) in cases {
        let we: WorkloadEntry =
            serde_json::from_value(json!({"address": "10.0.0.1", "labels": labels})).unwrap();
        let i = instance(&we, None, "ns", (kind, "vm-1".into()), &ctx()).unwrap();
        assert_eq!(&*i.workload_meta, want, "{kind:?}");
        let ep = i.endpoint(Arc::from([]), &"cluster1".into());
        assert!(Arc::ptr_eq(&ep.workload_meta, &i.workload_meta), "built once");
    }
}
