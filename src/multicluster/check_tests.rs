use std::time::{Duration, SystemTime};

use base64::Engine;

use super::*;
use crate::model::NetworkGateway;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

/// A kubeconfig whose user is `user` (YAML mapping body).
fn kubeconfig(user: &str) -> Vec<u8> {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {{cluster: k, user: u}}\n\
         clusters:\n- name: k\n  cluster: {{server: 'https://127.0.0.1:6443'}}\nusers:\n- name: u\n  user: {user}\n"
    )
    .into_bytes()
}

fn jwt(claims: &str) -> String {
    let enc = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    format!("{}.{}.c2lnbmF0dXJl", enc(r#"{"alg":"RS256"}"#), enc(claims))
}

#[test]
fn credentials_are_read_from_the_kubeconfig_user() {
    let not_after = time::OffsetDateTime::from_unix_timestamp(2_000_000_000).unwrap();
    let (cert, _) = crate::ca::bundle::tests::ca_cert("reader", None, false, not_after);
    let none = BTreeSet::new();
    let cases: Vec<(String, Credentials)> = vec![
        (
            format!("{{token: '{}'}}", jwt(r#"{"exp":1700000000,"sub":"r"}"#)),
            Credentials::Token(Some(at(1_700_000_000))),
        ),
        (
            format!("{{token: '{}'}}", jwt(r#"{"sub":"r"}"#)),
            Credentials::Token(None),
        ),
        ("{token: not-a-jwt}".into(), Credentials::Token(None)),
        (
            format!(
                "{{client-certificate-data: {}, client-key-data: a2V5}}",
                B64.encode(&cert)
            ),
            Credentials::Certificate(at(2_000_000_000)),
        ),
        (
            "{client-certificate-data: '!!'}".into(),
            Credentials::Unreadable(String::new()),
        ),
        (
            "{auth-provider: {name: oidc}}".into(),
            Credentials::Unknown("an auth-provider"),
        ),
        (
            "{}".into(),
            Credentials::Unknown("no token or client certificate"),
        ),
        (
            "{exec: {command: sh, apiVersion: v1}}".into(),
            Credentials::Unreadable(String::new()),
        ),
    ];
    for (user, want) in cases {
        let got = credentials(&kubeconfig(&user), &none);
        match (&got, &want) {
            (Credentials::Unreadable(_), Credentials::Unreadable(_)) => {}
            _ => assert_eq!(got, want, "{user}"),
        }
    }
}

#[test]
fn credentials_lines_fail_when_expired_and_warn_within_a_week() {
    let now = at(1_000_000);
    let cases = [
        (
            Credentials::Token(Some(at(999_000))),
            Outcome::Fail,
            "bearer token expired at",
        ),
        (
            Credentials::Token(Some(at(1_000_000 + 3600))),
            Outcome::Warning,
            "(in 1h)",
        ),
        (
            Credentials::Token(Some(at(1_000_000 + 30 * 86400))),
            Outcome::Ok,
            "(in 30days)",
        ),
        (Credentials::Token(None), Outcome::Ok, "no expiry"),
        (
            Credentials::Certificate(at(10)),
            Outcome::Fail,
            "client certificate expired",
        ),
        (
            Credentials::Unknown("an exec plugin"),
            Outcome::Ok,
            "expiry not known",
        ),
        (
            Credentials::Unreadable("bad".into()),
            Outcome::Fail,
            "kubeconfig unusable: bad",
        ),
    ];
    for (c, result, detail) in cases {
        let r = credentials_row("c2", &c, now);
        assert_eq!((r.result, r.check.as_str()), (result, "credentials"), "{c:?}");
        assert!(r.detail.contains(detail), "{c:?}: {}", r.detail);
    }
}

#[test]
fn sync_line_passes_only_synced_and_healthy() {
    let cases = [
        (SyncStatus::Synced, None, Outcome::Ok, "synced"),
        (
            SyncStatus::Synced,
            Some("connection refused"),
            Outcome::Fail,
            "failing now",
        ),
        (SyncStatus::Syncing, None, Outcome::Fail, "not synced: syncing"),
        (
            SyncStatus::Timeout,
            Some("401"),
            Outcome::Fail,
            "timeout; last error: 401",
        ),
        (
            SyncStatus::Error("bad kubeconfig".into()),
            None,
            Outcome::Fail,
            "bad kubeconfig",
        ),
    ];
    for (status, err, result, detail) in cases {
        let r = sync_row("c2", &status, err);
        assert_eq!(r.result, result, "{status}");
        assert!(r.detail.contains(detail), "{}", r.detail);
    }
}

#[test]
fn rbac_line_names_each_missing_permission() {
    let total: usize = NEEDED.iter().map(|p| p.verbs.len()).sum();
    assert_eq!(total, 18);
    let ok = rbac_row("c2", &Ok(vec![]));
    assert_eq!(ok.result, Outcome::Ok);
    let missing = rbac_row("c2", &Ok(vec!["watch nodes".into(), "create configmaps".into()]));
    assert_eq!(missing.result, Outcome::Fail);
    assert!(
        missing
            .detail
            .contains("missing 2 of 18 permissions meshd needs: watch nodes, create configmaps")
    );
    let err = rbac_row("c2", &Err("401 Unauthorized".into()));
    assert_eq!(err.result, Outcome::Fail);
    assert!(err.detail.contains("cannot review its permissions: 401"));
    let names = |ps: &[Permission]| -> Vec<String> {
        ps.iter()
            .flat_map(|p| p.verbs.iter().map(move |v| permission_name(p, v)))
            .collect()
    };
    assert_eq!(
        names(&NEEDED[4..6]),
        [
            "list endpointslices.discovery.k8s.io",
            "watch endpointslices.discovery.k8s.io",
            "create tokenreviews.authentication.k8s.io"
        ]
    );
    // Gateway certificates in remote clusters (issue 32): the Secret watch, the review before it.
    assert_eq!(
        names(&NEEDED[7..]),
        [
            "list secrets",
            "watch secrets",
            "create subjectaccessreviews.authorization.k8s.io"
        ]
    );
}

#[test]
fn stale_endpoints_fail_only_when_served_from_an_unhealthy_remote() {
    use crate::{model::StaleAction::*, multicluster::stale::StalePolicy};
    let now = at(10_000);
    let policy = |action| StalePolicy {
        action,
        after: Duration::from_secs(60),
    };
    // Unreachable for 90 s: past `after`, so the policy is in force.
    let stale = |action| Staleness::at(policy(action), Some(at(9_910)), now);
    let cases = [
        (true, 12, None, Outcome::Ok, "all current"),
        (false, 0, None, Outcome::Ok, "no endpoints"),
        (
            false,
            13,
            None,
            Outcome::Fail,
            "13 endpoints served from its last synced state",
        ),
        (
            false,
            13,
            Some(stale(Keep)),
            Outcome::Fail,
            "out of date; its API server unreachable for 1m 30s",
        ),
        (
            false,
            13,
            Some(stale(Deprioritize)),
            Outcome::Warning,
            "behind every other endpoint",
        ),
        (
            false,
            13,
            Some(stale(Drop)),
            Outcome::Ok,
            "not served (stale policy: drop)",
        ),
        // Not yet past `after`: still served as they were.
        (
            false,
            13,
            Some(Staleness::at(policy(Drop), Some(at(9_990)), now)),
            Outcome::Fail,
            "unreachable for 10s",
        ),
    ];
    for (healthy, n, staleness, result, detail) in cases {
        let r = stale_row("c2", healthy, n, staleness.as_ref(), now);
        assert_eq!(r.result, result, "{}", r.detail);
        assert!(r.detail.contains(detail), "{}", r.detail);
    }
}

#[test]
fn event_and_gateway_lines() {
    let now = at(1000);
    assert_eq!(event_row("c2", Some(at(988)), now).detail, "12s ago");
    assert_eq!(event_row("c2", None, now).result, Outcome::Warning);
    let gw = NetworkGateway {
        network: "network2".into(),
        cluster: Some("c2".into()),
        address: "192.0.2.7".parse().unwrap(),
        port: 15443,
        hostname: Some("gw.example".into()),
    };
    let ok = gateway_row(&gw, &Ok(()));
    assert_eq!((ok.cluster.as_str(), ok.result), ("c2", Outcome::Ok));
    assert_eq!(
        ok.detail,
        "network network2 gateway 192.0.2.7:15443 (gw.example) accepts connections"
    );
    let down = gateway_row(&gw, &Err("Connection refused (os error 111)".into()));
    assert_eq!(down.result, Outcome::Fail);
    assert!(
        down.detail
            .ends_with("unreachable from meshd: Connection refused (os error 111)")
    );
    let ips = BTreeSet::from(["192.0.2.7".parse().unwrap()]);
    assert_eq!(name_row("gw.example", &Ok(ips)).result, Outcome::Ok);
    assert_eq!(name_row("gw.example", &Ok(BTreeSet::new())).result, Outcome::Fail);
    let nx = name_row("gw.invalid", &Err("failed to lookup".into()));
    assert_eq!((nx.cluster.as_str(), nx.result), ("-", Outcome::Fail));
}
