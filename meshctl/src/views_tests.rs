use serde_json::json;

use super::*;

fn row(status: &str, secret: &str, err: Option<&str>) -> ClusterzRow {
    ClusterzRow {
        id: "c".into(),
        secret_name: secret.into(),
        sync_status: status.into(),
        last_error: err.map(Into::into),
    }
}

#[test]
fn remote_cluster_status_and_reason() {
    // (clusterz status, last error) → (status, reason contains)
    let cases = [
        ("synced", None, "synced", ""),
        (
            "synced",
            Some("unreachable: API server https://10.0.0.1:6443: connection refused"),
            "synced",
            "now failing: unreachable: API server https://10.0.0.1:6443",
        ),
        ("syncing", None, "syncing", "initial list"),
        (
            "syncing",
            Some("connection refused"),
            "syncing",
            "last error: connection refused",
        ),
        (
            "timeout",
            Some("401 Unauthorized"),
            "timeout",
            "remote-cluster timeout",
        ),
        ("timeout", None, "timeout", "still retrying"),
        ("closed", None, "closed", "stopped"),
        (
            "error: kubeconfig exec plugin is not allowed",
            None,
            "error",
            "exec plugin",
        ),
    ];
    for (status, err, want_status, want_reason) in cases {
        let r = remote_cluster(&row(status, "istio-system/s", err));
        assert_eq!(r.status, want_status, "{status}");
        assert!(r.reason.contains(want_reason), "{status}: {:?}", r.reason);
        assert_eq!(r.reason.is_empty(), want_reason.is_empty(), "{status}");
    }
    assert_eq!(remote_cluster(&row("synced", "", None)).secret, "-");
}

#[test]
fn per_type_sync_states() {
    let t = |sent: &str, acked: &str| TypeSync {
        sent: sent.into(),
        acked: acked.into(),
        last_error: String::new(),
    };
    let cases = [
        (None, "NOT SENT"),
        (Some(t("", "")), "NOT SENT"),
        (Some(t("3", "3")), "SYNCED"),
        (Some(t("4", "3")), "STALE"),
        (Some(t("4", "")), "STALE"),
    ];
    for (input, want) in cases {
        assert_eq!(sync_state(input.as_ref()), want, "{input:?}");
    }
}

#[test]
fn proxy_status_row_names_the_nack() {
    let s: SyncStatus = serde_json::from_value(json!({
        "proxy": "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local",
        "cluster_id": "cluster1",
        "network": "network1",
        "resources": {
            XdsType::Cluster.url(): {"sent": "2", "acked": "2", "lastError": ""},
            XdsType::Endpoint.url(): {"sent": "3", "acked": "1", "lastError": "bad endpoint"},
        },
    }))
    .unwrap();
    let p = proxy_status(&s);
    assert_eq!(
        (p.status["CDS"], p.status["EDS"], p.status["LDS"]),
        ("SYNCED", "STALE", "NOT SENT")
    );
    assert_eq!(p.last_nack, "EDS: bad endpoint");
    let table = crate::output::table(
        &ProxyStatuses(vec![p.clone()]).header(),
        &ProxyStatuses(vec![p]).cells(),
    );
    assert!(table.starts_with("NAME "), "{table}");
}

#[test]
fn verdicts_in_words() {
    let gw = json!({"network": "network2", "address": "198.51.100.10", "port": 15443});
    let cases = [
        (
            json!({"decision": "direct", "why": "sameNetwork", "weight": 2}),
            "sent directly, weight 2: same network",
        ),
        (
            json!({"decision": "viaGateways", "gateways": [gw], "share": 2}),
            "through network2's gateway 198.51.100.10:15443 with weight 2 each",
        ),
        (
            json!({"decision": "dropped", "why": "notMtls"}),
            "DROPPED: not mTLS-capable",
        ),
        (
            json!({"decision": "dropped", "why": "unhealthy"}),
            "DROPPED: unhealthy",
        ),
        (
            json!({"decision": "dropped", "why": "outsideNetworkView"}),
            "DROPPED: outside the proxy's REQUESTED_NETWORK_VIEW",
        ),
    ];
    for (v, want) in cases {
        let got = verdict_words(&v);
        assert!(got.starts_with(want), "{got}");
    }
}
