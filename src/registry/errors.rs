//! Kubernetes client errors in words an operator can act on (clusterz status, logs).

use kube::runtime::watcher;

/// Describes a watch failure: unauthorized, forbidden, TLS failure, unreachable, or the API's own words.
pub fn describe(e: &watcher::Error) -> String {
    match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => describe_client(e),
        watcher::Error::WatchError(status) => api_status(status.code, &status.reason, &status.message),
        watcher::Error::NoResourceVersion => "the API server returned no resourceVersion".into(),
    }
}

fn describe_client(e: &kube::Error) -> String {
    if let kube::Error::Api(status) = e {
        return api_status(status.code, &status.reason, &status.message);
    }
    // Connection problems arrive wrapped several layers deep; the innermost cause says what happened.
    let chain: Vec<String> = std::iter::successors(Some(e as &dyn std::error::Error), |e| (*e).source())
        .map(|e| e.to_string())
        .collect();
    let all = chain.join(": ").to_ascii_lowercase();
    let innermost = chain.last().cloned().unwrap_or_default();
    if all.contains("certificate") || all.contains("tls") || all.contains("handshake") {
        format!("TLS failure: {innermost}")
    } else if all.contains("refused")
        || all.contains("dns")
        || all.contains("timed out")
        || all.contains("unreachable")
        || all.contains("connect")
    {
        format!("unreachable: {innermost}")
    } else {
        innermost
    }
}

fn api_status(code: u16, reason: &str, message: &str) -> String {
    match code {
        401 => "unauthorized (401): the API server rejected the credentials".into(),
        403 => format!("forbidden (403): {message}"),
        410 => "watch expired (410 Gone); relisting".into(),
        _ => format!("API error {code} {reason}: {message}"),
    }
}
