//! Kubernetes' IP and CIDR CEL libraries as OCM registers them (`library.IP()` and
//! `library.CIDR()` in sdk-go's `BaseEnvOpts`; k8s.io/apiserver pkg/cel/library/ip.go and
//! cidr.go):
//! - `ip(string)`, `isIP(string)`, `ip.isCanonical(string)`, `string(IP)`, and on an IP
//!   `family`, `isUnspecified`, `isLoopback`, `isLinkLocalMulticast`, `isLinkLocalUnicast`,
//!   `isGlobalUnicast` (Go's `netip.Addr` predicates);
//! - `cidr(string)`, `isCIDR(string)`, `string(CIDR)`, and on a CIDR `containsIP(IP|string)`,
//!   `containsCIDR(CIDR|string)`, `ip`, `masked`, `prefixLength`;
//! - the types `net.IP` and `net.CIDR`; equality by address (and prefix length).
//!
//! Addresses are parsed with Rust's std, which accepts what Go's `netip.ParseAddr` does for
//! these uses (dotted quads without leading zeros, RFC 4291 IPv6 text); zones and IPv4-mapped
//! IPv6 addresses are rejected, as Kubernetes rejects them. `netip.ParsePrefix`'s own checks
//! (one `/`, bits without sign or leading zero, in range) are Go's, with its error texts; the
//! reason std gives for an address that does not parse is worded differently from Go's.
//!
//! Pure: values in, values out.

use cel::common::types::{CelString, Type};
use cel::common::value::CowVal;
use cel::extractors::{Arguments, This};
use cel::objects::Opaque;
use cel::{Context, DeclarationError, Env, ExecutionError, FunctionContext, Value};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

pub(super) const IP_TYPE: &str = "net.IP";
pub(super) const CIDR_TYPE: &str = "net.CIDR";

/// A `net.IP` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Ip(IpAddr);

/// A `net.CIDR` value: an address (not necessarily masked) and a prefix length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Cidr {
    addr: IpAddr,
    bits: u8,
}

impl Opaque for Ip {
    fn runtime_type_name(&self) -> &str {
        IP_TYPE
    }
}

impl Opaque for Cidr {
    fn runtime_type_name(&self) -> &str {
        CIDR_TYPE
    }
}

/// ip.go `parseIPAddr`.
fn parse_ip(raw: &str) -> Result<IpAddr, String> {
    if raw.contains('%') {
        return Err(format!("IP address {raw:?} with zone value is not allowed"));
    }
    let addr: IpAddr = raw.parse().map_err(|e| {
        format!(
            "IP Address {raw:?} parse error during conversion from string: ParseAddr({raw:?}): {e}"
        )
    })?;
    if let IpAddr::V6(v6) = addr {
        if v6.to_ipv4_mapped().is_some() {
            return Err(format!("IPv4-mapped IPv6 address {raw:?} is not allowed"));
        }
    }
    Ok(addr)
}

/// cidr.go `parseCIDR` over `netip.ParsePrefix`.
fn parse_cidr(raw: &str) -> Result<Cidr, String> {
    let prefix_error = |msg: String| {
        format!("network address parse error during conversion from string: netip.ParsePrefix({raw:?}): {msg}")
    };
    let Some((addr, bits)) = raw.rsplit_once('/') else {
        return Err(prefix_error("no '/'".into()));
    };
    if addr.contains('%') {
        return Err(prefix_error(
            "IPv6 zones cannot be present in a prefix".into(),
        ));
    }
    let addr: IpAddr = addr
        .parse()
        .map_err(|e| prefix_error(format!("ParseAddr({addr:?}): {e}")))?;
    let bad_bits = || prefix_error(format!("bad bits after slash: {bits:?}"));
    if bits.len() > 1 && !matches!(bits.as_bytes()[0], b'1'..=b'9') {
        return Err(bad_bits());
    }
    let n: i64 = bits.parse().map_err(|_| bad_bits())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if !(0..=max).contains(&n) {
        return Err(prefix_error("prefix length out of range".into()));
    }
    if let IpAddr::V6(v6) = addr {
        if v6.to_ipv4_mapped().is_some() {
            return Err(format!("IPv4-mapped IPv6 address {raw:?} is not allowed"));
        }
    }
    Ok(Cidr {
        addr,
        bits: n as u8,
    })
}

/// The address with all but the first `bits` bits cleared (`netip.Addr.Prefix`).
fn mask(addr: IpAddr, bits: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
        }
    }
}

impl Cidr {
    /// `netip.Prefix.Contains`.
    fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.addr.is_ipv4() && mask(ip, self.bits) == mask(self.addr, self.bits)
    }

    /// `netip.Prefix.Overlaps`, then the operand's prefix no shorter (cidr.go).
    fn contains_cidr(&self, o: &Cidr) -> bool {
        if self.addr.is_ipv4() != o.addr.is_ipv4() {
            return false;
        }
        let min = self.bits.min(o.bits);
        let overlaps = self == o || min == 0 || mask(self.addr, min) == mask(o.addr, min);
        overlaps && self.bits <= o.bits
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.bits)
    }
}

/// Go's `netip.Addr` predicates (Rust's differ: Go's global unicast includes private ranges).
fn is_loopback(a: IpAddr) -> bool {
    a.is_loopback()
}

fn is_multicast(a: IpAddr) -> bool {
    a.is_multicast()
}

fn is_link_local_unicast(a: IpAddr) -> bool {
    match a {
        IpAddr::V4(v) => v.octets()[..2] == [169, 254],
        IpAddr::V6(v) => v.segments()[0] & 0xffc0 == 0xfe80,
    }
}

fn is_link_local_multicast(a: IpAddr) -> bool {
    match a {
        IpAddr::V4(v) => v.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v) => v.segments()[0] & 0xff0f == 0xff02,
    }
}

fn is_global_unicast(a: IpAddr) -> bool {
    if let IpAddr::V4(v) = a {
        if v.is_unspecified() || v.is_broadcast() {
            return false;
        }
    }
    !a.is_unspecified() && !is_loopback(a) && !is_multicast(a) && !is_link_local_unicast(a)
}

// ---------------------------------------------------------------------------------------------
// CEL functions
// ---------------------------------------------------------------------------------------------

fn opaque<T: Opaque>(v: T) -> Value {
    Value::Opaque(Arc::new(v))
}

pub(super) fn as_ip(v: &Value) -> Option<&Ip> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Ip>(),
        _ => None,
    }
}

pub(super) fn as_cidr(v: &Value) -> Option<&Cidr> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Cidr>(),
        _ => None,
    }
}

fn no_overload(ftx: &FunctionContext) -> ExecutionError {
    ftx.error("no such overload")
}

/// `ip(string)`, and `<CIDR>.ip()`: one name, both overloads.
pub(super) fn ip(
    ftx: &FunctionContext,
    this: Option<Value>,
    args: &[Value],
) -> Result<Value, ExecutionError> {
    match (this, args) {
        (None, [Value::String(s)]) => parse_ip(s).map(|a| opaque(Ip(a))).map_err(|e| ftx.error(e)),
        (Some(c), []) => as_cidr(&c)
            .map(|c| opaque(Ip(c.addr)))
            .ok_or_else(|| no_overload(ftx)),
        _ => Err(no_overload(ftx)),
    }
}

/// `isIP(string)`.
pub(super) fn is_ip(s: Arc<String>) -> bool {
    parse_ip(&s).is_ok()
}

/// `ip.isCanonical(string)`: the text is the address's canonical form.
pub(super) fn is_canonical(ftx: &FunctionContext, s: Arc<String>) -> Result<bool, ExecutionError> {
    let a = parse_ip(&s).map_err(|e| ftx.error(e))?;
    Ok(a.to_string() == *s)
}

/// An IP's predicate or family, by function name.
pub(super) fn ip_property(ftx: &FunctionContext, this: &Value) -> Result<Value, ExecutionError> {
    let Ip(a) = as_ip(this).ok_or_else(|| no_overload(ftx))?;
    let a = *a;
    Ok(match ftx.name {
        "family" => Value::Int(if a.is_ipv4() { 4 } else { 6 }),
        "isUnspecified" => Value::Bool(a.is_unspecified()),
        "isLoopback" => Value::Bool(is_loopback(a)),
        "isLinkLocalMulticast" => Value::Bool(is_link_local_multicast(a)),
        "isLinkLocalUnicast" => Value::Bool(is_link_local_unicast(a)),
        "isGlobalUnicast" => Value::Bool(is_global_unicast(a)),
        _ => return Err(no_overload(ftx)),
    })
}

/// `cidr(string)`.
pub(super) fn cidr(ftx: &FunctionContext, s: Arc<String>) -> Result<Value, ExecutionError> {
    parse_cidr(&s).map(opaque).map_err(|e| {
        ftx.error(format!(
            "network address parse error during conversion from string: {e}"
        ))
    })
}

/// `isCIDR(string)`.
pub(super) fn is_cidr(s: Arc<String>) -> bool {
    parse_cidr(&s).is_ok()
}

fn receiver<'a>(ftx: &FunctionContext, v: &'a Value) -> Result<&'a Cidr, ExecutionError> {
    as_cidr(v).ok_or_else(|| no_overload(ftx))
}

/// `<CIDR>.containsIP(IP|string)`: a string that is no IP is an error (Kubernetes passes the
/// parse error on as the argument).
pub(super) fn contains_ip(
    ftx: &FunctionContext,
    this: &Value,
    other: &Value,
) -> Result<bool, ExecutionError> {
    let c = receiver(ftx, this)?;
    let addr = match other {
        Value::String(s) => parse_ip(s).map_err(|_| no_overload(ftx))?,
        v => as_ip(v).ok_or_else(|| no_overload(ftx))?.0,
    };
    Ok(c.contains(addr))
}

/// `<CIDR>.containsCIDR(CIDR|string)`.
pub(super) fn contains_cidr(
    ftx: &FunctionContext,
    this: &Value,
    other: &Value,
) -> Result<bool, ExecutionError> {
    let c = receiver(ftx, this)?;
    let o = match other {
        Value::String(s) => parse_cidr(s).map_err(|_| no_overload(ftx))?,
        v => as_cidr(v).ok_or_else(|| no_overload(ftx))?.clone(),
    };
    Ok(c.contains_cidr(&o))
}

/// `<CIDR>.masked()`.
pub(super) fn masked(ftx: &FunctionContext, this: &Value) -> Result<Value, ExecutionError> {
    let c = receiver(ftx, this)?;
    Ok(opaque(Cidr {
        addr: mask(c.addr, c.bits),
        bits: c.bits,
    }))
}

/// `<CIDR>.prefixLength()`.
pub(super) fn prefix_length(ftx: &FunctionContext, this: &Value) -> Result<i64, ExecutionError> {
    Ok(i64::from(receiver(ftx, this)?.bits))
}

/// `string(IP)` and `string(CIDR)`: overloads of the standard `string`, so declared on the
/// environment, with the types `net.IP` and `net.CIDR`.
pub(super) fn declare(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_type(Type::new_opaque_type(IP_TYPE))?;
    env.add_type(Type::new_opaque_type(CIDR_TYPE))?;
    env.add_overload(
        "string",
        "ip_to_string",
        vec![Type::new_opaque_type(IP_TYPE)],
        to_string,
    )?;
    env.add_overload(
        "string",
        "cidr_to_string",
        vec![Type::new_opaque_type(CIDR_TYPE)],
        to_string,
    )
}

fn to_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let v = match args.first() {
        Some(a) => Value::try_from(a.as_ref())?,
        None => return Err(ExecutionError::function_error("string", "no such overload")),
    };
    let s = if let Some(Ip(a)) = as_ip(&v) {
        a.to_string()
    } else if let Some(c) = as_cidr(&v) {
        c.to_string()
    } else {
        return Err(ExecutionError::function_error("string", "no such overload"));
    };
    Ok(CowVal::owned(CelString::from(s)))
}

/// Registers the libraries' functions on an evaluation context.
pub(super) fn register(c: &mut Context<'_, '_>) -> Result<(), DeclarationError> {
    c.add_function("ip", |ftx: &FunctionContext, Arguments(args): Arguments| {
        let this = ftx
            .this
            .as_ref()
            .map(|t| Value::try_from(t.as_ref()))
            .transpose()?;
        ip(ftx, this, &args)
    })?;
    c.add_function("isIP", is_ip)?;
    c.add_function("ip.isCanonical", is_canonical)?;
    for name in [
        "family",
        "isUnspecified",
        "isLoopback",
        "isLinkLocalMulticast",
        "isLinkLocalUnicast",
        "isGlobalUnicast",
    ] {
        c.add_function(name, |ftx: &FunctionContext, This(v): This<Value>| {
            ip_property(ftx, &v)
        })?;
    }
    c.add_function("cidr", cidr)?;
    c.add_function("isCIDR", is_cidr)?;
    c.add_function(
        "containsIP",
        |ftx: &FunctionContext, This(v): This<Value>, o: Value| contains_ip(ftx, &v, &o),
    )?;
    c.add_function(
        "containsCIDR",
        |ftx: &FunctionContext, This(v): This<Value>, o: Value| contains_cidr(ftx, &v, &o),
    )?;
    c.add_function("masked", |ftx: &FunctionContext, This(v): This<Value>| {
        masked(ftx, &v)
    })?;
    c.add_function(
        "prefixLength",
        |ftx: &FunctionContext, This(v): This<Value>| prefix_length(ftx, &v),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ip.go's parse rules (ip_test.go "parse invalid ipv4"/"parse invalid ipv6", and the doc's
    /// zone and IPv4-mapped examples); Go's texts checked with cel-go and k8s.io/apiserver
    /// v0.37.2 by hand.
    #[test]
    fn parse_rejects_what_kubernetes_rejects() {
        for bad in [
            "192.168.0.1.0",
            "2001:db8:::68",
            "127.0.0.256",
            ":::1",
            "0127.0.0.1",
        ] {
            assert!(parse_ip(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_ip("fe80::1%eth0").unwrap_err(),
            "IP address \"fe80::1%eth0\" with zone value is not allowed"
        );
        assert_eq!(
            parse_ip("::ffff:1.2.3.4").unwrap_err(),
            "IPv4-mapped IPv6 address \"::ffff:1.2.3.4\" is not allowed"
        );
        // netip.Addr.String: RFC 5952, as std's Display.
        for (text, canonical) in [
            ("2001:DB8:0:0:1:0:0:1", "2001:db8::1:0:0:1"),
            ("2001:db8::0:1", "2001:db8::1"),
            ("::1.2.3.4", "::102:304"),
            ("::ffff:0:1.2.3.4", "::ffff:0:102:304"),
        ] {
            assert_eq!(parse_ip(text).unwrap().to_string(), canonical, "{text}");
        }
    }

    /// cidr_test.go "parse invalid ipv4", and netip.ParsePrefix's other errors (checked with
    /// cel-go and k8s.io/apiserver v0.37.2 by hand).
    #[test]
    fn prefix_errors_are_go_errors() {
        let e = |s: &str| parse_cidr(s).unwrap_err();
        assert_eq!(
            format!("network address parse error during conversion from string: {}", e("192.168.0.0/")),
            "network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix(\"192.168.0.0/\"): bad bits after slash: \"\""
        );
        assert!(e("192.168.0.0/024").ends_with("bad bits after slash: \"024\""));
        assert!(e("192.168.0.0/33").ends_with("prefix length out of range"));
        assert!(e("::1/129").ends_with("prefix length out of range"));
        assert!(e("192.168.0.0").ends_with("no '/'"));
        assert_eq!(
            e("::ffff:1.2.3.4/120"),
            "IPv4-mapped IPv6 address \"::ffff:1.2.3.4/120\" is not allowed"
        );
        // Host bits are kept, as netip.Prefix keeps them.
        assert_eq!(
            parse_cidr("192.168.0.1/24").unwrap().to_string(),
            "192.168.0.1/24"
        );
    }

    /// Go's `netip.Addr` predicates (ip.go's doc examples).
    #[test]
    fn predicates_are_go_predicates() {
        let a = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(is_link_local_multicast(a("224.0.0.1")));
        assert!(!is_link_local_multicast(a("224.0.1.1")));
        assert!(is_link_local_multicast(a("ff02::1")));
        assert!(is_link_local_multicast(a("ff12::1")));
        assert!(!is_link_local_multicast(a("fd00::1")));
        assert!(is_link_local_unicast(a("169.254.169.254")));
        assert!(is_link_local_unicast(a("fe80::1")));
        assert!(!is_link_local_unicast(a("fd80::1")));
        assert!(is_global_unicast(a("192.168.0.1")));
        assert!(is_global_unicast(a("10.0.0.1")));
        assert!(!is_global_unicast(a("255.255.255.255")));
        assert!(!is_global_unicast(a("0.0.0.0")));
        assert!(is_global_unicast(a("2001:db8::abcd")));
        assert!(!is_global_unicast(a("ff00::1")));
    }

    /// k8s.io/apiserver pkg/cel/library/ip_test.go `TestIP`, case by case (its names); an
    /// expected IP value is written as an equality.
    #[test]
    fn ip_test_go_cases() {
        use crate::schedule::ocm::cel::{run_cases, Want};
        let t = || Want::Value(Value::Bool(true));
        let f = || Want::Value(Value::Bool(false));
        run_cases(&[
            ("parse ipv4", r#"ip("192.168.0.1") == ip("192.168.0.1")"#, t()),
            ("parse invalid ipv4", r#"ip("192.168.0.1.0")"#, Want::EvalError("IP Address \"192.168.0.1.0\" parse error during conversion from string: ParseAddr(\"192.168.0.1.0\"): ")),
            ("isIP valid ipv4", r#"isIP("192.168.0.1")"#, t()),
            ("isIP invalid ipv4", r#"isIP("192.168.0.1.0")"#, f()),
            ("ip.isCanonical valid ipv4", r#"ip.isCanonical("127.0.0.1")"#, t()),
            ("ip.isCanonical invalid ipv4", r#"ip.isCanonical("127.0.0.1.0")"#, Want::EvalError("IP Address \"127.0.0.1.0\" parse error")),
            ("ipv4 family", r#"ip("192.168.0.1").family()"#, Want::Value(Value::Int(4))),
            ("ipv4 isUnspecified true", r#"ip("0.0.0.0").isUnspecified()"#, t()),
            ("ipv4 isUnspecified false", r#"ip("127.0.0.1").isUnspecified()"#, f()),
            ("ipv4 isLoopback true", r#"ip("127.0.0.1").isLoopback()"#, t()),
            ("ipv4 isLoopback false", r#"ip("1.2.3.4").isLoopback()"#, f()),
            ("ipv4 isLinkLocalMulticast true", r#"ip("224.0.0.1").isLinkLocalMulticast()"#, t()),
            ("ipv4 isLinkLocalMulticast false", r#"ip("224.0.1.1").isLinkLocalMulticast()"#, f()),
            ("ipv4 isLinkLocalUnicast true", r#"ip("169.254.169.254").isLinkLocalUnicast()"#, t()),
            ("ipv4 isLinkLocalUnicast false", r#"ip("192.168.0.1").isLinkLocalUnicast()"#, f()),
            ("ipv4 isGlobalUnicast true", r#"ip("192.168.0.1").isGlobalUnicast()"#, t()),
            ("ipv4 isGlobalUnicast false", r#"ip("255.255.255.255").isGlobalUnicast()"#, f()),
            ("parse ipv6", r#"ip("2001:db8::68") == ip("2001:db8::68")"#, t()),
            ("parse invalid ipv6", r#"ip("2001:db8:::68")"#, Want::EvalError("IP Address \"2001:db8:::68\" parse error")),
            ("isIP valid ipv6", r#"isIP("2001:db8::68")"#, t()),
            ("isIP invalid ipv4", r#"isIP("2001:db8:::68")"#, f()),
            ("ip.isCanonical valid ipv6", r#"ip.isCanonical("2001:db8::68")"#, t()),
            ("ip.isCanonical non-canonical ipv6", r#"ip.isCanonical("2001:DB8::68")"#, f()),
            ("ip.isCanonical invalid ipv6", r#"ip.isCanonical("2001:db8:::68")"#, Want::EvalError("parse error")),
            ("ipv6 family", r#"ip("2001:db8::68").family()"#, Want::Value(Value::Int(6))),
            ("ipv6 isUnspecified true", r#"ip("::").isUnspecified()"#, t()),
            ("ipv6 isUnspecified false", r#"ip("::1").isUnspecified()"#, f()),
            ("ipv6 isLoopback true", r#"ip("::1").isLoopback()"#, t()),
            ("ipv6 isLoopback false", r#"ip("2001:db8::abcd").isLoopback()"#, f()),
            ("ipv6 isLinkLocalMulticast true", r#"ip("ff02::1").isLinkLocalMulticast()"#, t()),
            ("ipv6 isLinkLocalMulticast false", r#"ip("fd00::1").isLinkLocalMulticast()"#, f()),
            ("ipv6 isLinkLocalUnicast true", r#"ip("fe80::1").isLinkLocalUnicast()"#, t()),
            ("ipv6 isLinkLocalUnicast false", r#"ip("fd80::1").isLinkLocalUnicast()"#, f()),
            ("ipv6 isGlobalUnicast true", r#"ip("2001:db8::abcd").isGlobalUnicast()"#, t()),
            ("ipv6 isGlobalUnicast false", r#"ip("ff00::1").isGlobalUnicast()"#, f()),
            ("passing cidr into isIP returns compile error", r#"isIP(cidr("192.168.0.0/24"))"#, Want::CompileError("found no matching overload for 'isIP'")),
            ("converting an IP address to a string", r#"string(ip("192.168.0.1"))"#, Want::Value(Value::from("192.168.0.1"))),
            ("type of IP is net.IP", r#"type(ip("192.168.0.1")) == net.IP"#, t()),
        ]);
    }

    /// k8s.io/apiserver pkg/cel/library/cidr_test.go `TestCIDR`, case by case; an expected
    /// IP or CIDR value is written as an equality.
    #[test]
    fn cidr_test_go_cases() {
        use crate::schedule::ocm::cel::{run_cases, Want};
        let t = || Want::Value(Value::Bool(true));
        let f = || Want::Value(Value::Bool(false));
        run_cases(&[
            ("parse ipv4", r#"cidr("192.168.0.0/24") == cidr("192.168.0.0/24")"#, t()),
            ("parse invalid ipv4", r#"cidr("192.168.0.0/")"#, Want::EvalError("network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix(\"192.168.0.0/\"): bad bits after slash: \"\"")),
            ("contains IP ipv4 (IP)", r#"cidr("192.168.0.0/24").containsIP(ip("192.168.0.1"))"#, t()),
            ("does not contain IP ipv4 (IP)", r#"cidr("192.168.0.0/24").containsIP(ip("192.168.1.1"))"#, f()),
            ("contains IP ipv4 (string)", r#"cidr("192.168.0.0/24").containsIP("192.168.0.1")"#, t()),
            ("does not contain IP ipv4 (string)", r#"cidr("192.168.0.0/24").containsIP("192.168.1.1")"#, f()),
            ("contains CIDR ipv4 (CIDR)", r#"cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.0/25"))"#, t()),
            ("contains CIDR ipv4 (CIDR) /32", r#"cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.1/32"))"#, t()),
            ("does not contain CIDR ipv4 (CIDR)", r#"cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.0/23"))"#, f()),
            ("does not contain CIDR ipv4 (CIDR) other", r#"cidr("192.168.0.0/24").containsCIDR(cidr("192.169.0.1/32"))"#, f()),
            ("contains CIDR ipv4 (string)", r#"cidr("192.168.0.0/24").containsCIDR("192.168.0.0/25")"#, t()),
            ("does not contain CIDR ipv4 (string)", r#"cidr("192.168.0.0/24").containsCIDR("192.168.0.0/23")"#, f()),
            ("returns IP ipv4", r#"cidr("192.168.0.0/24").ip() == ip("192.168.0.0")"#, t()),
            ("masks masked ipv4", r#"cidr("192.168.0.0/24").masked() == cidr("192.168.0.0/24")"#, t()),
            ("masks unmasked ipv4", r#"cidr("192.168.0.1/24").masked() == cidr("192.168.0.0/24")"#, t()),
            ("returns prefix length ipv4", r#"cidr("192.168.0.0/24").prefixLength()"#, Want::Value(Value::Int(24))),
            ("parse ipv6", r#"cidr("2001:db8::/32") == cidr("2001:db8::/32")"#, t()),
            ("parse invalid ipv6", r#"cidr("2001:db8::/")"#, Want::EvalError("netip.ParsePrefix(\"2001:db8::/\"): bad bits after slash: \"\"")),
            ("contains IP ipv6 (IP)", r#"cidr("2001:db8::/32").containsIP(ip("2001:db8::1"))"#, t()),
            ("does not contain IP ipv6 (IP)", r#"cidr("2001:db8::/32").containsIP(ip("2001:dc8::1"))"#, f()),
            ("contains IP ipv6 (string)", r#"cidr("2001:db8::/32").containsIP("2001:db8::1")"#, t()),
            ("does not contain IP ipv6 (string)", r#"cidr("2001:db8::/32").containsIP("2001:dc8::1")"#, f()),
            ("contains CIDR ipv6 (CIDR)", r#"cidr("2001:db8::/32").containsCIDR(cidr("2001:db8::/33"))"#, t()),
            ("does not contain CIDR ipv6 (CIDR)", r#"cidr("2001:db8::/32").containsCIDR(cidr("2001:db8::/31"))"#, f()),
            ("contains CIDR ipv6 (string)", r#"cidr("2001:db8::/32").containsCIDR("2001:db8::/33")"#, t()),
            ("does not contain CIDR ipv6 (string)", r#"cidr("2001:db8::/32").containsCIDR("2001:db8::/31")"#, f()),
            ("returns IP ipv6", r#"cidr("2001:db8::/32").ip() == ip("2001:db8::")"#, t()),
            ("masks masked ipv6", r#"cidr("2001:db8::/32").masked() == cidr("2001:db8::/32")"#, t()),
            ("masks unmasked ipv6", r#"cidr("2001:db8:1::/32").masked() == cidr("2001:db8::/32")"#, t()),
            ("returns prefix length ipv6", r#"cidr("2001:db8::/32").prefixLength()"#, Want::Value(Value::Int(32))),
            ("converting a CIDR to a string", r#"string(cidr("192.168.0.0/24"))"#, Want::Value(Value::from("192.168.0.0/24"))),
            ("type of CIDR is net.CIDR", r#"type(cidr("192.168.0.0/24")) == net.CIDR"#, t()),
            // Beyond the Go test, checked with cel-go by hand.
            ("unmasked is not masked", r#"cidr("192.168.0.1/24") == cidr("192.168.0.1/24").masked()"#, f()),
            ("families do not contain each other", r#"cidr("0.0.0.0/0").containsCIDR("::/0")"#, f()),
            ("a string that is no IP", r#"cidr("192.168.0.0/24").containsIP("nope")"#, Want::EvalError("no such overload")),
            ("ip of a string", r#"'192.168.0.1'.ip()"#, Want::CompileError("found no matching overload for 'ip'")),
            ("isCanonical is namespaced", r#"isCanonical("::1")"#, Want::EvalError("isCanonical")),
            ("ip is no variable", r#"ip.family == 4"#, Want::CompileError("undeclared reference to 'ip'")),
        ]);
    }
}
