//! SPIFFE IDs of Kubernetes workloads: `spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>`.
//!
//! Parsing is strict (X.509-SVID and Istio's layout) because the input comes from certificates and CSRs
//! that strangers send: anything else is an error naming what is wrong, never a panic.

use std::fmt;

/// Longest SPIFFE ID accepted (the SPIFFE spec's URI limit).
const MAX_ID_BYTES: usize = 2048;
/// Longest trust domain (the SPIFFE spec's limit).
const MAX_TRUST_DOMAIN_BYTES: usize = 255;

/// A workload identity: who a caller is, whichever credential proved it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    /// SPIFFE trust domain, e.g. `cluster.local`.
    pub trust_domain: String,
    /// Kubernetes namespace.
    pub namespace: String,
    /// Kubernetes service account.
    pub service_account: String,
    /// The cluster whose API server vouched for the identity (token authentication). `None` for
    /// certificates: a mesh certificate is valid in every cluster that shares the root.
    pub cluster: Option<String>,
}

/// Why a string is not a workload SPIFFE ID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpiffeError {
    /// Over [`MAX_ID_BYTES`].
    #[error("SPIFFE ID is {0} bytes, over the {MAX_ID_BYTES}-byte limit")]
    TooLong(usize),
    /// Not `spiffe://`.
    #[error("{0:?} is not a spiffe:// URI")]
    Scheme(String),
    /// Bad or empty trust domain.
    #[error("{id:?}: invalid trust domain {trust_domain:?}")]
    TrustDomain {
        /// The whole ID.
        id: String,
        /// The offending trust domain.
        trust_domain: String,
    },
    /// The path is not `/ns/<namespace>/sa/<service-account>` with valid names.
    #[error("{0:?}: path must be /ns/<namespace>/sa/<service-account>")]
    Path(String),
}

impl Identity {
    /// An identity in `trust_domain` with no cluster attached.
    pub fn new(
        trust_domain: impl Into<String>,
        namespace: impl Into<String>,
        service_account: impl Into<String>,
    ) -> Self {
        Self {
            trust_domain: trust_domain.into(),
            namespace: namespace.into(),
            service_account: service_account.into(),
            cluster: None,
        }
    }

    /// Parses `spiffe://<td>/ns/<ns>/sa/<sa>`.
    pub fn from_spiffe_uri(uri: &str) -> Result<Self, SpiffeError> {
        if uri.len() > MAX_ID_BYTES {
            return Err(SpiffeError::TooLong(uri.len()));
        }
        let rest = uri
            .strip_prefix("spiffe://")
            .ok_or_else(|| SpiffeError::Scheme(uri.to_owned()))?;
        let (trust_domain, path) = rest.split_once('/').unwrap_or((rest, ""));
        if !valid_trust_domain(trust_domain) {
            return Err(SpiffeError::TrustDomain {
                id: uri.to_owned(),
                trust_domain: trust_domain.to_owned(),
            });
        }
        let mut segments = path.split('/');
        match (
            segments.next(),
            segments.next(),
            segments.next(),
            segments.next(),
            segments.next(),
        ) {
            (Some("ns"), Some(ns), Some("sa"), Some(sa), None) if valid_name(ns) && valid_name(sa) => {
                Ok(Self::new(trust_domain, ns, sa))
            }
            _ => Err(SpiffeError::Path(uri.to_owned())),
        }
    }

    /// `spiffe://<td>/ns/<ns>/sa/<sa>`.
    pub fn spiffe_uri(&self) -> String {
        format!(
            "spiffe://{}/ns/{}/sa/{}",
            self.trust_domain, self.namespace, self.service_account
        )
    }

    /// Same workload (trust domain, namespace, service account), whatever cluster vouched for it.
    pub fn same_workload(&self, other: &Identity) -> bool {
        self.trust_domain == other.trust_domain
            && self.namespace == other.namespace
            && self.service_account == other.service_account
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.spiffe_uri())?;
        match &self.cluster {
            Some(c) => write!(f, " (cluster {c})"),
            None => Ok(()),
        }
    }
}

/// SPIFFE trust domains: lowercase letters, digits, `.`, `-`, `_`.
fn valid_trust_domain(td: &str) -> bool {
    !td.is_empty()
        && td.len() <= MAX_TRUST_DOMAIN_BYTES
        && td
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
}

/// Namespace and service-account names: Kubernetes DNS subdomains (lowercase alphanumerics, `-`, `.`),
/// 1..=253 bytes, starting and ending alphanumeric.
fn valid_name(name: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = name.as_bytes();
    matches!((bytes.first(), bytes.last()), (Some(&f), Some(&l)) if alnum(f) && alnum(l))
        && name.len() <= 253
        && bytes.iter().all(|&b| alnum(b) || b == b'-' || b == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats_workload_ids() {
        let id = Identity::from_spiffe_uri("spiffe://cluster.local/ns/sample/sa/default").unwrap();
        assert_eq!(id, Identity::new("cluster.local", "sample", "default"));
        assert_eq!(id.spiffe_uri(), "spiffe://cluster.local/ns/sample/sa/default");
        let mut remote = id.clone();
        remote.cluster = Some("east".into());
        assert!(remote.same_workload(&id));
        assert_eq!(
            remote.to_string(),
            "spiffe://cluster.local/ns/sample/sa/default (cluster east)"
        );
    }

    #[test]
    fn rejects_malformed_ids() {
        for (bad, want) in [
            ("http://cluster.local/ns/a/sa/b", "not a spiffe:// URI"),
            ("SPIFFE://cluster.local/ns/a/sa/b", "not a spiffe:// URI"),
            ("spiffe:///ns/a/sa/b", "invalid trust domain"),
            ("spiffe://Cluster.Local/ns/a/sa/b", "invalid trust domain"),
            ("spiffe://td:8080/ns/a/sa/b", "invalid trust domain"),
            ("spiffe://user@td/ns/a/sa/b", "invalid trust domain"),
            ("spiffe://td", "path must be"),
            ("spiffe://td/ns/a/sa", "path must be"),
            ("spiffe://td/ns/a/sa/", "path must be"),
            ("spiffe://td/ns/a/sa/b/extra", "path must be"),
            ("spiffe://td/sa/b/ns/a", "path must be"),
            ("spiffe://td/ns//sa/b", "path must be"),
            ("spiffe://td/ns/a/sa/b?x=1", "path must be"),
            ("spiffe://td/ns/a/sa/b#f", "path must be"),
            ("spiffe://td/ns/../sa/b", "path must be"),
            ("spiffe://td/ns/A/sa/b", "path must be"),
        ] {
            let err = Identity::from_spiffe_uri(bad).unwrap_err().to_string();
            assert!(err.contains(want), "{bad}: {err}");
        }
        let long = format!("spiffe://td/ns/a/sa/{}", "b".repeat(MAX_ID_BYTES));
        assert!(matches!(
            Identity::from_spiffe_uri(&long),
            Err(SpiffeError::TooLong(_))
        ));
    }
}
