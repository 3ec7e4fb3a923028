//! Table tests of scope building: Sidecar selection, each egress host form, exportTo, the copy seen
//! of a host several namespaces define, VirtualService imports, port trimming.

use std::{collections::BTreeSet, sync::Arc};

use serde_json::json;

use super::*;
use crate::{
    config::mesh::MeshConfig,
    envoy::static_mesh::service,
    istio::{ObjectMeta, Source},
    model::{ExportTo, Origin, Protocol},
};

fn settings(mode: OutboundMode) -> Settings {
    let mut mesh = MeshConfig::default();
    mesh.outbound_traffic_policy.mode = mode;
    Settings::new(Arc::new(mesh), "cluster.local")
}

fn object(kind: Kind, ns: &str, name: &str, created: &str, spec: serde_json::Value) -> Arc<Config> {
    let meta = ObjectMeta {
        namespace: ns.into(),
        name: name.into(),
        labels: Default::default(),
        annotations: Default::default(),
        revision: "1".into(),
        creation_timestamp: Some(created.into()),
        source: Source::File {
            path: "test.yaml".into(),
            index: 0,
        },
    };
    Arc::new(crate::istio::parse(kind, meta, &spec).expect("valid").0)
}

fn sidecar(ns: &str, name: &str, created: &str, spec: serde_json::Value) -> Arc<Config> {
    object(Kind::Sidecar, ns, name, created, spec)
}

fn egress(hosts: &[&str]) -> serde_json::Value {
    json!({"egress": [{"hosts": hosts}]})
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `name.ns` with one HTTP port 80 (and 9090 when `two_ports`).
fn svc(name: &str, ns: &str) -> Service {
    service(
        name,
        ns,
        &[("http", 80, Protocol::Http), ("metrics", 9090, Protocol::Http)],
    )
}

fn external(host: &str, ns: &str) -> Service {
    let mut s = svc("x", ns);
    s.hostname = host.into();
    s.origin = Origin::ServiceEntry {
        namespace: ns.into(),
        names: vec!["se".into()],
    };
    s
}

fn mesh_services() -> Vec<Service> {
    vec![
        svc("reviews", "a"),
        svc("ratings", "a"),
        svc("details", "b"),
        svc("istiod", "istio-system"),
        external("api.example.com", "b"),
        external("www.other.org", "b"),
    ]
}

fn build(ns: &str, sc: Option<&Arc<Config>>, vss: &[Arc<Config>], services: &[Service]) -> SidecarScope {
    let l = Labels::new();
    let proxy = ProxyRef {
        namespace: ns,
        labels: &l,
        router: false,
    };
    SidecarScope::build(
        proxy,
        sc.map(|c| &**c),
        vss,
        services,
        &settings(OutboundMode::AllowAny),
    )
}

fn seen(scope: &SidecarScope, services: &[Service]) -> BTreeSet<String> {
    services
        .iter()
        .filter(|s| scope.sees_host(&s.hostname))
        .map(|s| s.hostname.to_string())
        .collect()
}

fn set(hosts: &[&str]) -> BTreeSet<String> {
    hosts.iter().map(|h| h.to_string()).collect()
}

#[test]
fn each_egress_host_form_imports_what_istiod_imports() {
    let services = mesh_services();
    let (reviews, ratings, details, istiod, api, www) = (
        "reviews.a.svc.cluster.local",
        "ratings.a.svc.cluster.local",
        "details.b.svc.cluster.local",
        "istiod.istio-system.svc.cluster.local",
        "api.example.com",
        "www.other.org",
    );
    let cases: [(&[&str], &[&str]); 8] = [
        (&["a/reviews.a.svc.cluster.local"], &[reviews]),
        (&["./*"], &[reviews, ratings]),
        (&["*/*"], &[reviews, ratings, details, istiod, api, www]),
        (&["istio-system/*"], &[istiod]),
        (&["~/*"], &[]),
        (&["*/*.example.com"], &[api]),
        (
            &["b/*.example.com", "./ratings.a.svc.cluster.local"],
            &[ratings, api],
        ),
        (&["a/details.b.svc.cluster.local"], &[]),
    ];
    for (hosts, want) in cases {
        let sc = sidecar("a", "default", "2024-01-01T00:00:00Z", egress(hosts));
        let scope = build("a", Some(&sc), &[], &services);
        assert_eq!(seen(&scope, &services), set(want), "{hosts:?}");
        assert_eq!(scope.sidecar, Some(sc.object_ref()));
    }
    let all = build("a", None, &[], &services);
    assert_eq!(
        seen(&all, &services).len(),
        services.len(),
        "no Sidecar: everything"
    );
    assert_eq!(&**all.id(), "A*", "nothing hidden: one id for every such proxy");
}

#[test]
fn export_to_hides_services_with_and_without_a_sidecar() {
    let mut private = svc("secret", "b");
    private.export_to = ExportTo::Namespaces(["b".into()].into());
    let mut hidden = svc("gone", "b");
    hidden.export_to = ExportTo::Hidden;
    let mut to_a = svc("shared", "b");
    to_a.export_to = ExportTo::Namespaces(["a".into()].into());
    let services = vec![private, hidden, to_a, svc("public", "b")];
    let everything = sidecar("a", "default", "2024-01-01T00:00:00Z", egress(&["*/*"]));
    let cases = [
        (
            "a",
            None,
            vec!["shared.b.svc.cluster.local", "public.b.svc.cluster.local"],
        ),
        (
            "a",
            Some(&everything),
            vec!["shared.b.svc.cluster.local", "public.b.svc.cluster.local"],
        ),
        (
            "b",
            None,
            vec!["secret.b.svc.cluster.local", "public.b.svc.cluster.local"],
        ),
        ("c", None, vec!["public.b.svc.cluster.local"]),
    ];
    for (ns, sc, want) in cases {
        let scope = build(ns, sc, &[], &services);
        assert_eq!(seen(&scope, &services), set(&want), "{ns} {sc:?}");
    }
    let scope = build("c", None, &[], &services);
    assert_eq!(
        scope.hidden("secret.b.svc.cluster.local", &services[..1]),
        Some(Hidden::NotExported)
    );
    assert_ne!(&**scope.id(), "A*", "hidden hosts make the scope distinct");
}

#[test]
fn sidecar_selection_follows_istiods_precedence() {
    let old_default = sidecar("a", "old", "2024-01-01T00:00:00Z", egress(&["./*"]));
    let new_default = sidecar("a", "new", "2024-02-01T00:00:00Z", egress(&["*/*"]));
    let selecting = |name: &str, created: &str, app: &str| {
        sidecar(
            "a",
            name,
            created,
            json!({"workloadSelector": {"labels": {"app": app}}, "egress": [{"hosts": ["./*"]}]}),
        )
    };
    let reviews_old = selecting("reviews-old", "2024-01-01T00:00:00Z", "reviews");
    let reviews_new = selecting("reviews-new", "2023-01-01T00:00:00Z", "reviews");
    let root = sidecar("istio-system", "root", "2024-01-01T00:00:00Z", egress(&["./*"]));
    let index = SidecarIndex::build([&new_default, &old_default, &reviews_old, &reviews_new, &root]);
    let cases = [
        ("a", labels(&[("app", "reviews"), ("v", "1")]), Some(&reviews_new)),
        ("a", labels(&[("app", "ratings")]), Some(&old_default)),
        ("a", labels(&[]), Some(&old_default)),
        ("b", labels(&[("app", "reviews")]), Some(&root)),
    ];
    for (ns, l, want) in cases {
        let got = index.select(ns, &l, "istio-system");
        assert_eq!(
            got.map(|c| c.object_ref()),
            want.map(|c| c.object_ref()),
            "{ns} {l:?}"
        );
    }
    assert!(
        SidecarIndex::build([&old_default])
            .select("b", &labels(&[]), "istio-system")
            .is_none()
    );
}

#[test]
fn a_root_namespace_sidecar_means_the_proxys_namespace_by_dot() {
    let services = mesh_services();
    let root = sidecar("istio-system", "root", "2024-01-01T00:00:00Z", egress(&["./*"]));
    let scopes = [(
        "a",
        vec!["reviews.a.svc.cluster.local", "ratings.a.svc.cluster.local"],
    )];
    for (ns, want) in scopes {
        assert_eq!(
            seen(&build(ns, Some(&root), &[], &services), &services),
            set(&want)
        );
    }
    let b = build("b", Some(&root), &[], &services);
    assert_eq!(
        seen(&b, &services),
        set(&["details.b.svc.cluster.local", "api.example.com", "www.other.org"])
    );
}

#[test]
fn routers_ignore_sidecars() {
    let services = mesh_services();
    let sc = sidecar("a", "default", "2024-01-01T00:00:00Z", egress(&["~/*"]));
    let l = Labels::new();
    let proxy = ProxyRef {
        namespace: "a",
        labels: &l,
        router: true,
    };
    let s = settings(OutboundMode::AllowAny);
    let scope = SidecarScope::build(proxy, Some(&sc), [], &services, &s);
    assert_eq!(scope.sidecar, None);
    assert_eq!(seen(&scope, &services).len(), services.len());
}

#[test]
fn one_copy_per_host_own_namespace_then_kubernetes_then_first() {
    let host = "api.example.com";
    let services = vec![external(host, "a"), external(host, "c"), {
        let mut k = svc("api", "d");
        k.hostname = host.into();
        k
    }];
    let everything = sidecar("a", "default", "2024-01-01T00:00:00Z", egress(&["*/*"]));
    let only_c = sidecar("a", "default", "2024-01-01T00:00:00Z", egress(&["c/*"]));
    let cases = [
        ("a", None, Some("a")),
        ("b", None, Some("d")),
        ("a", Some(&everything), Some("a")),
        ("a", Some(&only_c), Some("c")),
    ];
    for (ns, sc, want) in cases {
        let scope = build(ns, sc, &[], &services);
        assert_eq!(scope.chosen_namespace(host).map(|n| &**n), want, "{ns} {sc:?}");
        assert!(
            !scope.services_id().is_empty(),
            "the copy is part of the CDS/EDS view"
        );
    }
    let single = mesh_services();
    assert!(build("a", None, &[], &single).services_id().is_empty());
}

#[test]
fn virtual_service_destinations_are_imported_trimmed_to_their_ports() {
    let services = mesh_services();
    let sc = sidecar("a", "default", "2024-01-01T00:00:00Z", egress(&["./*"]));
    let vs = |ns: &str, name: &str, host: &str, dest: &str, port: Option<u32>| {
        let mut d = json!({"host": dest});
        if let Some(p) = port {
            d["port"] = json!({"number": p});
        }
        object(
            Kind::VirtualService,
            ns,
            name,
            "2024-01-01T00:00:00Z",
            json!({"hosts": [host], "http": [{"route": [{"destination": d}]}]}),
        )
    };
    let selected = vs(
        "a",
        "to-details",
        "reviews",
        "details.b.svc.cluster.local",
        Some(9090),
    );
    let other_ns = vs(
        "b",
        "elsewhere",
        "details",
        "istiod.istio-system.svc.cluster.local",
        None,
    );
    let scope = build("a", Some(&sc), &[selected.clone(), other_ns.clone()], &services);
    assert_eq!(
        seen(&scope, &services),
        set(&[
            "reviews.a.svc.cluster.local",
            "ratings.a.svc.cluster.local",
            "details.b.svc.cluster.local"
        ])
    );
    let details = scope.trimmed("details.b.svc.cluster.local").expect("trimmed");
    assert_eq!(details.ports.iter().map(|p| p.port).collect::<Vec<_>>(), [9090]);
    let imports = scope.imports().expect("a Sidecar lists its imports");
    assert_eq!(
        imports["details.b.svc.cluster.local"].via,
        Via::VirtualService(selected.object_ref())
    );
    assert!(scope.depends_on(&selected.object_ref()));
    assert!(!scope.depends_on(&other_ns.object_ref()), "not selected: no push");
    assert!(scope.depends_on(&sc.object_ref()));
    let default = build("a", None, &[selected.clone(), other_ns.clone()], &services);
    assert!(
        default.depends_on(&other_ns.object_ref()),
        "default scope: every visible VirtualService"
    );
    // A selected root depends on the delegates it names: their routes are merged into it.
    let root = object(
        Kind::VirtualService,
        "a",
        "root",
        "2024-01-01T00:00:00Z",
        json!({"hosts": ["reviews"], "http": [{"delegate": {"name": "d1", "namespace": "b"}}]}),
    );
    let scope = build("a", Some(&sc), &[root], &services);
    assert!(scope.depends_on(&ObjectRef::new(Kind::VirtualService, "b", "d1")));
}

#[test]
fn port_bound_listeners_import_only_services_with_that_port() {
    let mut services = mesh_services();
    services.push(service("grpc", "a", &[("grpc", 7070, Protocol::Grpc)]));
    let sc = sidecar(
        "a",
        "default",
        "2024-01-01T00:00:00Z",
        json!({"egress": [
            {"port": {"number": 9090, "protocol": "HTTP", "name": "m"}, "hosts": ["./*"]},
            {"hosts": ["./ratings.a.svc.cluster.local"]},
        ]}),
    );
    let scope = build("a", Some(&sc), &[], &services);
    assert_eq!(
        seen(&scope, &services),
        set(&["reviews.a.svc.cluster.local", "ratings.a.svc.cluster.local"])
    );
    let ports = |h: &str| {
        scope
            .trimmed(h)
            .map(|s| s.ports.iter().map(|p| p.port).collect::<Vec<_>>())
    };
    assert_eq!(ports("reviews.a.svc.cluster.local"), Some(vec![9090]));
    assert_eq!(
        ports("ratings.a.svc.cluster.local"),
        None,
        "the port-less listener imports every port"
    );
}

#[test]
fn outbound_policy_is_the_sidecars_else_the_mesh_configs() {
    let services = mesh_services();
    let l = Labels::new();
    let proxy = ProxyRef {
        namespace: "a",
        labels: &l,
        router: false,
    };
    let registry_only = sidecar(
        "a",
        "default",
        "2024-01-01T00:00:00Z",
        json!({"outboundTrafficPolicy": {"mode": "REGISTRY_ONLY"}}),
    );
    let cases = [
        (None, OutboundMode::AllowAny, OutboundMode::AllowAny),
        (None, OutboundMode::RegistryOnly, OutboundMode::RegistryOnly),
        (
            Some(&registry_only),
            OutboundMode::AllowAny,
            OutboundMode::RegistryOnly,
        ),
    ];
    for (sc, mesh, want) in cases {
        let scope = SidecarScope::build(proxy, sc.map(|c| &**c), [], &services, &settings(mesh));
        assert_eq!(scope.outbound, want);
    }
    let scope = SidecarScope::build(
        proxy,
        Some(&registry_only),
        [],
        &services,
        &settings(OutboundMode::AllowAny),
    );
    assert_eq!(
        seen(&scope, &services).len(),
        services.len(),
        "a Sidecar without egress imports */* (istiod's default listener)"
    );
    assert_eq!(scope.egress_hosts(), ["*/*"]);
    let only_a = sidecar("a", "default", "2024-01-01T00:00:00Z", egress(&["./*"]));
    let scope = build("a", Some(&only_a), &[], &services);
    assert_eq!(
        scope.hidden("details.b.svc.cluster.local", &services[2..3]),
        Some(Hidden::NotImported {
            sidecar: only_a.object_ref(),
            egress: vec!["a/*".into()]
        })
    );
    assert_eq!(scope.hidden("reviews.a.svc.cluster.local", &services[..1]), None);
}

#[test]
fn scopes_are_built_once_per_key_and_version() {
    let services = mesh_services();
    let config = ConfigSnapshot::default();
    let scopes = Scopes::build(&config);
    let s = settings(OutboundMode::AllowAny);
    let l = Labels::new();
    let proxy = ProxyRef {
        namespace: "a",
        labels: &l,
        router: false,
    };
    let list = || Box::new(services.iter()) as Box<dyn Iterator<Item = &Service>>;
    let a = scopes.scope(1, proxy, &config, &s, list);
    let b = scopes.scope(1, proxy, &config, &s, || panic!("cached"));
    assert!(Arc::ptr_eq(&a, &b));
    let c = scopes.scope(2, proxy, &config, &s, list);
    assert!(!Arc::ptr_eq(&a, &c), "a new mesh version builds anew");
}

#[test]
fn a_port_bound_listeners_virtual_services_import_destinations_on_its_port() {
    let services = mesh_services();
    let sc = sidecar(
        "a",
        "default",
        "2024-01-01T00:00:00Z",
        json!({"egress": [{"port": {"number": 9090, "protocol": "HTTP", "name": "m"}, "hosts": ["./reviews.a.svc.cluster.local"]}]}),
    );
    let vs = object(
        Kind::VirtualService,
        "a",
        "to-details",
        "2024-01-01T00:00:00Z",
        json!({"hosts": ["reviews"], "http": [{"route": [{"destination": {"host": "details.b.svc.cluster.local", "port": {"number": 80}}}]}]}),
    );
    let scope = build("a", Some(&sc), &[vs], &services);
    let ports = |h: &str| {
        scope
            .trimmed(h)
            .map(|s| s.ports.iter().map(|p| p.port).collect::<Vec<_>>())
    };
    assert_eq!(ports("reviews.a.svc.cluster.local"), Some(vec![9090]));
    assert_eq!(
        ports("details.b.svc.cluster.local"),
        Some(vec![9090]),
        "the listener's port, not the destination's (istiod's serviceMatchingListenerPort)"
    );
}

#[test]
fn mesh_default_export_to_applies_to_services_and_virtual_services_that_set_none() {
    let mut public = svc("public", "b");
    public.export_to = ExportTo::Public;
    let services = vec![svc("plain", "b"), public, svc("own", "a")];
    let vss = [
        object(
            Kind::VirtualService,
            "b",
            "plain",
            "2024-01-01T00:00:00Z",
            json!({"hosts": ["x.example.com"], "http": [{"route": [{"destination": {"host": "x.example.com"}}]}]}),
        ),
        object(
            Kind::VirtualService,
            "b",
            "public",
            "2024-01-01T00:00:00Z",
            json!({"hosts": ["y.example.com"], "exportTo": ["*"],
                     "http": [{"route": [{"destination": {"host": "y.example.com"}}]}]}),
        ),
    ];
    let (plain, public_host, own) = (
        "plain.b.svc.cluster.local",
        "public.b.svc.cluster.local",
        "own.a.svc.cluster.local",
    );
    // (MeshConfig list for both kinds, what a proxy in "a" sees, the VirtualServices it imports)
    let cases: [(&[&str], Vec<&str>, Vec<&str>); 4] = [
        (&[], vec![plain, public_host, own], vec!["plain", "public"]),
        (&["*"], vec![plain, public_host, own], vec!["plain", "public"]),
        (&["."], vec![public_host, own], vec!["public"]),
        (&["~"], vec![public_host], vec!["public"]),
    ];
    for (default, hosts, want_vss) in cases {
        let mut mesh = MeshConfig::default();
        mesh.default_service_export_to = default.iter().map(|s| s.to_string()).collect();
        mesh.default_virtual_service_export_to = mesh.default_service_export_to.clone();
        let proxy = ProxyRef {
            namespace: "a",
            labels: &Labels::new(),
            router: false,
        };
        let scope = SidecarScope::build(
            proxy,
            None,
            &vss,
            &services,
            &Settings::new(Arc::new(mesh), "cluster.local"),
        );
        assert_eq!(seen(&scope, &services), set(&hosts), "{default:?}");
        let names: Vec<&str> = scope.virtual_services().iter().map(|o| &*o.name).collect();
        assert_eq!(names, want_vss, "{default:?}");
        if default == ["."] {
            assert_eq!(scope.hidden(plain, &services[..1]), Some(Hidden::NotExported));
        }
    }
}
