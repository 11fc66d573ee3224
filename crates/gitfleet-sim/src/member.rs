//! One simulated member cluster: its store, its listener on a loopback port, and the request
//! path (faults, authentication, routing to discovery and the API verbs, response shaping,
//! watch streams). The listener stops accepting while the member is down and rebinds the same
//! address when it comes back.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use super::api::{self, DeleteOptions, Filter, ListOptions, Target, WriteOptions};
use super::clock;
use super::discovery;
use super::faults::FaultState;
use super::fleet_file::{Faults, MemberSpec};
use super::http::{self, Body, Handler, Request, Response};
use super::patch::{strip_directives, PatchType};
use super::protobuf::{self, ProtobufError};
use super::schema;
use super::status::ApiError;
use super::store::{Event, EventType, Missed, Store};
use super::table::{self, Shape};

/// A running member's state, shared by its listener, its connections and its controllers.
pub struct Member {
    pub name: String,
    pub context: String,
    pub token: String,
    pub anonymous_auth: bool,
    pub kubernetes_version: String,
    pub workload_delay: Duration,
    pub addr: SocketAddr,
    /// Shared with the watches that follow its changes.
    pub store: Arc<Mutex<Store>>,
    pub faults: Mutex<FaultState>,
    /// True while the member is down or shutting down: connections close, the port is released.
    pub stopped: watch::Sender<bool>,
    /// Every request it received, faulted ones included (benchmarks and tests count them).
    pub requests: RequestCounts,
}

/// Requests a member received, by whether they could change something.
#[derive(Debug, Default)]
pub struct RequestCounts {
    /// GET, HEAD, OPTIONS (reads, lists and watches).
    pub reads: std::sync::atomic::AtomicU64,
    /// POST, PUT, PATCH, DELETE: every request that could change the store, whether or not it
    /// did (a server-side apply of what is already there counts).
    pub writes: std::sync::atomic::AtomicU64,
}

impl RequestCounts {
    fn count(&self, method: &str) {
        use std::sync::atomic::Ordering::Relaxed;
        match method {
            "GET" | "HEAD" | "OPTIONS" => self.reads.fetch_add(1, Relaxed),
            _ => self.writes.fetch_add(1, Relaxed),
        };
    }

    /// `(reads, writes)` so far.
    pub fn get(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.reads.load(Relaxed), self.writes.load(Relaxed))
    }
}

impl Member {
    pub fn new(
        spec: &MemberSpec,
        token: String,
        anonymous_auth: bool,
        version: String,
        addr: SocketAddr,
        seed: u64,
    ) -> Member {
        Member {
            name: spec.name.clone(),
            context: spec.context_name().to_string(),
            token,
            anonymous_auth,
            kubernetes_version: version,
            workload_delay: Duration::from_millis(spec.workload_delay_ms),
            addr,
            store: Arc::new(Mutex::new(Store::new(&format!("{}/{seed}", spec.name)))),
            faults: Mutex::new(FaultState::new(spec.faults.clone(), seed ^ fnv(&spec.name))),
            stopped: watch::channel(spec.faults.down).0,
            requests: RequestCounts::default(),
        }
    }

    pub fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn current_faults(&self) -> Faults {
        self.faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .faults
            .clone()
    }

    /// Replaces the faults; `down` takes effect at once.
    pub fn set_faults(&self, faults: Faults) {
        let down = faults.down;
        self.faults.lock().unwrap_or_else(|e| e.into_inner()).faults = faults;
        self.stopped.send_replace(down);
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Accepts connections until shutdown; while the member is down the port is closed.
pub async fn listen(member: Arc<Member>, first: TcpListener, mut shutdown: watch::Receiver<bool>) {
    let handler: Handler = {
        let m = member.clone();
        Arc::new(move |req| {
            let m = m.clone();
            Box::pin(async move { handle(&m, req).await })
        })
    };
    let mut listener = Some(first);
    let mut stopped = member.stopped.subscribe();
    loop {
        if *shutdown.borrow() {
            return;
        }
        if *stopped.borrow_and_update() {
            listener = None;
            tokio::select! {
                _ = stopped.changed() => {}
                _ = shutdown.changed() => return,
            }
            continue;
        }
        let l = match listener.take() {
            Some(l) => l,
            None => match TcpListener::bind(member.addr).await {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(member = %member.name, addr = %member.addr, "cannot listen again: {e}; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                        _ = shutdown.changed() => return,
                    }
                    continue;
                }
            },
        };
        let accepted = tokio::select! {
            a = l.accept() => Some(a),
            _ = stopped.changed() => None,
            _ = shutdown.changed() => return,
        };
        listener = Some(l);
        if let Some(Ok((stream, _))) = accepted {
            let rx = member.stopped.subscribe();
            tokio::spawn(http::serve_connection(
                stream,
                handler.clone(),
                rx,
                http::Limits::default(),
            ));
        }
    }
}

/// One request, end to end.
pub async fn handle(member: &Member, req: Request) -> Response {
    member.requests.count(&req.method);
    let (latency, injected, garbage) = {
        let mut f = member.faults.lock().unwrap_or_else(|e| e.into_inner());
        (f.faults.latency_ms, f.roll(), f.faults.garbage)
    };
    if latency > 0 {
        tokio::time::sleep(Duration::from_millis(latency)).await;
    }
    if garbage {
        return Response::bytes(200, "application/json", b"<html>\x00\xff not JSON".to_vec());
    }
    if let Some(code) = injected {
        return error_response(&ApiError::injected(code));
    }
    if let Err(e) = authenticate(member, &req) {
        return error_response(&e);
    }
    match route(member, &req) {
        Ok(resp) => resp,
        Err(e) => error_response(&e),
    }
}

pub fn error_response(e: &ApiError) -> Response {
    let mut r = Response::json(e.code, &e.to_status());
    if let Some(s) = e.retry_after {
        r = r.with_header("Retry-After", &s.to_string());
    }
    r
}

fn authenticate(member: &Member, req: &Request) -> Result<(), ApiError> {
    match req.header("authorization") {
        Some(h) => {
            let token = h
                .strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
                .map(str::trim);
            if token == Some(member.token.as_str()) {
                Ok(())
            } else {
                Err(ApiError::unauthorized())
            }
        }
        None if member.anonymous_auth => Ok(()),
        None => Err(ApiError::unauthorized()),
    }
}

fn route(member: &Member, req: &Request) -> Result<Response, ApiError> {
    let seg: Vec<&str> = req.segments.iter().map(String::as_str).collect();
    let get = req.method == "GET";
    match seg.as_slice() {
        ["version"] if get => Ok(Response::json(
            200,
            &discovery::version(&member.kubernetes_version),
        )),
        ["healthz" | "livez" | "readyz"] if get => Ok(Response::bytes(
            200,
            "text/plain; charset=utf-8",
            b"ok".to_vec(),
        )),
        ["api"] if get => {
            let store = member.store();
            Ok(match discovery::aggregated_version(req.header("accept")) {
                Some(v) => Response::bytes(
                    200,
                    &discovery::aggregated_content_type(v),
                    discovery::aggregated(&store.registry, true, v)
                        .to_string()
                        .into_bytes(),
                ),
                None => Response::json(200, &discovery::core_versions(&member.addr.to_string())),
            })
        }
        ["apis"] if get => {
            let store = member.store();
            Ok(match discovery::aggregated_version(req.header("accept")) {
                Some(v) => Response::bytes(
                    200,
                    &discovery::aggregated_content_type(v),
                    discovery::aggregated(&store.registry, false, v)
                        .to_string()
                        .into_bytes(),
                ),
                None => Response::json(200, &discovery::group_list(&store.registry)),
            })
        }
        ["apis", group] if get => {
            let store = member.store();
            discovery::group(&store.registry, group)
                .map(|g| Response::json(200, &g))
                .ok_or_else(ApiError::no_route)
        }
        ["openapi", "v3"] if get => {
            let store = member.store();
            Ok(Response::json(
                200,
                &discovery::openapi_root(&store.registry),
            ))
        }
        ["openapi", "v3", "api", v] if get => openapi(member, "", v),
        ["openapi", "v3", "apis", g, v] if get => openapi(member, g, v),
        ["api", "v1", rest @ ..] => resource(member, req, "", "v1", rest),
        ["apis", g, v, rest @ ..] => resource(member, req, g, v, rest),
        _ => Err(ApiError::no_route()),
    }
}

fn openapi(member: &Member, group: &str, version: &str) -> Result<Response, ApiError> {
    let store = member.store();
    discovery::openapi_group_version(&store.registry, group, version)
        .map(|d| Response::json(200, &d))
        .ok_or_else(ApiError::no_route)
}

fn resource(
    member: &Member,
    req: &Request,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<Response, ApiError> {
    let target = {
        let store = member.store();
        if rest.is_empty() {
            if req.method != "GET" {
                return Err(ApiError::no_route());
            }
            return discovery::resource_list(&store.registry, group, version)
                .map(|l| Response::json(200, &l))
                .ok_or_else(ApiError::no_route);
        }
        parse_target(&store, group, version, rest)?
    };
    let now = clock::now_rfc3339();
    let shape = table::shape(req.header("accept"));
    let dry_run = match req.query("dryRun") {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Invalid dry run value: {other:?}"
            )))
        }
    };
    let manager = req.query("fieldManager").filter(|m| !m.is_empty());
    let write = WriteOptions {
        dry_run,
        manager: manager
            .map(String::from)
            .unwrap_or_else(|| default_manager(req)),
        manager_given: manager.is_some(),
        force: req.query("force") == Some("true"),
        now: now.clone(),
    };
    let list_opts = ListOptions {
        label_selector: req.query("labelSelector").map(String::from),
        field_selector: req.query("fieldSelector").map(String::from),
        limit: req.query("limit").and_then(|l| l.parse().ok()),
        continue_token: req.query("continue").map(String::from),
    };
    let has_name = target.name.is_some();
    // The body of a create or replace, decoded from JSON, YAML or (kubectl's typed
    // generators) Kubernetes protobuf.
    let mut object = None;
    let strict = req.query("fieldValidation") == Some("Strict");
    if matches!(req.method.as_str(), "POST" | "PUT") {
        let mut body = decode_body(req)?;
        if target.subresource.is_none() && !target.rt.is_custom() {
            let rt = &target.rt;
            let unknown = schema::unknown_fields(&rt.group, &rt.version, &rt.kind, &body);
            if !unknown.is_empty() {
                if strict {
                    return Err(schema::strict_error(&rt.version, &rt.kind, &unknown));
                }
                // Decoding into the Go type drops what it does not know.
                schema::remove(&mut body, &unknown);
            }
        }
        object = Some(body);
    }
    if target.rt.review {
        // No RBAC in the simulator: every authenticated request is allowed, as under the
        // AlwaysAllow authorizer, which gives no reason.
        if req.method != "POST" || target.name.is_some() {
            return Err(ApiError::method_not_allowed(
                &req.method,
                &target.rt.group,
                &target.rt.plural,
            ));
        }
        let mut review = object.take().unwrap_or_default();
        if !review.is_object() {
            return Err(ApiError::bad_request("the body must be an object"));
        }
        review["apiVersion"] = json!(target.rt.api_version());
        review["kind"] = json!(target.rt.kind);
        review["metadata"] = json!({"creationTimestamp": null});
        review["status"] = json!({"allowed": true});
        return Ok(Response::json(201, &review));
    }
    if target.subresource.as_deref() == Some("token") {
        if req.method != "POST" {
            return Err(ApiError::method_not_allowed(
                &req.method,
                &target.rt.group,
                "serviceaccounts/token",
            ));
        }
        let request = object.take().unwrap_or_default();
        return token_request(member, &target, request);
    }
    if target.subresource.as_deref() == Some("log") {
        if req.method != "GET" {
            return Err(ApiError::method_not_allowed(
                &req.method,
                &target.rt.group,
                "pods/log",
            ));
        }
        let log = api::pod_log(&member.store(), &target, req.query("container"))?;
        return Ok(Response::bytes(200, "text/plain", log.into_bytes()));
    }
    if target.subresource.as_deref() == Some("eviction") {
        if req.method != "POST" {
            return Err(ApiError::method_not_allowed(
                &req.method,
                &target.rt.group,
                "pods/eviction",
            ));
        }
        let eviction = object.take().unwrap_or_default();
        let (code, status) = api::evict(&mut member.store(), &target, &eviction, &now)?;
        return Ok(Response::json(code, &status));
    }
    match (req.method.as_str(), has_name) {
        ("GET", _) if is_watch(req) => watch(member, req, &target, shape),
        ("GET", true) => {
            let obj = api::get(&member.store(), &target)?;
            Ok(shaped_one(&target, obj, shape, req))
        }
        ("GET", false) => {
            let store = member.store();
            let list = api::list_refs(&store, &target, &list_opts)?;
            Ok(match shape {
                Shape::Object => Response::bytes(200, "application/json", list.to_json()),
                _ => shaped_list(&target, list.to_value(), shape, req),
            })
        }
        ("POST", false) => {
            let body = object.take().unwrap_or_default();
            let (code, obj) = api::create(&mut member.store(), &target, body, &write)?;
            Ok(Response::json(code, &obj))
        }
        ("PUT", true) => {
            let body = object.take().unwrap_or_default();
            let (code, obj) = api::update(&mut member.store(), &target, body, &write)?;
            Ok(Response::json(code, &obj))
        }
        ("PATCH", true) => {
            let ct = req.header("content-type").unwrap_or("");
            let kind = PatchType::from_content_type(ct)
                .ok_or_else(|| ApiError::unsupported_media_type(ct, PATCH_TYPES))?;
            if target.subresource.is_none() && !target.rt.is_custom() {
                check_patch_fields(&target, kind, &req.body, strict)?;
            }
            let (code, obj) = api::patch(&mut member.store(), &target, kind, &req.body, &write)?;
            Ok(Response::json(code, &obj))
        }
        ("DELETE", named) => {
            let mut opts = DeleteOptions {
                propagation: req.query("propagationPolicy").map(String::from),
                dry_run,
                ..Default::default()
            };
            if !req.body.is_empty() {
                let body = decode_body(req)?;
                if let Some(p) = body["propagationPolicy"].as_str() {
                    opts.propagation = Some(p.into());
                }
                if body["orphanDependents"] == json!(true) {
                    opts.propagation = Some("Orphan".into());
                }
                if body["dryRun"]
                    .as_array()
                    .is_some_and(|d| d.iter().any(|x| x == "All"))
                {
                    opts.dry_run = true;
                }
                opts.precondition_uid = body["preconditions"]["uid"].as_str().map(String::from);
                opts.precondition_rv = body["preconditions"]["resourceVersion"]
                    .as_str()
                    .map(String::from);
            }
            let (code, obj) = if named {
                api::delete(&mut member.store(), &target, &opts, &now)?
            } else {
                api::delete_collection(&mut member.store(), &target, &list_opts, &opts, &now)?
            };
            Ok(Response::json(code, &obj))
        }
        (m, _) => Err(ApiError::method_not_allowed(
            m,
            &target.rt.group,
            &target.rt.plural,
        )),
    }
}

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

const PATCH_TYPES: &str =
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json";

fn is_watch(req: &Request) -> bool {
    matches!(req.query("watch"), Some("true" | "1"))
}

/// The field manager the API server derives from the user agent when none is given.
fn default_manager(req: &Request) -> String {
    let ua = req.header("user-agent").unwrap_or("");
    let prefix = ua.split('/').next().unwrap_or("").trim();
    if prefix.is_empty() {
        "unknown".into()
    } else {
        prefix.into()
    }
}

/// `POST serviceaccounts/{name}/token` (`kubectl create token`): the simulator has one
/// credential per member, so the token it issues is the member's bearer token, valid for as
/// long as the member runs; the expiration it reports follows `spec.expirationSeconds`
/// (default one hour, as the API server's).
fn token_request(
    member: &Member,
    target: &Target,
    mut request: Value,
) -> Result<Response, ApiError> {
    let sa_target = Target {
        subresource: None,
        ..target.clone()
    };
    let name = sa_target.name.clone().ok_or_else(ApiError::no_route)?;
    let sa = api::get(&member.store(), &sa_target)?;
    if !request.is_object() {
        request = json!({});
    }
    let seconds = request["spec"]["expirationSeconds"]
        .as_i64()
        .unwrap_or(3600);
    if seconds < 600 {
        return Err(ApiError::invalid(
            "authentication.k8s.io",
            "TokenRequest",
            &name,
            &[(
                "spec.expirationSeconds".to_string(),
                format!(
                    "Invalid value: {seconds}: may not specify a duration less than 10 minutes"
                ),
            )],
        ));
    }
    let mut spec = request["spec"].clone();
    if !spec.is_object() {
        spec = json!({});
    }
    spec["expirationSeconds"] = json!(seconds);
    if spec["audiences"].as_array().is_none_or(|a| a.is_empty()) {
        spec["audiences"] = json!(["https://kubernetes.default.svc.cluster.local"]);
    }
    let expires = clock::rfc3339(clock::unix_now() + seconds);
    Ok(Response::json(
        201,
        &json!({
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": sa["metadata"]["namespace"], "creationTimestamp": null},
            "spec": spec,
            "status": {"token": member.token, "expirationTimestamp": expires},
        }),
    ))
}

/// Unknown fields in a patch of a built-in: always an error for server-side apply (the API
/// server cannot type the patch), an error for merge patches under `fieldValidation=Strict`.
/// JSON patches and non-strict merge patches are not checked (a divergence: a real server drops
/// the unknown fields from the result).
fn check_patch_fields(
    target: &Target,
    kind: PatchType,
    body: &[u8],
    strict: bool,
) -> Result<(), ApiError> {
    let rt = &target.rt;
    let checked = match kind {
        PatchType::Apply => true,
        PatchType::Merge | PatchType::Strategic => strict,
        PatchType::Json => false,
    };
    if !checked {
        return Ok(());
    }
    let Ok(mut patch) = parse_json(body) else {
        return Ok(());
    };
    if !patch.is_object() {
        return Ok(());
    }
    if kind == PatchType::Strategic {
        strip_directives(&mut patch);
    }
    // A merge patch need not name its type; the check reads it as one of the target's.
    patch["apiVersion"] = json!(rt.api_version());
    patch["kind"] = json!(rt.kind);
    let unknown = schema::unknown_fields(&rt.group, &rt.version, &rt.kind, &patch);
    if unknown.is_empty() {
        return Ok(());
    }
    Err(match kind {
        PatchType::Apply => schema::apply_error(
            &rt.group,
            &rt.version,
            &rt.kind,
            target.namespace.as_deref().unwrap_or(""),
            target.name.as_deref().unwrap_or(""),
            &unknown,
        ),
        _ => schema::strict_error(&rt.version, &rt.kind, &unknown),
    })
}

/// A request body as JSON, by its content type: JSON, YAML or Kubernetes protobuf.
fn decode_body(req: &Request) -> Result<Value, ApiError> {
    let ct = req.header("content-type").unwrap_or("application/json");
    let base = ct.split(';').next().unwrap_or("").trim();
    match base {
        "application/json" | "application/yaml" | "" => parse_json(&req.body),
        PROTOBUF => protobuf::decode(&req.body).map_err(|e| match e {
            ProtobufError::UnknownKind(_) | ProtobufError::UnknownField { .. } => {
                ApiError::unsupported_media_type_because(ct, &e.to_string())
            }
            _ => {
                ApiError::bad_request(format!("the body of the request could not be decoded: {e}"))
            }
        }),
        _ => Err(ApiError::unsupported_media_type(
            ct,
            "application/json, application/yaml, application/vnd.kubernetes.protobuf",
        )),
    }
}

fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .or_else(|_| gitfleet_kube_text::yaml::from_slice(body))
        .map_err(|e| {
            ApiError::bad_request(format!("the body of the request could not be decoded: {e}"))
        })
}

/// Resolves `[namespaces, ns,] plural [, name [, subresource]]`.
fn parse_target(
    store: &Store,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<Target, ApiError> {
    let reg = &store.registry;
    let lookup = |plural: &str| reg.lookup(group, version, plural);
    let (namespace, rest) = match rest {
        ["namespaces", ns, plural, tail @ ..] if lookup(plural).is_some_and(|r| r.namespaced) => {
            (Some(ns.to_string()), [&[*plural][..], tail].concat())
        }
        _ => (None, rest.to_vec()),
    };
    let (plural, name, sub) = match rest.as_slice() {
        [p] => (*p, None, None),
        [p, n] => (*p, Some(n.to_string()), None),
        [p, n, s] => (*p, Some(n.to_string()), Some(s.to_string())),
        _ => return Err(ApiError::no_route()),
    };
    let rt = lookup(plural).ok_or_else(ApiError::no_route)?;
    if rt.namespaced && namespace.is_none() && name.is_some() {
        return Err(ApiError::no_route());
    }
    if let Some(s) = &sub {
        if !rt.subresources.contains(s) {
            return Err(ApiError::no_route());
        }
    }
    Ok(Target {
        rt,
        namespace,
        name,
        subresource: sub,
    })
}

fn include_object(req: &Request) -> &str {
    req.query("includeObject").unwrap_or("Metadata")
}

fn shaped_one(t: &Target, obj: Value, shape: Shape, req: &Request) -> Response {
    match shape {
        Shape::Object => Response::json(200, &obj),
        Shape::Metadata => Response::json(200, &table::partial_metadata(&obj)),
        Shape::Table if t.subresource.is_none() => {
            let rv = obj["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let tbl = table::table(&t.rt, &[obj], &rv, clock::unix_now(), include_object(req));
            Response::bytes(200, table::TABLE_CONTENT_TYPE, tbl.to_string().into_bytes())
        }
        Shape::Table => Response::json(200, &obj),
    }
}

fn shaped_list(t: &Target, list: Value, shape: Shape, req: &Request) -> Response {
    match shape {
        Shape::Object => Response::json(200, &list),
        Shape::Metadata => Response::json(200, &table::partial_metadata_list(&list)),
        Shape::Table => {
            let items: Vec<Value> = list["items"]
                .as_array()
                .map(|a| a.iter().map(|i| api::present(&t.rt, i)).collect())
                .unwrap_or_default();
            let rv = list["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let mut tbl = table::table(&t.rt, &items, &rv, clock::unix_now(), include_object(req));
            if let Some(c) = list["metadata"].get("continue") {
                tbl["metadata"]["continue"] = c.clone();
            }
            Response::bytes(200, table::TABLE_CONTENT_TYPE, tbl.to_string().into_bytes())
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Watch

/// How often a watch that allows bookmarks gets one: about every minute, as from a real API
/// server (k8s.io/apiserver, storage/cacher: `defaultBookmarkFrequency`), so that a client that
/// cannot bear a quiet minute fails here too.
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);

fn watch(member: &Member, req: &Request, t: &Target, shape: Shape) -> Result<Response, ApiError> {
    let mut t = t.clone();
    let mut field = req.query("fieldSelector").unwrap_or("").to_string();
    if let Some(name) = t.name.take() {
        field = if field.is_empty() {
            format!("metadata.name={name}")
        } else {
            format!("{field},metadata.name={name}")
        };
    }
    let filter = Filter::new(&t, req.query("labelSelector"), Some(&field))?;
    let bookmarks = req.query("allowWatchBookmarks") == Some("true");
    let initial_end_bookmark = req.query("sendInitialEvents") == Some("true");
    let timeout = req
        .query("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|s| *s > 0)
        .unwrap_or(1800);
    let rv_param = req.query("resourceVersion").unwrap_or("");
    let (tx, rx) = mpsc::channel::<Vec<u8>>(256);
    let mut first: Vec<Vec<u8>> = Vec::new();
    let (live, start_rv) = {
        let store = member.store();
        let from_now = rv_param.is_empty() || rv_param == "0" || initial_end_bookmark;
        if from_now {
            let namespace = filter.namespace.as_deref();
            for (k, o) in store.list_stored(&t.rt.group, &t.rt.plural, namespace) {
                if filter.matches(k, o) {
                    let o = o.value();
                    first.push(event_line("ADDED", &present_event(&t, &o, shape, req)));
                }
            }
            if initial_end_bookmark {
                first.push(bookmark_line(&t, store.revision(), true));
            }
            (Some(store.subscribe()), store.revision())
        } else {
            let since: u64 = rv_param.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid resource version {rv_param:?}"))
            })?;
            match store.follow(since) {
                Some((replay, changes)) => {
                    for e in &replay {
                        if let Some(line) = event_for(&t, &filter, e, shape, req) {
                            first.push(line);
                        }
                    }
                    (Some(changes), replay.last().map(|e| e.rv).unwrap_or(since))
                }
                None => {
                    let status = ApiError::gone(format!(
                        "too old resource version: {since} ({})",
                        store.revision()
                    ))
                    .to_status();
                    first.push(event_line("ERROR", &status));
                    (None, since)
                }
            }
        }
    };
    let shape_copy = shape;
    let include = include_object(req).to_string();
    let store = member.store.clone();
    tokio::spawn(async move {
        for line in first {
            if tx.send(line).await.is_err() {
                return;
            }
        }
        let Some(mut live) = live else {
            return;
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
        let mut last_rv = start_rv;
        let mut tick = tokio::time::interval(BOOKMARK_EVERY);
        tick.tick().await;
        let fake_req = Request::new("GET", &format!("/?includeObject={include}"), &[], &[]);
        loop {
            tokio::select! {
                events = live.next(&store) => match events {
                    Ok(events) => {
                        for e in events {
                            last_rv = e.rv;
                            if let Some(line) = event_for(&t, &filter, &e, shape_copy, &fake_req) {
                                if tx.send(line).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                    // The log dropped what this watch had not sent yet.
                    Err(Missed::Expired) => {
                        let status = ApiError::gone("the watch fell behind; list again").to_status();
                        let _ = tx.send(event_line("ERROR", &status)).await;
                        return;
                    }
                    Err(Missed::Closed) => return,
                },
                _ = tick.tick(), if bookmarks => {
                    if tx.send(bookmark_line(&t, last_rv, false)).await.is_err() {
                        return;
                    }
                }
                _ = tokio::time::sleep_until(deadline) => return,
                _ = tx.closed() => return,
            }
        }
    });
    Ok(Response {
        status: 200,
        headers: vec![(
            "Content-Type".into(),
            if shape == Shape::Table {
                table::TABLE_CONTENT_TYPE.into()
            } else {
                "application/json".into()
            },
        )],
        body: Body::Stream(rx),
    })
}

fn present_event(t: &Target, obj: &Value, shape: Shape, req: &Request) -> Value {
    let o = api::present(&t.rt, obj);
    match shape {
        Shape::Object => o,
        Shape::Metadata => table::partial_metadata(&o),
        Shape::Table => {
            let rv = o["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or("")
                .to_string();
            table::table(&t.rt, &[o], &rv, clock::unix_now(), include_object(req))
        }
    }
}

/// The line a store event becomes for this watch, if it concerns it. Objects entering or
/// leaving the selector show up as ADDED or DELETED, as on a real server.
fn event_for(
    t: &Target,
    filter: &Filter,
    e: &Event,
    shape: Shape,
    req: &Request,
) -> Option<Vec<u8>> {
    if e.key.group != t.rt.group || e.key.resource != t.rt.plural {
        return None;
    }
    let now_matches = filter.matches(&e.key, &e.object);
    let kind = match e.kind {
        EventType::Added | EventType::Deleted => now_matches.then_some(e.kind.as_str())?,
        EventType::Modified => {
            let was = (e.old.as_ref()).is_some_and(|o| filter.matches(&e.key, o));
            match (was, now_matches) {
                (true, true) => "MODIFIED",
                (false, true) => "ADDED",
                (true, false) => "DELETED",
                (false, false) => return None,
            }
        }
    };
    Some(event_line(
        kind,
        &present_event(t, &e.object.value(), shape, req),
    ))
}

fn event_line(kind: &str, object: &Value) -> Vec<u8> {
    let mut line = json!({"type": kind, "object": object})
        .to_string()
        .into_bytes();
    line.push(b'\n');
    line
}

fn bookmark_line(t: &Target, rv: u64, initial_end: bool) -> Vec<u8> {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    event_line(
        "BOOKMARK",
        &json!({"kind": t.rt.kind, "apiVersion": t.rt.api_version(), "metadata": meta}),
    )
}
