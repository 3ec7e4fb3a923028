//! Remote secrets in `istioctl create-remote-secret` format: the reader identity in the remote cluster,
//! its long-lived token, and the labelled Secret that tells the secret controller about the cluster.
//! The remote is written to only here, and only to create the reader identity.
//!
//! Used by the sandbox to join its simulated remotes, and by `meshctl add-cluster`.

use std::collections::BTreeMap;

use k8s_openapi::{
    ByteString,
    api::{
        core::v1::{Namespace, Secret, ServiceAccount},
        rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject},
    },
};
use kube::{
    Api, Client,
    api::{ObjectMeta, PostParams},
};

use crate::model::is_dns1123_label;

/// The service account meshd reads remote clusters as (istioctl's default).
pub const READER_SERVICE_ACCOUNT: &str = "istio-reader-service-account";
/// The label the secret controller selects.
pub const MULTICLUSTER_LABEL: &str = "istio/multiCluster";
/// Informational annotation naming the cluster (istiod keys on the data key).
pub const CLUSTER_ANNOTATION: &str = "networking.istio.io/cluster";

/// How long to wait for the token controller to fill a new token Secret.
const TOKEN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Why a remote secret could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RemoteSecretError {
    /// A Kubernetes call to the remote cluster failed.
    #[error("{action} in the remote cluster: {source}")]
    Kube {
        /// What was being done.
        action: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The token Secret never got a token.
    #[error(
        "token Secret {namespace}/{name} has no token after {TOKEN_WAIT:?}; is the token controller running?"
    )]
    NoToken {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The cluster ID cannot be a Secret data key / DNS label.
    #[error("cluster name {0:?} must be a DNS-1123 label (lower-case letters, digits, '-')")]
    BadClusterName(String),
}

/// Credentials to read a remote cluster: where it is, the CA that signs it, and a bearer token.
#[derive(Clone)]
pub struct ReaderCredentials {
    /// API server URL as the primary reaches it.
    pub server: String,
    /// PEM CA bundle of the remote API server.
    pub ca_pem: Vec<u8>,
    /// Bearer token of the reader service account.
    pub token: String,
}

impl std::fmt::Debug for ReaderCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReaderCredentials")
            .field("server", &self.server)
            .field("token", &"<redacted>")
            .finish()
    }
}

/// Ensures the reader service account and its ClusterRole/Binding exist in the remote cluster, granting
/// exactly [`super::check::NEEDED`].
pub async fn ensure_reader(
    client: &Client,
    namespace: &str,
    service_account: &str,
) -> Result<(), RemoteSecretError> {
    let kube = |action: String| move |source| RemoteSecretError::Kube { action, source };
    let ns = Namespace {
        metadata: meta(namespace, None),
        ..Default::default()
    };
    create_if_missing(&Api::<Namespace>::all(client.clone()), &ns)
        .await
        .map_err(kube(format!("creating namespace {namespace}")))?;
    let sa = ServiceAccount {
        metadata: meta(service_account, Some(namespace)),
        ..Default::default()
    };
    create_if_missing(&Api::namespaced(client.clone(), namespace), &sa)
        .await
        .map_err(kube(format!(
            "creating service account {namespace}/{service_account}"
        )))?;
    let role_name = format!("istio-reader-clusterrole-{namespace}");
    // Exactly what meshd needs there (`remote-clusters --check` reviews the same list). The Helm chart's
    // `remote` profile grants the same; tests/e2e/test_rbac.py checks both against what meshd uses.
    let rules = super::check::NEEDED
        .iter()
        .map(|p| PolicyRule {
            api_groups: Some(vec![p.group.into()]),
            resources: Some(vec![p.resource.into()]),
            verbs: p.verbs.iter().map(|v| v.to_string()).collect(),
            ..Default::default()
        })
        .collect();
    let role = ClusterRole {
        metadata: meta(&role_name, None),
        rules: Some(rules),
        ..Default::default()
    };
    ensure_rules(&Api::all(client.clone()), &role)
        .await
        .map_err(kube(format!("creating or updating ClusterRole {role_name}")))?;
    let binding = ClusterRoleBinding {
        metadata: meta(&format!("istio-reader-clusterrole-{namespace}"), None),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: role_name,
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: service_account.into(),
            namespace: Some(namespace.into()),
            ..Default::default()
        }]),
    };
    create_if_missing(&Api::all(client.clone()), &binding)
        .await
        .map_err(kube("creating ClusterRoleBinding for the reader".into()))?;
    Ok(())
}

/// A long-lived token for `service_account` (istioctl's default): reuses its token Secret or creates
/// `<sa>-istio-remote-secret-token` and waits for the token controller to fill it. Returns the token and
/// the cluster CA from that Secret.
pub async fn long_lived_token(
    client: &Client,
    namespace: &str,
    service_account: &str,
) -> Result<(String, Vec<u8>), RemoteSecretError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let name = format!("{service_account}-istio-remote-secret-token");
    let mut secret = Secret {
        metadata: ObjectMeta {
            annotations: Some(BTreeMap::from([(
                "kubernetes.io/service-account.name".to_string(),
                service_account.to_string(),
            )])),
            ..meta(&name, Some(namespace))
        },
        type_: Some("kubernetes.io/service-account-token".into()),
        ..Default::default()
    };
    create_if_missing(&secrets, &secret)
        .await
        .map_err(|source| RemoteSecretError::Kube {
            action: format!("creating token Secret {namespace}/{name}"),
            source,
        })?;
    let deadline = tokio::time::Instant::now() + TOKEN_WAIT;
    loop {
        if let Some(found) = secrets
            .get_opt(&name)
            .await
            .map_err(|source| RemoteSecretError::Kube {
                action: format!("reading token Secret {namespace}/{name}"),
                source,
            })?
        {
            secret = found;
        }
        let data = secret.data.as_ref();
        if let (Some(token), Some(ca)) = (
            data.and_then(|d| d.get("token")),
            data.and_then(|d| d.get("ca.crt")),
        ) {
            return Ok((String::from_utf8_lossy(&token.0).into_owned(), ca.0.clone()));
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(RemoteSecretError::NoToken {
                namespace: namespace.into(),
                name,
            });
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// The kubeconfig a remote secret carries (same shape as istioctl's).
pub fn kubeconfig(cluster_id: &str, creds: &ReaderCredentials) -> String {
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_id, "cluster": {
            "server": creds.server,
            "certificate-authority-data": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &creds.ca_pem),
        }}],
        "contexts": [{"name": cluster_id, "context": {"cluster": cluster_id, "user": cluster_id}}],
        "current-context": cluster_id,
        "users": [{"name": cluster_id, "user": {"token": creds.token}}],
    });
    serde_yaml::to_string(&doc).unwrap_or_default()
}

/// The labelled Secret `istio-remote-secret-<cluster>` with the cluster ID as its data key.
pub fn secret(
    cluster_id: &str,
    namespace: &str,
    creds: &ReaderCredentials,
) -> Result<Secret, RemoteSecretError> {
    check_cluster_name(cluster_id)?;
    Ok(Secret {
        metadata: ObjectMeta {
            name: Some(format!("istio-remote-secret-{cluster_id}")),
            namespace: Some(namespace.into()),
            labels: Some(BTreeMap::from([(
                MULTICLUSTER_LABEL.to_string(),
                "true".to_string(),
            )])),
            annotations: Some(BTreeMap::from([(
                CLUSTER_ANNOTATION.to_string(),
                cluster_id.to_string(),
            )])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            cluster_id.to_string(),
            ByteString(kubeconfig(cluster_id, creds).into_bytes()),
        )])),
        ..Default::default()
    })
}

/// Creates the remote secret in the config cluster, or replaces it if it exists (a re-run rotates it).
pub async fn apply(config_cluster: &Client, secret: &Secret) -> Result<(), RemoteSecretError> {
    let ns = secret.metadata.namespace.as_deref().unwrap_or("istio-system");
    let name = secret.metadata.name.clone().unwrap_or_default();
    let api: Api<Secret> = Api::namespaced(config_cluster.clone(), ns);
    let kube = |source| RemoteSecretError::Kube {
        action: format!("writing Secret {ns}/{name}"),
        source,
    };
    match api.create(&PostParams::default(), secret).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let mut current = api.get(&name).await.map_err(kube)?;
            current.metadata.labels = secret.metadata.labels.clone();
            current.metadata.annotations = secret.metadata.annotations.clone();
            current.data = secret.data.clone();
            api.replace(&name, &PostParams::default(), &current)
                .await
                .map(drop)
                .map_err(kube)
        }
        Err(e) => Err(kube(e)),
    }
}

/// A cluster ID must be a DNS-1123 label (it is a Secret data key); checked before any cluster is contacted.
pub fn check_cluster_name(cluster_id: &str) -> Result<(), RemoteSecretError> {
    if is_dns1123_label(cluster_id) {
        Ok(())
    } else {
        Err(RemoteSecretError::BadClusterName(cluster_id.into()))
    }
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(Into::into),
        ..Default::default()
    }
}

/// Creates `role`, or gives an existing one `role`'s rules when they differ: a reader made before
/// meshd needed more (gateway certificates' secrets and subjectaccessreviews) is upgraded by running
/// `meshctl add-cluster` again (which then needs `get`, and `update` when they differ, on it).
async fn ensure_rules(api: &Api<ClusterRole>, role: &ClusterRole) -> Result<(), kube::Error> {
    match api.create(&PostParams::default(), role).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let name = role.metadata.name.as_deref().unwrap_or_default();
            let mut current = api.get(name).await?;
            if current.rules == role.rules {
                return Ok(());
            }
            current.rules = role.rules.clone();
            api.replace(name, &PostParams::default(), &current)
                .await
                .map(drop)
        }
        Err(e) => Err(e),
    }
}

async fn create_if_missing<K>(api: &Api<K>, obj: &K) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds() -> ReaderCredentials {
        ReaderCredentials {
            server: "https://10.0.0.1:6443".into(),
            ca_pem: b"CA".to_vec(),
            token: "tok".into(),
        }
    }

    #[test]
    fn secret_has_istioctl_shape() {
        let s = secret("cluster2", "istio-system", &creds()).unwrap();
        assert_eq!(s.metadata.name.as_deref(), Some("istio-remote-secret-cluster2"));
        assert_eq!(s.metadata.labels.unwrap()[MULTICLUSTER_LABEL], "true");
        assert_eq!(s.metadata.annotations.unwrap()[CLUSTER_ANNOTATION], "cluster2");
        let data = s.data.unwrap();
        let kc: serde_json::Value = serde_yaml::from_slice(&data["cluster2"].0).unwrap();
        assert_eq!(kc["current-context"], "cluster2");
        assert_eq!(kc["clusters"][0]["cluster"]["server"], "https://10.0.0.1:6443");
        assert_eq!(kc["clusters"][0]["cluster"]["certificate-authority-data"], "Q0E=");
        assert_eq!(kc["users"][0]["user"]["token"], "tok");
        assert!(
            !format!("{:?}", creds()).contains("tok\""),
            "Debug never prints the token"
        );
    }

    #[test]
    fn generated_kubeconfig_passes_the_sanitizer_unchanged() {
        let text = kubeconfig("cluster3", &creds());
        let mut parsed = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        // The sanitizer rebuilds the document: only the type header is not carried over.
        (parsed.api_version, parsed.kind) = (None, None);
        let sanitized = crate::multicluster::kubeconfig::sanitize(text.as_bytes(), &Default::default())
            .expect("accepted with no insecure options");
        assert_eq!(
            serde_json::to_value(&sanitized).unwrap(),
            serde_json::to_value(&parsed).unwrap(),
            "the sanitizer drops or changes nothing meshd generates"
        );
    }

    #[test]
    fn cluster_names_must_be_dns_labels() {
        for bad in ["", "Cluster2", "a_b", "-a", &"x".repeat(64)] {
            assert!(
                matches!(
                    secret(bad, "ns", &creds()),
                    Err(RemoteSecretError::BadClusterName(_))
                ),
                "{bad}"
            );
        }
    }
}
