//! Host names in Istio config: short names resolved as istiod does, and the host patterns
//! (`reviews.ns.svc.cluster.local`, `*.example.com`, `*`) rules are looked up by.

use std::sync::Arc;

/// istiod's `ResolveShortnameToFQDN`: a name without a dot is a Kubernetes service in `namespace`
/// (`reviews` → `reviews.<namespace>.svc.<suffix>`); anything with a dot, and wildcards, stay as written
/// (`reviews.default` is NOT expanded, as in istiod).
pub fn resolve(host: &str, namespace: &str, domain_suffix: &str) -> Arc<str> {
    if host.contains('.') || host.starts_with('*') || host.is_empty() {
        return host.into();
    }
    format!("{host}.{namespace}.svc.{domain_suffix}").into()
}

/// A host a rule is written for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HostPattern {
    /// One host name.
    Exact(Arc<str>),
    /// `*.example.com`: every name ending in `.example.com` (kept with its leading dot).
    Suffix(Arc<str>),
    /// `*`: every host.
    Any,
}

impl HostPattern {
    /// A resolved host (see [`resolve`]) as a pattern.
    pub fn parse(host: &str) -> Self {
        match host.strip_prefix('*') {
            Some("") => Self::Any,
            Some(suffix) => Self::Suffix(suffix.into()),
            None => Self::Exact(host.into()),
        }
    }

    /// Whether `host` (a service host name, possibly itself a wildcard) falls under this pattern.
    pub fn matches(&self, host: &str) -> bool {
        match self {
            Self::Exact(h) => **h == *host,
            Self::Suffix(s) => host.len() > s.len() && host.ends_with(&**s),
            Self::Any => true,
        }
    }

    /// Exact names only.
    pub fn is_exact(&self) -> bool {
        matches!(self, Self::Exact(_))
    }

    /// How specific a wildcard is (longer suffixes win, istiod's `MostSpecificHostMatch`); exact
    /// names are the most specific of all.
    pub fn specificity(&self) -> usize {
        match self {
            Self::Exact(_) => usize::MAX,
            Self::Suffix(s) => s.len(),
            Self::Any => 0,
        }
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exact(h) => f.write_str(h),
            Self::Suffix(s) => write!(f, "*{s}"),
            Self::Any => f.write_str("*"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_resolve_like_istiod() {
        for (host, want) in [
            ("reviews", "reviews.ns.svc.cluster.local"),
            ("reviews.default", "reviews.default"),
            (
                "reviews.default.svc.cluster.local",
                "reviews.default.svc.cluster.local",
            ),
            ("*.example.com", "*.example.com"),
            ("*", "*"),
            ("10.0.0.1", "10.0.0.1"),
        ] {
            assert_eq!(&*resolve(host, "ns", "cluster.local"), want, "{host}");
        }
    }

    #[test]
    fn patterns_match_and_rank() {
        let cases = [
            ("a.example.com", "a.example.com", true),
            ("a.example.com", "b.example.com", false),
            ("*.example.com", "a.example.com", true),
            ("*.example.com", "a.b.example.com", true),
            ("*.example.com", "example.com", false),
            ("*.example.com", "*.b.example.com", true),
            ("*", "anything", true),
        ];
        for (pattern, host, want) in cases {
            assert_eq!(
                HostPattern::parse(pattern).matches(host),
                want,
                "{pattern} ~ {host}"
            );
            assert_eq!(HostPattern::parse(pattern).to_string(), pattern);
        }
        let (exact, long, short, any) = (
            HostPattern::parse("a.b.c"),
            HostPattern::parse("*.b.c"),
            HostPattern::parse("*.c"),
            HostPattern::parse("*"),
        );
        assert!(exact.specificity() > long.specificity());
        assert!(long.specificity() > short.specificity());
        assert!(short.specificity() > any.specificity());
    }
}
