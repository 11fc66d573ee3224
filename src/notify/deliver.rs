//! Delivery: the daemon offers each published snapshot ([`Offer::offer`], `try_send`, never
//! waits); one task turns consecutive snapshots into events ([`events_between`]) and hands
//! each sink the ones its filter admits, through the sink's own bounded queue; one task per
//! sink sends, retrying with doubling backoff. A full queue drops the event and counts it; a
//! slow or dead receiver delays only its own sink. Counted in `gitfleet_notifications_total`
//! by sink and outcome (`sent`, `retried`, `failed`, `dropped`).
//!
//! Nothing here logs a URL, a header or a body: a chat webhook's URL and every token are
//! credentials. Errors name the sink and the HTTP status or the kind of transport failure.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::config::{Config, Retry, Sink};
use super::events::{events_between, Event, Snapshot};
use super::sinks::{self, Request};

/// `gitfleet_notifications_total`'s family: labels `sink` and `outcome`.
pub type Counts = Family<Vec<(String, String)>, Counter>;

fn count(counts: &Counts, sink: &str, outcome: &str) {
    counts
        .get_or_create(&vec![
            ("sink".to_string(), sink.to_string()),
            ("outcome".to_string(), outcome.to_string()),
        ])
        .inc();
}

/// How many snapshots may wait to be turned into events.
const SNAPSHOTS: usize = 64;

/// What the daemon holds: offers snapshots, never waits.
#[derive(Clone)]
pub struct Offer {
    tx: mpsc::Sender<Snapshot>,
    counts: Counts,
}

impl Offer {
    /// Hands `snapshot` over if there is room; else it is dropped and counted (the next one
    /// carries the state on: events are differences of states).
    pub fn offer(&self, snapshot: Snapshot) {
        if self.tx.try_send(snapshot).is_err() {
            count(&self.counts, "", "dropped");
        }
    }
}

/// The delivery tasks, to let them finish at exit.
pub struct Notifier {
    tasks: Vec<JoinHandle<()>>,
    stop: CancellationToken,
}

#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The receiver answered with an error status.
    #[error("the receiver answered HTTP {status}")]
    Status { status: u16, retry: bool },
    /// No answer: connection, TLS or timeout (reqwest's error without its URL).
    #[error("{0}")]
    Transport(String),
}

impl SendError {
    fn retry(&self) -> bool {
        match self {
            SendError::Status { retry, .. } => *retry,
            SendError::Transport(_) => true,
        }
    }
}

/// Starts delivering to `config`'s sinks; `clock` gives the events' time (Unix seconds).
pub fn start(config: Config, counts: Counts, clock: fn() -> u64) -> (Offer, Notifier) {
    // https needs a rustls crypto provider; ring is the one this build carries. Installing it
    // twice is refused harmlessly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let stop = CancellationToken::new();
    let (tx, rx) = mpsc::channel(SNAPSHOTS);
    let mut tasks = Vec::new();
    let mut queues = Vec::new();
    let ids = Arc::new(Ids::new());
    for sink in config.sinks {
        let (stx, srx) = mpsc::channel(sink.queue_size);
        let filter = sink.filter.clone();
        let name = sink.name.clone();
        queues.push((name, filter, stx));
        tasks.push(tokio::spawn(send_loop(
            sink,
            srx,
            counts.clone(),
            ids.clone(),
            stop.clone(),
        )));
    }
    tasks.insert(
        0,
        tokio::spawn(derive_loop(
            rx,
            queues,
            config.dashboard_url,
            counts.clone(),
            clock,
        )),
    );
    (Offer { tx, counts }, Notifier { tasks, stop })
}

impl Notifier {
    /// Waits up to `grace` for what is queued to be sent (once every [`Offer`] is dropped),
    /// then stops the rest.
    pub async fn finish(self, grace: Duration) {
        let all = futures_util::future::join_all(self.tasks);
        if tokio::time::timeout(grace, all).await.is_err() {
            tracing::warn!("notifications still queued at exit were not sent");
        }
        self.stop.cancel();
    }
}

type Queue = (String, super::config::Filter, mpsc::Sender<Event>);

async fn derive_loop(
    mut rx: mpsc::Receiver<Snapshot>,
    queues: Vec<Queue>,
    dashboard: Option<String>,
    counts: Counts,
    clock: fn() -> u64,
) {
    let mut prev = Snapshot::default();
    while let Some(next) = rx.recv().await {
        let events = events_between(&prev, &next, clock(), dashboard.as_deref());
        prev = next;
        for e in events {
            tracing::debug!(event = e.kind.name(), message = %e.message, "event");
            for (name, filter, q) in &queues {
                if filter.admits(&e) && q.try_send(e.clone()).is_err() {
                    count(&counts, name, "dropped");
                    tracing::warn!(sink = %name, event = e.kind.name(), "notification dropped: the sink's queue is full");
                }
            }
        }
    }
}

/// CloudEvents ids: this process's start and a count.
struct Ids {
    boot: String,
    next: AtomicU64,
}

impl Ids {
    fn new() -> Ids {
        // Unique enough across restarts: ids need only differ per source (CloudEvents).
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Ids {
            boot: format!("{:x}{:x}", std::process::id(), nanos & 0xffff_ffff_ffff),
            next: AtomicU64::new(1),
        }
    }

    fn next(&self) -> String {
        format!(
            "{}-{}",
            self.boot,
            self.next.fetch_add(1, Ordering::Relaxed)
        )
    }
}

async fn send_loop(
    sink: Sink,
    mut rx: mpsc::Receiver<Event>,
    counts: Counts,
    ids: Arc<Ids>,
    stop: CancellationToken,
) {
    let client = match reqwest::Client::builder()
        .timeout(sink.retry.timeout)
        .user_agent(concat!("gitfleet/", env!("CARGO_PKG_VERSION")))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(sink = %sink.name, error = %e.without_url(), "cannot make the sink's HTTP client; its notifications are dropped");
            return;
        }
    };
    loop {
        let event = tokio::select! {
            () = stop.cancelled() => return,
            e = rx.recv() => match e {
                Some(e) => e,
                None => return,
            },
        };
        let Some(request) = sinks::request(&sink.target, &event, &ids.next()) else {
            continue;
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = deliver(&client, &sink, &request, &event, &counts) => {}
        }
    }
}

async fn deliver(
    client: &reqwest::Client,
    sink: &Sink,
    request: &Request,
    event: &Event,
    counts: &Counts,
) {
    let Retry { attempts, .. } = sink.retry;
    for attempt in 1..=attempts {
        match send(client, request).await {
            Ok(()) => {
                count(counts, &sink.name, "sent");
                return;
            }
            Err(e) if e.retry() && attempt < attempts => {
                count(counts, &sink.name, "retried");
                let wait = sink.retry.wait(attempt);
                tracing::debug!(sink = %sink.name, event = event.kind.name(), attempt, error = %e, ?wait, "notification not delivered; retrying");
                tokio::time::sleep(wait).await;
            }
            Err(e) => {
                count(counts, &sink.name, "failed");
                tracing::warn!(sink = %sink.name, event = event.kind.name(), attempts = attempt, error = %e, "notification not delivered; given up");
                return;
            }
        }
    }
}

async fn send(client: &reqwest::Client, r: &Request) -> Result<(), SendError> {
    let body = serde_json::to_vec(&r.body).unwrap_or_default();
    let mut req = match r.method {
        sinks::Method::Post => client.post(r.url.expose()),
    }
    .header("content-type", r.content_type)
    .body(body);
    for (name, value) in &r.headers {
        req = req.header(*name, value.expose());
    }
    let response = req
        .send()
        .await
        .map_err(|e| SendError::Transport(transport(&e)))?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    // A request the receiver refuses as such (401, 404, 422) fails again the same way.
    let retry = status.is_server_error() || status.as_u16() == 408 || status.as_u16() == 429;
    Err(SendError::Status {
        status: status.as_u16(),
        retry,
    })
}

/// What kind of transport failure, without the URL reqwest's message would carry.
fn transport(e: &reqwest::Error) -> String {
    let what = if e.is_timeout() {
        "no answer in time"
    } else if e.is_connect() {
        "cannot connect"
    } else {
        "the request failed"
    };
    let mut source = std::error::Error::source(e);
    let mut detail = String::new();
    while let Some(s) = source {
        detail = s.to_string();
        source = s.source();
    }
    // The innermost cause (an OS or TLS error) names no URL.
    if detail.is_empty() {
        what.to_string()
    } else {
        format!("{what}: {detail}")
    }
}
