//! Resolving the hosts Istio objects name against the merged registry, as istioctl's
//! `GetDestinationHost`: short names are services of the object's namespace; a service counts when it
//! is public or the namespaces the object is exported to (its own by default) see it; a wildcard
//! ServiceEntry host covers the names under it.

use super::{Input, Service};
use crate::traffic::{Visibility, hosts::resolve};

/// The service `host` (as written in an object in `namespace` exported to `export_to`) names.
pub(super) fn lookup<'a>(
    input: &'a Input,
    namespace: &str,
    export_to: &[String],
    host: &str,
) -> Option<&'a Service> {
    let fqdn = resolve(host, namespace, &input.settings.domain_suffix);
    // Seen where the object is exported to: its own namespace by default, else each `exportTo`
    // namespace; a public service is seen everywhere.
    let seen_from = |s: &Service| {
        s.visibility == Visibility::Public
            || if export_to.is_empty() {
                s.visibility.visible_in(namespace)
            } else {
                export_to.iter().any(|e| match e.as_str() {
                    "." => s.visibility.visible_in(namespace),
                    "*" | "~" => false,
                    ns => s.visibility.visible_in(ns),
                })
            }
    };
    let exact = input
        .services
        .iter()
        .find(|s| s.hostname == *fqdn && seen_from(s));
    exact.or_else(|| {
        let name = fqdn.trim_start_matches('*');
        input.services.iter().find(|s| {
            s.hostname
                .strip_prefix('*')
                .is_some_and(|suffix| name.ends_with(suffix) && s.visibility.visible_in(namespace))
        })
    })
}

/// Whether two host names overlap, wildcards on either side (istio's `host.Name.Matches`).
pub(super) fn overlap(a: &str, b: &str) -> bool {
    match (a.strip_prefix('*'), b.strip_prefix('*')) {
        (None, None) => a == b,
        (Some(sa), None) => b.ends_with(sa),
        (None, Some(sb)) => a.ends_with(sb),
        (Some(sa), Some(sb)) => sa.ends_with(sb) || sb.ends_with(sa),
    }
}

#[cfg(test)]
mod tests {
    use super::overlap;

    #[test]
    fn hosts_overlap_with_wildcards_on_either_side() {
        let cases = [
            ("a.com", "a.com", true),
            ("a.com", "b.com", false),
            ("*.com", "a.com", true),
            ("a.com", "*.com", true),
            ("*", "a.com", true),
            ("*.a.com", "*.com", true),
            ("*.a.com", "b.com", false),
        ];
        for (a, b, want) in cases {
            assert_eq!(overlap(a, b), want, "{a} {b}");
        }
    }
}
