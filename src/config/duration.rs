//! Durations as Istio writes them in YAML and protobuf JSON: `10s`, `1.5s`, `100ms`, `5m`. Used as
//! `#[serde(with = "config::duration")]` (or `config::duration::option` for an optional field) by the
//! mesh config and the Istio config models.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serializer, de::Error};

/// Writes `d` as humantime text (`1s 500ms`), which [`deserialize`] reads back.
pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&humantime::format_duration(*d).to_string())
}

/// Reads a duration string; the error names the bad value.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    parse(&s).map_err(|e| D::Error::custom(format!("invalid duration {s:?}: {e}")))
}

/// Parses one duration string.
pub fn parse(s: &str) -> Result<Duration, String> {
    // Protobuf JSON durations may be fractional seconds ("1.5s"), which humantime does not take.
    if let Some(secs) = s.strip_suffix('s').and_then(|n| n.parse::<f64>().ok()) {
        return Duration::try_from_secs_f64(secs).map_err(|e| e.to_string());
    }
    humantime::parse_duration(s).map_err(|e| e.to_string())
}

/// The same for `Option<Duration>` fields (absent or `null` is `None`).
pub mod option {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    /// Writes `Some` as humantime text, `None` as null.
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => super::serialize(d, s),
            None => s.serialize_none(),
        }
    }

    /// Reads an optional duration string.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|s| super::parse(&s).map_err(|e| D::Error::custom(format!("invalid duration {s:?}: {e}"))))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn istio_and_protobuf_forms_parse() {
        for (text, want) in [
            ("10s", Duration::from_secs(10)),
            ("1.5s", Duration::from_millis(1500)),
            ("100ms", Duration::from_millis(100)),
            ("5m", Duration::from_secs(300)),
        ] {
            assert_eq!(parse(text), Ok(want), "{text}");
        }
        for bad in ["soon", "-1s", ""] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
