//! istiod's `ExtractCertInfo` / `ExtractRoot`: which keys of a Secret hold a gateway's certificate,
//! key and CA. Generic Secrets use `cert` / `key` / `cacert` (and `crl`), `kubernetes.io/tls` ones
//! `tls.crt` / `tls.key` / `ca.crt` (and `ca.crl`); generic keys win. Errors name keys, never values.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;

/// The keys certificates are read from; nothing else of a Secret is kept.
const KEYS: [&str; 8] = [
    "cert", "key", "cacert", "crl", "tls.crt", "tls.key", "ca.crt", "ca.crl",
];

/// The certificate-related data of one Secret. Its `Debug` shows key names and sizes only.
#[derive(Clone, PartialEq, Default)]
pub struct SecretData(BTreeMap<&'static str, Vec<u8>>);

impl std::fmt::Debug for SecretData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(k, v)| (k, format!("<{} bytes>", v.len()))))
            .finish()
    }
}

/// Why a Secret holds no usable certificate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    /// The keys are there, empty.
    #[error("found keys {0:?} and {1:?}, but they were empty")]
    Empty(&'static str, &'static str),
    /// A CA key is there, empty.
    #[error("found key {0:?}, but it was empty")]
    EmptyCa(&'static str),
    /// None of the expected keys.
    #[error("found secret, but it has neither {expected}; its keys: {found}")]
    Missing {
        /// The keys looked for.
        expected: &'static str,
        /// The keys it has (names only, at most three).
        found: String,
    },
}

impl SecretData {
    /// The certificate keys of `secret`.
    pub fn of(secret: &Secret) -> Self {
        let mut out = BTreeMap::new();
        for (k, v) in secret.data.iter().flatten() {
            if let Some(known) = KEYS.iter().find(|known| **known == k.as_str()) {
                out.insert(*known, v.0.clone());
            }
        }
        Self(out)
    }

    /// From raw pairs (tests, fixtures).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Self {
        let mut out = BTreeMap::new();
        for (k, v) in pairs {
            if let Some(known) = KEYS.iter().find(|known| **known == k) {
                out.insert(*known, v.to_vec());
            }
        }
        Self(out)
    }

    fn value(&self, k: &str) -> Option<&[u8]> {
        self.0.get(k).map(Vec::as_slice).filter(|v| !v.is_empty())
    }

    /// The certificate chain and private key.
    pub fn cert(&self) -> Result<(&[u8], &[u8]), ExtractError> {
        for (c, k) in [("cert", "key"), ("tls.crt", "tls.key")] {
            if let (Some(cert), Some(key)) = (self.value(c), self.value(k)) {
                return Ok((cert, key));
            }
        }
        for (c, k) in [("cert", "key"), ("tls.crt", "tls.key")] {
            if self.0.contains_key(c) && self.0.contains_key(k) {
                return Err(ExtractError::Empty(c, k));
            }
        }
        Err(ExtractError::Missing {
            expected: "(cert and key) nor (tls.crt and tls.key)",
            found: self.names(),
        })
    }

    /// The CA bundle and its CRL, if any.
    pub fn root(&self) -> Result<(&[u8], Option<&[u8]>), ExtractError> {
        for (ca, crl) in [("cacert", "crl"), ("ca.crt", "ca.crl")] {
            if let Some(bundle) = self.value(ca) {
                return Ok((bundle, self.value(crl)));
            }
        }
        for ca in ["cacert", "ca.crt"] {
            if self.0.contains_key(ca) {
                return Err(ExtractError::EmptyCa(if ca == "cacert" {
                    "cacert"
                } else {
                    "ca.crt"
                }));
            }
        }
        Err(ExtractError::Missing {
            expected: "cacert nor ca.crt",
            found: self.names(),
        })
    }

    fn names(&self) -> String {
        let names: Vec<&str> = self.0.keys().copied().take(3).collect();
        if names.is_empty() {
            "none meshd reads".to_owned()
        } else {
            names.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_read_as_istiod_reads_them() {
        let d = |pairs: &[(&str, &[u8])]| SecretData::from_pairs(pairs.iter().copied());
        let tls = d(&[("tls.crt", b"C"), ("tls.key", b"K"), ("ca.crt", b"A")]);
        assert_eq!(tls.cert(), Ok((&b"C"[..], &b"K"[..])));
        assert_eq!(tls.root(), Ok((&b"A"[..], None)));
        let generic = d(&[
            ("cert", b"GC"),
            ("key", b"GK"),
            ("tls.crt", b"C"),
            ("tls.key", b"K"),
            ("cacert", b"GA"),
            ("crl", b"R"),
        ]);
        assert_eq!(generic.cert(), Ok((&b"GC"[..], &b"GK"[..])), "generic keys win");
        assert_eq!(generic.root(), Ok((&b"GA"[..], Some(&b"R"[..]))));
        assert_eq!(
            d(&[("cert", b""), ("key", b"")]).cert(),
            Err(ExtractError::Empty("cert", "key"))
        );
        assert_eq!(d(&[("ca.crt", b"")]).root(), Err(ExtractError::EmptyCa("ca.crt")));
        assert!(matches!(
            d(&[("password", b"x")]).cert(),
            Err(ExtractError::Missing { .. })
        ));
    }

    #[test]
    fn debug_output_never_shows_the_bytes() {
        let d = SecretData::from_pairs([("tls.key", &b"PRIVATE-KEY-MATERIAL"[..])]);
        let shown = format!("{d:?}");
        assert!(!shown.contains("PRIVATE"), "{shown}");
        assert!(shown.contains("tls.key"));
    }
}
