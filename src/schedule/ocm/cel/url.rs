//! Kubernetes' URL CEL library as OCM registers it (`library.URLs()` in sdk-go's
//! `BaseEnvOpts`; k8s.io/apiserver pkg/cel/library/urls.go): `url(string)`, `isURL(string)`,
//! and on a URL `getScheme`, `getHost`, `getHostname`, `getPort`, `getEscapedPath`,
//! `getQuery`; URLs compare equal when Go would print them the same.
//!
//! The library is Go's `net/url`: a string is a URL when `url.ParseRequestURI` accepts it (an
//! absolute URI or an absolute path), and the value is what `url.Parse` makes of it. WHATWG
//! parsers (the `url` crate) differ from Go's on exactly the cases users test (`https://a:b:c/`,
//! escapes, hosts, paths without an authority), so [`GoUrl`] follows `net/url`'s `parse`,
//! `parseAuthority`, `parseHost`, `unescape`, `EscapedPath` and `ParseQuery`, with their error
//! texts. Equality compares the parsed parts (`URL.String()` prints them back; two URLs whose
//! user info is escaped differently but means the same are equal in Go and not here).
//!
//! Pure: values in, values out.

use cel::extractors::This;
use cel::objects::{Key, Map, Opaque};
use cel::{Context, DeclarationError, ExecutionError, FunctionContext, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// A `*url.URL`, the parts the library reads.
#[derive(Debug, Clone, Default)]
pub(super) struct GoUrl {
    scheme: String,
    opaque: String,
    user: Option<String>,
    host: String,
    path: String,
    raw_path: String,
    force_query: bool,
    raw_query: String,
    fragment: String,
}

/// Equal when `URL.String()` is: the path compares escaped, as it prints.
impl PartialEq for GoUrl {
    fn eq(&self, o: &Self) -> bool {
        let key = |u: &GoUrl| {
            (
                u.scheme.clone(),
                u.opaque.clone(),
                u.user.clone(),
                u.host.clone(),
                u.escaped_path(),
                u.force_query,
                u.raw_query.clone(),
                u.fragment.clone(),
            )
        };
        key(self) == key(o)
    }
}

impl Eq for GoUrl {}

impl Opaque for GoUrl {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.URL"
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    Zone,
    UserPassword,
    QueryComponent,
    Fragment,
}

/// `shouldEscape`.
fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if matches!(mode, Mode::Host | Mode::Zone) && b"!$&'()*+,;=:[]<>\"".contains(&c) {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => {
            return match mode {
                Mode::Path => c == b'?',
                Mode::UserPassword => matches!(c, b'@' | b'/' | b'?' | b':'),
                Mode::QueryComponent => true,
                Mode::Fragment => false,
                Mode::Host | Mode::Zone => true,
            };
        }
        _ => {}
    }
    if mode == Mode::Fragment && matches!(c, b'!' | b'(' | b')' | b'*') {
        return false;
    }
    true
}

fn unhex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        b'A'..=b'F' => c - b'A' + 10,
        _ => 0,
    }
}

/// `unescape`: `%XX` decoded, checked as Go checks it per component.
fn unescape(s: &str, mode: Mode) -> Result<String, String> {
    let b = s.as_bytes();
    let escape_error = |i: usize| format!("invalid URL escape {:?}", &s[i..(i + 3).min(s.len())]);
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                if i + 2 >= b.len()
                    || !b[i + 1].is_ascii_hexdigit()
                    || !b[i + 2].is_ascii_hexdigit()
                {
                    return Err(escape_error(i));
                }
                let percent25 = &s[i..i + 3] == "%25";
                if mode == Mode::Host && unhex(b[i + 1]) < 8 && !percent25 {
                    return Err(escape_error(i));
                }
                if mode == Mode::Zone {
                    let v = unhex(b[i + 1]) << 4 | unhex(b[i + 2]);
                    if !percent25 && v != b' ' && should_escape(v, Mode::Host) {
                        return Err(escape_error(i));
                    }
                }
                i += 3;
            }
            c => {
                if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape(c, mode) {
                    return Err(format!("invalid character {:?} in host name", &s[i..i + 1]));
                }
                i += 1;
            }
        }
    }
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                out.push(unhex(b[i + 1]) << 4 | unhex(b[i + 2]));
                i += 3;
            }
            b'+' if mode == Mode::QueryComponent => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// `escape`.
fn escape(s: &str, mode: Mode) -> String {
    let mut out = String::with_capacity(s.len());
    for &c in s.as_bytes() {
        if should_escape(c, mode) {
            if c == b' ' && mode == Mode::QueryComponent {
                out.push('+');
            } else {
                out.push_str(&format!("%{c:02X}"));
            }
        } else {
            out.push(c as char);
        }
    }
    out
}

/// `validEncoded` for paths.
fn valid_encoded(s: &str) -> bool {
    s.bytes()
        .all(|c| b"!$&'()*+,;=:@[]%".contains(&c) || !should_escape(c, Mode::Path))
}

/// `validOptionalPort`.
fn valid_optional_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// `getScheme`: the scheme and the rest, or no scheme.
fn split_scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err("missing protocol scheme".into()),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

/// `parseHost` (Go 1.26, which OCM builds with): an IP literal must hold an IPv6 address,
/// and an `http`/`https` host has at most one colon, before its port.
fn parse_host(scheme: &str, host: &str) -> Result<String, String> {
    match host.rfind('[') {
        Some(i) if i > 0 => return Err("invalid IP-literal".into()),
        Some(_) => {
            let Some(close) = host.rfind(']') else {
                return Err("missing ']' in host".into());
            };
            let colon_port = &host[close + 1..];
            if !valid_optional_port(colon_port) {
                return Err(format!("invalid port {colon_port:?} after host"));
            }
            let port = unescape(colon_port, Mode::Host)?;
            let hostname = &host[1..close];
            let unescaped = match hostname.find("%25") {
                Some(zone) => {
                    unescape(&hostname[..zone], Mode::Host)?
                        + &unescape(&hostname[zone..], Mode::Zone)?
                }
                None => unescape(hostname, Mode::Host)?,
            };
            // netip.ParseAddr: an IPv6 address with an optional, non-empty zone.
            let (addr, zone) = unescaped.split_once('%').unwrap_or((&unescaped, "-"));
            if addr.parse::<std::net::Ipv4Addr>().is_ok() {
                return Err("invalid IP-literal".into());
            }
            if zone.is_empty() {
                return Err(format!(
                    "invalid host: ParseAddr({unescaped:?}): zone must be a non-empty string"
                ));
            }
            if let Err(e) = addr.parse::<std::net::Ipv6Addr>() {
                return Err(format!("invalid host: ParseAddr({unescaped:?}): {e}"));
            }
            return Ok(format!("[{unescaped}]{port}"));
        }
        None => {
            if let Some(first) = host.find(':') {
                let last = host.rfind(':').unwrap_or(first);
                let strict = scheme == "http" || scheme == "https";
                let colon_port = &host[if strict { first } else { last }..];
                if !valid_optional_port(colon_port) {
                    return Err(format!("invalid port {colon_port:?} after host"));
                }
            }
        }
    }
    unescape(host, Mode::Host)
}

/// `validUserinfo`.
fn valid_userinfo(s: &str) -> bool {
    s.chars()
        .all(|r| r.is_ascii_alphanumeric() || "-._:~!$&'()*+,;=%@".contains(r))
}

impl GoUrl {
    /// `url.parse(rawURL, viaRequest)`.
    fn parse(raw: &str, via_request: bool) -> Result<GoUrl, String> {
        if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Err("net/url: invalid control character in URL".into());
        }
        if raw.is_empty() && via_request {
            return Err("empty url".into());
        }
        let mut url = GoUrl::default();
        if raw == "*" {
            url.path = "*".into();
            return Ok(url);
        }
        let (scheme, mut rest) = split_scheme(raw)?;
        url.scheme = scheme.to_ascii_lowercase();
        if rest.ends_with('?') && rest.matches('?').count() == 1 {
            url.force_query = true;
            rest = &rest[..rest.len() - 1];
        } else if let Some((r, q)) = rest.split_once('?') {
            url.raw_query = q.into();
            rest = r;
        }
        if !rest.starts_with('/') {
            if !url.scheme.is_empty() {
                url.opaque = rest.into();
                return Ok(url);
            }
            if via_request {
                return Err("invalid URI for request".into());
            }
            if rest.split('/').next().is_some_and(|s| s.contains(':')) {
                return Err("first path segment in URL cannot contain colon".into());
            }
        }
        if (!url.scheme.is_empty() || !via_request && !rest.starts_with("///"))
            && rest.starts_with("//")
        {
            let (authority, path) = match rest[2..].find('/') {
                Some(i) => (&rest[2..2 + i], &rest[2 + i..]),
                None => (&rest[2..], ""),
            };
            let (user, host) = match authority.rfind('@') {
                Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
                None => (None, authority),
            };
            url.host = parse_host(&url.scheme, host)?;
            if let Some(user) = user {
                if !valid_userinfo(user) {
                    return Err("net/url: invalid userinfo".into());
                }
                let (name, password) = user.split_once(':').unwrap_or((user, ""));
                // Both parts are unescaped only to be checked: equality compares the raw text.
                unescape(name, Mode::UserPassword)?;
                unescape(password, Mode::UserPassword)?;
                url.user = Some(user.into());
            }
            rest = path;
        }
        url.path = unescape(rest, Mode::Path)?;
        if escape(&url.path, Mode::Path) != rest {
            url.raw_path = rest.into();
        }
        Ok(url)
    }

    /// `url.Parse`: the fragment cut off first.
    fn parse_reference(raw: &str) -> Result<GoUrl, String> {
        let (u, frag) = raw.split_once('#').unwrap_or((raw, ""));
        let mut url = GoUrl::parse(u, false).map_err(|e| format!("parse {u:?}: {e}"))?;
        if !frag.is_empty() {
            url.fragment =
                unescape(frag, Mode::Fragment).map_err(|e| format!("parse {raw:?}: {e}"))?;
        }
        Ok(url)
    }

    /// `url.ParseRequestURI` must accept the text, and the value is `url.Parse`'s (urls.go).
    pub(super) fn from_text(raw: &str) -> Result<GoUrl, String> {
        GoUrl::parse(raw, true).map_err(|e| format!("parse {raw:?}: {e}"))?;
        GoUrl::parse_reference(raw)
    }

    /// `url.ParseRequestURI`'s error for `raw`, if any (the format library's `uri`).
    pub(super) fn request_uri_error(raw: &str) -> Option<String> {
        GoUrl::parse(raw, true)
            .err()
            .map(|e| format!("parse {raw:?}: {e}"))
    }

    /// `URL.EscapedPath`.
    fn escaped_path(&self) -> String {
        if !self.raw_path.is_empty()
            && valid_encoded(&self.raw_path)
            && unescape(&self.raw_path, Mode::Path).is_ok_and(|p| p == self.path)
        {
            return self.raw_path.clone();
        }
        if self.path == "*" {
            return "*".into();
        }
        escape(&self.path, Mode::Path)
    }

    /// `splitHostPort` of the host.
    fn host_port(&self) -> (&str, &str) {
        let mut host = self.host.as_str();
        let mut port = "";
        if let Some(i) = host.rfind(':') {
            if valid_optional_port(&host[i..]) {
                port = &host[i + 1..];
                host = &host[..i];
            }
        }
        if host.starts_with('[') && host.ends_with(']') {
            host = &host[1..host.len() - 1];
        }
        (host, port)
    }

    /// `url.ParseQuery` of the raw query, errors skipped as `URL.Query` skips them.
    fn query(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for part in self.raw_query.split('&') {
            if part.contains(';') || part.is_empty() {
                continue;
            }
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            let (Ok(k), Ok(v)) = (
                unescape(k, Mode::QueryComponent),
                unescape(v, Mode::QueryComponent),
            ) else {
                continue;
            };
            match out.iter_mut().find(|(key, _)| *key == k) {
                Some((_, values)) => values.push(v),
                None => out.push((k, vec![v])),
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// CEL functions
// ---------------------------------------------------------------------------------------------

/// `url(string)`.
pub(super) fn url(ftx: &FunctionContext, s: Arc<String>) -> Result<Value, ExecutionError> {
    GoUrl::from_text(&s)
        .map(|u| Value::Opaque(Arc::new(u)))
        .map_err(|e| {
            ftx.error(format!(
                "URL parse error during conversion from string: {e}"
            ))
        })
}

/// `isURL(string)`.
pub(super) fn is_url(s: Arc<String>) -> bool {
    GoUrl::parse(&s, true).is_ok()
}

/// A URL's part, by function name.
pub(super) fn part(ftx: &FunctionContext, this: &Value) -> Result<Value, ExecutionError> {
    let u = match this {
        Value::Opaque(o) => o.downcast_ref::<GoUrl>(),
        _ => None,
    }
    .ok_or_else(|| ftx.error("no such overload"))?;
    Ok(match ftx.name {
        "getScheme" => Value::from(u.scheme.as_str()),
        "getHost" => Value::from(u.host.as_str()),
        "getHostname" => Value::from(u.host_port().0),
        "getPort" => Value::from(u.host_port().1),
        "getEscapedPath" => Value::from(u.escaped_path()),
        "getQuery" => {
            let map: HashMap<Key, Value> = u
                .query()
                .into_iter()
                .map(|(k, vs)| {
                    let list: Vec<Value> = vs.into_iter().map(Value::from).collect();
                    (Key::String(Arc::new(k)), Value::List(Arc::new(list)))
                })
                .collect();
            Value::Map(Map { map: Arc::new(map) })
        }
        _ => return Err(ftx.error("no such overload")),
    })
}

/// Registers the library's functions on an evaluation context.
pub(super) fn register(c: &mut Context<'_, '_>) -> Result<(), DeclarationError> {
    c.add_function("url", url)?;
    c.add_function("isURL", is_url)?;
    for name in [
        "getScheme",
        "getHost",
        "getHostname",
        "getPort",
        "getEscapedPath",
        "getQuery",
    ] {
        c.add_function(name, |ftx: &FunctionContext, This(v): This<Value>| {
            part(ftx, &v)
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> GoUrl {
        GoUrl::from_text(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    /// urls.go's documented examples, and Go's net/url on the edges (checked with cel-go and
    /// k8s.io/apiserver v0.37.2 by hand).
    #[test]
    fn parts_are_go_net_url_parts() {
        let full = u("https://user:pass@example.com:80/path?query=val#fragment");
        assert_eq!(full.host, "example.com:80");
        assert_eq!(full.host_port(), ("example.com", "80"));
        assert_eq!(u("https://[::1]:80/").host_port(), ("::1", "80"));
        assert_eq!(u("https://[::1]/").host, "[::1]");
        assert_eq!(u("https://example.com:/").host_port().1, "");
        assert_eq!(u("/path").scheme, "");
        assert_eq!(u("HTTPS://example.com/").scheme, "https");
        assert_eq!(
            u("https://example.com/path with spaces/").escaped_path(),
            "/path%20with%20spaces/"
        );
        assert_eq!(u("https://example.com").escaped_path(), "");
        assert_eq!(u("https://example.com/a%2Fb").escaped_path(), "/a%2Fb");
        assert_eq!(u("https://example.com/%7Efoo").escaped_path(), "/%7Efoo");
        assert_eq!(u("https://example.com/café").escaped_path(), "/caf%C3%A9");
        assert_eq!(u("*").escaped_path(), "*");
        assert_eq!(u("mailto:someone@example.com").escaped_path(), "");
        assert_eq!(u("//example.com/a").host, "example.com");
        assert_eq!(u("http:///path").host, "");
        assert_eq!(u("https://user:p@ss@example.com/").host, "example.com");
        assert_eq!(
            u("https://[fe80::1%25en0]:8080/").host_port().0,
            "fe80::1%en0"
        );
        let q = |s: &str| u(s).query();
        assert_eq!(
            q("https://example.com/path?k1=a&k2=b&k2=c"),
            vec![
                ("k1".into(), vec!["a".into()]),
                ("k2".into(), vec!["b".into(), "c".into()])
            ]
        );
        assert_eq!(
            q("https://example.com/path?key with spaces=value with spaces"),
            vec![("key with spaces".into(), vec!["value with spaces".into()])]
        );
        assert!(q("https://example.com/path?").is_empty());
        assert_eq!(
            q("https://example.com/p?a=1;b=2&c=3"),
            vec![("c".into(), vec!["3".into()])]
        );
        assert_eq!(
            q("https://example.com/p?a+b=c%20d&&=x&e"),
            vec![
                ("a b".into(), vec!["c d".into()]),
                ("".into(), vec!["x".into()]),
                ("e".into(), vec!["".into()]),
            ]
        );
    }

    #[test]
    fn errors_are_go_errors() {
        let e = |s: &str| GoUrl::from_text(s).unwrap_err();
        assert_eq!(
            e("https://a:b:c/"),
            "parse \"https://a:b:c/\": invalid port \":b:c\" after host"
        );
        assert_eq!(
            e("../relative-path"),
            "parse \"../relative-path\": invalid URI for request"
        );
        assert_eq!(
            e("https://example.com/a%zzb"),
            "parse \"https://example.com/a%zzb\": invalid URL escape \"%zz\""
        );
        assert_eq!(
            e("https://exa mple.com/"),
            "parse \"https://exa mple.com/\": invalid character \" \" in host name"
        );
        assert_eq!(
            e("https://ex%41mple.com/"),
            "parse \"https://ex%41mple.com/\": invalid URL escape \"%41\""
        );
        assert_eq!(
            e("https://example.com/a?b#c%zz"),
            "parse \"https://example.com/a?b#c%zz\": invalid URL escape \"%zz\""
        );
        assert_eq!(
            e("https://example.com/a\tb"),
            "parse \"https://example.com/a\\tb\": net/url: invalid control character in URL"
        );
        assert!(GoUrl::from_text("").is_err());
        assert!(GoUrl::from_text("*").is_ok());
    }

    /// urls.go's documented examples through the CEL environment (k8s.io/apiserver
    /// pkg/cel/library has no URL test of its own), checked with cel-go and k8s.io/apiserver
    /// v0.37.2 by hand.
    #[test]
    fn documented_examples() {
        use crate::schedule::ocm::cel::{run_cases, Want};
        let t = || Want::Value(Value::Bool(true));
        let f = || Want::Value(Value::Bool(false));
        let s = |v: &str| Want::Value(Value::from(v));
        run_cases(&[
            ("url", "url('https://user:pass@example.com:80/path?query=val#fragment') == url('https://user:pass@example.com:80/path?query=val#fragment')", t()),
            ("url absolute path", "url('/absolute-path').getEscapedPath()", s("/absolute-path")),
            ("url bad port", "url('https://a:b:c/')", Want::EvalError("URL parse error during conversion from string: parse \"https://a:b:c/\": invalid port \":b:c\" after host")),
            ("url relative", "url('../relative-path')", Want::EvalError("invalid URI for request")),
            ("isURL", "isURL('https://user:pass@example.com:80/path?query=val#fragment')", t()),
            ("isURL absolute path", "isURL('/absolute-path')", t()),
            ("isURL bad port", "isURL('https://a:b:c/')", f()),
            ("isURL relative", "isURL('../relative-path')", f()),
            ("getScheme none", "url('/path').getScheme()", s("")),
            ("getScheme", "url('https://example.com/').getScheme()", s("https")),
            ("getHost port", "url('https://example.com:80/').getHost()", s("example.com:80")),
            ("getHost", "url('https://example.com/').getHost()", s("example.com")),
            ("getHost ipv6 port", "url('https://[::1]:80/').getHost()", s("[::1]:80")),
            ("getHost ipv6", "url('https://[::1]/').getHost()", s("[::1]")),
            ("getHost none", "url('/path').getHost()", s("")),
            ("getHostname", "url('https://example.com:80/').getHostname()", s("example.com")),
            ("getHostname ipv4", "url('https://127.0.0.1:80/').getHostname()", s("127.0.0.1")),
            ("getHostname ipv6", "url('https://[::1]:80/').getHostname()", s("::1")),
            ("getHostname none", "url('/path').getHostname()", s("")),
            ("getPort", "url('https://example.com:80/').getPort()", s("80")),
            ("getPort none", "url('https://example.com/').getPort()", s("")),
            ("getPort path", "url('/path').getPort()", s("")),
            ("getEscapedPath", "url('https://example.com/path').getEscapedPath()", s("/path")),
            ("getEscapedPath spaces", "url('https://example.com/path with spaces/').getEscapedPath()", s("/path%20with%20spaces/")),
            ("getEscapedPath none", "url('https://example.com').getEscapedPath()", s("")),
            ("getQuery", "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}", t()),
            ("getQuery spaces", "url('https://example.com/path?key with spaces=value with spaces').getQuery() == {'key with spaces': ['value with spaces']}", t()),
            ("getQuery empty", "url('https://example.com/path?').getQuery() == {}", t()),
            ("getQuery none", "url('https://example.com/path').getQuery() == {}", t()),
            ("different URLs", "url('https://example.com/a') == url('https://example.com/b')", f()),
            ("equal printed", "url('http://x/a%20b') == url('http://x/a b')", t()),
            ("fragments", "url('https://example.com/a?x=1#frag') == url('https://example.com/a?x=1')", f()),
            ("getHost of a string", "'https://example.com'.getHost()", Want::CompileError("found no matching overload for 'getHost'")),
        ]);
    }
}
