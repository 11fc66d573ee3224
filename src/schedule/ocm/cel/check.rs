//! The compile-time check of library calls. cel-go type-checks a call when it compiles; cel-rust
//! does not, so [`check_calls`] does it for the functions OCM's environment adds: a call with
//! the wrong receiver style or number of arguments, or with an argument whose type is known
//! without evaluating it (a literal, a list or map, a constructor such as `quantity('1')`) and
//! is not one the function declares, is a compile error, as in OCM. So are a literal regex that
//! does not compile (`OptimizeRegex`), a function of the `ip.`, `format.` or `optional.`
//! namespace that does not exist, and `ip`, `format`, `net` or `optional` used as a variable.
//!
//! Pure: an expression in, a verdict out.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

/// What a parameter (or receiver) accepts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Param {
    String,
    Int,
    List,
    Map,
    Any,
    /// An opaque library type, by its short name.
    Opaque(&'static str),
}

/// What is known of an expression's type without evaluating it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Known {
    String,
    Int,
    Other,
    List,
    Map,
    Opaque(&'static str),
    Unknown,
}

const QUANTITY: Param = Param::Opaque("Quantity");
const SEMVER: Param = Param::Opaque("Semver");
const IP: Param = Param::Opaque("IP");
const CIDR: Param = Param::Opaque("CIDR");
const URL: Param = Param::Opaque("URL");
const FORMAT: Param = Param::Opaque("Format");

/// One overload: the receiver (`None` for a global function) and the parameters.
struct Overload(Option<Param>, &'static [Param]);

struct Signature {
    name: &'static str,
    overloads: &'static [Overload],
    /// The opaque type the function returns, when it is one.
    returns: Option<&'static str>,
}

macro_rules! sig {
    ($name:literal => $returns:expr; $($recv:expr, [$($p:expr),*]);+ $(;)?) => {
        Signature {
            name: $name,
            overloads: &[$(Overload($recv, &[$($p),*])),+],
            returns: $returns,
        }
    };
}

/// The format names of `format.<name>()` (Kubernetes' format library).
pub(super) const FORMAT_NAMES: &[&str] = &[
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
];

const S: Param = Param::String;
const I: Param = Param::Int;
const L: Param = Param::List;

const SIGNATURES: &[Signature] = &[
    // OCM's own (sdk-go pkg/cel/library).
    sig!("scores" => None; Some(Param::Map), [S]),
    sig!("parseJSON" => None; Some(S), []),
    // Regex.
    sig!("find" => None; Some(S), [S]),
    sig!("findAll" => None; Some(S), [S]; Some(S), [S, I]),
    // Semver.
    sig!("semver" => Some("Semver"); None, [S]),
    sig!("isSemver" => None; None, [S]),
    sig!("major" => None; Some(SEMVER), []),
    sig!("minor" => None; Some(SEMVER), []),
    sig!("patch" => None; Some(SEMVER), []),
    // Semver and Quantity.
    sig!("isGreaterThan" => None; Some(SEMVER), [SEMVER]; Some(QUANTITY), [QUANTITY]),
    sig!("isLessThan" => None; Some(SEMVER), [SEMVER]; Some(QUANTITY), [QUANTITY]),
    sig!("compareTo" => None; Some(SEMVER), [SEMVER]; Some(QUANTITY), [QUANTITY]),
    // Quantity.
    sig!("quantity" => Some("Quantity"); None, [S]),
    sig!("isQuantity" => None; None, [S]),
    sig!("sign" => None; None, [QUANTITY]),
    sig!("asApproximateFloat" => None; Some(QUANTITY), []),
    sig!("asInteger" => None; Some(QUANTITY), []),
    sig!("isInteger" => None; Some(QUANTITY), []),
    sig!("add" => Some("Quantity"); Some(QUANTITY), [QUANTITY]; Some(QUANTITY), [I]),
    sig!("sub" => Some("Quantity"); Some(QUANTITY), [QUANTITY]; Some(QUANTITY), [I]),
    // IP.
    sig!("ip" => Some("IP"); None, [S]; Some(CIDR), []),
    sig!("isIP" => None; None, [S]),
    sig!("ip.isCanonical" => None; None, [S]),
    sig!("family" => None; Some(IP), []),
    sig!("isUnspecified" => None; Some(IP), []),
    sig!("isLoopback" => None; Some(IP), []),
    sig!("isLinkLocalMulticast" => None; Some(IP), []),
    sig!("isLinkLocalUnicast" => None; Some(IP), []),
    sig!("isGlobalUnicast" => None; Some(IP), []),
    // CIDR.
    sig!("cidr" => Some("CIDR"); None, [S]),
    sig!("isCIDR" => None; None, [S]),
    sig!("containsIP" => None; Some(CIDR), [S]; Some(CIDR), [IP]),
    sig!("containsCIDR" => None; Some(CIDR), [S]; Some(CIDR), [CIDR]),
    sig!("masked" => Some("CIDR"); Some(CIDR), []),
    sig!("prefixLength" => None; Some(CIDR), []),
    // URLs.
    sig!("url" => Some("URL"); None, [S]),
    sig!("isURL" => None; None, [S]),
    sig!("getScheme" => None; Some(URL), []),
    sig!("getHost" => None; Some(URL), []),
    sig!("getHostname" => None; Some(URL), []),
    sig!("getPort" => None; Some(URL), []),
    sig!("getEscapedPath" => None; Some(URL), []),
    sig!("getQuery" => None; Some(URL), []),
    // Lists, and the strings extension's overloads of the same names.
    sig!("isSorted" => None; Some(L), []),
    sig!("sum" => None; Some(L), []),
    sig!("min" => None; Some(L), []),
    sig!("max" => None; Some(L), []),
    sig!("indexOf" => None; Some(L), [Param::Any]; Some(S), [S]; Some(S), [S, I]),
    sig!("lastIndexOf" => None; Some(L), [Param::Any]; Some(S), [S]; Some(S), [S, I]),
    // Format.
    sig!("format.named" => None; None, [S]),
    sig!("validate" => None; Some(FORMAT), [S]),
];

/// The namespaces of qualified functions (`ip.isCanonical`, `format.dns1123Label`), and `net`
/// of the type names `net.IP` and `net.CIDR`.
pub(super) const NAMESPACES: &[&str] = &["ip", "format", "net", "optional"];

/// The standard functions of the `optional` namespace (cel-go's `OptionalTypes`).
const OPTIONAL_FUNCTIONS: &[&str] = &["optional.none", "optional.of", "optional.ofNonZeroValue"];

fn signature(name: &str) -> Option<&'static Signature> {
    SIGNATURES.iter().find(|s| s.name == name)
}

/// The qualified name a call spells (`ip.isCanonical`), when its target is a namespace.
fn qualified(target: Option<&IdedExpr>, func: &str) -> Option<String> {
    match target.map(|t| &t.expr) {
        Some(Expr::Ident(ns)) if NAMESPACES.contains(&ns.as_str()) => Some(format!("{ns}.{func}")),
        _ => None,
    }
}

fn known(e: &IdedExpr) -> Known {
    match &e.expr {
        Expr::Literal(LiteralValue::String(_)) => Known::String,
        Expr::Literal(LiteralValue::Int(_)) => Known::Int,
        Expr::Literal(_) => Known::Other,
        Expr::List(_) => Known::List,
        Expr::Map(_) => Known::Map,
        Expr::Call(call) => {
            let name = qualified(call.target.as_deref(), &call.func_name)
                .unwrap_or_else(|| call.func_name.clone());
            if name.starts_with("format.") && name != "format.named" {
                return Known::Opaque("Format");
            }
            // `ip` returns an IP both ways.
            signature(&name)
                .and_then(|s| s.returns)
                .map_or(Known::Unknown, Known::Opaque)
        }
        _ => Known::Unknown,
    }
}

fn fits(param: Param, k: Known) -> bool {
    k == Known::Unknown
        || match param {
            Param::Any => true,
            Param::String => k == Known::String,
            Param::Int => k == Known::Int,
            Param::List => k == Known::List,
            Param::Map => k == Known::Map,
            Param::Opaque(t) => k == Known::Opaque(t),
        }
}

/// A call in `expr` that OCM's type checker would reject (`compilation failed: ...`), or whose
/// program OCM could not make (an invalid literal regex: `instantiation failed: ...`).
pub(super) fn check_calls(expr: &IdedExpr) -> Result<(), String> {
    let mut stack = vec![expr];
    while let Some(e) = stack.pop() {
        match &e.expr {
            Expr::Call(call) => {
                let target = call.target.as_deref();
                match qualified(target, &call.func_name) {
                    Some(name) => {
                        check_qualified(&name, &call.args)?;
                    }
                    None => {
                        if let Some(sig) = signature(&call.func_name) {
                            check_call(sig, target, &call.args)?;
                        }
                        check_standard(&call.func_name, &call.args)?;
                        stack.extend(target);
                    }
                }
                stack.extend(call.args.iter());
            }
            Expr::Comprehension(c) => {
                stack.extend([
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ]);
            }
            Expr::List(l) => stack.extend(l.elements.iter()),
            Expr::Map(m) => stack.extend(m.entries.iter().flat_map(|en| match &en.expr {
                EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })),
            Expr::Struct(s) => stack.extend(s.entries.iter().flat_map(|en| match &en.expr {
                EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })),
            Expr::Select(s) => match &s.operand.expr {
                // The type names `net.IP` and `net.CIDR`.
                Expr::Ident(ns) if ns == "net" && matches!(s.field.as_str(), "IP" | "CIDR") => {}
                _ => stack.push(&s.operand),
            },
            Expr::Ident(name) if NAMESPACES.contains(&name.as_str()) => {
                return Err(format!(
                    "compilation failed: undeclared reference to '{name}'"
                ));
            }
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
    Ok(())
}

/// A call of `ns.func(...)`: a format constructor, or a declared qualified function.
fn check_qualified(name: &str, args: &[IdedExpr]) -> Result<(), String> {
    if let Some(format) = name.strip_prefix("format.") {
        if FORMAT_NAMES.contains(&format) {
            if !args.is_empty() {
                return Err(format!(
                    "compilation failed: found no matching overload for '{name}' (OCM declares {name}() <Format>)"
                ));
            }
            return Ok(());
        }
    }
    if OPTIONAL_FUNCTIONS.contains(&name) {
        return Ok(());
    }
    match signature(name) {
        Some(sig) => check_call(sig, None, args),
        None => Err(format!(
            "compilation failed: undeclared reference to '{name}'"
        )),
    }
}

fn check_call(sig: &Signature, target: Option<&IdedExpr>, args: &[IdedExpr]) -> Result<(), String> {
    let receiver = target.map(known);
    let accepted = sig.overloads.iter().any(|Overload(recv, params)| {
        let receiver_fits = match (recv, receiver) {
            (None, None) => true,
            (Some(p), Some(k)) => fits(*p, k),
            _ => false,
        };
        receiver_fits
            && params.len() == args.len()
            && params.iter().zip(args).all(|(p, a)| fits(*p, known(a)))
    });
    let accepted = accepted && target.is_none_or(|t| list_elements_fit(sig.name, t));
    if !accepted {
        return Err(format!(
            "compilation failed: found no matching overload for '{}' (OCM declares {})",
            sig.name,
            usage(sig)
        ));
    }
    // OptimizeRegex: a literal pattern is compiled with the program.
    if matches!(sig.name, "find" | "findAll") {
        if let Some(Expr::Literal(LiteralValue::String(pattern))) = args.first().map(|a| &a.expr) {
            if let Err(e) = regex::Regex::new(pattern.inner()) {
                return Err(format!("instantiation failed: Illegal regex: {e}"));
            }
        }
    }
    Ok(())
}

/// Standard functions given a library type they do not take: `string` converts IPs and CIDRs
/// only, and `==`/`!=` compare a library value only with one of its type.
fn check_standard(name: &str, args: &[IdedExpr]) -> Result<(), String> {
    let error = || {
        Err(format!(
            "compilation failed: found no matching overload for '{name}' applied to a {} value",
            args.iter()
                .find_map(|a| match known(a) {
                    Known::Opaque(t) => Some(t),
                    _ => None,
                })
                .unwrap_or("library")
        ))
    };
    match (name, args) {
        ("string", [a]) => match known(a) {
            Known::Opaque(t) if t != "IP" && t != "CIDR" => error(),
            _ => Ok(()),
        },
        ("_==_" | "_!=_", [a, b]) => {
            let (a, b) = (known(a), known(b));
            let opaque = matches!(a, Known::Opaque(_)) || matches!(b, Known::Opaque(_));
            if opaque && a != b && a != Known::Unknown && b != Known::Unknown {
                error()
            } else {
                Ok(())
            }
        }
        _ => Ok(()),
    }
}

/// cel-go declares the list functions for lists of some element types only: a list literal
/// whose elements are all of one other type (`['a'].sum()`, `[[1]].isSorted()`) does not
/// type-check; elements of mixed types make a `list(dyn)`, which does.
fn list_elements_fit(name: &str, target: &IdedExpr) -> bool {
    let Expr::List(list) = &target.expr else {
        return true;
    };
    let kind = |e: &IdedExpr| match &e.expr {
        Expr::Literal(l) => Some(std::mem::discriminant(l)),
        _ => None,
    };
    let nested = |e: &IdedExpr| matches!(e.expr, Expr::List(_) | Expr::Map(_));
    let first = match list.elements.first() {
        Some(f) => f,
        None => return true,
    };
    if let Known::Opaque(_) = known(first) {
        // A list of one library type: no list function but indexOf takes it.
        let same = list.elements.iter().all(|e| known(e) == known(first));
        return !(same && matches!(name, "sum" | "isSorted" | "min" | "max"));
    }
    if nested(first) {
        let same = list
            .elements
            .iter()
            .all(|e| std::mem::discriminant(&e.expr) == std::mem::discriminant(&first.expr));
        return !(same && matches!(name, "sum" | "isSorted" | "min" | "max"));
    }
    let Some(k) = kind(first) else {
        return true;
    };
    if !list.elements.iter().all(|e| kind(e) == Some(k)) {
        return true;
    }
    let Expr::Literal(l) = &first.expr else {
        return true;
    };
    match name {
        "sum" => matches!(
            l,
            LiteralValue::Int(_) | LiteralValue::UInt(_) | LiteralValue::Double(_)
        ),
        // A list of nulls type-checks (and fails at evaluation).
        _ => true,
    }
}

fn usage(sig: &Signature) -> String {
    let name = |p: &Param| match p {
        Param::String => "<string>".to_string(),
        Param::Int => "<int>".to_string(),
        Param::List => "<list>".to_string(),
        Param::Map => "<ManagedCluster>".to_string(),
        Param::Any => "<dyn>".to_string(),
        Param::Opaque(t) => format!("<{t}>"),
    };
    sig.overloads
        .iter()
        .map(|Overload(recv, params)| {
            let args: Vec<String> = params.iter().map(name).collect();
            match recv {
                Some(r) => format!("{}.{}({})", name(r), sig.name, args.join(", ")),
                None => format!("{}({})", sig.name, args.join(", ")),
            }
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

#[cfg(test)]
mod tests {
    use crate::schedule::ocm::cel::{run_cases, Want};
    use cel::Value;

    /// What cel-go's checker rejects in OCM's environment is a compile error here; what it
    /// accepts and fails at evaluation fails there too (checked with cel-go v0.29 and
    /// k8s.io/apiserver v0.37.2 by hand).
    #[test]
    fn calls_cel_go_rejects_do_not_compile() {
        let c = || Want::CompileError("compilation failed: ");
        let t = || Want::Value(Value::Bool(true));
        run_cases(&[
            (
                "add a string",
                "quantity('1').add('2') == quantity('3')",
                c(),
            ),
            (
                "add a double",
                "quantity('1').add(1.5) == quantity('2.5')",
                c(),
            ),
            ("containsIP an int", "cidr('1.2.3.0/24').containsIP(1)", c()),
            (
                "containsCIDR an IP",
                "cidr('1.2.3.0/24').containsCIDR(ip('1.2.3.4'))",
                c(),
            ),
            (
                "containsIP a CIDR",
                "cidr('1.2.3.0/24').containsIP(cidr('1.2.3.0/24'))",
                c(),
            ),
            (
                "getHost with an argument",
                "url('http://x').getHost(1) == ''",
                c(),
            ),
            ("ip of an int", "ip(1) == ip('1.2.3.4')", c()),
            ("format.named of an int", "format.named(1).hasValue()", c()),
            ("sign of an int", "sign(1) == 1", c()),
            ("isURL of an int", "isURL(1)", c()),
            (
                "family with an argument",
                "ip('1.2.3.4').family(1) == 4",
                c(),
            ),
            (
                "quantity against semver",
                "quantity('1').isLessThan(semver('1.0.0'))",
                c(),
            ),
            (
                "semver against quantity",
                "semver('1.0.0').isLessThan(quantity('1'))",
                c(),
            ),
            ("indexOf without argument", "[1].indexOf() == 0", c()),
            ("string indexOf of an int", "'a'.indexOf(1) == 0", c()),
            (
                "masked of an IP",
                "ip('1.2.3.4').masked() == ip('1.2.3.4')",
                c(),
            ),
            ("family of a URL", "url('http://x').family() == 4", c()),
            (
                "getHost of a quantity",
                "quantity('1').getHost() == ''",
                c(),
            ),
            (
                "validate two strings",
                "format.dns1123Label().validate('a', 'b').hasValue()",
                c(),
            ),
            ("isQuantity of two", "isQuantity('1', '2')", c()),
            ("ip.isCanonical of an int", "ip.isCanonical(1)", c()),
            (
                "string of a URL",
                "string(url('http://x')) == 'http://x'",
                c(),
            ),
            ("string of a quantity", "string(quantity('1')) == '1'", c()),
            ("quantity equals an int", "quantity('1') == 1", c()),
            ("IP equals a string", "ip('1.2.3.4') == '1.2.3.4'", c()),
            (
                "isSorted of quantities",
                "[quantity('1'), quantity('2')].isSorted()",
                c(),
            ),
            ("sum with an argument", "[1, 2].sum(0) == 3", c()),
            (
                "type names",
                "net.IP == net.IP && type(cidr('1.2.3.0/24')) != net.IP",
                t(),
            ),
            (
                "sign of a difference",
                "quantity('1').sub(quantity('1')).sign() == 0",
                c(),
            ),
            (
                "indexOf of IPs",
                "[ip('1.2.3.4')].indexOf(ip('1.2.3.4')) == 0",
                t(),
            ),
            (
                "indexOf of quantities",
                "[quantity('1k')].indexOf(quantity('1000')) == 0",
                t(),
            ),
            (
                "a format constant as a field",
                "format.dns1123Label.validate('a').hasValue()",
                c(),
            ),
            ("an unknown net name", "net.Foo == 1", c()),
        ]);
    }
}
