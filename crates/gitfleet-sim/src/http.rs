//! A small HTTP/1.1 server on tokio for the simulator's members and admin endpoint; enough for
//! what kube-rs (hyper) and kubectl (Go net/http) send: keep-alive connections, `Content-Length`
//! and chunked request bodies, full responses and chunked streaming responses (watch) that flush
//! each chunk. No TLS, no HTTP/2, no compression.
//!
//! A client holds only bounded memory and time ([`Limits`]): lines, headers and the head as a
//! whole are read up to a size (431 past it, as Go's net/http answers), bodies up to the API
//! server's 3 MiB (413 with its `Status`), chunk sizes are checked (400 on overflow), buffers
//! grow with the bytes that arrive, never with what a header claims, and a connection that sends
//! nothing is closed after a while.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use super::status::ApiError;

/// What one connection may hold.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Longest line of the head (the request line, one header, a chunk-size line).
    pub line_bytes: usize,
    /// Largest head (request line and headers, or a chunked body's trailers).
    pub header_bytes: usize,
    /// Most header fields in one head.
    pub headers: usize,
    /// Largest request body: the API server's limit (3 MiB).
    pub body_bytes: usize,
    /// How long a kept-alive connection may wait for its next request before it is closed. Above
    /// the 90 s after which kube-rs (hyper) and client-go drop idle connections themselves, so a
    /// client never races the server's close.
    pub idle_timeout: Duration,
    /// How long reading one request may take once its first byte came.
    pub read_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            line_bytes: 64 * 1024,
            header_bytes: 256 * 1024,
            headers: 100,
            body_bytes: 3 * 1024 * 1024,
            idle_timeout: Duration::from_secs(120),
            read_timeout: Duration::from_secs(30),
        }
    }
}

/// Why a request could not be read. The ones with a [`ReadError::status`] are answered before
/// the connection closes; the others just close it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("connection closed inside a request")]
    Closed,
    #[error("{0}")]
    Io(String),
    #[error("{0}")]
    HeaderTooLarge(&'static str),
    #[error("more than {0} header fields")]
    TooManyHeaders(usize),
    #[error("{0}")]
    Malformed(String),
    #[error("request body over {limit} bytes")]
    BodyTooLarge { limit: usize },
}

impl ReadError {
    /// The status the server answers with, if any.
    pub fn status(&self) -> Option<u16> {
        match self {
            ReadError::Closed | ReadError::Io(_) => None,
            ReadError::HeaderTooLarge(_) | ReadError::TooManyHeaders(_) => Some(431),
            ReadError::Malformed(_) => Some(400),
            ReadError::BodyTooLarge { .. } => Some(413),
        }
    }

    /// The answer: the API server's `Status` for a body too large (its handler refuses it),
    /// Go's net/http plain text for a head it cannot read (the API server never sees those).
    fn response(&self, code: u16) -> Response {
        match self {
            ReadError::BodyTooLarge { limit } => {
                Response::json(code, &ApiError::entity_too_large(*limit).to_status())
            }
            _ => Response::bytes(
                code,
                "text/plain; charset=utf-8",
                format!("{code} {}: {self}", reason(code)).into_bytes(),
            ),
        }
    }
}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        ReadError::Io(e.to_string())
    }
}

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
        let body = serde_json::to_vec(value).expect("JSON values serialise");
        Response::bytes(status, "application/json", body)
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

/// Serves one connection until the peer closes it, a request is malformed, it stays idle past
/// [`Limits::idle_timeout`], or `stop` turns true.
pub async fn serve_connection(
    stream: TcpStream,
    handler: Handler,
    mut stop: watch::Receiver<bool>,
    limits: Limits,
) {
    let peer = stream.peer_addr().ok();
    let _ = stream.set_nodelay(true);
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::new(rd);
    loop {
        if *stop.borrow() {
            return;
        }
        // The first byte of the next request, or the connection is idle.
        let first = tokio::select! {
            r = tokio::time::timeout(limits.idle_timeout, rd.fill_buf()) => r,
            _ = stop.changed() => return,
        };
        match first {
            Ok(Ok(bytes)) if !bytes.is_empty() => {}
            _ => return,
        }
        let req = tokio::select! {
            r = tokio::time::timeout(limits.read_timeout, read_request(&mut rd, &limits)) => r,
            _ = stop.changed() => return,
        };
        let mut req = match req {
            Ok(Ok(Some(r))) => r,
            Ok(Ok(None)) | Err(_) => return,
            Ok(Err(e)) => {
                if let Some(code) = e.status() {
                    let resp = e.response(code);
                    if let Body::Full(body) = &resp.body {
                        let _ = write_full(&mut wr, code, &resp.headers, body, true).await;
                    }
                }
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

/// Reads one line, `\n` included, into `buf` (cleared first), reading at most `max` bytes of it.
/// `Ok(false)`: the peer closed before the line began.
async fn read_line<R: AsyncBufRead + Unpin>(
    rd: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
    too_long: &'static str,
) -> Result<bool, ReadError> {
    buf.clear();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let n = (&mut *rd).take(limit).read_until(b'\n', buf).await?;
    if n == 0 {
        return Ok(false);
    }
    if n > max {
        return Err(ReadError::HeaderTooLarge(too_long));
    }
    if buf.last() != Some(&b'\n') {
        return Err(ReadError::Closed);
    }
    Ok(true)
}

/// A line without its `\r\n`, as text (header values are ASCII in practice; anything else is
/// kept, lossily).
fn text(line: &[u8]) -> String {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    String::from_utf8_lossy(line).into_owned()
}

/// Reads header fields (or trailers) up to the blank line, within the head's budget.
async fn read_fields<R: AsyncBufRead + Unpin>(
    rd: &mut R,
    line: &mut Vec<u8>,
    head_bytes: &mut usize,
    limits: &Limits,
) -> Result<Vec<(String, String)>, ReadError> {
    let mut fields = Vec::new();
    loop {
        let room = limits.header_bytes.saturating_sub(*head_bytes);
        let max = limits.line_bytes.min(room);
        if !read_line(rd, line, max, "request header too large").await? {
            return Err(ReadError::Closed);
        }
        *head_bytes += line.len();
        let l = text(line);
        if l.is_empty() {
            return Ok(fields);
        }
        if fields.len() == limits.headers {
            return Err(ReadError::TooManyHeaders(limits.headers));
        }
        let Some((k, v)) = l.split_once(':') else {
            return Err(ReadError::Malformed(format!(
                "malformed header line {:?}",
                l.chars().take(64).collect::<String>()
            )));
        };
        fields.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
}

/// Reads exactly `len` bytes onto `body`; the buffer grows with what arrives.
async fn read_exactly<R: AsyncBufRead + Unpin>(
    rd: &mut R,
    body: &mut Vec<u8>,
    len: usize,
) -> Result<(), ReadError> {
    let want = u64::try_from(len).unwrap_or(u64::MAX);
    let got = (&mut *rd).take(want).read_to_end(body).await?;
    if got < len {
        return Err(ReadError::Closed);
    }
    Ok(())
}

/// Reads one request; `Ok(None)` when the peer closed the connection between requests.
pub async fn read_request<R: AsyncBufRead + Unpin>(
    rd: &mut R,
    limits: &Limits,
) -> Result<Option<Request>, ReadError> {
    let mut line = Vec::new();
    let mut head_bytes = 0usize;
    // Skip blank lines between requests (they count toward the head).
    loop {
        let max = limits
            .line_bytes
            .min(limits.header_bytes.saturating_sub(head_bytes));
        if !read_line(rd, &mut line, max, "request line too long").await? {
            return Ok(None);
        }
        head_bytes += line.len();
        if !text(&line).trim().is_empty() {
            break;
        }
    }
    let request_line = text(&line);
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(target), Some(_version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(ReadError::Malformed(format!(
            "malformed request line {:?}",
            request_line.chars().take(64).collect::<String>()
        )));
    };
    let method = method.to_string();
    let target = target.to_string();
    let headers = read_fields(rd, &mut line, &mut head_bytes, limits).await?;
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let too_large = || ReadError::BodyTooLarge {
        limit: limits.body_bytes,
    };
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|te| te.to_ascii_lowercase().contains("chunked")) {
        loop {
            if !read_line(rd, &mut line, limits.line_bytes, "chunk size line too long").await? {
                return Err(ReadError::Closed);
            }
            let size_line = text(&line);
            let size_text = size_line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| ReadError::Malformed(format!("bad chunk size {size_text:?}")))?;
            if size == 0 {
                // Trailers (dropped), then the blank line, within what is left of the head.
                let mut trailer_bytes = 0;
                read_fields(rd, &mut line, &mut trailer_bytes, limits).await?;
                break;
            }
            let total = body.len().checked_add(size).ok_or_else(|| {
                ReadError::Malformed(format!("chunk size {size_text:?} overflows the body"))
            })?;
            if total > limits.body_bytes {
                return Err(too_large());
            }
            read_exactly(rd, &mut body, size).await?;
            let crlf = || ReadError::Malformed("chunk not followed by CRLF".into());
            match read_line(rd, &mut line, 2, "").await {
                Ok(true) if text(&line).is_empty() => {}
                Ok(false) => return Err(ReadError::Closed),
                Ok(true) | Err(ReadError::HeaderTooLarge(_)) => return Err(crlf()),
                Err(e) => return Err(e),
            }
        }
    } else if let Some(len) = header("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| ReadError::Malformed(format!("bad Content-Length {len:?}")))?;
        if len > limits.body_bytes {
            return Err(too_large());
        }
        read_exactly(rd, &mut body, len).await?;
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
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
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

    async fn read(raw: &[u8]) -> Result<Option<Request>, ReadError> {
        read_request(&mut BufReader::new(raw), &Limits::default()).await
    }

    #[tokio::test]
    async fn reads_content_length_and_chunked_bodies() {
        let raw = b"POST /a?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcPUT /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n1;ext=1\r\n!\r\n0\r\nX-Trailer: t\r\n\r\n";
        let mut rd = BufReader::new(&raw[..]);
        let limits = Limits::default();
        let a = read_request(&mut rd, &limits).await.unwrap().unwrap();
        assert_eq!(
            (a.method.as_str(), a.body.as_slice(), a.query("x")),
            ("POST", &b"abc"[..], Some("1"))
        );
        let b = read_request(&mut rd, &limits).await.unwrap().unwrap();
        assert_eq!(b.body, b"hi!");
        assert!(read_request(&mut rd, &limits).await.unwrap().is_none());
    }

    /// A bound on a hang: each hostile input must be refused long before this.
    const HANG: std::time::Duration = std::time::Duration::from_secs(10);

    /// An endless line (request line or header) is refused once it passes the line limit, with
    /// no more than that read: the reader counts what was taken from the endless source.
    #[tokio::test]
    async fn an_endless_line_is_refused_after_the_line_limit() {
        let limits = Limits::default();
        for prefix in [&b""[..], b"GET / HTTP/1.1\r\nX-Endless: "] {
            let taken = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let endless = Counting(tokio::io::repeat(b'a'), taken.clone());
            let mut rd = BufReader::new(prefix.chain(endless));
            let got = tokio::time::timeout(HANG, read_request(&mut rd, &limits))
                .await
                .expect("an endless line must not hang the reader");
            assert_eq!(got.as_ref().unwrap_err().status(), Some(431), "{got:?}");
            let taken = taken.load(std::sync::atomic::Ordering::Relaxed);
            assert!(
                taken <= limits.line_bytes + 2 * 8192,
                "read {taken} bytes of one line"
            );
        }
    }

    /// Counts the bytes read through it.
    struct Counting<R>(R, std::sync::Arc<std::sync::atomic::AtomicUsize>);

    impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Counting<R> {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            let before = buf.filled().len();
            let r = Pin::new(&mut self.0).poll_read(cx, buf);
            self.1.fetch_add(
                buf.filled().len() - before,
                std::sync::atomic::Ordering::Relaxed,
            );
            r
        }
    }

    #[tokio::test]
    async fn too_many_or_too_large_headers_get_431() {
        let mut many = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..101 {
            many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(
            read(&many).await.unwrap_err(),
            ReadError::TooManyHeaders(100)
        );
        // Each line within its limit, the head as a whole over its own.
        let mut large = b"GET / HTTP/1.1\r\n".to_vec();
        let value = "v".repeat(60 * 1024);
        for i in 0..5 {
            large.extend_from_slice(format!("X-{i}: {value}\r\n").as_bytes());
        }
        large.extend_from_slice(b"\r\n");
        let got = read(&large).await;
        assert_eq!(got.unwrap_err().status(), Some(431));
        let fine = b"GET / HTTP/1.1\r\nA: 1\r\n\r\n";
        assert!(read(fine).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn malformed_heads_get_400() {
        for raw in [
            &b"GET /\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nno colon here\r\n\r\n",
            b"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            b"GET / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        ] {
            let got = read(raw).await;
            assert_eq!(
                got.as_ref().unwrap_err().status(),
                Some(400),
                "{}: {got:?}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    /// A chunk size whose sum with the body so far overflows is refused, not a panic; sizes too
    /// long for a number or over the limit are refused too.
    #[tokio::test]
    async fn overflowing_chunk_sizes_are_refused() {
        let head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        let overflow = format!("{head}1\r\na\r\n{:x}\r\n", usize::MAX);
        let got = read(overflow.as_bytes()).await;
        assert_eq!(got.as_ref().unwrap_err().status(), Some(400), "{got:?}");
        assert!(got.unwrap_err().to_string().contains("overflows"));
        let too_long = format!("{head}1{}\r\n", "0".repeat(40));
        assert_eq!(
            read(too_long.as_bytes()).await.unwrap_err().status(),
            Some(400)
        );
        let over_limit = format!("{head}{:x}\r\n", usize::MAX);
        assert_eq!(
            read(over_limit.as_bytes()).await.unwrap_err(),
            ReadError::BodyTooLarge {
                limit: 3 * 1024 * 1024
            }
        );
        let bad_crlf = format!("{head}1\r\naXY\r\n0\r\n\r\n");
        assert_eq!(
            read(bad_crlf.as_bytes()).await.unwrap_err().status(),
            Some(400)
        );
    }

    /// A huge Content-Length is refused before any body is read; one within the limit but with
    /// a short body fails when the peer closes, with the buffer only as large as what came.
    #[tokio::test]
    async fn huge_content_lengths_are_refused_without_allocating() {
        let huge = format!(
            "PUT / HTTP/1.1\r\nContent-Length: {}\r\n\r\nabc",
            usize::MAX
        );
        assert_eq!(
            read(huge.as_bytes()).await.unwrap_err(),
            ReadError::BodyTooLarge {
                limit: 3 * 1024 * 1024
            }
        );
        let short = format!(
            "PUT / HTTP/1.1\r\nContent-Length: {}\r\n\r\nabc",
            3 * 1024 * 1024
        );
        assert_eq!(read(short.as_bytes()).await.unwrap_err(), ReadError::Closed);
        let exact = "PUT / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
        assert_eq!(read(exact.as_bytes()).await.unwrap().unwrap().body, b"abc");
    }

    /// Over a socket: an idle connection is closed after the idle timeout, a head over the
    /// limit is answered 431 like Go's net/http, a body over the limit 413 with a `Status`.
    #[tokio::test]
    async fn the_connection_answers_and_closes() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let limits = Limits {
            idle_timeout: std::time::Duration::from_millis(100),
            body_bytes: 10,
            ..Limits::default()
        };
        let (_stop, stopped) = watch::channel(false);
        let handler: Handler =
            Arc::new(|_req| Box::pin(async { Response::bytes(200, "text/plain", b"ok".to_vec()) }));
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                tokio::spawn(serve_connection(
                    stream,
                    handler.clone(),
                    stopped.clone(),
                    limits.clone(),
                ));
            }
        });
        let exchange = |send: Vec<u8>| async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(&send).await.unwrap();
            let mut got = Vec::new();
            tokio::time::timeout(HANG, s.read_to_end(&mut got))
                .await
                .expect("the server closes the connection")
                .unwrap();
            String::from_utf8_lossy(&got).into_owned()
        };
        assert_eq!(exchange(Vec::new()).await, "", "idle: closed, no answer");
        let answer = exchange(b"GET /x HTTP/1.1\r\n\r\n".to_vec()).await;
        assert!(
            answer.starts_with("HTTP/1.1 200 OK"),
            "keep-alive answered, then idle: {answer}"
        );
        let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', 70 * 1024));
        big.extend_from_slice(b"\r\n\r\n");
        let answer = exchange(big).await;
        assert!(
            answer.starts_with("HTTP/1.1 431 Request Header Fields Too Large"),
            "{answer}"
        );
        let answer = exchange(b"PUT / HTTP/1.1\r\nContent-Length: 11\r\n\r\n".to_vec()).await;
        assert!(
            answer.starts_with("HTTP/1.1 413 Payload Too Large"),
            "{answer}"
        );
        assert!(
            answer.contains(r#""reason":"RequestEntityTooLarge""#)
                && answer.contains("Request entity too large: limit is 10"),
            "{answer}"
        );
    }
}
