//! Cheap, clonable string identifiers. Each is an `Arc<str>`: cloning is a reference-count bump, so
//! every endpoint of a cluster shares one allocation for its cluster and network names.

use std::{borrow::Borrow, fmt, ops::Deref, sync::Arc};

use serde::{Deserialize, Serialize};

macro_rules! arc_str_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Arc<str>);

        impl $name {
            /// The identifier as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.into())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s.into())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&*self.0, f)
            }
        }
    };
}

arc_str_id!(
    /// A cluster's ID (istiod's `CLUSTER_ID`; a remote secret's data key).
    ClusterId
);
arc_str_id!(
    /// A network name (`topology.istio.io/network`, meshNetworks keys).
    NetworkId
);
arc_str_id!(
    /// A service's fully qualified host name, e.g. `reviews.bookinfo.svc.cluster.local`.
    Hostname
);

/// A service's identity across clusters: its host name and namespace (istiod's shard index key).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize)]
pub struct ServiceKey {
    /// Fully qualified host name.
    pub hostname: Hostname,
    /// Namespace the service lives in.
    pub namespace: Arc<str>,
}

impl ServiceKey {
    /// Key for `hostname` in `namespace`.
    pub fn new(hostname: impl Into<Hostname>, namespace: impl Into<Arc<str>>) -> Self {
        Self {
            hostname: hostname.into(),
            namespace: namespace.into(),
        }
    }
}

impl fmt::Display for ServiceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.hostname)
    }
}

/// Which kind of registry produced an endpoint shard (istiod's `provider.ID`): a cluster's Kubernetes
/// registry and the ServiceEntry registry fed from the same cluster write different shards.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize)]
pub enum Provider {
    /// Services, EndpointSlices and Pods of one cluster.
    Kubernetes,
    /// ServiceEntries and WorkloadEntries (istiod's `External`).
    External,
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Kubernetes => "Kubernetes",
            Self::External => "External",
        })
    }
}

/// One registry's part of the merged view (istiod's `model.ShardKey`): its provider and cluster.
/// Ordered provider first, as istiod's `Kubernetes/<cluster>` strings sort.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct ShardKey {
    /// The registry kind.
    pub provider: Provider,
    /// The cluster it reads.
    pub cluster: ClusterId,
}

impl ShardKey {
    /// The Kubernetes registry of `cluster`.
    pub fn kubernetes(cluster: impl Into<ClusterId>) -> Self {
        Self {
            provider: Provider::Kubernetes,
            cluster: cluster.into(),
        }
    }

    /// The ServiceEntry registry fed from `cluster`.
    pub fn external(cluster: impl Into<ClusterId>) -> Self {
        Self {
            provider: Provider::External,
            cluster: cluster.into(),
        }
    }
}

impl fmt::Display for ShardKey {
    /// istiod's form, `<provider>/<cluster>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider, self.cluster)
    }
}

impl Serialize for ShardKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A DNS-1123 label (apimachinery's `IsDNS1123Label`): 1–63 of `[a-z0-9-]`, alphanumeric at both ends.
/// Namespaces, cluster IDs, subset names and the other names Istio and Kubernetes restrict to a label.
pub fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}
