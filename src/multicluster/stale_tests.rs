use std::time::{Duration, SystemTime};

use super::*;

#[test]
fn annotations_override_the_default_part_by_part() {
    let default = StalePolicy {
        action: StaleAction::Deprioritize,
        after: Duration::from_secs(60),
    };
    let o = |action: Option<&str>, after: Option<&str>| StaleOverride {
        action: action.map(str::to_owned),
        after: after.map(str::to_owned),
    };
    let cases: Vec<(StaleOverride, Result<StalePolicy, String>)> = vec![
        (o(None, None), Ok(default)),
        (
            o(Some("drop"), None),
            Ok(StalePolicy {
                action: StaleAction::Drop,
                after: Duration::from_secs(60),
            }),
        ),
        (
            o(None, Some("10m")),
            Ok(StalePolicy {
                action: StaleAction::Deprioritize,
                after: Duration::from_secs(600),
            }),
        ),
        (
            o(Some(" keep "), Some("90s")),
            Ok(StalePolicy {
                action: StaleAction::Keep,
                after: Duration::from_secs(90),
            }),
        ),
        (
            o(Some("evict"), None),
            Err(
                r#"annotation meshd.io/stale-endpoints: "evict" is not one of keep, deprioritize, drop"#
                    .into(),
            ),
        ),
        (
            o(None, Some("soon")),
            Err(
                r#"annotation meshd.io/stale-endpoints-after: "soon" is not a duration such as 90s or 5m"#
                    .into(),
            ),
        ),
        (
            o(None, Some("0s")),
            Err("annotation meshd.io/stale-endpoints-after: 0s is not between 1s and 7d".into()),
        ),
        (
            o(None, Some("30d")),
            Err("annotation meshd.io/stale-endpoints-after: 30d is not between 1s and 7d".into()),
        ),
    ];
    for (o, want) in cases {
        assert_eq!(o.resolve(default).map_err(|e| e.to_string()), want, "{o:?}");
    }
}

#[test]
fn a_remote_turns_stale_once_unreachable_for_after() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let policy = |action| StalePolicy {
        action,
        after: Duration::from_secs(60),
    };
    // (action, unreachable since t0 − s (None: reachable), stale, enforced, remaining)
    let cases = [
        (StaleAction::Drop, None, false, None, None),
        (StaleAction::Drop, Some(0), false, None, Some(60)),
        (StaleAction::Drop, Some(59), false, None, Some(1)),
        (StaleAction::Drop, Some(60), true, Some(StaleAction::Drop), None),
        (
            StaleAction::Deprioritize,
            Some(3600),
            true,
            Some(StaleAction::Deprioritize),
            None,
        ),
        // Keep: stale is shown, nothing is enforced.
        (StaleAction::Keep, Some(3600), true, None, None),
    ];
    for (action, ago, stale, enforced, remaining) in cases {
        let since = ago.map(|s| t0 - Duration::from_secs(s));
        let s = Staleness::at(policy(action), since, t0);
        assert_eq!(s.stale, stale, "{action} {ago:?}");
        assert_eq!(s.enforced(), enforced, "{action} {ago:?}");
        assert_eq!(
            s.remaining(t0),
            remaining.map(Duration::from_secs),
            "{action} {ago:?}"
        );
    }
}

#[test]
fn staleness_serializes_as_clusterz_shows_it() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let s = Staleness::at(
        StalePolicy {
            action: StaleAction::Drop,
            after: Duration::from_secs(90),
        },
        Some(t0),
        t0 + Duration::from_secs(120),
    );
    assert_eq!(
        serde_json::to_value(&s).unwrap(),
        serde_json::json!({"action": "drop", "after": "1m 30s", "unreachableSince": "2027-01-15T08:00:00Z", "stale": true})
    );
}

#[test]
fn the_tracker_tells_the_aggregator_only_when_the_enforced_action_changes() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let at = |s: u64| t0 + Duration::from_secs(s);
    let policy = StalePolicy {
        action: StaleAction::Drop,
        after: Duration::from_secs(60),
    };
    let (tx, rx) = tokio::sync::watch::channel(Staleness::at(policy, None, t0));
    let mut t = Tracker::new(policy, tx);
    // (seconds, unreachable, sent to the aggregator, turned stale, wake in, published stale)
    let steps = [
        (0, false, None, false, None, false),
        (10, true, None, false, Some(60), false),
        (40, true, None, false, Some(30), false),
        (70, true, Some(Some(StaleAction::Drop)), true, None, true),
        (80, true, None, false, None, true),
        (90, false, Some(None), false, None, false),
        // Unreachable again: the count starts over.
        (100, true, None, false, Some(60), false),
    ];
    for (secs, unreachable, sent, turned, wake, stale) in steps {
        assert_eq!(t.observe(unreachable, at(secs)), (sent, turned), "t={secs}");
        assert_eq!(t.wake_in(at(secs)), wake.map(Duration::from_secs), "t={secs}");
        assert_eq!(rx.borrow().stale, stale, "t={secs}");
    }
    // A policy change to keep lifts the drop at the next observation.
    t.observe(true, at(200));
    t.set_policy(StalePolicy {
        action: StaleAction::Keep,
        ..policy
    });
    assert_eq!(t.observe(true, at(201)), (Some(None), false));
    assert!(rx.borrow().stale, "keep still shows it stale");
}
