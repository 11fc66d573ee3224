//! The kube client gitfleet makes for a cluster it talks to, a member or the hosting cluster:
//! the stack kube builds from a kubeconfig (base URI, auth, extra headers, TLS, timeouts), with
//! connections sized for a fleet. One daemon holds a client for each of a thousand members and
//! a connection for each of their watches; kube's defaults, made for one client per process,
//! would make those a large part of its memory at rest.
//!
//! Over TLS the client offers HTTP/2 (ALPN `h2`, then `http/1.1`), as client-go does: a real API
//! server takes it, and a cluster's requests and every watch of the client then share one
//! connection instead of holding one each. That matters most for the hosting cluster under
//! `--shards`, where a replica has many requests at once (orders, reports, claims) and a watch
//! of each: over HTTP/1.1 each would keep a connection, and its read buffer, pooled. kube's own
//! client speaks HTTP/1.1 only, because its websocket upgrades (exec, attach, port-forward) need
//! it; gitfleet makes none. A plain `http://` server (a `kubectl proxy`, the simulator) is spoken
//! to in HTTP/1.1.

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt;
use tower::ServiceBuilder;

/// Each connection's read buffer. hyper's adaptive buffer grows to fit the largest response
/// the connection read (up to 400 KB) and keeps that size while the connection is pooled, one
/// per member, at rest; and a member has a connection for each watch too. Most of what they
/// read (watch events, an object) fits 4 KiB; a larger response is read in more reads, not
/// refused.
const READ_BUFFER: usize = 4 * 1024;

/// The TLS sessions a client keeps for resumption: it talks to one API server. rustls's
/// default keeps 256, allocated up front: 14 KB a member.
const TLS_SESSIONS: usize = 8;

/// The client for `config`, as `kube::Client::try_from` builds it but for the sizes above and
/// kube's per-request tracing spans (debug level, never shown by gitfleet's filters). Retries
/// are gitfleet's own ([`super::retry`]); a proxy is refused, as kube without its proxy
/// features refuses it.
pub fn client(config: kube::Config) -> Result<kube::Client, String> {
    if let Some(proxy) = &config.proxy_url {
        return Err(format!("proxy-url {proxy} is not supported"));
    }
    let mut tls = config.rustls_client_config().map_err(text)?;
    tls.resumption = rustls::client::Resumption::in_memory_sessions(TLS_SESSIONS);
    let mut https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = rustls::pki_types::ServerName::try_from(name.clone())
            .map_err(|e| format!("tls-server-name {name:?}: {e}"))?;
        https = https.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let mut connector =
        hyper_timeout::TimeoutConnector::new(https.enable_all_versions().wrap_connector(http));
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let hyper = hyper_util::client::legacy::Builder::new(TokioExecutor::new())
        .http1_read_buf_exact_size(READ_BUFFER)
        .build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer().map_err(text)?)
        .layer(config.extra_headers_layer().map_err(text)?)
        .map_err(tower::BoxError::from)
        .service(hyper);
    Ok(kube::Client::new(service, config.default_namespace))
}

fn text(e: kube::Error) -> String {
    format!("{e:#}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn config(server: &str, extra_cluster: &str) -> kube::Config {
        let yaml = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: m\n\
             clusters: [{{name: m, cluster: {{server: '{server}'{extra_cluster}}}}}]\n\
             users: [{{name: m, user: {{token: sekret, as: alice}}}}]\n\
             contexts: [{{name: m, context: {{cluster: m, user: m}}}}]\n"
        );
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
        kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap()
    }

    /// The client sends the kubeconfig's credentials and impersonation, and reads a response
    /// many times its read buffer whole.
    #[tokio::test]
    async fn a_client_authenticates_impersonates_and_reads_a_response_larger_than_its_buffer() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = format!("http://{}", listener.local_addr().unwrap());
        let body = format!("{{\"items\":\"{}\"}}", "x".repeat(20 * READ_BUFFER));
        let served = body.clone();
        let head = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let mut byte = [0u8];
                stream.read_exact(&mut byte).await.unwrap();
                head.push(byte[0]);
            }
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{served}",
                served.len()
            );
            stream.write_all(response.as_bytes()).await.unwrap();
            String::from_utf8(head).unwrap().to_ascii_lowercase()
        });
        let client = client(config(&server, "").await).unwrap();
        let got = client
            .request_text(
                http::Request::get("/api/v1/configmaps")
                    .body(vec![])
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(got, body);
        let head = head.await.unwrap();
        assert!(
            head.starts_with("get /api/v1/configmaps http/1.1"),
            "{head}"
        );
        assert!(head.contains("authorization: bearer sekret"), "{head}");
        assert!(head.contains("impersonate-user: alice"), "{head}");
    }

    /// A proxy is refused naming it, not silently bypassed.
    #[tokio::test]
    async fn a_proxy_is_refused_naming_it() {
        let config = config(
            "https://m.example",
            ", proxy-url: 'http://proxy.example:3128'",
        )
        .await;
        let Err(err) = client(config) else {
            panic!("a client through a proxy");
        };
        assert!(err.contains("proxy-url http://proxy.example:3128"), "{err}");
    }
}
