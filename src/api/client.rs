//! Reading a running gitfleet daemon (`--server URL`): its live inventory and its current
//! schedule (bindings, decisions, policy indices), so `plan` starts from the fleet as it is, and
//! its placements for `gitfleet status`. The documents are the server's own types
//! ([`crate::api`]):
//! - `GET /api/v1/inventory`: the inventory, in the inventory file's format;
//! - `GET /api/v1/schedule`: the last schedule, in the state directory's `schedule.json` format;
//! - `GET /api/v1/placements`: every placement's rollout.
//!
//! A daemon started with `--token-file` asks for its token on `/api/v1`: a [`Daemon`] made
//! with one sends it as `Authorization: Bearer`, and never shows it (not in `Debug`, not in
//! errors).

use crate::api as wire;
use crate::schedule::{Inventory, Previous};
use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach gitfleet daemon at {url}: {message}")]
    Request { url: String, message: String },
    #[error(
        "the gitfleet daemon at {url} needs its API token: pass --token-file FILE (or set \
         GITFLEET_TOKEN_FILE), the file the daemon was started with"
    )]
    NoToken { url: String },
    #[error(
        "the gitfleet daemon at {url} refused the token of --token-file (or GITFLEET_TOKEN_FILE): \
         it is not the one in the daemon's --token-file"
    )]
    WrongToken { url: String },
    #[error("gitfleet daemon at {url} answered with something that is not {what}: {message}")]
    Decode {
        url: String,
        what: &'static str,
        message: String,
    },
}

impl ClientError {
    /// The daemon refused the request for want of the right token: asking again cannot help.
    pub fn is_unauthorized(&self) -> bool {
        matches!(self, Self::NoToken { .. } | Self::WrongToken { .. })
    }
}

/// A running daemon: its address (`--server`) and the token to show it, if any.
#[derive(Clone)]
pub struct Daemon {
    url: String,
    token: Option<String>,
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl std::fmt::Display for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

impl Daemon {
    pub fn new(url: impl Into<String>, token: Option<String>) -> Self {
        Daemon {
            url: url.into(),
            token,
        }
    }

    /// A daemon that asks for no token.
    pub fn open(url: impl Into<String>) -> Self {
        Self::new(url, None)
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    fn endpoint(&self, path: &str) -> String {
        format!("{}{path}", self.url.trim_end_matches('/'))
    }
}

/// The token in a file (`--token-file`), trimmed as the daemon trims its own; an empty file
/// is an error rather than a request without a token.
pub fn read_token(file: &std::path::Path) -> Result<String, TokenFileError> {
    let text = std::fs::read_to_string(file).map_err(|source| TokenFileError::Read {
        file: file.to_path_buf(),
        source,
    })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(TokenFileError::Empty {
            file: file.to_path_buf(),
        });
    }
    Ok(token.to_string())
}

#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("cannot read the token file {}: {source}", file.display())]
    Read {
        file: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("the token file {} is empty (or only whitespace): put the daemon's token in it", file.display())]
    Empty { file: std::path::PathBuf },
}

/// TLS for gitfleet's HTTP(S) clients: rustls on ring (the provider kube uses; ureq's default
/// would need it as a feature of its own), trusting the platform's certificate store as kubectl
/// and curl do.
pub(crate) fn tls_config() -> ureq::tls::TlsConfig {
    ureq::tls::TlsConfig::builder()
        .root_certs(ureq::tls::RootCerts::PlatformVerifier)
        .unversioned_rustls_crypto_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .build()
}

/// The daemon API's client.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .tls_config(tls_config())
        .build()
        .new_agent()
}

fn get<T: for<'de> Deserialize<'de>>(
    daemon: &Daemon,
    path: &str,
    what: &'static str,
) -> Result<T, ClientError> {
    get_found(daemon, path, what, false)?.ok_or_else(|| ClientError::Request {
        url: daemon.endpoint(path),
        message: "not found".into(),
    })
}

/// `None` for a 404 when `absent_ok`.
fn get_found<T: for<'de> Deserialize<'de>>(
    daemon: &Daemon,
    path: &str,
    what: &'static str,
    absent_ok: bool,
) -> Result<Option<T>, ClientError> {
    let url = &daemon.endpoint(path);
    let request = |message: String| ClientError::Request {
        url: url.to_string(),
        message,
    };
    let mut get = agent().get(url);
    if let Some(token) = &daemon.token {
        get = get.header("Authorization", format!("Bearer {token}"));
    }
    let mut response = match get.call() {
        Err(ureq::Error::StatusCode(404)) if absent_ok => return Ok(None),
        Err(ureq::Error::StatusCode(401)) => {
            let url = daemon.url.clone();
            return Err(match daemon.token {
                Some(_) => ClientError::WrongToken { url },
                None => ClientError::NoToken { url },
            });
        }
        r => r.map_err(|e| request(e.to_string()))?,
    };
    // Read as it arrives, without ureq's 10 MiB cap: a fleet-scale daemon's placements
    // document is bigger than that.
    let body = response.body_mut().with_config().limit(u64::MAX).reader();
    serde_json::from_reader(std::io::BufReader::new(body))
        .map(Some)
        .map_err(|e| {
            if e.is_io() {
                request(e.to_string())
            } else {
                ClientError::Decode {
                    url: url.to_string(),
                    what,
                    message: e.to_string(),
                }
            }
        })
}

pub fn inventory(server: &Daemon) -> Result<Inventory, ClientError> {
    get(server, "/api/v1/inventory", "an inventory")
}

/// The daemon's current schedule, by placement id.
pub fn schedule(server: &Daemon) -> Result<Previous, ClientError> {
    let doc: wire::Schedule = get(server, "/api/v1/schedule", "a schedule")?;
    Ok(doc
        .placements
        .into_iter()
        .map(|p| (p.key.clone(), p))
        .collect())
}

/// The daemon's staged update runs and the approval requests they reached.
pub fn update_runs(
    server: &Daemon,
) -> Result<(wire::UpdateRuns, wire::ApprovalRequests), ClientError> {
    let runs = get(server, "/api/v1/updateruns", "the update runs")?;
    let requests = get(server, "/api/v1/approvalrequests", "the approval requests")?;
    Ok((runs, requests))
}

/// The approval requests the daemon's runs wait on, and the last evaluation of the approval
/// tags, as `GET /api/v1/approvals` answers (for `gitfleet approve` and `verify-approval`).
pub fn approvals(server: &Daemon) -> Result<crate::api::ApprovalsView, ClientError> {
    get(server, "/api/v1/approvals", "the approval requests")
}

/// The evictions of the commit served, as judged (`GET /api/v1/evictions`).
pub fn evictions(server: &Daemon) -> Result<wire::Evictions, ClientError> {
    get(server, "/api/v1/evictions", "the evictions")
}

/// The fleet in a few numbers, as `GET /api/v1/summary` answers: what `status` and `wait`
/// read first, whatever the fleet's size.
pub fn summary(server: &Daemon) -> Result<wire::Summary, ClientError> {
    get(server, "/api/v1/summary", "the fleet summary")
}

/// One placement by id (`crp/NAME`, `rp/NS/NAME`, ...); `None` when the daemon has none.
pub fn placement(server: &Daemon, id: &str) -> Result<Option<wire::PlacementStatus>, ClientError> {
    get_found(
        server,
        &format!("/api/v1/placements/{id}"),
        "a placement's status",
        true,
    )
}

/// The placements a query selects (`state=unready,failed`, `name=`, `cluster=`, `offset=`,
/// `limit=`; the query's values already %-encoded), with the document's head fields.
pub fn placements_where(server: &Daemon, query: &str) -> Result<wire::Placements, ClientError> {
    get(
        server,
        &format!("/api/v1/placements?{query}"),
        "the placements status",
    )
}

/// How many placements one page of [`placements`] asks for: at 1,000 clusters a placement's
/// status is about 100 KiB, so a page stays near 10 MiB however large the fleet.
pub const PAGE: usize = 100;

/// The daemon's placements (for `gitfleet status`), read a page at a time as kubectl reads a
/// long list in chunks: no single answer holds the whole fleet, so neither the daemon nor this
/// client serialises or parses one document of every placement and cluster. The head fields
/// are the first page's.
pub fn placements(server: &Daemon) -> Result<wire::Placements, ClientError> {
    let page = |offset: usize| placements_where(server, &format!("offset={offset}&limit={PAGE}"));
    let mut doc = page(0)?;
    let matched = doc.matched.unwrap_or(doc.placements.len());
    while doc.placements.len() < matched {
        let next = page(doc.placements.len())?;
        if next.placements.is_empty() {
            // Placements removed between pages.
            break;
        }
        doc.placements.extend(next.placements);
    }
    doc.matched = None;
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A fleet-scale daemon's documents are bigger than ureq's default 10 MiB body limit; they
    /// are read whole all the same.
    #[test]
    fn documents_over_ten_mebibytes_are_read() {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let head = "0".repeat(40);
        // An unknown field pads the document to 12 MiB.
        let body = format!(
            r#"{{"branch":"main","head":"{head}","pad":"{}","placements":[]}}"#,
            "x".repeat(12 << 20)
        );
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let _ = conn.read(&mut request).unwrap();
            write!(
                conn,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            )
            .unwrap();
            conn.write_all(body.as_bytes()).unwrap();
        });
        let doc = placements(&Daemon::open(format!("http://127.0.0.1:{port}"))).unwrap();
        server.join().unwrap();
        assert_eq!(doc.head.as_deref(), Some(head.as_str()));
        assert_eq!(doc.branch, "main");
    }

    /// `gitfleet status` reads the placements a page at a time, each request asking for the
    /// next offset, until it has as many as the first page said matched.
    #[test]
    fn placements_are_read_a_page_at_a_time() {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let total = PAGE + PAGE / 2;
        let server = std::thread::spawn(move || {
            let mut asked = Vec::new();
            for _ in 0..2 {
                let (mut conn, _) = listener.accept().unwrap();
                let mut request = [0u8; 1024];
                let n = conn.read(&mut request).unwrap();
                let line = String::from_utf8_lossy(&request[..n])
                    .lines()
                    .next()
                    .unwrap()
                    .to_string();
                let offset: usize = line
                    .split("offset=")
                    .nth(1)
                    .and_then(|r| r.split('&').next())
                    .unwrap()
                    .parse()
                    .unwrap();
                asked.push(line);
                let items: Vec<String> = (offset..total.min(offset + PAGE))
                    .map(|i| format!(r#"{{"id":"crp/p{i:03}","strategy":"RollingUpdate","target":1,"selected":[],"applying":[],"removing":[],"waiting":[],"upToDate":[],"clusters":{{}},"conditions":[]}}"#))
                    .collect();
                let body = format!(
                    r#"{{"branch":"main","head":null,"matched":{total},"placements":[{}]}}"#,
                    items.join(",")
                );
                write!(
                    conn,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
                .unwrap();
            }
            asked
        });
        let doc = placements(&Daemon::open(format!("http://127.0.0.1:{port}"))).unwrap();
        let asked = server.join().unwrap();
        assert_eq!(doc.placements.len(), total);
        assert_eq!(doc.placements[PAGE].id, format!("crp/p{PAGE:03}"));
        assert_eq!(doc.matched, None);
        assert!(
            asked[0].contains(&format!("offset=0&limit={PAGE}")),
            "{asked:?}"
        );
        assert!(
            asked[1].contains(&format!("offset={PAGE}&limit={PAGE}")),
            "{asked:?}"
        );
    }

    /// Answers one request with `status` and returns the request's head.
    fn answer_once(status: &str) -> (u16, std::thread::JoinHandle<String>) {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let status = status.to_string();
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut request = [0u8; 4096];
            let n = conn.read(&mut request).unwrap();
            let body = r#"{"error":"this API needs its token"}"#;
            write!(
                conn,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            String::from_utf8_lossy(&request[..n]).into_owned()
        });
        (port, server)
    }

    #[test]
    fn the_token_is_sent_as_a_bearer_header() {
        let (port, server) = answer_once("401 Unauthorized");
        let daemon = Daemon::new(format!("http://127.0.0.1:{port}"), Some("s3cret".into()));
        let err = summary(&daemon).unwrap_err();
        let head = server.join().unwrap().to_ascii_lowercase();
        assert!(head.contains("authorization: bearer s3cret\r\n"), "{head}");
        assert!(err.is_unauthorized());
        let message = err.to_string();
        assert!(message.contains("refused the token"), "{message}");
        assert!(!message.contains("s3cret"), "{message}");
        assert!(!format!("{daemon:?}").contains("s3cret"));
    }

    #[test]
    fn without_a_token_a_401_says_how_to_give_one() {
        let (port, server) = answer_once("401 Unauthorized");
        let err = summary(&Daemon::open(format!("http://127.0.0.1:{port}"))).unwrap_err();
        let head = server.join().unwrap().to_ascii_lowercase();
        assert!(!head.contains("authorization:"), "{head}");
        assert!(err.is_unauthorized());
        assert!(err.to_string().contains("--token-file"), "{err}");
    }

    #[test]
    fn token_files_are_trimmed_and_must_not_be_empty() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("token");
        std::fs::write(&f, "s3cret\n").unwrap();
        assert_eq!(read_token(&f).unwrap(), "s3cret");
        std::fs::write(&f, " \n").unwrap();
        let err = read_token(&f).unwrap_err().to_string();
        assert!(err.contains("is empty"), "{err}");
    }

    /// `https://` URLs speak TLS: the daemon's address sees a TLS ClientHello (a handshake
    /// record, 0x16, then a TLS version), not plain HTTP or a refusal of the scheme.
    #[test]
    fn https_servers_are_spoken_to_in_tls() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut first = [0u8; 3];
            conn.read_exact(&mut first).unwrap();
            first
        });
        let err = placements(&Daemon::open(format!("https://127.0.0.1:{port}"))).unwrap_err();
        // A client that never connected must fail the test, not hang it: this empty
        // connection is then the one accepted, and reading from it fails.
        drop(std::net::TcpStream::connect(("127.0.0.1", port)));
        let first = server
            .join()
            .unwrap_or_else(|_| panic!("the client never spoke TLS: {err}"));
        assert_eq!(
            first[0], 0x16,
            "a TLS handshake record; the client said: {err}"
        );
        assert_eq!(first[1], 0x03, "a TLS version; the client said: {err}");
    }
}
