//! When a burst of changes publishes. istiod's rule (PILOT_DEBOUNCE_AFTER / PILOT_DEBOUNCE_MAX): after
//! `after` of quiet, but never longer than `max` since the first unpublished change. Under a storm of
//! endpoint flaps quiet never comes, so every change waits `max` (istio#51899). ★ [`EdsDebounce::Paced`]
//! keeps that rule for changes that need a full push, and paces endpoint-only bursts instead: published
//! `settle` after the first change, and never sooner than `after` since the previous publish — a lone
//! change converges at once, a storm at one publish per `after`, each carrying everything since.

use std::time::Duration;

use tokio::time::Instant;

/// How bursts of endpoint-only changes publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdsDebounce {
    /// As every other change: after `after` of quiet, at most `max` (istiod).
    Quiet,
    /// ★ `settle` after the first change, at most one publish per `after`.
    Paced {
        /// Gathers the events one write causes (a Pod and its EndpointSlice, several clusters' watches).
        settle: Duration,
    },
}

#[derive(Debug, Clone)]
pub(super) struct Debounce {
    after: Duration,
    max: Duration,
    eds: EdsDebounce,
    first: Option<Instant>,
    last: Option<Instant>,
    /// Whether anything pending needs more than EDS.
    full: bool,
    published: Option<Instant>,
}

impl Debounce {
    pub(super) fn new(after: Duration, max: Duration, eds: EdsDebounce) -> Self {
        Self {
            after,
            max,
            eds,
            first: None,
            last: None,
            full: false,
            published: None,
        }
    }

    /// Changes arrived at `now`; `full` when the pending ones need more than EDS.
    pub(super) fn record(&mut self, now: Instant, full: bool) {
        self.first.get_or_insert(now);
        self.last = Some(now);
        self.full = full;
    }

    /// When to publish, if anything is pending.
    pub(super) fn deadline(&self) -> Option<Instant> {
        let (first, last) = (self.first?, self.last?);
        let due = match self.eds {
            EdsDebounce::Paced { settle } if !self.full => {
                let paced = self.published.map_or(first, |p| p + self.after);
                (first + settle).max(paced)
            }
            _ => last + self.after,
        };
        Some(due.min(first + self.max))
    }

    /// When the pending burst started.
    pub(super) fn first(&self) -> Option<Instant> {
        self.first
    }

    /// The pending changes were published at `now`.
    pub(super) fn published(&mut self, now: Instant) {
        self.first = None;
        self.last = None;
        self.full = false;
        self.published = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// (arrival offset in ms, needs a full push) → expected deadline offset after each.
    type Case = (&'static str, EdsDebounce, &'static [(u64, bool, u64)]);

    const PACED: EdsDebounce = EdsDebounce::Paced { settle: ms(10) };

    #[test]
    fn deadlines() {
        let cases: &[Case] = &[
            (
                "quiet: the quiet period restarts",
                EdsDebounce::Quiet,
                &[(0, false, 100), (90, false, 190)],
            ),
            (
                "quiet: capped by max since the first",
                EdsDebounce::Quiet,
                &[(0, false, 100), (90, false, 190), (180, false, 250)],
            ),
            ("paced: a lone change settles only", PACED, &[(0, false, 10)]),
            (
                "paced: more changes do not postpone it",
                PACED,
                &[(0, false, 10), (5, false, 10), (9, false, 10)],
            ),
            (
                "paced: a full change falls back to quiet",
                PACED,
                &[(0, false, 10), (5, true, 105)],
            ),
            (
                "paced: a full change then endpoints stays quiet",
                PACED,
                &[(0, true, 100), (50, true, 150)],
            ),
        ];
        for (name, eds, steps) in cases {
            let t0 = Instant::now();
            let mut d = Debounce::new(ms(100), ms(250), *eds);
            assert_eq!(d.deadline(), None, "{name}");
            for &(at, full, due) in *steps {
                d.record(t0 + ms(at), full);
                assert_eq!(
                    d.deadline(),
                    Some(t0 + ms(due)),
                    "{name}: after the change at {at} ms"
                );
            }
        }
    }

    #[test]
    fn paced_publishes_at_most_once_per_after() {
        let t0 = Instant::now();
        let mut d = Debounce::new(ms(100), ms(10_000), PACED);
        d.record(t0, false);
        d.published(t0 + ms(10));
        assert_eq!(d.deadline(), None, "nothing pending after a publish");
        d.record(t0 + ms(20), false);
        assert_eq!(
            d.deadline(),
            Some(t0 + ms(110)),
            "a storm: one publish per 100 ms"
        );
        d.published(t0 + ms(110));
        d.record(t0 + ms(500), false);
        assert_eq!(d.deadline(), Some(t0 + ms(510)), "quiet again: settle only");
    }

    #[test]
    fn max_caps_paced_too() {
        let t0 = Instant::now();
        let mut d = Debounce::new(ms(100), ms(50), PACED);
        d.published(t0);
        d.record(t0 + ms(1), false);
        assert_eq!(d.deadline(), Some(t0 + ms(51)));
    }
}
