//! The library functions OCM adds to CEL for cluster selectors, with cel-go's semantics:
//! - `scores`: `managedCluster.scores(resourceName)`, from open-cluster-management.io/sdk-go
//!   pkg/cel/library/managedcluster.go (`ManagedClusterLib`, `clusterScores`);
//! - `parseJSON`: `string.parseJSON()`, from sdk-go pkg/cel/library/json.go (`JsonLib`);
//! - Kubernetes' semver library as OCM registers it (`library.SemverLib()` without options in
//!   sdk-go pkg/cel/common/values.go `BaseEnvOpts`, so only the version-0 overloads):
//!   `semver(string)`, `isSemver(string)`, and on a semver `isGreaterThan`, `isLessThan`,
//!   `compareTo`, `major`, `minor`, `patch` (k8s.io/apiserver pkg/cel/library/semverlib.go);
//! - Kubernetes' regex library (`library.Regex()`): `string.find(regex)`, the first match or
//!   `""`, and `string.findAll(regex[, n])`, at most `n` matches (all when negative), with Rust's
//!   `regex` crate for Go's `regexp` (both RE2 syntax, leftmost-first). As OCM's program
//!   options include `OptimizeRegex`, an invalid literal pattern fails when the program is
//!   made (`instantiation failed: ...`, so the placement is misconfigured); a pattern computed
//!   at evaluation fails there (no match).
//!
//! cel-go checks how a library function is called when it compiles; cel-rust does not, so
//! [`check_calls`] does it here: a call of one of these functions with the wrong receiver style
//! or number of arguments, or with a literal of the wrong type, is a compile error, as in OCM.
//!
//! Pure: the scores are a parameter.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::extractors::{Arguments, This};
use cel::objects::{Key, Map, Opaque};
use cel::{Context, ExecutionError, FunctionContext, Value};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Each cluster's AddOnPlacementScore values, by cluster name then score name.
pub(super) type ScoreTable = HashMap<String, BTreeMap<String, i64>>;

/// How OCM declares a library function: receiver or global, and its parameters.
struct Signature {
    name: &'static str,
    member: bool,
    /// The parameter lists it accepts after the receiver.
    params: &'static [&'static [Param]],
    /// How OCM's library documents the call, for the error message.
    usage: &'static str,
}

#[derive(Clone, Copy)]
enum Param {
    String,
    Int,
    Semver,
}

const SIGNATURES: &[Signature] = &[
    Signature {
        name: "scores",
        member: true,
        params: &[&[Param::String]],
        usage: "<ManagedCluster>.scores(<string>) <list>",
    },
    Signature {
        name: "parseJSON",
        member: true,
        params: &[&[]],
        usage: "<string>.parseJSON() <dyn>",
    },
    Signature {
        name: "find",
        member: true,
        params: &[&[Param::String]],
        usage: "<string>.find(<string>) <string>",
    },
    Signature {
        name: "findAll",
        member: true,
        params: &[&[Param::String], &[Param::String, Param::Int]],
        usage: "<string>.findAll(<string>[, <int>]) <list(string)>",
    },
    Signature {
        name: "semver",
        member: false,
        params: &[&[Param::String]],
        usage: "semver(<string>) <Semver>",
    },
    Signature {
        name: "isSemver",
        member: false,
        params: &[&[Param::String]],
        usage: "isSemver(<string>) <bool>",
    },
    Signature {
        name: "isGreaterThan",
        member: true,
        params: &[&[Param::Semver]],
        usage: "<Semver>.isGreaterThan(<Semver>) <bool>",
    },
    Signature {
        name: "isLessThan",
        member: true,
        params: &[&[Param::Semver]],
        usage: "<Semver>.isLessThan(<Semver>) <bool>",
    },
    Signature {
        name: "compareTo",
        member: true,
        params: &[&[Param::Semver]],
        usage: "<Semver>.compareTo(<Semver>) <int>",
    },
    Signature {
        name: "major",
        member: true,
        params: &[&[]],
        usage: "<Semver>.major() <int>",
    },
    Signature {
        name: "minor",
        member: true,
        params: &[&[]],
        usage: "<Semver>.minor() <int>",
    },
    Signature {
        name: "patch",
        member: true,
        params: &[&[]],
        usage: "<Semver>.patch() <int>",
    },
];

/// A call in `expr` that OCM's type checker would reject (a library function called
/// the wrong way, or with a literal of the wrong type: `compilation failed: ...`), or whose
/// program OCM could not make (an invalid literal regex: `instantiation failed: ...`).
pub(super) fn check_calls(expr: &IdedExpr) -> Result<(), String> {
    let mut stack = vec![expr];
    while let Some(e) = stack.pop() {
        match &e.expr {
            Expr::Call(call) => {
                if let Some(sig) = SIGNATURES.iter().find(|s| s.name == call.func_name) {
                    check_call(sig, call.target.as_deref(), &call.args)?;
                }
                if let Some(t) = &call.target {
                    stack.push(t);
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
            Expr::Select(s) => stack.push(&s.operand),
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
    Ok(())
}

fn check_call(sig: &Signature, target: Option<&IdedExpr>, args: &[IdedExpr]) -> Result<(), String> {
    let no_overload = || format!("compilation failed: {}", no_overload(sig));
    if target.is_some() != sig.member {
        return Err(no_overload());
    }
    // A literal receiver: `parseJSON`, `find` and `findAll` take a string; `scores` takes a map
    // and the semver methods a semver, which no literal is.
    if let Some(lit) = target.and_then(literal) {
        let takes_string = matches!(sig.name, "parseJSON" | "find" | "findAll");
        if !(takes_string && matches!(lit, LiteralValue::String(_))) {
            return Err(no_overload());
        }
    }
    let fits = |params: &[Param]| {
        params.len() == args.len()
            && params.iter().zip(args).all(|(param, arg)| {
                literal(arg).is_none_or(|lit| match param {
                    Param::String => matches!(lit, LiteralValue::String(_)),
                    Param::Int => matches!(lit, LiteralValue::Int(_)),
                    Param::Semver => false,
                })
            })
    };
    if !sig.params.iter().any(|p| fits(p)) {
        return Err(no_overload());
    }
    // OptimizeRegex: a literal pattern is compiled with the program.
    if matches!(sig.name, "find" | "findAll") {
        if let Some(LiteralValue::String(pattern)) = args.first().and_then(literal) {
            if let Err(e) = regex::Regex::new(pattern.inner()) {
                return Err(format!("instantiation failed: Illegal regex: {e}"));
            }
        }
    }
    Ok(())
}

fn literal(e: &IdedExpr) -> Option<&LiteralValue> {
    match &e.expr {
        Expr::Literal(l) => Some(l),
        _ => None,
    }
}

fn no_overload(sig: &Signature) -> String {
    format!(
        "found no matching overload for '{}' (OCM declares {})",
        sig.name, sig.usage
    )
}

/// Registers the library's functions on an evaluation context; `scores` reads `table`.
pub(super) fn register(context: &mut Context<'_, '_>, table: Arc<ScoreTable>) {
    let results = [
        context.add_function(
            "scores",
            move |ftx: &FunctionContext, This(cluster): This<Value>, resource: Arc<String>| {
                scores(ftx, &table, &cluster, &resource)
            },
        ),
        context.add_function("parseJSON", parse_json),
        context.add_function(
            "find",
            |ftx: &FunctionContext, This(s): This<Arc<String>>, re: Arc<String>| {
                let re = compile_regex(ftx, &re)?;
                Ok::<Value, ExecutionError>(Value::from(re.find(&s).map_or("", |m| m.as_str())))
            },
        ),
        context.add_function(
            "findAll",
            |ftx: &FunctionContext, This(s): This<Arc<String>>, Arguments(args): Arguments| {
                find_all(ftx, &s, &args)
            },
        ),
        context.add_function("semver", semver),
        context.add_function("isSemver", is_semver),
        context.add_function(
            "isGreaterThan",
            |ftx: &FunctionContext, This(a): This<Value>, b: Value| {
                compare(ftx, &a, &b).map(|o| o == Ordering::Greater)
            },
        ),
        context.add_function(
            "isLessThan",
            |ftx: &FunctionContext, This(a): This<Value>, b: Value| {
                compare(ftx, &a, &b).map(|o| o == Ordering::Less)
            },
        ),
        context.add_function(
            "compareTo",
            |ftx: &FunctionContext, This(a): This<Value>, b: Value| {
                compare(ftx, &a, &b).map(|o| o as i64)
            },
        ),
        context.add_function("major", |ftx: &FunctionContext, This(v): This<Value>| {
            as_semver(ftx, &v).map(|v| v.0.major as i64)
        }),
        context.add_function("minor", |ftx: &FunctionContext, This(v): This<Value>| {
            as_semver(ftx, &v).map(|v| v.0.minor as i64)
        }),
        context.add_function("patch", |ftx: &FunctionContext, This(v): This<Value>| {
            as_semver(ftx, &v).map(|v| v.0.patch as i64)
        }),
    ];
    for r in results {
        // Fails only if a name is a standard overload, which the unit tests rule out.
        r.expect("no library function shadows a standard overload");
    }
}

// ---------------------------------------------------------------------------------------------
// scores
// ---------------------------------------------------------------------------------------------

/// `clusterScores`: the receiver's `metadata.name` names the cluster; its scores are a list of
/// `{name, value}` maps. gitfleet's inventory keeps one set of `addOnScores` per cluster, not
/// one per AddOnPlacementScore resource (as for the AddOn prioritizer): any `resource` name
/// reads that set, and a cluster without scores has no AddOnPlacementScore, which is the
/// evaluation error OCM's lister gives (the cluster is not matched).
fn scores(
    ftx: &FunctionContext,
    table: &ScoreTable,
    cluster: &Value,
    resource: &str,
) -> Result<Value, ExecutionError> {
    let field = |v: &Value, k: &str| match v {
        Value::Map(m) => m.map.get(&Key::String(Arc::new(k.to_string()))).cloned(),
        _ => None,
    };
    let metadata =
        field(cluster, "metadata").ok_or_else(|| ftx.error("failed to get cluster metadata"))?;
    let name = match field(&metadata, "name") {
        Some(Value::String(s)) => s,
        _ => return Err(ftx.error("failed to get cluster name")),
    };
    let Some(scores) = table.get(name.as_str()).filter(|s| !s.is_empty()) else {
        return Err(ftx.error(format!(
            "failed to get score: addonplacementscore.cluster.open-cluster-management.io \"{resource}\" not found"
        )));
    };
    Ok(Value::List(Arc::new(
        scores
            .iter()
            .map(|(n, v)| {
                let mut m = HashMap::new();
                m.insert(
                    Key::String(Arc::new("name".into())),
                    Value::from(n.as_str()),
                );
                m.insert(Key::String(Arc::new("value".into())), Value::Int(*v));
                Value::Map(Map { map: Arc::new(m) })
            })
            .collect(),
    )))
}

// ---------------------------------------------------------------------------------------------
// parseJSON
// ---------------------------------------------------------------------------------------------

/// `parseJSON`: Go's `json.Unmarshal` into `interface{}`, so every number is a double.
fn parse_json(ftx: &FunctionContext, This(s): This<Value>) -> Result<Value, ExecutionError> {
    let Value::String(s) = s else {
        return Err(ftx.error("failed to parse json: argument must be a string"));
    };
    let json: serde_json::Value =
        serde_json::from_str(&s).map_err(|e| ftx.error(format!("failed to parse json: {e}")))?;
    Ok(from_json(json))
}

fn from_json(v: serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(b),
        serde_json::Value::Number(n) => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        serde_json::Value::String(s) => Value::String(Arc::new(s)),
        serde_json::Value::Array(a) => {
            Value::List(Arc::new(a.into_iter().map(from_json).collect()))
        }
        serde_json::Value::Object(o) => Value::Map(Map {
            map: Arc::new(
                o.into_iter()
                    .map(|(k, v)| (Key::String(Arc::new(k)), from_json(v)))
                    .collect(),
            ),
        }),
    }
}

// ---------------------------------------------------------------------------------------------
// regex
// ---------------------------------------------------------------------------------------------

fn compile_regex(ftx: &FunctionContext, pattern: &str) -> Result<regex::Regex, ExecutionError> {
    regex::Regex::new(pattern).map_err(|e| ftx.error(format!("Illegal regex: {e}")))
}

/// `findAll(regex[, n])`: Go's `FindAllString(s, n)`, so `n == 0` is none and a negative `n`
/// all. `args` are the call's arguments after the receiver (only the method form compiles).
fn find_all(ftx: &FunctionContext, s: &str, args: &[Value]) -> Result<Value, ExecutionError> {
    let (pattern, n) = match args {
        [Value::String(p)] => (p, -1),
        [Value::String(p), Value::Int(n)] => (p, *n),
        _ => return Err(ftx.error("no such overload")),
    };
    let re = compile_regex(ftx, pattern)?;
    let limit = usize::try_from(n).unwrap_or(usize::MAX);
    Ok(Value::List(Arc::new(
        re.find_iter(s)
            .take(limit)
            .map(|m| Value::from(m.as_str()))
            .collect(),
    )))
}

// ---------------------------------------------------------------------------------------------
// semver
// ---------------------------------------------------------------------------------------------

/// A `kubernetes.Semver` value. blang/semver's `Parse` (strict SemVer 2.0: three numbers, no
/// `v` prefix, no leading zeros) is what `semver::Version::parse` accepts; precedence ignores
/// build metadata in both (`Version.Compare`), so equality here does too.
#[derive(Debug, Clone)]
pub(super) struct Semver(semver::Version);

impl Semver {
    fn precedence(&self, other: &Semver) -> Ordering {
        let (a, b) = (&self.0, &other.0);
        (a.major, a.minor, a.patch, &a.pre).cmp(&(b.major, b.minor, b.patch, &b.pre))
    }
}

impl PartialEq for Semver {
    fn eq(&self, other: &Self) -> bool {
        self.precedence(other) == Ordering::Equal
    }
}

impl Eq for Semver {}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

fn semver(ftx: &FunctionContext, s: Value) -> Result<Value, ExecutionError> {
    let Value::String(s) = s else {
        return Err(ftx.error("no such overload"));
    };
    semver::Version::parse(&s)
        .map(|v| Value::Opaque(Arc::new(Semver(v))))
        .map_err(|e| ftx.error(e))
}

fn is_semver(ftx: &FunctionContext, s: Value) -> Result<bool, ExecutionError> {
    let Value::String(s) = s else {
        return Err(ftx.error("no such overload"));
    };
    Ok(semver::Version::parse(&s).is_ok())
}

fn as_semver<'a>(ftx: &FunctionContext, v: &'a Value) -> Result<&'a Semver, ExecutionError> {
    match v {
        Value::Opaque(o) => o
            .downcast_ref::<Semver>()
            .ok_or_else(|| ftx.error("no such overload")),
        _ => Err(ftx.error("no such overload")),
    }
}

fn compare(ftx: &FunctionContext, a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    Ok(as_semver(ftx, a)?.precedence(as_semver(ftx, b)?))
}
