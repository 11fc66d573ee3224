//! SOPS-encrypted Secrets end to end: files encrypted by the real `sops` CLI (built from its Go
//! module by `.ci/run`) in a real git repository, read by the real binary with the age key
//! given outside the repository. The Secret reaches the members decrypted (on `gitfleet sim`
//! and on real API servers), and its value appears nowhere else: not in `render` or `plan`,
//! the daemon's log, its status API and metrics, nor its state directory.

mod common;
use common::kubectl::Kubectl as _;

use age::secrecy::ExposeSecret;
use common::daemon::{await_until, Daemon};
use common::members::{Backend, Members};
use common::{Repo, Run};
use std::path::{Path, PathBuf};
use std::process::Command;

on_both_backends!(an_encrypted_secret_reaches_the_members_decrypted_and_nothing_else_shows_it);
on_both_backends!(a_secret_in_a_kustomize_folder_is_decrypted_before_kustomize_builds_it);

const FLEET: &str = r#"
anonymousAuth: true
members:
  - name: alpha
  - name: beta
"#;

fn member(name: &str) -> String {
    format!(
        "apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata:
  name: {name}
spec:
  identity: {{name: member, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}
"
    )
}

const NAMESPACE_AND_PLACEMENT: &str = "\
apiVersion: v1
kind: Namespace
metadata:
  name: app
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: app
spec:
  resourceSelectors:
  - {group: '', version: v1, kind: Namespace, name: app}
";

/// A plaintext Secret whose password is `password` (base64 in `data`, so that both backends
/// store it as written).
fn secret(password: &str) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(password);
    format!(
        "apiVersion: v1
kind: Secret
metadata:
  name: db
  namespace: app
type: Opaque
data:
  password: {encoded}
"
    )
}

/// A repository with members, the `app` namespace placed on both, and an age key file (outside
/// the repository) with its recipient.
struct Fixture {
    repo: Repo,
    sops: PathBuf,
    keys: tempfile::TempDir,
    recipient: String,
}

impl Fixture {
    fn new(sops: PathBuf) -> Fixture {
        let repo = Repo::new();
        repo.write("members/alpha.yaml", &member("alpha"));
        repo.write("members/beta.yaml", &member("beta"));
        repo.write("app/app.yaml", NAMESPACE_AND_PLACEMENT);
        let identity = age::x25519::Identity::generate();
        let keys = tempfile::tempdir().unwrap();
        std::fs::write(
            keys.path().join("keys.txt"),
            format!(
                "# public key: {}\n{}\n",
                identity.to_public(),
                identity.to_string().expose_secret()
            ),
        )
        .unwrap();
        Fixture {
            repo,
            sops,
            keys,
            recipient: identity.to_public().to_string(),
        }
    }

    fn key_file(&self) -> PathBuf {
        self.keys.path().join("keys.txt")
    }

    /// Writes `app/secret.yaml` encrypted by sops (Flux's rule: only data and stringData).
    fn write_encrypted_secret(&self, password: &str) {
        self.write_encrypted_secret_at("app/secret.yaml", password);
    }

    /// Writes `path` encrypted by sops, as [`Fixture::write_encrypted_secret`].
    fn write_encrypted_secret_at(&self, path: &str, password: &str) {
        let out = gitfleet_testkit::tools::sops_encrypt(
            &self.sops,
            "secret.yaml",
            &secret(password),
            &self.recipient,
            &["--encrypted-regex", "^(data|stringData)$"],
        );
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains(&b64(password)), "{text}");
        self.repo.write(path, &text);
    }

    /// `app/db/`: a kustomization that renames and labels the encrypted Secret beside it,
    /// which kustomize can only do to the decrypted file.
    fn write_kustomized_secret(&self, password: &str) {
        self.repo.write(
            "app/db/kustomization.yaml",
            "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namePrefix: prod-
labels:
- pairs: {tier: db}
resources:
- secret.yaml
",
        );
        self.write_encrypted_secret_at("app/db/secret.yaml", password);
    }

    /// The binary with `args`, and no key from this process's environment (`env` adds some).
    fn gitfleet(&self, args: &[&str], env: &[(&str, &Path)]) -> Run {
        let out = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
            .args(args)
            .env_remove("GITFLEET_REPO")
            .env_remove("SOPS_AGE_KEY_FILE")
            .env_remove("SOPS_AGE_KEY")
            .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
            .output()
            .unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// Neither the password nor its base64 form is in `text`.
fn assert_hidden(what: &str, text: &str, password: &str) {
    assert!(
        !text.contains(password) && !text.contains(&b64(password)),
        "the decrypted value shows in {what}:\n{text}"
    );
}

/// `gitfleet run` on the fixture's repository with its key (and `env`), its state in `state`.
fn start_daemon(
    f: &Fixture,
    members: &Members,
    state: &Path,
    env: &[(&str, &std::ffi::OsStr)],
) -> Daemon {
    let webhook = state.join("webhook-secret");
    std::fs::write(&webhook, "s3cret").unwrap();
    let key = f.key_file();
    let mut env = env.to_vec();
    env.push(("SOPS_AGE_KEY_FILE", key.as_os_str()));
    Daemon::start_with(
        f.repo.path(),
        &members.kubeconfig,
        &state.join("state"),
        &webhook,
        "10m",
        &[],
        &env,
    )
}

/// `password` is in none of the daemon's API answers, its log, nor any file under `state`
/// (the state and the render cache); stops the daemon.
fn assert_nothing_else_shows(daemon: Daemon, state: &Path, password: &str) {
    let get = |path: &str| -> String {
        match ureq::get(&format!("{}{path}", daemon.addr)).call() {
            Ok(mut r) => r.body_mut().read_to_string().unwrap_or_default(),
            Err(e) => panic!("GET {path}: {e}"),
        }
    };
    for path in [
        "/api/v1/placements",
        "/api/v1/schedule",
        "/api/v1/inventory",
        "/metrics",
    ] {
        assert_hidden(path, &get(path), password);
    }
    let log = daemon.stop_and_read_log().join("\n");
    assert_hidden("the daemon's log", &log, password);
    for file in common::walk(state) {
        let bytes = std::fs::read(&file).unwrap();
        assert_hidden(
            &file.display().to_string(),
            &String::from_utf8_lossy(&bytes),
            password,
        );
    }
}

#[test]
fn without_the_key_the_commit_is_invalid_and_the_error_names_the_file() {
    let Some(sops) = gitfleet_testkit::tools::SOPS.find("the SOPS tests") else {
        return;
    };
    let f = Fixture::new(sops);
    f.write_encrypted_secret("hunter2-no-key");
    f.repo.commit("secret");
    let repo = f.repo.path().to_str().unwrap();
    let run = f.gitfleet(&["validate", "--repo", repo], &[]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "app/secret.yaml:1: SOPS file: cannot decrypt: no age key is given to decrypt it (encrypted for {})",
            f.recipient
        )),
        "{}",
        run.stderr
    );
    // A key that is not among the recipients.
    let other = tempfile::tempdir().unwrap();
    let other_key = other.path().join("other.txt");
    std::fs::write(
        &other_key,
        format!(
            "{}\n",
            age::x25519::Identity::generate()
                .to_string()
                .expose_secret()
        ),
    )
    .unwrap();
    let run = f.gitfleet(
        &["validate", "--repo", repo],
        &[("SOPS_AGE_KEY_FILE", &other_key)],
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains(
            "app/secret.yaml:1: SOPS file: cannot decrypt: none of the 1 age key given opens it"
        ),
        "{}",
        run.stderr
    );
    // A value changed without sops: the MAC refuses the file.
    let text = std::fs::read_to_string(f.repo.path().join("app/secret.yaml")).unwrap();
    f.repo
        .write("app/secret.yaml", &text.replace("name: db", "name: db2"));
    f.repo.commit("renamed without sops");
    let key = f.key_file();
    let run = f.gitfleet(
        &[
            "validate",
            "--repo",
            repo,
            "--age-key-file",
            key.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains(
            "app/secret.yaml:1: SOPS file: cannot decrypt: its MAC does not match its values"
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn render_and_plan_show_the_decrypted_secret_masked() {
    let Some(sops) = gitfleet_testkit::tools::SOPS.find("the SOPS tests") else {
        return;
    };
    let f = Fixture::new(sops);
    let base = f.repo.commit("no secret yet");
    f.write_encrypted_secret("hunter2-first");
    let first = f.repo.commit("secret");
    let key = f.key_file();
    let repo = f.repo.path().to_str().unwrap();

    let validate = f.gitfleet(
        &["validate", "--repo", repo],
        &[("SOPS_AGE_KEY_FILE", &key)],
    );
    assert_eq!(validate.code, 0, "{}", validate.stderr);
    assert!(validate.stdout.contains("1 Secret"), "{}", validate.stdout);

    let render = f.gitfleet(
        &[
            "render",
            "--repo",
            repo,
            "--cluster",
            "alpha",
            "--age-key-file",
            key.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(render.code, 0, "{}", render.stderr);
    assert!(render.stdout.contains("kind: Secret"), "{}", render.stdout);
    assert!(
        render
            .stdout
            .lines()
            .any(|l| l.trim_start().starts_with("password:") && l.contains("***")),
        "{}",
        render.stdout
    );
    assert_hidden(
        "render",
        &format!("{}{}", render.stdout, render.stderr),
        "hunter2-first",
    );

    let plan = f.gitfleet(
        &["plan", "--repo", repo, "--base", &base, "--head", &first],
        &[("SOPS_AGE_KEY_FILE", &key)],
    );
    // 2: the head changes the fleet.
    assert_eq!(plan.code, 2, "{}\n{}", plan.stdout, plan.stderr);
    assert!(plan.stdout.contains("Secret"), "{}", plan.stdout);
    assert!(plan.stdout.contains("***"), "{}", plan.stdout);
    assert_hidden(
        "plan",
        &format!("{}{}", plan.stdout, plan.stderr),
        "hunter2-first",
    );

    // A new value: the plan says it changed, never what it was or is.
    f.write_encrypted_secret("hunter2-second");
    let second = f.repo.commit("rotate");
    let plan = f.gitfleet(
        &[
            "plan", "--repo", repo, "--base", &first, "--head", &second, "-o", "markdown",
        ],
        &[("SOPS_AGE_KEY_FILE", &key)],
    );
    // 2: the head changes the fleet.
    assert_eq!(plan.code, 2, "{}\n{}", plan.stdout, plan.stderr);
    assert!(plan.stdout.contains("*** (changed)"), "{}", plan.stdout);
    let out = format!("{}{}", plan.stdout, plan.stderr);
    assert_hidden("plan", &out, "hunter2-first");
    assert_hidden("plan", &out, "hunter2-second");
}

fn an_encrypted_secret_reaches_the_members_decrypted_and_nothing_else_shows_it(backend: Backend) {
    let Some(sops) = gitfleet_testkit::tools::SOPS.find("the SOPS tests") else {
        return;
    };
    let members = Members::start(backend, FLEET);
    let f = Fixture::new(sops);
    let password = "hunter2-delivered";
    f.write_encrypted_secret(password);
    f.repo.commit("secret");
    let state = tempfile::tempdir().unwrap();
    let daemon = start_daemon(&f, &members, state.path(), &[]);
    for ctx in ["alpha", "beta"] {
        await_until(&format!("the Secret on {ctx}"), || {
            let (code, out, _) = members.kubectl(
                ctx,
                &[
                    "get",
                    "secret",
                    "db",
                    "-n",
                    "app",
                    "-o",
                    "jsonpath={.data.password}",
                ],
            );
            code == 0 && out.trim() == b64(password)
        });
    }
    assert_nothing_else_shows(daemon, state.path(), password);
}

/// Both tools a kustomized SOPS Secret needs, or `None` (the test then says why).
fn sops_and_kustomize() -> Option<(PathBuf, PathBuf)> {
    let sops = gitfleet_testkit::tools::SOPS.find("the SOPS tests")?;
    let kustomize = gitfleet_testkit::tools::KUSTOMIZE.find("the SOPS tests")?;
    Some((sops, kustomize))
}

#[test]
fn a_kustomized_secret_is_refused_without_the_key_or_with_a_changed_value() {
    let Some((sops, kustomize)) = sops_and_kustomize() else {
        return;
    };
    let f = Fixture::new(sops);
    f.write_kustomized_secret("hunter2-kustomized");
    f.repo.commit("kustomized secret");
    let repo = f.repo.path().to_str().unwrap();
    let tool = [("GITFLEET_KUSTOMIZE", kustomize.as_path())];
    let run = f.gitfleet(&["validate", "--repo", repo], &tool);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "app/db/kustomization.yaml:1: Kustomization app/db: kustomize build: \
             app/db/secret.yaml: cannot decrypt: no age key is given to decrypt it (encrypted for {})",
            f.recipient
        )),
        "{}",
        run.stderr
    );
    let key = f.key_file();
    let with_key = [
        ("GITFLEET_KUSTOMIZE", kustomize.as_path()),
        ("SOPS_AGE_KEY_FILE", key.as_path()),
    ];
    let run = f.gitfleet(&["render", "--repo", repo, "--cluster", "alpha"], &with_key);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("prod-db"), "{}", run.stdout);
    assert_hidden("render", &run.stdout, "hunter2-kustomized");
    // A value changed without sops: the whole file's MAC refuses it before kustomize runs.
    let text = std::fs::read_to_string(f.repo.path().join("app/db/secret.yaml")).unwrap();
    f.repo
        .write("app/db/secret.yaml", &text.replace("name: db", "name: db2"));
    f.repo.commit("renamed without sops");
    let run = f.gitfleet(&["validate", "--repo", repo], &with_key);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("app/db/secret.yaml: cannot decrypt: its MAC does not match its values"),
        "{}",
        run.stderr
    );
}

fn a_secret_in_a_kustomize_folder_is_decrypted_before_kustomize_builds_it(backend: Backend) {
    let Some((sops, kustomize)) = sops_and_kustomize() else {
        return;
    };
    let members = Members::start(backend, FLEET);
    let f = Fixture::new(sops);
    let password = "hunter2-kustomized-delivered";
    f.write_kustomized_secret(password);
    f.repo.commit("kustomized secret");
    let state = tempfile::tempdir().unwrap();
    let daemon = start_daemon(
        &f,
        &members,
        state.path(),
        &[("GITFLEET_KUSTOMIZE", kustomize.as_os_str())],
    );
    for ctx in ["alpha", "beta"] {
        await_until(&format!("the kustomized Secret on {ctx}"), || {
            let (code, out, _) = members.kubectl(
                ctx,
                &[
                    "get",
                    "secret",
                    "prod-db",
                    "-n",
                    "app",
                    "-o",
                    "jsonpath={.data.password} {.metadata.labels.tier}",
                ],
            );
            code == 0 && out.trim() == format!("{} db", b64(password))
        });
    }
    // The rendering is kept in memory only: no file under the state folder, the render cache
    // included, holds the value.
    assert_nothing_else_shows(daemon, state.path(), password);
}
