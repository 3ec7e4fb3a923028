//! Leader election among meshd replicas with a Kubernetes Lease (`coordination.k8s.io/v1`) in the system
//! namespace, the protocol of client-go's `leaderelection` package.
//!
//! Replicas are stateless readers and each serves its own proxies whether or not it leads: serving never
//! waits on this module. Only duties that *write* shared state (creating the CA Secret, …) run on the
//! leader, through [`Leadership::run_while_leader`], which starts a duty when the lease is acquired and
//! cancels it when the lease is lost.
//!
//! Protocol (all times measured on this replica's monotonic clock, never compared with another node's):
//! - a Lease nobody holds, or one whose record has not changed for its `leaseDurationSeconds` since this
//!   replica first saw it, may be taken over, by an update conditional on its `resourceVersion`;
//! - the holder renews every `retry_period`; if it has not renewed for `renew_deadline` it steps down
//!   before anyone may consider the lease expired (`renew_deadline + retry_period < lease_duration`);
//! - on graceful shutdown the holder stops its duties, then releases the lease (empty holder), so a
//!   standby takes over within one `retry_period` instead of a whole lease duration.

use std::{future::Future, time::Duration};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{PostParams, Resource},
};
use tokio::{sync::watch, time::Instant};
use tracing::{debug, info, warn};

use crate::drain::Tasks;

/// Name of the Lease the replicas elect a leader with (the chart's `leaderElection.leaseName`).
pub const DEFAULT_LEASE_NAME: &str = "meshd-leader";

/// Timing and identity of one participant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionConfig {
    /// Namespace of the Lease (meshd's system namespace).
    pub namespace: String,
    /// Name of the Lease.
    pub lease_name: String,
    /// This participant's holder identity; unique per process.
    pub identity: String,
    /// How long a lease is valid without renewal, as seen by the other participants (client-go: 15s).
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal (client-go: 10s).
    pub renew_deadline: Duration,
    /// Interval between attempts to acquire or renew (client-go: 2s).
    pub retry_period: Duration,
}

impl ElectionConfig {
    /// client-go's defaults (15s / 10s / 2s), lease [`DEFAULT_LEASE_NAME`], identity [`default_identity`].
    pub fn new(namespace: impl Into<String>) -> ElectionConfig {
        ElectionConfig {
            namespace: namespace.into(),
            lease_name: DEFAULT_LEASE_NAME.to_owned(),
            identity: default_identity(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Checks the timing invariants that keep two participants from leading at once.
    pub fn validate(&self) -> Result<(), LeaderError> {
        let bad = |why: String| Err(LeaderError::Config(why));
        if self.namespace.is_empty() || self.lease_name.is_empty() || self.identity.is_empty() {
            return bad("namespace, lease name and identity must not be empty".into());
        }
        if self.retry_period.is_zero() {
            return bad("retry period must be positive".into());
        }
        if self.lease_duration < Duration::from_secs(1) {
            return bad(format!(
                "lease duration {:?} is below the 1s Lease granularity",
                self.lease_duration
            ));
        }
        if self.renew_deadline + self.retry_period >= self.lease_duration {
            return bad(format!(
                "renew deadline {:?} + retry period {:?} must be shorter than the lease duration {:?}, \
                 or a leader could still act after others consider its lease expired",
                self.renew_deadline, self.retry_period, self.lease_duration
            ));
        }
        Ok(())
    }

    /// `leaseDurationSeconds` as written to the Lease (rounded up).
    fn lease_duration_seconds(&self) -> i32 {
        let secs = self.lease_duration.as_secs() + u64::from(self.lease_duration.subsec_nanos() > 0);
        i32::try_from(secs).unwrap_or(i32::MAX)
    }
}

/// `$POD_NAME` (or the host name) plus a random suffix, so two processes in one pod never share it.
pub fn default_identity() -> String {
    let base = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "meshd".to_owned());
    format!("{base}_{:08x}", rand::random::<u32>())
}

/// Why an election could not start or a Lease call failed.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The configuration breaks a timing invariant.
    #[error("invalid leader election config: {0}")]
    Config(String),
    /// The API server refused or failed a Lease call.
    #[error("lease {namespace}/{name}: {source}")]
    Api {
        /// Namespace of the Lease.
        namespace: String,
        /// Name of the Lease.
        name: String,
        /// The client error.
        #[source]
        source: Box<kube::Error>,
    },
    /// A Lease call took longer than the retry period.
    #[error("lease {namespace}/{name}: no answer within {timeout:?}")]
    Timeout {
        /// Namespace of the Lease.
        namespace: String,
        /// Name of the Lease.
        name: String,
        /// The per-call limit.
        timeout: Duration,
    },
}

/// The fields of a Lease that the election reads; two equal records mean "nothing happened".
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Record {
    holder: String,
    lease_duration_seconds: Option<i32>,
    renew_time: Option<Timestamp>,
    transitions: i32,
}

impl Record {
    fn of(lease: &Lease) -> Record {
        let spec = lease.spec.clone().unwrap_or_default();
        Record {
            holder: spec.holder_identity.unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds,
            renew_time: spec.renew_time.map(|t| t.0),
            transitions: spec.lease_transitions.unwrap_or(0),
        }
    }
}

/// What to do with the Lease on this attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    /// No Lease exists: create it with us as holder.
    Create,
    /// Nobody holds it, or its holder let it expire: take it over.
    Acquire,
    /// We hold it: renew.
    Renew,
    /// Someone else holds a lease that is still fresh.
    Wait,
}

/// The pure state of one participant; the I/O loop feeds it observations and outcomes.
#[derive(Debug)]
struct State {
    identity: String,
    default_duration: Duration,
    renew_deadline: Duration,
    /// The Lease record last seen, and when it was first seen in that form (`None` = no Lease exists).
    observed: Option<(Record, Instant)>,
    /// When the last successful acquire or renew attempt *started*, while leading.
    last_renew: Option<Instant>,
}

impl State {
    fn new(cfg: &ElectionConfig) -> State {
        State {
            identity: cfg.identity.clone(),
            default_duration: cfg.lease_duration,
            renew_deadline: cfg.renew_deadline,
            observed: None,
            last_renew: None,
        }
    }

    fn is_leader(&self) -> bool {
        self.last_renew.is_some()
    }

    /// Records what a read returned at `now`. The expiry clock restarts only when the record changes.
    fn observe(&mut self, record: Option<Record>, now: Instant) {
        match (record, &self.observed) {
            (None, _) => self.observed = None,
            (Some(r), Some((seen, _))) if *seen == r => {}
            (Some(r), _) => self.observed = Some((r, now)),
        }
    }

    fn decide(&self, now: Instant) -> Action {
        let Some((record, since)) = &self.observed else {
            return Action::Create;
        };
        if record.holder == self.identity {
            return Action::Renew;
        }
        if record.holder.is_empty() {
            return Action::Acquire;
        }
        let duration = record
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(self.default_duration, Duration::from_secs);
        if now.saturating_duration_since(*since) >= duration {
            Action::Acquire
        } else {
            Action::Wait
        }
    }

    /// An acquire or renew attempt that started at `started` succeeded, writing `record`.
    fn succeeded(&mut self, record: Record, started: Instant) {
        self.observed = Some((record, started));
        self.last_renew = Some(started);
    }

    /// Someone else holds the lease (or won a race for it).
    fn lost(&mut self) {
        self.last_renew = None;
    }

    /// An attempt failed (API error or timeout) at `now`. A leader keeps leading until `renew_deadline`
    /// has passed since its last successful renewal, then steps down.
    fn failed(&mut self, now: Instant) {
        if self
            .last_renew
            .is_some_and(|last| now.saturating_duration_since(last) >= self.renew_deadline)
        {
            self.last_renew = None;
        }
    }
}

/// A running election: whether this replica leads now, and a way to run duties only while it does.
#[derive(Debug, Clone)]
pub struct Leadership {
    identity: String,
    rx: watch::Receiver<bool>,
}

impl Leadership {
    /// This participant's holder identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Whether this replica holds the lease right now.
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow()
    }

    /// "Am I leader", updated on every change; closed when the election task has stopped.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.rx.clone()
    }

    /// Runs `duty` only while this replica leads: it is spawned (with a child of `tasks`) each time the
    /// lease is acquired and that child is cancelled when the lease is lost or on shutdown. A duty that
    /// returns on its own (a one-shot job) is started again only after the next acquisition.
    ///
    /// The duty must return promptly once its `Tasks` is cancelled; the supervisor waits for it before it
    /// considers a new term, so two runs of one duty never overlap.
    pub fn run_while_leader<F, Fut>(&self, tasks: &Tasks, name: &str, mut duty: F)
    where
        F: FnMut(Tasks) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let mut rx = self.rx.clone();
        let parent = tasks.clone();
        let name = name.to_owned();
        tasks.spawn(&format!("leader-duty:{name}"), async move {
            loop {
                tokio::select! {
                    acquired = rx.wait_for(|leader| *leader) => if acquired.is_err() { return },
                    () = parent.cancelled() => return,
                }
                info!(duty = %name, "leader: starting duty");
                let term = parent.child();
                let mut handle = term.spawn(&name, duty(term.clone()));
                let mut finished = false;
                tokio::select! {
                    _ = rx.wait_for(|leader| !*leader) => {}
                    () = parent.cancelled() => {}
                    _ = &mut handle => finished = true,
                }
                if finished {
                    debug!(duty = %name, "leader: duty finished; waiting for the next term");
                    tokio::select! {
                        _ = rx.wait_for(|leader| !*leader) => {}
                        () = parent.cancelled() => return,
                    }
                } else {
                    info!(duty = %name, "leader: stopping duty");
                    term.cancel();
                    let _ = handle.await;
                }
                if parent.is_cancelled() {
                    return;
                }
            }
        });
    }
}

/// Starts the election task on `tasks`. The returned [`Leadership`] reports `false` until the lease is
/// acquired. On shutdown (cancellation of `tasks`) the task reports `false`, then releases the lease.
pub fn start(client: Client, cfg: ElectionConfig, tasks: &Tasks) -> Result<Leadership, LeaderError> {
    let (election, leadership) = new(client, cfg)?;
    election.spawn(tasks);
    Ok(leadership)
}

/// Builds an election without starting it, so that its [`Leadership`] can be handed to the duties
/// that wait on it before the election runs ([`Election::spawn`]).
pub fn new(client: Client, cfg: ElectionConfig) -> Result<(Election, Leadership), LeaderError> {
    cfg.validate()?;
    let (tx, rx) = watch::channel(false);
    let identity = cfg.identity.clone();
    let elector = Elector {
        api: Api::namespaced(client, &cfg.namespace),
        state: State::new(&cfg),
        cfg,
        tx,
    };
    Ok((Election(elector), Leadership { identity, rx }))
}

/// An election built by [`new`], not running yet.
pub struct Election(Elector);

impl Election {
    /// Starts the election task on `tasks` (see [`start`]).
    pub fn spawn(self, tasks: &Tasks) {
        tasks.spawn("leader-election", self.0.run(tasks.clone()));
    }
}

struct Elector {
    api: Api<Lease>,
    cfg: ElectionConfig,
    state: State,
    tx: watch::Sender<bool>,
}

impl Elector {
    async fn run(mut self, tasks: Tasks) {
        info!(lease = %self.cfg.lease_name, namespace = %self.cfg.namespace, identity = %self.cfg.identity,
              "leader election started");
        loop {
            let started = Instant::now();
            let outcome = tokio::select! {
                r = self.attempt(started) => r,
                () = tasks.cancelled() => break,
            };
            if let Err(e) = outcome {
                let was_leader = self.state.is_leader();
                self.state.failed(Instant::now());
                if was_leader && !self.state.is_leader() {
                    warn!(error = %e, "leader: could not renew within the renew deadline; stepping down");
                } else {
                    debug!(error = %e, "leader: attempt failed");
                }
            }
            self.publish();
            tokio::select! {
                () = tokio::time::sleep(self.cfg.retry_period) => {}
                () = tasks.cancelled() => break,
            }
        }
        let was_leader = self.state.is_leader();
        self.state.lost();
        self.publish();
        if was_leader {
            match self.release().await {
                Ok(()) => info!("leader: lease released"),
                Err(e) => warn!(error = %e, "leader: could not release the lease; it expires on its own"),
            }
        }
    }

    fn publish(&self) {
        let leader = self.state.is_leader();
        let changed = self
            .tx
            .send_if_modified(|cur| std::mem::replace(cur, leader) != leader);
        if changed {
            if leader {
                info!(identity = %self.cfg.identity, "leader: acquired the lease");
            } else {
                info!(identity = %self.cfg.identity, "leader: not leading");
            }
        }
    }

    /// One read-decide-write round.
    async fn attempt(&mut self, started: Instant) -> Result<(), LeaderError> {
        let current = self.call(self.api.get_opt(&self.cfg.lease_name)).await?;
        self.state.observe(current.as_ref().map(Record::of), started);
        let action = self.state.decide(started);
        let pp = PostParams::default();
        let written = match (action, current) {
            (Action::Wait, _) => {
                self.state.lost();
                return Ok(());
            }
            (Action::Create, _) => {
                let lease = self.lease_for(None);
                self.call(self.api.create(&pp, &lease)).await
            }
            (Action::Acquire | Action::Renew, None) => return Ok(()), // raced with a delete; retry
            (Action::Acquire | Action::Renew, Some(existing)) => {
                let lease = self.lease_for(Some(existing));
                self.call(self.api.replace(&self.cfg.lease_name, &pp, &lease))
                    .await
            }
        };
        match written {
            Ok(lease) => {
                self.state.succeeded(Record::of(&lease), started);
                Ok(())
            }
            // Someone else created or updated it first. A candidate simply lost the race; a leader
            // counts it as a failed renewal (the next read shows who holds the lease now).
            Err(LeaderError::Api { ref source, .. })
                if !self.state.is_leader()
                    && matches!(source.as_ref(), kube::Error::Api(s) if s.code == 409) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// The Lease to write: `existing` renewed by us (or taken over), or a new one.
    fn lease_for(&self, existing: Option<Lease>) -> Lease {
        let now = MicroTime(Timestamp::now());
        let mut lease = existing.unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(self.cfg.lease_name.clone()),
                namespace: Some(self.cfg.namespace.clone()),
                labels: Some([("app.kubernetes.io/part-of".to_owned(), "meshd".to_owned())].into()),
                ..ObjectMeta::default()
            },
            spec: None,
        });
        let mut spec = lease.spec.take().unwrap_or_default();
        let ours = spec.holder_identity.as_deref() == Some(self.cfg.identity.as_str());
        if !ours {
            spec.lease_transitions = Some(match spec.holder_identity.as_deref() {
                None | Some("") if lease.meta().resource_version.is_none() => 0,
                _ => spec.lease_transitions.unwrap_or(0).saturating_add(1),
            });
            spec.acquire_time = Some(now.clone());
            spec.holder_identity = Some(self.cfg.identity.clone());
        }
        spec.lease_duration_seconds = Some(self.cfg.lease_duration_seconds());
        spec.renew_time = Some(now);
        lease.spec = Some(spec);
        lease
    }

    /// Gives the lease up so a standby can take it at once: empty holder, 1s duration.
    async fn release(&self) -> Result<(), LeaderError> {
        let Some(mut lease) = self.call(self.api.get_opt(&self.cfg.lease_name)).await? else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        self.call(
            self.api
                .replace(&self.cfg.lease_name, &PostParams::default(), &lease),
        )
        .await
        .map(|_| ())
    }

    /// Runs one API call, bounded by the retry period so a hung call cannot stretch a term.
    async fn call<T>(&self, fut: impl Future<Output = Result<T, kube::Error>>) -> Result<T, LeaderError> {
        match tokio::time::timeout(self.cfg.retry_period, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(LeaderError::Api {
                namespace: self.cfg.namespace.clone(),
                name: self.cfg.lease_name.clone(),
                source: Box::new(e),
            }),
            Err(_) => Err(LeaderError::Timeout {
                namespace: self.cfg.namespace.clone(),
                name: self.cfg.lease_name.clone(),
                timeout: self.cfg.retry_period,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(identity: &str) -> ElectionConfig {
        ElectionConfig {
            identity: identity.to_owned(),
            ..ElectionConfig::new("istio-system")
        }
    }

    fn held_by(holder: &str, secs: i32) -> Option<Record> {
        Some(Record {
            holder: holder.to_owned(),
            lease_duration_seconds: Some(secs),
            renew_time: Some(Timestamp::now()),
            transitions: 0,
        })
    }

    #[test]
    fn defaults_are_client_go_and_valid() {
        let c = ElectionConfig::new("ns");
        assert_eq!(
            (c.lease_duration, c.renew_deadline, c.retry_period),
            (
                Duration::from_secs(15),
                Duration::from_secs(10),
                Duration::from_secs(2)
            )
        );
        assert_eq!(c.lease_name, DEFAULT_LEASE_NAME);
        c.validate().expect("defaults are valid");
        assert_ne!(default_identity(), default_identity(), "random suffix");
    }

    #[test]
    fn config_rejects_overlapping_terms() {
        let mut c = ElectionConfig::new("ns");
        c.renew_deadline = Duration::from_secs(14);
        let err = c.validate().expect_err("14s + 2s >= 15s");
        assert!(
            err.to_string().contains("shorter than the lease duration"),
            "{err}"
        );
        let mut c = ElectionConfig::new("ns");
        c.retry_period = Duration::ZERO;
        assert!(c.validate().is_err());
        let mut c = ElectionConfig::new("ns");
        c.identity.clear();
        assert!(c.validate().is_err());
        let mut c = ElectionConfig::new("ns");
        c.lease_duration = Duration::from_millis(1500);
        assert_eq!(c.lease_duration_seconds(), 2, "rounded up");
    }

    #[tokio::test(start_paused = true)]
    async fn creates_when_no_lease_and_acquires_when_empty() {
        let mut s = State::new(&cfg("me"));
        let now = Instant::now();
        s.observe(None, now);
        assert_eq!(s.decide(now), Action::Create);
        s.observe(held_by("", 15), now);
        assert_eq!(s.decide(now), Action::Acquire, "released lease");
        assert!(!s.is_leader());
    }

    #[tokio::test(start_paused = true)]
    async fn does_not_steal_a_fresh_lease_and_takes_an_expired_one() {
        let mut s = State::new(&cfg("me"));
        let t0 = Instant::now();
        let other = held_by("other", 15);
        s.observe(other.clone(), t0);
        assert_eq!(s.decide(t0), Action::Wait);
        assert_eq!(s.decide(t0 + Duration::from_secs(14)), Action::Wait);
        // The same record seen again does not restart the clock...
        s.observe(other.clone(), t0 + Duration::from_secs(10));
        assert_eq!(s.decide(t0 + Duration::from_secs(15)), Action::Acquire);
        // ...but a renewal does.
        let mut renewed = other.clone();
        if let Some(r) = renewed.as_mut() {
            r.renew_time = Some(Timestamp::now() + jiff_secs(5));
        }
        s.observe(renewed, t0 + Duration::from_secs(15));
        assert_eq!(s.decide(t0 + Duration::from_secs(15)), Action::Wait);
        assert_eq!(s.decide(t0 + Duration::from_secs(29)), Action::Wait);
        assert_eq!(s.decide(t0 + Duration::from_secs(30)), Action::Acquire);
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_uses_the_records_duration() {
        let mut s = State::new(&cfg("me"));
        let t0 = Instant::now();
        s.observe(held_by("other", 1), t0);
        assert_eq!(s.decide(t0), Action::Wait);
        assert_eq!(s.decide(t0 + Duration::from_secs(1)), Action::Acquire);
    }

    #[tokio::test(start_paused = true)]
    async fn renews_when_held_and_steps_down_past_the_deadline() {
        let mut s = State::new(&cfg("me"));
        let t0 = Instant::now();
        let mine = held_by("me", 15).unwrap_or_default();
        s.observe(Some(mine.clone()), t0);
        assert_eq!(s.decide(t0), Action::Renew);
        s.succeeded(mine, t0);
        assert!(s.is_leader());
        // Failures inside the renew deadline keep leadership...
        s.failed(t0 + Duration::from_secs(4));
        s.failed(t0 + Duration::from_secs(9));
        assert!(s.is_leader());
        // ...the first failure past it steps down.
        s.failed(t0 + Duration::from_secs(10));
        assert!(!s.is_leader());
    }

    #[tokio::test(start_paused = true)]
    async fn a_successful_renew_resets_the_deadline_and_losing_is_immediate() {
        let mut s = State::new(&cfg("me"));
        let t0 = Instant::now();
        let mine = held_by("me", 15).unwrap_or_default();
        s.succeeded(mine.clone(), t0);
        s.succeeded(mine, t0 + Duration::from_secs(8));
        s.failed(t0 + Duration::from_secs(17));
        assert!(s.is_leader(), "9s since the last renewal");
        s.observe(held_by("other", 15), t0 + Duration::from_secs(18));
        assert_eq!(s.decide(t0 + Duration::from_secs(18)), Action::Wait);
        s.lost();
        assert!(!s.is_leader());
    }

    fn jiff_secs(n: i64) -> k8s_openapi::jiff::SignedDuration {
        k8s_openapi::jiff::SignedDuration::from_secs(n)
    }
}
