//! ★ What EDS does with the endpoints of a remote cluster whose API server has been unreachable for
//! longer than its policy allows (istio#54997: istiod serves them as they were, indefinitely).

use std::{fmt, str::FromStr};

use serde::Serialize;

/// The action a stale remote's policy names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum StaleAction {
    /// Serve them as they were (istiod's behaviour).
    #[default]
    Keep,
    /// Serve them at a priority after every other endpoint: used only while nothing else is healthy.
    Deprioritize,
    /// Stop serving them until the API server answers again.
    Drop,
}

impl StaleAction {
    /// The annotation and flag spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Keep => "keep",
            Self::Deprioritize => "deprioritize",
            Self::Drop => "drop",
        }
    }
}

impl fmt::Display for StaleAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Not one of `keep`, `deprioritize`, `drop`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not one of keep, deprioritize, drop")]
pub struct UnknownStaleAction(pub String);

impl FromStr for StaleAction {
    type Err = UnknownStaleAction;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "keep" => Ok(Self::Keep),
            "deprioritize" | "deprioritise" => Ok(Self::Deprioritize),
            "drop" => Ok(Self::Drop),
            other => Err(UnknownStaleAction(other.chars().take(64).collect())),
        }
    }
}
