//! Credentials: the simulator's CA (serving and client certificates), signed bearer tokens, and who a request is.
//!
//! Authorization is elsewhere: by default none (everyone may do everything), opt-in RBAC in `rbac`.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use http::HeaderMap;
use rand::Rng;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::controllers::{secret_kind, service_account_kind};
use super::error::Error;
use super::object::now_secs;
use super::persist::{self, PersistError};
use super::store::Store;

/// The audience (and issuer) of tokens meant for this API server, as on a real cluster.
pub(crate) const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";
const ADMIN_USER: &str = "sandbox-admin";
pub(crate) const AUTHENTICATED: &str = "system:authenticated";

/// Who a request is, as TokenReview and SelfSubjectReview report it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Identity {
    pub(crate) username: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) uid: String,
    pub(crate) groups: Vec<String>,
    /// Only impersonation (`Impersonate-Extra-*`) sets extra attributes here.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) extra: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    #[serde(default)]
    aud: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exp: Option<i64>,
    iat: i64,
    iss: String,
    sub: String,
    #[serde(rename = "kubernetes.io")]
    k8s: K8sClaims,
}

#[derive(Debug, Serialize, Deserialize)]
struct K8sClaims {
    namespace: String,
    serviceaccount: ObjRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    secret: Option<ObjRef>,
}

#[derive(Debug, Serialize, Deserialize)]
struct ObjRef {
    name: String,
    uid: String,
}

/// The authority as a store folder keeps it, so that a restarted cluster keeps its CA, admin token
/// and token key: kubeconfigs, client certificates and stored service account tokens stay valid.
#[derive(Serialize, Deserialize)]
struct Saved {
    ca_pem: String,
    ca_key_pem: String,
    admin_token: String,
    /// Hex.
    token_key: String,
}

/// The authority's file in a store folder.
const AUTHORITY_FILE: &str = "authority.json";
/// Larger authority files are not read.
const MAX_AUTHORITY_BYTES: u64 = 64 * 1024;

/// The simulated cluster's trust root and token signer.
pub(crate) struct Authority {
    ca: Issuer<'static, KeyPair>,
    ca_pem: String,
    admin_token: String,
    token_key: [u8; 32],
}

fn cert_err(e: rcgen::Error) -> Error {
    Error::Startup(format!("certificate generation failed: {e}"))
}

impl Authority {
    pub(crate) fn new(cluster: &str) -> Result<Authority, Error> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(cert_err)?;
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("meshd-sandbox-ca-{cluster}"));
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().map_err(cert_err)?;
        let ca_pem = params.self_signed(&key).map_err(cert_err)?.pem();
        let mut rng = rand::rng();
        Ok(Authority {
            ca: Issuer::new(params, key),
            ca_pem,
            admin_token: (0..40)
                .map(|_| rng.sample(rand::distr::Alphanumeric) as char)
                .collect(),
            token_key: rng.random(),
        })
    }

    /// The authority kept in `dir` (a store folder), or a new one saved there.
    pub(crate) fn load_or_create(dir: &Path, cluster: &str) -> Result<Authority, Error> {
        let path = dir.join(AUTHORITY_FILE);
        let corrupt = |reason: String| PersistError::Corrupt {
            path: path.clone(),
            reason,
        };
        let io = |source| PersistError::Io {
            path: path.clone(),
            source,
        };
        match std::fs::metadata(&path) {
            Ok(meta) if meta.len() > MAX_AUTHORITY_BYTES => {
                Err(corrupt(format!("larger than {MAX_AUTHORITY_BYTES} bytes")).into())
            }
            Ok(_) => {
                let bytes = std::fs::read(&path).map_err(io)?;
                Ok(Authority::from_saved(&bytes).map_err(corrupt)?)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let authority = Authority::new(cluster)?;
                let saved = Saved {
                    ca_pem: authority.ca_pem.clone(),
                    ca_key_pem: authority.ca.key().serialize_pem(),
                    admin_token: authority.admin_token.clone(),
                    token_key: hex::encode(authority.token_key),
                };
                let bytes = serde_json::to_vec(&saved).map_err(|e| Error::Internal(e.to_string()))?;
                persist::write_atomic(&path, &bytes)?;
                Ok(authority)
            }
            Err(e) => Err(io(e).into()),
        }
    }

    fn from_saved(bytes: &[u8]) -> Result<Authority, String> {
        let saved: Saved = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let key = KeyPair::from_pem(&saved.ca_key_pem).map_err(|e| format!("the CA key: {e}"))?;
        let ca =
            Issuer::from_ca_cert_pem(&saved.ca_pem, key).map_err(|e| format!("the CA certificate: {e}"))?;
        let token_key = hex::decode(&saved.token_key)
            .ok()
            .and_then(|k| <[u8; 32]>::try_from(k).ok())
            .ok_or("the token key is not 32 hex bytes")?;
        Ok(Authority {
            ca,
            ca_pem: saved.ca_pem,
            admin_token: saved.admin_token,
            token_key,
        })
    }

    pub(crate) fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    pub(crate) fn admin_token(&self) -> &str {
        &self.admin_token
    }

    fn sign(&self, params: CertificateParams) -> Result<(String, KeyPair), Error> {
        let key = KeyPair::generate().map_err(cert_err)?;
        Ok((params.signed_by(&key, &self.ca).map_err(cert_err)?.pem(), key))
    }

    /// The serving certificate for loopback (`127.0.0.1`, `::1`, `localhost`) and the in-cluster names.
    pub(crate) fn serving_cert(
        &self,
    ) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), Error> {
        let sans = [
            "localhost",
            "127.0.0.1",
            "::1",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
        ];
        let mut params = CertificateParams::new(sans.map(String::from).to_vec()).map_err(cert_err)?;
        params
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().map_err(cert_err)?;
        let cert = params.signed_by(&key, &self.ca).map_err(cert_err)?;
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        Ok((vec![cert.der().clone()], key_der))
    }

    /// A client certificate as the real cluster's CA would sign it: CN is the user, O the groups.
    ///
    /// rcgen keys subject attributes by type, so at most two groups can be encoded (as `O` and an
    /// equivalent `2.5.4.10` attribute); further groups are rejected rather than silently dropped.
    pub(crate) fn issue_client_cert(&self, user: &str, groups: &[&str]) -> Result<(String, String), Error> {
        if groups.len() > 2 {
            return Err(Error::BadRequest(
                "client certificates carry at most two groups".into(),
            ));
        }
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(cert_err)?;
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, user);
        for (ty, group) in [DnType::OrganizationName, DnType::CustomDnType(vec![2, 5, 4, 10])]
            .into_iter()
            .zip(groups)
        {
            params.distinguished_name.push(ty, *group);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let (cert, key) = self.sign(params)?;
        Ok((cert, key.serialize_pem()))
    }

    /// A JWT for a service account (HS256 with a per-cluster key; clients treat it as opaque).
    /// `secret` binds a legacy token to its Secret; `expires` is unix seconds.
    pub(crate) fn sign_service_account_token(
        &self,
        ns: &str,
        sa: &str,
        sa_uid: &str,
        secret: Option<(String, String)>,
        expires: Option<i64>,
        audiences: &[String],
    ) -> String {
        let claims = Claims {
            aud: if secret.is_some() || !audiences.is_empty() {
                audiences.to_vec()
            } else {
                vec![API_AUDIENCE.into()]
            },
            exp: expires,
            iat: now_secs(),
            iss: API_AUDIENCE.into(),
            sub: format!("system:serviceaccount:{ns}:{sa}"),
            k8s: K8sClaims {
                namespace: ns.into(),
                serviceaccount: ObjRef {
                    name: sa.into(),
                    uid: sa_uid.into(),
                },
                secret: secret.map(|(name, uid)| ObjRef { name, uid }),
            },
        };
        let header = B64URL.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let body = B64URL.encode(serde_json::to_vec(&claims).unwrap_or_default());
        let signing_input = format!("{header}.{body}");
        let sig = B64URL.encode(hmac_sha256(&self.token_key, signing_input.as_bytes()));
        format!("{signing_input}.{sig}")
    }

    /// Validates a bearer token for the given audiences (default: this API server); `Err` says why not.
    pub(crate) fn authenticate_token(
        &self,
        store: &Store,
        token: &str,
        audiences: &[String],
    ) -> Result<Identity, String> {
        if constant_time_eq(token.as_bytes(), self.admin_token.as_bytes()) {
            return Ok(admin());
        }
        let claims = self.verify_jwt(token).ok_or("invalid bearer token")?;
        if claims.exp.is_some_and(|exp| exp <= now_secs()) {
            return Err("token has expired".into());
        }
        let wanted: Vec<String> = if audiences.is_empty() {
            vec![API_AUDIENCE.into()]
        } else {
            audiences.to_vec()
        };
        if !claims.aud.is_empty() && !claims.aud.iter().any(|a| wanted.contains(a)) {
            return Err("token audiences are not accepted".into());
        }
        let K8sClaims {
            namespace: ns,
            serviceaccount: sa,
            secret,
        } = &claims.k8s;
        let live = |kind, name: &str, uid: &str| {
            store
                .get_obj(kind, &(ns.clone(), name.to_string()))
                .is_some_and(|o| o.uid == uid)
        };
        if !live(service_account_kind(), &sa.name, &sa.uid) {
            return Err(format!("service account {ns}/{} has been deleted", sa.name));
        }
        if let Some(s) = secret.as_ref().filter(|s| !live(secret_kind(), &s.name, &s.uid)) {
            return Err(format!("token secret {ns}/{} has been deleted", s.name));
        }
        Ok(Identity {
            username: claims.sub.clone(),
            uid: sa.uid.clone(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                AUTHENTICATED.into(),
            ],
            ..Identity::default()
        })
    }

    fn verify_jwt(&self, token: &str) -> Option<Claims> {
        let (signing_input, sig) = token.rsplit_once('.')?;
        let (_, body) = signing_input.split_once('.')?;
        let expected = hmac_sha256(&self.token_key, signing_input.as_bytes());
        if !constant_time_eq(&B64URL.decode(sig).ok()?, &expected) {
            return None;
        }
        serde_json::from_slice(&B64URL.decode(body).ok()?).ok()
    }

    /// Whether the request carries the static admin token (the only credential for the fault endpoint).
    pub(crate) fn is_admin_request(&self, headers: &HeaderMap) -> bool {
        bearer(headers).is_some_and(|t| constant_time_eq(t.as_bytes(), self.admin_token.as_bytes()))
    }

    /// The request's identity: a bearer token if one is sent (and it must be valid), else the TLS client
    /// certificate, else anonymous (`None`).
    pub(crate) fn authenticate(
        &self,
        store: &Store,
        headers: &HeaderMap,
        peer: Option<&Identity>,
    ) -> Result<Option<Identity>, Error> {
        if headers.get(http::header::AUTHORIZATION).is_none() {
            return Ok(peer.cloned());
        }
        let token = bearer(headers).ok_or(Error::Unauthorized)?;
        self.authenticate_token(store, token, &[])
            .map(Some)
            .map_err(|_| Error::Unauthorized)
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    value.strip_prefix("Bearer ").map(str::trim)
}

fn admin() -> Identity {
    Identity {
        username: ADMIN_USER.into(),
        uid: String::new(),
        groups: vec!["system:masters".into(), AUTHENTICATED.into()],
        ..Identity::default()
    }
}

/// The identity in a verified client certificate: CN is the user, each O a group.
pub(crate) fn identity_from_cert(der: &[u8]) -> Option<Identity> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let username = subject.iter_common_name().next()?.as_str().ok()?.to_string();
    let mut groups: Vec<String> = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    groups.push(AUTHENTICATED.into());
    Some(Identity {
        username,
        groups,
        ..Identity::default()
    })
}

/// HMAC-SHA256 (RFC 2104), enough for signing our own tokens without another dependency.
fn hmac_sha256(key: &[u8; 32], msg: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let pad = |b: u8| block.map(|k| k ^ b);
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(msg).finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
