//! The sandbox state folder's ownership and what it tells tools: a lock held by the running meshd (a
//! second sandbox on the same folder refuses to start instead of overwriting the first one's
//! kubeconfigs), and the addresses that meshd actually serves on, which tools read while the lock is held.

use std::{
    fs::{File, TryLockError},
    io::Write,
    path::{Path, PathBuf},
};

/// The lock file, held (flock) for as long as the sandbox's meshd runs.
pub const LOCK_FILE: &str = "meshd.lock";

/// Why the state folder cannot be used or read.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Another process holds the folder.
    #[error(
        "another meshd sandbox{pid} is using the state folder {dir}; stop it, or give this one its own \
         folder with --state-dir DIR"
    )]
    InUse {
        /// The folder.
        dir: PathBuf,
        /// ` (pid N)` when the holder wrote its pid.
        pid: String,
    },
    /// A file of the folder could not be created, locked, read or parsed.
    #[error("{}: {reason}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

fn file_error(path: &Path, reason: impl ToString) -> StateError {
    StateError::File {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

/// The running sandbox's claim on its state folder; released when dropped (or when the process dies).
/// Dropping it (a clean exit) also removes `addresses.json` and the lock file, so a stopped sandbox
/// leaves nothing that looks like a running one.
#[derive(Debug)]
pub struct StateLock {
    _file: File,
    dir: PathBuf,
}

impl Drop for StateLock {
    fn drop(&mut self) {
        // Still locked while the files go: no other meshd can take the folder in between.
        let _ = std::fs::remove_file(self.dir.join(Addresses::FILE));
        let _ = std::fs::remove_file(self.dir.join(LOCK_FILE));
    }
}

impl StateLock {
    /// Creates `dir` if needed and takes its lock, or says who holds it.
    pub fn acquire(dir: &Path) -> Result<Self, StateError> {
        std::fs::create_dir_all(dir).map_err(|e| file_error(dir, e))?;
        let path = dir.join(LOCK_FILE);
        let mut file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| file_error(&path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let pid = std::fs::read_to_string(&path)
                    .ok()
                    .and_then(|s| s.trim().parse::<u32>().ok())
                    .map(|p| format!(" (pid {p})"))
                    .unwrap_or_default();
                return Err(StateError::InUse {
                    dir: dir.to_owned(),
                    pid,
                });
            }
            Err(TryLockError::Error(e)) => return Err(file_error(&path, e)),
        }
        file.set_len(0)
            .and_then(|()| writeln!(file, "{}", std::process::id()))
            .map_err(|e| file_error(&path, e))?;
        Ok(Self {
            _file: file,
            dir: dir.to_owned(),
        })
    }
}

/// Whether a meshd holds `dir`'s lock now.
pub fn is_running(dir: &Path) -> bool {
    let Ok(file) = File::open(dir.join(LOCK_FILE)) else {
        return false;
    };
    matches!(file.try_lock_shared(), Err(TryLockError::WouldBlock))
}

/// Where a sandbox meshd serves, written into its state folder so that tools started later
/// (`meshctl`, `meshctl bootstrap`) find its ports without being told, even when a taken default port
/// made it fall back to a free one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Addresses {
    /// The plaintext xDS address (`--grpc-addr`), `host:port`.
    pub xds: String,
    /// The mTLS xDS address (`--secure-grpc-addr`).
    pub secure_xds: String,
    /// The HTTP address (`--http-addr`): `/ready` and the debug endpoints.
    pub http: String,
    /// The monitoring address (`--monitoring-addr`): `/metrics`, the debug endpoints, meshctl's default.
    pub monitoring: String,
}

impl Addresses {
    /// The file in the state folder.
    pub const FILE: &str = "addresses.json";

    /// Writes `<dir>/addresses.json`.
    pub fn write(&self, dir: &Path) -> Result<(), StateError> {
        let path = dir.join(Self::FILE);
        let text = serde_json::to_vec_pretty(self).map_err(|e| file_error(&path, e))?;
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&path, text))
            .map_err(|e| file_error(&path, e))
    }

    /// The addresses of the meshd running on `dir`: `None` when none runs there (the file, if any, is
    /// a stopped sandbox's), an error when the running one's file is unreadable.
    pub fn of_running(dir: &Path) -> Result<Option<Self>, StateError> {
        if !is_running(dir) {
            return Ok(None);
        }
        let path = dir.join(Self::FILE);
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            // Started, not yet bound: as good as not running for a tool.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(file_error(&path, e)),
        };
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| file_error(&path, e))
    }
}

/// The state folder tools look in: `$MESHD_STATE_DIR` (meshd's `--state-dir` environment variable),
/// else the default.
pub fn tools_state_dir() -> PathBuf {
    std::env::var_os("MESHD_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(super::default_state_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addresses(port: u16) -> Addresses {
        Addresses {
            xds: format!("127.0.0.1:{port}"),
            secure_xds: "127.0.0.1:2".into(),
            http: "127.0.0.1:3".into(),
            monitoring: "127.0.0.1:4".into(),
        }
    }

    #[test]
    fn a_second_sandbox_on_the_same_folder_is_refused_naming_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let held = StateLock::acquire(dir.path()).unwrap();
        let err = StateLock::acquire(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains(&format!("(pid {})", std::process::id()))
                && err.contains(&dir.path().display().to_string())
                && err.contains("--state-dir"),
            "{err}"
        );
        drop(held);
        StateLock::acquire(dir.path()).expect("free again once the holder stops");
    }

    #[test]
    fn tools_read_addresses_only_while_a_meshd_holds_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        addresses(1).write(dir.path()).unwrap();
        assert_eq!(Addresses::of_running(dir.path()).unwrap(), None, "stale file");
        let lock = StateLock::acquire(dir.path()).unwrap();
        assert!(is_running(dir.path()));
        assert_eq!(Addresses::of_running(dir.path()).unwrap(), Some(addresses(1)));
        std::fs::write(dir.path().join(Addresses::FILE), "{").unwrap();
        let err = Addresses::of_running(dir.path()).unwrap_err().to_string();
        assert!(err.contains(Addresses::FILE), "{err}");
        drop(lock);
        assert!(!is_running(dir.path()));
    }

    #[test]
    fn a_clean_exit_leaves_no_addresses_and_no_lock_file() {
        let dir = tempfile::tempdir().unwrap();
        let lock = StateLock::acquire(dir.path()).unwrap();
        addresses(1).write(dir.path()).unwrap();
        assert!(dir.path().join(LOCK_FILE).exists() && dir.path().join(Addresses::FILE).exists());
        // A refused second claim removes nothing of the holder's.
        assert!(StateLock::acquire(dir.path()).is_err());
        assert_eq!(Addresses::of_running(dir.path()).unwrap(), Some(addresses(1)));
        drop(lock);
        assert!(!dir.path().join(LOCK_FILE).exists() && !dir.path().join(Addresses::FILE).exists());
        assert_eq!(Addresses::of_running(dir.path()).unwrap(), None);
    }
}
