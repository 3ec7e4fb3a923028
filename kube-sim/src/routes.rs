//! Request entry point: faults, authentication, and routing of URL paths to discovery or resource handlers.

use std::sync::Arc;

use axum::body::Body;
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;

use super::Ctx;
use super::auth::Identity;
use super::crd::Registry;
use super::discovery::{self, AGGREGATED_CONTENT_TYPE};
use super::error::Error;
use super::faults::FaultMode;
use super::handlers;
use super::http::{
    Params, accept, decode, read_body, respond_bytes, respond_error, respond_json, respond_text,
};
use super::impersonation;
use super::kinds::Kind;
use super::openapi;
use super::rbac;
use super::requestlog;

const FAULTS_PATH: &str = "/sandbox/v1/faults";

/// A resource URL: `/api/v1[/namespaces/{ns}]/{plural}[/{name}[/{subresource}]]` or the `/apis/{g}/{v}` form.
#[derive(Debug)]
pub(crate) struct Target {
    pub(crate) kind: &'static Kind,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) sub: Option<String>,
}

pub(crate) async fn handle(ctx: Arc<Ctx>, peer: Option<&Identity>, req: Request<Incoming>) -> Response<Body> {
    if req.uri().path() == FAULTS_PATH {
        return faults_endpoint(&ctx, req)
            .await
            .unwrap_or_else(|e| respond_error(&e));
    }
    if ctx.faults.mode() == FaultMode::Hang {
        tokio::select! {
            _ = ctx.faults.wait_while_hanging() => {}
            _ = ctx.shutdown.cancelled() => {}
        }
    }
    if let Some(err) = ctx.faults.failure() {
        return respond_error(&err);
    }
    dispatch(ctx, peer, req)
        .await
        .unwrap_or_else(|e| respond_error(&e))
}

/// `/sandbox/v1/faults`: admin token only; keeps working in error and hang modes.
async fn faults_endpoint(ctx: &Ctx, req: Request<Incoming>) -> Result<Response<Body>, Error> {
    if !ctx.authority.is_admin_request(req.headers()) {
        return Err(Error::Unauthorized);
    }
    match *req.method() {
        Method::GET => Ok(respond_json(StatusCode::OK, &ctx.faults.describe())),
        Method::POST | Method::PUT => {
            let (parts, body) = req.into_parts();
            let bytes = read_body(body, &parts.headers, ctx.cfg.max_body_bytes).await?;
            let state = ctx
                .faults
                .handle_request(&ctx.store, decode(&bytes, "application/json")?)?;
            Ok(respond_json(StatusCode::OK, &state))
        }
        _ => Err(Error::MethodNotAllowed),
    }
}

async fn dispatch(
    ctx: Arc<Ctx>,
    peer: Option<&Identity>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Error> {
    let identity = ctx.authority.authenticate(&ctx.store, req.headers(), peer)?;
    let path = req.uri().path().to_string();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    // Anonymous requests may only see health and version, as with the default public-info-viewer role.
    if let ["healthz" | "readyz" | "livez", ..] = segments[..] {
        return get_only(&req).map(|_| respond_text("ok"));
    }
    if segments[..] == ["version"] {
        return get_only(&req).map(|_| respond_json(StatusCode::OK, &discovery::version()));
    }
    let identity = identity.ok_or(Error::Unauthorized)?;
    let identity = impersonation::apply(&ctx.store, ctx.cfg.enforce_rbac, identity, req.headers())?;
    let aggregated = discovery::wants_aggregated(accept(req.headers()));
    let reg = ctx.store.kinds();
    let doc = match segments[..] {
        ["api"] if aggregated => Some(discovery::aggregated(&reg, true)),
        ["apis"] if aggregated => Some(discovery::aggregated(&reg, false)),
        ["api"] => Some(discovery::core_versions(&ctx.addr.to_string())),
        ["apis"] => Some(discovery::group_list(&reg)),
        ["api", "v1"] => Some(discovery::resource_list(&reg, "", "v1").ok_or(Error::NoRoute)?),
        ["apis", g] => Some(discovery::group(&reg, g).ok_or(Error::NoRoute)?),
        ["apis", g, v] => Some(discovery::resource_list(&reg, g, v).ok_or(Error::NoRoute)?),
        ["openapi", "v3"] => Some(openapi::root(&reg)),
        _ => None,
    };
    // The schema documents are generated once and served pre-serialized.
    let schema_doc = match segments[..] {
        ["openapi", "v2"] => Some(openapi::v2(accept(req.headers()))?),
        ["openapi", "v3", ref rest @ ..] if !rest.is_empty() => Some((
            "application/json",
            openapi::group_version_doc(&reg, &rest.join("/")).ok_or(Error::NoRoute)?,
        )),
        _ => None,
    };
    if let Some((content_type, body)) = schema_doc {
        get_only(&req)?;
        return Ok(respond_bytes(StatusCode::OK, content_type, body));
    }
    if let Some(doc) = doc {
        if ctx.cfg.enforce_rbac {
            let verb = req.method().as_str().to_ascii_lowercase();
            let attrs = rbac::Attributes {
                verb: &verb,
                path: Some(&path),
                ..rbac::Attributes::default()
            };
            rbac::authorize(&ctx.store, &identity, &attrs)?;
        }
        get_only(&req)?;
        let ct = if aggregated && segments.len() == 1 {
            AGGREGATED_CONTENT_TYPE
        } else {
            "application/json"
        };
        return Ok(respond_bytes(
            StatusCode::OK,
            ct,
            serde_json::to_vec(&doc).unwrap_or_default(),
        ));
    }
    let target = match segments[..] {
        ["api", "v1", ref rest @ ..] => parse_target(&reg, "", "v1", rest)?,
        ["apis", g, v, ref rest @ ..] => parse_target(&reg, g, v, rest)?,
        _ => return Err(Error::NoRoute),
    };
    if ctx.cfg.request_log.is_some() || ctx.cfg.enforce_rbac {
        let watch = Params::from_uri(req.uri()).is_ok_and(|p| p.flag("watch"));
        let verb = requestlog::rbac_verb(req.method(), &target, watch);
        let entry = requestlog::entry(&ctx.cfg.cluster_name, &identity, verb, target.kind, &target);
        if let Some(log) = &ctx.cfg.request_log {
            log.record(&entry);
        }
        if ctx.cfg.enforce_rbac {
            rbac::authorize(&ctx.store, &identity, &rbac::Attributes::of_entry(&entry))?;
        }
    }
    handlers::resource(ctx, identity, req, target).await
}

fn get_only(req: &Request<Incoming>) -> Result<(), Error> {
    if req.method() == Method::GET || req.method() == Method::HEAD {
        Ok(())
    } else {
        Err(Error::MethodNotAllowed)
    }
}

fn parse_target(reg: &Registry, group: &str, version: &str, rest: &[&str]) -> Result<Target, Error> {
    let namespaced = |plural: &str| {
        reg.by_resource(group, version, plural)
            .is_some_and(|k| k.namespaced)
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, plural, tail @ ..] if namespaced(plural) => (Some(ns.to_string()), (plural, tail)),
        [plural, tail @ ..] => (None, (plural, tail)),
        [] => return Err(Error::NoRoute),
    };
    let (plural, tail) = rest;
    let kind = reg.by_resource(group, version, plural).ok_or(Error::NoRoute)?;
    let (name, sub) = match tail {
        [] => (None, None),
        [name] => (Some(name.to_string()), None),
        [name, sub] => (Some(name.to_string()), Some(sub.to_string())),
        _ => return Err(Error::NoRoute),
    };
    if kind.namespaced && namespace.is_none() && name.is_some() {
        return Err(Error::NoRoute);
    }
    Ok(Target {
        kind,
        namespace,
        name,
        sub,
    })
}
