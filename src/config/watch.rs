//! Loads a config file at start and hot-reloads it: the one writer of that config's watch channel.
//!
//! Files are polled by content hash rather than watched with inotify, because Kubernetes updates a
//! mounted ConfigMap by swapping a symlink, which inotify watchers on the file itself miss.

use std::{
    io::Read,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family},
    registry::Registry,
};
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tracing::{error, info};

use super::{ConfigError, MAX_FILE_BYTES, ParseError};
use crate::drain::Tasks;

/// Reload counters, labelled by config kind.
#[derive(Clone, Debug, Default)]
pub struct ReloadMetrics {
    reloads: Family<ConfigLabel, Counter>,
    errors: Family<ConfigLabel, Counter>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConfigLabel {
    config: &'static str,
}

impl ReloadMetrics {
    /// Registers `meshd_config_reloads_total` and `meshd_config_reload_errors_total`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "meshd_config_reloads",
            "Config files reloaded after a change",
            m.reloads.clone(),
        );
        registry.register(
            "meshd_config_reload_errors",
            "Config reloads rejected as invalid; the last good value stays in force",
            m.errors.clone(),
        );
        m
    }
}

type Parser<T> = Box<dyn Fn(&str) -> Result<T, ParseError> + Send + Sync>;

/// A config file, its parser and its human name ("mesh config", "meshNetworks").
pub struct ConfigFile<T> {
    kind: &'static str,
    path: PathBuf,
    parse: Parser<T>,
}

impl<T: Send + Sync + 'static> ConfigFile<T> {
    /// Describes the file at `path` parsed by `parse`.
    pub fn new(
        kind: &'static str,
        path: impl Into<PathBuf>,
        parse: impl Fn(&str) -> Result<T, ParseError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            kind,
            path: path.into(),
            parse: Box::new(parse),
        }
    }

    /// Reads and parses the file once. At start an error here is fatal.
    pub fn load(&self) -> Result<T, ConfigError> {
        self.load_with_digest().map(|(v, _)| v)
    }

    fn load_with_digest(&self) -> Result<(T, [u8; 32]), ConfigError> {
        let text = read_capped(self.kind, &self.path)?;
        let digest = Sha256::digest(text.as_bytes()).into();
        let value = (self.parse)(&text).map_err(|error| ConfigError::Invalid {
            kind: self.kind,
            path: self.path.clone(),
            error,
        })?;
        Ok((value, digest))
    }

    /// Loads the file, then polls it every `interval`, publishing each changed, valid value once it has
    /// been stable for one poll.
    /// An invalid or unreadable file keeps the last good value in force, logs why and counts an error.
    pub fn watch(
        self,
        tasks: &Tasks,
        interval: Duration,
        metrics: ReloadMetrics,
    ) -> Result<watch::Receiver<Arc<T>>, ConfigError> {
        let (value, mut digest) = self.load_with_digest()?;
        let (tx, rx) = watch::channel(Arc::new(value));
        let label = ConfigLabel { config: self.kind };
        // Create both series now so a dashboard sees 0 rather than nothing.
        metrics.reloads.get_or_create(&label);
        metrics.errors.get_or_create(&label);
        let stop = tasks.cancelled();
        tasks.spawn(&format!("config-watch {}", self.kind), async move {
            tokio::pin!(stop);
            let mut candidate = None;
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = &mut stop => return,
                    _ = tick.tick() => {}
                }
                let text = match read_capped(self.kind, &self.path) {
                    Ok(t) => t,
                    Err(e) => {
                        // Only report once per distinct failure: the digest of the error text.
                        let d: [u8; 32] = Sha256::digest(e.to_string().as_bytes()).into();
                        if d != digest {
                            digest = d;
                            metrics.errors.get_or_create(&label).inc();
                            error!(error = %e, "config reload failed; keeping the last good value");
                        }
                        continue;
                    }
                };
                let d: [u8; 32] = Sha256::digest(text.as_bytes()).into();
                if d == digest {
                    candidate = None;
                    continue;
                }
                // A file rewritten in place can be read half-written (an empty meshNetworks is valid and
                // would drop every network), so a change applies only once two polls agree on it.
                if candidate != Some(d) {
                    candidate = Some(d);
                    continue;
                }
                digest = d;
                match (self.parse)(&text) {
                    Ok(v) => {
                        metrics.reloads.get_or_create(&label).inc();
                        info!(path = %self.path.display(), "{} reloaded", self.kind);
                        tx.send_replace(Arc::new(v));
                    }
                    Err(error) => {
                        metrics.errors.get_or_create(&label).inc();
                        let e = ConfigError::Invalid {
                            kind: self.kind,
                            path: self.path.clone(),
                            error,
                        };
                        error!(error = %e, "config reload rejected; keeping the last good value");
                    }
                }
            }
        });
        Ok(rx)
    }
}

fn read_capped(kind: &'static str, path: &Path) -> Result<String, ConfigError> {
    let read_err = |source| ConfigError::Read {
        kind,
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let size = file.metadata().map_err(read_err)?.len();
    if size > MAX_FILE_BYTES {
        return Err(ConfigError::TooLarge {
            kind,
            path: path.to_owned(),
            size,
        });
    }
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(read_err)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MeshNetworks;

    fn networks_file(path: &Path) -> ConfigFile<MeshNetworks> {
        ConfigFile::new("meshNetworks", path, MeshNetworks::parse)
    }

    #[tokio::test]
    async fn reload_publishes_good_values_and_keeps_last_good_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("networks.yaml");
        std::fs::write(&path, "networks:\n  n1: {}\n").unwrap();
        let tasks = Tasks::new();
        let mut registry = Registry::default();
        let metrics = ReloadMetrics::new(&mut registry);
        let mut rx = networks_file(&path)
            .watch(&tasks, Duration::from_millis(20), metrics.clone())
            .unwrap();
        assert!(rx.borrow().networks.contains_key("n1"));

        std::fs::write(&path, "networks:\n  n2: {}\n").unwrap();
        tokio::time::timeout(Duration::from_secs(5), rx.changed())
            .await
            .unwrap()
            .unwrap();
        assert!(rx.borrow_and_update().networks.contains_key("n2"));

        std::fs::write(
            &path,
            "networks:\n  n3:\n    endpoints:\n    - fromCidr: 10.0.0.0/99\n",
        )
        .unwrap();
        let label = ConfigLabel {
            config: "meshNetworks",
        };
        while metrics.errors.get_or_create(&label).get() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!rx.has_changed().unwrap(), "an invalid file publishes nothing");
        assert!(rx.borrow().networks.contains_key("n2"), "last good value stays");

        std::fs::remove_file(&path).unwrap();
        while metrics.errors.get_or_create(&label).get() < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            rx.borrow().networks.contains_key("n2"),
            "a vanished file keeps the last good value"
        );
        assert_eq!(metrics.reloads.get_or_create(&label).get(), 1);
        tasks.drain(Duration::from_secs(1)).await.unwrap();
    }

    #[test]
    fn start_errors_name_the_file_and_problem() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.yaml");
        std::fs::write(
            &path,
            "networks:\n  n1:\n    endpoints:\n    - fromCidr: 300.1.1.1/8\n",
        )
        .unwrap();
        let msg = networks_file(&path).load().unwrap_err().to_string();
        assert!(
            msg.starts_with(&format!("meshNetworks file {}: ", path.display())),
            "{msg}"
        );
        assert!(
            msg.contains("networks.n1.endpoints[0]: fromCidr \"300.1.1.1/8\" is not a valid CIDR"),
            "{msg}"
        );
        assert!(msg.contains("line 4"), "{msg}");

        let missing = networks_file(&dir.path().join("nope.yaml"))
            .load()
            .unwrap_err()
            .to_string();
        assert!(
            missing.contains("nope.yaml") && missing.contains("No such file"),
            "{missing}"
        );

        std::fs::write(&path, vec![b' '; (MAX_FILE_BYTES + 1) as usize]).unwrap();
        let big = networks_file(&path).load().unwrap_err().to_string();
        assert!(big.contains("over the"), "{big}");
    }
}
