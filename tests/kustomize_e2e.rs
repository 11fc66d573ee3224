//! Kustomize folders end to end: a base and one overlay per environment in a real git
//! repository, built by the real `kustomize` (built from its Go module by `.ci/run`) through the
//! real binary. Only the overlays are built (the base only through them); every rendered object
//! is traced to its kustomization in `render` and `plan`; members (on `gitfleet sim` and on real
//! API servers) get what each environment's overlay renders; a restart of the daemon builds
//! nothing again (the renderings are kept under its state), a changed base is built again.
//! Hostile folders (a remote base, a path leaving the repository, a symbolic link) and a missing
//! kustomize are clear errors, refused before kustomize runs.

mod common;
use common::kubectl::Kubectl as _;

use common::members::{Backend, Members};
use common::{Repo, Run};
use std::path::Path;

on_both_backends!(each_environment_gets_its_overlay_and_a_restart_builds_nothing_again);

const FLEET: &str = r#"
anonymousAuth: true
members:
  - name: alpha
  - name: beta
"#;

fn member(name: &str, env: &str) -> String {
    format!(
        "apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata:
  name: {name}
  labels:
    env: {env}
spec:
  identity: {{name: member, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}
"
    )
}

fn base(greeting: &str) -> String {
    format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [namespace.yaml]
configMapGenerator:
- name: web-config
  literals: [greeting={greeting}]
"
    )
}

fn overlay(env: &str) -> String {
    format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [../../base]
namespace: web-{env}
labels:
- pairs: {{env: {env}}}
"
    )
}

fn placement(env: &str) -> String {
    format!(
        "apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: web-{env}
spec:
  resourceSelectors:
  - {{group: '', version: v1, kind: Namespace, name: web-{env}}}
  policy:
    placementType: PickAll
    affinity:
      clusterAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          clusterSelectorTerms:
          - labelSelector:
              matchLabels: {{env: {env}}}
"
    )
}

/// The sample's shape: a base, a staging and a prod overlay, a placement per environment.
fn fleet_repo() -> Repo {
    let repo = Repo::new();
    repo.write("members/alpha.yaml", &member("alpha", "staging"));
    repo.write("members/beta.yaml", &member("beta", "prod"));
    repo.write("apps/web/base/kustomization.yaml", &base("hello"));
    repo.write(
        "apps/web/base/namespace.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: web\n",
    );
    for env in ["staging", "prod"] {
        repo.write(
            &format!("apps/web/overlays/{env}/kustomization.yaml"),
            &overlay(env),
        );
        repo.write(&format!("placements/web-{env}.yaml"), &placement(env));
    }
    repo
}

fn gitfleet(kustomize: &Path, args: &[&str]) -> Run {
    common::sources::gitfleet(("GITFLEET_KUSTOMIZE", kustomize), args)
}

/// The name kustomize gives the generated ConfigMap (a hash of its content), from a rendering.
fn config_map_name(rendering: &str) -> String {
    rendering
        .split_whitespace()
        .find(|w| w.starts_with("web-config-"))
        .unwrap_or_else(|| panic!("no generated ConfigMap in:\n{rendering}"))
        .to_string()
}

#[test]
fn only_overlays_are_built_and_every_object_is_traced_to_its_kustomization() {
    let Some(kustomize) = gitfleet_testkit::tools::KUSTOMIZE.find("the Kustomize tests") else {
        return;
    };
    let repo = fleet_repo();
    repo.commit("web");
    std::fs::rename(repo.path().join("apps"), repo.path().join(".apps")).unwrap();
    let empty = repo.commit("without the app");
    std::fs::rename(repo.path().join(".apps"), repo.path().join("apps")).unwrap();
    repo.commit("with the app again");
    let repo_path = repo.path().to_str().unwrap();
    let validate = gitfleet(&kustomize, &["validate", "--repo", repo_path]);
    assert_eq!(validate.code, 0, "{}\n{}", validate.stdout, validate.stderr);

    let render = gitfleet(
        &kustomize,
        &["render", "--repo", repo_path, "--cluster", "alpha"],
    );
    assert_eq!(render.code, 0, "{}", render.stderr);
    let out = &render.stdout;
    assert_eq!(
        out.matches("---\n# rendered by kustomize apps/web/overlays/staging/kustomization.yaml\n")
            .count(),
        2,
        "the Namespace and the ConfigMap, each traced:\n{out}"
    );
    assert!(out.contains("namespace: web-staging"), "{out}");
    assert!(out.contains("greeting: hello"), "{out}");
    assert!(!out.contains("web-prod"), "{out}");
    // The generated name is kustomize's hash of the content.
    assert!(config_map_name(out).len() > "web-config-".len(), "{out}");

    // A plan from a commit without the app: each overlay's objects once, traced; the base
    // alone (its Namespace `web`) is nowhere.
    let plan = gitfleet(
        &kustomize,
        &[
            "plan", "--repo", repo_path, "--base", &empty, "--head", "HEAD",
        ],
    );
    assert_eq!(plan.code, 2, "{}\n{}", plan.stdout, plan.stderr);
    assert!(
        plan.stdout.contains(
            "+ Namespace/web-prod (crp/web-prod, kustomize apps/web/overlays/prod/kustomization.yaml)"
        ),
        "{}",
        plan.stdout
    );
    assert!(
        plan.stdout
            .contains("(crp/web-staging, kustomize apps/web/overlays/staging/kustomization.yaml)"),
        "{}",
        plan.stdout
    );
    assert!(!plan.stdout.contains("Namespace/web "), "{}", plan.stdout);
    let json = gitfleet(
        &kustomize,
        &[
            "plan", "--repo", repo_path, "--base", &empty, "--head", "HEAD", "-o", "json",
        ],
    );
    assert!(
        json.stdout
            .contains("\"source\": \"kustomize apps/web/overlays/prod/kustomization.yaml\""),
        "{}",
        json.stdout
    );
}

/// Each hostile folder is refused before kustomize runs, naming the kustomization file, and
/// the commit is invalid.
#[test]
fn remote_bases_paths_outside_and_symbolic_links_are_refused_with_clear_errors() {
    let Some(kustomize) = gitfleet_testkit::tools::KUSTOMIZE.find("the Kustomize tests") else {
        return;
    };
    type Case<'a> = (&'a str, &'a dyn Fn(&Repo), &'a str);
    let cases: [Case; 4] = [
        (
            "a remote base",
            &|r: &Repo| {
                r.write(
                    "apps/web/overlays/prod/kustomization.yaml",
                    "resources:\n- https://github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v5.8.2\n",
                )
            },
            "apps/web/overlays/prod/kustomization.yaml:1: Kustomization apps/web/overlays/prod: not built: \"https://github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v5.8.2\" is a remote base: gitfleet builds kustomizations without network",
        ),
        (
            "a path leaving the repository",
            &|r: &Repo| {
                r.write(
                    "apps/web/overlays/prod/kustomization.yaml",
                    "resources: [../../../../../etc]\n",
                )
            },
            "apps/web/overlays/prod/kustomization.yaml:1: Kustomization apps/web/overlays/prod: not built: \"../../../../../etc\" leaves the repository",
        ),
        (
            "a symbolic link to a base",
            &|r: &Repo| {
                std::os::unix::fs::symlink("/etc", r.path().join("apps/web/linked")).unwrap();
                r.write(
                    "apps/web/overlays/prod/kustomization.yaml",
                    "resources: [../../linked]\n",
                )
            },
            "apps/web/overlays/prod/kustomization.yaml:1: Kustomization apps/web/overlays/prod: not built: apps/web/linked is a symbolic link",
        ),
        (
            "a symbolic link inside the base",
            &|r: &Repo| {
                std::os::unix::fs::symlink("/etc/passwd", r.path().join("apps/web/base/passwd.yaml"))
                    .unwrap();
            },
            "apps/web/base/kustomization.yaml:1: Kustomization apps/web/overlays/prod: not built: apps/web/base/passwd.yaml is a symbolic link",
        ),
    ];
    for (what, change, want) in cases {
        let repo = fleet_repo();
        change(&repo);
        repo.commit(what);
        let run = gitfleet(
            &kustomize,
            &["validate", "--repo", repo.path().to_str().unwrap()],
        );
        assert_eq!(run.code, 1, "{what}: {}\n{}", run.stdout, run.stderr);
        assert!(run.stderr.contains(want), "{what}:\n{}", run.stderr);
    }
}

#[test]
fn without_kustomize_the_error_says_how_to_install_it() {
    let repo = fleet_repo();
    repo.commit("app");
    let run = gitfleet(
        Path::new("/nonexistent/kustomize"),
        &["validate", "--repo", repo.path().to_str().unwrap()],
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(
            "apps/web/overlays/prod/kustomization.yaml:1: Kustomization apps/web/overlays/prod: cannot be built: kustomize is not installed (/nonexistent/kustomize cannot be run:"
        ) && run.stderr.contains("install it with `go install sigs.k8s.io/kustomize/kustomize/v5@v5.8.2`, or name the program with --kustomize (GITFLEET_KUSTOMIZE)"),
        "{}",
        run.stderr
    );
}

/// `gitfleet run --once` with `state`; its log lines.
fn run_once(kustomize: &Path, repo: &Repo, members: &Members, state: &Path) -> Vec<String> {
    common::sources::run_once(("GITFLEET_KUSTOMIZE", kustomize), repo, members, state)
}

fn builds(log: &[String]) -> Vec<&String> {
    log.iter()
        .filter(|l| l.contains("building with kustomize"))
        .collect()
}

fn each_environment_gets_its_overlay_and_a_restart_builds_nothing_again(backend: Backend) {
    let Some(kustomize) = gitfleet_testkit::tools::KUSTOMIZE.find("the Kustomize tests") else {
        return;
    };
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.commit("web");
    let state = tempfile::tempdir().unwrap();
    let state = state.path().join("state");

    let log = run_once(&kustomize, &repo, &members, &state);
    assert_eq!(builds(&log).len(), 2, "one build per overlay:\n{log:#?}");
    let greeting = |ctx: &str, ns: &str| -> String {
        let (code, out, err) = members.kubectl(
            ctx,
            &[
                "get",
                "configmaps",
                "-n",
                ns,
                "-l",
                &format!("env={}", ns.trim_start_matches("web-")),
                "-o",
                "jsonpath={.items[*].data.greeting}",
            ],
        );
        assert_eq!(code, 0, "{err}");
        out.trim().to_string()
    };
    assert_eq!(greeting("alpha", "web-staging"), "hello");
    assert_eq!(greeting("beta", "web-prod"), "hello");
    let (code, _, _) = members.kubectl("alpha", &["get", "namespace", "web-prod"]);
    assert_ne!(code, 0, "prod's overlay reached the staging member");

    // A new process with the same state: the renderings are found, not built.
    let log = run_once(&kustomize, &repo, &members, &state);
    assert_eq!(builds(&log), Vec::<&String>::new());

    // A changed base is built again, through both overlays.
    repo.write("apps/web/base/kustomization.yaml", &base("bonjour"));
    repo.commit("french");
    let log = run_once(&kustomize, &repo, &members, &state);
    assert_eq!(builds(&log).len(), 2, "{log:#?}");
    assert_eq!(greeting("alpha", "web-staging"), "bonjour");
    assert_eq!(greeting("beta", "web-prod"), "bonjour");
}
