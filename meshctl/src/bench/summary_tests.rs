use serde_json::json;

use super::*;

/// A report.json as a run writes it, reduced to the fields the summary reads.
fn report(clients: u64, rss_ready: f64, rss_configured: f64, churn_cpu: f64, p99: f64) -> Value {
    json!({
        "config": {"shape": {"clusters": 10, "services": 1000, "endpoints": 10}, "clients": clients,
                   "scope": null},
        "machine": {"loadAtStart": 0.5},
        "initial": {"sinceAcceptMs": {"p50": 20.0, "p99": 100.0, "max": 300.0}, "bytesPerClient": 2097152.0},
        "convergence": {"changes": 100, "converged": 100,
                        "allClientsMs": {"p50": 150.0, "p99": p99, "max": p99}},
        "target": {"ready": {"rss_mib": rss_ready}, "configured": {"rss_mib": rss_configured},
                   "churnCpuSeconds": churn_cpu},
        "cost": {"targetMsPerChangePer1kStreams": churn_cpu * 1e3 / 100.0 / (clients as f64 / 1e3),
                 "churn": {"tool": {"clientsS": 1.0, "simsS": 0.5, "otherS": 0.1}}}
    })
}

#[test]
fn growth_is_the_figure_ratio_against_the_parameter_ratio() {
    let cases = [
        // (parameter, figure, growth)
        ((100.0, 1000.0), (50.0, 52.0), Some(Growth::Flat)),
        ((100.0, 1000.0), (50.0, 40.0), Some(Growth::Flat)),
        ((100.0, 1000.0), (50.0, 200.0), Some(Growth::SubLinear)),
        ((100.0, 1000.0), (50.0, 500.0), Some(Growth::Linear)),
        ((100.0, 1000.0), (50.0, 560.0), Some(Growth::Linear)),
        ((100.0, 1000.0), (50.0, 1500.0), Some(Growth::SuperLinear)),
        ((1.0, 3.0), (10.0, 90.0), Some(Growth::SuperLinear)),
        ((1.0, 1.0), (10.0, 90.0), None),
        ((1.0, 3.0), (0.0, 90.0), None),
    ];
    for (param, figure, want) in cases {
        assert_eq!(Growth::classify(param, figure), want, "{param:?} {figure:?}");
    }
}

#[test]
fn a_report_reads_as_a_point_of_the_varied_parameter() {
    let r = report(300, 115.0, 150.0, 2.0, 190.0);
    let p = Point::of(&r, Vary::Clients).expect("point");
    assert_eq!((p.param, p.units), (300.0, 300.0));
    assert_eq!(p.cpu_per_change, Some(20.0));
    assert_eq!(p.bytes_per_client, Some(2.0));
    assert_eq!(p.tool_churn, Some((1.0, 0.5)));
    let e = Point::of(&r, Vary::Endpoints).expect("point");
    assert_eq!(
        (e.param, e.units),
        (10.0, 100_000.0),
        "units: every endpoint of the mesh"
    );
    assert_eq!(
        Point::of(&r, Vary::Hosts).expect("point").param,
        1000.0,
        "no scope: all"
    );
    assert!(Point::of(&json!({"config": {}}), Vary::Clients).is_err());
}

#[test]
fn the_table_lists_every_run_in_order_and_flags_super_linear_steps() {
    // RSS grows linearly per stream, CPU per change super-linearly from 300 to 1,000 streams.
    let points: Vec<Point> = [
        report(1000, 115.0, 225.0, 20.0, 200.0),
        report(100, 115.0, 126.0, 0.5, 180.0),
        report(300, 115.0, 148.0, 1.5, 185.0),
    ]
    .iter()
    .map(|r| Point::of(r, Vary::Clients).expect("point"))
    .collect::<Vec<_>>();
    let mut points = points;
    points.sort_by(|a, b| a.param.total_cmp(&b.param));
    let md = markdown(&points, Vary::Clients);
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| ")).collect();
    assert_eq!(
        rows.len(),
        1 + 3 + 1 + 3,
        "header, 3 runs, header, 2 steps + overall:\n{md}"
    );
    assert!(rows[1].starts_with("| 100 | 115 / 126 | 5.0 | 50.0 | 150 / 180 | 100 | 2.00 | 1.0 / 0.5"));
    assert!(rows[3].starts_with("| 1000 |"), "{md}");
    let step = |from: &str| rows.iter().find(|r| r.starts_with(from)).copied().unwrap_or("");
    // 100 → 300: RSS +22 MiB for 200 streams = 112.64 KiB each; CPU 5 → 15 ms: linear.
    let first = step("| 100 → 300");
    assert!(first.contains("| 0.00 KiB | 112.64 KiB |"), "{first}");
    assert!(first.contains("×3.00 linear"), "{first}");
    // 300 → 1,000: CPU per change 15 → 200 ms, ×13.3 for ×3.3 streams.
    let second = step("| 300 → 1000");
    assert!(second.contains("**super-linear**"), "{second}");
    assert!(step("| 100 → 1000").contains("**super-linear**"), "overall row");
    let svg = svg(&points, Vary::Clients);
    assert_eq!(svg.matches("<polyline").count(), 6, "one curve per figure");
}
