//! A local HTTP server standing in for the receivers of notifications (a CloudEvents endpoint,
//! Slack's and Teams' incoming webhooks, the GitHub, GitLab and Gitea APIs): it records every
//! request and answers as the test's `answer` says, on a loopback port, on its own thread.

use std::sync::{Arc, Mutex};

/// One request received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: serde_json::Value,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// How to answer one request.
pub enum Answer {
    /// This status and JSON body.
    Json(u16, serde_json::Value),
    /// Never: the connection stays open without an answer.
    Hang,
}

pub struct Receiver {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    pub received: Arc<Mutex<Vec<Received>>>,
}

type AnswerFn = dyn Fn(&Received) -> Answer + Send + Sync;

impl Receiver {
    pub fn start(answer: impl Fn(&Received) -> Answer + Send + Sync + 'static) -> Receiver {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let answer: Arc<AnswerFn> = Arc::new(answer);
        let seen = received.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let (seen, answer) = (seen.clone(), answer.clone());
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            let (seen, answer) = (seen.clone(), answer.clone());
                            async move { handle(req, &seen, &*answer).await }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
        });
        Receiver { base, received }
    }

    /// The requests received so far whose path starts with `prefix`.
    pub fn at(&self, prefix: &str) -> Vec<Received> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.path.starts_with(prefix))
            .cloned()
            .collect()
    }
}

async fn handle(
    req: hyper::Request<hyper::body::Incoming>,
    seen: &Mutex<Vec<Received>>,
    answer: &AnswerFn,
) -> Result<hyper::Response<axum::body::Body>, std::convert::Infallible> {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
        .collect();
    let body = axum::body::to_bytes(axum::body::Body::new(req.into_body()), usize::MAX)
        .await
        .unwrap_or_default();
    let received = Received {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
    };
    let a = answer(&received);
    seen.lock().unwrap().push(received);
    match a {
        Answer::Json(status, body) => Ok(hyper::Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body.to_string()))
            .unwrap()),
        Answer::Hang => std::future::pending().await,
    }
}
