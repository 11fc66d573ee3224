//! The web dashboard in a real browser: Debian's chromium, headless, driven over WebDriver by
//! chromedriver, against the daemon of `gitfleet quickstart` (`gitfleet run`'s daemon on eight
//! simulated members, with a staged run that soaks, then asks for an approval). Each page
//! renders without console errors, the matrix shows the states the status API reports, a
//! pending approval and then its acceptance appear without a reload, a timed wait's time left
//! counts down between status changes, and a link with filters opens the same view. Against
//! `gitfleet run` on two simulated members: failed, drifted and held cells where the API
//! reports them, and a Secret's values never on a placement's page. Screenshots of the pages
//! are written for review (the path is printed).
//!
//! The token and the headers are checked without a browser, against `gitfleet run`.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

/// Where the screenshots go: beside the build's own folders, so a review finds them after the
/// run (`$CARGO_TARGET_DIR/dashboard-screenshots`).
fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("dashboard-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A process killed on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// chromedriver and the browsers it starts, in a process group of their own: a test that
/// fails before it closes its session leaves no browser behind.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0.id())])
            .status();
        let _ = self.0.wait();
    }
}

/// chromedriver on a free port, once it answers.
fn start_chromedriver(chromedriver: &Path) -> (Driver, String) {
    use std::os::unix::process::CommandExt as _;
    let port = free_port();
    let child = Command::new(chromedriver)
        .process_group(0)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = format!("http://127.0.0.1:{port}");
    common::daemon::await_until("chromedriver to answer", || {
        ureq::get(&format!("{addr}/status")).call().is_ok()
    });
    (Driver(child), addr)
}

/// `tool` as a path: chromedriver needs the browser's file, not a name to look up.
fn on_path(tool: &Path) -> PathBuf {
    if tool.components().count() > 1 {
        return tool.to_path_buf();
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(tool))
        .find(|p| p.is_file())
        .unwrap_or_else(|| tool.to_path_buf())
}

async fn browser(driver: &str, chromium: &Path) -> Client {
    let chromium = on_path(chromium);
    let caps = json!({
        "goog:chromeOptions": {
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1400,1000"],
        },
        "goog:loggingPrefs": {"browser": "ALL"},
    });
    let Value::Object(caps) = caps else {
        unreachable!()
    };
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(driver)
        .await
        .expect("a chromium session through chromedriver")
}

/// chromedriver's browser log since the last read (its `se/log` extension command).
#[derive(Debug)]
struct BrowserLog;

impl fantoccini::wd::WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(r#"{"type":"browser"}"#.into()))
    }
}

/// The console's errors since the last look (warnings and messages are not errors).
async fn console_errors(c: &Client) -> Vec<String> {
    let log = c.issue_cmd(BrowserLog).await.expect("the browser log");
    log.as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["level"] == "SEVERE")
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Opens `path`, waits for its heading, fails on console errors, and writes a screenshot.
async fn visit(c: &Client, base: &str, path: &str, shot: &str) {
    c.goto(&format!("{base}{path}")).await.unwrap();
    c.wait()
        .at_most(Duration::from_secs(30))
        .for_element(Locator::Css("main h1"))
        .await
        .unwrap_or_else(|e| panic!("{path}: no heading: {e}"));
    // The script has loaded (a CSP violation or a script error would show in the log).
    await_js(c, "document.readyState === 'complete'", path).await;
    let errors = console_errors(c).await;
    assert!(errors.is_empty(), "{path}: console errors: {errors:#?}");
    let png = c.screenshot().await.unwrap();
    std::fs::write(screenshot_dir().join(shot), png).unwrap();
}

/// Waits until the script `condition` (an expression) is true in the page, without reloading.
async fn await_js(c: &Client, condition: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let v = c
            .execute(&format!("return !!({condition});"), vec![])
            .await
            .unwrap();
        if v == Value::Bool(true) {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn get_json(addr: &str, path: &str) -> Value {
    ureq::get(&format!("{addr}{path}"))
        .call()
        .ok()
        .and_then(|mut r| r.body_mut().read_to_string().ok())
        .and_then(|b| serde_json::from_str(&b).ok())
        .unwrap_or_default()
}

/// The states the status API reports for the placements and members the matrix's first page
/// shows: placement id → cluster → state.
fn api_states(addr: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let doc: gitfleet::api::Placements =
        serde_json::from_value(get_json(addr, "/api/v1/placements?limit=50")).unwrap();
    let members: gitfleet::api::Members =
        serde_json::from_value(get_json(addr, "/api/v1/members?limit=50")).unwrap();
    doc.placements
        .iter()
        .map(|p| {
            let cells = members
                .members
                .iter()
                .filter_map(|m| Some((m.name.clone(), p.cluster_state(&m.name)?.as_str().into())))
                .collect();
            (p.id.clone(), cells)
        })
        .collect()
}

/// The states the matrix on the page shows, in the same shape.
async fn page_states(c: &Client) -> BTreeMap<String, BTreeMap<String, String>> {
    let v = c
        .execute(
            "const out = {};
             for (const row of document.querySelectorAll('#matrix tbody tr')) {
               const cells = {};
               for (const td of row.querySelectorAll('td[data-cluster]')) {
                 cells[td.dataset.cluster] = td.className;
               }
               out[row.dataset.placement] = cells;
             }
             return out;",
            vec![],
        )
        .await
        .unwrap();
    serde_json::from_value(v).unwrap()
}

/// `gitfleet quickstart --no-approve` with a test clock: its stdout lines, its status address.
struct Quickstart {
    _child: Killed,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    addr: String,
    skew: PathBuf,
    fleet: PathBuf,
    _work: tempfile::TempDir,
}

impl Quickstart {
    fn start() -> Quickstart {
        let work = tempfile::tempdir().unwrap();
        let dir = work.path().join("demo");
        let home = work.path().join("home");
        std::fs::create_dir(&home).unwrap();
        std::fs::write(
            home.join(".gitconfig"),
            "[user]\n\tname = Someone\n\temail = someone@example.com\n",
        )
        .unwrap();
        let skew = work.path().join("clock-skew");
        std::fs::write(&skew, "0").unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
            .args([
                "quickstart",
                "--no-approve",
                "--listen",
                "127.0.0.1:0",
                "--dir",
            ])
            .arg(&dir)
            .env("HOME", &home)
            .env_remove("GIT_CONFIG_GLOBAL")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GITFLEET_TEST_CLOCK_SKEW_FILE", &skew)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = common::lines_of(child.stdout.take().unwrap());
        let mut q = Quickstart {
            _child: Killed(child),
            lines,
            seen: vec![],
            addr: String::new(),
            skew,
            fleet: dir.join("fleet"),
            _work: work,
        };
        q.addr = q
            .next_line("with the status address", |l| {
                l.trim_start().starts_with("status") && l.contains("--server")
            })
            .rsplit(' ')
            .next()
            .unwrap()
            .to_string();
        q
    }

    fn next_line(&mut self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let line = self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("no line {what}; saw:\n{}", self.seen.join("\n")));
            self.seen.push(line.clone());
            if pred(&line) {
                return line;
            }
        }
    }

    /// Makes the daemon look at the branch now.
    fn wake(&self) {
        let ok = Command::new("git")
            .current_dir(&self.fleet)
            .args(["update-ref", "refs/test/wake", "HEAD"])
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs the daemon's test clock: cargo test --features test-hooks"
)]
async fn the_dashboard_shows_the_fleet_and_follows_an_approval_live() {
    use gitfleet_testkit::tools::{CHROMEDRIVER, CHROMIUM};
    let what = "the dashboard's browser tests";
    let (Some(chromium), Some(chromedriver)) = (CHROMIUM.find(what), CHROMEDRIVER.find(what))
    else {
        return;
    };
    let mut q = Quickstart::start();
    let base = q.addr.clone();
    common::daemon::await_until("the first reconcile", || {
        get_json(&base, "/api/v1/summary")["placements"]["total"]
            .as_u64()
            .is_some_and(|n| n > 0)
    });
    let (_driver, driver) = start_chromedriver(&chromedriver);
    let c = browser(&driver, &chromium).await;

    visit(&c, &base, "/", "fleet.png").await;
    let members = c.find_all(Locator::Css("#members ~ table tbody tr")).await;
    assert!(
        members.is_ok_and(|m| m.len() == 8),
        "the eight members are listed"
    );

    // The staged run soaks (a minute, so this comes first); past the soak (on the daemon's
    // clock) it asks for an approval, which appears on the open page without a reload, and
    // then its acceptance.
    visit(&c, &base, "/runs", "runs-soaking.png").await;
    await_js(
        &c,
        "document.querySelector('[data-run=\"telemetry-rollout-1\"] .waiting')?.textContent === 'TimedWait' \
         && /^[0-9]+[hms]/.test(document.querySelector('[data-run=\"telemetry-rollout-1\"] .time-left')?.textContent)",
        "the soak, with its time left",
    )
    .await;
    // The time left counts down every second between status changes: the same element (not
    // one a poll swapped in) shows less while the status's ETag stays the same.
    let time_left = "document.querySelector('[data-run=\"telemetry-rollout-1\"] .time-left')";
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let before = get(&base, "/runs", &[]).1["etag"].clone();
        let was = c
            .execute(
                &format!("window.ticking = {time_left}; return window.ticking.textContent;"),
                vec![],
            )
            .await
            .unwrap();
        let mut ticked = false;
        for _ in 0..25 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = c
                .execute(
                    "return window.ticking.isConnected ? window.ticking.textContent : null;",
                    vec![],
                )
                .await
                .unwrap();
            if now.is_null() {
                break;
            }
            if now != was {
                let text = now.as_str().unwrap().to_string();
                assert!(
                    text.ends_with('s') && text.starts_with(|c: char| c.is_ascii_digit()),
                    "{text}"
                );
                ticked = true;
                break;
            }
        }
        if ticked && get(&base, "/runs", &[]).1["etag"] == before {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the time left never ticked between status changes"
        );
    }
    c.execute("window.notReloaded = true;", vec![])
        .await
        .unwrap();
    std::fs::write(&q.skew, "1000").unwrap();
    q.wake();
    let request = "telemetry-rollout-1-after-canary";
    await_js(
        &c,
        &format!(
            "document.querySelector('#pending-approvals [data-request=\"{request}\"] code.command')\
             ?.textContent === 'gitfleet approve {request}'"
        ),
        "the pending approval",
    )
    .await;
    std::fs::write(
        screenshot_dir().join("runs-approval.png"),
        c.screenshot().await.unwrap(),
    )
    .unwrap();
    // The quick start prints the git commands that make the signed tag (and push it); run
    // them.
    let command = q.next_line("with the command", |l| l.contains("tag -s"));
    assert!(command.trim_start().starts_with("git "), "{command}");
    // A new machine's HOME may name no git identity; the tag's tagger is given here.
    let tagged = Command::new("sh")
        .args(["-c", command.trim()])
        .env("GIT_COMMITTER_NAME", "approver")
        .env("GIT_COMMITTER_EMAIL", "approver@example.com")
        .status()
        .unwrap();
    assert!(tagged.success(), "{command}");
    q.wake();
    await_js(
        &c,
        "[...document.querySelectorAll('.approved')].some(e => e.textContent.startsWith('approved by quickstart@gitfleet.invalid'))",
        "the accepted approval",
    )
    .await;
    await_js(
        &c,
        "window.notReloaded === true",
        "the same page, not reloaded",
    )
    .await;
    std::fs::write(
        screenshot_dir().join("runs-approved.png"),
        c.screenshot().await.unwrap(),
    )
    .unwrap();
    assert!(console_errors(&c).await.is_empty());

    visit(&c, &base, "/source", "source.png").await;
    visit(&c, &base, "/placements/crp/telemetry", "placement.png").await;

    // A placement's page shows its policy as the API carries it (the spec's, as declared).
    let policy = &get_json(&base, "/api/v1/placements/crp/shop-app")["policy"];
    assert_eq!(policy["placementType"], "PickN", "{policy}");
    assert_eq!(policy["numberOfClusters"], 3, "{policy}");
    visit(
        &c,
        &base,
        "/placements/crp/shop-app",
        "placement-policy.png",
    )
    .await;
    let text = c
        .find(Locator::Css("#policy"))
        .await
        .unwrap()
        .find(Locator::XPath(".."))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for shown in [
        "Placement type\nPickN",
        "Number of clusters\n3",
        "required: labels environment in (canary,production); kubernetes-fleet.io/node-count Ge 3",
        "preferred (weight 40): labels tier=premium",
        "key region, max skew 1, when unsatisfiable DoNotSchedule",
    ] {
        assert!(text.contains(shown), "{shown:?} not in {text:?}");
    }

    // The matrix shows what the API reports: read both until they are of the same status
    // (the rollout moves meanwhile).
    visit(&c, &base, "/matrix", "matrix.png").await;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let (api, page) = (api_states(&base), page_states(&c).await);
        if !api.is_empty() && api == page {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the matrix never showed the API's states:\nAPI  {api:?}\npage {page:?}"
        );
        c.refresh().await.unwrap();
    }

    // A link with filters opens the same view: filter with the keyboard, then open the
    // address it led to afresh.
    let name = c.find(Locator::Css("input[name=name]")).await.unwrap();
    name.send_keys("telemetry\u{E007}").await.unwrap();
    await_js(
        &c,
        "location.search.includes('name=telemetry') && document.querySelector('#matrix')",
        "the filtered matrix",
    )
    .await;
    let shared = c.current_url().await.unwrap().to_string();
    let rows =
        |s: &BTreeMap<String, BTreeMap<String, String>>| s.keys().cloned().collect::<Vec<_>>();
    let filtered = rows(&page_states(&c).await);
    assert_eq!(filtered, ["crp/telemetry"], "{shared}");
    c.goto(&format!("{base}/")).await.unwrap();
    c.goto(&shared).await.unwrap();
    c.wait().for_element(Locator::Css("#matrix")).await.unwrap();
    assert_eq!(rows(&page_states(&c).await), filtered, "{shared}");
    let value = c
        .execute(
            "return document.querySelector('input[name=name]').value",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(value, "telemetry");
    assert!(console_errors(&c).await.is_empty());

    c.close().await.unwrap();
    eprintln!("screenshots: {}", screenshot_dir().display());
}

/// A namespace `name` with ConfigMap `settings` (`mode: blue`), what else is given, and a
/// ClusterResourcePlacement `name` of it with `strategy`.
fn app(name: &str, more: &str, strategy: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}, labels: {{team: {name}}}}}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: {name}}}\ndata: {{mode: blue}}\n---\n\
         {more}\
         apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata: {{name: {name}}}\n\
         spec:\n  resourceSelectors: [{{group: '', version: v1, kind: Namespace, name: {name}}}]\n  strategy: {strategy}\n"
    )
}

/// A placement's cluster's state as the status API reports it.
fn api_state(addr: &str, id: &str, cluster: &str) -> Option<String> {
    let p: gitfleet::api::PlacementStatus =
        serde_json::from_value(get_json(addr, &format!("/api/v1/placements/{id}"))).ok()?;
    p.cluster_state(cluster).map(|s| s.as_str().to_string())
}

/// The matrix shows a failed, a drifted and a held cell where the status API reports them:
/// `guarded` (IfNotDrifted) fails on alpha once someone changes its ConfigMap there, `report`
/// (ReportDiff) is drifted on beta, which runs other values, and `held` is held on both once
/// its selectors turn invalid. And a Secret's values (the repository's and the member's) never
/// reach the placement's page, whose diffs mask them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_matrix_shows_failed_drifted_and_held_cells_and_masks_secrets() {
    use common::kubectl::Kubectl as _;
    use gitfleet_testkit::tools::{CHROMEDRIVER, CHROMIUM};
    let what = "the dashboard's browser tests";
    let (Some(chromium), Some(chromedriver)) = (CHROMIUM.find(what), CHROMEDRIVER.find(what))
    else {
        return;
    };
    let sim = common::sim::SimFleet::start(common::TWO_MEMBERS);
    let repo = common::Repo::new();
    repo.write("members/alpha.yaml", &common::member_cluster("alpha"));
    repo.write("members/beta.yaml", &common::member_cluster("beta"));
    repo.write(
        "guarded.yaml",
        &app(
            "guarded",
            "",
            "{applyStrategy: {whenToApply: IfNotDrifted}}",
        ),
    );
    let secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: report}\n\
                  type: Opaque\nstringData: {password: repo-pw-7f3a91}\n---\n";
    repo.write(
        "report.yaml",
        &app("report", secret, "{applyStrategy: {type: ReportDiff}}"),
    );
    repo.write("held.yaml", &app("held", "", "{type: RollingUpdate}"));
    repo.commit("three placements");
    // beta runs other values of report's objects, made by someone else.
    sim.apply(
        "beta",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: report}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: report}\ndata: {mode: red}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: report}\n\
         type: Opaque\nstringData: {password: member-pw-c2d8e4}\n",
        &[],
    );
    let state = tempfile::tempdir().unwrap();
    let hook = state.path().join("hook");
    std::fs::write(&hook, "s3cret\n").unwrap();
    let daemon = common::daemon::Daemon::start(
        repo.path(),
        &sim.kubeconfig,
        &state.path().join("state"),
        &hook,
        "1h",
    );
    let base = daemon.addr.clone();
    let state_of = |id: &str, cluster: &str| api_state(&base, id, cluster);
    common::daemon::await_until("guarded and held available on both members", || {
        ["crp/guarded", "crp/held"].iter().all(|id| {
            ["alpha", "beta"]
                .iter()
                .all(|m| state_of(id, m).as_deref() == Some("available"))
        })
    });
    let (code, _, err) = sim.kubectl(
        "alpha",
        &[
            "patch",
            "configmap",
            "settings",
            "-n",
            "guarded",
            "--type=merge",
            "-p",
            r#"{"data":{"mode":"red"}}"#,
        ],
    );
    assert_eq!(code, 0, "{err}");
    // `held` takes its namespaces by label, which selects the reserved kube-held too.
    repo.write(
        "kube-held.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: kube-held, labels: {team: held}}\n",
    );
    repo.write(
        "held.yaml",
        &app("held", "", "{type: RollingUpdate}").replace(
            "name: held}]",
            "labelSelector: {matchLabels: {team: held}}}]",
        ),
    );
    repo.commit("held selects by label");
    common::daemon::await_until("failed, drifted and held cells in the API", || {
        state_of("crp/guarded", "alpha").as_deref() == Some("failed")
            && state_of("crp/report", "beta").as_deref() == Some("drifted")
            && state_of("crp/held", "alpha").as_deref() == Some("held")
            && state_of("crp/held", "beta").as_deref() == Some("held")
    });

    let (_driver, driver) = start_chromedriver(&chromedriver);
    let c = browser(&driver, &chromium).await;
    visit(&c, &base, "/matrix", "matrix-states.png").await;
    let deadline = Instant::now() + Duration::from_secs(90);
    let page = loop {
        let (api, page) = (api_states(&base), page_states(&c).await);
        if !api.is_empty() && api == page {
            break page;
        }
        assert!(
            Instant::now() < deadline,
            "the matrix never showed the API's states:\nAPI  {api:?}\npage {page:?}"
        );
        c.refresh().await.unwrap();
    };
    let cell = |id: &str, m: &str| page[id].get(m).map(String::as_str);
    assert_eq!(cell("crp/guarded", "alpha"), Some("failed"), "{page:?}");
    assert_eq!(cell("crp/report", "beta"), Some("drifted"), "{page:?}");
    assert_eq!(cell("crp/held", "alpha"), Some("held"), "{page:?}");
    assert_eq!(cell("crp/held", "beta"), Some("held"), "{page:?}");
    // The matrix filtered by state shows those cells' placements only.
    visit(&c, &base, "/matrix?state=drifted", "matrix-drifted.png").await;
    let rows: Vec<String> = page_states(&c).await.into_keys().collect();
    assert_eq!(rows, ["crp/report"]);

    // The Secret's diff is on the page, its values are not (in any encoding).
    visit(&c, &base, "/placements/crp/report", "placement-secret.png").await;
    let source = c.source().await.unwrap();
    let doc = get_json(&base, "/api/v1/placements/crp/report");
    let secret_diff = doc["clusters"]["beta"]["diffs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|d| d.contains("Secret report/creds"))
        .unwrap_or_else(|| panic!("no diff of the Secret on beta: {doc:#}"))
        .to_string();
    assert!(secret_diff.contains("(hidden)"), "{secret_diff}");
    assert!(
        source.contains(
            &secret_diff
                .replace('&', "&amp;")
                .replace('"', "&quot;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
        ) || source.contains(
            &secret_diff
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
        ),
        "the Secret's diff {secret_diff:?} is not on the page:\n{source}"
    );
    let b64 = |s: &str| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(s)
    };
    for value in ["repo-pw-7f3a91", "member-pw-c2d8e4"] {
        for shown in [value.to_string(), b64(value)] {
            assert!(
                !source.contains(&shown),
                "{shown} is on the page:\n{source}"
            );
        }
    }
    // Nor in the API the page is made from.
    let doc = doc.to_string();
    for value in ["repo-pw-7f3a91", "member-pw-c2d8e4"] {
        assert!(!doc.contains(value) && !doc.contains(&b64(value)), "{doc}");
    }
    assert!(console_errors(&c).await.is_empty());
    c.close().await.unwrap();
}

fn get(addr: &str, path: &str, headers: &[(&str, &str)]) -> (u16, BTreeMap<String, String>) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .max_redirects(0)
        .http_status_as_error(false)
        .build()
        .into();
    let mut req = agent.get(&format!("{addr}{path}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.call().unwrap();
    let headers = r
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
        .collect();
    (r.status().as_u16(), headers)
}

/// With `--dashboard-token-file` (the older name of `--token-file`), the pages need the token; `?token=` trades it for an
/// HttpOnly, SameSite=Strict cookie and a redirect to the address without it. Every answer
/// carries the headers of a read-only app.
#[test]
fn the_dashboard_token_and_headers() {
    let sim = common::sim::SimFleet::start("anonymousAuth: true\nmembers:\n  - name: alpha\n");
    let repo = common::Repo::new();
    repo.write("README.md", "fleet\n");
    repo.commit("empty fleet");
    let state = tempfile::tempdir().unwrap();
    let secret = state.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let token = state.path().join("token");
    std::fs::write(&token, "t0ken-of-the-dashboard\n").unwrap();
    let daemon = common::daemon::Daemon::start_with(
        repo.path(),
        &sim.kubeconfig,
        &state.path().join("state"),
        &secret,
        "1m",
        &["--dashboard-token-file".as_ref(), token.as_os_str()],
        &[],
    );
    let addr = &daemon.addr;

    let (code, h) = get(addr, "/matrix?name=x", &[]);
    assert_eq!(code, 401);
    assert!(h["www-authenticate"].starts_with("Bearer"), "{h:?}");
    let (code, _) = get(addr, "/?token=wrong", &[]);
    assert_eq!(code, 401);

    let (code, h) = get(addr, "/matrix?name=x&token=t0ken-of-the-dashboard", &[]);
    assert_eq!(code, 303);
    assert_eq!(h["location"], "/matrix?name=x");
    assert_eq!(
        h["set-cookie"],
        "gitfleet_dashboard=t0ken-of-the-dashboard; HttpOnly; SameSite=Strict; Path=/"
    );
    let cookie = [("cookie", "gitfleet_dashboard=t0ken-of-the-dashboard")];
    let (code, h) = get(addr, "/matrix?name=x", &cookie);
    assert_eq!(code, 200);
    assert!(h["content-type"].starts_with("text/html"), "{h:?}");
    let bearer = [("authorization", "Bearer t0ken-of-the-dashboard")];
    for path in [
        "/",
        "/runs",
        "/source",
        "/assets/dashboard.js",
        "/assets/dashboard.css",
    ] {
        let (code, h) = get(addr, path, &bearer);
        assert_eq!(code, 200, "{path}");
        let csp = &h["content-security-policy"];
        assert!(csp.contains("script-src 'self'"), "{path}: {csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert!(!csp.contains("unsafe-inline"), "{path}: {csp}");
        assert_eq!(h["x-frame-options"], "DENY", "{path}");
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["referrer-policy"], "no-referrer", "{path}");
    }
    // The pages carry the status's ETag: an unchanged status is not sent again.
    let (_, h) = get(addr, "/runs", &bearer);
    let etag = h["etag"].clone();
    let (code, h) = get(addr, "/runs", &[bearer[0], ("if-none-match", &etag)]);
    // 200 only if the status changed in between, with a new ETag.
    assert!(
        code == 304 || code == 200 && h["etag"] != etag,
        "{code} {h:?}"
    );
    // The JSON API is behind the same token (the older flag name still says so); the
    // probes are not.
    assert_eq!(get(addr, "/api/v1/summary", &[]).0, 401);
    assert_eq!(get(addr, "/api/v1/summary", &bearer).0, 200);
    assert_eq!(get(addr, "/healthz", &[]).0, 200);
}

/// The matrix page's first paint and weight in chromium, against a running dashboard
/// (`GITFLEET_DASHBOARD_URL`, e.g. the one the daemon benchmark holds up with
/// `GITFLEET_DAEMON_BENCH_HOLD`; docs/benchmarks.md has the commands). Five loads, each
/// figure's median: first contentful paint from the navigation's start, the bytes of the page
/// and of everything it loaded, and the cells drawn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: set GITFLEET_DASHBOARD_URL to a dashboard page"]
async fn matrix_first_paint() {
    use gitfleet_testkit::tools::{CHROMEDRIVER, CHROMIUM};
    let url = std::env::var("GITFLEET_DASHBOARD_URL").expect("GITFLEET_DASHBOARD_URL");
    let what = "the first-paint measurement";
    let (Some(chromium), Some(chromedriver)) = (CHROMIUM.find(what), CHROMEDRIVER.find(what))
    else {
        return;
    };
    let (_driver, driver) = start_chromedriver(&chromedriver);
    let c = browser(&driver, &chromium).await;
    let mut runs: Vec<Vec<f64>> = Vec::new();
    for i in 0..5 {
        // A new address each time, so that no load is answered from the browser's cache (the
        // dashboard ignores parameters it does not know).
        let sep = if url.contains('?') { '&' } else { '?' };
        c.goto(&format!("{url}{sep}load={i}")).await.unwrap();
        await_js(
            &c,
            "performance.getEntriesByName('first-contentful-paint').length > 0",
            "the first paint",
        )
        .await;
        let v = c
            .execute(
                "const nav = performance.getEntriesByType('navigation')[0];
                 const fcp = performance.getEntriesByName('first-contentful-paint')[0];
                 const all = performance.getEntriesByType('resource')
                   .reduce((n, r) => n + r.transferSize, nav.transferSize);
                 return [fcp.startTime, nav.responseEnd, nav.transferSize, nav.decodedBodySize,
                         all, document.querySelectorAll('#matrix td').length];",
                vec![],
            )
            .await
            .unwrap();
        runs.push(serde_json::from_value(v).unwrap());
    }
    let median = |i: usize| {
        let mut xs: Vec<f64> = runs.iter().map(|r| r[i]).collect();
        xs.sort_by(f64::total_cmp);
        xs[xs.len() / 2]
    };
    println!(
        "{url}: first contentful paint {:.0} ms (response end {:.0} ms); page {:.1} KiB on the \
         wire, {:.1} KiB decoded; with its assets {:.1} KiB; {} cells (median of 5 loads, the \
         assets cached after the first)",
        median(0),
        median(1),
        median(2) / 1024.0,
        median(3) / 1024.0,
        median(4) / 1024.0,
        median(5),
    );
    let first = &runs[0];
    println!(
        "the first load (nothing cached): first contentful paint {:.0} ms, with its assets \
         {:.1} KiB",
        first[0],
        first[4] / 1024.0
    );
    let errors = console_errors(&c).await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    c.close().await.unwrap();
}
