//! Kubernetes client errors in words an operator can act on (clusterz status, logs).

use kube::runtime::watcher;

/// Describes a watch failure of the API server at `server` (its URL, named in connection, TLS and
/// credential failures): unauthorized, forbidden, TLS failure, unreachable, or the API's own words.
pub fn describe(e: &watcher::Error, server: &str) -> String {
    match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => describe_client(e, server),
        watcher::Error::WatchError(status) => {
            api_status(status.code, &status.reason, &status.message, server)
        }
        watcher::Error::NoResourceVersion => format!("the API server {server} returned no resourceVersion"),
    }
}

fn describe_client(e: &kube::Error, server: &str) -> String {
    if let kube::Error::Api(status) = e {
        return api_status(status.code, &status.reason, &status.message, server);
    }
    // Connection problems arrive wrapped several layers deep; the innermost cause says what happened.
    let chain: Vec<String> = std::iter::successors(Some(e as &dyn std::error::Error), |e| (*e).source())
        .map(|e| e.to_string())
        .collect();
    let all = chain.join(": ").to_ascii_lowercase();
    let innermost = chain.last().cloned().unwrap_or_default();
    if all.contains("certificate") || all.contains("tls") || all.contains("handshake") {
        format!("TLS failure with API server {server}: {innermost}")
    } else if all.contains("refused")
        || all.contains("dns")
        || all.contains("timed out")
        || all.contains("unreachable")
        || all.contains("connect")
    {
        format!("unreachable: API server {server}: {innermost}")
    } else {
        format!("API server {server}: {innermost}")
    }
}

fn api_status(code: u16, reason: &str, message: &str, server: &str) -> String {
    match code {
        401 => format!("unauthorized (401): the API server {server} rejected the credentials"),
        403 => format!("forbidden (403): {message}"),
        410 => "watch expired (410 Gone); relisting".into(),
        _ => format!("API error {code} {reason} from {server}: {message}"),
    }
}

/// A client config's API server URL as messages show it (`https://host:port`, no trailing `/`).
pub fn server_url(config: &kube::Config) -> String {
    config.cluster_url.to_string().trim_end_matches('/').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_failures_name_the_server() {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let e = watcher::Error::InitialListFailed(kube::Error::Service(Box::new(io)));
        let shown = describe(&e, "https://10.0.0.1:6443");
        assert!(
            shown.starts_with("unreachable: API server https://10.0.0.1:6443: "),
            "{shown}"
        );
    }

    #[test]
    fn server_urls_lose_the_trailing_slash() {
        let config = kube::Config::new("https://10.0.0.1:6443".parse().unwrap());
        assert_eq!(server_url(&config), "https://10.0.0.1:6443");
    }
}
