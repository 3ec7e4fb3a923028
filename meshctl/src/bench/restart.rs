//! `--reconnect-storm CHANGES`: a restart under every connected client (issue 34 §3). After the churn,
//! meshd is killed (SIGKILL: a crashed replica), CHANGES endpoint changes are written while it is down,
//! and it is started again on the same ports. Every client's stream broke; each redials with backoff and
//! resumes as Envoy does: both types at once, with `initial_resource_versions` of what it holds
//! ([`super::client`]). meshd admits them at its new-stream limit; each should then be sent only what
//! changed while it was away.
//!
//! Measured from the moment the new meshd is started: when each client had both types answered again
//! (synced), when every client had seen every change written while meshd was down (up to date), the
//! bytes sent meanwhile per client (against the full config a client without versions would get), and
//! the streams refused.

use std::{fmt::Write as _, sync::Arc, sync::atomic::Ordering};

use parking_lot::Mutex;
use serde::Serialize;
use tokio::time::Instant;

use super::{Error, POLL, Run, client::Progress, report::Percentiles};

/// What a restart under every client cost.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconnectStorm {
    /// Clients connected when meshd was killed.
    pub clients: usize,
    /// Endpoint changes written while it was down.
    pub changes: usize,
    /// From the kill to the new meshd's `/ready`, seconds (the changes written, then its start-up).
    pub down_s: f64,
    /// From the new meshd's start to its `/ready`, seconds (the mesh loaded again).
    pub start_s: f64,
    /// Per client, from the new meshd's start to both types answered on its new stream, ms.
    pub synced_ms: Percentiles,
    /// Clients that resynced within the wait.
    pub synced: usize,
    /// From its start until every client had seen every change written while meshd was down, seconds
    /// (`None`: some never did within `--configure-timeout`).
    pub all_up_to_date_s: Option<f64>,
    /// Streams refused or broken, all clients, from the kill on (the new-stream limit shows here).
    pub retries: u64,
    /// Responses from the kill until every client was up to date.
    pub responses: u64,
    /// Bytes sent per client meanwhile.
    pub bytes_per_client: f64,
    /// What a client received for its whole initial config, per client: what each would have been
    /// re-sent without `initial_resource_versions`.
    pub full_config_bytes_per_client: f64,
    /// meshd's CPU from its `/ready` to every client up to date, seconds.
    pub target_cpu_s: Option<f64>,
    /// meshd's new-stream limit, per second: `PILOT_MAX_REQUESTS_PER_SECOND` in this tool's
    /// environment, which the meshd it starts inherits (`None`: meshd's automatic default).
    pub new_streams_per_second: Option<f64>,
}

impl ReconnectStorm {
    /// The report table's line.
    pub fn line(&self) -> String {
        let mut out = String::new();
        let done = self.all_up_to_date_s.map_or("not all up to date".into(), |s| {
            format!("all up to date {s:.2} s after the start")
        });
        let limit = self
            .new_streams_per_second
            .map_or("automatic".into(), |r| format!("{r}/s"));
        let _ = writeln!(
            out,
            "reconnect storm: {} clients, {} changes while down, new-stream limit {limit}; meshd ready \
             {:.2} s after the kill \
             ({:.2} s after its start); \
             {done}; synced {}/{} (p50 {:.0} ms, p99 {:.0} ms, slowest {:.0} ms); {} retries; \
             {:.1} KiB re-sent per client (full config {:.1} KiB)",
            self.clients,
            self.changes,
            self.down_s,
            self.start_s,
            self.synced,
            self.clients,
            self.synced_ms.p50,
            self.synced_ms.p99,
            self.synced_ms.max,
            self.retries,
            self.bytes_per_client / 1024.0,
            self.full_config_bytes_per_client / 1024.0
        );
        out
    }
}

impl Run {
    /// `--reconnect-storm`: kill meshd, write the changes, restart it, wait for every client.
    pub(super) async fn reconnect_storm(
        &mut self,
        progress: &[Arc<Mutex<Progress>>],
        full_config_bytes_per_client: f64,
    ) -> Result<Option<ReconnectStorm>, Error> {
        let Some(changes) = self.cfg.reconnect_storm else {
            return Ok(None);
        };
        let Some(mut meshd) = self.meshd.take() else {
            return Err(Error::Options(
                "--reconnect-storm restarts the meshd the run started".into(),
            ));
        };
        let active = &progress[..self.cfg.clients];
        let retries = || -> u64 { active.iter().map(|p| u64::from(p.lock().retries)).sum() };
        let traffic = self.ctx.traffic.clone();
        let (retries_before, responses_before, bytes_before) = (
            retries(),
            traffic.responses.load(Ordering::Relaxed),
            traffic.bytes.load(Ordering::Relaxed),
        );
        let killed = Instant::now();
        meshd.kill();
        let first = self.ctx.events.events().len() as u64;
        for n in first..first + changes as u64 {
            self.change(n, killed).await?;
        }
        let within = self.cfg.configure_timeout;
        // Clients may be served before `/ready` is seen (it is polled): times count from the start.
        let started = Instant::now();
        let (meshd, restarted) = tokio::task::spawn_blocking(move || {
            let restarted = meshd.restart(within);
            (meshd, restarted)
        })
        .await
        .map_err(|e| Error::Options(format!("restarting meshd: {e}")))?;
        self.pid = Some(meshd.pid());
        self.meshd = Some(meshd);
        restarted?;
        let ready = Instant::now();
        let cpu_before = self.usage();
        let events: Vec<_> = self.ctx.events.events().split_off(first as usize);
        let clients = self.cfg.clients;
        let synced = || {
            active
                .iter()
                .filter(|p| p.lock().synced.is_some_and(|s| s >= started))
                .count()
        };
        let up_to_date = || events.iter().all(|e| e.seen.lock().len() >= clients);
        let deadline = ready + within;
        while Instant::now() < deadline && (synced() < clients || !up_to_date()) {
            tokio::time::sleep(POLL).await;
        }
        let all_up_to_date_s = up_to_date().then(|| {
            let last_seen = events
                .iter()
                .filter_map(|e| Some(e.written + *e.seen.lock().iter().max()?));
            let last_synced = active.iter().filter_map(|p| p.lock().synced);
            last_seen
                .chain(last_synced)
                .max()
                .map_or(0.0, |t| t.saturating_duration_since(started).as_secs_f64())
        });
        let synced_ms = active
            .iter()
            .filter_map(|p| p.lock().synced.filter(|&s| s >= started))
            .map(|s| s - started)
            .collect();
        let cpu = cpu_before
            .zip(self.usage())
            .map(|(a, b)| b.cpu_seconds - a.cpu_seconds);
        Ok(Some(ReconnectStorm {
            clients,
            changes,
            down_s: (ready - killed).as_secs_f64(),
            start_s: (ready - started).as_secs_f64(),
            synced_ms: Percentiles::of(synced_ms),
            synced: synced(),
            all_up_to_date_s,
            retries: retries() - retries_before,
            responses: traffic.responses.load(Ordering::Relaxed) - responses_before,
            bytes_per_client: (traffic.bytes.load(Ordering::Relaxed) - bytes_before) as f64
                / clients.max(1) as f64,
            full_config_bytes_per_client,
            target_cpu_s: cpu,
            new_streams_per_second: std::env::var("PILOT_MAX_REQUESTS_PER_SECOND")
                .ok()
                .and_then(|v| v.parse().ok())
                .filter(|r: &f64| *r > 0.0),
        }))
    }
}
