//! A smart-HTTP git server for the end-to-end tests: the real `git http-backend` (CGI) behind
//! HTTP basic authentication, on a loopback port, served by hyper on its own thread. Requests
//! without the right credentials get 401 with `WWW-Authenticate: Basic`, as a Git host does.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use base64::Engine;

pub struct GitHttp {
    /// `http://127.0.0.1:PORT`; a repository `R` under the root is `{base}/R`.
    pub base: String,
    /// Every `Authorization` header value received, for tests to look at.
    pub seen: Arc<Mutex<Vec<String>>>,
}

impl GitHttp {
    /// Serves the bare repositories under `root` to `user`:`password` only, over HTTPS with
    /// the certificate and key of [`TestCa::leaf`] (gix sends credentials over https only).
    pub fn start(root: &Path, user: &str, password: &str, ca: &TestCa) -> GitHttp {
        use rustls::pki_types::pem::PemObject;
        let certs: Vec<rustls::pki_types::CertificateDer<'static>> =
            rustls::pki_types::CertificateDer::pem_file_iter(&ca.leaf_cert)
                .unwrap()
                .map(Result::unwrap)
                .collect();
        let key = rustls::pki_types::PrivateKeyDer::from_pem_file(&ca.leaf_key).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let base = format!("https://{}", listener.local_addr().unwrap());
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        );
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (root, user, state) = (root.to_path_buf(), user.to_string(), seen.clone());
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
                    let (root, user, expected, seen) =
                        (root.clone(), user.clone(), expected.clone(), state.clone());
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        let Ok(stream) = acceptor.accept(stream).await else {
                            return;
                        };
                        let service = hyper::service::service_fn(move |req| {
                            let (root, user, expected, seen) =
                                (root.clone(), user.clone(), expected.clone(), seen.clone());
                            async move { handle(req, &root, &user, &expected, &seen).await }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
        });
        GitHttp { base, seen }
    }
}

async fn handle(
    req: hyper::Request<hyper::body::Incoming>,
    root: &Path,
    user: &str,
    expected: &str,
    seen: &Mutex<Vec<String>>,
) -> Result<hyper::Response<axum::body::Body>, std::convert::Infallible> {
    let auth = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    if !auth.is_empty() {
        seen.lock().unwrap().push(auth.clone());
    }
    if auth != expected {
        return Ok(hyper::Response::builder()
            .status(401)
            .header("www-authenticate", "Basic realm=\"git\"")
            .body(axum::body::Body::from("unauthorized"))
            .unwrap());
    }
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let (method, path, query) = (
        req.method().to_string(),
        req.uri().path().to_string(),
        req.uri().query().unwrap_or_default().to_string(),
    );
    let (content_type, protocol, encoding) = (
        header("content-type"),
        header("git-protocol"),
        header("content-encoding"),
    );
    let body = axum::body::to_bytes(axum::body::Body::new(req.into_body()), usize::MAX)
        .await
        .unwrap();
    let root: PathBuf = root.to_path_buf();
    let user = user.to_string();
    let out = tokio::task::spawn_blocking(move || {
        let mut child = Command::new("git")
            .arg("http-backend")
            .env("GIT_PROJECT_ROOT", &root)
            .env("GIT_HTTP_EXPORT_ALL", "1")
            .env("REQUEST_METHOD", method)
            .env("PATH_INFO", path)
            .env("QUERY_STRING", query)
            .env("CONTENT_TYPE", content_type)
            .env("CONTENT_LENGTH", body.len().to_string())
            .env("HTTP_CONTENT_ENCODING", encoding)
            .env("GIT_PROTOCOL", protocol)
            .env("REMOTE_USER", user)
            .env("REMOTE_ADDR", "127.0.0.1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&body).unwrap();
        child.wait_with_output().unwrap().stdout
    })
    .await
    .unwrap();
    // CGI: headers, an empty line, the body.
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| out.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)))
        .unwrap_or((out.len(), 0));
    let head = String::from_utf8_lossy(&out[..split.0]).to_string();
    let mut response = hyper::Response::builder();
    for line in head.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code: u16 = value
                .split_whitespace()
                .next()
                .and_then(|c| c.parse().ok())
                .unwrap_or(500);
            response = response.status(code);
        } else {
            response = response.header(name, value);
        }
    }
    let body = out[(split.0 + split.1).min(out.len())..].to_vec();
    Ok(response.body(axum::body::Body::from(body)).unwrap())
}

/// A certificate authority and a certificate for 127.0.0.1 signed by it, made with the openssl
/// CLI in a temporary folder (no key is kept in the repository).
pub struct TestCa {
    _dir: tempfile::TempDir,
    pub ca_cert: PathBuf,
    pub leaf_cert: PathBuf,
    pub leaf_key: PathBuf,
}

impl TestCa {
    pub fn new() -> TestCa {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let openssl = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(d)
                .output()
                .expect("openssl runs");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        openssl(
            &[
                &["req", "-x509"][..],
                &ec,
                &[
                    "-keyout",
                    "ca.key",
                    "-out",
                    "ca.pem",
                    "-days",
                    "2",
                    "-subj",
                    "/CN=gitfleet test CA",
                ],
            ]
            .concat(),
        );
        openssl(
            &[
                &["req"][..],
                &ec,
                &[
                    "-keyout",
                    "leaf.key",
                    "-out",
                    "leaf.csr",
                    "-subj",
                    "/CN=127.0.0.1",
                ],
            ]
            .concat(),
        );
        std::fs::write(
            d.join("leaf.ext"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        openssl(&[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.pem",
            "-days",
            "1",
            "-extfile",
            "leaf.ext",
        ]);
        TestCa {
            ca_cert: d.join("ca.pem"),
            leaf_cert: d.join("leaf.pem"),
            leaf_key: d.join("leaf.key"),
            _dir: dir,
        }
    }
}
