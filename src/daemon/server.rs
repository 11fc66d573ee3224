//! The daemon's HTTP API on `--listen`: status for people and tools, the inventory and schedule
//! that `gitfleet plan --server` reads, health probes, and the git webhook that makes the daemon
//! look at the branch at once.
//!
//! - `GET /healthz`, `GET /readyz` (ready once the first reconcile finished)
//! - `GET /api/v1/placements`, `GET /api/v1/placements/<id>` (`crp/NAME`, `rp/NS/NAME`, …)
//! - `GET /api/v1/inventory` (the inventory file format), `GET /api/v1/schedule`
//! - `POST /hooks/git` with `X-Hub-Signature-256` or `X-Gitlab-Token` (401 otherwise)

use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use super::metrics::Metrics;
use super::Status;
use crate::http::{self, Request, Response};

fn problem(code: u16, message: &str) -> Response {
    Response::json(code, &json!({ "error": message }))
}

/// Answers one request. `wake` nudges the reconcile loop; `secret` is the webhook secret.
pub fn handle(
    status: &Mutex<Status>,
    metrics: &Metrics,
    secret: Option<&[u8]>,
    wake: &mpsc::UnboundedSender<()>,
    req: &Request,
) -> Response {
    let seg: Vec<&str> = req.segments.iter().map(String::as_str).collect();
    let st = status.lock().unwrap_or_else(|e| e.into_inner());
    match (req.method.as_str(), seg.as_slice()) {
        ("GET", ["healthz"]) => Response::bytes(200, "text/plain", b"ok".to_vec()),
        ("GET", ["metrics"]) => Response::bytes(
            200,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.render().into_bytes(),
        ),
        ("GET", ["readyz"]) if st.reconciles > 0 => {
            Response::bytes(200, "text/plain", b"ok".to_vec())
        }
        ("GET", ["readyz"]) => problem(503, "no reconcile has finished yet"),
        ("GET", ["api", "v1", "placements"]) => Response::json(
            200,
            &json!({
                "branch": st.branch,
                "head": st.head,
                "serving": st.serving,
                "rejected": st.rejected,
                "placements": st.placements,
            }),
        ),
        ("GET", ["api", "v1", "placements", rest @ ..]) => {
            let id = rest.join("/");
            match st.placements.iter().find(|p| p.id == id) {
                Some(p) => Response::json(200, &json!(p)),
                None => problem(404, &format!("no placement {id:?}")),
            }
        }
        ("GET", ["api", "v1", "inventory"]) => match &st.inventory {
            Some(inv) => Response::json(200, &json!(inv)),
            None => problem(503, "no inventory yet"),
        },
        ("GET", ["api", "v1", "schedule"]) => Response::json(
            200,
            &json!({
                "version": crate::state::FORMAT_VERSION,
                "commit": st.serving,
                "placements": st.schedule,
            }),
        ),
        ("POST", ["hooks", "git"]) => {
            let Some(secret) = secret else {
                return problem(
                    404,
                    "webhooks are off: start gitfleet run with --webhook-secret-file",
                );
            };
            match crate::webhook::verify(
                secret,
                req.header("x-hub-signature-256"),
                req.header("x-gitlab-token"),
                &req.body,
            ) {
                Ok(()) => {
                    let _ = wake.send(());
                    Response::json(202, &json!({"status": "fetching"}))
                }
                Err(e) => problem(401, &e.to_string()),
            }
        }
        _ => problem(404, "not found"),
    }
}

/// Serves the API until `stop` turns true.
pub async fn serve(
    listener: TcpListener,
    status: Arc<Mutex<Status>>,
    metrics: Arc<Metrics>,
    secret: Option<Vec<u8>>,
    wake: mpsc::UnboundedSender<()>,
    stop: watch::Receiver<bool>,
) {
    let secret = Arc::new(secret);
    let handler: http::Handler = Arc::new(move |req| {
        let (status, metrics, secret, wake) = (
            status.clone(),
            metrics.clone(),
            secret.clone(),
            wake.clone(),
        );
        Box::pin(async move { handle(&status, &metrics, secret.as_deref(), &wake, &req) })
    });
    let mut stop_accept = stop.clone();
    loop {
        tokio::select! {
            a = listener.accept() => {
                if let Ok((stream, _)) = a {
                    tokio::spawn(http::serve_connection(stream, handler.clone(), stop.clone()));
                }
            }
            _ = stop_accept.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_needs_a_valid_signature_and_wakes_the_loop() {
        let status = Mutex::new(Status::default());
        let (tx, mut rx) = mpsc::unbounded_channel();
        let body = b"{\"ref\":\"refs/heads/main\"}";
        let bad = Request::new(
            "POST",
            "/hooks/git",
            &[("X-Hub-Signature-256", &format!("sha256={}", "0".repeat(64)))],
            body,
        );
        assert_eq!(
            handle(&status, &Metrics::default(), Some(b"s"), &tx, &bad).status,
            401
        );
        assert!(rx.try_recv().is_err());
        let good = Request::new("POST", "/hooks/git", &[("X-Gitlab-Token", "s")], body);
        assert_eq!(
            handle(&status, &Metrics::default(), Some(b"s"), &tx, &good).status,
            202
        );
        assert!(rx.try_recv().is_ok());
    }

    #[test]
    fn ready_only_after_a_reconcile() {
        let status = Mutex::new(Status::default());
        let (tx, _rx) = mpsc::unbounded_channel();
        let req = Request::new("GET", "/readyz", &[], b"");
        assert_eq!(
            handle(&status, &Metrics::default(), None, &tx, &req).status,
            503
        );
        status.lock().unwrap().reconciles = 1;
        assert_eq!(
            handle(&status, &Metrics::default(), None, &tx, &req).status,
            200
        );
    }
}
