//! OCM's CEL cluster selector (`spec.predicates[].requiredClusterSelector.celSelector`), as
//! open-cluster-management-io/ocm evaluates it (pkg/placement/helpers/cel.go, used by
//! pkg/placement/plugins/predicate/predicate.go):
//! - every expression of a selector is compiled first; one that does not compile makes the
//!   placement `PlacementMisconfigured` (`Predicate:` + the error), checked only when there are
//!   candidate clusters;
//! - a cluster matches when every expression evaluates to `true`; an evaluation error or a
//!   non-bool result is no match (`EvaluateSingleExpression` logs it and the cluster is left out);
//! - the one variable is `managedCluster`, the ManagedCluster as a map.
//!
//! Evaluated with cel-rust (`cel`), on its standard environment plus the strings extension
//! (OCM's `ext.Strings()`). Where gitfleet differs, because it is not cel-go:
//! - `managedCluster` is built from what gitfleet knows of the cluster: `metadata.name`,
//!   `metadata.labels` (the ManagedCluster's, with the cluster-set label), `spec.taints`, and
//!   `status.clusterClaims` from its properties (as claims are for the claim selector).
//! - The library functions OCM registers on top of cel-go's (`scores`, `parseJSON`, and the
//!   Kubernetes libraries: semver, quantity, IP, CIDR, URL, format, regex `find`, list helpers)
//!   are not provided: an expression that calls one is reported as a compile error naming it, so
//!   the placement is misconfigured instead of selecting wrongly.
//! - cel-rust parses but does not type-check. Undeclared variables are caught at compile time
//!   here as in cel-go (any name but `managedCluster` and those the comprehension macros bind);
//!   a call to a function no environment declares fails at evaluation (no match), where cel-go
//!   fails at compilation; compile error texts are cel-rust's.
//!
//! Pure: values in, values out.

use super::super::fleet::Cluster;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// Functions OCM's CEL environment declares that gitfleet does not provide (module doc), by the
/// library that declares them in OCM (open-cluster-management.io/sdk-go pkg/cel/library and
/// k8s.io/apiserver/pkg/cel/library).
const NOT_PROVIDED: &[&str] = &[
    // sdk-go ManagedClusterLib, JsonLib
    "scores",
    "parseJSON",
    // Kubernetes SemverLib
    "semver",
    "isSemver",
    "major",
    "minor",
    "patch",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
    // Quantity
    "quantity",
    "isQuantity",
    "asInteger",
    "asApproximateFloat",
    "isInteger",
    "sign",
    "add",
    "sub",
    // IP, CIDR, URLs
    "ip",
    "isIP",
    "cidr",
    "isCIDR",
    "url",
    "isURL",
    // Regex, Lists, Format
    "find",
    "findAll",
    "isSorted",
    "sum",
    "format",
];

/// One predicate's compiled CEL expressions.
pub(super) struct CelSelector {
    env: Arc<cel::Env>,
    programs: Vec<cel::Program>,
}

impl CelSelector {
    /// Compiles every expression; the first that does not compile is the error, worded as OCM
    /// words it (`compilation failed: ...`).
    pub(super) fn compile(expressions: &[String]) -> Result<CelSelector, String> {
        let env = Arc::new(environment());
        let mut programs = Vec::with_capacity(expressions.len());
        for e in expressions {
            let program = env
                .compile(e)
                .map_err(|err| format!("compilation failed: {err}"))?;
            let refs = program.references();
            // cel-go declares one variable, `managedCluster`; any other name that no macro binds
            // is an undeclared reference at compile time there.
            let bound = macro_variables(e);
            let mut undeclared: Vec<&str> = refs
                .variables()
                .into_iter()
                .filter(|v| *v != "managedCluster" && !bound.iter().any(|b| b == v))
                .collect();
            undeclared.sort_unstable();
            if let Some(v) = undeclared.first() {
                return Err(format!(
                    "compilation failed: undeclared reference to '{v}' ({e:?})"
                ));
            }
            let mut missing: Vec<&str> = refs
                .functions()
                .into_iter()
                .filter(|f| NOT_PROVIDED.contains(f))
                .collect();
            missing.sort_unstable();
            if let Some(f) = missing.first() {
                return Err(format!(
                    "compilation failed: function '{f}' of OCM's CEL environment is not supported by gitfleet ({e:?})"
                ));
            }
            programs.push(program);
        }
        Ok(CelSelector { env, programs })
    }

    /// Does the cluster satisfy every expression?
    pub(super) fn matches(&self, cluster: &Cluster) -> bool {
        let Ok(managed) = cel::to_value(managed_cluster(cluster)) else {
            return false;
        };
        let mut context = cel::Context::with_env(self.env.clone());
        context.add_variable_from_value("managedCluster", managed);
        self.programs
            .iter()
            .all(|p| matches!(p.execute(&context), Ok(cel::Value::Bool(true))))
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

fn environment() -> cel::Env {
    let mut env = cel::Env::stdlib();
    // OCM's BaseEnvOpts include cel-go's ext.Strings().
    env.add_extension(cel::extensions::strings)
        .expect("the strings extension declares no name twice");
    env
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
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": {"name": c.name, "labels": labels},
        "spec": {"taints": taints},
        "status": {"clusterClaims": claims},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// predicate_test.go "invalid CEL expression": `invalid.expression` does not compile in
    /// OCM's environment (undeclared reference); variables bound by macros are declared.
    #[test]
    fn undeclared_variables_do_not_compile() {
        let err = CelSelector::compile(&["invalid.expression".to_string()])
            .err()
            .unwrap();
        assert_eq!(
            err,
            "compilation failed: undeclared reference to 'invalid' (\"invalid.expression\")"
        );
        let ok = CelSelector::compile(&[
            "managedCluster.status.clusterClaims.exists(c, c.name == 'cloud') && [1, 2].all(n , n > 0)"
                .to_string(),
        ]);
        assert!(ok.is_ok());
    }
}
