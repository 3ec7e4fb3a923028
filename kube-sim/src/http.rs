//! HTTP plumbing shared by the handlers: query parameters, body reading and decoding, JSON responses.

use std::collections::HashMap;

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode, Uri, header};
use http_body_util::{BodyExt, Limited};
use serde_json::Value;

use super::error::Error;
use super::proto;

/// The query parameters of a request (repeated keys: the last one wins).
#[derive(Debug, Default)]
pub(crate) struct Params(HashMap<String, String>);

impl Params {
    pub(crate) fn from_uri(uri: &Uri) -> Result<Params, Error> {
        let query = axum::extract::Query::<Vec<(String, String)>>::try_from_uri(uri)
            .map_err(|e| Error::BadRequest(format!("invalid query string: {e}")))?;
        Ok(Params(query.0.into_iter().collect()))
    }

    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str).filter(|v| !v.is_empty())
    }

    pub(crate) fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }

    pub(crate) fn number<T: std::str::FromStr>(&self, key: &str) -> Result<Option<T>, Error> {
        self.get(key)
            .map(|v| {
                v.parse()
                    .map_err(|_| Error::BadRequest(format!("invalid value for {key}: {v:?}")))
            })
            .transpose()
    }

    pub(crate) fn dry_run(&self) -> Result<bool, Error> {
        match self.get("dryRun") {
            None => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(Error::BadRequest(format!(
                "unsupported dryRun value {other:?}: only \"All\""
            ))),
        }
    }
}

/// Reads a request body, refusing more than `max` bytes with 413.
pub(crate) async fn read_body(
    body: hyper::body::Incoming,
    headers: &HeaderMap,
    max: usize,
) -> Result<Bytes, Error> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|len| len > max) {
        return Err(Error::TooLarge(max));
    }
    match Limited::new(body, max).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(Error::TooLarge(max)),
        Err(e) => Err(Error::BadRequest(format!("failed to read the request body: {e}"))),
    }
}

pub(crate) fn content_type(headers: &HeaderMap) -> &str {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default().trim())
        .unwrap_or("application/json")
}

/// Decodes a JSON or YAML body, saying what is wrong with a malformed one.
pub(crate) fn decode(bytes: &[u8], content_type: &str) -> Result<Value, Error> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::BadRequest("the request body is empty".into()));
    }
    if content_type == "application/vnd.kubernetes.protobuf" {
        return proto::decode(bytes);
    }
    if !matches!(
        content_type,
        "application/json" | "application/yaml" | "text/plain" | "*/*" | ""
    ) {
        return Err(Error::UnsupportedMediaType(
            "application/json, application/yaml".into(),
        ));
    }
    let value = if content_type.contains("yaml") {
        serde_yaml::from_slice(bytes)
            .map_err(|e| Error::BadRequest(format!("the request body is not valid YAML: {e}")))?
    } else {
        serde_json::from_slice(bytes)
            .map_err(|e| Error::BadRequest(format!("the request body is not valid JSON: {e}")))?
    };
    Ok(value)
}

pub(crate) fn respond_bytes(code: StatusCode, content_type: &str, body: impl Into<Body>) -> Response<Body> {
    let mut resp = Response::new(body.into());
    *resp.status_mut() = code;
    if let Ok(v) = content_type.parse() {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    resp
}

pub(crate) fn respond_json(code: StatusCode, value: &Value) -> Response<Body> {
    respond_bytes(
        code,
        "application/json",
        serde_json::to_vec(value).unwrap_or_default(),
    )
}

/// An error as the real server sends it: a `Status` body with the matching code.
pub(crate) fn respond_error(err: &Error) -> Response<Body> {
    let mut resp = respond_json(err.code(), &err.to_status());
    if err.code() == StatusCode::TOO_MANY_REQUESTS {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    }
    resp
}

pub(crate) fn respond_text(text: &'static str) -> Response<Body> {
    respond_bytes(StatusCode::OK, "text/plain; charset=utf-8", text)
}

/// Whether the client asked for a server-side Table (`kubectl get`).
pub(crate) fn wants_table(headers: &HeaderMap) -> bool {
    accept(headers).contains("as=Table")
}

pub(crate) fn accept(headers: &HeaderMap) -> &str {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}
