//! `--secret-storm N`: after the churn, N updates to Secrets no proxy depends on (Opaque, in the
//! services' namespace, no `credentialName` or remote-secret label names them), written as fast as the
//! API server takes them, then a quiet wait; the clients count every response meanwhile. A control
//! plane that filters irrelevant events (istiod's `needsPush`) pushes nothing: the figure is how many
//! responses the storm caused, its expected value zero (issue 34 §2).

use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::{
    Error, Run, Source,
    world::{NAMESPACE, Write},
};

/// Distinct Secrets the updates go round-robin over.
const SECRETS: usize = 10;
/// Quiet wait after the last update, on top of five debounce periods: long enough for a push the
/// storm caused to reach every client.
const QUIET: Duration = Duration::from_secs(2);

/// What a storm caused.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretStorm {
    /// Secret updates written.
    pub updates: usize,
    /// Seconds the writes took.
    pub write_s: f64,
    /// Responses any client received from the first write to the end of the quiet wait.
    pub responses: u64,
    /// The control plane's CPU over the same span, seconds (when its process is known).
    pub target_cpu_s: Option<f64>,
}

/// The `n`th update: Secret `bench-unrelated-{n mod 10}` with a new value.
pub fn secret(n: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": format!("bench-unrelated-{}", n % SECRETS), "namespace": NAMESPACE},
        "stringData": {"revision": n.to_string()},
    })
}

impl Run {
    /// `--secret-storm`: writes the updates to the primary, waits, counts the responses they caused.
    pub(super) async fn secret_storm(&self) -> Result<Option<SecretStorm>, Error> {
        let updates = self.cfg.secret_storm;
        if updates == 0 {
            return Ok(None);
        }
        let responses = || self.ctx.traffic.responses.load(Ordering::Relaxed);
        let (before, usage, started) = (responses(), self.usage(), Instant::now());
        for n in 0..updates {
            match &self.source {
                Source::Sim(sandbox) => {
                    if let Some(primary) = sandbox.clusters.first() {
                        primary.server.store().apply(secret(n))?;
                    }
                }
                Source::Real(real) => {
                    let write = vec![Write::Apply(secret(n))];
                    real.write(write).await.map_err(Error::Real)?;
                }
            }
        }
        let write_s = started.elapsed().as_secs_f64();
        tokio::time::sleep(QUIET + self.cfg.debounce * 5).await;
        let cpu = usage
            .zip(self.usage())
            .map(|(a, b)| b.cpu_seconds - a.cpu_seconds);
        Ok(Some(SecretStorm {
            updates,
            write_s,
            responses: responses() - before,
            target_cpu_s: cpu,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storm_updates_go_round_robin_over_unlabelled_opaque_secrets() {
        let objects: Vec<Value> = (0..12).map(secret).collect();
        assert_eq!(objects[0]["metadata"]["name"], "bench-unrelated-0");
        assert_eq!(objects[10]["metadata"]["name"], "bench-unrelated-0");
        assert_eq!(objects[11]["stringData"]["revision"], "11");
        assert!(
            objects
                .iter()
                .all(|o| o["type"] == "Opaque" && o["metadata"].get("labels").is_none())
        );
    }
}
