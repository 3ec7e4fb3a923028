//! Resource verbs: get, list (paginated), watch, create, update, patch, delete, deletecollection, `/status`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use bytes::{BufMut, BytesMut};
use http::request::Parts;
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::Ctx;
use super::auth::Identity;
use super::crd;
use super::delete::{self, DeleteOpts, Outcome};
use super::error::Error;
use super::escalation;
use super::http::{Params, content_type, decode, read_body, respond_bytes, respond_json, wants_table};
use super::kinds::{Handling, Kind};
use super::object::{Key, Obj};
use super::patch::{self, PatchType};
use super::reviews;
use super::routes::Target;
use super::scale;
use super::selector::{FieldSelector, Filter, LabelSelector};
use super::ssa::{self, Writer};
use super::store::WatchFrom;
use super::table::{self, Include};
use super::typed::{FieldCheck, FieldValidation};
use super::watch::{self, WatchRequest};
use super::write::{self, StatusMode, Track, WriteOpts};

/// Real servers end a watch after a randomised 30–60 minutes; clients simply re-watch.
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

/// Everything a verb handler needs about the request.
struct Call {
    ctx: Arc<Ctx>,
    identity: Identity,
    kind: &'static Kind,
    namespace: String,
    params: Params,
    parts: Parts,
}

pub(crate) async fn resource(
    ctx: Arc<Ctx>,
    identity: Identity,
    req: Request<Incoming>,
    t: Target,
) -> Result<Response<Body>, Error> {
    let params = Params::from_uri(req.uri())?;
    let (parts, body) = req.into_parts();
    let method = parts.method.clone();
    let kind = t.kind;
    let call = Call {
        namespace: t.namespace.clone().unwrap_or_default(),
        ctx,
        identity,
        kind,
        params,
        parts,
    };
    let verb = match (&t.name, t.sub.as_deref(), &method) {
        (None, None, &Method::GET) if call.params.flag("watch") => "watch",
        (None, None, &Method::GET) => "list",
        (None, None, &Method::POST) => "create",
        (None, None, &Method::DELETE) => "deletecollection",
        (Some(_), None, &Method::GET) => "get",
        (Some(_), None, &Method::PUT) => "update",
        (Some(_), None, &Method::PATCH) => "patch",
        (Some(_), None, &Method::DELETE) => "delete",
        (Some(_), Some("status"), _) if kind.status => "status",
        (Some(_), Some("scale"), _) if kind.subresources.iter().any(|s| s.name == "scale") => "scale",
        (Some(_), Some(sub), &Method::POST) if kind.subresources.iter().any(|s| s.name == sub) => {
            "subresource"
        }
        (Some(_), Some(_), _) => return Err(Error::NoRoute),
        _ => return Err(Error::MethodNotAllowed),
    };
    if !matches!(verb, "status" | "scale" | "subresource") && !kind.supports(verb) {
        return Err(Error::MethodNotAllowed);
    }
    // Only list, watch and deletecollection may span all namespaces.
    if kind.namespaced && t.namespace.is_none() && verb == "create" {
        return Err(Error::MethodNotAllowed);
    }
    let name = t.name.unwrap_or_default();
    match verb {
        "watch" => call.watch(),
        "list" => call.list(),
        "get" => call.get(&name),
        "deletecollection" => call.delete_collection(body).await,
        "create" if kind.handling != Handling::Stored => {
            let body = call.body(body).await?;
            reviews::review(&call.ctx, kind, &call.namespace, &call.identity, body)
        }
        "create" => call.create(body).await,
        "update" => call.update(&name, body, StatusMode::Ignore).await,
        "patch" => call.patch(&name, body, StatusMode::Ignore).await,
        "delete" => call.delete(&name, body).await,
        "scale" => call.scale(&name, body, method).await,
        "status" => match method {
            Method::GET => call.get(&name),
            Method::PUT => call.update(&name, body, StatusMode::Only).await,
            Method::PATCH => call.patch(&name, body, StatusMode::Only).await,
            _ => Err(Error::MethodNotAllowed),
        },
        _ => {
            let key = call.key(&name);
            let body = call.body(body).await?;
            reviews::token_request(&call.ctx, &key, body, call.params.dry_run()?)
        }
    }
}

/// The opaque `continue` token: the list's revision and the last key returned.
#[derive(Serialize, Deserialize)]
struct ContinueToken {
    v: String,
    rv: u64,
    ns: String,
    name: String,
    /// Objects after the last key in the list's snapshot (`remainingItemCount`), counted on the first page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    left: Option<u64>,
}

fn encode_continue(rv: u64, key: &Key, left: Option<u64>) -> String {
    let token = ContinueToken {
        v: "meta.k8s.io/v1".into(),
        rv,
        ns: key.0.clone(),
        name: key.1.clone(),
        left,
    };
    B64URL.encode(serde_json::to_vec(&token).unwrap_or_default())
}

fn decode_continue(s: &str) -> Result<ContinueToken, Error> {
    let bytes = B64URL
        .decode(s.trim_end_matches('='))
        .map_err(|e| Error::BadRequest(format!("continue key is not valid: {e}")))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::BadRequest(format!("continue key is not valid: {e}")))
}

impl Call {
    fn key(&self, name: &str) -> Key {
        (
            if self.kind.namespaced {
                self.namespace.clone()
            } else {
                String::new()
            },
            name.to_string(),
        )
    }

    /// Write options for a create/update/patch; `options` names the request's options kind in errors.
    fn opts(&self, status: StatusMode, options: &str) -> Result<WriteOpts, Error> {
        Ok(WriteOpts {
            dry_run: self.params.dry_run()?,
            status,
            track: Track::Update(self.writer(status, options)?),
            fields: FieldCheck::new(FieldValidation::parse(self.params.get("fieldValidation"))?),
        })
    }

    /// The field manager: `fieldManager`, else the User-Agent up to its first `/`, as kube-apiserver.
    fn writer(&self, status: StatusMode, options: &str) -> Result<Writer, Error> {
        let invalid =
            |detail: String| Error::invalid(&format!("{options}.meta.k8s.io"), "", "fieldManager", detail);
        let manager = match self.params.get("fieldManager").filter(|m| !m.is_empty()) {
            Some(m) if m.len() > ssa::MAX_MANAGER_LEN => {
                return Err(invalid(format!(
                    "Too long: may not be more than {} bytes",
                    ssa::MAX_MANAGER_LEN
                )));
            }
            Some(m) => match m.char_indices().find(|(_, c)| c.is_control()) {
                Some((i, c)) => {
                    return Err(invalid(format!(
                        "Invalid value: {m:?}: invalid character U+{:04X} (at position {i})",
                        c as u32
                    )));
                }
                None => m.to_string(),
            },
            None => {
                let agent = self.parts.headers.get(http::header::USER_AGENT);
                let product = agent.and_then(|a| a.to_str().ok()).unwrap_or_default();
                let mut m = String::new();
                for c in product
                    .split('/')
                    .next()
                    .unwrap_or_default()
                    .chars()
                    .filter(|c| !c.is_control())
                {
                    if m.len() + c.len_utf8() > ssa::MAX_MANAGER_LEN {
                        break;
                    }
                    m.push(c);
                }
                m
            }
        };
        Ok(Writer {
            manager,
            subresource: (status == StatusMode::Only).then_some("status"),
        })
    }

    fn filter(&self) -> Result<Filter, Error> {
        Ok(Filter {
            namespace: (self.kind.namespaced && !self.namespace.is_empty()).then(|| self.namespace.clone()),
            labels: LabelSelector::parse(self.params.get("labelSelector").unwrap_or_default())?,
            fields: FieldSelector::parse(self.kind, self.params.get("fieldSelector").unwrap_or_default())?,
        })
    }

    async fn body(&self, body: Incoming) -> Result<Value, Error> {
        let bytes = read_body(body, &self.parts.headers, self.ctx.cfg.max_body_bytes).await?;
        decode(&bytes, content_type(&self.parts.headers))
    }

    fn table_include(&self) -> Result<Option<Include>, Error> {
        if wants_table(&self.parts.headers) {
            Include::parse(self.params.get("includeObject")).map(Some)
        } else {
            Ok(None)
        }
    }

    /// One object, as JSON or as a one-row Table (a custom object under the version asked for).
    fn respond_obj(&self, code: StatusCode, obj: &Obj) -> Result<Response<Body>, Error> {
        let converted = crd::served(self.kind, obj);
        let obj = converted.as_ref().unwrap_or(obj);
        match self.table_include()? {
            Some(include) => {
                let t = table::table(
                    self.kind,
                    [obj],
                    include,
                    json!({"resourceVersion": obj.rv.to_string()}),
                );
                Ok(respond_json(code, &t))
            }
            None => Ok(respond_bytes(code, "application/json", obj.raw.clone())),
        }
    }

    /// A written object, with a `Warning` header per field problem `fieldValidation=Warn` let through.
    fn respond_written(
        &self,
        code: StatusCode,
        obj: &Obj,
        opts: &WriteOpts,
    ) -> Result<Response<Body>, Error> {
        let mut resp = self.respond_obj(code, obj)?;
        for w in opts.fields.warnings.lock().iter() {
            let value = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
            if let Ok(v) = http::HeaderValue::from_str(&value) {
                resp.headers_mut().append(http::header::WARNING, v);
            }
        }
        Ok(resp)
    }

    fn get(&self, name: &str) -> Result<Response<Body>, Error> {
        let obj = self
            .ctx
            .store
            .get_obj(self.kind.id(), &self.key(name))
            .ok_or_else(|| Error::NotFound {
                resource: self.kind.qualified_plural(),
                name: name.to_string(),
            })?;
        self.respond_obj(StatusCode::OK, &obj)
    }

    fn list(&self) -> Result<Response<Body>, Error> {
        let filter = self.filter()?;
        let limit = self.params.number::<usize>("limit")?;
        let store = &self.ctx.store;
        let (at, after, left) = match self.params.get("continue") {
            Some(token) => {
                let t = decode_continue(token)?;
                (Some(t.rv), Some((t.ns, t.name)), t.left)
            }
            None => match (
                self.params.get("resourceVersionMatch"),
                self.params.number::<u64>("resourceVersion")?,
            ) {
                (Some("Exact"), Some(rv)) => (Some(rv), None, None),
                _ => (None, None, None),
            },
        };
        // A continued list knows how many objects were left; the page's own count follows from it.
        let page = match left {
            Some(_) => store.list_page(self.kind.id(), &filter, after.as_ref(), limit, at),
            None => store.list_page_counted(self.kind.id(), &filter, after.as_ref(), limit, at),
        };
        let mut page = match page {
            Err(Error::Expired { .. }) if after.is_some() => {
                // As the real server: 410 with a token that continues (inconsistently) from the same key.
                let fresh = after.as_ref().map(|k| encode_continue(store.revision(), k, None));
                return Err(Error::Expired {
                    message: EXPIRED_CONTINUE.into(),
                    fresh_continue: fresh,
                });
            }
            other => other?,
        };
        let mut meta = json!({"resourceVersion": page.rv.to_string()});
        if let (Some(left), Some(_)) = (left, &page.next) {
            page.remaining = Some(left.saturating_sub(page.items.len() as u64));
        }
        if let Some(next) = &page.next {
            meta["continue"] = json!(encode_continue(page.rv, next, page.remaining));
        }
        if let Some(remaining) = page.remaining {
            meta["remainingItemCount"] = json!(remaining);
        }
        if let Some(include) = self.table_include()? {
            let t = table::table(self.kind, page.items.iter().map(|o| &**o), include, meta);
            return Ok(respond_json(StatusCode::OK, &t));
        }
        Ok(respond_bytes(
            StatusCode::OK,
            "application/json",
            list_body(self.kind, &meta, &page.items),
        ))
    }

    fn watch(&self) -> Result<Response<Body>, Error> {
        let rv = self.params.get("resourceVersion");
        let send_initial = self.params.flag("sendInitialEvents");
        let from = match rv {
            None | Some("0") => WatchFrom::Snapshot,
            _ if send_initial => WatchFrom::Snapshot,
            Some(rv) => WatchFrom::After(
                rv.parse()
                    .map_err(|_| Error::BadRequest(format!("invalid resourceVersion {rv:?}")))?,
            ),
        };
        let timeout = self
            .params
            .number::<u64>("timeoutSeconds")?
            .map_or(DEFAULT_WATCH_TIMEOUT, Duration::from_secs);
        let req = WatchRequest {
            kind: self.kind,
            filter: self.filter()?,
            from,
            bookmarks: self.params.flag("allowWatchBookmarks"),
            initial_events_end: send_initial,
            timeout,
            table: self.table_include()?,
        };
        Ok(watch::respond(self.ctx.clone(), req))
    }

    /// RBAC escalation prevention on Role/ClusterRole/binding writes, under `enforce_rbac`. The old
    /// object is the stored one, if any.
    fn guard(&self, name: &str, new: &Value) -> Result<(), Error> {
        if !self.ctx.cfg.enforce_rbac || !escalation::applies(self.kind) {
            return Ok(());
        }
        let old = self
            .ctx
            .store
            .get_obj(self.kind.id(), &self.key(name))
            .map(|o| o.value());
        let write = escalation::Write {
            kind: self.kind,
            namespace: &self.namespace,
            url_name: name,
            new,
            old: old.as_ref(),
        };
        escalation::check(&self.ctx.store, &self.identity, &write)
    }

    async fn create(self, body: Incoming) -> Result<Response<Body>, Error> {
        let obj = self.body(body).await?;
        self.guard("", &obj)?;
        let opts = self.opts(StatusMode::Ignore, "CreateOptions")?;
        let stored = write::create(&self.ctx.store, self.kind, &self.namespace, obj, &opts)?;
        self.respond_written(StatusCode::CREATED, &stored, &opts)
    }

    async fn update(self, name: &str, body: Incoming, status: StatusMode) -> Result<Response<Body>, Error> {
        let obj = self.body(body).await?;
        self.guard(name, &obj)?;
        let opts = self.opts(status, "UpdateOptions")?;
        let stored = write::update(&self.ctx.store, self.kind, &self.key(name), &opts, |_| Ok(obj))?;
        self.respond_written(StatusCode::OK, &stored, &opts)
    }

    async fn patch(self, name: &str, body: Incoming, status: StatusMode) -> Result<Response<Body>, Error> {
        let ptype = PatchType::from_content_type(content_type(&self.parts.headers))?;
        let bytes = read_body(body, &self.parts.headers, self.ctx.cfg.max_body_bytes).await?;
        let p = patch::decode_patch(ptype, &bytes)?;
        let (store, kind, key) = (&self.ctx.store, self.kind, self.key(name));
        let opts = self.opts(status, "PatchOptions")?;
        if self.ctx.cfg.enforce_rbac && escalation::applies(kind) {
            // An applied configuration states the rules and roleRef whole (both are atomic in RBAC's schema).
            let patched = match store.get_obj(kind.id(), &key) {
                Some(cur) if ptype != PatchType::Apply => {
                    patch::apply(kind.kind, name, ptype, &cur.value(), &p)?
                }
                _ => p.clone(),
            };
            self.guard(name, &patched)?;
        }
        if ptype == PatchType::Apply {
            return self.apply(name, p, opts).await;
        }
        if ptype == PatchType::Strategic && kind.custom.is_some() {
            // Custom resources have no patch strategies, so kube-apiserver refuses the media type.
            return Err(Error::UnsupportedMediaType(
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
                    .into(),
            ));
        }
        if self.params.get("force").is_some() {
            return Err(Error::invalid(
                "PatchOptions.meta.k8s.io",
                "",
                "force",
                "Forbidden: may not be specified for non-apply patch",
            ));
        }
        let stored = write::update(store, kind, &key, &opts, |cur| {
            patch::apply(kind.kind, name, ptype, cur, &p)
        })?;
        self.respond_written(StatusCode::OK, &stored, &opts)
    }

    /// GET, PUT or PATCH of `/scale`.
    async fn scale(self, name: &str, body: Incoming, method: Method) -> Result<Response<Body>, Error> {
        let (store, key) = (&self.ctx.store, self.key(name));
        let dry_run = self.params.dry_run()?;
        let scale = match method {
            Method::GET => {
                let obj = store
                    .get_obj(self.kind.id(), &key)
                    .ok_or_else(|| Error::NotFound {
                        resource: self.kind.qualified_plural(),
                        name: name.to_string(),
                    })?;
                scale::scale_of(&obj.value())
            }
            Method::PUT => {
                let body = self.body(body).await?;
                scale::write(store, self.kind, &key, &body, None, dry_run)?
            }
            Method::PATCH => {
                let ptype = PatchType::from_content_type(content_type(&self.parts.headers))?;
                let bytes = read_body(body, &self.parts.headers, self.ctx.cfg.max_body_bytes).await?;
                let p = patch::decode_patch(ptype, &bytes)?;
                scale::write(store, self.kind, &key, &p, Some(ptype), dry_run)?
            }
            _ => return Err(Error::MethodNotAllowed),
        };
        Ok(respond_json(StatusCode::OK, &scale))
    }

    /// Server-side apply: creates a missing object (201) or merges into the live one with field ownership.
    async fn apply(
        &self,
        name: &str,
        config: serde_json::Value,
        mut opts: WriteOpts,
    ) -> Result<Response<Body>, Error> {
        let Track::Update(writer) = std::mem::replace(&mut opts.track, Track::Applied) else {
            return Err(Error::Internal("apply without a field manager".into()));
        };
        if self.params.get("fieldManager").is_none_or(|m| m.is_empty()) {
            return Err(Error::invalid(
                "PatchOptions.meta.k8s.io",
                "",
                "fieldManager",
                "Required value: is required for apply patch",
            ));
        }
        let force = self.params.flag("force");
        let (store, kind, key) = (&self.ctx.store, self.kind, self.key(name));
        if store.get_obj(kind.id(), &key).is_none() {
            let mut obj = config;
            if let Some(meta) = obj.as_object_mut() {
                let meta = meta.entry("metadata").or_insert_with(|| json!({}));
                if let Some(meta) = meta.as_object_mut() {
                    match meta.get("name").and_then(|n| n.as_str()) {
                        Some(other) if other != name => {
                            return Err(Error::BadRequest(format!(
                                "the name of the object ({other}) does not match the name on the URL ({name})"
                            )));
                        }
                        _ => {
                            meta.insert("name".into(), json!(name));
                        }
                    }
                }
            }
            let obj = ssa::apply(kind, None, &obj, &writer, force)?;
            let stored = write::create(store, kind, &self.namespace, obj, &opts)?;
            return self.respond_written(StatusCode::CREATED, &stored, &opts);
        }
        let stored = write::update(store, kind, &key, &opts, |cur| {
            ssa::apply(kind, Some(cur), &config, &writer, force)
        })?;
        self.respond_written(StatusCode::OK, &stored, &opts)
    }

    /// `DeleteOptions` from the body, or from query parameters when the body is empty.
    async fn delete_opts(&self, body: Incoming) -> Result<DeleteOpts, Error> {
        let bytes = read_body(body, &self.parts.headers, self.ctx.cfg.max_body_bytes).await?;
        let options = if bytes.iter().all(u8::is_ascii_whitespace) {
            let mut options = json!({});
            for field in ["propagationPolicy", "orphanDependents"] {
                if let Some(v) = self.params.get(field) {
                    options[field] = json!(v);
                }
            }
            options
        } else {
            decode(&bytes, content_type(&self.parts.headers))?
        };
        DeleteOpts::parse(&options, self.params.dry_run()?)
    }

    /// The object (marked, or for kinds that return it, removed) or a `Status` naming what went.
    async fn delete(self, name: &str, body: Incoming) -> Result<Response<Body>, Error> {
        let opts = self.delete_opts(body).await?;
        let outcome = delete::delete(&self.ctx.store, self.kind, &self.key(name), &opts)?;
        match outcome {
            Outcome::Pending(obj) => {
                let code = if opts.orphan_dependents_false {
                    StatusCode::ACCEPTED
                } else {
                    StatusCode::OK
                };
                self.respond_obj(code, &obj)
            }
            Outcome::Removed(obj) if self.kind.returns_deleted => self.respond_obj(StatusCode::OK, &obj),
            Outcome::Removed(obj) => {
                let mut details = json!({"name": name, "kind": self.kind.plural, "uid": obj.uid});
                if !self.kind.group.is_empty() {
                    details["group"] = json!(self.kind.group);
                }
                let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details});
                Ok(respond_json(StatusCode::OK, &status))
            }
        }
    }

    async fn delete_collection(self, body: Incoming) -> Result<Response<Body>, Error> {
        let opts = self.delete_opts(body).await?;
        let deleted = delete::delete_collection(&self.ctx.store, self.kind, &self.filter()?, &opts)?;
        let meta = json!({"resourceVersion": self.ctx.store.revision().to_string()});
        Ok(respond_bytes(
            StatusCode::OK,
            "application/json",
            list_body(self.kind, &meta, &deleted),
        ))
    }
}

const EXPIRED_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. \
    You can start a new list without the continue parameter, or use the continue token in this response to retrieve \
    the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that \
    were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// `{"kind":"<Kind>List","apiVersion":…,"metadata":…,"items":[…]}` from pre-serialized objects, without
/// re-parsing them; items carry no `kind` or `apiVersion`, as in the real server's lists.
fn list_body(kind: &Kind, meta: &Value, items: &[Arc<Obj>]) -> bytes::Bytes {
    let size = items.iter().map(|o| o.raw.len() + 1).sum::<usize>() + 256;
    let mut buf = BytesMut::with_capacity(size);
    let text = |v: &str| serde_json::to_string(v).unwrap_or_default();
    let meta = serde_json::to_string(meta).unwrap_or_default();
    let head = format!(
        "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{meta},\"items\":[",
        text(&format!("{}List", kind.kind)),
        text(&kind.api_version()),
    );
    buf.put_slice(head.as_bytes());
    for (i, obj) in items.iter().enumerate() {
        if i > 0 {
            buf.put_u8(b',');
        }
        for part in obj.item() {
            buf.put_slice(part);
        }
    }
    buf.put_slice(b"]}");
    buf.freeze()
}
