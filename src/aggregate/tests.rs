//! Aggregate merge, shard and change-classification tests.

use std::{net::IpAddr, sync::Arc, time::Duration};

use super::{index::Index, *};
use crate::model::{
    ClusterId, Endpoint, EndpointPort, Health, Hostname, Locality, Placement, Protocol, Resolution, Service,
    ServiceKey, ServicePort, ShardKey, TlsMode, WorkloadInfo,
};

fn key(name: &str) -> ServiceKey {
    ServiceKey::new(Hostname::from(format!("{name}.ns.svc.cluster.local")), "ns")
}

fn service(name: &str, cluster: &str, vip: &str, port: u16) -> Arc<Service> {
    Arc::new(Service {
        hostname: key(name).hostname,
        namespace: "ns".into(),
        name: name.into(),
        ports: vec![ServicePort {
            name: "http".into(),
            port,
            protocol: Protocol::Http,
            target_port: None,
        }],
        cluster_vips: [(cluster.into(), vec![vip.parse().unwrap()])]
            .into_iter()
            .collect(),
        external_addresses: Default::default(),
        node_ports: Default::default(),
        labels: Default::default(),
        service_accounts: Default::default(),
        creation_time: None,
        resolution: Resolution::ClientSideLb,
        origin: crate::model::Origin::Kubernetes,
        mesh_external: false,
        export_to: Default::default(),
        selector: None,
    })
}

fn endpoints(cluster: &str, ips: &[&str], sa: &str) -> Arc<[Endpoint]> {
    ips.iter()
        .map(|ip| Endpoint {
            address: ip.parse::<IpAddr>().unwrap(),
            ports: Arc::from([EndpointPort {
                service_port_name: "http".into(),
                port: 8080,
            }]),
            placement: Placement::new(cluster.into(), None, Locality::default()),
            info: WorkloadInfo::new(
                Default::default(),
                Some(format!("spiffe://cluster.local/ns/ns/sa/{sa}").into()),
            ),
            workload_meta: crate::model::workload_meta("", "", &Default::default(), cluster),
            tls_mode: TlsMode::Istio,
            health: Health::Healthy,
            workload: None,
            kind: crate::model::WorkloadKind::Pod,
            weight: 1,
        })
        .collect()
}

fn from(cluster: &str, generation: u64) -> RegistryId {
    RegistryId::kubernetes(cluster.into(), generation)
}

fn replace(cluster: &str, generation: u64, svcs: &[Arc<Service>], eps: &[(&str, Arc<[Endpoint]>)]) -> Update {
    Update::Replace {
        from: from(cluster, generation),
        services: svcs.to_vec(),
        endpoints: eps.iter().map(|(n, e)| (key(n), e.clone())).collect(),
    }
}

/// `(service, clusters, push)` triples of a change set, for compact assertions.
fn summary(c: &ChangeSet) -> Vec<(String, Vec<String>, ChangeKind)> {
    c.services
        .iter()
        .map(|(k, ch)| {
            let name = k.hostname.split('.').next().unwrap_or_default().to_owned();
            (name, ch.clusters.iter().map(|c| c.to_string()).collect(), ch.kind)
        })
        .collect()
}

fn index_with_two_clusters() -> Index {
    let mut ix = Index::new("c1".into());
    ix.apply(replace(
        "c2",
        1,
        &[service("a", "c2", "10.2.0.1", 81)],
        &[("a", endpoints("c2", &["10.2.1.1"], "a"))],
    ));
    ix.apply(replace(
        "c1",
        1,
        &[service("a", "c1", "10.1.0.1", 80)],
        &[("a", endpoints("c1", &["10.1.1.1"], "a"))],
    ));
    ix.take_changes();
    ix
}

#[test]
fn primary_attributes_win_and_vips_come_from_every_cluster() {
    let ix = index_with_two_clusters();
    let a = &ix.services[&key("a")];
    assert_eq!(
        a.ports[0].port, 80,
        "primary (c1) provides attributes although c2 came first"
    );
    let vips: Vec<(String, String)> = a
        .cluster_vips
        .iter()
        .map(|(c, v)| (c.to_string(), v[0].to_string()))
        .collect();
    assert_eq!(
        vips,
        [("c1".into(), "10.1.0.1".into()), ("c2".into(), "10.2.0.1".into())]
    );
    let shards: Vec<String> = ix.endpoints[&key("a")]
        .shards
        .keys()
        .map(|k| k.to_string())
        .collect();
    assert_eq!(shards, ["Kubernetes/c1", "Kubernetes/c2"]);
}

#[test]
fn changes_are_classified_per_service_and_cluster() {
    struct Case {
        name: &'static str,
        update: Update,
        want: Vec<(&'static str, Vec<&'static str>, ChangeKind)>,
    }
    let cases = [
        Case {
            name: "same endpoints again: nothing",
            update: Update::Endpoints {
                from: from("c2", 1),
                key: key("a"),
                endpoints: endpoints("c2", &["10.2.1.1"], "a"),
            },
            want: vec![],
        },
        Case {
            name: "one more endpoint, same identity: EDS",
            update: Update::Endpoints {
                from: from("c2", 1),
                key: key("a"),
                endpoints: endpoints("c2", &["10.2.1.1", "10.2.1.2"], "a"),
            },
            want: vec![("a", vec!["c2"], ChangeKind::Eds)],
        },
        Case {
            name: "new service account: full",
            update: Update::Endpoints {
                from: from("c2", 1),
                key: key("a"),
                endpoints: endpoints("c2", &["10.2.1.1"], "other"),
            },
            want: vec![("a", vec!["c2"], ChangeKind::Full)],
        },
        Case {
            name: "last endpoint of a shard gone: EDS, service kept",
            update: Update::Endpoints {
                from: from("c2", 1),
                key: key("a"),
                endpoints: Arc::from([]),
            },
            want: vec![("a", vec!["c2"], ChangeKind::Eds)],
        },
        Case {
            name: "new service: full",
            update: Update::Service {
                from: from("c2", 1),
                key: key("b"),
                service: Some(service("b", "c2", "10.2.0.2", 80)),
            },
            want: vec![("b", vec!["c2"], ChangeKind::Full)],
        },
        Case {
            name: "secondary cluster's port differs: merged unchanged, nothing",
            update: Update::Service {
                from: from("c2", 1),
                key: key("a"),
                service: Some(service("a", "c2", "10.2.0.1", 9999)),
            },
            want: vec![],
        },
        Case {
            name: "secondary cluster's VIP changes: full",
            update: Update::Service {
                from: from("c2", 1),
                key: key("a"),
                service: Some(service("a", "c2", "10.2.0.9", 81)),
            },
            want: vec![("a", vec!["c2"], ChangeKind::Full)],
        },
        Case {
            name: "stale generation: ignored",
            update: Update::Endpoints {
                from: from("c2", 0),
                key: key("a"),
                endpoints: Arc::from([]),
            },
            want: vec![],
        },
        Case {
            name: "unknown cluster: ignored",
            update: Update::Endpoints {
                from: from("c9", 1),
                key: key("a"),
                endpoints: endpoints("c9", &["10.9.1.1"], "a"),
            },
            want: vec![],
        },
    ];
    for case in cases {
        let mut ix = index_with_two_clusters();
        ix.apply(case.update);
        let got = summary(&ix.take_changes());
        let want: Vec<_> = case
            .want
            .iter()
            .map(|(n, cs, p)| {
                (
                    n.to_string(),
                    cs.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
                    *p,
                )
            })
            .collect();
        assert_eq!(got, want, "{}", case.name);
    }
}

#[test]
fn rotation_replaces_make_before_break_and_prunes_only_what_is_gone() {
    let mut ix = index_with_two_clusters();
    ix.apply(Update::Service {
        from: from("c2", 1),
        key: key("b"),
        service: Some(service("b", "c2", "10.2.0.2", 80)),
    });
    ix.take_changes();
    // Generation 2 synced: same "a", no "b" (deleted while the swap was in flight).
    ix.apply(replace(
        "c2",
        2,
        &[service("a", "c2", "10.2.0.1", 81)],
        &[("a", endpoints("c2", &["10.2.1.1"], "a"))],
    ));
    assert_eq!(
        summary(&ix.take_changes()),
        [("b".to_owned(), vec!["c2".to_owned()], ChangeKind::Full)]
    );
    assert!(
        ix.endpoints[&key("a")]
            .shards
            .contains_key(&ShardKey::kubernetes("c2"))
    );
    // The old generation's late close must not wipe the new owner's shards (istio #61043).
    ix.apply(Update::Remove {
        shard: ShardKey::kubernetes("c2"),
        generation: 1,
    });
    ix.apply(Update::Endpoints {
        from: from("c2", 1),
        key: key("a"),
        endpoints: Arc::from([]),
    });
    assert!(ix.take_changes().is_empty());
    assert!(
        ix.endpoints[&key("a")]
            .shards
            .contains_key(&ShardKey::kubernetes("c2"))
    );
}

#[test]
fn removing_a_cluster_drops_exactly_its_shards() {
    let mut ix = index_with_two_clusters();
    ix.apply(Update::Service {
        from: from("c2", 1),
        key: key("b"),
        service: Some(service("b", "c2", "10.2.0.2", 80)),
    });
    ix.take_changes();
    ix.apply(Update::Remove {
        shard: ShardKey::kubernetes("c2"),
        generation: 1,
    });
    let changes = ix.take_changes();
    assert_eq!(changes.full, [FullReason::ClusterRemoved("c2".into())].into());
    assert_eq!(
        summary(&changes),
        [
            ("a".to_owned(), vec!["c2".to_owned()], ChangeKind::Full),
            ("b".to_owned(), vec!["c2".to_owned()], ChangeKind::Full),
        ]
    );
    assert!(!ix.services.contains_key(&key("b")));
    let a = &ix.services[&key("a")];
    assert_eq!(
        a.cluster_vips.keys().collect::<Vec<_>>(),
        [&ClusterId::from("c1")]
    );
    let shards: Vec<String> = ix.endpoints[&key("a")]
        .shards
        .keys()
        .map(|k| k.to_string())
        .collect();
    assert_eq!(shards, ["Kubernetes/c1"]);
    // A late update from the removed registry is ignored; a re-added cluster (newer generation) is not.
    ix.apply(Update::Endpoints {
        from: from("c2", 1),
        key: key("a"),
        endpoints: endpoints("c2", &["10.2.1.1"], "a"),
    });
    assert!(ix.take_changes().is_empty());
    ix.apply(replace(
        "c2",
        3,
        &[],
        &[("a", endpoints("c2", &["10.2.1.1"], "a"))],
    ));
    assert_eq!(
        summary(&ix.take_changes()),
        [("a".to_owned(), vec!["c2".to_owned()], ChangeKind::Eds)]
    );
}

#[tokio::test(start_paused = true)]
async fn a_burst_is_published_once_after_the_quiet_period() {
    let tasks = crate::drain::Tasks::new();
    let (_nets_tx, nets) = watch::channel(Arc::new(MeshNetworks::default()));
    let opts = Options {
        primary: "c1".into(),
        debounce_after: Duration::from_millis(100),
        debounce_max: Duration::from_secs(10),
        eds_debounce: super::EdsDebounce::Quiet,
        metrics: super::Metrics::unregistered(),
        domain_suffix: "cluster.local".into(),
    };
    let (aggregator, tx, mut snaps) = new(opts, nets);
    aggregator.spawn(&tasks);
    let t0 = tokio::time::Instant::now();
    tx.send(replace("c1", 1, &[service("a", "c1", "10.1.0.1", 80)], &[]))
        .await;
    for i in 1..=5 {
        let ip = format!("10.1.1.{i}");
        let ips: Vec<&str> = vec![&ip];
        tx.send(Update::Endpoints {
            from: from("c1", 1),
            key: key("a"),
            endpoints: endpoints("c1", &ips, "a"),
        })
        .await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Readers see the window the burst waits in (`meshctl explain` says so).
        let pending = snaps.pending().expect("changes pending inside the window");
        assert!(
            pending.first >= t0 && pending.first < t0 + Duration::from_millis(50),
            "{pending:?}"
        );
        assert!(pending.deadline > tokio::time::Instant::now(), "{pending:?}");
    }
    let snap = snaps.changed().await.expect("published");
    assert_eq!(snaps.pending(), None, "published: nothing waits");
    assert_eq!((snap.version, snap.changes.since), (1, 0));
    let changed_at = snap.changed_at.expect("changed_at");
    assert!(
        changed_at >= t0 && changed_at < t0 + Duration::from_millis(50),
        "changed_at is the burst's first change, not the publish"
    );
    assert_eq!(
        snap.endpoints[&key("a")]
            .iter()
            .map(|e| e.address.to_string())
            .collect::<Vec<_>>(),
        ["10.1.1.5"]
    );
    assert_eq!(
        summary(&snap.changes),
        [("a".to_owned(), vec!["c1".to_owned()], ChangeKind::Full)]
    );
    tasks.drain(Duration::from_secs(1)).await.unwrap();
}

/// ★ Paced: a storm of endpoint flaps publishes at once, then once per `debounce_after`, each publish
/// carrying the newest endpoints — never waiting for a quiet period that does not come.
#[tokio::test(start_paused = true)]
async fn an_endpoint_storm_is_paced_not_held_until_quiet() {
    let ms = Duration::from_millis;
    let tasks = crate::drain::Tasks::new();
    let (_nets_tx, nets) = watch::channel(Arc::new(MeshNetworks::default()));
    let opts = Options {
        primary: "c1".into(),
        debounce_after: ms(100),
        debounce_max: Duration::from_secs(10),
        eds_debounce: super::EdsDebounce::Paced { settle: ms(10) },
        metrics: super::Metrics::unregistered(),
        domain_suffix: "cluster.local".into(),
    };
    let (aggregator, tx, mut snaps) = new(opts, nets);
    aggregator.spawn(&tasks);
    tx.send(replace(
        "c1",
        1,
        &[service("a", "c1", "10.1.0.1", 80)],
        &[("a", endpoints("c1", &["10.1.1.0"], "a"))],
    ))
    .await;
    let created = snaps.changed().await.expect("the service published");
    assert!(created.changes.needs_full_push());
    tokio::time::sleep(ms(500)).await;

    // 25 flaps, one every 20 ms: quiet never comes, so istiod's rule would hold them all 10 s.
    let t0 = tokio::time::Instant::now();
    let publishes = tokio::spawn({
        let mut snaps = snaps.clone();
        async move {
            let mut seen = Vec::new();
            while let Some(s) = snaps.changed().await {
                let last = s.endpoints[&key("a")]
                    .iter()
                    .map(|e| e.address.to_string())
                    .collect::<String>();
                seen.push((tokio::time::Instant::now(), last));
                if seen.last().is_some_and(|(_, ip)| ip == "10.1.1.25") {
                    return seen;
                }
            }
            seen
        }
    });
    for i in 1..=25 {
        let ip = format!("10.1.1.{i}");
        tx.send(Update::Endpoints {
            from: from("c1", 1),
            key: key("a"),
            endpoints: endpoints("c1", &[ip.as_str()], "a"),
        })
        .await;
        tokio::time::sleep(ms(20)).await;
    }
    let seen = publishes.await.unwrap();
    assert_eq!(
        seen[0].0,
        t0 + ms(10),
        "the first flap waits only the settle time"
    );
    assert_eq!(seen[0].1, "10.1.1.1");
    for pair in seen.windows(2) {
        assert!(
            pair[1].0 - pair[0].0 >= ms(100),
            "at most one publish per 100 ms: {seen:?}"
        );
    }
    let (last_at, _) = seen[seen.len() - 1];
    assert!(
        last_at <= t0 + ms(24 * 20 + 100),
        "the last flap is out within one interval of arriving: {seen:?}"
    );
    assert!(
        (5..=7).contains(&seen.len()),
        "{} publishes for 25 flaps over 500 ms",
        seen.len()
    );
    tasks.drain(Duration::from_secs(1)).await.unwrap();
}

fn external(cluster: &str, generation: u64) -> RegistryId {
    RegistryId {
        provider: Provider::External,
        cluster: cluster.into(),
        generation,
    }
}

/// A ServiceEntry-made service of key `name` (same host and namespace as the Kubernetes one).
fn se_service(name: &str, port: u16) -> Arc<Service> {
    let mut s = Service::clone(&service(name, "c1", "240.240.0.1", port));
    s.origin = crate::model::Origin::ServiceEntry {
        namespace: "ns".into(),
        names: vec![format!("se-{name}").into()],
    };
    Arc::new(s)
}

fn shard_names(ix: &Index, name: &str) -> Vec<String> {
    ix.endpoints
        .get(&key(name))
        .map(|s| s.shards.keys().map(ToString::to_string).collect())
        .unwrap_or_default()
}

#[test]
fn external_and_kubernetes_shards_of_one_cluster_stay_apart() {
    let mut ix = index_with_two_clusters();
    // The ServiceEntry registry fed from c1 (the primary) replaces its view: it owns (External, c1)
    // only, so the Kubernetes registry of c1 keeps its keys and shards.
    ix.apply(Update::Replace {
        from: external("c1", 1),
        services: vec![se_service("b", 443)],
        endpoints: vec![
            (key("a"), endpoints("c1", &["10.9.0.1"], "vm")),
            (key("b"), endpoints("c1", &["10.9.0.2"], "vm")),
        ],
    });
    assert_eq!(
        shard_names(&ix, "a"),
        ["Kubernetes/c1", "Kubernetes/c2", "External/c1"]
    );
    assert_eq!(shard_names(&ix, "b"), ["External/c1"]);
    assert_eq!(ix.services[&key("b")].provider(), Provider::External);
    // An empty External view prunes only External shards.
    ix.apply(Update::Replace {
        from: external("c1", 2),
        services: vec![],
        endpoints: vec![],
    });
    assert_eq!(shard_names(&ix, "a"), ["Kubernetes/c1", "Kubernetes/c2"]);
    assert!(!ix.services.contains_key(&key("b")));
    assert!(!ix.endpoints.contains_key(&key("b")));
    // Removing the Kubernetes registry of c2 leaves c1's, and the External registry is still live.
    ix.apply(Update::Remove {
        shard: ShardKey::kubernetes("c2"),
        generation: 1,
    });
    ix.apply(Update::Endpoints {
        from: external("c1", 2),
        key: key("a"),
        endpoints: endpoints("c1", &["10.9.0.3"], "vm"),
    });
    assert_eq!(shard_names(&ix, "a"), ["Kubernetes/c1", "External/c1"]);
    // A Kubernetes generation number says nothing about the External registry's generations.
    ix.apply(Update::Endpoints {
        from: external("c1", 1),
        key: key("a"),
        endpoints: Arc::from([]),
    });
    assert_eq!(
        shard_names(&ix, "a"),
        ["Kubernetes/c1", "External/c1"],
        "stale generation ignored"
    );
}

#[test]
fn kubernetes_service_wins_a_host_and_namespace_clash_and_is_never_merged_with_a_service_entry() {
    let mut ix = Index::new("c1".into());
    ix.apply(Update::Replace {
        from: external("c1", 1),
        services: vec![se_service("a", 443)],
        endpoints: vec![],
    });
    ix.take_changes();
    assert_eq!(
        ix.services[&key("a")].ports[0].port,
        443,
        "alone, the ServiceEntry serves"
    );
    ix.apply(replace("c2", 1, &[service("a", "c2", "10.2.0.1", 80)], &[]));
    let a = &ix.services[&key("a")];
    assert_eq!((a.provider(), a.ports[0].port), (Provider::Kubernetes, 80));
    assert_eq!(
        a.cluster_vips.keys().map(|c| c.as_str()).collect::<Vec<_>>(),
        ["c2"],
        "no address of the ServiceEntry merged in"
    );
    assert_eq!(
        summary(&ix.take_changes()),
        [("a".into(), vec!["c2".into()], ChangeKind::Full)]
    );
    ix.apply(Update::Remove {
        shard: ShardKey::kubernetes("c2"),
        generation: 1,
    });
    assert_eq!(
        ix.services[&key("a")].provider(),
        Provider::External,
        "the ServiceEntry is back"
    );
}

#[test]
fn service_entries_are_never_network_gateways() {
    let mut ix = index_with_two_clusters();
    ix.apply(Update::Replace {
        from: external("c1", 1),
        services: vec![se_service("b", 15443)],
        endpoints: vec![],
    });
    let names: Vec<String> = ix
        .cluster_services()
        .map(|(c, s)| format!("{c}/{}", s.name))
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.iter().all(|n| n.ends_with("/a")), "{names:?}");
}

#[test]
fn snapshots_name_the_live_registries() {
    let mut ix = index_with_two_clusters();
    ix.apply(Update::Replace {
        from: external("c1", 3),
        services: vec![],
        endpoints: vec![],
    });
    let names =
        |ix: &Index| -> Vec<String> { ix.registries().iter().map(|(k, g)| format!("{k}#{g}")).collect() };
    assert_eq!(
        names(&ix),
        ["Kubernetes/c1#1", "Kubernetes/c2#1", "External/c1#3"]
    );
    ix.apply(Update::Remove {
        shard: ShardKey::kubernetes("c2"),
        generation: 1,
    });
    assert_eq!(names(&ix), ["Kubernetes/c1#1", "External/c1#3"]);
}

#[tokio::test(start_paused = true)]
async fn istio_config_changes_reach_snapshots_with_the_registry_data() {
    use crate::{
        config::MeshConfig,
        config_controller::ConfigSnapshot,
        istio::{self, Kind, ObjectMeta, Source},
    };
    let dr = |version: u64, host: &str| {
        let meta = ObjectMeta {
            namespace: "ns".into(),
            name: "reviews".into(),
            labels: Default::default(),
            annotations: Default::default(),
            revision: version.to_string(),
            creation_timestamp: None,
            source: Source::Cluster("c1".into()),
        };
        let spec = serde_json::json!({"host": host, "subsets": [{"name": "v1", "labels": {"v": "1"}}]});
        let cfg = Arc::new(istio::parse(Kind::DestinationRule, meta, &spec).unwrap().0);
        Arc::new(ConfigSnapshot::from_configs(version, [cfg]))
    };
    let tasks = crate::drain::Tasks::new();
    let (_nets_tx, nets) = watch::channel(Arc::new(MeshNetworks::default()));
    let (config_tx, config) = watch::channel(Arc::new(ConfigSnapshot::default()));
    let mesh_cfg = MeshConfig {
        root_namespace: "mesh-root".into(),
        ..MeshConfig::default()
    };
    let (mesh_tx, mesh) = watch::channel(Arc::new(mesh_cfg));
    let opts = Options {
        primary: "c1".into(),
        debounce_after: Duration::from_millis(100),
        debounce_max: Duration::from_secs(10),
        eds_debounce: super::EdsDebounce::Quiet,
        metrics: super::Metrics::unregistered(),
        domain_suffix: "example.local".into(),
    };
    let (aggregator, tx, mut snaps) = new(opts, nets);
    aggregator.with_config(config, mesh).spawn(&tasks);
    tx.send(replace("c1", 1, &[service("a", "c1", "10.1.0.1", 80)], &[]))
        .await;
    config_tx.send_replace(dr(5, "reviews"));
    let snap = snaps.changed().await.expect("published");
    assert_eq!(snap.version, 1, "registry data and config in one snapshot");
    assert_eq!(snap.changes.config.objects.len(), 1);
    assert!(snap.changes.needs_full_push());
    let traffic = snap.traffic();
    assert_eq!(&*traffic.settings.root_namespace, "mesh-root");
    let rule = traffic.destination_rules.rules().next().expect("indexed");
    assert_eq!(
        &*rule.host, "reviews.ns.svc.example.local",
        "short name resolved with the suffix"
    );
    // A config change alone publishes, and says what changed.
    config_tx.send_replace(dr(7, "ratings"));
    let snap = snaps.changed().await.expect("published");
    assert_eq!((snap.version, snap.changes.since), (2, 1));
    assert!(snap.changes.services.is_empty());
    assert_eq!(snap.changes.config.hosts(), ["ratings", "reviews"].into());
    // Registry changes alone keep the built index; config changes replace it.
    let built: *const crate::traffic::Index = snap.traffic();
    tx.send(Update::Endpoints {
        from: from("c1", 1),
        key: key("a"),
        endpoints: endpoints("c1", &["10.1.1.9"], "a"),
    })
    .await;
    let snap = snaps.changed().await.expect("published");
    assert!(snap.changes.config.is_empty());
    assert!(
        std::ptr::eq(snap.traffic(), built),
        "endpoint/service churn reuses the index"
    );
    // A mesh config change is a full push with the new settings.
    mesh_tx.send_replace(Arc::new(MeshConfig::default()));
    let snap = snaps.changed().await.expect("published");
    assert!(snap.changes.full.contains(&FullReason::MeshConfig));
    assert_eq!(&*snap.traffic().settings.root_namespace, "istio-system");
    assert!(!std::ptr::eq(snap.traffic(), built));
    tasks.drain(Duration::from_secs(1)).await.unwrap();
}
