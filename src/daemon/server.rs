//! The daemon's HTTP API on `--listen`: status for people and tools, the inventory and schedule
//! that `gitfleet plan --server` reads, health probes, and the git webhook that makes the daemon
//! look at the branch at once.
//!
//! - `GET /healthz`, `GET /readyz` (ready once the first reconcile finished, and not while no
//!   commit may be served, nor while the git source has failed `--ready-fetch-failures`
//!   fetches in a row; a follower of `--state kubernetes`, once it knows who leads)
//! - `GET /metrics` (Prometheus text)
//! - `GET /api/v1/summary` (the fleet in counts), `GET /api/v1/updateruns/<name>` and the
//!   placements query: [`super::status_api`], which also puts ETags on every document
//! - `GET /api/v1/placements`, `GET /api/v1/placements/<id>` (`crp/NAME`, `rp/NS/NAME`, …);
//!   `GET /api/v1/placements?unready`: only the placements not ready (something applied,
//!   removed or waiting, a cluster not available or due for a re-check), a small answer to poll
//!   on a large fleet; `?limit=N`: at most N placements, with how many matched (`matched`)
//! - `GET /api/v1/inventory` (the inventory file format), `GET /api/v1/schedule`
//! - `POST /hooks/git` with `X-Hub-Signature-256` or `X-Gitlab-Token` (401 otherwise)
//!
//! With `--token-file`, `/api/v1` and the dashboard need its token ([`super::access`]); the
//! probes, `/metrics` and the webhook never do.
//!
//! Errors are JSON problem bodies of our own, `{"error": "..."}`, never Kubernetes `Status`.
//!
//! axum routes, hyper serves HTTP/1.1. The listener may face an untrusted network (a webhook
//! from a Git host), so every resource a client can hold is bounded ([`Limits`]): the time to
//! send a request head (also how long an idle keep-alive connection stays open), the head's
//! size, the body's size, the time of a whole request, and the number of open connections. At
//! that number a new client closes the oldest idle connection rather than wait in the kernel's
//! backlog, so that idle connections, however many, never delay a kubelet's probe.
//!
//! What it must not know: how the loop reconciles. It reads what the loop publishes (the
//! [`Status`] behind a mutex, the [`Metrics`]) and can only nudge the loop through `wake`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::metrics::Metrics;
use super::Status;

/// What a client may hold of the server.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Time to send a request's head once the connection waits for one: a slow or silent client
    /// and an idle keep-alive connection are closed after it.
    pub header_read_timeout: Duration,
    /// Largest request head (request line and headers); more gets 431.
    pub header_bytes: usize,
    /// Largest request body; more gets 413. A webhook payload fits.
    pub body_bytes: usize,
    /// Time of a whole request, body included; more gets 408.
    pub request_timeout: Duration,
    /// Open connections. Past it a new client closes the oldest idle connection (waiting for a
    /// request head, or kept alive between requests), and waits only while every one serves a
    /// request. HTTP/1.1 serves one request at a time per connection, so this also caps
    /// requests in flight.
    pub connections: usize,
    /// How long a shutdown waits for requests in flight before it drops them.
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read_timeout: Duration::from_secs(10),
            header_bytes: 16 * 1024,
            body_bytes: 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            connections: 1024,
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

/// What the handlers read, and the one thing they may do: wake the loop.
#[derive(Clone)]
pub struct Api {
    pub status: Arc<Mutex<Status>>,
    pub metrics: Arc<Metrics>,
    /// The webhook secret; `None` turns `POST /hooks/git` off (404).
    pub webhook_secret: Option<Arc<[u8]>>,
    /// Nudges the reconcile loop to look at the branch now.
    pub wake: mpsc::UnboundedSender<()>,
    /// `/readyz` fails once this many fetches of the git source failed in a row (0: never).
    pub ready_fetch_failures: u32,
    /// The token of `/api/v1` and the dashboard (`--token-file`, [`super::access`]); `None`:
    /// both are open to whoever reaches the listener.
    pub token: Option<Arc<[u8]>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the HTTP server on {addr} stopped unexpectedly: {why}")]
    Ended { addr: SocketAddr, why: String },
}

pub(super) fn problem(code: StatusCode, message: &str) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        json!({ "error": message }).to_string(),
    )
        .into_response()
}

pub(super) fn json_ok(value: &impl serde::Serialize) -> Response {
    match serde_json::to_string(value) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => problem(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

fn text_ok(body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, "text/plain")], body).into_response()
}

pub(super) fn status_of(api: &Api) -> std::sync::MutexGuard<'_, Status> {
    api.status.lock().unwrap_or_else(|e| e.into_inner())
}

async fn healthz() -> Response {
    text_ok("ok")
}

async fn readyz(State(api): State<Api>) -> Response {
    let st = status_of(&api);
    let failures = st.source.consecutive_failures;
    // A follower is ready once it knows who leads: it serves status and metrics, and is
    // ready to take over.
    let following = st
        .leader
        .as_ref()
        .is_some_and(|l| !l.leading && l.leader.is_some());
    if let Some(why) = st.not_serving.as_ref().filter(|_| !following) {
        problem(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("serving no commit: {why}{}", refused_head(&st)),
        )
    } else if st.reconciles == 0 && !following {
        problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "no reconcile has finished yet",
        )
    } else if api.ready_fetch_failures > 0 && failures >= api.ready_fetch_failures {
        problem(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!(
                "the git source failed {failures} times in a row (--ready-fetch-failures {}): {}",
                api.ready_fetch_failures,
                st.source.last_error.as_deref().unwrap_or("")
            ),
        )
    } else if st.rejected.is_some() && st.serving.is_some() {
        // Ready: the commit served before goes on, healed; the body says why it is not the head.
        let serving = st.serving.as_deref().unwrap_or_default();
        let what = match &st.verified {
            Some(v) => format!(
                "{serving}, the last verified commit (signed by {})",
                v.signer
            ),
            None => serving.to_string(),
        };
        let body = format!("ok: serving {what}{}", refused_head(&st));
        ([(header::CONTENT_TYPE, "text/plain")], body).into_response()
    } else {
        text_ok("ok")
    }
}

/// `; the head <commit> is refused: <first error>`, when it is.
fn refused_head(st: &Status) -> String {
    st.rejected.as_ref().map_or(String::new(), |r| {
        format!(
            "; the head {} is refused: {}",
            r.commit,
            r.errors.first().map_or("", String::as_str)
        )
    })
}

async fn metrics(State(api): State<Api>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        api.metrics.render(),
    )
        .into_response()
}

async fn placements(State(api): State<Api>, uri: Uri) -> Response {
    let query = match super::status_api::placements_query(uri.query()) {
        Ok(q) => q,
        Err(e) => return problem(StatusCode::BAD_REQUEST, &e),
    };
    // Copied under the lock (the statuses are shared, not cloned), written without it: the
    // document of a large fleet takes long to write, and the reconciler publishes meanwhile.
    let (doc, shared, staged) = {
        let st = status_of(&api);
        let staged: std::collections::BTreeSet<String> = super::status_api::staged(&st)
            .into_iter()
            .map(String::from)
            .collect();
        let doc = st.placements_head::<()>();
        (doc, st.placements.clone(), staged)
    };
    let staged = staged.iter().map(String::as_str).collect();
    let matching: Vec<&crate::api::PlacementStatus> = shared
        .iter()
        .map(|p| &**p)
        .filter(|p| query.admits(p, &staged))
        .collect();
    let matched = query.paged().then_some(matching.len());
    json_ok(&crate::api::Placements {
        placements: matching
            .into_iter()
            .skip(query.offset)
            .take(query.limit.unwrap_or(usize::MAX))
            .collect(),
        matched,
        branch: doc.branch,
        head: doc.head,
        serving: doc.serving,
        not_serving: doc.not_serving,
        verified: doc.verified,
        rejected: doc.rejected,
        warnings: doc.warnings,
        held: doc.held,
        source: doc.source,
        leader: doc.leader,
    })
}

async fn placement(State(api): State<Api>, Path(id): Path<String>) -> Response {
    let id = id.trim_matches('/');
    let found = status_of(&api)
        .placements
        .iter()
        .find(|p| p.id == id)
        .cloned();
    match found {
        Some(p) => json_ok(&*p),
        None => problem(StatusCode::NOT_FOUND, &format!("no placement {id:?}")),
    }
}

/// Staged update runs, like `kubectl get clusterstagedupdaterun -o json` (with where each run
/// stands).
async fn update_runs(State(api): State<Api>) -> Response {
    let st = status_of(&api);
    json_ok(&crate::api::UpdateRuns {
        update_runs: st.runs.update_runs.clone(),
    })
}

/// The approval requests runs have reached, like `kubectl get clusterapprovalrequest -o json`.
async fn approval_requests(State(api): State<Api>) -> Response {
    let st = status_of(&api);
    json_ok(&crate::api::ApprovalRequests {
        approval_requests: st.runs.approval_requests.clone(),
    })
}

async fn evictions(State(api): State<Api>) -> Response {
    json_ok(&status_of(&api).evictions)
}

async fn inventory(State(api): State<Api>) -> Response {
    match &status_of(&api).inventory {
        Some(inv) => json_ok(inv),
        None => problem(StatusCode::SERVICE_UNAVAILABLE, "no inventory yet"),
    }
}

async fn schedule(State(api): State<Api>) -> Response {
    let st = status_of(&api);
    json_ok(&crate::api::Schedule {
        version: crate::state::FORMAT_VERSION,
        commit: st.serving.clone(),
        placements: st.schedule.clone(),
    })
}

async fn approvals(State(api): State<Api>) -> Response {
    json_ok(&status_of(&api).approvals)
}

async fn webhook(State(api): State<Api>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(secret) = &api.webhook_secret else {
        return problem(
            StatusCode::NOT_FOUND,
            "webhooks are off: start gitfleet run with --webhook-secret-file",
        );
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    match crate::webhook::verify(
        secret,
        header("x-hub-signature-256"),
        header("x-gitlab-token"),
        &body,
    ) {
        Ok(()) => {
            let _ = api.wake.send(());
            (
                StatusCode::ACCEPTED,
                [(header::CONTENT_TYPE, "application/json")],
                json!({"status": "fetching"}).to_string(),
            )
                .into_response()
        }
        Err(e) => problem(StatusCode::UNAUTHORIZED, &e.to_string()),
    }
}

/// Errors that the layers and the router answer themselves (413 from the body limit, 408 from
/// the timeout, 405, a body that cannot be read) come as plain text or empty: give them the
/// same JSON problem body as ours.
async fn json_errors(res: Response) -> Response {
    // The dashboard answers its errors as pages.
    let is_json = res.headers().get(header::CONTENT_TYPE).is_some_and(|v| {
        v.as_bytes().starts_with(b"application/json") || v.as_bytes().starts_with(b"text/html")
    });
    if !(res.status().is_client_error() || res.status().is_server_error()) || is_json {
        return res;
    }
    let (mut parts, _) = res.into_parts();
    let message = parts
        .status
        .canonical_reason()
        .unwrap_or("error")
        .to_ascii_lowercase();
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(json!({ "error": message }).to_string()))
}

/// The JSON documents, each with its ETag.
fn documents(api: Api) -> Router<Api> {
    use super::status_api as more;
    Router::new()
        .route("/api/v1/summary", get(more::summary_doc))
        .route("/api/v1/placements", get(placements))
        .route("/api/v1/placements/{*id}", get(placement))
        .route("/api/v1/inventory", get(inventory))
        .route("/api/v1/members", get(more::members_doc))
        .route("/api/v1/updateruns", get(update_runs))
        .route("/api/v1/updateruns/{*name}", get(more::update_run))
        .route("/api/v1/approvalrequests", get(approval_requests))
        .route("/api/v1/schedule", get(schedule))
        .route("/api/v1/approvals", get(approvals))
        .route("/api/v1/evictions", get(evictions))
        .route_layer(axum::middleware::from_fn_with_state(
            api.clone(),
            more::etags,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            api,
            super::access::api,
        ))
}

/// The routes, with the body limit and the request timeout.
pub fn router(api: Api, limits: &Limits) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .merge(documents(api.clone()))
        .merge(super::dashboard::routes(api.clone()))
        .route("/hooks/git", post(webhook))
        .fallback(|| async { problem(StatusCode::NOT_FOUND, "not found") })
        .with_state(api)
        .layer(tower_http::limit::RequestBodyLimitLayer::new(
            limits.body_bytes,
        ))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            limits.request_timeout,
        ))
        .layer(axum::middleware::map_response(json_errors))
}

/// Binds the API's address.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, ServerError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })
}

/// A running server. The loop runs under [`Server::supervise`], so a server that ends
/// on its own stops the daemon too; [`Server::finish`] stops it and says whether it had failed.
pub struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    /// `None` once the task has ended and been awaited.
    task: Option<JoinHandle<()>>,
    failure: Option<ServerError>,
}

/// Serves `api` on `listener` in a task of its own.
pub fn spawn(listener: TcpListener, api: Api, limits: Limits) -> Result<Server, ServerError> {
    let addr = listener.local_addr().map_err(|source| ServerError::Bind {
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
        source,
    })?;
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(serve(listener, router(api, &limits), limits, stopped));
    Ok(Server {
        addr,
        stop: Some(stop),
        task: Some(task),
        failure: None,
    })
}

impl Server {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Resolves on `signal`, or when the server's task ends although nobody asked it to (a
    /// panic, say), which it logs and keeps for [`Server::finish`].
    pub async fn or_ended(&mut self, signal: impl std::future::Future<Output = ()>) {
        let Some(task) = self.task.as_mut() else {
            return signal.await;
        };
        tokio::select! {
            _ = signal => {}
            ended = task => {
                self.task = None;
                let why = match ended {
                    Ok(()) => "its accept loop ended".to_string(),
                    Err(e) if e.is_panic() => format!("it panicked: {e}"),
                    Err(e) => e.to_string(),
                };
                let e = ServerError::Ended { addr: self.addr, why };
                tracing::error!(error = %e, "stopping the daemon: its HTTP API is gone");
                self.failure = Some(e);
            }
        }
    }

    /// Drives `run`, a loop that ends once `shutdown` is cancelled, beside the server. If the
    /// server ends on its own first, `shutdown` is cancelled so that the loop finishes its step
    /// and ends, and [`Server::finish`] then reports why.
    pub async fn supervise<T>(
        &mut self,
        run: impl std::future::Future<Output = T>,
        shutdown: &tokio_util::sync::CancellationToken,
    ) -> T {
        tokio::pin!(run);
        tokio::select! {
            r = &mut run => r,
            _ = self.or_ended(shutdown.clone().cancelled_owned()) => {
                shutdown.cancel();
                run.await
            }
        }
    }

    /// Stops accepting, lets requests in flight finish (bounded by
    /// [`Limits::shutdown_grace`]) and closes idle connections; an error if the server had
    /// ended on its own before.
    pub async fn finish(mut self) -> Result<(), ServerError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            if let Err(e) = task.await {
                tracing::warn!(error = %e, "the HTTP server did not stop cleanly");
            }
        }
        self.failure.map_or(Ok(()), Err)
    }
}

async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(limits.header_bytes)
        // The read buffer, which also holds body chunks: bounded per connection.
        .max_buf_size((4 * limits.header_bytes).max(8192));
    let http = Arc::new(http);
    let closing = CancellationToken::new();
    let open = Arc::new(Connections::default());
    let slots = Arc::new(Semaphore::new(limits.connections));
    'accept: loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = &mut stopped => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, a connection reset before it was accepted: the
                // listener itself is fine. An idle connection gives its descriptor back; else a
                // short pause keeps an exhausted process from spinning.
                tracing::warn!(error = %e, "cannot accept a connection");
                if !open.close_oldest_idle() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                continue;
            }
        };
        // At the cap, the oldest idle connection (waiting for a request head, or kept alive
        // between requests) makes room, as nginx drops its idle keep-alive connections when it
        // runs out: a flood of idle connections cannot keep a probe waiting in the backlog.
        // Only when every connection is serving a request does the new one wait.
        let permit = match slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => loop {
                let idle = open.idle.notified();
                open.close_oldest_idle();
                tokio::select! {
                    p = slots.clone().acquire_owned() => break p.expect("the semaphore is never closed"),
                    // A request ended: its connection may be the one to close now.
                    () = idle => {}
                    _ = &mut stopped => break 'accept,
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let (id, conn_state) = open.add(closing.child_token());
        let service = Tracked {
            router: router.clone(),
            conn: conn_state.clone(),
        };
        let (http, open) = (http.clone(), open.clone());
        tokio::spawn(async move {
            let conn =
                http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
            tokio::pin!(conn);
            let mut asked = false;
            let ended = loop {
                tokio::select! {
                    r = conn.as_mut() => break r,
                    () = conn_state.close.cancelled(), if !asked => {
                        // Ends the connection once no request is in flight (at once if idle).
                        conn.as_mut().graceful_shutdown();
                        asked = true;
                    }
                }
            };
            if let Err(e) = ended {
                // Timeouts, oversized heads, clients that go away: the connection's own business.
                tracing::debug!(error = %e, "HTTP connection ended with an error");
            }
            open.remove(id);
            drop(permit);
        });
    }
    drop(listener);
    closing.cancel();
    let all = u32::try_from(limits.connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(limits.shutdown_grace, slots.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!("HTTP requests still in flight at shutdown were dropped");
    }
}

/// The open connections, oldest first, each with whether it is serving a request.
#[derive(Default)]
struct Connections {
    open: Mutex<(u64, std::collections::BTreeMap<u64, Arc<Connection>>)>,
    /// Told whenever a connection's last request in flight ends.
    idle: Arc<tokio::sync::Notify>,
}

/// One connection: how many requests it is serving (a response's body included), and the
/// token that asks it to close.
struct Connection {
    busy: std::sync::atomic::AtomicUsize,
    close: CancellationToken,
    idle: Arc<tokio::sync::Notify>,
}

impl Connections {
    fn add(&self, close: CancellationToken) -> (u64, Arc<Connection>) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let id = open.0;
        open.0 += 1;
        let c = Arc::new(Connection {
            busy: Default::default(),
            close,
            idle: self.idle.clone(),
        });
        open.1.insert(id, c.clone());
        (id, c)
    }

    fn remove(&self, id: u64) {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .remove(&id);
    }

    /// Asks the oldest connection serving no request to close; whether there was one.
    fn close_oldest_idle(&self) -> bool {
        use std::sync::atomic::Ordering;
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let idle = open
            .1
            .iter()
            .find(|(_, c)| c.busy.load(Ordering::SeqCst) == 0 && !c.close.is_cancelled())
            .map(|(id, _)| *id);
        match idle.and_then(|id| open.1.remove(&id)) {
            Some(c) => {
                c.close.cancel();
                true
            }
            None => false,
        }
    }
}

/// The router, counting on its connection the requests in flight until their response's body
/// is sent: what tells an idle connection from a busy one.
#[derive(Clone)]
struct Tracked {
    router: Router,
    conn: Arc<Connection>,
}

/// One request in flight on a connection, from its head to the end of its response's body.
struct InFlight(Arc<Connection>);

impl InFlight {
    fn start(conn: Arc<Connection>) -> InFlight {
        conn.busy.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        InFlight(conn)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let before = self
            .0
            .busy
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        if before == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl<B> tower::Service<axum::http::Request<B>> for Tracked
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Response, std::convert::Infallible>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        // The router is always ready.
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<B>) -> Self::Future {
        use tower::ServiceExt;
        let in_flight = InFlight::start(self.conn.clone());
        let router = self.router.clone();
        Box::pin(async move {
            let response = router.oneshot(request.map(Body::new)).await?;
            Ok(response.map(|body| {
                Body::new(Counted {
                    body,
                    _in_flight: in_flight,
                })
            }))
        })
    }
}

/// A response body that keeps its request counted as in flight until it is sent (or dropped).
struct Counted {
    body: Body,
    _in_flight: InFlight,
}

impl hyper::body::Body for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, axum::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use tower::ServiceExt;

    fn api(secret: Option<&[u8]>) -> (Api, mpsc::UnboundedReceiver<()>) {
        let (wake, rx) = mpsc::unbounded_channel();
        let api = Api {
            status: Arc::new(Mutex::new(Status::default())),
            metrics: Arc::new(Metrics::default()),
            webhook_secret: secret.map(Arc::from),
            wake,
            ready_fetch_failures: 3,
            token: None,
        };
        (api, rx)
    }

    async fn call(
        api: &Api,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> (u16, serde_json::Value) {
        let mut req = axum::http::Request::builder().method(method).uri(path);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let res = router(api.clone(), &Limits::default())
            .oneshot(req.body(Body::from(body)).unwrap())
            .await
            .unwrap();
        let code = res.status().as_u16();
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap();
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&bytes).into()));
        (code, value)
    }

    #[tokio::test]
    async fn webhook_needs_a_valid_signature_and_wakes_the_loop() {
        let (api, mut rx) = api(Some(b"s"));
        let body = b"{\"ref\":\"refs/heads/main\"}".to_vec();
        let bad = format!("sha256={}", "0".repeat(64));
        let (code, doc) = call(
            &api,
            "POST",
            "/hooks/git",
            &[("X-Hub-Signature-256", &bad)],
            body.clone(),
        )
        .await;
        assert_eq!(code, 401);
        assert!(
            doc["error"].as_str().unwrap().contains("signature"),
            "{doc}"
        );
        assert!(rx.try_recv().is_err());
        let (code, doc) = call(&api, "POST", "/hooks/git", &[("X-Gitlab-Token", "s")], body).await;
        assert_eq!((code, doc), (202, json!({"status": "fetching"})));
        assert!(rx.try_recv().is_ok());
    }

    /// With a token, every `/api/v1` document needs it; the probes and the metrics, which a
    /// kubelet and Prometheus read without one, do not.
    #[tokio::test]
    async fn the_api_needs_the_token_and_the_probes_do_not() {
        let (mut api, _rx) = api(None);
        api.token = Some(Arc::from(&b"s3cret"[..]));
        {
            let mut st = status_of(&api);
            st.reconciles = 1;
        }
        for path in [
            "/api/v1/summary",
            "/api/v1/placements",
            "/api/v1/placements/crp/x",
            "/api/v1/members",
            "/api/v1/updateruns",
            "/api/v1/approvals",
            "/api/v1/schedule",
        ] {
            let (code, doc) = call(&api, "GET", path, &[], Vec::new()).await;
            assert_eq!(code, 401, "{path}: {doc}");
            assert!(
                doc["error"].as_str().unwrap().contains("--token-file"),
                "{path}: {doc}"
            );
            let (code, doc) = call(
                &api,
                "GET",
                path,
                &[("Authorization", "Bearer s3cre")],
                Vec::new(),
            )
            .await;
            assert_eq!(code, 401, "{path}: {doc}");
            assert!(
                doc["error"]
                    .as_str()
                    .unwrap()
                    .contains("not the API's token"),
                "{path}: {doc}"
            );
            assert!(!doc.to_string().contains("s3cre"), "{path}: {doc}");
        }
        let (code, doc) = call(
            &api,
            "GET",
            "/api/v1/summary",
            &[("Authorization", "Bearer s3cret")],
            Vec::new(),
        )
        .await;
        assert_eq!(code, 200, "{doc}");
        let (code, _) = call(
            &api,
            "GET",
            "/api/v1/summary",
            &[("Cookie", "gitfleet_dashboard=s3cret")],
            Vec::new(),
        )
        .await;
        assert_eq!(code, 200, "the dashboard's cookie opens the API too");
        for path in ["/healthz", "/readyz", "/metrics"] {
            let (code, doc) = call(&api, "GET", path, &[], Vec::new()).await;
            assert_eq!(code, 200, "{path}: {doc}");
        }
    }

    #[tokio::test]
    async fn webhook_is_off_without_a_secret() {
        let (api, _rx) = api(None);
        let (code, doc) = call(&api, "POST", "/hooks/git", &[], vec![]).await;
        assert_eq!(code, 404);
        assert!(doc["error"]
            .as_str()
            .unwrap()
            .contains("--webhook-secret-file"));
    }

    #[tokio::test]
    async fn ready_only_after_a_reconcile() {
        let (api, _rx) = api(None);
        let (code, doc) = call(&api, "GET", "/readyz", &[], vec![]).await;
        assert_eq!(
            (code, doc),
            (503, json!({"error": "no reconcile has finished yet"}))
        );
        api.status.lock().unwrap().reconciles = 1;
        assert_eq!(call(&api, "GET", "/readyz", &[], vec![]).await.0, 200);
        assert_eq!(
            call(&api, "GET", "/healthz", &[], vec![]).await,
            (200, json!("ok"))
        );
    }

    /// Serving no commit is not ready, and the body says why; serving the commit before a
    /// refused head is ready, and the body says that too.
    #[tokio::test]
    async fn readiness_says_which_commit_is_served_when_the_head_is_refused() {
        let (api, _rx) = api(None);
        {
            let mut st = api.status.lock().unwrap();
            st.rejected = Some(crate::rollout::Rejected {
                commit: "c2".into(),
                errors: vec!["commit signature (Unsigned): not signed".into()],
            });
            st.not_serving = Some("the commit served before, c1, was not verified".into());
        }
        let (code, doc) = call(&api, "GET", "/readyz", &[], vec![]).await;
        assert_eq!(code, 503);
        assert_eq!(
            doc["error"],
            "serving no commit: the commit served before, c1, was not verified; the head c2 is refused: commit signature (Unsigned): not signed"
        );
        {
            let mut st = api.status.lock().unwrap();
            st.not_serving = None;
            st.reconciles = 1;
            st.serving = Some("c1".into());
            st.verified = Some(crate::rollout::serve::Verified {
                commit: "c1".into(),
                signer: "alice".into(),
            });
        }
        assert_eq!(
            call(&api, "GET", "/readyz", &[], vec![]).await,
            (
                200,
                json!("ok: serving c1, the last verified commit (signed by alice); the head c2 is refused: commit signature (Unsigned): not signed")
            )
        );
    }

    #[tokio::test]
    async fn not_ready_after_as_many_failed_fetches_in_a_row_as_configured() {
        let (api, _rx) = api(None);
        api.status.lock().unwrap().reconciles = 1;
        for failures in 1..=2 {
            {
                let mut st = api.status.lock().unwrap();
                st.source.consecutive_failures = failures;
                st.source.last_error = Some("cannot fetch branch \"main\" from file:///x".into());
            }
            assert_eq!(call(&api, "GET", "/readyz", &[], vec![]).await.0, 200);
        }
        api.status.lock().unwrap().source.consecutive_failures = 3;
        let (code, doc) = call(&api, "GET", "/readyz", &[], vec![]).await;
        assert_eq!(code, 503);
        let message = doc["error"].as_str().unwrap();
        assert!(
            message.contains("failed 3 times in a row") && message.contains("file:///x"),
            "{message}"
        );
        // 0 turns the check off; a success (the count back at 0) makes the daemon ready again.
        let off = Api {
            ready_fetch_failures: 0,
            token: None,
            ..api.clone()
        };
        assert_eq!(call(&off, "GET", "/readyz", &[], vec![]).await.0, 200);
        api.status.lock().unwrap().source.consecutive_failures = 0;
        assert_eq!(call(&api, "GET", "/readyz", &[], vec![]).await.0, 200);
        let (_, doc) = call(&api, "GET", "/api/v1/placements", &[], vec![]).await;
        assert_eq!(
            doc["source"]["lastError"],
            "cannot fetch branch \"main\" from file:///x"
        );
    }

    #[tokio::test]
    async fn placements_are_found_by_id_with_slashes() {
        let (api, _rx) = api(None);
        api.status.lock().unwrap().branch = "main".into();
        let (code, doc) = call(&api, "GET", "/api/v1/placements", &[], vec![]).await;
        assert_eq!((code, &doc["branch"]), (200, &json!("main")));
        let (code, doc) = call(&api, "GET", "/api/v1/placements/rp/ns/web", &[], vec![]).await;
        assert_eq!(
            (code, doc),
            (404, json!({"error": "no placement \"rp/ns/web\""}))
        );
        let (code, doc) = call(&api, "GET", "/api/v1/inventory", &[], vec![]).await;
        assert_eq!((code, doc), (503, json!({"error": "no inventory yet"})));
        let (code, doc) = call(&api, "GET", "/api/v1/schedule", &[], vec![]).await;
        assert_eq!(code, 200);
        assert_eq!(doc["placements"], json!([]));
    }

    #[tokio::test]
    async fn unready_lists_only_placements_still_moving_or_not_available() {
        use crate::rollout::{BindingHealth, ClusterState};
        let cluster = |health, recheck: Option<&str>| ClusterState {
            recheck: recheck.map(Into::into),
            drift: false,
            reread: false,
            ..ClusterState::with_health(health)
        };
        let placement = |id: &str, applying: &[&str], clusters: Vec<(&str, ClusterState)>| {
            Arc::new(crate::api::PlacementStatus {
                id: id.into(),
                strategy: crate::rollout::Strategy::RollingUpdate,
                target: clusters.len(),
                policy: None,
                ocm_policy: None,
                selected: Default::default(),
                applying: applying.iter().map(|c| c.to_string()).collect(),
                removing: Default::default(),
                waiting: Default::default(),
                up_to_date: Default::default(),
                note: None,
                render_errors: Default::default(),
                clusters: clusters
                    .into_iter()
                    .map(|(n, c)| (n.to_string(), c))
                    .collect(),
                observed_resource_index: None,
                selected_resources: vec![],
                conditions: vec![],
                per_cluster: Default::default(),
                replica_sets: None,
                failed: Default::default(),
                ready: Default::default(),
            })
        };
        let (api, _rx) = api(None);
        api.status.lock().unwrap().placements = vec![
            placement(
                "crp/ready",
                &[],
                vec![("a", cluster(BindingHealth::Available, None))],
            ),
            placement(
                "crp/diff",
                &[],
                vec![("a", cluster(BindingHealth::DiffReported, None))],
            ),
            placement(
                "crp/moving",
                &["b"],
                vec![("a", cluster(BindingHealth::Available, None))],
            ),
            placement(
                "crp/pending",
                &[],
                vec![("a", cluster(BindingHealth::Pending, None))],
            ),
            placement(
                "crp/failed",
                &[],
                vec![("a", cluster(BindingHealth::Failed, None))],
            ),
            placement(
                "crp/recheck",
                &[],
                vec![(
                    "a",
                    cluster(BindingHealth::Available, Some("the daemon started")),
                )],
            ),
        ];
        let ids = |doc: &serde_json::Value| -> Vec<String> {
            doc["placements"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["id"].as_str().unwrap().to_string())
                .collect()
        };
        let (code, all) = call(&api, "GET", "/api/v1/placements", &[], vec![]).await;
        assert_eq!((code, ids(&all).len()), (200, 6));
        for query in ["?unready", "?unready=true"] {
            let path = format!("/api/v1/placements{query}");
            let (code, doc) = call(&api, "GET", &path, &[], vec![]).await;
            assert_eq!(
                (code, ids(&doc)),
                (
                    200,
                    vec![
                        "crp/moving".into(),
                        "crp/pending".into(),
                        "crp/failed".into(),
                        "crp/recheck".into()
                    ]
                ),
                "{query}"
            );
        }
        let (code, doc) = call(&api, "GET", "/api/v1/placements?unready=false", &[], vec![]).await;
        assert_eq!((code, ids(&doc).len()), (200, 6));
        // A poller that only asks whether anything is unready reads one placement and a count.
        let (code, doc) = call(
            &api,
            "GET",
            "/api/v1/placements?unready&limit=1",
            &[],
            vec![],
        )
        .await;
        assert_eq!(
            (code, ids(&doc), &doc["matched"]),
            (200, vec!["crp/moving".into()], &json!(4))
        );
        let (code, doc) = call(&api, "GET", "/api/v1/placements?limit=0", &[], vec![]).await;
        assert_eq!(
            (code, ids(&doc).len(), &doc["matched"]),
            (200, 0, &json!(6))
        );
        assert!(all.get("matched").is_none(), "only a limited answer counts");
        let (code, doc) = call(&api, "GET", "/api/v1/placements?limit=-1", &[], vec![]).await;
        assert_eq!(
            (code, doc),
            (
                400,
                json!({"error": "limit=-1: the value is a count (0, 1, 2, ...)"})
            )
        );
        let (code, doc) = call(&api, "GET", "/api/v1/placements?ready", &[], vec![]).await;
        assert_eq!(
            (code, doc),
            (
                400,
                json!({"error": "unknown query parameter \"ready\" (the ones known are state, name, cluster, clusterState, offset, limit and unready)"})
            )
        );
        let (code, doc) = call(&api, "GET", "/api/v1/placements?unready=maybe", &[], vec![]).await;
        assert_eq!(
            (code, doc),
            (
                400,
                json!({"error": "unready=maybe: the value is true or false"})
            )
        );
        // Filtered and paged: failed ones, a name, a page.
        let (code, doc) = call(&api, "GET", "/api/v1/placements?state=failed", &[], vec![]).await;
        assert_eq!((code, ids(&doc)), (200, vec!["crp/failed".to_string()]));
        let path = "/api/v1/placements?state=ready,unready&name=e&offset=1&limit=2";
        let (code, doc) = call(&api, "GET", path, &[], vec![]).await;
        // Matching "e": ready, pending, failed, recheck; the page skips the first.
        assert_eq!(
            (code, ids(&doc), &doc["matched"]),
            (
                200,
                vec!["crp/pending".to_string(), "crp/failed".to_string()],
                &json!(4)
            )
        );
        let (code, summary) = call(&api, "GET", "/api/v1/summary", &[], vec![]).await;
        assert_eq!(code, 200);
        assert_eq!(
            summary["placements"],
            json!({"total": 6, "ready": 2, "unready": 4, "failed": 1, "staged": 0})
        );
        assert_eq!(summary["clusters"]["applying"], json!(1));
        assert_eq!(summary["clusters"]["available"], json!(3));
        assert_eq!(summary["clusters"]["diffReported"], json!(1));
    }

    /// Every document has the ETag of the status it was written from; a client that sends it
    /// back gets 304 until the daemon publishes again.
    #[tokio::test]
    async fn documents_carry_etags_that_change_when_the_status_does() {
        let (api, _rx) = api(None);
        api.status.lock().unwrap().branch = "main".into();
        let ask = |path: &'static str, tag: Option<String>| {
            let api = api.clone();
            async move {
                let mut req = axum::http::Request::builder().uri(path);
                if let Some(t) = tag {
                    req = req.header("if-none-match", t);
                }
                let res = router(api, &Limits::default())
                    .oneshot(req.body(Body::empty()).unwrap())
                    .await
                    .unwrap();
                let tag = res
                    .headers()
                    .get("etag")
                    .map(|v| v.to_str().unwrap().to_string());
                (res.status().as_u16(), tag)
            }
        };
        for path in [
            "/api/v1/summary",
            "/api/v1/placements",
            "/api/v1/placements?limit=1",
            "/api/v1/updateruns",
            "/api/v1/approvalrequests",
            "/api/v1/approvals",
            "/api/v1/schedule",
        ] {
            let (code, tag) = ask(path, None).await;
            assert_eq!(code, 200, "{path}");
            let tag = tag.unwrap_or_else(|| panic!("{path} has no ETag"));
            assert_eq!(
                ask(path, Some(tag.clone())).await,
                (304, Some(tag.clone())),
                "{path}"
            );
            api.status.lock().unwrap().changed();
            let (code, new) = ask(path, Some(tag.clone())).await;
            assert_eq!(code, 200, "{path}: a new publish is a new document");
            assert_ne!(new, Some(tag), "{path}");
        }
        // Errors have none.
        assert_eq!(ask("/api/v1/placements/crp/none", None).await, (404, None));
        assert_eq!(ask("/api/v1/updateruns/none", None).await, (404, None));
    }

    /// Every error, the layers' and the router's own included, is a JSON problem body.
    #[tokio::test]
    async fn errors_are_json_problems() {
        let (api, mut rx) = api(Some(b"s"));
        assert_eq!(
            call(&api, "GET", "/nowhere", &[], vec![]).await,
            (404, json!({"error": "not found"}))
        );
        assert_eq!(
            call(&api, "DELETE", "/healthz", &[], vec![]).await,
            (405, json!({"error": "method not allowed"}))
        );
        let big = vec![b'x'; Limits::default().body_bytes + 1];
        let (code, doc) = call(
            &api,
            "POST",
            "/hooks/git",
            &[
                ("X-Gitlab-Token", "s"),
                ("Content-Length", &big.len().to_string()),
            ],
            big.clone(),
        )
        .await;
        assert_eq!((code, doc), (413, json!({"error": "payload too large"})));
        // Without a Content-Length the limit holds while the body is read.
        let (code, doc) = call(&api, "POST", "/hooks/git", &[("X-Gitlab-Token", "s")], big).await;
        assert_eq!((code, doc), (413, json!({"error": "payload too large"})));
        assert!(rx.try_recv().is_err(), "an oversized webhook wakes nothing");
    }

    fn start(limits: Limits) -> (Server, SocketAddr) {
        let (api, rx) = api(None);
        std::mem::forget(rx);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let server = spawn(TcpListener::from_std(listener).unwrap(), api, limits).unwrap();
        let addr = server.local_addr();
        (server, addr)
    }

    /// Reads until the server closes the connection (or resets it), returning what came.
    fn read_to_close(stream: &mut std::net::TcpStream) -> String {
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("the server did not close the connection: {e}"),
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_silent_connection_is_closed_after_the_header_timeout() {
        let (server, addr) = start(Limits {
            header_read_timeout: Duration::from_millis(200),
            ..Limits::default()
        });
        let answer = tokio::task::spawn_blocking(move || {
            let mut idle = std::net::TcpStream::connect(addr).unwrap();
            let mut slow = std::net::TcpStream::connect(addr).unwrap();
            slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                .unwrap();
            (read_to_close(&mut idle), read_to_close(&mut slow))
        })
        .await
        .unwrap();
        // Closed without an answer (hyper may send a bare 408 first).
        for got in [&answer.0, &answer.1] {
            assert!(got.is_empty() || got.starts_with("HTTP/1.1 408"), "{got:?}");
        }
        server.finish().await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_endless_header_line_gets_431_and_the_connection_closes() {
        let (server, addr) = start(Limits::default());
        let answer = tokio::task::spawn_blocking(move || {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /healthz HTTP/1.1\r\nX-Endless: ")
                .unwrap();
            let chunk = [b'a'; 64 * 1024];
            // 16 MiB, more than the socket buffers on both sides hold: the writes fail once the
            // server has stopped reading and closed.
            let refused = (0..256).any(|_| s.write_all(&chunk).is_err());
            (refused, read_to_close(&mut s))
        })
        .await
        .unwrap();
        let (refused, answer) = answer;
        assert!(refused, "the server read 16 MiB of one header line");
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
            "{answer:?}"
        );
        server.finish().await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shutdown_closes_idle_connections() {
        let (server, addr) = start(Limits::default());
        let (answered, answer) = tokio::sync::oneshot::channel();
        let reader = tokio::task::spawn_blocking(move || {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 1024];
            while !got.ends_with(b"ok") {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0, "closed before the answer");
                got.extend_from_slice(&buf[..n]);
            }
            answered
                .send(String::from_utf8_lossy(&got).into_owned())
                .unwrap();
            // A keep-alive connection that got its answer stays open until the shutdown.
            read_to_close(&mut s)
        });
        let got = answer.await.unwrap();
        assert!(got.starts_with("HTTP/1.1 200"), "{got:?}");
        server.finish().await.unwrap();
        assert_eq!(reader.await.unwrap(), "");
    }

    fn ask_healthz(s: &mut std::net::TcpStream) {
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
    }

    /// Past the connection cap, a new client closes the oldest idle connection instead of
    /// waiting in the backlog: idle connections cannot keep a probe out.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn past_the_cap_a_new_client_closes_the_oldest_idle_connection() {
        let (server, addr) = start(Limits {
            connections: 2,
            ..Limits::default()
        });
        let got = tokio::task::spawn_blocking(move || {
            let mut silent = std::net::TcpStream::connect(addr).unwrap();
            // Kept alive after its answer.
            let mut kept = std::net::TcpStream::connect(addr).unwrap();
            ask_healthz(&mut kept);
            let mut buf = [0u8; 1024];
            let n = kept.read(&mut buf).unwrap();
            assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
            let mut new = std::net::TcpStream::connect(addr).unwrap();
            ask_healthz(&mut new);
            new.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let n = new.read(&mut buf).unwrap();
            let answer = String::from_utf8_lossy(&buf[..n]).into_owned();
            // The silent one was the oldest: closed; the kept-alive one still answers.
            let silent_closed = read_to_close(&mut silent);
            ask_healthz(&mut kept);
            let n = kept.read(&mut buf).unwrap();
            (
                answer,
                silent_closed,
                String::from_utf8_lossy(&buf[..n]).into_owned(),
            )
        })
        .await
        .unwrap();
        assert!(got.0.starts_with("HTTP/1.1 200"), "{:?}", got.0);
        assert!(
            got.1.is_empty() || got.1.starts_with("HTTP/1.1 408"),
            "{:?}",
            got.1
        );
        assert!(got.2.starts_with("HTTP/1.1 200"), "{:?}", got.2);
        server.finish().await.unwrap();
    }

    /// A connection serving a request is never closed for a new client: past the cap, the new
    /// one waits until that request ends, and then takes the connection's place. (The "not yet"
    /// half waits 300 ms: a broken cap could slip through it on a very slow machine, a working
    /// one never fails it.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn past_the_cap_a_new_client_waits_while_every_connection_serves_a_request() {
        let (api, rx) = api(Some(b"s"));
        std::mem::forget(rx);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let limits = Limits {
            connections: 1,
            ..Limits::default()
        };
        let server = spawn(TcpListener::from_std(listener).unwrap(), api, limits).unwrap();
        let addr = server.local_addr();
        let got = tokio::task::spawn_blocking(move || {
            // A webhook whose body is still coming: a request in flight. The server's
            // `100 Continue` says the handler runs (before it, the connection may look idle).
            let mut busy = std::net::TcpStream::connect(addr).unwrap();
            busy.write_all(
                b"POST /hooks/git HTTP/1.1\r\nHost: x\r\nX-Gitlab-Token: s\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
            )
            .unwrap();
            let mut buf = [0u8; 1024];
            let n = busy.read(&mut buf).unwrap();
            assert!(buf[..n].starts_with(b"HTTP/1.1 100"), "{:?}", String::from_utf8_lossy(&buf[..n]));
            busy.write_all(b"{").unwrap();
            let mut second = std::net::TcpStream::connect(addr).unwrap();
            ask_healthz(&mut second);
            second
                .set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            let early = second.read(&mut buf);
            assert!(
                matches!(&early, Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
                "answered past the cap: {early:?}"
            );
            // The webhook ends (kept alive, then idle): the waiting client takes its place.
            busy.write_all(b"}").unwrap();
            let n = busy.read(&mut buf).unwrap();
            assert!(buf[..n].starts_with(b"HTTP/1.1 202"), "{:?}", String::from_utf8_lossy(&buf[..n]));
            second
                .set_read_timeout(Some(Duration::from_secs(30)))
                .unwrap();
            let n = second.read(&mut buf).unwrap();
            (String::from_utf8_lossy(&buf[..n]).into_owned(), read_to_close(&mut busy))
        })
        .await
        .unwrap();
        assert!(got.0.starts_with("HTTP/1.1 200"), "{:?}", got.0);
        assert_eq!(
            got.1, "",
            "the idle webhook connection was closed for the new client"
        );
        server.finish().await.unwrap();
    }

    /// A server task that dies stops the daemon: the loop's shutdown future resolves, and
    /// `finish` says what happened.
    #[tokio::test]
    async fn a_server_that_dies_ends_the_shutdown_wait_with_an_error() {
        let (stop, _stopped) = oneshot::channel();
        let mut server = Server {
            addr: "127.0.0.1:7070".parse().unwrap(),
            stop: Some(stop),
            task: Some(tokio::spawn(async { panic!("boom") })),
            failure: None,
        };
        server.or_ended(std::future::pending()).await;
        let e = server.finish().await.unwrap_err().to_string();
        assert!(
            e.starts_with("the HTTP server on 127.0.0.1:7070 stopped unexpectedly: it panicked"),
            "{e}"
        );
    }
}
