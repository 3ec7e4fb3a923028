//! Identity from a Kubernetes service-account token (`authorization: Bearer …`), validated by a
//! TokenReview sent to the cluster the caller names in `clusterid` metadata (istiod's KubeJWT
//! authenticator). Tokens are never logged; positive results are cached briefly, keyed by a hash.

use std::{collections::HashMap, sync::Arc, time::Duration};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use tokio::time::Instant;
use tonic::metadata::MetadataMap;

use super::{CLUSTER_ID_METADATA, Identity};

/// Longest bearer token accepted (Kubernetes tokens are ~1 KiB).
const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// Longest cluster ID accepted in metadata.
const MAX_CLUSTER_ID_BYTES: usize = 253;
/// How long a successful review is reused. Short, so a deleted service account stops working soon.
const CACHE_TTL: Duration = Duration::from_secs(60);
/// Most reviews cached; beyond it, new results are not cached (memory stays bounded under a flood).
const CACHE_CAP: usize = 4096;
/// Longest a TokenReview may take before the caller is told to retry.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// The Kubernetes clients token reviews are sent to, by cluster ID. The lead wires the secret
/// controller's remote clusters in behind this; [`PrimaryCluster`] serves the primary alone.
pub trait ClusterClients: Send + Sync + 'static {
    /// The client for `cluster`, if meshd knows that cluster.
    fn client(&self, cluster: &str) -> Option<kube::Client>;
    /// Every known cluster ID (for the "unknown cluster" message).
    fn known(&self) -> Vec<String>;
}

/// Just the primary cluster.
#[derive(Clone)]
pub struct PrimaryCluster {
    id: String,
    client: kube::Client,
}

impl PrimaryCluster {
    /// The primary cluster `id` and its client.
    pub fn new(id: impl Into<String>, client: kube::Client) -> Self {
        Self {
            id: id.into(),
            client,
        }
    }
}

impl ClusterClients for PrimaryCluster {
    fn client(&self, cluster: &str) -> Option<kube::Client> {
        (cluster == self.id).then(|| self.client.clone())
    }

    fn known(&self) -> Vec<String> {
        vec![self.id.clone()]
    }
}

/// Why a token was refused.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Tokens are not accepted on this server (no Kubernetes API to review them).
    #[error("bearer tokens are not accepted here (no Kubernetes API configured); use a mesh certificate")]
    Disabled,
    /// The `authorization` metadata is not one `Bearer <token>` value.
    #[error("`authorization` metadata must be a single `Bearer <token>` value")]
    MalformedHeader,
    /// Over [`MAX_TOKEN_BYTES`].
    #[error("bearer token is {0} bytes, over the {MAX_TOKEN_BYTES}-byte limit")]
    TooLarge(usize),
    /// The `clusterid` metadata is not one short ASCII value.
    #[error("`clusterid` metadata must be a single cluster ID of at most {MAX_CLUSTER_ID_BYTES} bytes")]
    MalformedClusterId,
    /// The caller names a cluster meshd has no client for (e.g. its remote secret is not loaded).
    #[error("token for unknown cluster {cluster:?}: meshd knows {known:?}")]
    UnknownCluster {
        /// What the caller claimed.
        cluster: String,
        /// What meshd knows.
        known: Vec<String>,
    },
    /// The TokenReview could not be done.
    #[error("cannot review the token with cluster {cluster:?}: {reason}")]
    Review {
        /// The reviewing cluster.
        cluster: String,
        /// What went wrong (API error or timeout).
        reason: String,
    },
    /// The API server does not accept the token.
    #[error("token rejected by cluster {cluster:?}: {reason}")]
    Rejected {
        /// The reviewing cluster.
        cluster: String,
        /// The API server's reason.
        reason: String,
    },
    /// Valid, but not for meshd's audience.
    #[error("token from cluster {cluster:?} is not valid for audience {audience:?}")]
    Audience {
        /// The reviewing cluster.
        cluster: String,
        /// The required audience.
        audience: String,
    },
    /// Valid, but not a service account's.
    #[error("token from cluster {cluster:?} belongs to {user:?}, not a service account")]
    NotServiceAccount {
        /// The reviewing cluster.
        cluster: String,
        /// The user the token authenticates.
        user: String,
    },
}

impl TokenError {
    /// The caller should retry later rather than fix its credentials.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, TokenError::Review { .. })
    }
}

/// The bearer token in `metadata`, if any.
pub(super) fn bearer(metadata: &MetadataMap) -> Result<Option<&str>, TokenError> {
    let mut values = metadata.get_all("authorization").iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(TokenError::MalformedHeader);
    }
    if value.len() > MAX_TOKEN_BYTES + "Bearer ".len() {
        return Err(TokenError::TooLarge(value.len()));
    }
    let token = value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or(TokenError::MalformedHeader)?;
    Ok(Some(token))
}

/// The cluster named in `clusterid` metadata; empty when absent.
fn cluster_id(metadata: &MetadataMap) -> Result<&str, TokenError> {
    let mut values = metadata.get_all(CLUSTER_ID_METADATA).iter();
    let Some(value) = values.next() else {
        return Ok("");
    };
    match (values.next(), value.to_str()) {
        (None, Ok(id)) if id.len() <= MAX_CLUSTER_ID_BYTES => Ok(id),
        _ => Err(TokenError::MalformedClusterId),
    }
}

type CacheKey = [u8; 32];

/// Validates service-account tokens by TokenReview.
pub struct TokenAuthenticator {
    clients: Arc<dyn ClusterClients>,
    primary: String,
    audience: String,
    trust_domain: String,
    cache: Mutex<HashMap<CacheKey, (Identity, Instant)>>,
}

impl TokenAuthenticator {
    /// Reviews tokens for `audience` with `clients`; an absent `clusterid` means `primary`.
    /// Identities are issued in `trust_domain`.
    pub fn new(
        clients: Arc<dyn ClusterClients>,
        primary: impl Into<String>,
        audience: impl Into<String>,
        trust_domain: impl Into<String>,
    ) -> Self {
        Self {
            clients,
            primary: primary.into(),
            audience: audience.into(),
            trust_domain: trust_domain.into(),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The identity `token` proves, reviewed by the cluster named in `metadata`.
    pub async fn identity(&self, token: &str, metadata: &MetadataMap) -> Result<Identity, TokenError> {
        let cluster = match cluster_id(metadata)? {
            "" => self.primary.as_str(),
            c => c,
        };
        let client = self
            .clients
            .client(cluster)
            .ok_or_else(|| TokenError::UnknownCluster {
                cluster: cluster.to_owned(),
                known: self.clients.known(),
            })?;
        let key: CacheKey = Sha256::new()
            .chain_update(cluster)
            .chain_update([0])
            .chain_update(token)
            .finalize()
            .into();
        if let Some((id, at)) = self.cache.lock().get(&key)
            && at.elapsed() < CACHE_TTL
        {
            return Ok(id.clone());
        }
        let id = self.review(client, cluster, token).await?;
        self.remember(key, id.clone());
        Ok(id)
    }

    async fn review(&self, client: kube::Client, cluster: &str, token: &str) -> Result<Identity, TokenError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: Some(vec![self.audience.clone()]),
            },
            ..Default::default()
        };
        let api: Api<TokenReview> = Api::all(client);
        let review_err = |reason: String| TokenError::Review {
            cluster: cluster.to_owned(),
            reason,
        };
        let reviewed = tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review))
            .await
            .map_err(|_| review_err(format!("no answer within {REVIEW_TIMEOUT:?}")))?
            .map_err(|e| review_err(e.to_string()))?;
        let status = reviewed.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            return Err(TokenError::Rejected {
                cluster: cluster.to_owned(),
                reason: status.error.unwrap_or_else(|| "not authenticated".into()),
            });
        }
        // An API server that ignores `spec.audiences` echoes none: refuse rather than trust any token.
        if !status.audiences.unwrap_or_default().contains(&self.audience) {
            return Err(TokenError::Audience {
                cluster: cluster.to_owned(),
                audience: self.audience.clone(),
            });
        }
        let user = status.user.and_then(|u| u.username).unwrap_or_default();
        let (namespace, service_account) = user
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
            .filter(|(ns, sa)| !ns.is_empty() && !sa.is_empty() && !sa.contains(':'))
            .ok_or_else(|| TokenError::NotServiceAccount {
                cluster: cluster.to_owned(),
                user: user.clone(),
            })?;
        let mut id = Identity::new(&self.trust_domain, namespace, service_account);
        id.cluster = Some(cluster.to_owned());
        Ok(id)
    }

    fn remember(&self, key: CacheKey, id: Identity) {
        let mut cache = self.cache.lock();
        if cache.len() >= CACHE_CAP {
            cache.retain(|_, (_, at)| at.elapsed() < CACHE_TTL);
        }
        if cache.len() < CACHE_CAP {
            cache.insert(key, (id, Instant::now()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(pairs: &[(&'static str, &str)]) -> MetadataMap {
        let mut m = MetadataMap::new();
        for (k, v) in pairs {
            m.append(*k, v.parse().unwrap());
        }
        m
    }

    #[test]
    fn parses_bearer_and_cluster_metadata() {
        assert_eq!(bearer(&metadata(&[])).unwrap(), None);
        assert_eq!(
            bearer(&metadata(&[("authorization", "Bearer abc")])).unwrap(),
            Some("abc")
        );
        for bad in [
            &[("authorization", "Basic abc")][..],
            &[("authorization", "Bearer ")],
            &[("authorization", "Bearer a"), ("authorization", "Bearer b")],
        ] {
            assert!(matches!(bearer(&metadata(bad)), Err(TokenError::MalformedHeader)));
        }
        let huge = format!("Bearer {}", "a".repeat(MAX_TOKEN_BYTES + 1));
        assert!(matches!(
            bearer(&metadata(&[("authorization", &huge)])),
            Err(TokenError::TooLarge(_))
        ));
        assert_eq!(cluster_id(&metadata(&[])).unwrap(), "");
        assert_eq!(cluster_id(&metadata(&[("clusterid", "east")])).unwrap(), "east");
        assert!(cluster_id(&metadata(&[("clusterid", "a"), ("clusterid", "b")])).is_err());
    }
}
