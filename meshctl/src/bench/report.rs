//! What a run measured: the JSON report, the per-change CSV, the short table, and the percentile
//! arithmetic behind them.

use std::{fmt::Write as _, time::Duration};

use serde::Serialize;

use super::{Config, target::Usage};

/// Everything a run measured.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// What was run.
    pub config: Config,
    /// Where it ran.
    pub machine: Machine,
    /// Initial configuration of every client.
    pub initial: Initial,
    /// Endpoint changes under churn.
    pub convergence: Convergence,
    /// What the clients received.
    pub traffic: Traffic,
    /// The control plane's cost, when its process is known.
    pub target: Option<TargetCost>,
    /// Whether every client ended with exactly the truth (when verified).
    pub verified: Option<Verification>,
    /// One row per change.
    #[serde(skip)]
    pub events: Vec<EventRow>,
}

/// The machine line.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Machine {
    /// Logical CPUs.
    pub nproc: usize,
    /// `/proc/cpuinfo` model name.
    pub cpu: String,
    /// Total memory, GiB.
    pub memory_gib: f64,
    /// 1-minute load average when the run started (other work on the machine).
    pub load_at_start: f64,
}

impl Machine {
    /// This machine, now.
    pub fn current() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        Self {
            nproc: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu: cpuinfo
                .lines()
                .find_map(|l| l.strip_prefix("model name"))
                .and_then(|l| l.split_once(':'))
                .map_or_else(|| "unknown".into(), |(_, m)| m.trim().to_owned()),
            memory_gib: meminfo
                .lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
                .map_or(0.0, |kib| kib / (1024.0 * 1024.0)),
            load_at_start: loadavg
                .split_whitespace()
                .next()
                .and_then(|l| l.parse().ok())
                .unwrap_or(0.0),
        }
    }

    /// `2 × AMD EPYC, 23.4 GiB, load 1.7 at start`.
    pub fn line(&self) -> String {
        format!(
            "{} × {}, {:.1} GiB, load {:.1} at start",
            self.nproc, self.cpu, self.memory_gib, self.load_at_start
        )
    }
}

/// Latency percentiles, milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `samples`.
    pub fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let rank = |p: f64| -> f64 {
            match samples.len() {
                0 => 0.0,
                n => ms(samples[((p * n as f64).ceil() as usize).clamp(1, n) - 1]),
            }
        };
        Self {
            p50: rank(0.50),
            p99: rank(0.99),
            max: rank(1.0),
        }
    }
}

/// Initial configuration.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Initial {
    /// Clients that were to be configured (stalled ones excluded).
    pub clients: usize,
    /// Clients that got their full config.
    pub configured: usize,
    /// Stream accepted → every CDS and EDS resource received.
    pub since_accept_ms: Percentiles,
    /// First dial (including refusals by the new-stream rate limit) → configured.
    pub since_dial_ms: Percentiles,
    /// Streams refused or broken and retried.
    pub retries: u64,
    /// First client dialled → last client configured, seconds.
    pub all_configured_s: f64,
}

/// Convergence under churn.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Convergence {
    /// Changes written.
    pub changes: usize,
    /// Changes every client saw.
    pub converged: usize,
    /// Per change: written → the last client received it.
    pub all_clients_ms: Percentiles,
    /// Per (change, client): written → that client received it.
    pub per_client_ms: Percentiles,
}

/// What the clients received.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Traffic {
    /// Responses during churn, per second.
    pub pushes_per_s: f64,
    /// Responses in the whole run.
    pub responses: u64,
    /// Resources in the whole run.
    pub resources: u64,
    /// Encoded response bytes in the whole run (protobuf, without HTTP/2 framing).
    pub bytes: u64,
    /// Encoded bytes during churn, per second.
    pub churn_bytes_per_s: f64,
}

/// The control plane's cost.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetCost {
    /// Ready, no client yet.
    pub ready: Usage,
    /// Every client configured.
    pub configured: Usage,
    /// End of the run.
    pub end: Usage,
    /// CPU seconds used during churn.
    pub churn_cpu_seconds: f64,
}

/// The final state of every client against the truth.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// Clients checked.
    pub clients: usize,
    /// `client: resource: what differs`, at most a few.
    pub mismatches: Vec<String>,
}

/// One change.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRow {
    /// Seconds after churn started.
    pub at_s: f64,
    /// Cluster written to.
    pub cluster: usize,
    /// Service changed.
    pub service: usize,
    /// Clients that saw it.
    pub clients: usize,
    /// Written → every client, ms (`None`: some never did).
    pub all_clients_ms: Option<f64>,
    /// Median over clients, ms.
    pub median_ms: f64,
}

impl Report {
    /// The per-change CSV.
    pub fn csv(&self) -> String {
        let mut out = String::from("at_s,cluster,service,clients,all_clients_ms,median_ms\n");
        for e in &self.events {
            let all = e.all_clients_ms.map(|v| format!("{v:.3}")).unwrap_or_default();
            let _ = writeln!(
                out,
                "{:.3},{},{},{},{all},{:.3}",
                e.at_s, e.cluster, e.service, e.clients, e.median_ms
            );
        }
        out
    }

    /// The short table printed after a run.
    pub fn table(&self) -> String {
        let c = &self.config;
        let mut out = format!(
            "meshd bench: {} clusters × {} services × {} endpoints, {} {:?} clients ({} stalled), \
             churn {}/s for {:?}\nmachine: {}\n\n",
            c.shape.clusters,
            c.shape.services,
            c.shape.endpoints,
            c.clients,
            c.flavor,
            c.stalled,
            c.churn_per_s,
            c.duration,
            self.machine.line()
        );
        let pct = |p: &Percentiles| format!("{:>9.1} {:>9.1} {:>9.1}", p.p50, p.p99, p.max);
        let i = &self.initial;
        let v = &self.convergence;
        let _ = writeln!(out, "{:<36} {:>9} {:>9} {:>9}", "", "p50 ms", "p99 ms", "max ms");
        let _ = writeln!(
            out,
            "{:<36} {}",
            "initial config (from accept)",
            pct(&i.since_accept_ms)
        );
        let _ = writeln!(
            out,
            "{:<36} {}",
            "initial config (from first dial)",
            pct(&i.since_dial_ms)
        );
        let _ = writeln!(
            out,
            "{:<36} {}",
            "convergence (all clients)",
            pct(&v.all_clients_ms)
        );
        let _ = writeln!(
            out,
            "{:<36} {}",
            "convergence (per client)",
            pct(&v.per_client_ms)
        );
        let _ = writeln!(
            out,
            "\nconfigured {}/{} clients, all by {:.2} s ({} retries); converged {}/{} changes",
            i.configured, i.clients, i.all_configured_s, i.retries, v.converged, v.changes
        );
        let t = &self.traffic;
        let _ = writeln!(
            out,
            "traffic: {:.0} pushes/s, {:.1} MiB/s during churn; {} responses, {:.1} MiB in all",
            t.pushes_per_s,
            t.churn_bytes_per_s / (1 << 20) as f64,
            t.responses,
            t.bytes as f64 / (1 << 20) as f64
        );
        if let Some(cost) = &self.target {
            let _ = writeln!(
                out,
                "target: RSS {:.0} MiB ready, {:.0} MiB configured, {:.0} MiB end (peak {:.0}); \
                 CPU {:.1} s total, {:.1} s during churn",
                cost.ready.rss_mib,
                cost.configured.rss_mib,
                cost.end.rss_mib,
                cost.end.peak_rss_mib,
                cost.end.cpu_seconds,
                cost.churn_cpu_seconds
            );
        }
        if let Some(v) = &self.verified {
            let verdict = if v.mismatches.is_empty() {
                "every client holds the truth".to_owned()
            } else {
                format!(
                    "{} mismatches, e.g. {:?}",
                    v.mismatches.len(),
                    v.mismatches.first()
                )
            };
            let _ = writeln!(out, "verified {} clients: {verdict}", v.clients);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let ms = |v: u64| Duration::from_millis(v);
        let p = Percentiles::of((1..=100).map(ms).collect());
        assert_eq!((p.p50, p.p99, p.max), (50.0, 99.0, 100.0));
        assert_eq!(Percentiles::of(vec![]), Percentiles::default());
        assert_eq!(Percentiles::of(vec![ms(7)]).p50, 7.0);
    }
}
