//! A small HTTP/1.1 server on tokio for the simulator's members and admin endpoint; enough for
//! what kube-rs (hyper) and kubectl (Go net/http) send:
//! keep-alive connections, `Content-Length` and chunked request bodies, full responses and
//! chunked streaming responses (watch) that flush each chunk. No TLS, no HTTP/2, no compression.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

const MAX_HEADER_BYTES: usize = 256 * 1024;
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// Percent-decoded path segments (empty segments dropped).
    pub segments: Vec<String>,
    pub path: String,
    pub query: Vec<(String, String)>,
    /// Header names in lowercase.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub peer: Option<SocketAddr>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The last value of a query parameter.
    pub fn query(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Builds a request from a target like `/api/v1/pods?&labelSelector=a%3Db` (for tests).
    pub fn new(method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) -> Request {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        Request {
            method: method.into(),
            segments: split_path(path),
            path: path.into(),
            query: parse_query(query),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
                .collect(),
            body: body.to_vec(),
            peer: None,
        }
    }
}

pub enum Body {
    Full(Vec<u8>),
    /// Chunks sent as they come; the response ends when the sender is dropped.
    Stream(mpsc::Receiver<Vec<u8>>),
}

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
}

impl Response {
    pub fn json(status: u16, value: &serde_json::Value) -> Response {
        Response::bytes(status, "application/json", value.to_string().into_bytes())
    }

    pub fn bytes(status: u16, content_type: &str, body: Vec<u8>) -> Response {
        Response {
            status,
            headers: vec![("Content-Type".into(), content_type.into())],
            body: Body::Full(body),
        }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Response {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The full body (tests; streams give what is queued now).
    pub fn body_bytes(&mut self) -> Vec<u8> {
        match &mut self.body {
            Body::Full(b) => b.clone(),
            Body::Stream(rx) => {
                let mut out = Vec::new();
                while let Ok(chunk) = rx.try_recv() {
                    out.extend(chunk);
                }
                out
            }
        }
    }
}

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
pub type Handler = Arc<dyn Fn(Request) -> BoxFuture<Response> + Send + Sync>;

/// Serves one connection until the peer closes it, a request is malformed, or `stop` turns true.
pub async fn serve_connection(
    stream: TcpStream,
    handler: Handler,
    mut stop: watch::Receiver<bool>,
) {
    let peer = stream.peer_addr().ok();
    let _ = stream.set_nodelay(true);
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::new(rd);
    loop {
        if *stop.borrow() {
            return;
        }
        let req = tokio::select! {
            r = read_request(&mut rd) => r,
            _ = stop.changed() => return,
        };
        let mut req = match req {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(msg) => {
                let body = format!("{{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{{}},\"status\":\"Failure\",\"message\":{:?},\"reason\":\"BadRequest\",\"code\":400}}", msg);
                let _ = write_full(
                    &mut wr,
                    400,
                    &[("Content-Type".into(), "application/json".into())],
                    body.as_bytes(),
                    true,
                )
                .await;
                return;
            }
        };
        req.peer = peer;
        let close = req
            .header("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close"));
        let resp = tokio::select! {
            r = handler(req) => r,
            _ = stop.changed() => return,
        };
        let ok = match resp.body {
            Body::Full(bytes) => write_full(&mut wr, resp.status, &resp.headers, &bytes, close)
                .await
                .is_ok(),
            Body::Stream(rx) => {
                write_stream(&mut wr, resp.status, &resp.headers, rx, &mut stop).await
            }
        };
        if !ok || close {
            return;
        }
    }
}

async fn read_request<R: tokio::io::AsyncBufRead + Unpin>(
    rd: &mut R,
) -> Result<Option<Request>, String> {
    let mut line = String::new();
    let mut header_bytes = 0usize;
    // Skip blank lines between requests.
    loop {
        line.clear();
        let n = rd.read_line(&mut line).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Ok(None);
        }
        header_bytes += n;
        if header_bytes > MAX_HEADER_BYTES {
            return Err("request header too large".into());
        }
        if !line.trim().is_empty() {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target), Some(_version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("malformed request line {:?}", line.trim()));
    };
    let method = method.to_string();
    let target = target.to_string();
    let mut headers = Vec::new();
    loop {
        line.clear();
        let n = rd.read_line(&mut line).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("connection closed inside the header".into());
        }
        header_bytes += n;
        if header_bytes > MAX_HEADER_BYTES {
            return Err("request header too large".into());
        }
        let l = line.trim_end_matches(['\r', '\n']);
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|te| te.to_ascii_lowercase().contains("chunked")) {
        loop {
            line.clear();
            rd.read_line(&mut line).await.map_err(|e| e.to_string())?;
            let size_text = line.trim().split(';').next().unwrap_or("").to_string();
            let size = usize::from_str_radix(&size_text, 16)
                .map_err(|_| format!("bad chunk size {size_text:?}"))?;
            if size == 0 {
                // Trailers, then the blank line.
                loop {
                    line.clear();
                    let n = rd.read_line(&mut line).await.map_err(|e| e.to_string())?;
                    if n == 0 || line.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            if body.len() + size > MAX_BODY_BYTES {
                return Err("request body too large".into());
            }
            let start = body.len();
            body.resize(start + size, 0);
            rd.read_exact(&mut body[start..])
                .await
                .map_err(|e| e.to_string())?;
            line.clear();
            rd.read_line(&mut line).await.map_err(|e| e.to_string())?;
        }
    } else if let Some(len) = header("content-length") {
        let len: usize = len.parse().map_err(|_| "bad Content-Length".to_string())?;
        if len > MAX_BODY_BYTES {
            return Err("request body too large".into());
        }
        body.resize(len, 0);
        rd.read_exact(&mut body).await.map_err(|e| e.to_string())?;
    }
    let (path, query) = target.split_once('?').unwrap_or((target.as_str(), ""));
    Ok(Some(Request {
        method,
        segments: split_path(path),
        path: path.to_string(),
        query: parse_query(query),
        headers,
        body,
        peer: None,
    }))
}

async fn write_full<W: AsyncWriteExt + Unpin>(
    wr: &mut W,
    status: u16,
    headers: &[(String, String)],
    body: &[u8],
    close: bool,
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    if close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    wr.write_all(&out).await?;
    wr.flush().await
}

async fn write_stream<W: AsyncWriteExt + Unpin>(
    wr: &mut W,
    status: u16,
    headers: &[(String, String)],
    mut rx: mpsc::Receiver<Vec<u8>>,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("Transfer-Encoding: chunked\r\n\r\n");
    if wr.write_all(head.as_bytes()).await.is_err() || wr.flush().await.is_err() {
        return false;
    }
    loop {
        let chunk = tokio::select! {
            c = rx.recv() => c,
            _ = stop.changed() => return false,
        };
        match chunk {
            Some(c) if c.is_empty() => continue,
            Some(c) => {
                let mut frame = format!("{:x}\r\n", c.len()).into_bytes();
                frame.extend_from_slice(&c);
                frame.extend_from_slice(b"\r\n");
                if wr.write_all(&frame).await.is_err() || wr.flush().await.is_err() {
                    return false;
                }
            }
            None => {
                return wr.write_all(b"0\r\n\r\n").await.is_ok() && wr.flush().await.is_ok();
            }
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        409 => "Conflict",
        410 => "Gone",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    }
}

pub fn split_path(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_decode(s, false))
        .collect()
}

/// Lenient query parsing: `?&a=1&&b` works (kube-rs starts queries with `?&`).
pub fn parse_query(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k, true), percent_decode(v, true))
        })
        .collect()
}

pub fn percent_decode(s: &str, plus_is_space: bool) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(b[i + 1]), hex(b[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 3;
                        continue;
                    }
                    _ => out.push(b'%'),
                }
            }
            b'+' if plus_is_space => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_parse_leniently() {
        let q = parse_query("&labelSelector=app%3Dx%2Ctier+in+%28web%29&&watch=true&empty");
        assert_eq!(
            q,
            vec![
                (
                    "labelSelector".to_string(),
                    "app=x,tier in (web)".to_string()
                ),
                ("watch".to_string(), "true".to_string()),
                ("empty".to_string(), String::new()),
            ]
        );
        assert_eq!(
            split_path("/api/v1//namespaces/a%2Fb/"),
            vec!["api", "v1", "namespaces", "a/b"]
        );
        assert_eq!(percent_decode("100%", false), "100%");
    }

    #[tokio::test]
    async fn reads_content_length_and_chunked_bodies() {
        let raw = b"POST /a?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcPUT /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n1\r\n!\r\n0\r\n\r\n";
        let mut rd = BufReader::new(&raw[..]);
        let a = read_request(&mut rd).await.unwrap().unwrap();
        assert_eq!(
            (a.method.as_str(), a.body.as_slice(), a.query("x")),
            ("POST", &b"abc"[..], Some("1"))
        );
        let b = read_request(&mut rd).await.unwrap().unwrap();
        assert_eq!(b.body, b"hi!");
        assert!(read_request(&mut rd).await.unwrap().is_none());
    }
}
