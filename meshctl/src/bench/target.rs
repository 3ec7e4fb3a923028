//! The control plane under test: a `meshd` child process pointed at the simulators, or any ADS
//! server the caller started, and what `/proc` says it costs.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use super::Error;

/// Clock ticks per second in `/proc/<pid>/stat` (`USER_HZ`, 100 on every Linux ABI meshd targets).
pub(super) const USER_HZ: f64 = 100.0;

/// A `meshd` started for the run; killed when dropped.
pub(super) struct Meshd {
    child: Child,
    args: MeshdArgs,
    /// Its ADS, secure gRPC, HTTP and monitoring addresses (kept across a restart).
    ports: [SocketAddr; 4],
    /// Its plaintext ADS address.
    pub(super) ads: SocketAddr,
    http: SocketAddr,
}

/// What to start meshd with.
pub(super) struct MeshdArgs {
    pub(super) binary: PathBuf,
    pub(super) kubeconfig: PathBuf,
    pub(super) cluster_id: String,
    pub(super) debounce: Duration,
    pub(super) log: PathBuf,
}

impl Meshd {
    /// Starts meshd on loopback ports and waits until `/ready` answers 200.
    pub(super) fn start(args: MeshdArgs, ready_within: Duration) -> Result<Meshd, Error> {
        let ports = [(); 4].map(|()| free_port());
        let log = std::fs::File::create(&args.log).map_err(|e| Error::io(&args.log, e))?;
        let child = spawn(&args, ports, log)?;
        let mut meshd = Meshd {
            child,
            args,
            ports,
            ads: ports[0],
            http: ports[2],
        };
        meshd.wait_ready(ready_within)?;
        Ok(meshd)
    }

    /// Kills meshd (SIGKILL: a crashed replica, nothing drained).
    pub(super) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts meshd again on the same ports (its log appended to) and waits until it is ready.
    pub(super) fn restart(&mut self, ready_within: Duration) -> Result<(), Error> {
        self.kill();
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.args.log)
            .map_err(|e| Error::io(&self.args.log, e))?;
        self.child = spawn(&self.args, self.ports, log)?;
        self.wait_ready(ready_within)
    }

    #[allow(clippy::disallowed_types)] // blocks in std::thread::sleep (spawn_blocking): the wall clock
    fn wait_ready(&mut self, within: Duration) -> Result<(), Error> {
        let start = std::time::Instant::now();
        while !self.ready() {
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = std::fs::read_to_string(&self.args.log).unwrap_or_default();
                let tail = log
                    .get(log.len().saturating_sub(2048)..)
                    .unwrap_or(&log)
                    .to_owned();
                return Err(Error::TargetExited {
                    status: status.to_string(),
                    log: self.args.log.clone(),
                    tail,
                });
            }
            if start.elapsed() > within {
                return Err(Error::NotReady(within));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// The process ID, for [`usage`].
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    fn ready(&self) -> bool {
        http_status(self.http, "/ready") == Some(200)
    }
}

impl Drop for Meshd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts meshd on `[ads, secure, http, monitoring]`, its stderr to `log`.
fn spawn(args: &MeshdArgs, ports: [SocketAddr; 4], log: std::fs::File) -> Result<Child, Error> {
    let [ads, secure, http, monitoring] = ports;
    Command::new(&args.binary)
        .arg("--kubeconfig")
        .arg(&args.kubeconfig)
        .args(["--cluster-id", &args.cluster_id])
        .args(["--grpc-addr", &ads.to_string()])
        .args(["--secure-grpc-addr", &secure.to_string()])
        .args(["--http-addr", &http.to_string()])
        .args(["--monitoring-addr", &monitoring.to_string()])
        .args(["--debounce-after", &format!("{}ms", args.debounce.as_millis())])
        .args(["--log-level", "warn"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| Error::io(&args.binary, e))
}

/// Waits until `GET /ready` on `http` answers 200 (another control plane's readiness).
#[allow(clippy::disallowed_types)] // blocks in std::thread::sleep (spawn_blocking): the wall clock
pub(super) fn wait_ready(http: SocketAddr, within: Duration) -> Result<(), Error> {
    let start = std::time::Instant::now();
    while http_status(http, "/ready") != Some(200) {
        if start.elapsed() > within {
            return Err(Error::NotReady(within));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// A loopback address that was free a moment ago.
fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
}

/// `GET path` over HTTP/1.0; the status code, if anything answered.
fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// A process's memory and CPU at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Usage {
    /// Resident set, MiB.
    pub rss_mib: f64,
    /// Peak resident set so far (`VmHWM`), MiB.
    pub peak_rss_mib: f64,
    /// User + system CPU seconds so far.
    pub cpu_seconds: f64,
    /// Seconds since the process started (at the `ready` sample: its start-up, every cluster synced).
    pub age_s: f64,
}

/// `/proc/<pid>` now; `None` when the process is gone or not visible.
pub fn usage(pid: u32) -> Option<Usage> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |field: &str| -> Option<f64> {
        let line = status.lines().find_map(|l| l.strip_prefix(field))?;
        line.trim().trim_end_matches("kB").trim().parse().ok()
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> Option<f64> { fields.get(i)?.parse().ok() };
    // Field 22: start time in ticks since boot; `/proc/uptime`: seconds since boot.
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(Usage {
        rss_mib: kib("VmRSS:")? / 1024.0,
        peak_rss_mib: kib("VmHWM:")? / 1024.0,
        cpu_seconds: (ticks(11)? + ticks(12)?) / USER_HZ,
        age_s: (uptime - ticks(19)? / USER_HZ).max(0.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_usage() {
        let u = usage(std::process::id()).expect("/proc/self");
        assert!(u.rss_mib > 0.0 && u.peak_rss_mib >= u.rss_mib);
        assert!(u.cpu_seconds >= 0.0);
        assert!(
            (0.0..24.0 * 3600.0).contains(&u.age_s),
            "started a moment ago: {u:?}"
        );
    }
}
