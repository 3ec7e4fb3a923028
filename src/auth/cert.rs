//! Identity from a client certificate: the SPIFFE URI SAN of a leaf the TLS layer already verified
//! against the mesh roots (chain, validity, clientAuth EKU), checked against the X.509-SVID rules.

use rustls::pki_types::CertificateDer;
use x509_parser::{extensions::GeneralName, prelude::FromDer};

use super::spiffe::{Identity, SpiffeError};

/// Why a verified certificate still does not name a workload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertError {
    /// The leaf does not parse (cannot happen after rustls verified it, but input is input).
    #[error("leaf certificate does not parse: {0}")]
    Malformed(String),
    /// A CA certificate used as a client leaf.
    #[error("leaf certificate is a CA certificate")]
    IsCa,
    /// No URI SAN.
    #[error("leaf certificate has no URI SAN (a workload certificate carries exactly one spiffe:// URI)")]
    NoUri,
    /// More than one URI SAN (X.509-SVID: validators must reject).
    #[error("leaf certificate has {0} URI SANs; a workload certificate carries exactly one")]
    MultipleUris(usize),
    /// The URI is not a workload SPIFFE ID.
    #[error("leaf certificate URI SAN: {0}")]
    Spiffe(#[from] SpiffeError),
    /// The trust domain is not this mesh's.
    #[error("trust domain {found:?} is not this mesh's ({expected})")]
    TrustDomain {
        /// The certificate's trust domain.
        found: String,
        /// The accepted ones.
        expected: String,
    },
}

/// Turns a verified client chain into an [`Identity`].
#[derive(Debug, Clone)]
pub struct CertAuthenticator {
    trust_domains: Vec<String>,
}

impl CertAuthenticator {
    /// Accepts identities in `trust_domain` and its `aliases`.
    pub fn new(trust_domain: impl Into<String>, aliases: &[String]) -> Self {
        let mut trust_domains = vec![trust_domain.into()];
        trust_domains.extend(aliases.iter().cloned());
        Self { trust_domains }
    }

    /// The identity of `chain` (leaf first).
    pub fn identity(&self, chain: &[CertificateDer<'_>]) -> Result<Identity, CertError> {
        let leaf = chain.first().ok_or(CertError::NoUri)?;
        let (_, cert) = x509_parser::certificate::X509Certificate::from_der(leaf)
            .map_err(|e| CertError::Malformed(e.to_string()))?;
        if cert.is_ca() {
            return Err(CertError::IsCa);
        }
        let san = cert
            .subject_alternative_name()
            .map_err(|e| CertError::Malformed(e.to_string()))?;
        let mut uris = san
            .iter()
            .flat_map(|s| &s.value.general_names)
            .filter_map(|n| match n {
                GeneralName::URI(u) => Some(*u),
                _ => None,
            });
        let uri = match (uris.next(), uris.count()) {
            (None, _) => return Err(CertError::NoUri),
            (Some(u), 0) => u,
            (Some(_), more) => return Err(CertError::MultipleUris(more + 1)),
        };
        let id = Identity::from_spiffe_uri(uri)?;
        if !self.trust_domains.contains(&id.trust_domain) {
            return Err(CertError::TrustDomain {
                found: id.trust_domain,
                expected: self.trust_domains.join(", "),
            });
        }
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, SanType};

    use super::*;

    fn cert(sans: &[&str], ca: bool) -> CertificateDer<'static> {
        let mut params = CertificateParams::default();
        params.subject_alt_names = sans
            .iter()
            .map(|s| match s.strip_prefix("dns:") {
                Some(d) => SanType::DnsName(d.try_into().unwrap()),
                None => SanType::URI(s.to_string().try_into().unwrap()),
            })
            .collect();
        if ca {
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        }
        params
            .self_signed(&KeyPair::generate().unwrap())
            .unwrap()
            .der()
            .clone()
    }

    #[test]
    fn applies_svid_rules() {
        let auth = CertAuthenticator::new("cluster.local", &["old.local".into()]);
        let id = |sans: &[&str], ca| auth.identity(&[cert(sans, ca)]);
        assert_eq!(
            id(&["spiffe://cluster.local/ns/a/sa/b", "dns:a.example"], false).unwrap(),
            Identity::new("cluster.local", "a", "b")
        );
        assert_eq!(
            id(&["spiffe://old.local/ns/a/sa/b"], false).unwrap().trust_domain,
            "old.local"
        );
        assert_eq!(id(&["dns:a.example"], false), Err(CertError::NoUri));
        assert_eq!(
            id(
                &[
                    "spiffe://cluster.local/ns/a/sa/b",
                    "spiffe://cluster.local/ns/a/sa/c"
                ],
                false
            ),
            Err(CertError::MultipleUris(2))
        );
        assert_eq!(
            id(&["spiffe://cluster.local/ns/a/sa/b"], true),
            Err(CertError::IsCa)
        );
        assert!(matches!(
            id(&["https://a.example/x"], false),
            Err(CertError::Spiffe(_))
        ));
        let other = id(&["spiffe://evil.org/ns/a/sa/b"], false)
            .unwrap_err()
            .to_string();
        assert_eq!(
            other,
            "trust domain \"evil.org\" is not this mesh's (cluster.local, old.local)"
        );
        assert!(matches!(
            auth.identity(&[CertificateDer::from(vec![0x30, 0x03, 1, 2, 3])]),
            Err(CertError::Malformed(_))
        ));
    }
}
