//! istiod's compressed endpoint telemetry metadata (`AppendLbEndpointMetadata`): EDS sends every
//! endpoint's `istio.workload` as `<workload>;<namespace>;<canonical name>;<canonical revision>;<cluster>`,
//! which Envoy's Istio stats filter parses for the destination labels of requests that never reach
//! a sidecar (and which is far smaller than one key per field). Built once per pod, WorkloadEntry or
//! gateway, never per push.

use std::{collections::BTreeMap, sync::Arc};

/// Canonical service name label (istiod's `kubelabels.CanonicalService` reads these in order).
const CANONICAL_NAME: [&str; 3] = ["service.istio.io/canonical-name", "app.kubernetes.io/name", "app"];
/// Canonical revision labels, in order.
const CANONICAL_REVISION: [&str; 3] = [
    "service.istio.io/canonical-revision",
    "app.kubernetes.io/version",
    "version",
];

/// The canonical service of a workload: its name label, else the workload name; its revision label,
/// else `latest` (istiod's `kubelabels.CanonicalService`).
fn canonical_service<'a>(labels: &'a BTreeMap<String, String>, workload: &'a str) -> (&'a str, &'a str) {
    let first = |keys: &[&str]| keys.iter().find_map(|k| labels.get(*k)).map(String::as_str);
    (
        first(&CANONICAL_NAME).unwrap_or(workload),
        first(&CANONICAL_REVISION).unwrap_or("latest"),
    )
}

/// The `istio.workload` string; the revision is left empty when it is `latest` (istiod does not send
/// the default). Empty workload and namespace for what has neither (a network gateway, an address
/// without a pod), as istiod.
pub fn workload_meta(
    workload: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    cluster: &str,
) -> Arc<str> {
    let (name, revision) = canonical_service(labels, workload);
    let revision = if revision == "latest" { "" } else { revision };
    Arc::from(format!("{workload};{namespace};{name};{revision};{cluster}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    type Pairs<'a> = &'a [(&'a str, &'a str)];

    #[test]
    fn compressed_as_istiod() {
        let labels = |pairs: Pairs| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        // (labels, workload, want) in namespace `ns` of cluster `c1`.
        let cases: [(Pairs, &str, &str); 6] = [
            (&[], "reviews", "reviews;ns;reviews;;c1"),
            (
                &[("app", "rev"), ("version", "v2")],
                "reviews-v2",
                "reviews-v2;ns;rev;v2;c1",
            ),
            (
                &[
                    ("app", "a"),
                    ("app.kubernetes.io/name", "k"),
                    ("service.istio.io/canonical-name", "c"),
                ],
                "w",
                "w;ns;c;;c1",
            ),
            (
                &[("app.kubernetes.io/name", "k"), ("app", "a")],
                "w",
                "w;ns;k;;c1",
            ),
            (
                &[
                    ("version", "v1"),
                    ("app.kubernetes.io/version", "1.2"),
                    ("service.istio.io/canonical-revision", "r3"),
                ],
                "w",
                "w;ns;w;r3;c1",
            ),
            // `latest` is istiod's default: never sent, even when labelled.
            (&[("version", "latest")], "w", "w;ns;w;;c1"),
        ];
        for (l, workload, want) in cases {
            assert_eq!(
                &*workload_meta(workload, "ns", &labels(l), "c1"),
                want,
                "{l:?} {workload}"
            );
        }
        // A network gateway: only its cluster.
        assert_eq!(&*workload_meta("", "", &BTreeMap::new(), "c2"), ";;;;c2");
    }
}
