//! deploy/: the Kustomize base renders with kubectl's kustomize, the Helm chart passes `helm lint`,
//! and with matching values `helm template` renders the same objects as Kustomize (the Namespace
//! aside: Helm makes it with `--create-namespace`). The pods follow the restricted Pod Security
//! profile and the RBAC stays inside gitfleet's namespace; the sharded overlay adds the Role rules
//! `--shards` needs, which the base does without.
//!
//! Both renderings are accepted by a real API server: `kubectl apply --dry-run=server` against a
//! member of the test bed (real kube-apiserver, with its admission chain and OpenAPI schemas).
//!
//! helm comes from `go install helm.sh/helm/v3/cmd/helm` (`.ci/run` installs it). Without it the
//! Helm checks say they were skipped, unless `GITFLEET_REQUIRE_TOOLS=1` (CI) makes that a failure.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod common;
use common::kubectl::Kubectl as _;
use common::members::{self, Backend, Members};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(program: &Path, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("{} runs: {e}", program.display()));
    assert!(
        out.status.success(),
        "{} {args:?} failed:\n{}{}",
        program.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The objects of a YAML stream, by `Kind/name`.
fn objects(yaml: &str) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    // Read as the API server reads it (YAML 1.1 scalars), through gitfleet's own reader.
    for v in gitfleet::yaml::documents(yaml).expect("rendered YAML parses") {
        if v.is_null() {
            continue;
        }
        let key = format!(
            "{}/{}",
            v["kind"].as_str().unwrap(),
            v["metadata"]["name"].as_str().unwrap()
        );
        assert!(out.insert(key.clone(), v).is_none(), "{key} rendered twice");
    }
    out
}

fn kustomize(dir: &str) -> BTreeMap<String, Value> {
    objects(&run(Path::new("kubectl"), &["kustomize", dir]))
}

fn deployment(objs: &BTreeMap<String, Value>) -> &Value {
    &objs["Deployment/gitfleet"]
}

/// The image's dependency stage reads the workspace's manifests before the sources: each crate's
/// Cargo.toml must be copied there, or `cargo fetch` fails inside the image build.
#[test]
fn the_dockerfile_copies_every_crate_manifest_of_the_workspace() {
    let dockerfile = std::fs::read_to_string(root().join("deploy/Dockerfile")).unwrap();
    let crates = std::fs::read_dir(root().join("crates")).unwrap();
    let mut seen = 0;
    for entry in crates {
        let dir = entry.unwrap().path();
        if !dir.join("Cargo.toml").is_file() {
            continue;
        }
        let name = dir.file_name().unwrap().to_str().unwrap().to_string();
        let copy = format!("COPY crates/{name}/Cargo.toml crates/{name}/");
        assert!(
            dockerfile.lines().any(|l| l.trim() == copy),
            "deploy/Dockerfile does not copy crates/{name}/Cargo.toml: add `{copy}`"
        );
        seen += 1;
    }
    assert!(seen > 0, "no crate found under crates/");
}

#[test]
fn kustomize_base_runs_two_restricted_replicas_with_namespaced_rbac() {
    let objs = kustomize("deploy/kustomize/base");
    let kinds: Vec<&str> = objs.keys().map(|k| k.split('/').next().unwrap()).collect();
    for kind in [
        "Namespace",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "NetworkPolicy",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing: {kinds:?}");
    }
    // Nothing cluster-wide: the daemon only needs its own namespace's Lease and ConfigMaps.
    assert!(!kinds.iter().any(|k| k.starts_with("Cluster")), "{kinds:?}");
    for (key, obj) in &objs {
        if !key.starts_with("Namespace/") {
            assert_eq!(obj["metadata"]["namespace"], "gitfleet", "{key}");
        }
    }
    let role = &objs["Role/gitfleet"];
    let resources: Vec<&str> = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["resources"].as_array().unwrap())
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(resources, ["leases", "configmaps"]);

    let deploy = deployment(&objs);
    assert_eq!(deploy["spec"]["replicas"], 2);
    let pod = &deploy["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let container = &pod["containers"][0];
    let sc = &container["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    // The members' kubeconfig comes from a Secret, read-only.
    let members = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "members")
        .expect("members volume");
    assert_eq!(members["secret"]["secretName"], "gitfleet-members");
    // The PDB keeps one replica through voluntary disruptions.
    assert_eq!(
        objs["PodDisruptionBudget/gitfleet"]["spec"]["maxUnavailable"],
        1
    );
}

/// The verbs the Role grants on `resource` (of any API group), over all its rules.
fn role_verbs(objs: &BTreeMap<String, Value>, resource: &str) -> BTreeSet<String> {
    objs["Role/gitfleet"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x == resource)
        })
        .flat_map(|r| r["verbs"].as_array().unwrap())
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

fn strings(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|v| v.to_string()).collect()
}

/// The sharded overlay adds what `--shards` uses (listing the group's Leases and deleting
/// replica Leases, watching orders and reports, deleting an earlier leader's by label, the
/// renderings' Secrets) and nothing else; the base, run without shards, does without it.
#[test]
fn the_sharded_overlay_runs_four_replicas_with_the_verbs_shards_need_and_the_base_without_them() {
    let base = kustomize("deploy/kustomize/base");
    let sharded = kustomize("deploy/kustomize/overlays/sharded");
    let base_configmaps = strings(&["get", "list", "create", "update", "delete"]);
    assert_eq!(role_verbs(&base, "configmaps"), base_configmaps);
    assert_eq!(role_verbs(&base, "secrets"), strings(&[]));
    assert_eq!(
        role_verbs(&sharded, "configmaps"),
        &base_configmaps | &strings(&["watch", "deletecollection"])
    );
    assert_eq!(
        role_verbs(&sharded, "secrets"),
        strings(&["get", "list", "create", "delete"])
    );
    let base_leases = strings(&["get", "create", "update"]);
    assert_eq!(role_verbs(&base, "leases"), base_leases);
    assert_eq!(
        role_verbs(&sharded, "leases"),
        &base_leases | &strings(&["list", "delete"])
    );
    let resources = |objs: &BTreeMap<String, Value>| -> BTreeSet<String> {
        objs["Role/gitfleet"]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r["resources"].as_array().unwrap())
            .map(|r| r.as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        resources(&sharded),
        strings(&["leases", "configmaps", "secrets"])
    );
    assert_eq!(resources(&base), strings(&["leases", "configmaps"]));

    let deploy = deployment(&sharded);
    assert_eq!(deploy["spec"]["replicas"], 4);
    let env = deploy["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap();
    let shards = env
        .iter()
        .find(|e| e["name"] == "GITFLEET_SHARDS")
        .expect("GITFLEET_SHARDS set");
    assert_eq!(shards["value"], "16");
    assert!(
        !deployment(&base)["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "GITFLEET_SHARDS")
    );
    // A drain still takes one replica at a time: its shards move to the others.
    assert_eq!(
        sharded["PodDisruptionBudget/gitfleet"]["spec"]["maxUnavailable"],
        1
    );
}

#[test]
fn components_add_credentials_as_files_never_as_values() {
    let objs = kustomize("deploy/kustomize/overlays/example");
    let container = &deployment(&objs)["spec"]["template"]["spec"]["containers"][0];
    let env: BTreeMap<&str, &Value> = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e))
        .collect();
    for name in [
        "GITFLEET_GIT_SSH_KEY",
        "GITFLEET_GIT_KNOWN_HOSTS",
        "GITFLEET_WEBHOOK_SECRET_FILE",
        "GITFLEET_TRUSTED_SIGNERS",
    ] {
        let value = env[name]["value"].as_str().unwrap();
        assert!(value.starts_with("/etc/gitfleet/"), "{name}={value}");
    }
    assert_eq!(
        objs["ConfigMap/gitfleet-config"]["data"]["GITFLEET_REPO"],
        "ssh://git@git.example.com/platform/fleet.git"
    );
}

#[test]
fn helm_chart_lints_and_renders_what_kustomize_renders() {
    let Some(helm) = gitfleet_testkit::tools::HELM.find("the Helm chart checks") else {
        return;
    };
    let lint = run(&helm, &["lint", "deploy/helm/gitfleet"]);
    assert!(lint.contains("0 chart(s) failed"), "{lint}");
    let cases: [(&str, &[&str]); 3] = [
        ("deploy/kustomize/base", &[]),
        (
            "deploy/kustomize/overlays/sharded",
            &["--set", "replicas=4,shards=16"],
        ),
        (
            "deploy/kustomize/overlays/example",
            &[
                "--set",
                "git.sshSecret=gitfleet-git-ssh,webhookSecret=gitfleet-webhook,trustConfigMap=gitfleet-trust",
                "--set",
                "repository.url=ssh://git@git.example.com/platform/fleet.git",
            ],
        ),
    ];
    for (dir, set) in cases {
        let mut want = kustomize(dir);
        want.remove("Namespace/gitfleet");
        let mut args = vec![
            "template",
            "gitfleet",
            "deploy/helm/gitfleet",
            "--namespace",
            "gitfleet",
        ];
        args.extend_from_slice(set);
        let got = objects(&run(&helm, &args));
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{dir}"
        );
        for (key, obj) in &want {
            assert_eq!(
                &got[key], obj,
                "{dir}: {key} differs between Helm and Kustomize"
            );
        }
    }
}

/// One real member: the target of the server-side dry runs.
const ONE_MEMBER: &str =
    "members:\n  - name: hosting\n    nodes:\n      - cpu: \"4\"\n        memory: 16Gi\n";

/// `kubectl apply --dry-run=server` of a rendered stream, the Namespace created first for real
/// (a dry run does not create it, and the namespaced objects are checked against it).
fn server_dry_run(members: &Members, yaml: &str) -> String {
    let (code, out, err) = members.kubectl("hosting", &["create", "namespace", "gitfleet"]);
    assert!(code == 0 || err.contains("AlreadyExists"), "{out}{err}");
    let (code, out, err) = members.kubectl_stdin(
        "hosting",
        &["apply", "--dry-run=server", "--server-side", "-f", "-"],
        yaml,
    );
    assert_eq!(
        code, 0,
        "the API server refused the rendering:\n{err}\n{yaml}"
    );
    out
}

#[test]
fn a_real_api_server_accepts_the_kustomize_and_helm_renderings() {
    if !members::available(Backend::Real) {
        return;
    }
    let members = Members::start(Backend::Real, ONE_MEMBER);
    for dir in [
        "deploy/kustomize/base",
        "deploy/kustomize/overlays/example",
        "deploy/kustomize/overlays/sharded",
    ] {
        let yaml = run(Path::new("kubectl"), &["kustomize", dir]);
        let out = server_dry_run(&members, &yaml);
        for object in [
            "deployment.apps/gitfleet",
            "networkpolicy.networking.k8s.io/gitfleet",
        ] {
            assert!(out.contains(object), "{dir}: {object} not applied:\n{out}");
        }
    }
    let Some(helm) = gitfleet_testkit::tools::HELM.find("the Helm chart checks") else {
        return;
    };
    let yaml = run(
        &helm,
        &[
            "template",
            "gitfleet",
            "deploy/helm/gitfleet",
            "--namespace",
            "gitfleet",
        ],
    );
    let out = server_dry_run(&members, &yaml);
    assert!(out.contains("poddisruptionbudget.policy/gitfleet"), "{out}");
}

/// Every `GITFLEET_*` variable the manifests and the chart set is one `gitfleet run` reads (a
/// misspelt one is silently ignored by the daemon, as any unknown variable is).
#[test]
fn every_variable_the_manifests_set_is_a_run_flags() {
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let known: std::collections::BTreeSet<&str> = help
        .split("[env: ")
        .skip(1)
        .filter_map(|rest| rest.split(['=', ']']).next())
        .collect();
    assert!(known.contains("GITFLEET_STATE_NAMESPACE"), "{known:?}");
    let mut set: Vec<String> = Vec::new();
    for overlay in ["example", "sharded"] {
        let objs = kustomize(&format!("deploy/kustomize/overlays/{overlay}"));
        let container = &deployment(&objs)["spec"]["template"]["spec"]["containers"][0];
        set.extend(
            container["env"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["name"].as_str().unwrap().to_string()),
        );
    }
    let objs = kustomize("deploy/kustomize/overlays/example");
    set.extend(
        objs["ConfigMap/gitfleet-config"]["data"]
            .as_object()
            .unwrap()
            .keys()
            .cloned(),
    );
    let chart = std::fs::read_to_string(
        common::manifest_dir().join("deploy/helm/gitfleet/templates/deployment.yaml"),
    )
    .unwrap()
        + &std::fs::read_to_string(
            common::manifest_dir().join("deploy/helm/gitfleet/templates/configmap.yaml"),
        )
        .unwrap();
    set.extend(
        chart
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("GITFLEET_"))
            .map(str::to_string),
    );
    for name in &set {
        assert!(
            known.contains(name.as_str()),
            "{name} is no `gitfleet run` variable"
        );
    }
    assert!(set.len() >= 10, "{set:?}");
}
