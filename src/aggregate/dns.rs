//! Resolving gateway DNS names (istiod's `RESOLVE_HOSTNAME_GATEWAYS`, e.g. AWS load-balancer names).
//!
//! One task follows the snapshots' gateway host names, resolves each when due, and sends the aggregate
//! (the single writer of gateways) every *change* of a name's addresses. A name is re-resolved after its
//! TTL clamped to [30 s, 1 h]; a failed or empty lookup keeps the last good addresses and retries after
//! the minimum. The resolver is injectable ([`Resolve`]) so tests script DNS.
//!
//! Does NOT: decide which names are gateways (the aggregate publishes them) or block on DNS anywhere else.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
    sync::Arc,
    time::Duration,
};

use futures::future::BoxFuture;
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::{
    aggregate::{Snapshots, Update, UpdateSender},
    drain::Tasks,
};

/// Shortest time between lookups of a name (also the retry delay after a failure).
pub const MIN_TTL: Duration = Duration::from_secs(30);
/// Longest time a resolved name is trusted.
pub const MAX_TTL: Duration = Duration::from_secs(3600);

/// A successful lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// A and AAAA addresses.
    pub addresses: Vec<IpAddr>,
    /// The record TTL, when the resolver knows it (the system resolver does not).
    pub ttl: Option<Duration>,
}

/// Why a lookup failed.
#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    /// The system resolver failed.
    #[error("resolving {host}: {source}")]
    Lookup {
        /// The name.
        host: Arc<str>,
        /// The resolver's error.
        #[source]
        source: std::io::Error,
    },
}

/// Looks names up. [`SystemResolver`] in production; scripted in tests.
pub trait Resolve: Send + Sync + 'static {
    /// The addresses of `host`.
    fn resolve(&self, host: Arc<str>) -> BoxFuture<'static, Result<Resolved, DnsError>>;
}

/// tokio's resolver (`getaddrinfo` on the blocking pool). It reports no TTL, so names are refreshed
/// every [`MIN_TTL`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: Arc<str>) -> BoxFuture<'static, Result<Resolved, DnsError>> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((&*host, 0))
                .await
                .map_err(|source| DnsError::Lookup {
                    host: host.clone(),
                    source,
                })?;
            Ok(Resolved {
                addresses: addrs.map(|a| a.ip()).collect(),
                ttl: None,
            })
        })
    }
}

/// How long a lookup's answer is used.
pub fn clamp_ttl(ttl: Option<Duration>) -> Duration {
    ttl.unwrap_or(MIN_TTL).clamp(MIN_TTL, MAX_TTL)
}

/// Per-name schedule and last good answer. Pure: time is passed in.
#[derive(Debug, Default)]
pub struct Schedule {
    names: BTreeMap<Arc<str>, Entry>,
}

#[derive(Debug)]
struct Entry {
    due: Instant,
    last_good: Option<Vec<IpAddr>>,
}

impl Schedule {
    /// Follows the current set of names: new ones are due at once, gone ones forgotten.
    pub fn set_names(&mut self, names: &BTreeSet<Arc<str>>, now: Instant) {
        self.names.retain(|n, _| names.contains(n));
        for n in names {
            self.names.entry(n.clone()).or_insert(Entry {
                due: now,
                last_good: None,
            });
        }
    }

    /// Names due for a lookup at `now`.
    pub fn due(&self, now: Instant) -> Vec<Arc<str>> {
        self.names
            .iter()
            .filter(|(_, e)| e.due <= now)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// When the next lookup is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.names.values().map(|e| e.due).min()
    }

    /// Records a lookup's outcome; returns the new addresses when they changed. A failure or an empty
    /// answer keeps the last good addresses.
    pub fn record(
        &mut self,
        name: &Arc<str>,
        result: Result<Resolved, DnsError>,
        now: Instant,
    ) -> Option<Vec<IpAddr>> {
        let entry = self.names.get_mut(name)?;
        match result {
            Ok(r) if !r.addresses.is_empty() => {
                entry.due = now + clamp_ttl(r.ttl);
                let mut addresses = r.addresses;
                addresses.sort();
                addresses.dedup();
                if entry.last_good.as_ref() == Some(&addresses) {
                    return None;
                }
                entry.last_good = Some(addresses.clone());
                Some(addresses)
            }
            Ok(_) => {
                warn!(gateway = %name, "gateway host name resolved to no address; keeping the last good addresses");
                entry.due = now + MIN_TTL;
                None
            }
            Err(e) => {
                warn!(gateway = %name, error = %e, "gateway host name lookup failed; keeping the last good addresses");
                entry.due = now + MIN_TTL;
                None
            }
        }
    }
}

/// Starts the resolver task: follows `snapshots`' gateway names, sends address changes to `updates`.
pub fn spawn(tasks: &Tasks, resolver: Arc<dyn Resolve>, mut snapshots: Snapshots, updates: UpdateSender) {
    let stop = tasks.cancelled();
    tasks.spawn("gateway-dns", async move {
        tokio::pin!(stop);
        let mut schedule = Schedule::default();
        let mut names = snapshots.load().gateway_hostnames.clone();
        schedule.set_names(&names, Instant::now());
        loop {
            let now = Instant::now();
            let due = schedule.due(now);
            let results = futures::future::join_all(due.iter().map(|n| resolver.resolve(n.clone()))).await;
            let now = Instant::now();
            for (name, result) in due.iter().zip(results) {
                if let Some(addresses) = schedule.record(name, result, now) {
                    debug!(gateway = %name, ?addresses, "gateway host name resolved");
                    let update = Update::GatewayAddresses {
                        hostname: name.clone(),
                        addresses,
                    };
                    if !updates.send(update).await {
                        return;
                    }
                }
            }
            let wake = schedule.next_due();
            tokio::select! {
                _ = &mut stop => return,
                s = snapshots.changed() => {
                    let Some(s) = s else { return };
                    if s.gateway_hostnames != names {
                        names = s.gateway_hostnames.clone();
                        schedule.set_names(&names, Instant::now());
                    }
                }
                _ = sleep_until(wake) => {}
            }
        }
    });
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(ips: &[&str], ttl: Option<u64>) -> Result<Resolved, DnsError> {
        Ok(Resolved {
            addresses: ips.iter().map(|i| i.parse().unwrap()).collect(),
            ttl: ttl.map(Duration::from_secs),
        })
    }

    fn fail() -> Result<Resolved, DnsError> {
        Err(DnsError::Lookup {
            host: "gw".into(),
            source: std::io::Error::other("SERVFAIL"),
        })
    }

    #[test]
    fn ttl_is_clamped() {
        let cases = [(None, 30), (Some(5), 30), (Some(300), 300), (Some(86_400), 3600)];
        for (ttl, want) in cases {
            assert_eq!(
                clamp_ttl(ttl.map(Duration::from_secs)),
                Duration::from_secs(want),
                "{ttl:?}"
            );
        }
    }

    #[test]
    fn keeps_last_good_addresses_and_reports_only_changes() {
        let t0 = Instant::now();
        let gw: Arc<str> = "gw.example.com".into();
        let mut s = Schedule::default();
        s.set_names(&[gw.clone()].into(), t0);
        assert_eq!(s.due(t0), vec![gw.clone()]);
        let first = s.record(&gw, ok(&["192.0.2.2", "192.0.2.1", "192.0.2.1"], Some(120)), t0);
        assert_eq!(
            first,
            Some(vec!["192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap()])
        );
        assert_eq!(s.next_due(), Some(t0 + Duration::from_secs(120)));
        assert!(s.due(t0 + Duration::from_secs(119)).is_empty());
        let t1 = t0 + Duration::from_secs(120);
        assert_eq!(
            s.record(&gw, ok(&["192.0.2.1", "192.0.2.2"], None), t1),
            None,
            "unchanged"
        );
        assert_eq!(
            s.record(&gw, fail(), t1),
            None,
            "failure keeps the last good answer"
        );
        assert_eq!(s.record(&gw, ok(&[], None), t1), None, "so does an empty answer");
        assert_eq!(
            s.next_due(),
            Some(t1 + MIN_TTL),
            "and retries after the minimum TTL"
        );
        assert_eq!(
            s.record(&gw, ok(&["192.0.2.9"], None), t1),
            Some(vec!["192.0.2.9".parse().unwrap()])
        );
        s.set_names(&BTreeSet::new(), t1);
        assert_eq!(s.next_due(), None, "a name no gateway uses is forgotten");
        assert_eq!(s.record(&gw, ok(&["192.0.2.1"], None), t1), None);
    }
}
