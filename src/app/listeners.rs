//! Every address meshd serves on, bound before anything else starts: a taken port fails start-up before
//! any state is written, with an error that names the flag to change. In the sandbox, a port left at its
//! default that another process holds is swapped for a free one (the banner and the state folder say
//! which), so a developer's first `meshd` works on a machine where 8080 is taken.

use std::net::SocketAddr;

use tokio::net::TcpListener;
use tracing::warn;

/// One address to bind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listen {
    /// The flag that sets it, for messages.
    pub flag: &'static str,
    /// The address asked for.
    pub addr: SocketAddr,
    /// Whether a taken port may be replaced by a free one on the same host.
    pub fallback: bool,
}

/// An address could not be bound.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot listen on {addr} ({flag}): {source}{hint}",
    hint = hint(flag, source)
)]
pub struct BindError {
    /// The flag.
    pub flag: &'static str,
    /// The address.
    pub addr: SocketAddr,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

fn hint(flag: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::AddrInUse => {
            format!("; another process holds it: pass {flag} with a free address (port 0 picks one)")
        }
        std::io::ErrorKind::AddrNotAvailable => {
            format!("; no interface of this machine has that address: pass {flag} with one of its own")
        }
        _ => String::new(),
    }
}

/// meshd's four listeners.
#[derive(Debug)]
pub struct Listeners {
    /// Plaintext xDS (`--grpc-addr`).
    pub grpc: TcpListener,
    /// mTLS xDS (`--secure-grpc-addr`).
    pub secure_grpc: TcpListener,
    /// `/ready` and debug (`--http-addr`).
    pub http: TcpListener,
    /// `/metrics` and debug (`--monitoring-addr`).
    pub monitoring: TcpListener,
    /// The addresses actually bound (a fallback or port 0 differs from the spec), in spec order.
    pub addresses: [SocketAddr; 4],
}

/// The addresses of [`Listeners`], in the same order.
pub type ListenSpecs = [Listen; 4];

impl Listeners {
    /// Binds all four or none (what was bound is closed again on error).
    pub async fn bind(specs: &ListenSpecs) -> Result<Self, BindError> {
        let [grpc, secure_grpc, http, monitoring] = specs;
        let (grpc, a0) = bind(grpc).await?;
        let (secure_grpc, a1) = bind(secure_grpc).await?;
        let (http, a2) = bind(http).await?;
        let (monitoring, a3) = bind(monitoring).await?;
        Ok(Self {
            grpc,
            secure_grpc,
            http,
            monitoring,
            addresses: [a0, a1, a2, a3],
        })
    }
}

/// Binds `spec` (or, when allowed and its port is taken, a free port on the same host); returns the
/// listener and the address it got.
async fn bind(spec: &Listen) -> Result<(TcpListener, SocketAddr), BindError> {
    let error = |source| BindError {
        flag: spec.flag,
        addr: spec.addr,
        source,
    };
    let listener = match TcpListener::bind(spec.addr).await {
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && spec.fallback => {
            TcpListener::bind(SocketAddr::new(spec.addr.ip(), 0))
                .await
                .map_err(error)?
        }
        other => other.map_err(error)?,
    };
    let got = listener.local_addr().map_err(error)?;
    if got != spec.addr && spec.addr.port() != 0 {
        warn!(flag = spec.flag, wanted = %spec.addr, serving = %got, "default port taken by another process; serving on a free port instead");
    }
    Ok((listener, got))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(flag: &'static str, addr: SocketAddr, fallback: bool) -> Listen {
        Listen { flag, addr, fallback }
    }

    #[tokio::test]
    async fn a_taken_port_names_the_flag_or_falls_back_when_defaulted() {
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let taken_addr = taken.local_addr().unwrap();
        let free = SocketAddr::from(([127, 0, 0, 1], 0));

        let err = bind(&spec("--http-addr", taken_addr, false))
            .await
            .unwrap_err()
            .to_string();
        let io = TcpListener::bind(taken_addr).await.unwrap_err();
        assert_eq!(
            err,
            format!(
                "cannot listen on {taken_addr} (--http-addr): {io}; another process holds it: pass \
                 --http-addr with a free address (port 0 picks one)"
            )
        );

        let (fell_back, got) = bind(&spec("--http-addr", taken_addr, true)).await.unwrap();
        assert_eq!(fell_back.local_addr().unwrap(), got);
        assert_eq!(got.ip(), taken_addr.ip());
        assert_ne!(got.port(), taken_addr.port());

        // All or nothing: the first listener is released when a later one fails.
        let specs = [
            spec("--grpc-addr", free, false),
            spec("--secure-grpc-addr", free, false),
            spec("--http-addr", taken_addr, false),
            spec("--monitoring-addr", free, false),
        ];
        let err = Listeners::bind(&specs).await.unwrap_err();
        assert_eq!(err.flag, "--http-addr");

        let specs = [
            spec("--grpc-addr", free, false),
            spec("--secure-grpc-addr", free, false),
            spec("--http-addr", taken_addr, true),
            spec("--monitoring-addr", free, false),
        ];
        let bound = Listeners::bind(&specs).await.unwrap();
        let addrs = bound.addresses;
        assert!(addrs.iter().all(|a| a.port() != 0 && a.ip() == taken_addr.ip()));
        assert_eq!(addrs.iter().collect::<std::collections::BTreeSet<_>>().len(), 4);
        drop(taken);
    }

    #[tokio::test]
    async fn an_address_of_no_interface_says_so() {
        // TEST-NET-1 is never assigned to a local interface.
        let addr = SocketAddr::from(([192, 0, 2, 1], 15010));
        let err = bind(&spec("--grpc-addr", addr, true))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("cannot listen on 192.0.2.1:15010 (--grpc-addr): ")
                && err.contains("no interface of this machine has that address"),
            "{err}"
        );
    }
}
