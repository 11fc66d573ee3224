//! Object metadata checked as a real API server checks it: a table of names, label keys and
//! values, annotation keys and sizes, each written into a built-in kind (ConfigMap mostly; a
//! Namespace, a Service and a ClusterRole for their own name rules), given to `gitfleet
//! validate` and to a server-side dry run on a test-bed member (a real kube-apiserver). Built-in
//! kinds apply the same metadata rules as custom resources, so the server is the oracle: the
//! test fails on any case where the two disagree. Real-member tier: skipped (with a note)
//! without the test bed, a failure with `GITFLEET_TESTBED_REQUIRED=1`.

mod common;
use common::kubectl::Kubectl as _;
use common::members::{available, Backend, Members};
use common::{gitfleet, Repo};

const FLEET: &str = "anonymousAuth: true\nmembers:\n  - name: hub\n";

/// The verdicts of the API server and of `gitfleet validate` on a table of cases.
#[derive(Default)]
struct Tally {
    accepted: usize,
    refused: usize,
    disagreements: Vec<String>,
}

impl Tally {
    /// One case: the server's exit code and error, and the lines gitfleet refused it with.
    fn record(&mut self, what: &str, (code, server_err): (i32, &str), ours: &[String]) {
        match (code == 0, ours.is_empty()) {
            (true, true) => self.accepted += 1,
            (false, false) => self.refused += 1,
            (server, _) => self.disagreements.push(format!(
                "{what}: the API server {}, gitfleet {}",
                if server {
                    "accepts".to_string()
                } else {
                    format!("refuses ({})", server_err.trim())
                },
                if ours.is_empty() {
                    "accepts".to_string()
                } else {
                    format!("refuses ({})", ours.join("; "))
                }
            )),
        }
    }

    /// How many both accepted and both refused; fails on any disagreement.
    fn agreed(&self) -> (usize, usize) {
        assert!(
            self.disagreements.is_empty(),
            "gitfleet and the API server disagree:\n{}",
            self.disagreements.join("\n")
        );
        (self.accepted, self.refused)
    }
}

/// `gitfleet validate` on one repository holding `files` and one file per case: the lines it
/// refused each case with, by case.
fn refusals(files: &[(&str, &str)], cases: impl Iterator<Item = String>) -> Vec<Vec<String>> {
    let repo = Repo::new();
    for (path, text) in files {
        repo.write(path, text);
    }
    let names: Vec<String> = cases
        .enumerate()
        .map(|(i, yaml)| {
            let name = format!("case-{i:02}.yaml");
            repo.write(&name, &yaml);
            name
        })
        .collect();
    repo.commit("cases");
    let run = gitfleet(&["validate", "--repo", &repo.path().display().to_string()]);
    names
        .iter()
        .map(|name| {
            let file = format!("{name}:");
            (run.stderr.lines())
                .filter(|l| l.starts_with(&file))
                .map(String::from)
                .collect()
        })
        .collect()
}

/// One case: a name, and the object (YAML).
fn cases() -> Vec<(String, String)> {
    let cm = |metadata: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: default\n{metadata}data: {{k: v}}\n")
    };
    let labelled = |key: &str, value: &str| {
        cm(&format!(
            "  name: c\n  labels:\n    {}: {}\n",
            serde_json::to_string(key).unwrap(),
            serde_json::to_string(value).unwrap()
        ))
    };
    let annotated = |key: &str, value: &str| {
        cm(&format!(
            "  name: c\n  annotations:\n    {}: {}\n",
            serde_json::to_string(key).unwrap(),
            serde_json::to_string(value).unwrap()
        ))
    };
    let named = |name: &str| {
        cm(&format!(
            "  name: {}\n",
            serde_json::to_string(name).unwrap()
        ))
    };
    let kind = |api: &str, kind: &str, name: &str, rest: &str| {
        format!(
            "apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: {}\n{rest}",
            serde_json::to_string(name).unwrap()
        )
    };
    let namespace = |name: &str| kind("v1", "Namespace", name, "");
    let service = |name: &str| {
        kind(
            "v1",
            "Service",
            name,
            "  namespace: default\nspec:\n  ports: [{port: 80}]\n",
        )
    };
    let role = |name: &str| {
        kind(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            name,
            "rules: []\n",
        )
    };
    let long = |n: usize| "a".repeat(n);
    let mut out: Vec<(String, String)> = Vec::new();
    let mut add = |what: String, yaml: String| out.push((what, yaml));
    for n in [
        "c",
        "a.b-c",
        "a..b",
        "Bad",
        "-a",
        "a_b",
        "a.",
        &long(253),
        &long(254),
    ] {
        add(
            format!("ConfigMap name {n:.20}… ({} chars)", n.len()),
            named(n),
        );
    }
    for n in ["team-a", "team.a", &long(63), &long(64), "9lives"] {
        add(
            format!("Namespace name {n:.20}… ({} chars)", n.len()),
            namespace(n),
        );
    }
    for n in ["web", "9web", "web.a"] {
        add(format!("Service name {n}"), service(n));
    }
    for n in ["system:Odd_Name", "a/b", "a%b", ".."] {
        add(format!("ClusterRole name {n}"), role(n));
    }
    let prefix253 = format!("{}/x", long(253));
    let prefix254 = format!("{}/x", long(254));
    for k in [
        "a",
        "example.com/a",
        "a.b_c-D",
        "bad key!",
        "a/b/c",
        "/a",
        "a/",
        "Example.com/a",
        "-a",
        "a-",
        &long(63),
        &long(64),
        &prefix253,
        &prefix254,
    ] {
        add(
            format!("label key {k:.30}… ({} chars)", k.len()),
            labelled(k, "v"),
        );
    }
    for v in ["", "v1.2_x-Y", "-a", "a b", "a/b", &long(63), &long(64)] {
        add(
            format!("label value {v:.20}… ({} chars)", v.len()),
            labelled("k", v),
        );
    }
    for k in [
        "Example.COM/Some_Key",
        "gitfleet.io/property.example.com/cost-tier",
        "gitfleet.io/properties",
        "bad key!",
        "a/b/c",
    ] {
        add(
            format!("annotation key {k}"),
            annotated(k, "any value / at all"),
        );
    }
    // The limit counts keys and values: key "k" plus a value one byte short, then exactly at it.
    for n in [256 * 1024 - 2, 256 * 1024 - 1, 256 * 1024] {
        add(
            format!("annotations of {} bytes", n + 1),
            annotated("k", &"x".repeat(n)),
        );
    }
    // Each its own name, so that no two cases are one object.
    out.into_iter()
        .enumerate()
        .map(|(i, (what, yaml))| {
            (
                what,
                yaml.replace("  name: c\n", &format!("  name: c-{i}\n")),
            )
        })
        .collect()
}

#[test]
fn metadata_is_checked_as_the_api_server_checks_it() {
    if !available(Backend::Real) {
        return;
    }
    let cases = cases();
    let refused_by_gitfleet = refusals(&[], cases.iter().map(|(_, yaml)| yaml.clone()));

    let members = Members::start(Backend::Real, FLEET);
    let mut tally = Tally::default();
    for (i, (what, yaml)) in cases.iter().enumerate() {
        let (code, _, server_err) = members.kubectl_stdin(
            "hub",
            &["create", "--dry-run=server", "--validate=strict", "-f", "-"],
            yaml,
        );
        tally.record(what, (code, &server_err), &refused_by_gitfleet[i]);
    }
    eprintln!(
        "metadata cases: {} ({} accepted and {} refused by both, {} disagreements)",
        cases.len(),
        tally.accepted,
        tally.refused,
        tally.disagreements.len()
    );
    let (accepted, refused) = tally.agreed();
    assert!(
        accepted > 10 && refused > 10,
        "{accepted} accepted, {refused} refused"
    );
}

/// A CustomResourceDefinition of the test's own: a status of two fields (`phase` a required
/// string, `n` an integer ≥ 0), with the status subresource (as every fleet kind with a status
/// has it) or without any status.
fn probe_crd(plural: &str, kind: &str, with_status: bool) -> String {
    let (subresources, status) = if with_status {
        (
            "    subresources: {status: {}}\n",
            "          status: {type: object, required: [phase], properties: {phase: {type: string}, n: {type: integer, minimum: 0}}}\n",
        )
    } else {
        ("", "")
    };
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: {plural}.example.com}}\nspec:\n  group: example.com\n  names: {{kind: {kind}, plural: {plural}, singular: {}, listKind: {kind}List}}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n{subresources}    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec: {{type: object, properties: {{size: {{type: integer}}}}}}\n{status}",
        kind.to_lowercase()
    )
}

/// What a real API server does with a CRD object's `status` under `--validate=strict`, and
/// gitfleet the same with its kinds: with the status subresource the status is dropped before
/// validation (wrong types, a missing required field, a status that is not even an object are
/// admitted) but strict decoding refuses unknown fields in it, at any depth; a CRD without a
/// status refuses the field. Each case is one status on the test's own CRD (the oracle) and the
/// same shape of status on a fleet kind given to `gitfleet validate`; they must agree.
#[test]
fn status_fields_are_checked_as_the_api_server_checks_them() {
    if !available(Backend::Real) {
        return;
    }
    let crp = |status: &str| {
        format!("apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\nmetadata: {{name: web}}\nspec:\n  resourceSelectors: [{{group: '', version: v1, kind: Namespace, name: app}}]\nstatus: {status}\n")
    };
    let cro = "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourceOverride\nmetadata: {name: cro}\nspec:\n  clusterResourceSelectors: [{group: '', version: v1, kind: Namespace, name: app}]\n  policy:\n    overrideRules: [{jsonPatchOverrides: [{op: add, path: /metadata/labels/a, value: b}]}]\nstatus: {}\n";
    // (what, kind of the test's CRD, its status, the fleet object with the same status shape)
    let cases: Vec<(&str, &str, &str, String)> = vec![
        (
            "a valid status",
            "Probe",
            "{phase: ok}",
            crp("{observedResourceIndex: '1'}"),
        ),
        (
            "an unknown status field",
            "Probe",
            "{phase: ok, bogus: 1}",
            crp("{observedResourceIndex: '1', bogus: 1}"),
        ),
        (
            "an unknown field in a status object",
            "Probe",
            "{phase: ok, deep: {a: 1}}",
            crp("{conditions: [{type: Scheduled, status: 'True', severity: high}]}"),
        ),
        (
            "a status field of the wrong type",
            "Probe",
            "{phase: 3}",
            crp("{observedResourceIndex: 3}"),
        ),
        (
            "a status field out of range",
            "Probe",
            "{phase: ok, n: -1}",
            crp("{conditions: [{type: Scheduled, status: 'True', observedGeneration: -1}]}"),
        ),
        (
            "a status without its required field",
            "Probe",
            "{n: 1}",
            crp("{conditions: [{type: Scheduled}]}"),
        ),
        ("a status that is not an object", "Probe", "x", crp("x")),
        (
            "a status on a kind that declares none",
            "Bare",
            "{}",
            cro.to_string(),
        ),
    ];

    let namespace = "apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n";
    // One placement name per case: two of one name would be a duplicate object.
    let refused_by_gitfleet = refusals(
        &[("namespace.yaml", namespace)],
        (cases.iter().enumerate())
            .map(|(i, (_, _, _, yaml))| yaml.replace("{name: web}", &format!("{{name: web-{i}}}"))),
    );

    let members = Members::start(Backend::Real, FLEET);
    members.apply("hub", &probe_crd("probes", "Probe", true), &[]);
    members.apply("hub", &probe_crd("bares", "Bare", false), &[]);
    common::hub::await_crds(&members);

    let mut tally = Tally::default();
    for (i, (what, kind, status, _)) in cases.iter().enumerate() {
        let probe = format!("apiVersion: example.com/v1\nkind: {kind}\nmetadata: {{name: p, namespace: default}}\nspec: {{size: 1}}\nstatus: {status}\n");
        let (code, _, server_err) = members.kubectl_stdin(
            "hub",
            &["apply", "--dry-run=server", "--validate=strict", "-f", "-"],
            &probe,
        );
        tally.record(what, (code, &server_err), &refused_by_gitfleet[i]);
    }
    // The oracle's own facts, so that a change of the server's behaviour is seen: three
    // refusals (unknown fields, a status where none is declared), five admissions.
    assert_eq!(tally.agreed(), (5, 3));
}
