//! Who may read the listener: with `run --token-file`, the status API (`/api/v1`) and the
//! dashboard ask for its token; the probes (`/healthz`, `/readyz`), `/metrics` and the webhook
//! (which has its own secret) never do, since a kubelet or Prometheus has no token to send.
//!
//! A request shows the token as `Authorization: Bearer <token>` or in the dashboard's cookie
//! (which the dashboard sets from `?token=`, see [`super::dashboard`]). Tokens are compared in
//! constant time, as SHA-256 digests so their lengths do not show either. The token is never
//! logged, and no answer repeats what a client sent.
//!
//! What it must not know: what the routes behind it serve.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::server::Api;

/// The dashboard's cookie holding the token.
pub const COOKIE: &str = "gitfleet_dashboard";

/// Whether `given` is the token, compared in constant time.
pub fn same_token(token: &[u8], given: &str) -> bool {
    let (a, b) = (
        Sha256::digest(token),
        Sha256::digest(given.trim().as_bytes()),
    );
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// Whether a request's headers show the token: a bearer header, else the dashboard's cookie.
pub fn shows(expected: &[u8], headers: &HeaderMap) -> bool {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    bearer
        .or(cookie(headers, COOKIE))
        .is_some_and(|t| same_token(expected, t))
}

/// The status API's guard: without the right token, 401 with a JSON problem saying how to
/// send one.
pub async fn api(State(api): State<Api>, request: Request, next: Next) -> Response {
    let Some(expected) = api.token.as_deref() else {
        return next.run(request).await;
    };
    if shows(expected, request.headers()) {
        return next.run(request).await;
    }
    let sent = request.headers().contains_key(header::AUTHORIZATION);
    let message = if sent {
        "this token is not the API's token (the daemon's --token-file)"
    } else {
        "this API needs the daemon's token (its --token-file): send `Authorization: Bearer \
         <token>`; gitfleet status, wait and plan --server take --token-file or \
         GITFLEET_TOKEN_FILE"
    };
    let mut res = super::server::problem(StatusCode::UNAUTHORIZED, message);
    res.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer realm=\"gitfleet\""),
    );
    res.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token(b"s3cret", "s3cret"));
        assert!(same_token(b"s3cret", "s3cret\n"));
        assert!(!same_token(b"s3cret", "s3cre"));
        assert!(!same_token(b"s3cret", ""));
    }

    #[test]
    fn a_bearer_header_or_the_cookie_shows_the_token() {
        let with = |name: header::HeaderName, value: &str| {
            let mut h = HeaderMap::new();
            h.insert(name, value.parse().unwrap());
            h
        };
        assert!(shows(
            b"s3cret",
            &with(header::AUTHORIZATION, "Bearer s3cret")
        ));
        assert!(shows(
            b"s3cret",
            &with(header::COOKIE, "a=b; gitfleet_dashboard=s3cret")
        ));
        assert!(!shows(
            b"s3cret",
            &with(header::AUTHORIZATION, "Bearer nope")
        ));
        assert!(!shows(
            b"s3cret",
            &with(header::AUTHORIZATION, "Basic s3cret")
        ));
        assert!(!shows(b"s3cret", &HeaderMap::new()));
    }
}
