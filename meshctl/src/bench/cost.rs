//! The load tool's own CPU, split by what spent it: the ADS clients and the simulators each run on
//! their own tokio runtime whose threads carry its name, so summing `/proc/self/task/*/stat` by thread
//! name separates them at no cost to the hot path. Whatever is left (the churn writer, polling, threads
//! that exited) is `other`.
//!
//! Owns: the two runtimes and the per-thread arithmetic. Does NOT: measure the target (`target::usage`).

use std::future::Future;

use serde::{Deserialize, Serialize};
use tokio::runtime::{Builder, Handle, Runtime};

/// Thread name of the clients' runtime.
pub const CLIENTS: &str = "bench-clients";
/// Thread name of the simulators' runtime.
pub const SIMULATORS: &str = "bench-sims";

/// The runtimes the clients and the simulators run on; shut down (without waiting) when dropped.
pub struct Pools {
    clients: Handle,
    sims: Handle,
    runtimes: Vec<Runtime>,
}

impl Pools {
    /// One multi-threaded runtime each, as many workers as cores (as the caller's own runtime has).
    pub fn new() -> std::io::Result<Self> {
        let build = |name: &str| Builder::new_multi_thread().thread_name(name).enable_all().build();
        let (clients, sims) = (build(CLIENTS)?, build(SIMULATORS)?);
        Ok(Self {
            clients: clients.handle().clone(),
            sims: sims.handle().clone(),
            runtimes: vec![clients, sims],
        })
    }

    /// Where the clients run.
    pub fn clients(&self) -> &Handle {
        &self.clients
    }

    /// Runs `fut` on the simulators' runtime, so the tasks it spawns stay there.
    pub async fn on_sims<T: Send + 'static>(
        &self,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        self.sims.spawn(fut).await
    }
}

impl Drop for Pools {
    fn drop(&mut self) {
        // A runtime dropped inside another one's task must not block it.
        for rt in self.runtimes.drain(..) {
            rt.shutdown_background();
        }
    }
}

/// The tool's CPU seconds so far, by part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCpu {
    /// The ADS clients' runtime.
    pub clients_s: f64,
    /// The simulated API servers' runtime.
    pub sims_s: f64,
    /// Everything else in the process: the churn writer, the run's polling, exited threads.
    pub other_s: f64,
}

impl ToolCpu {
    /// This process now (zero when `/proc` is not readable).
    pub fn now() -> Self {
        let total = super::target::usage(std::process::id()).map_or(0.0, |u| u.cpu_seconds);
        let stats = std::fs::read_dir("/proc/self/task")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|task| std::fs::read_to_string(task.path().join("stat")).ok());
        Self::of_threads(stats, total)
    }

    /// Sums `stat` lines by thread name; `total` is the whole process's CPU seconds.
    fn of_threads(stats: impl Iterator<Item = String>, total: f64) -> Self {
        let mut cpu = Self::default();
        for stat in stats {
            let Some((name, seconds)) = thread_cpu(&stat) else {
                continue;
            };
            match name {
                CLIENTS => cpu.clients_s += seconds,
                SIMULATORS => cpu.sims_s += seconds,
                _ => {}
            }
        }
        cpu.other_s = (total - cpu.clients_s - cpu.sims_s).max(0.0);
        cpu
    }

    /// CPU spent between `earlier` and `self`.
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            clients_s: self.clients_s - earlier.clients_s,
            sims_s: self.sims_s - earlier.sims_s,
            other_s: self.other_s - earlier.other_s,
        }
    }

    /// All of it.
    pub fn total_s(&self) -> f64 {
        self.clients_s + self.sims_s + self.other_s
    }
}

/// CPU seconds of this process's threads named `name` (a runtime's workers all carry its name).
pub(super) fn threads_named(name: &str) -> f64 {
    std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("stat")).ok())
        .filter_map(|stat| thread_cpu(&stat).filter(|(n, _)| *n == name).map(|(_, s)| s))
        .sum()
}

/// `(comm, utime + stime seconds)` of one `/proc/<pid>/task/<tid>/stat` line.
pub(super) fn thread_cpu(stat: &str) -> Option<(&str, f64)> {
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> Option<f64> { fields.get(i)?.parse().ok() };
    Some((name, (ticks(11)? + ticks(12)?) / super::target::USER_HZ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(name: &str, utime: u64, stime: u64) -> String {
        format!("42 ({name}) S 1 1 1 0 -1 4194560 0 0 0 0 {utime} {stime} 0 0 20 0 1 0 0 0 0")
    }

    #[test]
    fn sums_by_thread_name_and_leaves_the_rest_to_other() {
        let stats = [
            stat("bench-clients", 100, 50),
            stat("bench-clients", 30, 20),
            stat("bench-sims", 40, 0),
            stat("tokio-runtime-w", 7, 3),
            "garbage".to_owned(),
        ];
        let cpu = ToolCpu::of_threads(stats.into_iter(), 3.0);
        assert_eq!((cpu.clients_s, cpu.sims_s), (2.0, 0.4));
        assert!((cpu.other_s - 0.6).abs() < 1e-9, "{cpu:?}");
        let later = ToolCpu {
            clients_s: 5.0,
            ..cpu
        };
        assert_eq!(later.since(&cpu).clients_s, 3.0);
    }

    #[test]
    fn a_thread_name_with_a_parenthesis_is_read_whole() {
        assert_eq!(thread_cpu(&stat("a) b", 100, 100)), Some(("a) b", 2.0)));
    }

    #[test]
    fn the_pools_threads_are_named_and_counted() {
        let pools = Pools::new().expect("runtimes");
        let spun = pools.clients().spawn(async {
            let start = tokio::time::Instant::now();
            let mut x = 0u64;
            while start.elapsed() < std::time::Duration::from_millis(60) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            x
        });
        futures_block_on(spun);
        assert!(ToolCpu::now().clients_s > 0.0);
    }

    /// Waits for a join handle from plain test code (no runtime on this thread).
    fn futures_block_on<T>(handle: tokio::task::JoinHandle<T>) {
        let rt = Builder::new_current_thread().build().expect("runtime");
        rt.block_on(handle).expect("joined");
    }
}
