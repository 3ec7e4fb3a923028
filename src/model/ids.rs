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
