//! Admission: the new-stream limit, driven through the service itself with the clock paused, so the
//! count of refusals in a burst is exact.

use std::time::Duration;

use tower::Service;

use super::*;
use crate::xds::{AllEndpoints, harness::Meshes, push::PushScope};

/// A server over an empty mesh admitting `rate` new streams per second.
fn server(rate: f64) -> AdsServer {
    let meshes = Arc::new(Meshes::new());
    meshes.publish(crate::envoy::StaticMesh::default(), PushScope::Full);
    let mut registry = prometheus_client::registry::Registry::default();
    AdsServer::new(
        meshes,
        Tasks::new(),
        Metrics::new(&mut registry),
        Arc::new(AllEndpoints),
        XdsLimits::default().with_new_stream_rate(rate),
    )
}

/// Opens one delta stream (no request sent: admission happens before any); whether it was refused
/// with `RESOURCE_EXHAUSTED`.
async fn refused(svc: &mut AdsService) -> bool {
    let req = http::Request::builder()
        .uri(format!("/{SERVICE}/DeltaAggregatedResources"))
        .body(Body::empty())
        .expect("valid request");
    let Ok(resp) = svc.call(req).await;
    match resp.headers().get(Status::GRPC_STATUS) {
        None => false,
        Some(code) => {
            assert_eq!(code, "8", "refused only by the limit: {:?}", resp.headers());
            let message = resp.headers().get(Status::GRPC_MESSAGE);
            assert!(
                message.is_some_and(|m| m.to_str().is_ok_and(|m| m.contains("next%20slot"))),
                "{message:?}"
            );
            true
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_burst_beyond_the_new_stream_limit_is_refused_resource_exhausted() {
    // (limit, streams in the burst): the first `limit` (at least one) are admitted, the rest refused.
    for (rate, burst, admitted) in [(3.0, 8, 3), (1.0, 4, 1), (0.5, 3, 1), (40.0, 45, 40)] {
        let mut svc = server(rate).service(None);
        let mut outcomes = Vec::new();
        for _ in 0..burst {
            outcomes.push(refused(&mut svc).await);
        }
        let expected: Vec<bool> = (0..burst).map(|i| i >= admitted).collect();
        assert_eq!(outcomes, expected, "limit {rate}/s");
        // One slot comes back after 1 / rate, not before.
        tokio::time::advance(Duration::from_secs_f64(0.9 / rate)).await;
        assert!(refused(&mut svc).await, "limit {rate}/s: too early");
        tokio::time::advance(Duration::from_secs_f64(0.2 / rate)).await;
        assert!(!refused(&mut svc).await, "limit {rate}/s: a slot is back");
        assert!(refused(&mut svc).await, "limit {rate}/s: only one");
    }
}

#[tokio::test(start_paused = true)]
async fn zero_keeps_the_automatic_limit() {
    let auto = crate::xds::push::default_concurrency();
    let mut svc = server(0.0).service(None);
    for _ in 0..auto {
        assert!(!refused(&mut svc).await);
    }
    assert!(refused(&mut svc).await, "the automatic limit, {auto}/s");
}
