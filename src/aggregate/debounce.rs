//! Coalesces bursts of changes into one publish: wait for `after` of quiet, but never longer than `max`
//! since the first unpublished change (istiod's PILOT_DEBOUNCE_AFTER / PILOT_DEBOUNCE_MAX).

use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug, Clone)]
pub(super) struct Debounce {
    after: Duration,
    max: Duration,
    first: Option<Instant>,
    last: Option<Instant>,
}

impl Debounce {
    pub(super) fn new(after: Duration, max: Duration) -> Self {
        Self {
            after,
            max,
            first: None,
            last: None,
        }
    }

    /// A change arrived at `now`.
    pub(super) fn record(&mut self, now: Instant) {
        self.first.get_or_insert(now);
        self.last = Some(now);
    }

    /// When to publish, if anything is pending.
    pub(super) fn deadline(&self) -> Option<Instant> {
        Some((self.last? + self.after).min(self.first? + self.max))
    }

    /// When the pending burst started.
    pub(super) fn first(&self) -> Option<Instant> {
        self.first
    }

    /// The pending changes were published.
    pub(super) fn reset(&mut self) {
        self.first = None;
        self.last = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_period_then_max_delay() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let mut d = Debounce::new(ms(100), ms(250));
        assert_eq!(d.deadline(), None);
        d.record(t0);
        assert_eq!(d.deadline(), Some(t0 + ms(100)));
        d.record(t0 + ms(90));
        assert_eq!(d.deadline(), Some(t0 + ms(190)), "quiet period restarts");
        d.record(t0 + ms(180));
        assert_eq!(d.deadline(), Some(t0 + ms(250)), "capped by max since first");
        d.reset();
        assert_eq!(d.deadline(), None);
    }
}
