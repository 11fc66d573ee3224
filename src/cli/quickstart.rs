//! `gitfleet quickstart`: the whole product on one machine from what the binary carries — the
//! sample fleet repository and its simulated members are embedded. It writes the repository to a
//! folder and commits it (with the git CLI, as a user would), serves the eight members with the
//! simulator, runs the daemon on the repository, and prints the rollout as it happens, with
//! what to try next. The sample's staged run waits for an approval: the quick start makes a demo
//! SSH key in its folder (`ssh-keygen`), trusts only that key, prints the exact `git tag -s` that
//! approves the request, and runs it (unless `--no-approve`), with git configuration given as
//! `-c` options for that one command: the user's own git configuration is never touched.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use include_dir::{include_dir, Dir};

use crate::daemon::deliver::PushDeliverer;
use crate::daemon::{Daemon, RunOptions, Status};

static FLEET_REPO: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/examples/fleet-repo");
static SIM_FLEET: &str = include_str!("../../examples/sim-fleet.yaml");
/// The demo age key of the sample's SOPS-encrypted Secret (outside the sample's folder, so it
/// is never read as a hub resource).
static DEMO_AGE_KEY: &str = include_str!("../../examples/demo-age-key.txt");

#[derive(Debug, Args)]
pub struct QuickstartArgs {
    /// Folder for the fleet repository, the kubeconfig and the daemon's state (created; must
    /// not exist yet, so nothing of yours is overwritten).
    #[arg(long, default_value = "gitfleet-quickstart")]
    pub dir: PathBuf,
    /// Address of the daemon's status API.
    #[arg(long, default_value = "127.0.0.1:7070")]
    pub listen: std::net::SocketAddr,
    /// Print how to approve the staged run's request with the demo key, but leave it to you.
    #[arg(long)]
    pub no_approve: bool,
}

/// The demo signing key and where approvals are made.
#[derive(Debug, Clone)]
struct Demo {
    repo: PathBuf,
    /// The private key (`ssh-keygen`'s file; `.pub` beside it).
    key: PathBuf,
    /// The daemon's `--trusted-signers` file: the demo key alone.
    allowed_signers: PathBuf,
}

/// The principal of the demo key in the allowed_signers file.
const DEMO_SIGNER: &str = "quickstart@gitfleet.invalid";

impl Demo {
    /// Makes an ed25519 key without passphrase in `dir` and the allowed_signers file trusting it.
    fn create(dir: &Path, repo: &Path) -> Result<Demo> {
        let key = dir.join("demo-key");
        let out = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", DEMO_SIGNER, "-f"])
            .arg(&key)
            .output()
            .context("cannot run ssh-keygen (is OpenSSH installed?)")?;
        if !out.status.success() {
            bail!(
                "ssh-keygen: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let public = std::fs::read_to_string(key.with_extension("pub"))?;
        let allowed_signers = dir.join("allowed_signers");
        std::fs::write(
            &allowed_signers,
            format!("{DEMO_SIGNER} namespaces=\"git\" {}\n", public.trim()),
        )?;
        Ok(Demo {
            repo: repo.to_path_buf(),
            key,
            allowed_signers,
        })
    }

    /// The git arguments that make a signed approval tag `tag` on `commit` with the demo key.
    fn tag_args(&self, tag: &str, commit: &str) -> Vec<String> {
        vec![
            "-c".into(),
            "gpg.format=ssh".into(),
            "-c".into(),
            format!("user.signingkey={}", self.key.display()),
            "tag".into(),
            "-s".into(),
            "-m".into(),
            "approve".into(),
            tag.into(),
            commit.into(),
        ]
    }

    /// The commands a person types: the tag, then its push to the repository the daemon follows.
    fn command(&self, tag: &str, commit: &str) -> String {
        format!(
            "git -C {repo} {} && git -C {repo} push -q origin {tag}",
            self.tag_args(tag, commit).join(" "),
            repo = self.repo.display(),
        )
    }

    /// Runs them, as the tagger of the quick start's commits.
    fn approve(&self, tag: &str, commit: &str) -> Result<()> {
        let args = self.tag_args(tag, commit);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        git(&self.repo, &args)?;
        git(&self.repo, &["push", "-q", "origin", tag])
    }
}

/// The daemon's log goes to a file, so the rollout's progress on standard output stays
/// readable.
fn init_logging(path: &Path) -> Result<()> {
    let file = std::fs::File::create(path)
        .with_context(|| format!("cannot write the daemon's log to {}", path.display()))?;
    let filter = tracing_subscriber::EnvFilter::try_from_env("GITFLEET_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .try_init();
    Ok(())
}

fn git(repo: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new("git")
        .args(args)
        .current_dir(repo)
        .env("GIT_AUTHOR_NAME", "gitfleet quickstart")
        .env("GIT_AUTHOR_EMAIL", "quickstart@gitfleet.invalid")
        .env("GIT_COMMITTER_NAME", "gitfleet quickstart")
        .env("GIT_COMMITTER_EMAIL", "quickstart@gitfleet.invalid")
        .output()
        .context("cannot run git (is it installed?)")?;
    if !out.status.success() {
        bail!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Removes a folder the quick start made when it fails before the daemon is up.
struct RemoveOnFailure(Option<PathBuf>);

impl RemoveOnFailure {
    fn keep(&mut self) {
        self.0 = None;
    }
}

impl Drop for RemoveOnFailure {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    eprintln!("cannot remove {}: {e}", dir.display());
                }
            }
        }
    }
}

/// The sample's staging soak, and the one the quick start gives it so the whole staged rollout
/// fits in a few minutes.
const SAMPLE_SOAK: (&str, &str) = ("waitTime: 15m", "waitTime: 1m");
const STRATEGY_FILE: &str = "rollout/three-stage-strategy.yaml";

/// Writes the embedded sample fleet into `repo`, commits it on branch `main` and pushes it to
/// `remote`, a bare repository the daemon follows, as a team's fleet repository on a git
/// server: changes reach the fleet with `git push`.
fn write_repository(repo: &Path, remote: &Path) -> Result<()> {
    std::fs::create_dir_all(repo)?;
    FLEET_REPO
        .extract(repo)
        .with_context(|| format!("cannot write the sample fleet to {}", repo.display()))?;
    let strategy = repo.join(STRATEGY_FILE);
    let text = std::fs::read_to_string(&strategy)?;
    std::fs::write(&strategy, text.replacen(SAMPLE_SOAK.0, SAMPLE_SOAK.1, 1))?;
    let tools = crate::sources::Sources::plain();
    let mut ignored = String::new();
    if !tools.kustomize.found() {
        eprintln!(
            "note: kustomize is not on PATH, so the sample's Kustomize application (apps/guestbook) \
             is left out by .gitfleetignore; install it with `{}` to see it built",
            crate::sources::kustomize::INSTALL
        );
        ignored.push_str(
            "# kustomize was not found when the quick start wrote this repository\n/apps/guestbook/\n",
        );
    }
    if !tools.helm.found() {
        eprintln!(
            "note: helm is not on PATH, so the sample's Helm release (apps/hello/release, chart \
             charts/hello) is left out by .gitfleetignore; install it with `{}` to see it rendered",
            crate::sources::helm::INSTALL
        );
        ignored.push_str(
            "# helm was not found when the quick start wrote this repository\n/apps/hello/release/\n/charts/hello/\n",
        );
    }
    if !ignored.is_empty() {
        std::fs::write(repo.join(".gitfleetignore"), ignored)?;
    }
    git(repo, &["init", "-q", "-b", "main"])?;
    git(repo, &["add", "-A"])?;
    git(repo, &["commit", "-q", "-m", "The sample fleet"])?;
    let remote_arg = remote.to_string_lossy();
    git(repo, &["init", "-q", "--bare", "-b", "main", &remote_arg])?;
    git(repo, &["remote", "add", "origin", &remote_arg])?;
    git(repo, &["push", "-q", "-u", "origin", "main"])?;
    Ok(())
}

/// One line per placement whose rollout state changed since the last print.
fn progress_lines(
    st: &Status,
    last: &mut std::collections::BTreeMap<String, String>,
    demo: &Demo,
    now: u64,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(r) = &st.rejected {
        let line = format!(
            "commit {} REJECTED: {}",
            &r.commit[..12.min(r.commit.len())],
            r.errors.first().map_or("", String::as_str)
        );
        if last.get("!rejected") != Some(&line) {
            last.insert("!rejected".into(), line.clone());
            out.push(line);
        }
    }
    for p in &st.placements {
        let state = if let Some(note) = &p.note {
            note.clone()
        } else if p.applying.is_empty()
            && p.removing.is_empty()
            && p.waiting.is_empty()
            && p.clusters.values().all(|c| c.health.is_ready())
        {
            format!("settled on {}", p.up_to_date.join(", "))
        } else {
            let mut parts = Vec::new();
            if !p.applying.is_empty() {
                parts.push(format!("applying {}", p.applying.join(", ")));
            }
            if !p.removing.is_empty() {
                parts.push(format!("removing {}", p.removing.join(", ")));
            }
            let pending: Vec<&str> = p
                .clusters
                .iter()
                .filter(|(_, c)| c.health == crate::rollout::BindingHealth::Pending)
                .map(|(name, _)| name.as_str())
                .collect();
            if !pending.is_empty() {
                parts.push(format!("becoming available {}", pending.join(", ")));
            }
            let failed: Vec<&str> = p
                .clusters
                .iter()
                .filter(|(_, c)| c.health == crate::rollout::BindingHealth::Failed)
                .map(|(name, _)| name.as_str())
                .collect();
            if !failed.is_empty() {
                parts.push(format!(
                    "failed on {} (gitfleet status tells why)",
                    failed.join(", ")
                ));
            }
            if !p.waiting.is_empty() {
                parts.push(format!("waiting {}", p.waiting.join(", ")));
            }
            parts.join("; ")
        };
        let line = format!("{:<34} {state}", p.id);
        if last.get(&p.id) != Some(&line) {
            last.insert(p.id.clone(), line.clone());
            out.push(line);
        }
    }
    // A stage soaking: the time left, every ten seconds.
    for r in &st.runs.update_runs {
        let key = format!("!soak {}", r.name);
        let Some(ends) = r.wait_ends else {
            last.remove(&key);
            continue;
        };
        let left = ends.saturating_sub(now);
        let line = format!(
            "{:<34} soaks after stage {}: {}s left",
            format!("run {}", r.name),
            r.stage.as_deref().unwrap_or("-"),
            left.div_ceil(10) * 10
        );
        if last.get(&key) != Some(&line) {
            last.insert(key, line.clone());
            out.push(line);
        }
    }
    // A staged run waiting for an approval: how to give it, once per request; who gave it.
    for r in &st.runs.approval_requests {
        let key = format!("!approval {}", r.name);
        let run = format!("run {}", r.update_run);
        if let Some(by) = &r.approved_by {
            if last.get(&key).map(String::as_str) != Some("approved") {
                last.insert(key, "approved".into());
                out.push(format!(
                    "{run:<34} approval {} accepted: signed tag {} by {by}",
                    r.name, r.tag
                ));
            }
        } else if let std::collections::btree_map::Entry::Vacant(e) = last.entry(key) {
            e.insert(String::new());
            out.push(format!(
                "{run:<34} waits for approval {}: approve the next stage with a signed tag on the run's commit:\n\
                 {:<34}   {}",
                r.name,
                "",
                demo.command(&r.tag, &r.commit)
            ));
        }
    }
    out
}

pub fn run(args: &QuickstartArgs) -> Result<ExitCode> {
    if args.dir.exists() {
        bail!(
            "{} already exists: remove it or pass --dir to another folder",
            args.dir.display()
        );
    }
    let dir = std::path::absolute(&args.dir)?;
    // The port first: a quick start that cannot listen stops before it writes anything.
    let listener = std::net::TcpListener::bind(args.listen)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .with_context(|| {
            format!(
                "cannot listen on {}: use --listen to pick another address",
                args.listen
            )
        })?;
    // Until the daemon is up, a failure removes what was made, so running again just works.
    let mut made = RemoveOnFailure(Some(dir.clone()));
    let repo = dir.join("fleet");
    let remote = dir.join("fleet.git");
    write_repository(&repo, &remote)?;
    let log = dir.join("daemon.log");
    init_logging(&log)?;
    let demo = Demo::create(&dir, &repo)?;
    // Beside the repository, not in it: what a user's own key file would be.
    let age_key = dir.join("demo-age-key.txt");
    std::fs::write(&age_key, DEMO_AGE_KEY)?;
    let verifier = crate::approvals::Verifier::load(Some(&demo.allowed_signers), None, None)?;
    let kubeconfig = dir.join("kubeconfig");
    let fleet = gitfleet_sim::fleet_file::FleetFile::parse(SIM_FLEET, "examples/sim-fleet.yaml")?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let sim = gitfleet_sim::start(
            fleet,
            gitfleet_sim::StartOptions {
                admin: Some("127.0.0.1:0".parse().expect("an address")),
                admin_token: None,
            },
        )
        .await?;
        sim.write_kubeconfig(&kubeconfig)?;
        let admin_token = gitfleet_sim::admin_token_path(&kubeconfig);
        sim.write_admin_token(&admin_token)?;
        let admin = sim
            .admin_addr()
            .map(|a| format!("http://{a}"))
            .unwrap_or_default();
        let opts = RunOptions {
            repo: remote.clone(),
            remote: None,
            branch: "main".into(),
            path: String::new(),
            sources: Arc::new(crate::sources::Sources::new(
                crate::sources::Keys::from_age_keys(DEMO_AGE_KEY)?,
                crate::sources::Kustomize::new(None, None, Default::default()),
                crate::sources::Helm::new(None, None, Default::default()),
            )),
            state_dir: dir.join("state"),
            listen: Some(args.listen),
            poll: Duration::from_secs(30),
            resync: Duration::from_secs(600),
            once: false,
            webhook_secret: None,
            verifier: Some(verifier),
            verify_commits: false,
            deletion_guard: Default::default(),
        };
        let deliverer = PushDeliverer {
            kubeconfig: Arc::new(crate::members::read_kubeconfig(&kubeconfig)?),
            kubeconfig_path: kubeconfig.clone(),
            probe: Default::default(),
            parallel_members: 16,
            parallel_requests: 8,
            retry_budget: Duration::from_secs(30),
            writer: crate::push::writer::Identity::daemon(&format!("quickstart {}", dir.display())),
            feedback_raw_json: Default::default(),
            clock: crate::timestamp::now_unix,
            watches: Default::default(),
            slots: Default::default(),
        };
        let daemon = Daemon::open(opts, deliverer)?;
        let status = daemon.status.clone();
        let (wake_tx, wake_rx) = tokio::sync::mpsc::unbounded_channel();
        let listener = tokio::net::TcpListener::from_std(listener)
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let api = crate::daemon::server::Api {
            status: status.clone(),
            metrics: daemon.metrics.clone(),
            webhook_secret: None,
            wake: wake_tx,
            ready_fetch_failures: 0,
            token: None,
        };
        let mut http =
            crate::daemon::server::spawn(listener, api, crate::daemon::server::Limits::default())?;
        let server = format!("http://{}", http.local_addr());
        // Up: from here on the folder is the user's (its state, the repository's commits).
        made.keep();
        println!("gitfleet quickstart");
        println!(
            "  fleet repository  {}  (your clone; the daemon follows its origin {}, branch main)",
            repo.display(),
            remote.display()
        );
        println!(
            "  members           {} simulated clusters; kubeconfig {}",
            sim.members().len(),
            kubeconfig.display()
        );
        println!(
            "  fault injection   curl -H \"Authorization: Bearer $(cat '{}')\" {admin}/members",
            admin_token.display()
        );
        println!("  status            gitfleet status --server {server}");
        println!("  daemon log        {}", log.display());
        println!(
            "  SOPS demo key     {}  (opens apps/hello/credentials.sops.yaml: pass --age-key-file to gitfleet commands; a demo key, never for real secrets)",
            age_key.display()
        );
        println!();
        println!("Try a change: in another terminal,");
        println!("  cd {}", repo.display());
        println!(
            "  sed -i 's/1.4.2/1.5.0/' apps/shop/deployment.yaml && git commit -qam 'shop 1.5.0'"
        );
        println!("  git push && gitfleet wait --repo . --server {server} crp/shop-app");
        println!("and watch it roll out here, one cluster at a time. The telemetry namespace");
        println!("rolls out stage by stage (rollout/telemetry-rollout-1.yaml): staging, a soak");
        println!("(shortened to one minute here: its strategy says 15m in examples/fleet-repo),");
        println!(
            "canary, then an approval request: a signed tag approves it. The daemon trusts one"
        );
        println!(
            "key, {} (in {}); the command is printed when the request is",
            demo.key.display(),
            demo.allowed_signers.display()
        );
        if args.no_approve {
            println!("reached, and left to you (--no-approve).");
        } else {
            println!("reached, and run for you with that key (--no-approve leaves it to you).");
        }
        println!("Look at a member with");
        println!(
            "  kubectl --kubeconfig {} --context eastus-prod-1 get deploy -A",
            kubeconfig.display()
        );
        println!("Ctrl-C stops everything.");
        println!();

        let printer = {
            let status = status.clone();
            let approve = !args.no_approve;
            tokio::spawn(async move {
                let mut last = std::collections::BTreeMap::new();
                let mut serving = None;
                let mut approved = std::collections::BTreeSet::new();
                loop {
                    let mut to_approve = Vec::new();
                    {
                        let st = status.lock().unwrap();
                        if st.serving != serving {
                            serving = st.serving.clone();
                            if let Some(c) = &serving {
                                println!("== serving commit {}", &c[..12.min(c.len())]);
                            }
                        }
                        for line in
                            progress_lines(&st, &mut last, &demo, crate::timestamp::now_unix())
                        {
                            println!("{line}");
                        }
                        for r in &st.runs.approval_requests {
                            if approve && r.approved_by.is_none() && approved.insert(r.tag.clone())
                            {
                                to_approve.push((r.tag.clone(), r.commit.clone()));
                            }
                        }
                    }
                    for (tag, commit) in to_approve {
                        let demo = demo.clone();
                        let made =
                            tokio::task::spawn_blocking(move || demo.approve(&tag, &commit)).await;
                        match made {
                            Ok(Ok(())) => println!("{:<34} signed it with the demo key", ""),
                            Ok(Err(e)) => println!("{:<34} could not sign it: {e:#}", ""),
                            Err(e) => println!("{:<34} could not sign it: {e}", ""),
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            })
        };
        let shutdown = tokio_util::sync::CancellationToken::new();
        let on_ctrl_c = shutdown.clone();
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            on_ctrl_c.cancel();
        });
        let result = http
            .supervise(daemon.run(wake_rx, shutdown.clone()), &shutdown)
            .await;
        printer.abort();
        let served = http.finish().await;
        sim.shutdown().await;
        result?;
        served?;
        println!(
            "stopped; the repository and state stay in {}",
            dir.display()
        );
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_fleet_is_the_sample_and_validates() {
        let dir = tempfile::tempdir().unwrap();
        FLEET_REPO.extract(dir.path()).unwrap();
        assert!(dir.path().join("members/eastus-prod-1.yaml").exists());
        let strategy = std::fs::read_to_string(dir.path().join(STRATEGY_FILE)).unwrap();
        assert_eq!(
            strategy.matches(SAMPLE_SOAK.0).count(),
            1,
            "the soak the quick start shortens"
        );
        let mut files = Vec::new();
        for path in walk(dir.path()) {
            let rel = path
                .strip_prefix(dir.path())
                .unwrap()
                .to_string_lossy()
                .to_string();
            // The Kustomize application is built by kustomize, not read file by file (the
            // sample's end-to-end tests build it).
            // Likewise the Helm release and its chart (rendered by helm).
            let rendered = ["apps/guestbook/", "apps/hello/release/", "charts/hello/"]
                .iter()
                .any(|folder| rel.starts_with(folder));
            if crate::source::is_manifest_path(&rel) && !rendered {
                files.push(crate::catalog::SourceFile {
                    path: rel,
                    content: std::fs::read(&path).unwrap(),
                });
            }
        }
        let (cat, diags) = crate::analyze(&files);
        assert!(diags.is_empty(), "{diags:#?}");
        // Every member of the sample fleet is simulated.
        let sim = gitfleet_sim::fleet_file::FleetFile::parse(SIM_FLEET, "sim").unwrap();
        let simulated: std::collections::BTreeSet<_> =
            sim.members.iter().map(|m| m.name.clone()).collect();
        for t in crate::members::member_targets(&cat) {
            assert!(simulated.contains(&t.name), "{} is not simulated", t.name);
        }
    }

    #[test]
    fn an_approval_request_prints_the_demo_command_once_then_who_approved() {
        let demo = Demo {
            repo: PathBuf::from("/q/fleet"),
            key: PathBuf::from("/q/demo-key"),
            allowed_signers: PathBuf::from("/q/allowed_signers"),
        };
        let mut st = Status::default();
        st.runs.approval_requests.push(crate::api::ApprovalRequest {
            name: "telemetry-rollout-1-after-canary".into(),
            namespace: None,
            update_run: "telemetry-rollout-1".into(),
            stage: "canary".into(),
            task_type: "afterStage".into(),
            approved: String::new(),
            approval_accepted: String::new(),
            created_at: 0,
            tag: "gitfleet/approve/telemetry-rollout-1-after-canary".into(),
            commit: "c0ffee".into(),
            approved_by: None,
            approved_at: None,
        });
        let mut last = Default::default();
        let lines = progress_lines(&st, &mut last, &demo, 0);
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].ends_with(
                "git -C /q/fleet -c gpg.format=ssh -c user.signingkey=/q/demo-key tag -s -m approve gitfleet/approve/telemetry-rollout-1-after-canary c0ffee && git -C /q/fleet push -q origin gitfleet/approve/telemetry-rollout-1-after-canary"
            ),
            "{}",
            lines[0]
        );
        assert!(progress_lines(&st, &mut last, &demo, 0).is_empty());
        st.runs.approval_requests[0].approved_by = Some(DEMO_SIGNER.into());
        let lines = progress_lines(&st, &mut last, &demo, 0);
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].contains("approval telemetry-rollout-1-after-canary accepted")
                && lines[0].ends_with("by quickstart@gitfleet.invalid"),
            "{}",
            lines[0]
        );
        assert!(progress_lines(&st, &mut last, &demo, 0).is_empty());
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
        out
    }
}
