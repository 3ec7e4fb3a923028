//! istiod's `ValidateDestinationRule` (`pkg/config/validation/validation.go`, `agent/validation.go`)
//! on meshd's DestinationRule model: host, subsets, traffic policies (load balancer with warmup and
//! locality settings, connection pool, outlier detection, client TLS), `exportTo`, selector.

use std::collections::BTreeSet;

use super::{
    destination_rule::{
        ClientTlsSettings, ConnectionPoolSettings, DestinationRule, H2UpgradePolicy, LoadBalancerSettings,
        LocalityLbSetting, OutlierDetection, TlsMode, TrafficPolicy,
    },
    validate::{self, Report},
};

/// istiod's `ValidateDestinationRule`.
pub(crate) fn validate(dr: &DestinationRule, namespace: &str, r: &mut Report) {
    validate::wildcard_domain(&dr.host, "spec.host", r);
    if let Some(tp) = &dr.traffic_policy {
        traffic_policy(tp, "spec.trafficPolicy", true, r);
    }
    let mut names = BTreeSet::new();
    for (i, s) in dr.subsets.iter().enumerate() {
        let f = format!("spec.subsets[{i}]");
        if s.name.is_empty() {
            r.error(format!("{f}.name"), "subset name is required");
        } else if !validate::is_dns1123_label(&s.name) {
            r.error(
                format!("{f}.name"),
                format!("{:?} is not a valid DNS-1123 label", s.name),
            );
        } else if !names.insert(s.name.as_str()) {
            r.error(format!("{f}.name"), format!("duplicate subset name {:?}", s.name));
        }
        validate::labels(&s.labels, &format!("{f}.labels"), r);
        if let Some(tp) = &s.traffic_policy {
            traffic_policy(tp, &format!("{f}.trafficPolicy"), true, r);
        }
    }
    validate::export_to(&dr.export_to, namespace, false, "spec.exportTo", r);
    if let Some(sel) = &dr.workload_selector {
        sel.validate("spec.workloadSelector", r);
        if dr.export_to.iter().any(|e| e != "." && e != namespace) {
            r.error(
                "spec.exportTo",
                "a DestinationRule with a workloadSelector may only be exported to its own namespace",
            );
        }
    }
}

fn traffic_policy(tp: &TrafficPolicy, f: &str, top: bool, r: &mut Report) {
    let empty = tp.load_balancer.is_none()
        && tp.connection_pool.is_none()
        && tp.outlier_detection.is_none()
        && tp.tls.is_none()
        && tp.port_level_settings.is_empty()
        && tp.tunnel.is_none()
        && tp.proxy_protocol.is_none();
    if empty {
        r.error(f, "a traffic policy must set at least one field");
    }
    if tp.tunnel.is_some() && tp.proxy_protocol.is_some() {
        r.error(f, "tunnel and proxyProtocol cannot both be set");
    }
    if let Some(v) = &tp.tunnel {
        tunnel(v, &format!("{f}.tunnel"), r);
    }
    if let Some(v) = &tp.proxy_protocol {
        let pf = format!("{f}.proxyProtocol");
        if let Some(p) = validate::typed::<ProxyProtocol>(v, &pf, r)
            && !matches!(p.version.as_str(), "" | "V1" | "V2")
        {
            r.error(
                format!("{pf}.version"),
                format!("unknown PROXY protocol version {:?}", p.version),
            );
        }
    }
    r.unsupported(format!("{f}.tunnel"), tp.tunnel.is_some());
    r.unsupported(format!("{f}.proxyProtocol"), tp.proxy_protocol.is_some());
    let outlier = tp.outlier_detection.is_some();
    settings(
        &tp.load_balancer,
        &tp.connection_pool,
        &tp.outlier_detection,
        &tp.tls,
        f,
        outlier,
        r,
    );
    if !top && !tp.port_level_settings.is_empty() {
        r.error(format!("{f}.portLevelSettings"), "not allowed here");
    }
    for (i, p) in tp.port_level_settings.iter().enumerate() {
        let pf = format!("{f}.portLevelSettings[{i}]");
        match p.port {
            None => r.error(format!("{pf}.port"), "port is required"),
            Some(port) => validate::port(port.number, &format!("{pf}.port.number"), r),
        }
        if p.load_balancer.is_none()
            && p.connection_pool.is_none()
            && p.outlier_detection.is_none()
            && p.tls.is_none()
        {
            r.error(
                &pf,
                "port traffic policy must set one of loadBalancer, connectionPool, outlierDetection or tls",
            );
        }
        let outlier = outlier || p.outlier_detection.is_some();
        settings(
            &p.load_balancer,
            &p.connection_pool,
            &p.outlier_detection,
            &p.tls,
            &pf,
            outlier,
            r,
        );
    }
}

fn settings(
    lb: &Option<LoadBalancerSettings>,
    pool: &Option<ConnectionPoolSettings>,
    od: &Option<OutlierDetection>,
    tls: &Option<ClientTlsSettings>,
    f: &str,
    has_outlier: bool,
    r: &mut Report,
) {
    if let Some(lb) = lb {
        load_balancer(lb, &format!("{f}.loadBalancer"), has_outlier, r);
    }
    if let Some(pool) = pool {
        connection_pool(pool, &format!("{f}.connectionPool"), r);
    }
    if let Some(od) = od {
        outlier_detection(od, &format!("{f}.outlierDetection"), r);
    }
    if let Some(tls) = tls {
        client_tls(tls, &format!("{f}.tls"), r);
    }
}

/// The largest maglev table size Envoy takes.
const MAGLEV_MAX_TABLE: u64 = 5_000_011;

fn load_balancer(lb: &LoadBalancerSettings, f: &str, has_outlier: bool, r: &mut Report) {
    if let Some(ch) = &lb.consistent_hash {
        let cf = format!("{f}.consistentHash");
        if ch.http_cookie.as_ref().is_some_and(|c| c.name.is_empty()) {
            r.error(format!("{cf}.httpCookie.name"), "cookie name is required");
        }
        if let Some(m) = &ch.maglev
            && (!is_prime(m.table_size) || m.table_size >= MAGLEV_MAX_TABLE)
        {
            r.error(
                format!("{cf}.maglev.tableSize"),
                format!("{} must be a prime below {MAGLEV_MAX_TABLE}", m.table_size),
            );
        }
        if ch.minimum_ring_size.is_some_and(|n| n != 0) {
            r.warn(
                format!("{cf}.minimumRingSize"),
                "deprecated: use ringHash.minimumRingSize",
            );
        }
        if ch.minimum_ring_size.is_some() && (ch.ring_hash.is_some() || ch.maglev.is_some()) {
            r.error(
                &cf,
                "the deprecated minimumRingSize cannot be set with ringHash or maglev",
            );
        }
        let keys = [
            ch.http_header_name.is_some(),
            ch.http_cookie.is_some(),
            ch.use_source_ip.is_some(),
            ch.http_query_parameter_name.is_some(),
        ];
        if keys.iter().filter(|k| **k).count() > 1 {
            r.error(&cf, "only one hash key may be set");
        }
    }
    if lb.simple.is_some() && lb.consistent_hash.is_some() {
        r.error(f, "only one of simple or consistentHash may be set");
    }
    if let Some(d) = lb.warmup_duration_secs {
        validate::duration(d, &format!("{f}.warmupDurationSecs"), r);
    }
    r.unsupported(
        format!("{f}.warmupDurationSecs"),
        lb.warmup_duration_secs.is_some(),
    );
    if let Some(w) = &lb.warmup {
        let wf = format!("{f}.warmup");
        match w.duration {
            None => r.error(format!("{wf}.duration"), "duration is required"),
            Some(d) => validate::duration(d, &format!("{wf}.duration"), r),
        }
        if let Some(p) = w.minimum_percent.as_ref().and_then(serde_json::Number::as_f64) {
            validate::percent(p, &format!("{wf}.minimumPercent"), r);
        }
        if let Some(a) = w.aggression.as_ref().and_then(serde_json::Number::as_f64)
            && a < 1.0
        {
            r.error(
                format!("{wf}.aggression"),
                format!("aggression {a} must be at least 1"),
            );
        }
        r.unsupported(wf, true);
    }
    if let Some(loc) = &lb.locality_lb_setting {
        locality(loc, &format!("{f}.localityLbSetting"), has_outlier, r);
    }
}

fn is_prime(n: u64) -> bool {
    n >= 2 && (2..).take_while(|d| d * d <= n).all(|d| !n.is_multiple_of(d))
}

/// istiod's `ValidateLocalityLbSetting`.
fn locality(l: &LocalityLbSetting, f: &str, has_outlier: bool, r: &mut Report) {
    if !l.distribute.is_empty() && !l.failover.is_empty() {
        r.error(f, "distribute and failover cannot both be set");
    }
    if !l.failover.is_empty()
        && l.failover_priority
            .iter()
            .any(|p| p.starts_with("topology.kubernetes.io/") || p == "topology.istio.io/subzone")
    {
        r.error(
            format!("{f}.failoverPriority"),
            "region/zone/subzone labels cannot be used with failover",
        );
    }
    let mut from = Vec::new();
    for (i, d) in l.distribute.iter().enumerate() {
        let df = format!("{f}.distribute[{i}]");
        from.push(d.from.as_str());
        let mut total = 0u64;
        for (loc, w) in &d.to {
            if !(1..=100).contains(w) {
                r.error(format!("{df}.to.{loc}"), format!("weight {w} is not in 1..100"));
            }
            total += u64::from(*w);
        }
        if total != 100 {
            r.error(format!("{df}.to"), format!("weights sum to {total}, not 100"));
        }
        localities(d.to.keys().map(String::as_str), &format!("{df}.to"), r);
    }
    localities(from.into_iter(), &format!("{f}.distribute"), r);
    for (i, fo) in l.failover.iter().enumerate() {
        let ff = format!("{f}.failover[{i}]");
        if fo.from == fo.to {
            r.error(&ff, "failover must name two different regions");
        }
        if fo.from.contains('/') || fo.to.contains('/') {
            r.error(&ff, "failover is between regions: no zone or subzone");
        }
        for (side, region) in [("from", &fo.from), ("to", &fo.to)] {
            if region.contains('*') {
                r.error(format!("{ff}.{side}"), "a failover region must not contain `*`");
            }
        }
    }
    if (!l.failover.is_empty() || !l.failover_priority.is_empty()) && !has_outlier {
        r.warn(f, "failover needs outlierDetection to take effect");
    }
}

/// Localities: at most one `*`, at the end; no empty segment; none overlapping another.
fn localities<'a>(locs: impl Iterator<Item = &'a str>, f: &str, r: &mut Report) {
    let mut seen: Vec<Vec<&str>> = Vec::new();
    for loc in locs {
        let stars = loc.matches('*').count();
        if stars > 1 || (stars == 1 && !loc.ends_with('*')) {
            r.error(f, format!("locality {loc:?}: at most one `*`, at the end"));
            continue;
        }
        let parts: Vec<&str> = loc.splitn(3, '/').collect();
        if parts.iter().any(|p| p.is_empty()) {
            r.error(
                f,
                format!("locality {loc:?} has an empty region, zone or subzone"),
            );
            continue;
        }
        // Two localities overlap when one is a prefix of the other, `*` matching anything.
        let covers = |a: &[&str], b: &[&str]| {
            a.iter()
                .zip(b.iter())
                .all(|(x, y)| x == y || *x == "*" || *y == "*")
        };
        if seen.iter().any(|s| covers(s, &parts)) {
            r.error(f, format!("locality {loc:?} overlaps one given before"));
        }
        seen.push(parts);
    }
}

/// istiod's `validateConnectionPool` (also a Sidecar's pools).
pub(crate) fn connection_pool(p: &ConnectionPoolSettings, f: &str, r: &mut Report) {
    if p.tcp.is_none() && p.http.is_none() {
        r.error(f, "one of tcp or http is required");
    }
    let mut counts = Vec::new();
    if let Some(t) = &p.tcp {
        counts.push(("tcp.maxConnections", t.max_connections));
        for (name, d) in [
            ("connectTimeout", t.connect_timeout),
            ("maxConnectionDuration", t.max_connection_duration),
            // 0s turns the idle timeout off.
            ("idleTimeout", t.idle_timeout.filter(|d| !d.is_zero())),
        ] {
            if let Some(d) = d {
                validate::duration(d, &format!("{f}.tcp.{name}"), r);
            }
        }
        if let Some(ka) = &t.tcp_keepalive {
            for (name, d) in [("time", ka.time), ("interval", ka.interval)] {
                if let Some(d) = d {
                    validate::duration(d, &format!("{f}.tcp.tcpKeepalive.{name}"), r);
                }
            }
        }
        r.unsupported(format!("{f}.tcp.tcpKeepalive"), t.tcp_keepalive.is_some());
    }
    if let Some(h) = &p.http {
        counts.extend([
            ("http.http1MaxPendingRequests", h.http1_max_pending_requests),
            ("http.http2MaxRequests", h.http2_max_requests),
            ("http.maxRequestsPerConnection", h.max_requests_per_connection),
            ("http.maxRetries", h.max_retries),
            ("http.maxConcurrentStreams", h.max_concurrent_streams),
        ]);
        if let Some(d) = h.idle_timeout {
            validate::duration(d, &format!("{f}.http.idleTimeout"), r);
        }
        if h.h2_upgrade_policy == Some(H2UpgradePolicy::Upgrade) && h.use_client_protocol == Some(true) {
            r.error(
                format!("{f}.http"),
                "useClientProtocol cannot be set with h2UpgradePolicy UPGRADE",
            );
        }
    }
    for (name, v) in counts {
        if let Some(v) = v.filter(|v| *v < 0) {
            r.error(format!("{f}.{name}"), format!("{v} is negative"));
        }
    }
}

fn outlier_detection(od: &OutlierDetection, f: &str, r: &mut Report) {
    for (name, v) in [
        ("maxEjectionPercent", od.max_ejection_percent),
        ("minHealthPercent", od.min_health_percent),
    ] {
        if let Some(v) = v.filter(|v| !(0..=100).contains(v)) {
            r.error(
                format!("{f}.{name}"),
                format!("{v} is not a percentage in 0..100"),
            );
        }
    }
    if od.consecutive_errors.is_some_and(|v| v < 0) {
        r.error(format!("{f}.consecutiveErrors"), "must not be negative");
    }
    if od.consecutive_errors.is_some_and(|v| v != 0) {
        r.warn(
            format!("{f}.consecutiveErrors"),
            "deprecated: use consecutiveGatewayErrors or consecutive5xxErrors",
        );
    }
    if od.consecutive_local_origin_failures.is_some() && !od.split_external_local_origin_errors {
        r.error(
            format!("{f}.consecutiveLocalOriginFailures"),
            "needs splitExternalLocalOriginErrors",
        );
    }
    for (name, d) in [
        ("interval", od.interval),
        ("baseEjectionTime", od.base_ejection_time),
    ] {
        if let Some(d) = d {
            validate::duration(d, &format!("{f}.{name}"), r);
        }
    }
}

/// istiod's `ValidateTLS` for clients: what `insecureSkipVerify` and `credentialName` exclude, and
/// MUTUAL's certificate and key.
fn client_tls(tls: &ClientTlsSettings, f: &str, r: &mut Report) {
    let sans = !tls.subject_alt_names.is_empty();
    if tls.insecure_skip_verify == Some(true) {
        let conflict = match tls.mode {
            TlsMode::Simple => !tls.ca_certificates.is_empty() || !tls.credential_name.is_empty() || sans,
            TlsMode::Mutual => !tls.ca_certificates.is_empty() || sans,
            TlsMode::Disable | TlsMode::IstioMutual => false,
        };
        if conflict {
            r.error(
                format!("{f}.insecureSkipVerify"),
                "caCertificates, subjectAltNames (and for SIMPLE credentialName) cannot be set with insecureSkipVerify",
            );
        }
    }
    let credential = matches!(tls.mode, TlsMode::Simple | TlsMode::Mutual) && !tls.credential_name.is_empty();
    if credential {
        let files = [
            &tls.client_certificate,
            &tls.ca_certificates,
            &tls.private_key,
            &tls.ca_crl,
        ];
        if files.iter().any(|s| !s.is_empty()) {
            r.error(
                format!("{f}.credentialName"),
                "clientCertificate, privateKey, caCertificates and caCrl cannot be set with credentialName",
            );
        }
    } else if tls.mode == TlsMode::Mutual {
        if tls.client_certificate.is_empty() {
            r.error(
                format!("{f}.clientCertificate"),
                "required for MUTUAL without credentialName",
            );
        }
        if tls.private_key.is_empty() {
            r.error(
                format!("{f}.privateKey"),
                "required for MUTUAL without credentialName",
            );
        }
    }
    r.unsupported(format!("{f}.caCrl"), !tls.ca_crl.is_empty());
}

/// Istio's `TrafficPolicy.TunnelSettings`, typed to be checked (meshd keeps it as JSON).
#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct Tunnel {
    protocol: String,
    target_host: String,
    target_port: u32,
}

/// Istio's `TrafficPolicy.ProxyProtocol`, typed to be checked (meshd keeps it as JSON).
#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct ProxyProtocol {
    version: String,
}

/// istiod's `validateTunnelSettings`.
fn tunnel(v: &serde_json::Value, f: &str, r: &mut Report) {
    let Some(t) = validate::typed::<Tunnel>(v, f, r) else {
        return;
    };
    if !matches!(t.protocol.as_str(), "" | "CONNECT" | "POST") {
        r.error(
            format!("{f}.protocol"),
            "the tunnel protocol must be CONNECT or POST",
        );
    }
    let ip = t.target_host.parse::<std::net::IpAddr>().is_ok();
    if !ip && (!validate::is_dns_name(&t.target_host) || t.target_host.contains('*')) {
        r.error(
            format!("{f}.targetHost"),
            format!(
                "{:?} is not a fully qualified name or an IP address",
                t.target_host
            ),
        );
    }
    validate::port(t.target_port, &format!("{f}.targetPort"), r);
}
