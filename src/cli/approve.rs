//! The command-line edge of approvals: the trust flags shared by `run`, `plan` and
//! `verify-approval`, and the `approve` and `verify-approval` commands.

use std::path::PathBuf;
use std::process::{Command as Process, ExitCode};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};

use crate::approvals::{judge, object, Verifier};
use crate::model::staged::TaskPhase;
use crate::rollout::approval::{Approval, Rejection, Request, TAG_PREFIX};

/// The signers trusted to approve (and, with `--verify-commits`, to sign heads). Files outside
/// the repository, so that a pull request cannot add its own key.
#[derive(Debug, Clone, Default, Args)]
pub struct TrustArgs {
    /// Trusted SSH signers, in OpenSSH allowed_signers format (git's
    /// gpg.ssh.allowedSignersFile): `principals [namespaces="git",valid-after=…,valid-before=…]
    /// keytype key`.
    #[arg(long, env = "GITFLEET_TRUSTED_SIGNERS", value_name = "FILE")]
    pub trusted_signers: Option<PathBuf>,
    /// Trusted OpenPGP keys: armored public keys (`gpg --export --armor`), several allowed.
    #[arg(long, env = "GITFLEET_TRUSTED_GPG_KEYS", value_name = "FILE")]
    pub trusted_gpg_keys: Option<PathBuf>,
    /// Which principals or key fingerprints may approve which stages (YAML; see
    /// docs/guides/staged-runs-and-approvals.md).
    #[arg(long, env = "GITFLEET_APPROVAL_POLICY", value_name = "FILE")]
    pub approval_policy: Option<PathBuf>,
}

impl TrustArgs {
    /// Whether any trust file was given.
    pub fn given(&self) -> bool {
        self.trusted_signers.is_some() || self.trusted_gpg_keys.is_some()
    }

    pub fn load(&self) -> Result<Verifier> {
        Ok(Verifier::load(
            self.trusted_signers.as_deref(),
            self.trusted_gpg_keys.as_deref(),
            self.approval_policy.as_deref(),
        )?)
    }
}

/// The request a tag names, read from its name: `[<namespace>/]<run>-before-<stage>` or
/// `…-after-<stage>` (stage names are `[a-z0-9]+`, so the last `-` splits them off).
pub fn request_named(key: &str, commit: &str) -> Option<Request> {
    let (namespace, name) = match key.split_once('/') {
        Some((ns, name)) => (Some(ns.to_string()), name),
        None => (None, key),
    };
    let (head, stage) = name.rsplit_once('-')?;
    let (run, phase) = if let Some(run) = head.strip_suffix("-before") {
        (run, TaskPhase::BeforeStage)
    } else if let Some(run) = head.strip_suffix("-after") {
        (run, TaskPhase::AfterStage)
    } else {
        return None;
    };
    let valid = |s: &str| !s.is_empty() && !s.contains('/');
    (valid(run) && valid(stage)).then(|| Request {
        namespace,
        run: run.to_string(),
        stage: stage.to_string(),
        phase,
        commit: commit.to_string(),
    })
}

/// The requests a running daemon knows: those runs wait on or will reach, and those it has
/// already accepted an approval for (a tag is judged the same before and after it counted).
fn daemon_requests(server: &crate::api::client::Daemon) -> Result<Vec<Request>> {
    let view = crate::api::client::approvals(server)?;
    Ok(daemon_known(view))
}

fn daemon_known(view: crate::api::ApprovalsView) -> Vec<Request> {
    let mut requests = view.requests;
    for a in &view.approvals {
        if !requests.iter().any(|r| r.key() == a.request) {
            requests.extend(request_named(&a.request, &a.commit));
        }
    }
    requests
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum VerifyFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("against").required(true).args(["commit", "server"])))]
pub struct VerifyApprovalArgs {
    /// The tag: `gitfleet/approve/<request>` (or `refs/tags/…`, or just `<request>`).
    pub tag: String,
    /// The repository holding the tag.
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    #[command(flatten)]
    pub trust: TrustArgs,
    /// The commit at which the run was initialised (the request is read from the tag's name).
    #[arg(long)]
    pub commit: Option<String>,
    /// Or ask a running daemon which requests exist and at which commits.
    #[arg(long, env = "GITFLEET_SERVER")]
    pub server: Option<String>,
    #[command(flatten)]
    pub token: crate::cli::flags::TokenArgs,
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: VerifyFormat,
}

const VERIFY_EXIT_CODES: &str = "\
Exit codes:
  0  the tag approves its request
  1  the tag is rejected (the reason is printed)
  3  the repository, tag or trust files cannot be read
  64 bad command line (unknown flag, missing or invalid value, no trust file)";

pub const VERIFY_AFTER_HELP: &str = VERIFY_EXIT_CODES;

fn tag_name(given: &str) -> String {
    let short = given.strip_prefix("refs/tags/").unwrap_or(given);
    if short.starts_with(TAG_PREFIX) {
        short.to_string()
    } else {
        format!("{TAG_PREFIX}{short}")
    }
}

pub fn verify_approval(args: &VerifyApprovalArgs) -> Result<ExitCode> {
    if !args.trust.given() {
        return Err(crate::cli::flags::UsageError(
            "give --trusted-signers and/or --trusted-gpg-keys: nothing is trusted otherwise".into(),
        )
        .into());
    }
    match judge_tag(args) {
        Ok(verdict) => print_verdict(args.output, &verdict),
        Err(e) => {
            // Exit 1 means "rejected": what cannot be read is told apart.
            eprintln!("error: {e:#}");
            Ok(ExitCode::from(3))
        }
    }
}

fn judge_tag(args: &VerifyApprovalArgs) -> Result<Result<Approval, Rejection>> {
    let verifier = args.trust.load()?;
    let name = tag_name(&args.tag);
    let key = name.strip_prefix(TAG_PREFIX).unwrap_or(&name).to_string();
    let requests = match (&args.commit, &args.server) {
        (Some(commit), _) => {
            let (commit, _) = object::read_commit_signature(&args.repo, commit)?;
            request_named(&key, &commit).into_iter().collect()
        }
        (None, Some(server)) => daemon_requests(&args.token.daemon(server)?)?,
        (None, None) => unreachable!("clap requires --commit or --server"),
    };
    let tag = object::read_tag(&args.repo, &name)?;
    Ok(judge(
        &tag,
        &requests,
        &verifier,
        crate::timestamp::now_unix_signed(),
    ))
}

fn print_verdict(output: VerifyFormat, verdict: &Result<Approval, Rejection>) -> Result<ExitCode> {
    match output {
        VerifyFormat::Json => {
            let doc = match verdict {
                Ok(a) => serde_json::json!({"accepted": true, "approval": a}),
                Err(r) => serde_json::json!({"accepted": false, "rejection": r}),
            };
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
        VerifyFormat::Text => match verdict {
            Ok(a) => println!(
                "accepted: {} approves request {}\n  signer: {}\n  key: {}\n  tag object: {}\n  commit: {}",
                a.tag, a.request, a.signer, a.key_fingerprint, a.tag_object, a.commit
            ),
            Err(r) => println!("rejected: {} ({})\n  {}", r.tag, r.reason, r.detail),
        },
    }
    Ok(if verdict.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The approval request: `<run>-before-<stage>` or `<run>-after-<stage>`.
    pub request: String,
    /// The namespace of a namespaced (`StagedUpdateRun`) run.
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// The repository to tag (your clone; the tag is signed with your git signing setup).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// Push the tag to this remote afterwards.
    #[arg(long, value_name = "REMOTE", num_args = 0..=1, default_missing_value = "origin")]
    pub push: Option<String>,
    /// The running daemon that knows the request and the commit its run was initialised at.
    #[arg(long, env = "GITFLEET_SERVER", default_value = "http://127.0.0.1:7070")]
    pub server: String,
    #[command(flatten)]
    pub token: crate::cli::flags::TokenArgs,
    /// Or the daemon's state directory (`run --state-dir`), read without locking or writing
    /// anything: the daemon may be running or stopped. Wins over --server.
    #[arg(long = "state", visible_alias = "state-dir", value_name = "DIR")]
    pub state: Option<PathBuf>,
    /// Replace an existing tag of that name (one made for an earlier run of the same name,
    /// or on the wrong commit); pushes it with force too.
    #[arg(long, short = 'f')]
    pub force: bool,
    /// The tag message.
    #[arg(long, short = 'm')]
    pub message: Option<String>,
    /// How long to wait for the daemon (--server) to accept or refuse the tag once made; `0`
    /// to not wait. It sees the tag at its next look (at once for a local repository it
    /// follows; for a remote, after --push and its next fetch).
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = crate::cli::flags::parse_duration)]
    pub wait: std::time::Duration,
}

pub const APPROVE_AFTER_HELP: &str = "\
Exit codes:
  0  the signed tag was made (and pushed), and the daemon accepted it (or --wait 0, or --state)
  1  the signing setup cannot sign (checked first), the daemon has no such request (or it is
     approved already), git could not sign or push, or the daemon refused the tag (the reason
     is printed)
  2  the daemon neither accepted nor refused the tag within --wait
  64 bad command line (unknown flag, missing or invalid value)";

/// What `git tag -s` will sign with: git's configuration and what is found of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SigningSetup {
    /// `gpg.format`: `openpgp` (git's default), `ssh` or `x509`.
    pub format: Option<String>,
    /// `user.signingkey`.
    pub key: Option<String>,
    /// For an SSH key given as a file: whether it exists.
    pub key_file_exists: Option<bool>,
    /// For OpenPGP: whether gpg has a secret key (the one `user.signingkey` names, or any);
    /// `None` when gpg cannot be run.
    pub gpg_secret_key: Option<bool>,
}

/// Why git cannot sign with `setup`, said before anything is asked or tagged; `None` when it
/// looks able to.
pub fn signing_problem(setup: &SigningSetup) -> Option<String> {
    match setup.format.as_deref().unwrap_or("openpgp") {
        "ssh" => match (&setup.key, setup.key_file_exists) {
            (None, _) => Some(
                "gpg.format is ssh but user.signingkey is not set: `git config user.signingkey ~/.ssh/id_ed25519.pub`".into(),
            ),
            (Some(key), Some(false)) => Some(format!(
                "user.signingkey names {key}, which does not exist"
            )),
            _ => None,
        },
        "openpgp" => match setup.gpg_secret_key {
            None => Some(
                "git signs with gpg (gpg.format openpgp), which cannot be run: install it, or sign with SSH (`git config gpg.format ssh` and user.signingkey)".into(),
            ),
            Some(false) => Some(match &setup.key {
                Some(key) => format!("gpg has no secret key for user.signingkey {key}"),
                None => "gpg has no secret key to sign with: make one (`gpg --quick-gen-key`), or sign with SSH (`git config gpg.format ssh` and user.signingkey)".into(),
            }),
            Some(true) => None,
        },
        _ => None,
    }
}

fn git_config(repo: &std::path::Path, name: &str) -> Option<String> {
    let out = Process::new("git")
        .arg("-C")
        .arg(repo)
        .args(["config", "--get", name])
        .output()
        .ok()?;
    let value = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !value.is_empty()).then_some(value)
}

/// The signing setup of `repo`, as git will use it.
fn signing_setup(repo: &std::path::Path) -> SigningSetup {
    let format = git_config(repo, "gpg.format");
    let key = git_config(repo, "user.signingkey");
    let mut setup = SigningSetup {
        format: format.clone(),
        key: key.clone(),
        ..Default::default()
    };
    match format.as_deref().unwrap_or("openpgp") {
        "ssh" => {
            // A literal key (`key::…`, `ssh-ed25519 …`) or a file.
            if let Some(k) = key.filter(|k| !k.starts_with("key::") && !k.starts_with("ssh-")) {
                let path = match (k.strip_prefix("~/"), std::env::var_os("HOME")) {
                    (Some(rest), Some(home)) => std::path::Path::new(&home).join(rest),
                    _ => std::path::PathBuf::from(&k),
                };
                setup.key_file_exists = Some(path.exists());
            }
        }
        "openpgp" => {
            let program = git_config(repo, "gpg.openpgp.program")
                .or_else(|| git_config(repo, "gpg.program"))
                .unwrap_or_else(|| "gpg".into());
            let mut gpg = Process::new(program);
            gpg.args(["--list-secret-keys", "--with-colons"]);
            if let Some(k) = &key {
                gpg.arg(k);
            }
            setup.gpg_secret_key = gpg.output().ok().map(|out| {
                out.status.success()
                    && String::from_utf8_lossy(&out.stdout)
                        .lines()
                        .any(|l| l.starts_with("sec"))
            });
        }
        _ => {}
    }
    setup
}

/// The approval requests that exist, where they were read from, and those approved already
/// (by request key: who, when).
struct Known {
    from: String,
    open: Vec<Request>,
    approved: Vec<Approval>,
}

fn known_requests(args: &ApproveArgs) -> Result<Known> {
    let Some(dir) = &args.state else {
        let view = crate::api::client::approvals(&args.token.daemon(&args.server)?)?;
        return Ok(Known {
            from: format!("the daemon at {}", args.server),
            open: view.requests,
            approved: view.approvals,
        });
    };
    let state = crate::state::read_rollout(dir)?;
    let runs = state.runs.values();
    Ok(Known {
        from: format!("the state directory {}", dir.display()),
        open: runs
            .clone()
            .flat_map(crate::rollout::staged::status::open_requests)
            .collect(),
        approved: runs
            .flat_map(crate::rollout::staged::status::recorded_approvals)
            .collect(),
    })
}

fn git(repo: &std::path::Path, args: &[&str]) -> Result<()> {
    let status = Process::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .status()
        .context("cannot run git")?;
    if !status.success() {
        bail!("git {} failed ({status})", args.join(" "));
    }
    Ok(())
}

pub fn approve(args: &ApproveArgs) -> Result<ExitCode> {
    let key = match &args.namespace {
        Some(ns) => format!("{ns}/{}", args.request),
        None => args.request.clone(),
    };
    // First: a tag git cannot sign is no approval, whatever the daemon says.
    if let Some(problem) = signing_problem(&signing_setup(&args.repo)) {
        bail!(
            "cannot sign an approval tag in {}: {problem}",
            args.repo.display()
        );
    }
    let known = known_requests(args)?;
    let Some(request) = known.open.iter().find(|r| r.key() == key) else {
        if let Some(a) = known.approved.iter().find(|a| a.request == key) {
            bail!(
                "{key} is approved already, by {} at {} (tag object {}); an accepted approval stands",
                a.signer,
                crate::approvals::utc(a.accepted_at),
                a.tag_object
            );
        }
        let open: Vec<String> = known.open.iter().map(Request::key).collect();
        bail!(
            "{} has no approval request {key:?} (waiting: {})",
            known.from,
            if open.is_empty() {
                "none".to_string()
            } else {
                open.join(", ")
            }
        );
    };
    let tag = request.tag_name();
    let gate = match request.phase {
        TaskPhase::BeforeStage => "before",
        TaskPhase::AfterStage => "after",
    };
    println!(
        "{key}: run {} waits {gate} stage {} ({}); tagging commit {}, where the run was initialised",
        request.run, request.stage, known.from, request.commit
    );
    let message = args.message.clone().unwrap_or_else(|| {
        format!(
            "Approve {key}: stage {} of run {} at {}",
            request.stage, request.run, request.commit
        )
    });
    let exists = Process::new("git")
        .arg("-C")
        .arg(&args.repo)
        .args(["rev-parse", "-q", "--verify", &format!("refs/tags/{tag}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if exists && !args.force {
        bail!(
            "tag {tag} exists already (from an earlier run of the same name?): --force replaces it"
        );
    }
    // Refusals the daemon had before this tag: they are not its verdict on it.
    let refused_before: Vec<Rejection> = match (&args.state, args.wait.is_zero()) {
        (None, false) => crate::api::client::approvals(&args.token.daemon(&args.server)?)
            .map(|v| v.rejections)
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    // The user's own signing setup (gpg.format, user.signingkey) makes the signature.
    let mut tag_args = vec!["tag", "-s"];
    if args.force {
        tag_args.push("-f");
    }
    tag_args.extend(["-m", &message, &tag, &request.commit]);
    git(&args.repo, &tag_args)
        .context("git could not sign the tag (see its message above; gpg.format and user.signingkey say how it signs)")?;
    println!("signed tag {tag} on {}", request.commit);
    if let Some(remote) = &args.push {
        let force = if args.force { "+" } else { "" };
        git(
            &args.repo,
            &["push", remote, &format!("{force}refs/tags/{tag}")],
        )?;
        println!("pushed {tag} to {remote}");
    }
    if args.state.is_some() || args.wait.is_zero() {
        return Ok(ExitCode::SUCCESS);
    }
    await_verdict(args, &key, &tag, &refused_before)
}

/// Waits for the daemon to accept the approval of `key` or refuse `tag`, asking it every
/// second until --wait is over.
fn await_verdict(
    args: &ApproveArgs,
    key: &str,
    tag: &str,
    refused_before: &[Rejection],
) -> Result<ExitCode> {
    println!(
        "waiting up to {} for the daemon at {} to accept or refuse it",
        humantime::format_duration(args.wait),
        args.server
    );
    let deadline = std::time::Instant::now() + args.wait;
    let daemon = args.token.daemon(&args.server)?;
    loop {
        let view = crate::api::client::approvals(&daemon)?;
        if let Some(a) = view.approvals.iter().find(|a| a.request == key) {
            println!(
                "accepted: {key} approved by {} (key {})",
                a.signer, a.key_fingerprint
            );
            return Ok(ExitCode::SUCCESS);
        }
        let refused = view
            .rejections
            .iter()
            .find(|r| r.tag == tag && !refused_before.contains(r));
        let timed_out = std::time::Instant::now() >= deadline;
        // A refusal the daemon had before counts only when nothing else came in time.
        let refused = refused.or_else(|| {
            timed_out
                .then(|| view.rejections.iter().find(|r| r.tag == tag))
                .flatten()
        });
        if let Some(r) = refused {
            eprintln!("refused: {tag}: {} ({})", r.detail, r.reason);
            return Ok(ExitCode::from(1));
        }
        if timed_out {
            eprintln!(
                "the daemon has not judged {tag} within {}: it reads tags at its next look ({}); `gitfleet status` shows the verdict",
                humantime::format_duration(args.wait),
                if args.push.is_some() {
                    "after its next fetch"
                } else {
                    "push the tag (--push) if it follows a remote"
                }
            );
            return Ok(ExitCode::from(2));
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `verify-approval --server` judges a tag whose approval the daemon already accepted as
    /// it judged it then, not as naming no request.
    #[test]
    fn a_daemon_knows_the_requests_it_accepted_approvals_for() {
        let waiting = request_named("run-1-after-canary", "c1").unwrap();
        let view = crate::api::ApprovalsView {
            requests: vec![waiting.clone()],
            approvals: vec![crate::rollout::approval::Approval {
                request: "team-a/run-2-before-prod".into(),
                signer: "alice".into(),
                key_fingerprint: "SHA256:x".into(),
                tag: "gitfleet/approve/team-a/run-2-before-prod".into(),
                tag_object: "t".into(),
                commit: "c2".into(),
                accepted_at: 1,
            }],
            rejections: vec![],
        };
        let known = daemon_known(view);
        assert_eq!(known.len(), 2);
        assert_eq!(known[0], waiting);
        assert_eq!(known[1].key(), "team-a/run-2-before-prod");
        assert_eq!(known[1].commit, "c2");
    }

    #[test]
    fn a_signing_setup_that_cannot_sign_is_named_before_anything_is_tagged() {
        let ssh = |key: Option<&str>, exists: Option<bool>| SigningSetup {
            format: Some("ssh".into()),
            key: key.map(String::from),
            key_file_exists: exists,
            gpg_secret_key: None,
        };
        assert!(signing_problem(&ssh(None, None))
            .unwrap()
            .contains("user.signingkey is not set"));
        assert!(signing_problem(&ssh(Some("/k.pub"), Some(false)))
            .unwrap()
            .contains("/k.pub, which does not exist"));
        assert_eq!(signing_problem(&ssh(Some("/k.pub"), Some(true))), None);
        assert_eq!(
            signing_problem(&ssh(Some("key::ssh-ed25519 AAAA"), None)),
            None
        );
        let gpg = |secret: Option<bool>| SigningSetup {
            gpg_secret_key: secret,
            ..Default::default()
        };
        assert!(signing_problem(&gpg(Some(false)))
            .unwrap()
            .contains("no secret key"));
        assert!(signing_problem(&gpg(None))
            .unwrap()
            .contains("cannot be run"));
        assert_eq!(signing_problem(&gpg(Some(true))), None);
        // Never the advice to force a tag: forcing cannot make a signature.
        for s in [ssh(None, None), gpg(Some(false)), gpg(None)] {
            assert!(!signing_problem(&s).unwrap().contains("--force"));
        }
    }

    #[test]
    fn requests_are_read_from_tag_names() {
        let r = request_named("team-a/run-1-before-prod", "c").unwrap();
        assert_eq!(r.namespace.as_deref(), Some("team-a"));
        assert_eq!((r.run.as_str(), r.stage.as_str()), ("run-1", "prod"));
        assert_eq!(r.phase, TaskPhase::BeforeStage);
        assert_eq!(r.key(), "team-a/run-1-before-prod");
        let r = request_named("a-before-b-after-canary", "c").unwrap();
        assert_eq!(
            (r.run.as_str(), r.phase),
            ("a-before-b", TaskPhase::AfterStage)
        );
        for bad in [
            "run",
            "run-canary",
            "-before-x",
            "run-before-",
            "a/b/c-before-d",
        ] {
            assert_eq!(request_named(bad, "c"), None, "{bad}");
        }
        assert_eq!(tag_name("r-before-s"), "gitfleet/approve/r-before-s");
        assert_eq!(
            tag_name("refs/tags/gitfleet/approve/r-before-s"),
            "gitfleet/approve/r-before-s"
        );
    }
}
