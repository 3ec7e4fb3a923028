//! Which meshd meshctl asks, and how it chose. In order: `--meshd` (or `MESHCTL_MESHD`); the sandbox
//! running on `$MESHD_STATE_DIR`, which must then exist and have a running meshd (meshctl never falls
//! back to another meshd when it was pointed at one); the sandbox running on the default state folder;
//! else istiod's monitoring port on loopback (a cluster install behind `kubectl port-forward`).
//!
//! When meshctl chose, a person at a terminal is told which meshd answers: two sandboxes, or a sandbox
//! and a port-forward, are easy to confuse.

use std::path::{Path, PathBuf};

use meshd::sandbox::{Addresses, state::StateError};

/// meshd's monitoring address on this machine, at istiod's port.
pub const DEFAULT_MESHD: &str = "http://127.0.0.1:15014";

/// The meshd meshctl asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Given with `--meshd` / `MESHCTL_MESHD`.
    Explicit(String),
    /// The sandbox running on `dir`; `from_env` when `$MESHD_STATE_DIR` named the folder.
    Sandbox {
        /// Its monitoring address.
        url: String,
        /// Its state folder.
        dir: PathBuf,
        /// Whether `$MESHD_STATE_DIR` named it.
        from_env: bool,
    },
    /// Nothing given and no sandbox running on the default folder: istiod's port on loopback.
    Default {
        /// The default state folder, where no sandbox runs.
        dir: PathBuf,
    },
}

/// Why meshctl will not guess.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// `$MESHD_STATE_DIR` names a folder that does not exist.
    #[error(
        "MESHD_STATE_DIR={0}: no such folder; start meshd with --state-dir {0}, unset MESHD_STATE_DIR, or give \
         --meshd URL"
    )]
    NoFolder(PathBuf),
    /// `$MESHD_STATE_DIR` names a folder where no meshd runs.
    #[error(
        "no meshd is running on MESHD_STATE_DIR={0} (it stopped, or failed to start: see its output); start it, \
         unset MESHD_STATE_DIR, or give --meshd URL"
    )]
    NotRunning(PathBuf),
    /// The running sandbox's addresses could not be read.
    #[error(transparent)]
    State(#[from] StateError),
}

impl Target {
    /// Chooses: `explicit` is `--meshd`, `env_dir` is `$MESHD_STATE_DIR`, `default_dir` the default
    /// state folder.
    pub fn choose(
        explicit: Option<&str>,
        env_dir: Option<&Path>,
        default_dir: &Path,
    ) -> Result<Self, TargetError> {
        if let Some(url) = explicit {
            return Ok(Self::Explicit(url.to_owned()));
        }
        if let Some(dir) = env_dir {
            if !dir.is_dir() {
                return Err(TargetError::NoFolder(dir.to_owned()));
            }
            return match Addresses::of_running(dir)? {
                Some(a) => Ok(Self::sandbox(a, dir, true)),
                None => Err(TargetError::NotRunning(dir.to_owned())),
            };
        }
        Ok(match Addresses::of_running(default_dir)? {
            Some(a) => Self::sandbox(a, default_dir, false),
            None => Self::Default {
                dir: default_dir.to_owned(),
            },
        })
    }

    fn sandbox(a: Addresses, dir: &Path, from_env: bool) -> Self {
        Self::Sandbox {
            url: format!("http://{}", a.monitoring),
            dir: dir.to_owned(),
            from_env,
        }
    }

    /// The admin URL.
    pub fn url(&self) -> &str {
        match self {
            Self::Explicit(url) | Self::Sandbox { url, .. } => url,
            Self::Default { .. } => DEFAULT_MESHD,
        }
    }

    /// What to tell a person when meshctl chose by itself; `None` when it was told.
    pub fn note(&self) -> Option<String> {
        match self {
            Self::Explicit(_) | Self::Sandbox { from_env: true, .. } => None,
            Self::Sandbox { url, dir, .. } => Some(format!(
                "meshctl: asking the sandbox meshd of {} ({url}); --meshd or MESHD_STATE_DIR choose another",
                dir.display()
            )),
            Self::Default { dir } => Some(format!(
                "meshctl: asking {DEFAULT_MESHD} (no sandbox meshd runs on {}); --meshd chooses another",
                dir.display()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use meshd::sandbox::state::StateLock;

    use super::*;

    fn running(dir: &Path, monitoring: &str) -> StateLock {
        let lock = StateLock::acquire(dir).unwrap();
        Addresses {
            xds: "127.0.0.1:1".into(),
            secure_xds: "127.0.0.1:2".into(),
            http: "127.0.0.1:3".into(),
            monitoring: monitoring.into(),
        }
        .write(dir)
        .unwrap();
        lock
    }

    #[test]
    fn never_falls_back_when_pointed_at_a_folder() {
        let default = tempfile::tempdir().unwrap();
        let _default_running = running(default.path(), "127.0.0.1:9001");
        let stopped = tempfile::tempdir().unwrap();
        let missing = stopped.path().join("missing");
        let live = tempfile::tempdir().unwrap();
        let _live_running = running(live.path(), "127.0.0.1:9002");
        let choose = |explicit: Option<&str>, env: Option<&Path>| {
            Target::choose(explicit, env, default.path())
                .map(|t| (t.url().to_owned(), t.note().is_some()))
                .map_err(|e| e.to_string())
        };
        // (explicit, env, the URL and whether meshctl says it chose / the error's start)
        assert_eq!(
            choose(Some("http://x:1"), Some(&missing)),
            Ok(("http://x:1".into(), false))
        );
        assert_eq!(
            choose(None, Some(live.path())),
            Ok(("http://127.0.0.1:9002".into(), false))
        );
        assert_eq!(choose(None, None), Ok(("http://127.0.0.1:9001".into(), true)));
        let err = choose(None, Some(&missing)).unwrap_err();
        assert!(
            err.starts_with(&format!("MESHD_STATE_DIR={}: no such folder", missing.display())),
            "{err}"
        );
        let err = choose(None, Some(stopped.path())).unwrap_err();
        assert!(
            err.starts_with("no meshd is running on MESHD_STATE_DIR="),
            "{err}"
        );
    }

    #[test]
    fn without_a_sandbox_it_says_it_asks_istiods_port() {
        let empty = tempfile::tempdir().unwrap();
        let t = Target::choose(None, None, empty.path()).unwrap();
        assert_eq!(t.url(), DEFAULT_MESHD);
        let note = t.note().unwrap();
        assert!(
            note.contains(DEFAULT_MESHD) && note.contains(&empty.path().display().to_string()),
            "{note}"
        );
    }
}
