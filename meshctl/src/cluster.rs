//! `meshctl add-cluster` and `remove-cluster`: istioctl's `create-remote-secret`, with a short-lived
//! TokenRequest token by default instead of a long-lived token Secret.
//!
//! The remote cluster is written to only to create the reader identity; the primary only to write
//! or delete the remote Secret. What is printed is the Secret the secret controller reads.

use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::{
    authentication::v1::{TokenRequest, TokenRequestSpec},
    core::v1::{Secret, ServiceAccount},
};
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};

use meshd::multicluster::remote_secret::{self, MULTICLUSTER_LABEL, ReaderCredentials, RemoteSecretError};

/// Why a cluster could not be added or removed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A kubeconfig could not be read or used.
    #[error(
        "{role}: kubeconfig {}: {reason}",
        .path.as_deref().unwrap_or("($KUBECONFIG or ~/.kube/config)")
    )]
    Kubeconfig {
        /// Whose: the `primary` or the `remote` cluster (`--primary-kubeconfig` or `--kubeconfig`).
        role: Role,
        /// Which file, if named.
        path: Option<String>,
        /// What went wrong.
        reason: String,
    },
    /// The API server would be reached over loopback from inside meshd's pod.
    #[error(
        "the remote API server is {server}, a loopback address: meshd would dial itself, not the cluster. \
         Pass --server with an address meshd can reach, or --allow-loopback if meshd runs on this machine \
         (the sandbox)"
    )]
    LoopbackServer {
        /// The server URL.
        server: String,
    },
    /// The kubeconfig carries no CA for the API server.
    #[error(
        "the remote kubeconfig has no certificate-authority-data for {server}; meshd must verify the API server"
    )]
    NoCa {
        /// The server URL.
        server: String,
    },
    /// Reader identity, token, Secret.
    #[error(transparent)]
    RemoteSecret(#[from] RemoteSecretError),
    /// A Kubernetes call failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done.
        action: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Talking to the remote cluster's API server failed.
    #[error("{source} (remote API server {server})")]
    AtRemote {
        /// The server the remote kubeconfig names.
        server: String,
        /// What failed.
        #[source]
        source: Box<ClusterError>,
    },
    /// No remote Secret holds the cluster.
    #[error("no Secret labelled {MULTICLUSTER_LABEL}=true in {namespace} holds cluster {id:?}")]
    NotFound {
        /// The cluster ID.
        id: String,
        /// Where we looked.
        namespace: String,
    },
}

/// Which cluster a kubeconfig is for, as errors name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The config cluster meshd runs on (`--primary-kubeconfig`).
    Primary,
    /// The cluster being added (`--kubeconfig`).
    Remote,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Primary => "primary cluster (--primary-kubeconfig)",
            Self::Remote => "remote cluster (--kubeconfig)",
        })
    }
}

/// How the reader's token is obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// A bound TokenRequest token valid this long (rotate by re-running add-cluster).
    Bound(Duration),
    /// A long-lived `kubernetes.io/service-account-token` Secret (istioctl's way).
    LongLived,
}

/// What `add-cluster` needs.
#[derive(Debug, Clone)]
pub struct AddCluster {
    /// The cluster ID (a DNS label).
    pub name: String,
    /// Namespace of the reader and of the remote Secret.
    pub namespace: String,
    /// The reader service account.
    pub service_account: String,
    /// Create it (and its ClusterRole/Binding) if missing.
    pub create_service_account: bool,
    /// Token kind.
    pub token: TokenKind,
    /// API server URL as meshd reaches it (default: the kubeconfig's).
    pub server: Option<String>,
    /// Allow a loopback server (sandbox, or meshd on this machine).
    pub allow_loopback: bool,
}

/// A kube client and its server URL and CA from a kubeconfig file (default: `$KUBECONFIG` or
/// `~/.kube/config`) and context (default: current).
pub async fn client(
    role: Role,
    path: Option<&str>,
    context: Option<&str>,
) -> Result<(Client, String, Option<Vec<u8>>), ClusterError> {
    let err = |reason: String| ClusterError::Kubeconfig {
        role,
        path: path.map(str::to_owned),
        reason,
    };
    let kubeconfig = match path {
        Some(p) => Kubeconfig::read_from(p),
        None => Kubeconfig::read(),
    }
    .map_err(|e| err(e.to_string()))?;
    let ctx_name = context
        .map(str::to_owned)
        .or_else(|| kubeconfig.current_context.clone())
        .unwrap_or_default();
    let cluster_name = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == ctx_name)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .ok_or_else(|| err(format!("no context {ctx_name:?}")))?;
    let cluster = kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.clone())
        .ok_or_else(|| err(format!("no cluster {cluster_name:?}")))?;
    let server = cluster.server.clone().unwrap_or_default();
    let ca = cluster
        .certificate_authority_data
        .as_deref()
        .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok());
    let options = KubeConfigOptions {
        context: Some(ctx_name),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| err(e.to_string()))?;
    let client = Client::try_from(config).map_err(|e| err(e.to_string()))?;
    Ok((client, server, ca))
}

/// Whether `server`'s host is a loopback address or `localhost`.
pub fn is_loopback(server: &str) -> bool {
    let host = server
        .parse::<http::Uri>()
        .ok()
        .and_then(|u| u.host().map(str::to_owned))
        .unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Ensures the reader, gets its token, and returns the remote Secret (not yet applied).
pub async fn remote_secret(
    remote: &Client,
    kubeconfig_server: &str,
    kubeconfig_ca: Option<Vec<u8>>,
    opts: &AddCluster,
) -> Result<Secret, ClusterError> {
    let server = opts
        .server
        .clone()
        .unwrap_or_else(|| kubeconfig_server.to_owned());
    if is_loopback(&server) && !opts.allow_loopback {
        return Err(ClusterError::LoopbackServer { server });
    }
    let at_remote = |e: ClusterError| ClusterError::AtRemote {
        server: kubeconfig_server.to_owned(),
        source: Box::new(e),
    };
    if opts.create_service_account {
        remote_secret::ensure_reader(remote, &opts.namespace, &opts.service_account)
            .await
            .map_err(|e| at_remote(e.into()))?;
    }
    let (token, ca_pem) = match opts.token {
        TokenKind::LongLived => {
            remote_secret::long_lived_token(remote, &opts.namespace, &opts.service_account)
                .await
                .map_err(|e| at_remote(e.into()))?
        }
        TokenKind::Bound(ttl) => {
            let ca = kubeconfig_ca.ok_or_else(|| ClusterError::NoCa {
                server: server.clone(),
            })?;
            (
                bound_token(remote, &opts.namespace, &opts.service_account, ttl)
                    .await
                    .map_err(at_remote)?,
                ca,
            )
        }
    };
    let creds = ReaderCredentials {
        server,
        ca_pem,
        token,
    };
    Ok(remote_secret::secret(&opts.name, &opts.namespace, &creds)?)
}

/// A TokenRequest token for the reader, valid for `ttl` (the API server may shorten it).
async fn bound_token(
    client: &Client,
    namespace: &str,
    sa: &str,
    ttl: Duration,
) -> Result<String, ClusterError> {
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX)),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let issued = api
        .create_token_request(sa, &PostParams::default(), &request)
        .await
        .map_err(|source| ClusterError::Kube {
            action: format!("requesting a token for {namespace}/{sa} in the remote cluster"),
            source,
        })?;
    Ok(issued.status.map(|s| s.token).unwrap_or_default())
}

/// The Secret as istioctl prints it: a header comment, `stringData` for readability.
pub fn secret_yaml(secret: &Secret) -> String {
    let mut printable = secret.clone();
    printable.string_data = printable.data.take().map(|d| {
        d.into_iter()
            .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
            .collect()
    });
    let mut doc = serde_json::to_value(&printable).unwrap_or_default();
    doc["apiVersion"] = "v1".into();
    doc["kind"] = "Secret".into();
    format!(
        "# This file is autogenerated by meshctl add-cluster; it holds a credential.\n{}---\n",
        serde_yaml::to_string(&doc).unwrap_or_default()
    )
}

/// Writes the remote Secret to the primary (replacing it: a re-run rotates the token).
pub async fn apply(primary: &Client, secret: &Secret) -> Result<(), ClusterError> {
    Ok(remote_secret::apply(primary, secret).await?)
}

/// Removes cluster `id` from the primary: deletes its Secret, or only its key if the Secret holds
/// other clusters too. Returns the Secret's name.
pub async fn remove(primary: &Client, namespace: &str, id: &str) -> Result<String, ClusterError> {
    let api: Api<Secret> = Api::namespaced(primary.clone(), namespace);
    let kube = |action: String| move |source| ClusterError::Kube { action, source };
    let labelled = api
        .list(&ListParams::default().labels(&format!("{MULTICLUSTER_LABEL}=true")))
        .await
        .map_err(kube(format!("listing remote Secrets in {namespace}")))?;
    let holder = labelled
        .items
        .into_iter()
        .find(|s| s.data.as_ref().is_some_and(|d| d.contains_key(id)))
        .ok_or_else(|| ClusterError::NotFound {
            id: id.into(),
            namespace: namespace.into(),
        })?;
    let name = holder.metadata.name.clone().unwrap_or_default();
    if holder.data.as_ref().is_some_and(|d| d.len() == 1) {
        api.delete(&name, &Default::default())
            .await
            .map_err(kube(format!("deleting Secret {namespace}/{name}")))?;
    } else {
        let mut rest = holder;
        if let Some(d) = rest.data.as_mut() {
            d.remove(id);
        }
        api.replace(&name, &PostParams::default(), &rest)
            .await
            .map_err(kube(format!("updating Secret {namespace}/{name}")))?;
    }
    Ok(format!("{namespace}/{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_servers_are_recognised() {
        let cases = [
            ("https://127.0.0.1:6443", true),
            ("https://127.3.2.1", true),
            ("https://localhost:443", true),
            ("https://[::1]:6443", true),
            ("https://10.0.0.1:6443", false),
            ("https://api.example.com", false),
        ];
        for (server, want) in cases {
            assert_eq!(is_loopback(server), want, "{server}");
        }
    }

    #[test]
    fn printed_secret_uses_string_data_and_keeps_the_kubeconfig() {
        let creds = ReaderCredentials {
            server: "https://10.0.0.1:6443".into(),
            ca_pem: b"CA".to_vec(),
            token: "tok".into(),
        };
        let s = remote_secret::secret("cluster3", "istio-system", &creds).unwrap();
        let y = secret_yaml(&s);
        let doc: serde_json::Value = serde_yaml::from_str(y.trim_end_matches("---\n")).unwrap();
        assert_eq!(doc["kind"], "Secret");
        assert_eq!(doc["metadata"]["labels"][MULTICLUSTER_LABEL], "true");
        assert!(doc["data"].is_null());
        assert_eq!(
            doc["stringData"]["cluster3"].as_str().unwrap(),
            remote_secret::kubeconfig("cluster3", &creds)
        );
    }
}
