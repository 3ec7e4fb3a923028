//! Issuing certificates: workload certificates from CSRs (only for the caller's own identity) and
//! key pairs with certificates for meshd's own serving names and the sandbox.

use std::{net::IpAddr, time::Duration};

use rcgen::{
    CertificateParams, CertificateSigningRequestParams, DistinguishedName, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, PublicKeyData, SanType, SerialNumber,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::bundle::{CaBundle, to_pem};
use crate::auth::Identity;

/// Largest CSR accepted (an RSA-4096 CSR is under 2 KiB).
pub const MAX_CSR_BYTES: usize = 64 * 1024;
/// Backdating of `notBefore`, for clients whose clocks run a little behind.
const CLOCK_SKEW: Duration = Duration::from_secs(60);

/// Why a certificate was not issued.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// Over [`MAX_CSR_BYTES`].
    #[error("CSR is {0} bytes, over the {MAX_CSR_BYTES}-byte limit")]
    CsrTooLarge(usize),
    /// Not a parseable, correctly self-signed PKCS#10 request.
    #[error("invalid CSR: {0}")]
    InvalidCsr(String),
    /// The CSR asks for names the caller does not own.
    #[error(
        "CSR requests {requested}, but the caller is {caller}: a workload may only request its own identity"
    )]
    NotOwnIdentity {
        /// What the CSR asks for.
        requested: String,
        /// Who the caller is.
        caller: String,
    },
    /// Longer than the CA allows.
    #[error("requested validity {requested:?} exceeds the maximum {max:?}")]
    TtlTooLong {
        /// Requested.
        requested: Duration,
        /// Allowed.
        max: Duration,
    },
    /// The CA could not sign (its key or the request's key is unusable).
    #[error("signing failed: {0}")]
    Sign(#[source] rcgen::Error),
}

/// A freshly issued certificate chain and its private key.
pub struct Issued {
    /// Leaf first, then intermediates (no roots).
    pub chain: Vec<CertificateDer<'static>>,
    key: KeyPair,
}

impl Issued {
    /// The chain as concatenated PEM.
    pub fn chain_pem(&self) -> String {
        self.chain.iter().map(|c| to_pem(c)).collect()
    }

    /// The private key, PKCS#8 PEM. Handle with care: never log it.
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// The private key for rustls.
    pub fn key_der(&self) -> PrivateKeyDer<'static> {
        PrivatePkcs8KeyDer::from(self.key.serialize_der()).into()
    }
}

/// A random positive 128-bit serial number.
pub(super) fn random_serial() -> SerialNumber {
    let mut bytes: [u8; 16] = rand::random();
    bytes[0] &= 0x7f;
    SerialNumber::from_slice(&bytes)
}

impl CaBundle {
    /// Signs `csr_pem` for `caller`, valid for `ttl` (cut at the CA's own expiry). The CSR must ask for
    /// exactly the caller's SPIFFE ID; the certificate carries that ID and nothing else from the CSR
    /// but its public key. Returns one PEM certificate per entry: leaf, intermediates, roots.
    pub fn sign_csr(
        &self,
        csr_pem: &str,
        caller: &Identity,
        ttl: Duration,
    ) -> Result<Vec<String>, SignError> {
        if csr_pem.len() > MAX_CSR_BYTES {
            return Err(SignError::CsrTooLarge(csr_pem.len()));
        }
        let csr = CertificateSigningRequestParams::from_pem(csr_pem)
            .map_err(|e| SignError::InvalidCsr(e.to_string()))?;
        let own = caller.spiffe_uri();
        let requested: Vec<String> = csr
            .params
            .subject_alt_names
            .iter()
            .map(|san| match san {
                SanType::URI(u) => u.as_str().to_owned(),
                SanType::DnsName(d) => format!("DNS:{}", d.as_str()),
                SanType::IpAddress(ip) => format!("IP:{ip}"),
                other => format!("{other:?}"),
            })
            .collect();
        if requested != [own.as_str()] {
            return Err(SignError::NotOwnIdentity {
                requested: if requested.is_empty() {
                    "no identity".into()
                } else {
                    requested.join(", ")
                },
                caller: own,
            });
        }
        let leaf = self.leaf(&csr.public_key, vec![uri_san(&own)?], ttl)?;
        let mut out = vec![to_pem(&leaf)];
        out.extend(self.chain.iter().chain(self.roots()).map(to_pem));
        Ok(out)
    }

    /// A new key and a certificate for `identity` (the sandbox's ready-made workload certificate).
    pub fn issue_workload(&self, identity: &Identity, ttl: Duration) -> Result<Issued, SignError> {
        self.issue(vec![uri_san(&identity.spiffe_uri())?], ttl)
    }

    /// A new key and a serving certificate for `hosts` (DNS names or IP addresses).
    pub fn issue_serving(&self, hosts: &[String], ttl: Duration) -> Result<Issued, SignError> {
        let sans = hosts
            .iter()
            .map(|h| match h.parse::<IpAddr>() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => h
                    .clone()
                    .try_into()
                    .map(SanType::DnsName)
                    .map_err(SignError::Sign),
            })
            .collect::<Result<_, _>>()?;
        self.issue(sans, ttl)
    }

    fn issue(&self, sans: Vec<SanType>, ttl: Duration) -> Result<Issued, SignError> {
        let key = KeyPair::generate().map_err(SignError::Sign)?;
        let leaf = self.leaf(&key, sans, ttl)?;
        let mut chain = vec![leaf];
        chain.extend(self.chain.iter().cloned());
        Ok(Issued { chain, key })
    }

    fn leaf(
        &self,
        public_key: &impl PublicKeyData,
        sans: Vec<SanType>,
        ttl: Duration,
    ) -> Result<CertificateDer<'static>, SignError> {
        let now = time::OffsetDateTime::now_utc();
        let ca_expiry = time::OffsetDateTime::from(self.not_after);
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.subject_alt_names = sans;
        params.not_before = now - CLOCK_SKEW;
        params.not_after = (now + ttl).min(ca_expiry);
        params.serial_number = Some(random_serial());
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.use_authority_key_identifier_extension = true;
        let cert = params
            .signed_by(public_key, &self.issuer)
            .map_err(SignError::Sign)?;
        Ok(cert.der().clone())
    }
}

fn uri_san(uri: &str) -> Result<SanType, SignError> {
    uri.to_owned()
        .try_into()
        .map(SanType::URI)
        .map_err(SignError::Sign)
}

#[cfg(test)]
mod tests {
    use rcgen::CertificateParams;
    use x509_parser::{extensions::GeneralName, prelude::FromDer};

    use super::*;
    use crate::ca::{CaPem, MeshCa, WorkloadCertPolicy};

    fn ca() -> MeshCa {
        let pem: CaPem = CaBundle::generate_self_signed("cluster.local").unwrap();
        MeshCa::fixed(CaBundle::from_pem(&pem).unwrap(), WorkloadCertPolicy::default())
    }

    fn csr(sans: &[&str]) -> String {
        let mut params = CertificateParams::default();
        params.subject_alt_names = sans
            .iter()
            .map(|s| match s.strip_prefix("dns:") {
                Some(d) => SanType::DnsName(d.try_into().unwrap()),
                None => SanType::URI(s.to_string().try_into().unwrap()),
            })
            .collect();
        let key = KeyPair::generate().unwrap();
        params.serialize_request(&key).unwrap().pem().unwrap()
    }

    fn der(pem: &str) -> CertificateDer<'static> {
        use rustls::pki_types::pem::PemObject;
        CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
    }

    #[test]
    fn signs_only_the_callers_own_identity() {
        let ca = ca();
        let me = Identity::new("cluster.local", "sample", "default");
        let chain = ca.sign_csr(&csr(&[&me.spiffe_uri()]), &me, 3600).unwrap();
        assert_eq!(chain.len(), 2, "leaf and root");
        assert!(chain.iter().all(|c| c.ends_with("-----END CERTIFICATE-----\n")));
        assert_eq!(chain[1], ca.roots_pem());
        let (leaf_der, root_der) = (der(&chain[0]), der(&chain[1]));
        let (_, leaf) = x509_parser::certificate::X509Certificate::from_der(&leaf_der).unwrap();
        let (_, root) = x509_parser::certificate::X509Certificate::from_der(&root_der).unwrap();
        leaf.verify_signature(Some(root.public_key()))
            .expect("signed by the root");
        let sans: Vec<_> = leaf
            .subject_alternative_name()
            .unwrap()
            .unwrap()
            .value
            .general_names
            .clone();
        assert_eq!(
            sans,
            [GeneralName::URI("spiffe://cluster.local/ns/sample/sa/default")]
        );
        assert!(!leaf.is_ca());
        let lifetime = leaf.validity().not_after.timestamp() - leaf.validity().not_before.timestamp();
        assert_eq!(lifetime, 3600 + CLOCK_SKEW.as_secs() as i64);

        for (sans, requested) in [
            (
                vec!["spiffe://cluster.local/ns/sample/sa/admin"],
                "spiffe://cluster.local/ns/sample/sa/admin",
            ),
            (
                vec!["spiffe://cluster.local/ns/sample/sa/default", "dns:evil.example"],
                "spiffe://cluster.local/ns/sample/sa/default, DNS:evil.example",
            ),
            (vec![], "no identity"),
        ] {
            let err = ca.sign_csr(&csr(&sans), &me, 0).unwrap_err();
            assert!(matches!(err, SignError::NotOwnIdentity { .. }), "{err}");
            assert_eq!(
                err.to_string(),
                format!(
                    "CSR requests {requested}, but the caller is spiffe://cluster.local/ns/sample/sa/default: \
                     a workload may only request its own identity"
                )
            );
        }
    }

    #[test]
    fn refuses_bad_input_without_panicking() {
        let ca = ca();
        let me = Identity::new("cluster.local", "sample", "default");
        for junk in [
            "",
            "junk",
            "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n",
        ] {
            assert!(
                matches!(ca.sign_csr(junk, &me, 0), Err(SignError::InvalidCsr(_))),
                "{junk:?}"
            );
        }
        let huge = "A".repeat(MAX_CSR_BYTES + 1);
        assert!(matches!(
            ca.sign_csr(&huge, &me, 0),
            Err(SignError::CsrTooLarge(_))
        ));
        let too_long = ca
            .sign_csr(&csr(&[&me.spiffe_uri()]), &me, 91 * 24 * 3600)
            .unwrap_err();
        assert!(matches!(too_long, SignError::TtlTooLong { .. }), "{too_long}");
    }
}
