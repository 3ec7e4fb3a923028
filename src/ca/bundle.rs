//! The CA's key material: a signing certificate and key, the chain up to the roots, and the roots
//! clients trust. Loaded from PEM (Istio's `cacerts` layout) with every inconsistency an operator can
//! make reported by file name, or generated as a self-signed root.

use std::{
    fmt,
    time::{Duration, SystemTime},
};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, PublicKeyData,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use x509_parser::{certificate::X509Certificate, prelude::FromDer};

use super::CaError;

/// File names of a plugged-in CA (Istio's `cacerts` Secret, mounted at `/etc/cacerts`), also the keys
/// of the self-signed `istio-ca-secret`.
pub const CA_CERT: &str = "ca-cert.pem";
/// The signing key.
pub const CA_KEY: &str = "ca-key.pem";
/// The trust bundle: one or more roots.
pub const ROOT_CERT: &str = "root-cert.pem";
/// Optional: the signing certificate followed by intermediates up to (and possibly including) the root.
pub const CERT_CHAIN: &str = "cert-chain.pem";

/// Validity of a generated self-signed root (istiod's default is ten years too).
const SELF_SIGNED_ROOT_TTL: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// The PEM texts of a CA, as read from files or a Secret.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct CaPem {
    /// `ca-cert.pem`.
    pub cert: String,
    /// `ca-key.pem`. Never logged.
    pub key: String,
    /// `root-cert.pem`; empty means the signing certificate is the root.
    pub root: String,
    /// `cert-chain.pem`; may be empty.
    pub chain: String,
}

impl fmt::Debug for CaPem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaPem")
            .field("cert", &self.cert)
            .field("key", &"<redacted>")
            .finish()
    }
}

/// A loaded, validated CA.
pub struct CaBundle {
    pub(super) issuer: Issuer<'static, KeyPair>,
    pub(super) not_after: SystemTime,
    /// The signing certificate and intermediates, leaf-most first, without roots.
    pub(super) chain: Vec<CertificateDer<'static>>,
    roots: Vec<CertificateDer<'static>>,
}

impl fmt::Debug for CaBundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaBundle")
            .field("chain", &self.chain.len())
            .field("roots", &self.roots.len())
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

fn certs(file: &'static str, pem: &str) -> Result<Vec<CertificateDer<'static>>, CaError> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CaError::invalid(file, format!("bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(CaError::invalid(file, "no CERTIFICATE block"));
    }
    Ok(certs)
}

fn parse<'a>(file: &'static str, der: &'a [u8]) -> Result<X509Certificate<'a>, CaError> {
    X509Certificate::from_der(der)
        .map(|(_, c)| c)
        .map_err(|e| CaError::invalid(file, format!("not an X.509 certificate: {e}")))
}

fn to_system_time(t: x509_parser::time::ASN1Time) -> SystemTime {
    let secs = t.timestamp();
    match u64::try_from(secs) {
        Ok(s) => SystemTime::UNIX_EPOCH + Duration::from_secs(s),
        Err(_) => SystemTime::UNIX_EPOCH,
    }
}

impl CaBundle {
    /// Validates and loads a CA: the key must match the certificate, the certificate must be a
    /// currently valid CA, and it must chain (through `cert-chain.pem`) to a root in `root-cert.pem`.
    pub fn from_pem(pem: &CaPem) -> Result<Self, CaError> {
        let signing = certs(CA_CERT, &pem.cert)?.swap_remove(0);
        let key = load_key(&pem.key)?;
        let now = SystemTime::now();
        let not_after = {
            let cert = parse(CA_CERT, &signing)?;
            if key.der_bytes() != cert.public_key().subject_public_key.data.as_ref() {
                return Err(CaError::invalid(
                    CA_KEY,
                    format!("does not match the key of {CA_CERT}"),
                ));
            }
            if !cert.is_ca() {
                return Err(CaError::invalid(
                    CA_CERT,
                    "not a CA certificate (basicConstraints CA:TRUE is missing)",
                ));
            }
            if let Ok(Some(ku)) = cert.key_usage()
                && !ku.value.key_cert_sign()
            {
                return Err(CaError::invalid(
                    CA_CERT,
                    "keyUsage does not allow certificate signing",
                ));
            }
            let (not_before, not_after) = (
                to_system_time(cert.validity().not_before),
                to_system_time(cert.validity().not_after),
            );
            if not_after <= now {
                return Err(CaError::invalid(
                    CA_CERT,
                    format!("expired at {}", cert.validity().not_after),
                ));
            }
            if not_before > now + Duration::from_secs(300) {
                return Err(CaError::invalid(
                    CA_CERT,
                    format!("not valid until {}", cert.validity().not_before),
                ));
            }
            not_after
        };
        let roots = if pem.root.trim().is_empty() {
            vec![signing.clone()]
        } else {
            certs(ROOT_CERT, &pem.root)?
        };
        let mut chain = vec![signing.clone()];
        if !pem.chain.trim().is_empty() {
            chain.extend(
                certs(CERT_CHAIN, &pem.chain)?
                    .into_iter()
                    .filter(|c| *c != signing),
            );
        }
        // Roots go to clients separately; the chain stops below them.
        chain.retain(|c| !roots.contains(c));
        verify_chain(&chain, &roots)?;
        let issuer = Issuer::from_ca_cert_der(&signing, key)
            .map_err(|e| CaError::invalid(CA_CERT, format!("unusable as an issuer: {e}")))?;
        Ok(Self {
            issuer,
            not_after,
            chain,
            roots,
        })
    }

    /// A new self-signed root for `trust_domain` (ECDSA P-256, ten years), as PEM ready to persist.
    pub fn generate_self_signed(trust_domain: &str) -> Result<CaPem, CaError> {
        let key = KeyPair::generate().map_err(CaError::Generate)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::OrganizationName, trust_domain);
        params
            .distinguished_name
            .push(DnType::CommonName, "meshd root CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::minutes(5);
        params.not_after = now + SELF_SIGNED_ROOT_TTL;
        params.serial_number = Some(super::sign::random_serial());
        let cert = params.self_signed(&key).map_err(CaError::Generate)?;
        Ok(CaPem {
            cert: cert.pem(),
            key: key.serialize_pem(),
            root: cert.pem(),
            chain: String::new(),
        })
    }

    /// The trust bundle (every root) as concatenated PEM.
    pub fn roots_pem(&self) -> String {
        self.roots.iter().map(|c| to_pem(c)).collect()
    }

    /// The roots, DER.
    pub fn roots(&self) -> &[CertificateDer<'static>] {
        &self.roots
    }

    /// What an operator checks in a log line: the signing certificate's subject and expiry, and how
    /// many intermediates and roots come with it. Never key material.
    pub fn summary(&self) -> String {
        // A self-signed root signs itself: it is then only among the roots.
        let subject = self
            .chain
            .first()
            .or(self.roots.first())
            .and_then(|c| X509Certificate::from_der(c).ok())
            .map_or_else(|| "?".to_owned(), |(_, c)| c.subject().to_string());
        let until = humantime::format_rfc3339_seconds(self.not_after);
        format!(
            "signing {subject}, valid until {until}, {} intermediate(s), {} root(s)",
            self.chain.len().saturating_sub(1),
            self.roots.len()
        )
    }
}

/// One certificate as PEM, with the trailing newline Istio's clients expect.
pub(super) fn to_pem(der: &CertificateDer<'_>) -> String {
    pem_block("CERTIFICATE", der)
}

fn pem_block(tag: &str, der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {tag}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {tag}-----\n"));
    out
}

fn load_key(pem: &str) -> Result<KeyPair, CaError> {
    let key = PrivateKeyDer::from_pem_slice(pem.as_bytes())
        .map_err(|_| CaError::invalid(CA_KEY, "no PRIVATE KEY block"))?;
    let key = match key {
        PrivateKeyDer::Pkcs8(_) => key,
        // istiod writes its self-signed `istio-ca-secret` with a PKCS#1 key (`RSA PRIVATE KEY`); the
        // signer takes PKCS#8 only, so the key is wrapped, unchanged, in a PKCS#8 envelope.
        PrivateKeyDer::Pkcs1(k) => PrivateKeyDer::Pkcs8(rsa_pkcs8(k.secret_pkcs1_der()).into()),
        _ => {
            return Err(CaError::invalid(
                CA_KEY,
                "SEC1 EC keys are not supported; convert with `openssl pkcs8 -topk8 -nocrypt`",
            ));
        }
    };
    KeyPair::try_from(&key).map_err(|e| CaError::invalid(CA_KEY, format!("unsupported key: {e}")))
}

/// A PKCS#1 RSAPrivateKey wrapped as PKCS#8 PrivateKeyInfo (RFC 5208): version 0, the
/// rsaEncryption algorithm with NULL parameters, and the key as an OCTET STRING.
fn rsa_pkcs8(pkcs1: &[u8]) -> Vec<u8> {
    /// version INTEGER 0, then AlgorithmIdentifier { 1.2.840.113549.1.1.1, NULL }.
    const HEAD: [u8; 18] = [
        0x02, 0x01, 0x00, 0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05,
        0x00,
    ];
    let mut body = HEAD.to_vec();
    der_tlv(&mut body, 0x04, pkcs1);
    let mut out = Vec::with_capacity(body.len() + 6);
    der_tlv(&mut out, 0x30, &body);
    out
}

/// Appends a DER tag, length (short or long form) and value.
fn der_tlv(out: &mut Vec<u8>, tag: u8, value: &[u8]) {
    out.push(tag);
    let len = value.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(value);
}

/// Each certificate must be signed by the next, and the last by one of the roots.
fn verify_chain(chain: &[CertificateDer<'_>], roots: &[CertificateDer<'_>]) -> Result<(), CaError> {
    let parsed = chain
        .iter()
        .map(|c| parse(CERT_CHAIN, c))
        .collect::<Result<Vec<_>, _>>()?;
    for pair in parsed.windows(2) {
        if pair[0].verify_signature(Some(pair[1].public_key())).is_err() {
            return Err(CaError::invalid(
                CERT_CHAIN,
                format!("{} is not signed by {}", pair[0].subject(), pair[1].subject()),
            ));
        }
    }
    let Some(top) = parsed.last() else {
        // The signing certificate is itself one of the roots.
        return Ok(());
    };
    for root in roots {
        let root = parse(ROOT_CERT, root)?;
        if top.verify_signature(Some(root.public_key())).is_ok() {
            return Ok(());
        }
    }
    Err(CaError::invalid(
        ROOT_CERT,
        format!(
            "no root signs {} ({CA_CERT} does not chain to {ROOT_CERT})",
            top.subject()
        ),
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use rcgen::{CertificateParams, Issuer};

    use super::*;
    use crate::ca::source::read_dir;

    /// A CA certificate (self-signed when `issuer` is `None`) and its key, PEM.
    pub(crate) fn ca_cert(
        name: &str,
        issuer: Option<(&str, &str)>,
        is_ca: bool,
        not_after: time::OffsetDateTime,
    ) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        if is_ca {
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        }
        params.not_before = time::OffsetDateTime::now_utc() - time::Duration::days(2);
        params.not_after = not_after;
        let cert = match issuer {
            None => params.self_signed(&key).unwrap(),
            Some((cert, key_pem)) => {
                let issuer = Issuer::from_ca_cert_pem(cert, KeyPair::from_pem(key_pem).unwrap()).unwrap();
                params.signed_by(&key, &issuer).unwrap()
            }
        };
        (cert.pem(), key.serialize_pem())
    }

    pub(crate) fn in_a_year() -> time::OffsetDateTime {
        time::OffsetDateTime::now_utc() + time::Duration::days(365)
    }

    fn load_err(pem: &CaPem) -> String {
        CaBundle::from_pem(pem).unwrap_err().to_string()
    }

    #[test]
    fn loads_self_signed_and_intermediate_cas() {
        let pem = CaBundle::generate_self_signed("cluster.local").unwrap();
        let ca = CaBundle::from_pem(&pem).unwrap();
        assert!(ca.chain.is_empty(), "a root signs directly");
        assert_eq!(ca.roots().len(), 1);

        let (root, root_key) = ca_cert("root", None, true, in_a_year());
        let (inter, inter_key) = ca_cert("intermediate", Some((&root, &root_key)), true, in_a_year());
        let plugged = CaPem {
            cert: inter.clone(),
            key: inter_key,
            root: root.clone(),
            // Istio's Makefile writes ca-cert + root here.
            chain: format!("{inter}{root}"),
        };
        let ca = CaBundle::from_pem(&plugged).unwrap();
        assert_eq!(
            ca.chain.len(),
            1,
            "intermediate only; the root goes out separately"
        );
        assert_eq!(ca.roots_pem(), root);
    }

    #[test]
    fn reports_operator_mistakes_by_file() {
        let (root, root_key) = ca_cert("root", None, true, in_a_year());
        let (other, other_key) = ca_cert("other", None, true, in_a_year());
        let good = CaPem {
            cert: root.clone(),
            key: root_key.clone(),
            root: root.clone(),
            chain: String::new(),
        };
        let with = |f: &dyn Fn(&mut CaPem)| {
            let mut p = good.clone();
            f(&mut p);
            load_err(&p)
        };
        assert_eq!(
            with(&|p| p.key = other_key.clone()),
            "ca-key.pem: does not match the key of ca-cert.pem"
        );
        assert_eq!(
            with(&|p| p.key = String::new()),
            "ca-key.pem: no PRIVATE KEY block"
        );
        assert_eq!(
            with(&|p| p.cert = "junk".into()),
            "ca-cert.pem: no CERTIFICATE block"
        );
        assert_eq!(
            with(&|p| p.root = other.clone()),
            "root-cert.pem: no root signs CN=root (ca-cert.pem does not chain to root-cert.pem)"
        );

        let (leaf, leaf_key) = ca_cert("leaf", None, false, in_a_year());
        let not_ca = with(&|p| (p.cert, p.key) = (leaf.clone(), leaf_key.clone()));
        assert_eq!(
            not_ca,
            "ca-cert.pem: not a CA certificate (basicConstraints CA:TRUE is missing)"
        );

        let yesterday = time::OffsetDateTime::now_utc() - time::Duration::days(1);
        let (old, old_key) = ca_cert("old", None, true, yesterday);
        let expired = with(&|p| (p.cert, p.key, p.root) = (old.clone(), old_key.clone(), old.clone()));
        assert!(expired.starts_with("ca-cert.pem: expired at "), "{expired}");

        let rsa1 = "-----BEGIN RSA PRIVATE KEY-----\nMAA=\n-----END RSA PRIVATE KEY-----\n";
        assert!(with(&|p| p.key = rsa1.into()).starts_with("ca-key.pem: unsupported key"));
        let sec1 = "-----BEGIN EC PRIVATE KEY-----\nMAA=\n-----END EC PRIVATE KEY-----\n";
        assert!(with(&|p| p.key = sec1.into()).contains("openssl pkcs8 -topk8"));
    }

    #[test]
    fn loads_istiods_self_signed_secret_with_its_pkcs1_key() {
        // What istiod writes into `istio-ca-secret` (made with openssl: an RSA 2048 root, O=cluster.local,
        // the key as `RSA PRIVATE KEY`); meshd must take over such a mesh without re-rooting it.
        let cert = include_str!("testdata/istiod-ca-cert.pem");
        let key = include_str!("testdata/istiod-ca-key.pem");
        assert!(key.starts_with("-----BEGIN RSA PRIVATE KEY-----"));
        let pem = CaPem {
            cert: cert.into(),
            key: key.into(),
            root: String::new(),
            chain: String::new(),
        };
        let ca = CaBundle::from_pem(&pem).unwrap();
        assert_eq!(ca.roots().len(), 1);
        let summary = ca.summary();
        assert!(
            summary.starts_with("signing O=cluster.local, valid until 2126-")
                && summary.ends_with(", 0 intermediate(s), 1 root(s)"),
            "{summary}"
        );
        // It signs: a workload certificate chains to the istiod root.
        let leaf = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, "w");
        let signed = params.signed_by(&leaf, &ca.issuer).unwrap();
        let (_, parsed) = X509Certificate::from_der(signed.der()).unwrap();
        let (_, root) = X509Certificate::from_der(&ca.roots()[0]).unwrap();
        assert!(parsed.verify_signature(Some(root.public_key())).is_ok());
    }

    #[test]
    fn der_lengths_use_the_short_and_long_forms() {
        for (len, head) in [
            (0usize, vec![0x04, 0x00]),
            (127, vec![0x04, 0x7f]),
            (128, vec![0x04, 0x81, 0x80]),
            (300, vec![0x04, 0x82, 0x01, 0x2c]),
        ] {
            let mut out = Vec::new();
            der_tlv(&mut out, 0x04, &vec![0; len]);
            assert_eq!(out[..head.len()], head[..], "{len}");
            assert_eq!(out.len(), head.len() + len);
        }
    }

    #[test]
    fn missing_files_name_the_folder_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let pem = CaBundle::generate_self_signed("cluster.local").unwrap();
        std::fs::write(dir.path().join(CA_CERT), &pem.cert).unwrap();
        std::fs::write(dir.path().join(ROOT_CERT), &pem.root).unwrap();
        let err = read_dir(dir.path()).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("plugged-in CA {}: ", dir.path().display())),
            "{err}"
        );
        assert!(
            err.contains("ca-key.pem") && err.contains("No such file"),
            "{err}"
        );
        std::fs::write(dir.path().join(CA_KEY), &pem.key).unwrap();
        assert_eq!(
            read_dir(dir.path()).unwrap().chain,
            "",
            "cert-chain.pem is optional"
        );
    }
}
