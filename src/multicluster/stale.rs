//! ★ Stale remotes (istio#54997): a remote whose API server stops answering keeps its last endpoints,
//! which may be dead pods by the time it answers again. Each remote has a policy, from its Secret's
//! [`ACTION_ANNOTATION`] and [`AFTER_ANNOTATION`] or the mesh-wide default (`--stale-endpoints`,
//! `--stale-endpoints-after`): once it has been unreachable for `after`, its endpoints are kept
//! (istiod's behaviour), deprioritised behind every other endpoint, or dropped, until it answers.
//!
//! Owns: the policy and the pure state ([`Staleness::at`]). Does NOT: notice unreachability (the
//! cluster supervisor reads its registry's watch errors) or apply the action (EDS reads the stale
//! clusters from the snapshot).

use std::time::{Duration, SystemTime};

use serde::Serialize;
use tokio::sync::watch;

use crate::model::{StaleAction, UnknownStaleAction};

/// The remote Secret annotation naming the action: `keep`, `deprioritize` or `drop`.
pub const ACTION_ANNOTATION: &str = "meshd.io/stale-endpoints";
/// The remote Secret annotation naming how long the API server may be unreachable first (`90s`, `5m`).
pub const AFTER_ANNOTATION: &str = "meshd.io/stale-endpoints-after";

/// The longest `after` accepted (a week): beyond it the policy would never act.
const MAX_AFTER: Duration = Duration::from_secs(7 * 24 * 3600);

/// A remote's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StalePolicy {
    /// What to do.
    pub action: StaleAction,
    /// After how long unreachable.
    #[serde(serialize_with = "duration")]
    pub after: Duration,
}

impl Default for StalePolicy {
    /// istiod's behaviour: keep them.
    fn default() -> Self {
        Self {
            action: StaleAction::Keep,
            after: Duration::from_secs(300),
        }
    }
}

/// A stale-endpoints annotation that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StaleError {
    /// Bad action.
    #[error("annotation {ACTION_ANNOTATION}: {0}")]
    Action(#[from] UnknownStaleAction),
    /// Bad duration.
    #[error("annotation {AFTER_ANNOTATION}: {0:?} is not a duration such as 90s or 5m")]
    After(String),
    /// Zero or longer than a week.
    #[error("annotation {AFTER_ANNOTATION}: {0} is not between 1s and 7d")]
    OutOfRange(String),
}

/// A Secret's own policy text (either annotation may be absent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StaleOverride {
    /// The [`ACTION_ANNOTATION`] text.
    pub action: Option<String>,
    /// The [`AFTER_ANNOTATION`] text.
    pub after: Option<String>,
}

impl StaleOverride {
    /// The policy it makes over `default`: each annotation replaces its part.
    pub fn resolve(&self, default: StalePolicy) -> Result<StalePolicy, StaleError> {
        let action = match &self.action {
            Some(a) => a.parse()?,
            None => default.action,
        };
        let after = match &self.after {
            Some(text) => parse_after(text)?,
            None => default.after,
        };
        Ok(StalePolicy { action, after })
    }
}

/// A duration for `after`: 1s up to a week.
pub fn parse_after(text: &str) -> Result<Duration, StaleError> {
    let short: String = text.chars().take(64).collect();
    let d = humantime::parse_duration(text.trim()).map_err(|_| StaleError::After(short.clone()))?;
    if d < Duration::from_secs(1) || d > MAX_AFTER {
        return Err(StaleError::OutOfRange(short));
    }
    Ok(d)
}

/// A remote's staleness, as `/debug/clusterz` and `meshctl remote-clusters` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Staleness {
    /// Its policy.
    #[serde(flatten)]
    pub policy: StalePolicy,
    /// Since when its API server has not answered (watch errors after its first sync).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "time")]
    pub unreachable_since: Option<SystemTime>,
    /// Whether it has been unreachable for `after` or longer: the action is in force.
    pub stale: bool,
}

impl Staleness {
    /// The state at `now` for a remote unreachable since `since` (`None`: reachable).
    pub fn at(policy: StalePolicy, since: Option<SystemTime>, now: SystemTime) -> Self {
        let stale = since.is_some_and(|s| now.duration_since(s).unwrap_or_default() >= policy.after);
        Self {
            policy,
            unreachable_since: since,
            stale,
        }
    }

    /// What EDS does with the remote's endpoints now: `None` unless stale with an action other than
    /// keep.
    pub fn enforced(&self) -> Option<StaleAction> {
        Some(self.policy.action).filter(|a| self.stale && *a != StaleAction::Keep)
    }

    /// Whether `/debug/clusterz` shows it: a policy other than keep, or an unreachable API server.
    pub fn worth_showing(&self) -> bool {
        self.policy.action != StaleAction::Keep || self.unreachable_since.is_some()
    }

    /// How long until it turns stale; `None` when reachable or already stale.
    pub fn remaining(&self, now: SystemTime) -> Option<Duration> {
        let since = self.unreachable_since.filter(|_| !self.stale)?;
        let elapsed = now.duration_since(since).unwrap_or_default();
        Some(self.policy.after.saturating_sub(elapsed))
    }
}

/// One remote's staleness as its supervisor follows it: fed whether the serving registry's watches
/// fail, it publishes the [`Staleness`] and says what the aggregator must be told.
#[derive(Debug)]
pub(crate) struct Tracker {
    policy: StalePolicy,
    since: Option<SystemTime>,
    /// The action last sent to the aggregator.
    sent: Option<StaleAction>,
    state: watch::Sender<Staleness>,
}

impl Tracker {
    /// A reachable remote under `policy`, published on `state`.
    pub(crate) fn new(policy: StalePolicy, state: watch::Sender<Staleness>) -> Self {
        state.send_replace(Staleness::at(policy, None, SystemTime::now()));
        Self {
            policy,
            since: None,
            sent: None,
            state,
        }
    }

    /// Takes a new policy (the Secret's annotations or the default changed).
    pub(crate) fn set_policy(&mut self, policy: StalePolicy) {
        self.policy = policy;
    }

    /// Records whether the API server answers now; returns the action to send the aggregator when it
    /// changed (`Some(None)`: none any more), and whether the remote just turned stale.
    pub(crate) fn observe(
        &mut self,
        unreachable: bool,
        now: SystemTime,
    ) -> (Option<Option<StaleAction>>, bool) {
        match (unreachable, self.since) {
            (true, None) => self.since = Some(now),
            (false, Some(_)) => self.since = None,
            _ => {}
        }
        let next = Staleness::at(self.policy, self.since, now);
        let turned = next.stale && !self.state.borrow().stale;
        let enforced = next.enforced();
        self.state.send_if_modified(|s| {
            let changed = *s != next;
            *s = next;
            changed
        });
        let change = (enforced != self.sent).then(|| {
            self.sent = enforced;
            enforced
        });
        (change, turned)
    }

    /// Whether the remote is unreachable (counting down, or stale): its supervisor keeps asking it.
    pub(crate) fn counting(&self) -> bool {
        self.since.is_some()
    }

    /// How long until the remote turns stale, if it is counting down.
    pub(crate) fn wake_in(&self, now: SystemTime) -> Option<Duration> {
        self.state.borrow().remaining(now)
    }
}

fn duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&humantime::format_duration(*d))
}

fn time<S: serde::Serializer>(t: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.collect_str(&humantime::format_rfc3339_seconds(*t)),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
#[path = "stale_tests.rs"]
mod tests;
