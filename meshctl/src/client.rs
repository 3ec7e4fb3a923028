//! meshd's admin API over HTTP/1.1: `GET` a debug path, decode JSON. Plain HTTP, as meshd serves it
//! (through `kubectl port-forward` for a real install); a bearer token is sent when given, for
//! callers that are not on loopback.

use http::{Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;

/// Why a debug call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// `--meshd` is not an `http://host:port` URL.
    #[error("--meshd {0:?} must be an http://host:port URL")]
    BadUrl(String),
    /// Nothing answered.
    #[error(
        "cannot reach meshd at {addr}: {source} (is it running? for a cluster, `kubectl port-forward -n istio-system deploy/meshd 15014`)"
    )]
    Connect {
        /// host:port.
        addr: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Something accepted the connection but the HTTP/1.1 exchange failed: most often another port
    /// (meshd's gRPC ports speak HTTP/2 only and hang up on HTTP/1.1).
    #[error(
        "{addr} accepted the connection but did not answer as meshd's admin HTTP server ({source}); \
         is it meshd's monitoring port (--monitoring-addr, default 15014)? meshd's gRPC ports (15010, 15012) \
         speak HTTP/2 only"
    )]
    Http {
        /// host:port.
        addr: String,
        /// hyper's error.
        #[source]
        source: hyper::Error,
    },
    /// meshd answered with an error status.
    #[error("meshd answered {status} for {path}: {body}")]
    Status {
        /// The path asked for.
        path: String,
        /// The status.
        status: StatusCode,
        /// Its message.
        body: String,
    },
    /// The answer is not the expected JSON.
    #[error("meshd's answer for {path} is not the expected JSON: {source}")]
    Decode {
        /// The path asked for.
        path: String,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
}

/// A client for one meshd admin address.
#[derive(Clone)]
pub struct AdminClient {
    authority: String,
    token: Option<String>,
}

impl std::fmt::Debug for AdminClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminClient")
            .field("authority", &self.authority)
            .finish_non_exhaustive()
    }
}

impl AdminClient {
    /// A client for `url` (`http://host:port`), sending `token` as a bearer token if given.
    pub fn new(url: &str, token: Option<String>) -> Result<Self, ClientError> {
        let uri: Uri = url.parse().map_err(|_| ClientError::BadUrl(url.into()))?;
        let authority = match (uri.scheme_str(), uri.authority()) {
            (Some("http"), Some(a)) if a.port().is_some() => a.to_string(),
            _ => return Err(ClientError::BadUrl(url.into())),
        };
        Ok(Self { authority, token })
    }

    /// `GET path` and decode the JSON answer.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let body = self.get_bytes(path).await?;
        serde_json::from_slice(&body).map_err(|source| ClientError::Decode {
            path: path.into(),
            source,
        })
    }

    async fn get_bytes(&self, path: &str) -> Result<bytes::Bytes, ClientError> {
        let addr = self.authority.clone();
        let http = |source| ClientError::Http {
            addr: addr.clone(),
            source,
        };
        let stream = tokio::net::TcpStream::connect(&addr)
            .await
            .map_err(|source| ClientError::Connect {
                addr: addr.clone(),
                source,
            })?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(http)?;
        tokio::spawn(conn);
        let mut req = Request::get(path).header(header::HOST, &addr);
        if let Some(t) = &self.token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let req = req
            .body(Empty::<bytes::Bytes>::new())
            .map_err(|_| ClientError::BadUrl(path.into()))?;
        let resp = sender.send_request(req).await.map_err(http)?;
        let status = resp.status();
        let body = resp.into_body().collect().await.map_err(http)?.to_bytes();
        if !status.is_success() {
            return Err(ClientError::Status {
                path: path.into(),
                status,
                body: String::from_utf8_lossy(&body).trim().to_owned(),
            });
        }
        Ok(body)
    }
}

/// Percent-encodes a query value (node IDs carry `~` and `|`, hosts `:`).
pub fn query_value(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// An HTTP/2-only server (meshd's gRPC port) as an HTTP/1.1 client sees it: its SETTINGS frame, or
    /// a hang-up, instead of a response.
    #[tokio::test]
    async fn a_port_that_is_not_the_admin_http_says_so() {
        for reply in [&[0u8, 0, 0, 4, 0, 0, 0, 0, 0][..], &[]] {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 256];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(reply).await;
            });
            let client = AdminClient::new(&format!("http://{addr}"), None).unwrap();
            let e = client
                .get::<serde_json::Value>("/debug/clusterz")
                .await
                .unwrap_err();
            let shown = e.to_string();
            assert!(matches!(e, ClientError::Http { .. }), "{shown}");
            assert!(shown.contains("did not answer as meshd's admin HTTP"), "{shown}");
            assert!(shown.contains("monitoring port"), "{shown}");
        }
    }
}
