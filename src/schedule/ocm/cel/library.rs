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
//! `isGreaterThan`, `isLessThan` and `compareTo` are also the quantity library's
//! ([`super::quantity`]): one function here compares two semvers or two quantities.
//!
//! Pure: the scores are a parameter.

use cel::extractors::{Arguments, This};
use cel::objects::{Key, Map, Opaque};
use cel::{Context, ExecutionError, FunctionContext, Value};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Each cluster's AddOnPlacementScore values, by cluster name then score name.
pub(super) type ScoreTable = HashMap<String, BTreeMap<String, i64>>;

/// Registers every function of the cluster selectors' library on an evaluation context;
/// `scores` reads `table`.
pub(super) fn register_ocm(context: &mut Context<'_, '_>, table: Arc<ScoreTable>) {
    let results = [
        context.add_function(
            "scores",
            move |ftx: &FunctionContext, This(cluster): This<Value>, resource: Arc<String>| {
                scores(ftx, &table, &cluster, &resource)
            },
        ),
        context.add_function("parseJSON", parse_json),
    ];
    for r in results {
        r.expect("no library function shadows a standard overload");
    }
    register_kubernetes(context);
}

/// sdk-go's `ConditionsLib` (pkg/cel/library/conditions.go): `hasConditions(status)`, whether
/// `status` is a map whose `conditions` is a list with an item.
pub(super) fn register_conditions(context: &mut Context<'_, '_>) {
    context
        .add_function("hasConditions", |status: Value| -> bool {
            let Value::Map(m) = status else {
                return false;
            };
            matches!(
                m.map.get(&Key::String(Arc::new("conditions".into()))),
                Some(Value::List(l)) if !l.is_empty()
            )
        })
        .expect("hasConditions is no standard overload");
}

/// Registers the Kubernetes regex and semver libraries on an evaluation context.
pub(super) fn register_kubernetes(context: &mut Context<'_, '_>) {
    let results = [
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
    if let (Some(x), Some(y)) = (
        super::quantity::as_quantity(a),
        super::quantity::as_quantity(b),
    ) {
        return Ok(x.cmp(y));
    }
    Ok(as_semver(ftx, a)?.precedence(as_semver(ftx, b)?))
}
