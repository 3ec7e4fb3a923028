//! Where the CA's key material comes from.
//!
//! - **Plugged-in** (`--ca-dir`): Istio's `cacerts` files, polled by content hash (the same change
//!   detection as config files) and hot-reloaded. A change applies once two polls agree and the whole
//!   set validates, so a rotation written file by file never publishes a half-rotated CA.
//! - **Self-signed**: a root generated once and stored in the `istio-ca-secret` Secret of the system
//!   namespace, loaded if present, so restarts and replicas share it.

use std::{collections::BTreeMap, path::Path, sync::Arc, time::Duration};

use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::watch;
use tracing::{error, info};

use super::{
    CaError,
    bundle::{CA_CERT, CA_KEY, CERT_CHAIN, CaBundle, CaPem, ROOT_CERT},
};
use crate::{
    config::{
        ConfigError,
        watch::{Change, ChangeDetector, read_capped, spawn_poller},
    },
    drain::Tasks,
};

/// Istio's self-signed CA Secret.
pub const CA_SECRET_NAME: &str = "istio-ca-secret";
/// The Secret's type, as istiod writes it.
const CA_SECRET_TYPE: &str = "istio.io/ca-root";

const KIND: &str = "plugged-in CA file";

/// Reads the four files (`cert-chain.pem` may be absent).
pub fn read_dir(dir: &Path) -> Result<CaPem, CaError> {
    let read = |name: &str| read_capped(KIND, &dir.join(name));
    let in_dir = |source: CaError| CaError::Dir {
        dir: dir.to_owned(),
        source: Box::new(source),
    };
    let chain = match read(CERT_CHAIN) {
        Ok(text) => text,
        Err(ConfigError::Read { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            String::new()
        }
        Err(e) => return Err(in_dir(e.into())),
    };
    Ok(CaPem {
        cert: read(CA_CERT).map_err(|e| in_dir(e.into()))?,
        key: read(CA_KEY).map_err(|e| in_dir(e.into()))?,
        root: read(ROOT_CERT).map_err(|e| in_dir(e.into()))?,
        chain,
    })
}

fn load_dir(dir: &Path) -> Result<CaBundle, CaError> {
    CaBundle::from_pem(&read_dir(dir)?).map_err(|e| match e {
        e @ CaError::Dir { .. } => e,
        e => CaError::Dir {
            dir: dir.to_owned(),
            source: Box::new(e),
        },
    })
}

fn digest(pem: &CaPem) -> [u8; 32] {
    let joined = [&pem.cert, "\0", &pem.key, "\0", &pem.root, "\0", &pem.chain].concat();
    ChangeDetector::digest(joined.as_bytes())
}

/// Loads the plugged-in CA in `dir` (an error here is fatal at start), then polls it every `interval`
/// and publishes each new valid set. An invalid set is logged and the last good CA stays in force.
pub fn watch_dir(
    dir: &Path,
    tasks: &Tasks,
    interval: Duration,
) -> Result<watch::Receiver<Arc<CaBundle>>, CaError> {
    let pem = read_dir(dir)?;
    let bundle = load_dir(dir)?;
    info!(dir = %dir.display(), ca = %bundle.summary(), "plugged-in CA loaded");
    let (tx, rx) = watch::channel(Arc::new(bundle));
    let mut changes = ChangeDetector::new(digest(&pem));
    let dir = dir.to_owned();
    spawn_poller(tasks, "ca-files-watch", interval, move || {
        match changes.observe_by(read_dir(&dir), digest) {
            Change::None => {}
            Change::Failed(e) => error!(error = %e, "plugged-in CA unreadable; keeping the current CA"),
            Change::Stable(pem) => match CaBundle::from_pem(&pem) {
                Ok(bundle) => {
                    info!(dir = %dir.display(), ca = %bundle.summary(), "plugged-in CA reloaded");
                    tx.send_replace(Arc::new(bundle));
                }
                Err(e) => {
                    error!(dir = %dir.display(), error = %e, "plugged-in CA rejected; keeping the current CA")
                }
            },
        }
    });
    Ok(rx)
}

/// Loads the self-signed CA from `istio-ca-secret` in `namespace`. If absent and `create` (this replica
/// leads), creates it with a new root for `trust_domain`; otherwise `None` (the leader will).
/// Concurrent creators still converge: whoever loses the create re-reads.
pub async fn load_or_create_secret(
    client: kube::Client,
    namespace: &str,
    trust_domain: &str,
    create: bool,
) -> Result<Option<CaBundle>, CaError> {
    let api: Api<Secret> = Api::namespaced(client, namespace);
    let in_secret = |source: CaError| CaError::Secret {
        namespace: namespace.to_owned(),
        name: CA_SECRET_NAME.to_owned(),
        source: Box::new(source),
    };
    if let Some(secret) = api.get_opt(CA_SECRET_NAME).await.map_err(CaError::Kube)? {
        return CaBundle::from_pem(&from_secret(&secret)?)
            .map(Some)
            .map_err(in_secret);
    }
    if !create {
        return Ok(None);
    }
    let pem = CaBundle::generate_self_signed(trust_domain)?;
    match api
        .create(&PostParams::default(), &to_secret(namespace, &pem))
        .await
    {
        Ok(_) => {
            info!(%namespace, secret = CA_SECRET_NAME, "generated a self-signed mesh root");
            CaBundle::from_pem(&pem).map(Some).map_err(in_secret)
        }
        Err(kube::Error::Api(s)) if s.is_already_exists() => {
            let secret = api.get(CA_SECRET_NAME).await.map_err(CaError::Kube)?;
            CaBundle::from_pem(&from_secret(&secret)?)
                .map(Some)
                .map_err(in_secret)
        }
        Err(e) => Err(CaError::Kube(e)),
    }
}

fn from_secret(secret: &Secret) -> Result<CaPem, CaError> {
    let empty = BTreeMap::new();
    let data = secret.data.as_ref().unwrap_or(&empty);
    let get = |key: &'static str, required: bool| match data.get(key) {
        Some(v) => String::from_utf8(v.0.clone()).map_err(|_| CaError::invalid(key, "not UTF-8 PEM")),
        None if required => Err(CaError::invalid(key, "missing from the Secret")),
        None => Ok(String::new()),
    };
    Ok(CaPem {
        cert: get(CA_CERT, true)?,
        key: get(CA_KEY, true)?,
        root: get(ROOT_CERT, false)?,
        chain: get(CERT_CHAIN, false)?,
    })
}

fn to_secret(namespace: &str, pem: &CaPem) -> Secret {
    let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
    Secret {
        metadata: ObjectMeta {
            name: Some(CA_SECRET_NAME.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        type_: Some(CA_SECRET_TYPE.into()),
        data: Some(BTreeMap::from([
            (CA_CERT.to_owned(), bytes(&pem.cert)),
            (CA_KEY.to_owned(), bytes(&pem.key)),
            (ROOT_CERT.to_owned(), bytes(&pem.root)),
            (CERT_CHAIN.to_owned(), bytes(&pem.chain)),
        ])),
        ..Default::default()
    }
}
