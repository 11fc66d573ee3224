//! OCM's CEL cluster selector (`spec.predicates[].requiredClusterSelector.celSelector`), as
//! open-cluster-management-io/ocm evaluates it (pkg/placement/helpers/cel.go, used by
//! pkg/placement/plugins/predicate/predicate.go):
//! - every expression of a selector is compiled first (`CELSelector.Compile`); one that does not
//!   compile makes the placement `PlacementMisconfigured` (`Predicate:` + the error), checked
//!   only when there are candidate clusters;
//! - a cluster matches when every expression evaluates to `true` (`CELSelector.Validate`); an
//!   evaluation error (`EvaluateSingleExpression` in pkg/common/helpers/cel.go logs it and
//!   returns nil) or a non-bool result (`isResultValid`) is no match: the cluster is left out,
//!   the placement is not misconfigured;
//! - the one variable is `managedCluster`, the ManagedCluster as a map;
//! - the environment (`NewEnv`) is cel-go's standard one plus OCM's `ManagedClusterLib`
//!   (`scores`) and `JsonLib` (`parseJSON`), and sdk-go's `BaseEnvOpts`: optional types,
//!   `ext.Strings()` and the Kubernetes libraries Lists, Regex, URLs, Quantity, IP, CIDR,
//!   Format and Semver.
//!
//! Evaluated with cel-rust (`cel`), on its standard environment (optional types included) plus
//! the strings extension, and OCM's whole library with cel-go's semantics, one module per
//! source:
//! - [`library`]: OCM's `scores` and `parseJSON` (sdk-go pkg/cel/library), Kubernetes' semver
//!   and regex libraries;
//! - [`quantity`], [`net`] (IP and CIDR), [`url`], [`format`] and [`lists`]: Kubernetes'
//!   libraries of the same names (k8s.io/apiserver pkg/cel/library, as `BaseEnvOpts` registers
//!   them, without version options: all their functions);
//! - [`check`]: the compile-time check of their calls.
//!
//! Where gitfleet differs, because it is not cel-go:
//! - `managedCluster` is built from what gitfleet knows of the cluster: `metadata.name`,
//!   `metadata.labels` (the ManagedCluster's, with the cluster-set label), `spec.taints`,
//!   `status.clusterClaims` from its properties (as claims are for the claim selector), and
//!   `status.allocatable` / `status.capacity` (`cpu`, `memory`, quantity strings) from the
//!   properties the resource prioritizers read; nothing else of the ManagedCluster
//!   (`status.version`, conditions, ...), so a reference to it is an evaluation error (no match).
//! - `scores(resource)` reads the cluster's inventory `addOnScores`, whatever the resource name
//!   (the inventory does not say which AddOnPlacementScore a score comes from; see [`library`]).
//! - Each library module says where its values or error texts differ from Go's (an evaluation
//!   error is no match whatever its text).
//! - cel-go limits an expression's runtime cost (`celconfig.RuntimeCELCostBudget` per cluster,
//!   `PerCallLimit`); cel-rust has no cost model, so an expression costly enough to exceed the
//!   budget (no match in OCM) is evaluated in full here.
//! - cel-rust parses but does not type-check. Undeclared variables are caught at compile time
//!   here as in cel-go (any name but `managedCluster` and those the comprehension macros bind),
//!   and so are calls of OCM's library functions of the wrong shape ([`check::check_calls`]);
//!   other type errors (`1 + "a"`), and a call to a function no environment declares, fail at
//!   evaluation (no match), where cel-go fails at compilation; compile error texts are
//!   cel-rust's.
//!
//! Pure: values in, values out.

mod check;
mod format;
mod library;
mod lists;
mod net;
mod quantity;
mod url;

use super::super::fleet::Cluster;
use library::ScoreTable;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// The type names cel-go declares (`type(x) == double`), which cel-rust lists as variables.
const TYPE_NAMES: &[&str] = &[
    "bool",
    "bytes",
    "double",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "type",
    "uint",
];

/// One predicate's compiled CEL expressions.
pub(super) struct CelSelector {
    env: Arc<cel::Env>,
    programs: Vec<cel::Program>,
    /// The fleet's add-on scores, when an expression calls `scores`.
    scores: Arc<ScoreTable>,
}

impl CelSelector {
    /// Compiles every expression (`fleet`: every cluster, whose add-on scores `scores` reads); the first that does not compile is the error, worded as OCM
    /// words it (`compilation failed: ...`).
    pub(super) fn compile(
        expressions: &[String],
        fleet: &[Cluster],
    ) -> Result<CelSelector, String> {
        let env = Arc::new(environment());
        let mut programs = Vec::with_capacity(expressions.len());
        for e in expressions {
            // cel-go declares one variable, `managedCluster`.
            programs.push(compile_with(&env, e, &["managedCluster"])?);
        }
        let scores = if programs
            .iter()
            .any(|p| p.references().has_function("scores"))
        {
            fleet
                .iter()
                .map(|c| (c.name.to_string(), c.add_on_scores.clone()))
                .collect()
        } else {
            ScoreTable::new()
        };
        Ok(CelSelector {
            env,
            programs,
            scores: Arc::new(scores),
        })
    }

    /// Does the cluster satisfy every expression?
    pub(super) fn matches(&self, cluster: &Cluster) -> bool {
        let Some(context) = self.context(cluster) else {
            return false;
        };
        self.programs
            .iter()
            .all(|p| matches!(p.execute(&context), Ok(cel::Value::Bool(true))))
    }

    /// The evaluation context of `cluster`: the functions and `managedCluster`.
    fn context(&self, cluster: &Cluster) -> Option<cel::Context<'_, '_>> {
        let managed = cel::to_value(managed_cluster(cluster)).ok()?;
        let mut context = cel::Context::with_env(self.env.clone());
        library::register_ocm(&mut context, self.scores.clone());
        register(&mut context).expect("no library function shadows a standard overload");
        context.add_variable_from_value("managedCluster", managed);
        Some(context)
    }
}

/// The variables the comprehension macros of `source` bind (`x` in `list.all(x, ...)`): cel-rust
/// lists them among an expression's references.
fn macro_variables(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    for m in ["all", "exists", "exists_one", "map", "filter"] {
        let pattern = format!(".{m}(");
        let mut rest = source;
        while let Some(at) = rest.find(&pattern) {
            rest = &rest[at + pattern.len()..];
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let after = rest.trim_start()[name.len()..].trim_start();
            if !name.is_empty() && after.starts_with(',') {
                out.push(name);
            }
        }
    }
    out
}

/// `expression` compiled in `env` as cel-go compiles it in an environment that declares
/// `variables`: a reference to any other name that no macro binds is undeclared, and calls of
/// the library's functions are checked ([`check::check_calls`]). Errors are worded as OCM's
/// (`compilation failed: ...`).
fn compile_with(
    env: &Arc<cel::Env>,
    expression: &str,
    variables: &[&str],
) -> Result<cel::Program, String> {
    let program = env
        .compile(expression)
        .map_err(|err| format!("compilation failed: {err}"))?;
    let refs = program.references();
    let bound = macro_variables(expression);
    let mut undeclared: Vec<&str> = refs
        .variables()
        .into_iter()
        .filter(|v| {
            !variables.contains(v)
                && !TYPE_NAMES.contains(v)
                // Namespaces of functions and types, which `check_calls` checks.
                && !check::NAMESPACES.contains(v)
                && !bound.iter().any(|b| b == v)
        })
        .collect();
    undeclared.sort_unstable();
    if let Some(v) = undeclared.first() {
        return Err(format!(
            "compilation failed: undeclared reference to '{v}' ({expression:?})"
        ));
    }
    check::check_calls(program.expression()).map_err(|err| format!("{err} ({expression:?})"))?;
    Ok(program)
}

/// CEL expressions over a Kubernetes object, in the environment OCM's work agent evaluates
/// condition rules in (ocm pkg/work/spoke/conditions/reader.go `celEnv`): sdk-go's
/// `BaseEnvOpts` (the standard library, optional types, the strings extension and the
/// Kubernetes libraries, as for cluster selectors) and sdk-go's `ConditionsLib`
/// (`hasConditions`); neither `scores` nor `parseJSON`, which only the cluster selectors'
/// environment declares. Pure.
pub(crate) struct ObjectCel {
    env: Arc<cel::Env>,
}

/// The functions only the cluster selectors' environment declares.
const SELECTOR_ONLY: &[&str] = &["scores", "parseJSON"];

impl ObjectCel {
    pub(crate) fn new() -> ObjectCel {
        ObjectCel {
            env: Arc::new(environment()),
        }
    }

    /// Compiles `expression` with `variables` declared.
    pub(crate) fn compile(
        &self,
        expression: &str,
        variables: &[&str],
    ) -> Result<cel::Program, String> {
        let program = compile_with(&self.env, expression, variables)?;
        if let Some(f) = SELECTOR_ONLY
            .iter()
            .find(|f| program.references().has_function(f))
        {
            return Err(format!(
                "compilation failed: undeclared reference to '{f}' ({expression:?})"
            ));
        }
        Ok(program)
    }

    /// Evaluates `program` with the variables bound to JSON values.
    pub(crate) fn evaluate(
        &self,
        program: &cel::Program,
        variables: &[(&str, &Value)],
    ) -> Result<cel::Value, String> {
        let mut context = cel::Context::with_env(self.env.clone());
        library::register_kubernetes(&mut context);
        library::register_conditions(&mut context);
        register(&mut context).expect("no library function shadows a standard overload");
        for (name, value) in variables {
            let v = cel::to_value(value).map_err(|e| e.to_string())?;
            context.add_variable_from_value(*name, v);
        }
        program.execute(&context).map_err(|e| e.to_string())
    }
}

fn environment() -> cel::Env {
    let mut env = cel::Env::stdlib();
    // OCM's BaseEnvOpts include cel-go's ext.Strings().
    env.add_extension(cel::extensions::strings)
        .expect("the strings extension declares no name twice");
    // Overloads of names the standard library or the strings extension declare.
    net::declare(&mut env).expect("string(IP) and string(CIDR) are new overloads");
    lists::declare(&mut env).expect("indexOf and lastIndexOf on lists are new overloads");
    env
}

/// Registers the Kubernetes libraries' functions that are not overloads of the environment's.
fn register(context: &mut cel::Context<'_, '_>) -> Result<(), cel::DeclarationError> {
    quantity::register(context)?;
    net::register(context)?;
    url::register(context)?;
    format::register(context)?;
    lists::register(context)
}

/// The ManagedCluster as the selector sees it (module doc).
fn managed_cluster(c: &Cluster) -> Value {
    let claims: Vec<Value> = c
        .properties
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    let taints: Vec<Value> = c
        .ocm_taints
        .iter()
        .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
        .collect();
    let labels: Map<String, Value> = c
        .ocm_labels
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    // `status.allocatable` / `status.capacity`: the properties the resource prioritizers read
    // (module doc of `ocm`), as the quantity strings an unstructured ManagedCluster holds.
    let resources = |cpu: &str, memory: &str| -> Map<String, Value> {
        [("cpu", cpu), ("memory", memory)]
            .into_iter()
            .filter_map(|(k, p)| Some((k.to_string(), Value::String(c.properties.get(p)?.clone()))))
            .collect()
    };
    let mut status = Map::new();
    status.insert("clusterClaims".into(), Value::Array(claims));
    for (field, cpu, memory) in [
        (
            "allocatable",
            super::ALLOCATABLE_CPU,
            super::ALLOCATABLE_MEMORY,
        ),
        ("capacity", super::CAPACITY_CPU, super::CAPACITY_MEMORY),
    ] {
        let r = resources(cpu, memory);
        if !r.is_empty() {
            status.insert(field.into(), Value::Object(r));
        }
    }
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": {"name": c.name, "labels": labels},
        "spec": {"taints": taints},
        "status": status,
    })
}

/// What an expression gives, for the libraries' tests: its value, or its compile or
/// evaluation error's text.
#[cfg(test)]
pub(super) fn eval(expr: &str) -> Result<cel::Value, String> {
    let selector = CelSelector::compile(&[expr.to_string()], &[])?;
    let context = selector
        .context(&Cluster::default())
        .expect("an empty cluster converts");
    selector.programs[0]
        .execute(&context)
        .map_err(|e| format!("evaluation failed: {e}"))
}

/// What a test case expects of an expression.
#[cfg(test)]
pub(super) enum Want {
    Value(cel::Value),
    /// An evaluation error whose text contains this.
    EvalError(&'static str),
    /// A compile error whose text contains this.
    CompileError(&'static str),
}

/// Runs table-driven cases `(name, expression, expected)`, naming the failing case.
#[cfg(test)]
pub(super) fn run_cases(cases: &[(&str, &str, Want)]) {
    for (name, expr, want) in cases {
        let got = eval(expr);
        match (want, &got) {
            (Want::Value(v), Ok(g)) if v == g => {}
            (Want::EvalError(e), Err(g)) if g.starts_with("evaluation failed") && g.contains(e) => {
            }
            (Want::CompileError(e), Err(g))
                if !g.starts_with("evaluation failed") && g.contains(e) => {}
            _ => panic!("{name}: {expr}: got {got:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn cluster(name: &str, labels: &[(&str, &str)], claims: &[(&str, &str)]) -> Cluster {
        let mut c = Cluster::default();
        c.name = name.into();
        c.ocm_labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        c.properties = claims
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        c
    }

    fn compile(exprs: &[&str], fleet: &[Cluster]) -> Result<CelSelector, String> {
        let exprs: Vec<String> = exprs.iter().map(|e| e.to_string()).collect();
        CelSelector::compile(&exprs, fleet)
    }

    /// Does `c` (alone in the fleet) satisfy `exprs`?
    fn matches(exprs: &[&str], c: &Cluster) -> bool {
        compile(exprs, std::slice::from_ref(c))
            .unwrap_or_else(|e| panic!("{exprs:?}: {e}"))
            .matches(c)
    }

    /// predicate_test.go "invalid CEL expression": `invalid.expression` does not compile in
    /// OCM's environment (undeclared reference); variables bound by macros are declared.
    #[test]
    fn undeclared_variables_do_not_compile() {
        let err = compile(&["invalid.expression"], &[]).err().unwrap();
        assert_eq!(
            err,
            "compilation failed: undeclared reference to 'invalid' (\"invalid.expression\")"
        );
        let ok = compile(
            &["managedCluster.status.clusterClaims.exists(c, c.name == 'cloud') && [1, 2].all(n , n > 0)"],
            &[],
        );
        assert!(ok.is_ok());
    }

    /// open-cluster-management.io/sdk-go pkg/cel/library/managedcluster_test.go, the score
    /// cases: its fake lister has AddOnPlacementScore `test-score` with cpu 3 and memory 4, and
    /// fails for any other name. gitfleet's inventory has one set of scores per cluster, so the
    /// failing lookup is a cluster without scores.
    #[test]
    fn scores_read_the_cluster_add_on_scores() {
        let mut scored = cluster("test", &[], &[]);
        scored.add_on_scores = BTreeMap::from([("cpu".into(), 3), ("memory".into(), 4)]);
        let unscored = cluster("other", &[], &[]);
        let fleet = [scored.clone(), unscored.clone()];
        let eval = |expr: &str, c: &Cluster| compile(&[expr], &fleet).unwrap().matches(c);
        // "match with score value" / "not match with score value".
        let three =
            "managedCluster.scores(\"test-score\").filter(s, s.name == 'cpu').all(e, e.value == 3)";
        assert!(eval(three, &scored));
        assert!(!eval(
            "managedCluster.scores(\"test-score\").filter(s, s.name == 'cpu').all(e, e.value > 3)",
            &scored
        ));
        assert!(eval(
            "managedCluster.scores('test-score').map(s, s.name) == ['cpu', 'memory']",
            &scored
        ));
        // "invalid score name": the lookup fails at evaluation, so the cluster does not match
        // (and `all` over an empty list would have been true).
        assert!(!eval(three, &unscored));
        // The receiver's metadata.name names the cluster whose scores are read, as in
        // clusterScores.
        assert!(eval(
            "{'metadata': {'name': 'test'}}.scores('x').size() == 2",
            &unscored
        ));
        assert!(!eval("{'spec': {}}.scores('x').size() == 2", &scored));
    }

    /// sdk-go managedcluster_test.go "match with json": numbers parse as doubles (Go's
    /// json.Unmarshal into interface{}) and compare equal to ints, as in cel-go.
    #[test]
    fn parse_json_parses_claim_values() {
        let gpu = r#"{"H100":[{"Standard_NC48ads_H100_v4":10},{"Standard_NC96ads_H100_v4":2}],"A100":[{"Standard_NC48ads_A100_v4":50},{"Standard_NC96ads_A100_v4":20}]}"#;
        let c = cluster("test", &[], &[("sku.gpu.kubernetes-fleet.io", gpu)]);
        let expr = r#"managedCluster.status.clusterClaims.exists(c, c.name == "sku.gpu.kubernetes-fleet.io" && c.value.parseJSON().H100.exists(e, e.Standard_NC96ads_H100_v4 == 2))"#;
        assert!(matches(&[expr], &c));
        assert!(matches(&["'{\"a\": 1.5}'.parseJSON().a == 1.5"], &c));
        assert!(matches(&["type('{\"a\": 1}'.parseJSON().a) == double"], &c));
        // Not JSON: an evaluation error, so no match.
        assert!(!matches(&["'{'.parseJSON() == {}"], &c));
    }

    /// ocm pkg/placement/helpers/cel_test.go "multiple expressions all match" and "multiple
    /// expressions one fails", and Kubernetes' semver library (semverlib.go).
    #[test]
    fn semver_compares_as_kubernetes_semver_library() {
        let c = cluster("c", &[("env", "prod"), ("version", "1.30.0")], &[]);
        let env = r#"managedCluster.metadata.labels["env"] == "prod""#;
        assert!(matches(
            &[
                env,
                r#"semver(managedCluster.metadata.labels["version"]).isLessThan(semver("1.31.0"))"#
            ],
            &c
        ));
        assert!(!matches(
            &[
                env,
                r#"semver(managedCluster.metadata.labels["version"]).isGreaterThan(semver("1.31.0"))"#
            ],
            &c
        ));
        for (expr, want) in [
            ("semver('1.2.3').major() == 1 && semver('1.2.3').minor() == 2 && semver('1.2.3').patch() == 3", true),
            ("semver('1.0.0').compareTo(semver('1.0.0')) == 0", true),
            ("semver('1.0.0').compareTo(semver('2.0.0')) == -1", true),
            ("semver('2.0.0').compareTo(semver('1.10.0')) == 1", true),
            // Precedence: a pre-release is lower; numeric identifiers compare as numbers and
            // below alphanumeric ones; build metadata is ignored (blang/semver Compare).
            ("semver('1.0.0-alpha').isLessThan(semver('1.0.0'))", true),
            ("semver('1.0.0-alpha.2').isLessThan(semver('1.0.0-alpha.10'))", true),
            ("semver('1.0.0-1').isLessThan(semver('1.0.0-alpha'))", true),
            ("semver('1.0.0+build.1') == semver('1.0.0+build.2')", true),
            ("semver('1.0.0+build.1').compareTo(semver('1.0.0')) == 0", true),
            ("semver('1.0.0') == semver('1.0.1')", false),
            // isSemver: strict SemVer 2.0, as blang/semver's Parse.
            ("isSemver('1.2.3-rc.1+b')", true),
            ("isSemver('v1.2.3')", false),
            ("isSemver('1.2')", false),
            ("isSemver('01.2.3')", false),
        ] {
            assert_eq!(matches(&[expr], &c), want, "{expr}");
        }
        // semver() of what is not a version is an evaluation error: no match, even negated.
        assert!(!matches(
            &["!semver('v1.2.3').isLessThan(semver('1.0.0'))"],
            &c
        ));
        assert!(!matches(
            &["semver(managedCluster.metadata.labels['env']).major() >= 0"],
            &c
        ));
    }

    /// Kubernetes' regex library (k8s.io/apiserver pkg/cel/library/regex.go, its documented
    /// examples), and what Go's regexp gives for empty matches (`FindString`/`FindAllString`,
    /// checked with go1 by hand: `"123 abc 456"` and `[0-9]*` give `["123" "" "" "" "" "456"]`).
    #[test]
    fn find_and_find_all_match_as_go_regexp() {
        let c = cluster("c", &[("zone", "eu-west-3b")], &[]);
        for expr in [
            "'abc 123'.find('[0-9]+') == '123'",
            "'abc 123'.find('xyz') == ''",
            "'123 abc 456'.findAll('[0-9]+') == ['123', '456']",
            "'123 abc 456'.findAll('[0-9]+', 1) == ['123']",
            "'123 abc 456'.findAll('[0-9]+', 0) == []",
            "'123 abc 456'.findAll('[0-9]+', -1) == ['123', '456']",
            "'123 abc 456'.findAll('xyz') == []",
            "'123 abc 456'.find('[0-9]*') == '123'",
            "'123 abc 456'.findAll('[0-9]*') == ['123', '', '', '', '', '456']",
            "'baaab'.findAll('a*') == ['', 'aaa', '']",
            "managedCluster.metadata.labels['zone'].find('[a-z]+-[a-z]+-[0-9]') == 'eu-west-3'",
        ] {
            assert!(matches(&[expr], &c), "{expr}");
        }
        // A literal pattern that does not compile fails when OCM makes the program
        // (OptimizeRegex): the placement is misconfigured. One computed at evaluation is only
        // no match.
        assert_eq!(
            compile(&["'a'.find('[') == ''"], &[]).err().unwrap(),
            "instantiation failed: Illegal regex: regex parse error:\n    [\n    ^\nerror: unclosed character class (\"'a'.find('[') == ''\")"
        );
        assert!(!matches(
            &["'a'.find(managedCluster.metadata.name + '[') == ''"],
            &c
        ));
        for expr in [
            "find('a', 'b') == ''",
            "'a'.findAll('b', 'c') == []",
            "'a'.find() == ''",
        ] {
            assert!(compile(&[expr], &[]).is_err(), "{expr}");
        }
    }

    /// `status.allocatable` and `status.capacity` hold the resource properties as quantity
    /// strings, as a ManagedCluster's status does.
    #[test]
    fn allocatable_and_capacity_come_from_the_resource_properties() {
        let c = cluster(
            "c",
            &[],
            &[
                ("resources.kubernetes-fleet.io/allocatable-cpu", "7600m"),
                ("resources.kubernetes-fleet.io/total-memory", "32Gi"),
            ],
        );
        assert!(matches(
            &["managedCluster.status.allocatable.cpu == '7600m'"],
            &c
        ));
        assert!(matches(
            &["managedCluster.status.capacity.memory == '32Gi'"],
            &c
        ));
        assert!(matches(&["!has(managedCluster.status.capacity.cpu)"], &c));
        assert!(!matches(
            &["managedCluster.status.allocatable.memory == '1'"],
            &c
        ));
    }

    /// What cel-go's type checker rejects in OCM's environment is a compile error here too, so
    /// the placement is misconfigured; a non-bool result is no match (`isResultValid`).
    #[test]
    fn library_calls_of_the_wrong_shape_do_not_compile() {
        for expr in [
            "scores(managedCluster, 'x').size() > 0",
            "managedCluster.scores().size() > 0",
            "managedCluster.scores(1).size() > 0",
            "parseJSON('{}') == {}",
            "semver(1).major() == 1",
            "'1.0.0'.semver().major() == 1",
            "'1.0.0'.isLessThan(semver('2.0.0'))",
            "semver('1.0.0').isLessThan('2.0.0')",
            "1.major() == 1",
        ] {
            let err = compile(&[expr], &[])
                .err()
                .unwrap_or_else(|| panic!("{expr}"));
            assert!(
                err.starts_with("compilation failed: found no matching overload for '"),
                "{expr}: {err}"
            );
        }
        assert!(matches(
            &["quantity('1Gi').isLessThan(quantity('2Gi'))"],
            &cluster("c", &[], &[])
        ));
        let c = cluster("c", &[], &[]);
        assert!(!matches(&["managedCluster.metadata.name"], &c));
        assert!(!matches(
            &["managedCluster.status.version.kubernetes == '1.30'"],
            &c
        ));
        assert!(!matches(&["1"], &c));
    }
}
