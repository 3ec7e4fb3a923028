//! The real `meshd` binary: readiness, metrics, graceful SIGTERM, and config files at start and reload.

use crate::common;

use std::time::Duration;

use tokio::time::Instant;

use common::{Meshd, eventually, http_get};

const START: Duration = Duration::from_secs(60);

#[test]
fn starts_ready_serves_metrics_and_exits_zero_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut meshd = Meshd::start(dir.path(), &["--drain-deadline", "5s"]);
    meshd.wait_ready(START);

    for addr in [meshd.http, meshd.monitoring] {
        let (code, body) = http_get(addr, "/metrics").unwrap();
        assert_eq!(code, 200);
        let build = format!("meshd_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"));
        assert!(body.lines().any(|l| l == build), "{body}");
        assert!(
            body.trim_end().ends_with("# EOF"),
            "OpenMetrics text ends with # EOF"
        );
        let (code, body) = http_get(addr, "/version").unwrap();
        assert_eq!(code, 200);
        assert!(body.contains(env!("CARGO_PKG_VERSION")), "{body}");
        let (code, body) = http_get(addr, "/debug").unwrap();
        assert_eq!(code, 200);
        assert!(body.contains("/debug/configz"), "{body}");
    }

    meshd.terminate();
    let t = Instant::now();
    let status = meshd.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "exit status {status:?}\n{}", meshd.log());
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "exited within the drain deadline"
    );
    assert!(meshd.log().contains("drained"), "{}", meshd.log());
}

#[test]
fn not_ready_names_what_is_pending() {
    // A config cluster that never answers keeps meshd not ready, and /ready says why.
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{}\n\
             contexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n\
             users:\n- name: u\n  user: {{token: t}}\n",
            common::free_port()
        ),
    )
    .unwrap();
    let meshd = Meshd::start(dir.path(), &["--kubeconfig", kubeconfig.to_str().unwrap()]);
    let body = eventually("/ready 503", START, || match http_get(meshd.http, "/ready") {
        Ok((503, body)) if body.contains("config cluster") => Some(body),
        _ => None,
    });
    assert!(body.starts_with("not ready: waiting for"), "{body}");
}

#[test]
fn bad_mesh_networks_at_start_is_a_clear_fatal_error() {
    let cases = [
        (
            "networks:\n  n1:\n    endpoints:\n    - fromCidr: 10.0.0.0/40\n",
            "is not a valid CIDR",
        ),
        (
            "networks:\n  n1:\n    gateways:\n    - hostname: gw.example.com\n      port: 15443\n",
            "unknown field `hostname`",
        ),
        ("networks:\n  n1: [unclosed\n", "line 2"),
    ];
    for (yaml, problem) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("networks.yaml");
        std::fs::write(&path, yaml).unwrap();
        let mut meshd = Meshd::start(dir.path(), &["--mesh-networks", path.to_str().unwrap()]);
        let status = meshd.wait_exit(START);
        let log = meshd.log();
        assert!(!status.success(), "{yaml}: exit {status:?}");
        assert!(
            log.contains(&format!("meshNetworks file {}", path.display())),
            "{yaml}: {log}"
        );
        assert!(log.contains(problem), "{yaml}: want {problem:?} in {log}");
    }
}

#[test]
fn reload_keeps_the_last_good_value_and_counts_errors() {
    let dir = tempfile::tempdir().unwrap();
    let nets = dir.path().join("networks.yaml");
    let mesh = dir.path().join("mesh.yaml");
    std::fs::write(
        &nets,
        "networks:\n  net-a:\n    endpoints:\n    - fromRegistry: cluster1\n",
    )
    .unwrap();
    std::fs::write(&mesh, "trustDomain: first.example\nsomeFutureField: 1\n").unwrap();
    let meshd = Meshd::start(
        dir.path(),
        &[
            "--mesh-networks",
            nets.to_str().unwrap(),
            "--mesh-config",
            mesh.to_str().unwrap(),
            "--config-poll",
            "50ms",
        ],
    );
    meshd.wait_ready(START);
    let configz = || http_get(meshd.monitoring, "/debug/configz").unwrap().1;
    assert!(configz().contains("net-a") && configz().contains("first.example"));
    assert!(
        meshd.log().contains("someFutureField"),
        "unknown mesh config field is warned about"
    );

    std::fs::write(
        &nets,
        "networks:\n  net-b:\n    endpoints:\n    - fromCidr: 10.1.0.0/16\n",
    )
    .unwrap();
    std::fs::write(&mesh, "trustDomain: second.example\n").unwrap();
    eventually("reloaded config", START, || {
        let c = configz();
        (c.contains("net-b") && c.contains("second.example") && !c.contains("net-a")).then_some(())
    });

    std::fs::write(
        &nets,
        "networks:\n  net-c:\n    gateways:\n    - address: 1.2.3.4\n      port: 99999\n",
    )
    .unwrap();
    let metric = eventually("reload error metric", START, || {
        let m = http_get(meshd.monitoring, "/metrics").unwrap().1;
        m.lines()
            .any(|l| l == "meshd_config_reload_errors_total{config=\"meshNetworks\"} 1")
            .then_some(m)
    });
    assert!(
        metric.contains("meshd_config_reloads_total{config=\"meshNetworks\"} 1"),
        "{metric}"
    );
    let c = configz();
    assert!(
        c.contains("net-b") && !c.contains("net-c"),
        "last good meshNetworks stays in force: {c}"
    );
    assert!(
        meshd.log().contains("port 99999 is not in 1-65535"),
        "{}",
        meshd.log()
    );
}
