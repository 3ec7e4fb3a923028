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
