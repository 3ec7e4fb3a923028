//! `meshctl bench-floor`: the floor under "CPU per change per 1,000 streams" (issue 34 §4): the same
//! bytes a change costs each client written to that many loopback sockets, with no xDS, no HTTP/2 and
//! no gRPC: one `write` per socket per change from one thread, whose own CPU is the figure. meshd's
//! figure minus this one is what its protocol stack and push path add. `--stack` also measures the
//! stack's own floor ([`super::stack_floor`]).
//!
//! Owns: the sockets, the writer thread and its CPU. Does NOT: count the readers (a thread of their own
//! drains every socket, so the writer never waits on a full buffer).

use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    time::Duration,
};

use serde::Serialize;

use super::{Error, stack_floor};

/// `meshctl bench-floor` options.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Sockets written to.
    #[arg(long, default_value_t = 1000)]
    pub streams: usize,
    /// Bytes per socket per change (meshd's `bytes per client per change` of the run to compare with).
    #[arg(long, default_value_t = 1784)]
    pub bytes: usize,
    /// Changes.
    #[arg(long, default_value_t = 200)]
    pub changes: usize,
    /// Pause between changes (`meshctl bench --churn 5` makes one every 200 ms; between pushes a
    /// stream's state goes cold, so pacing them alike compares like with like).
    #[arg(long, default_value = "5ms", value_parser = humantime::parse_duration)]
    pub between: Duration,
    /// Also measure the floor of the stack meshd serves ADS on: the same bytes as one gRPC message per
    /// change on a streaming call, each acknowledged by its client, through tonic, hyper and h2 and
    /// through h2 alone.
    #[arg(long)]
    pub stack: bool,
}

/// What the floor costs.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Floor {
    /// Sockets.
    pub streams: usize,
    /// Bytes per socket per change.
    pub bytes: usize,
    /// Changes written.
    pub changes: usize,
    /// The writer thread's CPU, seconds.
    pub writer_cpu_s: f64,
    /// The writer's CPU per change per 1,000 sockets, ms: the figure beside meshd's.
    pub ms_per_change_per_1k_streams: f64,
    /// Bytes the readers received (all of them: `streams × bytes × changes`).
    pub received: u64,
    /// With `--stack`: the same changes as gRPC messages over HTTP/2, through each server.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stack: Vec<super::stack_floor::StackFloor>,
}

/// Connects `streams` socket pairs, drains one side on a reader thread, writes from this thread.
pub fn run(args: &Args) -> Result<Floor, Error> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(Error::loopback)?;
    let addr = listener.local_addr().map_err(Error::loopback)?;
    let mut writers = Vec::with_capacity(args.streams);
    let mut readers = Vec::with_capacity(args.streams);
    for _ in 0..args.streams {
        readers.push(TcpStream::connect(addr).map_err(Error::loopback)?);
        let (w, _) = listener.accept().map_err(Error::loopback)?;
        w.set_nodelay(true).map_err(Error::loopback)?;
        writers.push(w);
    }
    for r in &readers {
        r.set_nonblocking(true).map_err(Error::loopback)?;
    }
    let total = (args.streams * args.bytes * args.changes) as u64;
    let drain = std::thread::Builder::new()
        .name("floor-readers".into())
        .spawn(move || drain(readers, total))
        .map_err(Error::loopback)?;
    let payload = vec![b'x'; args.bytes];
    let before = thread_cpu_s().unwrap_or_default();
    for _ in 0..args.changes {
        for w in &mut writers {
            w.write_all(&payload).map_err(Error::loopback)?;
        }
        std::thread::sleep(args.between);
    }
    let writer_cpu_s = thread_cpu_s().unwrap_or_default() - before;
    drop(writers);
    let received = drain.join().unwrap_or_default();
    let servers = match args.stack {
        true => &[stack_floor::Server::Tonic, stack_floor::Server::H2][..],
        false => &[],
    };
    let stack = servers
        .iter()
        .map(|s| stack_floor::run(*s, args))
        .collect::<Result<_, _>>()?;
    Ok(Floor {
        streams: args.streams,
        bytes: args.bytes,
        changes: args.changes,
        writer_cpu_s,
        ms_per_change_per_1k_streams: per_change_per_1k_streams(writer_cpu_s, args.changes, args.streams),
        received,
        stack,
    })
}

/// Reads every socket until `total` bytes arrived or all are closed; returns the bytes read.
#[allow(clippy::disallowed_types)] // a plain thread polling non-blocking sockets
fn drain(mut readers: Vec<TcpStream>, total: u64) -> u64 {
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = 0u64;
    while got < total && !readers.is_empty() {
        let mut idle = true;
        readers.retain_mut(|r| match r.read(&mut buf) {
            Ok(0) => false,
            Ok(n) => {
                got += n as u64;
                idle = false;
                true
            }
            Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
        });
        if idle {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    got
}

/// CPU seconds over `changes` to `streams` as milliseconds per change per 1,000 streams (`meshctl
/// bench`'s unit).
pub(super) fn per_change_per_1k_streams(cpu_s: f64, changes: usize, streams: usize) -> f64 {
    cpu_s * 1e3 / changes.max(1) as f64 / (streams.max(1) as f64 / 1000.0)
}

/// This thread's user + system CPU seconds.
fn thread_cpu_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    super::cost::thread_cpu(&stat).map(|(_, seconds)| seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_writes_every_byte_and_counts_the_writer_only() {
        let floor = run(&Args {
            streams: 20,
            bytes: 1000,
            changes: 5,
            between: Duration::from_millis(5),
            stack: false,
        })
        .expect("loopback sockets");
        assert_eq!((floor.streams, floor.changes), (20, 5));
        assert_eq!(floor.received, 20 * 1000 * 5, "every byte reached its reader");
        assert!(floor.writer_cpu_s >= 0.0 && floor.ms_per_change_per_1k_streams.is_finite());
    }
}
