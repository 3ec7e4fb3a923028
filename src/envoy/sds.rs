//! SDS: a gateway's `credentialName` certificates as Envoy `Secret`s (istiod's `xds/sds.go`:
//! `toEnvoyTLSSecret`, `toEnvoyCaSecret`; `model/credentials:ParseResourceName`). The resource names
//! are `kubernetes://<name>` (certificate and key) and `kubernetes://<name>-cacert` (the CA a MUTUAL
//! server checks clients against), optionally `kubernetes://<namespace>/<name>`; a name without a
//! namespace is the proxy's. Pure: who may read a secret and where its data comes from are the
//! `credentials` module's. The bytes built here are secret material: callers never log or show them.

use std::sync::Arc;

use envoy_types::pb::envoy::{
    config::core::v3::{DataSource, data_source},
    extensions::transport_sockets::tls::v3::{CertificateValidationContext, Secret, TlsCertificate, secret},
};

use super::{
    Resource, XdsType,
    gateway_listeners::{CA_SUFFIX, SECRET_PREFIX},
};

/// What an SDS resource name refers to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SecretRef {
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name (without `-cacert`).
    pub name: String,
    /// The CA (`-cacert`) rather than the certificate and key.
    pub ca: bool,
}

/// Parses `kubernetes://[<namespace>/]<name>[-cacert]`, a name without a namespace being in
/// `proxy_namespace`; `None` for any other scheme or a malformed name.
pub fn parse(resource: &str, proxy_namespace: &str) -> Option<SecretRef> {
    let rest = resource.strip_prefix(SECRET_PREFIX)?;
    let (namespace, name) = match rest.split_once('/') {
        Some((ns, name)) => (ns, name),
        None => (proxy_namespace, rest),
    };
    let (name, ca) = match name.strip_suffix(CA_SUFFIX) {
        Some(base) => (base, true),
        None => (name, false),
    };
    let valid = |s: &str| !s.is_empty() && s.len() <= 253 && !s.contains('/');
    (valid(namespace) && valid(name)).then(|| SecretRef {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        ca,
    })
}

/// A certificate chain and key as the `Secret` `name` (istiod's `toEnvoyTLSSecret`, no private key
/// provider).
pub fn tls_secret(name: Arc<str>, cert: &[u8], key: &[u8]) -> Resource {
    let secret = Secret {
        name: name.to_string(),
        r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: Some(inline(cert)),
            private_key: Some(inline(key)),
            ..Default::default()
        })),
    };
    Resource::encode(XdsType::Secret, name, &secret)
}

/// A CA bundle (and its CRL, if any) as the validation context `Secret` `name` (istiod's
/// `toEnvoyCaSecret`).
pub fn ca_secret(name: Arc<str>, ca: &[u8], crl: Option<&[u8]>) -> Resource {
    let secret = Secret {
        name: name.to_string(),
        r#type: Some(secret::Type::ValidationContext(CertificateValidationContext {
            trusted_ca: Some(inline(ca)),
            crl: crl.map(inline),
            ..Default::default()
        })),
    };
    Resource::encode(XdsType::Secret, name, &secret)
}

fn inline(bytes: &[u8]) -> DataSource {
    DataSource {
        specifier: Some(data_source::Specifier::InlineBytes(bytes.to_vec())),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn resource_names_parse_as_istiod() {
        let r = |ns: &str, name: &str, ca: bool| {
            Some(SecretRef {
                namespace: ns.into(),
                name: name.into(),
                ca,
            })
        };
        for (name, want) in [
            ("kubernetes://cred", r("gw", "cred", false)),
            ("kubernetes://cred-cacert", r("gw", "cred", true)),
            ("kubernetes://other/cred", r("other", "cred", false)),
            ("kubernetes://", None),
            ("kubernetes://a/b/c", None),
            ("file-cert:/a~/b", None),
            ("default", None),
        ] {
            assert_eq!(parse(name, "gw"), want, "{name}");
        }
    }

    #[test]
    fn secrets_carry_the_bytes_inline() {
        let tls = Secret::decode(tls_secret("kubernetes://c".into(), b"CERT", b"KEY").value()).unwrap();
        let Some(secret::Type::TlsCertificate(t)) = tls.r#type else {
            panic!("a TLS certificate")
        };
        assert_eq!(t.certificate_chain, Some(inline(b"CERT")));
        assert_eq!(t.private_key, Some(inline(b"KEY")));
        let ca = Secret::decode(ca_secret("kubernetes://c-cacert".into(), b"CA", None).value()).unwrap();
        assert_eq!(ca.name, "kubernetes://c-cacert");
        let Some(secret::Type::ValidationContext(v)) = ca.r#type else {
            panic!("a validation context")
        };
        assert_eq!(v.trusted_ca, Some(inline(b"CA")));
        assert_eq!(v.crl, None);
    }
}
