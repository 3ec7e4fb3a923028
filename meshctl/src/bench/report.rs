//! What a run measured: the JSON report, the per-change CSV, the short table, and the percentile
//! arithmetic behind them.

use std::{fmt::Write as _, time::Duration};

use serde::Serialize;

use super::{Config, cost::ToolCpu, target::Usage};

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
    /// CPU per phase, the control plane's beside the load tool's own.
    pub cost: Costs,
    /// First simulator started → report, seconds.
    pub wall_s: f64,
    /// Whether every client ended with exactly the truth (when verified).
    pub verified: Option<Verification>,
    /// `--secret-storm`: what unrelated Secret updates caused.
    pub secret_storm: Option<super::storm::SecretStorm>,
    /// `--reconnect-storm`: every client resuming after a restart.
    pub reconnect_storm: Option<super::restart::ReconnectStorm>,
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
    /// 1-minute load average when the run ended (the run's own load included).
    pub load_at_end: f64,
}

impl Machine {
    /// This machine, now.
    pub fn current() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let load = Self::load();
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
            load_at_start: load,
            load_at_end: load,
        }
    }

    /// The 1-minute load average now.
    pub fn load() -> f64 {
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .next()
            .and_then(|l| l.parse().ok())
            .unwrap_or(0.0)
    }

    /// `2 × AMD EPYC, 23.4 GiB, load 1.7 at start, 2.3 at end`.
    pub fn line(&self) -> String {
        format!(
            "{} × {}, {:.1} GiB, load {:.1} at start, {:.1} at end",
            self.nproc, self.cpu, self.memory_gib, self.load_at_start, self.load_at_end
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
    /// Response bytes received before the churn, per client (its initial config, with any retries).
    pub bytes_per_client: f64,
}

/// Convergence under churn.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Convergence {
    /// Changes written.
    pub changes: usize,
    /// Changes every client saw (of a scoped run: every client whose Sidecar imports the service).
    pub converged: usize,
    /// Changes to a service no client's Sidecar imports (converged, without a latency).
    pub unwatched: usize,
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
    /// Responses from the churn's start until every change settled (pushes per change = this ÷
    /// changes ÷ clients: below 1 when the debounce coalesces changes).
    pub churn_responses: u64,
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

/// CPU seconds of one phase.
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Phase {
    /// The control plane's (when its process is known).
    pub target_cpu_s: Option<f64>,
    /// The load tool's, by part.
    pub tool: ToolCpu,
}

/// Who spent the CPU: connect (ready → every client configured) and churn (→ end of the run).
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Costs {
    /// Ready → every client configured.
    pub connect: Phase,
    /// Every client configured → every change settled.
    pub churn: Phase,
    /// The control plane's churn CPU, ms per change per 1,000 client streams.
    pub target_ms_per_change_per_1k_streams: Option<f64>,
    /// The tool's ADS clients' churn CPU, ms per change per 1,000 client streams.
    pub clients_ms_per_change_per_1k_streams: Option<f64>,
}

impl Costs {
    /// The figures of a run with `changes` changes and `streams` client streams.
    pub fn new(connect: Phase, churn: Phase, changes: usize, streams: usize) -> Self {
        Self {
            connect,
            churn,
            target_ms_per_change_per_1k_streams: churn
                .target_cpu_s
                .and_then(|s| per_change_per_1k(s, changes, streams)),
            clients_ms_per_change_per_1k_streams: per_change_per_1k(churn.tool.clients_s, changes, streams),
        }
    }
}

/// `cpu_s` as ms per change per 1,000 streams: comparable across runs of any size (`None`: no change
/// or no stream to divide by).
pub fn per_change_per_1k(cpu_s: f64, changes: usize, streams: usize) -> Option<f64> {
    (changes > 0 && streams > 0).then(|| cpu_s * 1e3 / changes as f64 / (streams as f64 / 1000.0))
}

/// The final state of every client against the truth.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// Clients checked.
    pub clients: usize,
    /// `client: resource: what differs`, at most a few.
    pub mismatches: Vec<String>,
    /// Clusters clients held besides their services' (the control plane's defaults), in all.
    pub other_clusters: Vec<String>,
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
    /// Clients that should (those whose Sidecar imports the service).
    pub expected: usize,
    /// Written → every client, ms (`None`: some never did).
    pub all_clients_ms: Option<f64>,
    /// Median over clients, ms.
    pub median_ms: f64,
}

impl Report {
    /// The per-change CSV.
    pub fn csv(&self) -> String {
        let mut out = String::from("at_s,cluster,service,clients,all_clients_ms,median_ms,expected\n");
        for e in &self.events {
            let all = e.all_clients_ms.map(|v| format!("{v:.3}")).unwrap_or_default();
            let _ = writeln!(
                out,
                "{:.3},{},{},{},{all},{:.3},{}",
                e.at_s, e.cluster, e.service, e.clients, e.median_ms, e.expected
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
        if let Some(scope) = &c.scope {
            let _ = writeln!(
                out,
                "scope: each client's Sidecar imports {} of {} services\n",
                scope.hosts, scope.services
            );
        }
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
        if v.unwatched > 0 {
            let _ = writeln!(out, "({} changes to services no client sees)", v.unwatched);
        }
        let _ = writeln!(
            out,
            "initial config: {:.2} MiB per client",
            i.bytes_per_client / (1 << 20) as f64
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
        out.push_str(&self.cost_lines());
        if let Some(s) = &self.secret_storm {
            let cpu = s
                .target_cpu_s
                .map_or(String::new(), |c| format!(", target CPU {c:.2} s"));
            let _ = writeln!(
                out,
                "secret storm: {} unrelated Secret updates in {:.2} s caused {} responses{cpu}",
                s.updates, s.write_s, s.responses
            );
        }
        if let Some(r) = &self.reconnect_storm {
            out.push_str(&r.line());
        }
        let _ = writeln!(out, "wall time {:.1} s", self.wall_s);
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

impl Report {
    /// CPU by phase and by whom, and the per-change figures.
    fn cost_lines(&self) -> String {
        let k = &self.cost;
        let target = |p: &Phase| {
            p.target_cpu_s
                .map_or_else(|| "?".to_owned(), |s| format!("{s:.1}"))
        };
        let mut out = String::new();
        for (name, p) in [("connect", &k.connect), ("churn", &k.churn)] {
            let _ = writeln!(
                out,
                "CPU s, {name:<7}: target {}, tool {:.1} (clients {:.1}, simulators {:.1}, other {:.1})",
                target(p),
                p.tool.total_s(),
                p.tool.clients_s,
                p.tool.sims_s,
                p.tool.other_s
            );
        }
        let ms = |v: Option<f64>| v.map_or_else(|| "?".to_owned(), |v| format!("{v:.1}"));
        let _ = writeln!(
            out,
            "CPU ms per change per 1,000 streams: target {}, tool's clients {}",
            ms(k.target_ms_per_change_per_1k_streams),
            ms(k.clients_ms_per_change_per_1k_streams)
        );
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

    #[test]
    fn cpu_per_change_per_thousand_streams() {
        let cases = [
            // 8.4 s for 150 changes at 1,000 streams: 56 ms.
            (8.4, 150, 1000, Some(56.0)),
            // The same work per stream at 100 streams: 10× the figure per 1,000.
            (0.84, 150, 100, Some(56.0)),
            (1.0, 0, 100, None),
            (1.0, 10, 0, None),
        ];
        for (cpu, changes, streams, want) in cases {
            let got = per_change_per_1k(cpu, changes, streams);
            assert_eq!(
                got.map(|v| (v * 1e6).round() / 1e6),
                want,
                "{cpu} {changes} {streams}"
            );
        }
    }
}
