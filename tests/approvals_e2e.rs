//! Approval tags end to end: real keys made by `ssh-keygen` and `gpg` in a temporary home, tags
//! made and signed by the real `git tag -s` (SSH through `gpg.format=ssh`, OpenPGP through gpg),
//! judged by the real `gitfleet verify-approval`, which verifies in-process (no git, no gpg).
//! Every rejection reason of an approval has its case.

mod common;
use common::kubectl::Kubectl as _;

use common::daemon::{await_until, Daemon};
use common::members::{Backend, Members};
use common::signing::{run, Keys, Signer};
use common::{gitfleet, Repo};
use std::path::PathBuf;
use std::process::Command;

/// Keys and trust files (in [`Keys`]' temporary home) and a repository with two commits:
/// `init` (where run `run1` was initialised) and `other`.
struct Fixture {
    repo: Repo,
    keys: Keys,
    init: String,
    other: String,
}

impl std::ops::Deref for Fixture {
    type Target = Keys;
    fn deref(&self) -> &Keys {
        &self.keys
    }
}

impl Fixture {
    fn new() -> Self {
        let repo = Repo::new();
        repo.write("README.md", "fleet\n");
        let init = repo.commit("init");
        repo.write("README.md", "fleet 2\n");
        let other = repo.commit("other");
        Fixture {
            repo,
            keys: Keys::new(),
            init,
            other,
        }
    }

    /// `git tag -s` of `gitfleet/approve/<name>` on `commit`; returns the tag object's id.
    fn sign_tag(&self, name: &str, commit: &str, signer: Signer<'_>) -> String {
        self.keys.sign_tag(&self.repo, name, commit, signer)
    }

    /// `git commit -S` of everything staged, signed like [`Fixture::sign_tag`]; returns the id.
    fn commit_signed(&self, message: &str, signer: Signer<'_>) -> String {
        self.repo.git(&["add", "-A"]);
        let mut c = self.keys.git_as(self.repo.path(), signer);
        run(c.args(["commit", "-q", "-S", "-m", message]));
        self.repo.git(&["rev-parse", "HEAD"])
    }

    /// Runs `gitfleet verify-approval` against the trust files and policy written here,
    /// asserting that `commit` is where the run was initialised. Returns (exit code, JSON).
    fn verify(&self, name: &str, commit: &str) -> (i32, serde_json::Value) {
        let mut args = vec![
            "verify-approval".to_string(),
            format!("gitfleet/approve/{name}"),
            "--repo".into(),
            self.repo.path().display().to_string(),
            "--commit".into(),
            commit.into(),
            "-o".into(),
            "json".into(),
        ];
        for (flag, file) in [
            ("--trusted-signers", "allowed_signers"),
            ("--trusted-gpg-keys", "trusted.asc"),
            ("--approval-policy", "policy.yaml"),
        ] {
            if self.path(file).exists() {
                args.push(flag.into());
                args.push(self.path(file).display().to_string());
            }
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = gitfleet(&args);
        assert!(
            r.code == 0 || r.code == 1,
            "verify-approval failed ({}): {}",
            r.code,
            r.stderr
        );
        (r.code, serde_json::from_str(&r.stdout).expect(&r.stdout))
    }
}

/// `reason` is the `RejectReason`'s stable name, as JSON, metrics and logs carry it.
fn rejected(verdict: &(i32, serde_json::Value), reason: &str) -> String {
    assert_eq!(verdict.0, 1, "{}", verdict.1);
    assert_eq!(verdict.1["accepted"], false);
    assert_eq!(verdict.1["rejection"]["reason"], reason, "{}", verdict.1);
    verdict.1["rejection"]["detail"]
        .as_str()
        .unwrap()
        .to_string()
}

fn accepted(verdict: &(i32, serde_json::Value)) -> &serde_json::Value {
    assert_eq!(verdict.0, 0, "{}", verdict.1);
    &verdict.1["approval"]
}

/// An SSH fixture: alice and sre trusted, bob trusted only until 2020, mallory unknown.
fn ssh_fixture() -> (Fixture, PathBuf, PathBuf, PathBuf, PathBuf) {
    let f = Fixture::new();
    let (alice, sre, bob, mallory) = (
        f.ssh_key("alice"),
        f.ssh_key("sre"),
        f.ssh_key("bob"),
        f.ssh_key("mallory"),
    );
    f.write(
        "allowed_signers",
        &format!(
            "alice@example.com namespaces=\"git\" {}\nsre@example.com {}\nbob@example.com valid-before=\"20200101\" {}\n",
            f.ssh_public(&alice),
            f.ssh_public(&sre),
            f.ssh_public(&bob)
        ),
    );
    (f, alice, sre, bob, mallory)
}

#[test]
fn an_ssh_signed_tag_from_a_trusted_signer_approves() {
    let (f, alice, ..) = ssh_fixture();
    let id = f.sign_tag("run1-before-canary", &f.init, Signer::Ssh(&alice));
    let v = f.verify("run1-before-canary", &f.init);
    let a = accepted(&v);
    assert_eq!(a["request"], "run1-before-canary");
    assert_eq!(a["signer"], "alice@example.com");
    assert_eq!(a["keyFingerprint"], f.ssh_fingerprint(&alice));
    assert_eq!(a["tagObject"], id.as_str());
    assert_eq!(a["commit"], f.init.as_str());
}

#[test]
fn an_openpgp_signed_tag_from_a_trusted_key_approves() {
    let f = Fixture::new();
    let fpr = f.gpg_key("Ops <ops@example.com>", "1y", None);
    f.write("trusted.asc", &f.gpg_export(&["ops@example.com"]));
    f.sign_tag(
        "run1-after-canary",
        &f.init,
        Signer::Gpg("ops@example.com", None),
    );
    let v = f.verify("run1-after-canary", &f.init);
    let a = accepted(&v);
    assert_eq!(a["signer"], "Ops <ops@example.com>");
    assert_eq!(a["keyFingerprint"], fpr.as_str());
}

#[test]
fn a_lightweight_tag_is_rejected() {
    let (f, ..) = ssh_fixture();
    f.repo
        .git(&["tag", "gitfleet/approve/run1-before-canary", &f.init]);
    let d = rejected(&f.verify("run1-before-canary", &f.init), "LightweightTag");
    assert!(d.contains("git tag -s"), "{d}");
}

#[test]
fn an_unsigned_annotated_tag_is_rejected() {
    let (f, ..) = ssh_fixture();
    f.repo.git(&[
        "tag",
        "-a",
        "-m",
        "approve",
        "gitfleet/approve/run1-before-canary",
        &f.init,
    ]);
    rejected(&f.verify("run1-before-canary", &f.init), "Unsigned");
}

#[test]
fn a_tampered_tag_has_a_bad_signature() {
    let (f, alice, ..) = ssh_fixture();
    f.sign_tag("run1-before-canary", &f.init, Signer::Ssh(&alice));
    // The same tag with one word of its message changed, written back with `git mktag`.
    let original = f
        .repo
        .git(&["cat-file", "tag", "gitfleet/approve/run1-before-canary"]);
    let tampered = format!("{}\n", original.replacen("Approve run1", "Approve RUN1", 1));
    assert_ne!(tampered.trim(), original);
    let input = f.path("tampered");
    std::fs::write(&input, tampered).unwrap();
    let id = run(Command::new("sh")
        .current_dir(f.repo.path())
        .arg("-c")
        .arg(format!("git mktag < {}", input.display())));
    f.repo.git(&[
        "update-ref",
        "refs/tags/gitfleet/approve/run1-before-canary",
        &id,
    ]);
    let d = rejected(&f.verify("run1-before-canary", &f.init), "BadSignature");
    assert!(d.contains(&f.ssh_fingerprint(&alice)), "{d}");
}

#[test]
fn a_signature_by_an_unknown_key_is_rejected() {
    let (f, _, _, _, mallory) = ssh_fixture();
    f.sign_tag("run1-before-canary", &f.init, Signer::Ssh(&mallory));
    let d = rejected(&f.verify("run1-before-canary", &f.init), "UnknownKey");
    assert!(
        d.contains(&f.ssh_fingerprint(&mallory)) && d.contains("--trusted-signers"),
        "{d}"
    );
    // An OpenPGP key that is not in --trusted-gpg-keys either.
    f.gpg_key("Eve <eve@example.com>", "1y", None);
    f.sign_tag(
        "run1-after-canary",
        &f.init,
        Signer::Gpg("eve@example.com", None),
    );
    let d = rejected(&f.verify("run1-after-canary", &f.init), "UnknownKey");
    assert!(d.contains("--trusted-gpg-keys"), "{d}");
}

#[test]
fn an_expired_ssh_key_is_rejected() {
    let (f, _, _, bob, _) = ssh_fixture();
    f.sign_tag("run1-before-canary", &f.init, Signer::Ssh(&bob));
    let d = rejected(&f.verify("run1-before-canary", &f.init), "ExpiredKey");
    assert!(
        d.contains("2020-01-01") && d.contains("valid-before"),
        "{d}"
    );
}

#[test]
fn an_expired_openpgp_key_is_rejected() {
    let f = Fixture::new();
    // Made on 2020-01-01 with a one-day life, and the tag signed while it lived: gpg's clock is
    // faked for both (git calls the wrapper as its gpg.program).
    let fpr = f.gpg_key("Old <old@example.com>", "1d", Some("20200101T000000"));
    f.write("trusted.asc", &f.gpg_export(&["old@example.com"]));
    let wrapper = f.path("gpg-2020");
    common::signing::write_executable(
        &wrapper,
        "#!/bin/sh\nexec gpg --faked-system-time 20200101T000100 \"$@\"\n",
    );
    f.sign_tag(
        "run1-before-canary",
        &f.init,
        Signer::Gpg("old@example.com", Some(&wrapper)),
    );
    let d = rejected(&f.verify("run1-before-canary", &f.init), "ExpiredKey");
    assert!(
        d.contains(&fpr) && d.contains("expired at 2020-01-02"),
        "{d}"
    );
}

#[test]
fn the_policy_keeps_production_for_sres() {
    let (f, alice, sre, ..) = ssh_fixture();
    f.write(
        "policy.yaml",
        "rules:\n- stages: [\"prod*\"]\n  principals: [\"sre@example.com\"]\n- stages: [\"*\"]\n  principals: [\"*\"]\n",
    );
    f.sign_tag("run1-before-production", &f.init, Signer::Ssh(&alice));
    let d = rejected(
        &f.verify("run1-before-production", &f.init),
        "SignerNotAllowed",
    );
    assert!(
        d.contains("alice@example.com") && d.contains("production"),
        "{d}"
    );
    // Alice may still approve other stages; the SRE may approve production.
    f.sign_tag("run1-before-canary", &f.init, Signer::Ssh(&alice));
    accepted(&f.verify("run1-before-canary", &f.init));
    f.sign_tag("run1-after-production", &f.init, Signer::Ssh(&sre));
    assert_eq!(
        accepted(&f.verify("run1-after-production", &f.init))["signer"],
        "sre@example.com"
    );
}

#[test]
fn a_tag_on_another_commit_is_rejected() {
    let (f, alice, ..) = ssh_fixture();
    f.sign_tag("run1-before-canary", &f.other, Signer::Ssh(&alice));
    let d = rejected(&f.verify("run1-before-canary", &f.init), "WrongCommit");
    assert!(d.contains(&f.other) && d.contains(&f.init), "{d}");
}

#[test]
fn a_tag_replayed_from_an_earlier_run_of_the_same_name_is_rejected() {
    let (f, alice, ..) = ssh_fixture();
    // run1 was initialised at `init` and approved there; a later run1 starts at a new commit.
    f.sign_tag("run1-after-canary", &f.init, Signer::Ssh(&alice));
    accepted(&f.verify("run1-after-canary", &f.init));
    f.repo.write("run.yaml", "# run1 again\n");
    let again = f.repo.commit("run1 again");
    let d = rejected(&f.verify("run1-after-canary", &again), "WrongCommit");
    assert!(d.contains("earlier run"), "{d}");
}

#[test]
fn a_tag_for_a_request_that_cannot_exist_is_rejected() {
    let (f, alice, ..) = ssh_fixture();
    f.sign_tag("deploy-everything", &f.init, Signer::Ssh(&alice));
    let d = rejected(&f.verify("deploy-everything", &f.init), "NoSuchRequest");
    assert!(d.contains("deploy-everything"), "{d}");
}

#[test]
fn a_signed_tag_renamed_to_approve_another_request_is_rejected() {
    let (f, alice, ..) = ssh_fixture();
    let staging = f.sign_tag("run1-before-staging", &f.init, Signer::Ssh(&alice));
    f.repo.git(&[
        "update-ref",
        "refs/tags/gitfleet/approve/run1-before-production",
        &staging,
    ]);
    let d = rejected(&f.verify("run1-before-production", &f.init), "Malformed");
    assert!(d.contains("gitfleet/approve/run1-before-staging"), "{d}");
}

#[test]
fn verify_approval_without_trust_files_is_a_usage_error() {
    let (f, ..) = ssh_fixture();
    let r = gitfleet(&[
        "verify-approval",
        "run1-before-canary",
        "--repo",
        &f.repo.path().display().to_string(),
        "--commit",
        &f.init,
    ]);
    assert_eq!(r.code, 64, "{}", r.stderr);
    assert!(r.stderr.contains("--trusted-signers"), "{}", r.stderr);
}

// ---------------------------------------------------------------------------------------------
// --verify-commits: the daemon serves only signed heads; plan says whether a head would pass.
// ---------------------------------------------------------------------------------------------

const FLEET: &str = "anonymousAuth: true\nmembers:\n  - name: alpha\n    nodes: [{count: 1, cpu: \"4\", memory: 16Gi, instanceType: D4}]\n";

fn shop(version: &str) -> String {
    format!(
        "apiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\nmetadata: {{name: alpha}}\n\
         spec: {{identity: {{name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}}}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop}}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: shop-config, namespace: shop}}\n\
         data: {{version: \"{version}\"}}\n---\n\
         apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
         metadata: {{name: shop}}\nspec:\n  resourceSelectors: [{{group: '', version: v1, kind: Namespace, name: shop}}]\n"
    )
}

#[test]
fn verify_commits_serves_only_heads_signed_by_trusted_keys() {
    let (f, alice, _, _, mallory) = ssh_fixture();
    f.gpg_key("Ops <ops@example.com>", "1y", None);
    f.write("trusted.asc", &f.gpg_export(&["ops@example.com"]));
    let sim = common::sim::SimFleet::start(FLEET);
    let state = tempfile::tempdir().unwrap();
    let once = || {
        gitfleet(&[
            "run",
            "--once",
            "--verify-commits",
            "--repo",
            f.repo.path().to_str().unwrap(),
            "--kubeconfig",
            sim.kubeconfig.to_str().unwrap(),
            "--state-dir",
            state.path().to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--trusted-signers",
            f.path("allowed_signers").to_str().unwrap(),
            "--trusted-gpg-keys",
            f.path("trusted.asc").to_str().unwrap(),
        ])
    };
    let version = || {
        let (code, out, _) = sim.kubectl(
            "alpha",
            &[
                "get",
                "configmap",
                "shop-config",
                "-n",
                "shop",
                "-o",
                "jsonpath={.data.version}",
            ],
        );
        (code == 0).then_some(out)
    };
    let rejected_for = || -> String {
        let saved: serde_json::Value =
            serde_json::from_slice(&std::fs::read(state.path().join("daemon.json")).unwrap())
                .unwrap();
        saved["rejected"]["errors"].to_string()
    };

    // Signed with a trusted SSH key: served.
    f.repo.write("shop.yaml", &shop("1"));
    let good = f.commit_signed("shop 1", Signer::Ssh(&alice));
    let r = once();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(version().as_deref(), Some("1"));

    // Unsigned: rejected like an invalid commit; the last good one stays.
    f.repo.write("shop.yaml", &shop("2"));
    let unsigned = f.repo.commit("shop 2, unsigned");
    let r = once();
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("commit rejected"), "{}", r.stderr);
    assert!(
        rejected_for().contains("commit signature (Unsigned)"),
        "{}",
        rejected_for()
    );
    assert_eq!(version().as_deref(), Some("1"));

    // Signed by a key nobody trusts: rejected too.
    f.repo.write("shop.yaml", &shop("3"));
    f.commit_signed("shop 3", Signer::Ssh(&mallory));
    let r = once();
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        rejected_for().contains("commit signature (UnknownKey)"),
        "{}",
        rejected_for()
    );
    assert_eq!(version().as_deref(), Some("1"));

    // Signed with a trusted OpenPGP key: served.
    f.repo.write("shop.yaml", &shop("4"));
    let gpg_signed = f.commit_signed("shop 4", Signer::Gpg("ops@example.com", None));
    let r = once();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(version().as_deref(), Some("4"));

    // plan says it before the merge.
    let plan = |base: &str, head: &str| {
        gitfleet(&[
            "plan",
            "--repo",
            f.repo.path().to_str().unwrap(),
            "--base",
            base,
            "--head",
            head,
            "--trusted-signers",
            f.path("allowed_signers").to_str().unwrap(),
            "--trusted-gpg-keys",
            f.path("trusted.asc").to_str().unwrap(),
        ])
    };
    let r = plan(&good, &gpg_signed);
    assert!(
        r.stdout
            .contains("head signature: verified: signed by Ops <ops@example.com>"),
        "{}{}",
        r.stdout,
        r.stderr
    );
    let r = plan(&good, &unsigned);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("head signature: refused: Unsigned"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("--verify-commits would not serve this head"),
        "{}",
        r.stdout
    );
}

// ---------------------------------------------------------------------------------------------
// A malformed approval ref: skipped with one diagnostic; every other tag is still judged.
// ---------------------------------------------------------------------------------------------

/// Writes into `.git/packed-refs` refs git itself would never write (a name with `..`, and with
/// `double_slash` one with `//`, after which git refuses to commit), where git would have
/// sorted them: before every other approval tag.
fn add_malformed_packed_refs(repo: &Repo, double_slash: bool) {
    repo.git(&["pack-refs", "--all"]);
    let head = repo.git(&["rev-parse", "HEAD"]);
    let packed = repo.path().join(".git/packed-refs");
    let text = std::fs::read_to_string(&packed).unwrap();
    let first = text
        .find(" refs/tags/gitfleet/approve/")
        .expect("an approval tag is packed");
    let first = text[..first].rfind('\n').map_or(0, |nl| nl + 1);
    let mut bad = String::new();
    if double_slash {
        bad.push_str(&format!(
            "{head} refs/tags/gitfleet/approve//double-slash\n"
        ));
    }
    bad.push_str(&format!("{head} refs/tags/gitfleet/approve/dot..dot\n"));
    std::fs::write(
        &packed,
        format!("{}{bad}{}", &text[..first], &text[first..]),
    )
    .unwrap();
}

#[test]
fn a_malformed_approval_ref_is_skipped_and_the_other_tags_are_still_judged() {
    let (f, alice, ..) = ssh_fixture();
    f.sign_tag("run1-before-canary", &f.init, Signer::Ssh(&alice));
    f.repo
        .git(&["tag", "gitfleet/approve/run1-before-prod", &f.init]);
    add_malformed_packed_refs(&f.repo, true);
    let a = accepted(&f.verify("run1-before-canary", &f.init)).clone();
    assert_eq!(a["signer"], "alice@example.com");
    rejected(&f.verify("run1-before-prod", &f.init), "LightweightTag");
    let d = rejected(&f.verify("/double-slash", &f.init), "Malformed");
    assert!(d.contains("packed-refs line"), "{d}");
    rejected(&f.verify("dot..dot", &f.init), "Malformed");
}

const ONE_MEMBER: &str = "anonymousAuth: true\nmembers:\n  - name: alpha\n";

fn api_get(addr: &str, path: &str) -> (u16, String) {
    match ureq::get(&format!("{addr}{path}"))
        .config()
        .http_status_as_error(false)
        .build()
        .call()
    {
        Ok(mut r) => (
            r.status().as_u16(),
            r.body_mut().read_to_string().unwrap_or_default(),
        ),
        Err(e) => (0, e.to_string()),
    }
}

fn api_json(addr: &str, path: &str) -> serde_json::Value {
    serde_json::from_str(&api_get(addr, path).1).unwrap_or_default()
}

/// The daemon lists a malformed ref among the refused tags, logs it once, and judges the
/// tags beside it.
#[test]
fn the_daemon_skips_a_malformed_approval_ref_with_one_diagnostic() {
    let (f, alice, ..) = ssh_fixture();
    f.repo.write("shop.yaml", &shop("1"));
    let head = f.repo.commit("shop 1");
    f.sign_tag("run1-before-canary", &head, Signer::Ssh(&alice));
    add_malformed_packed_refs(&f.repo, false);
    let members = Members::start(Backend::Sim, ONE_MEMBER);
    let state = tempfile::tempdir().unwrap();
    let secret = state.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let signers = f.path("allowed_signers");
    let daemon = Daemon::start_with(
        f.repo.path(),
        &members.kubeconfig,
        &state.path().join("state"),
        &secret,
        "1h",
        &["--trusted-signers".as_ref(), signers.as_os_str()],
        &[],
    );
    let refused = || api_json(&daemon.addr, "/api/v1/approvals")["rejections"].clone();
    await_until("both tags judged", || {
        refused().as_array().map(Vec::len) == Some(2)
    });
    let r = refused();
    let by_tag = |t: &str| {
        r.as_array()
            .unwrap()
            .iter()
            .find(|x| x["tag"] == t)
            .unwrap_or_else(|| panic!("{t} not in {r:#}"))
            .clone()
    };
    let x = by_tag("gitfleet/approve/dot..dot");
    assert_eq!(x["reason"], "Malformed", "{x:#}");
    assert!(x["request"].is_null(), "{x:#}");
    // The good tag is judged: its signature verifies; no run asks for it here.
    assert_eq!(
        by_tag("gitfleet/approve/run1-before-canary")["reason"],
        "NoSuchRequest"
    );
    // One warning per malformed ref, not one per look: a second look (a new commit) logs none.
    daemon.await_log(&["approval tag rejected", "dot..dot"]);
    f.repo.write("shop.yaml", &shop("2"));
    let next = f.repo.commit("shop 2");
    await_until("the next commit served", || {
        api_json(&daemon.addr, "/api/v1/placements")["serving"] == next.as_str()
    });
    drop(members);
    let mut daemon = daemon;
    let _ = daemon.child.kill();
    let rest: Vec<String> = daemon.lines.try_iter().collect();
    let again = rest
        .iter()
        .filter(|l| l.contains("approval tag rejected") && l.contains("dot..dot"))
        .count();
    assert_eq!(again, 0, "{rest:#?}");
}

// ---------------------------------------------------------------------------------------------
// --verify-commits under an unsigned head: the last verified commit is served and healed, or
// nothing; status and /readyz say which.
// ---------------------------------------------------------------------------------------------

on_both_backends!(verify_commits_serves_the_last_verified_commit_and_heals_it);

fn shop_version(members: &Members) -> Option<String> {
    members
        .exists("alpha", &["configmap", "shop-config", "-n", "shop"])
        .then(|| {
            members.get_json("alpha", &["configmap", "shop-config", "-n", "shop"])["data"]
                ["version"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
}

/// Served unsigned, then `--verify-commits` switched on: nothing is served (status and
/// `/readyz` say why). A signed commit on top is served and recorded as verified; an unsigned
/// head after it is refused while the last verified commit goes on being served and healed,
/// also after a restart.
fn verify_commits_serves_the_last_verified_commit_and_heals_it(backend: Backend) {
    let (f, alice, ..) = ssh_fixture();
    let members = Members::start(backend, ONE_MEMBER);
    let state = tempfile::tempdir().unwrap();
    let secret = state.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let signers = f.path("allowed_signers");
    let start = |verify: bool| {
        let flags: Vec<&std::ffi::OsStr> = if verify {
            vec![
                "--verify-commits".as_ref(),
                "--trusted-signers".as_ref(),
                signers.as_os_str(),
            ]
        } else {
            vec![]
        };
        Daemon::start_with(
            f.repo.path(),
            &members.kubeconfig,
            &state.path().join("state"),
            &secret,
            "1h",
            &flags,
            &[],
        )
    };
    let placements = |d: &Daemon| api_json(&d.addr, "/api/v1/placements");

    // Served while --verify-commits is off.
    f.repo.write("shop.yaml", &shop("1"));
    let unsigned = f.repo.commit("shop 1, unsigned");
    {
        let daemon = start(false);
        await_until("the unsigned commit served", || {
            placements(&daemon)["serving"] == unsigned.as_str()
                && shop_version(&members).as_deref() == Some("1")
        });
    }

    // Switched on: the commit served was never verified, so nothing is served.
    let daemon = start(true);
    await_until("status says no commit is served", || {
        let v = placements(&daemon);
        v["serving"].is_null() && v["notServing"].is_string()
    });
    let v = placements(&daemon);
    assert_eq!(v["rejected"]["commit"], unsigned.as_str(), "{v:#}");
    assert!(
        v["notServing"]
            .as_str()
            .unwrap()
            .contains("was not verified"),
        "{v:#}"
    );
    let (code, body) = api_get(&daemon.addr, "/readyz");
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("serving no commit") && body.contains("Unsigned"),
        "{body}"
    );
    let status = common::gitfleet(&["status", "--server", &daemon.addr]);
    assert!(status.stdout.contains("NOT SERVING"), "{}", status.stdout);

    // A signed commit on top (no change) is served, and recorded as verified.
    let mut sign = f.keys.git_as(f.repo.path(), Signer::Ssh(&alice));
    run(sign.args(["commit", "-q", "--allow-empty", "-S", "-m", "sign the head"]));
    let signed = f.repo.git(&["rev-parse", "HEAD"]);
    await_until("the signed head served", || {
        let v = placements(&daemon);
        v["serving"] == signed.as_str() && v["notServing"].is_null()
    });
    let v = placements(&daemon);
    assert_eq!(v["verified"]["signer"], "alice@example.com", "{v:#}");
    assert!(v["rejected"].is_null(), "{v:#}");
    assert_eq!(api_get(&daemon.addr, "/readyz"), (200, "ok".to_string()));

    // An unsigned head: refused; the last verified commit goes on, and is healed.
    f.repo.write("shop.yaml", &shop("2"));
    let unsigned2 = f.repo.commit("shop 2, unsigned");
    await_until("the unsigned head refused", || {
        placements(&daemon)["rejected"]["commit"] == unsigned2.as_str()
    });
    let ready = |d: &Daemon| {
        // Ready once a step of the served commit finished (a restart's first one takes a while).
        await_until("ready", || api_get(&d.addr, "/readyz").0 == 200);
        let (code, body) = api_get(&d.addr, "/readyz");
        assert_eq!(code, 200, "{body}");
        assert!(
            body.contains(&format!("serving {signed}, the last verified commit"))
                && body.contains(&unsigned2),
            "{body}"
        );
    };
    let v = placements(&daemon);
    assert_eq!(v["serving"], signed.as_str(), "{v:#}");
    ready(&daemon);
    assert_eq!(shop_version(&members).as_deref(), Some("1"));
    let (code, _, err) = members.kubectl(
        "alpha",
        &["delete", "configmap", "shop-config", "-n", "shop"],
    );
    assert_eq!(code, 0, "{err}");
    await_until(
        "the deleted ConfigMap restored from the verified commit",
        || shop_version(&members).as_deref() == Some("1"),
    );

    // After a restart the recorded verified commit is still the one served.
    drop(daemon);
    let daemon = start(true);
    await_until("the last verified commit served after a restart", || {
        let v = placements(&daemon);
        v["serving"] == signed.as_str() && v["rejected"]["commit"] == unsigned2.as_str()
    });
    ready(&daemon);
    let status = common::gitfleet(&["status", "--server", &daemon.addr]);
    assert!(
        status
            .stdout
            .contains("the last verified commit (signed by alice@example.com)"),
        "{}",
        status.stdout
    );
    assert_eq!(shop_version(&members).as_deref(), Some("1"));
}
