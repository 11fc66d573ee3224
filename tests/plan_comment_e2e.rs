//! `gitfleet plan --comment-on github|gitlab`: the plan is posted as one pull-request comment
//! that a second run finds by its hidden marker and edits in place, through local servers that
//! keep comments as GitHub's issue comments and GitLab's merge-request notes do. The plan's
//! exit code stays what it was (2: the change changes the fleet).

mod common;

use std::process::Command;
use std::sync::{Arc, Mutex};

use common::receiver::{Answer, Received, Receiver};
use common::Repo;
use serde_json::json;

const TOKEN: &str = "forge-token-plan-e2e";

/// Comments by id, as a forge keeps them; a page of them on GET, a new one on POST, an
/// edited one on PATCH (GitHub) or PUT (GitLab). Another user's comment is there first.
/// The forge's comments: id and body.
type Comments = Arc<Mutex<Vec<(u64, String)>>>;

fn forge() -> (Receiver, Comments) {
    let comments = Arc::new(Mutex::new(vec![(7, "LGTM".to_string())]));
    let kept = comments.clone();
    let receiver = Receiver::start(move |r: &Received| {
        let mut comments = kept.lock().unwrap();
        let body = r.body["body"].as_str().unwrap_or_default().to_string();
        let is_list = r.path.ends_with("/comments") || r.path.ends_with("/notes");
        match r.method.as_str() {
            "GET" if is_list => Answer::Json(
                200,
                json!(comments
                    .iter()
                    .map(|(id, b)| json!({"id": id, "body": b, "user": {"login": "x"}}))
                    .collect::<Vec<_>>()),
            ),
            "POST" if is_list => {
                let id = 100 + comments.len() as u64;
                comments.push((id, body.clone()));
                Answer::Json(201, json!({"id": id, "body": body}))
            }
            "PATCH" | "PUT" => {
                let id: u64 = r.path.rsplit('/').next().unwrap().parse().unwrap();
                match comments.iter_mut().find(|(i, _)| *i == id) {
                    Some(c) => {
                        c.1 = body.clone();
                        Answer::Json(200, json!({"id": id, "body": body}))
                    }
                    None => Answer::Json(404, json!({"message": "Not Found"})),
                }
            }
            _ => Answer::Json(404, json!({"message": "Not Found"})),
        }
    });
    (receiver, comments)
}

fn plan(repo: &Repo, forge: &str, api: &str, repository: &str) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .args(["plan", "--repo"])
        .arg(repo.path())
        .args(["--base", "HEAD~1", "--head", "HEAD", "--inventory"])
        .arg(repo.path().join(".inventory/inventory.yaml"))
        .args(["--comment-on", forge, "--forge-api-url", api])
        .args(["--forge-repository", repository, "--pull-request", "12"])
        .env("GITFLEET_FORGE_TOKEN", TOKEN)
        .env("GITFLEET_AGE_KEY_FILE", common::sample_age_key())
        .env_remove("GITFLEET_REPO")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains(TOKEN));
    (out.status.code().unwrap_or(-1), stderr)
}

fn fleet_with_a_change() -> Repo {
    let repo = Repo::new();
    repo.copy_sample_fleet();
    repo.commit("the sample fleet");
    let file = repo.path().join("placements/admission-guard.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let changed = text.replacen(
        r#"values: ["canary", "production"]"#,
        r#"values: ["production"]"#,
        1,
    );
    assert_ne!(text, changed);
    std::fs::write(file, changed).unwrap();
    repo.commit("admission-guard: production only");
    repo
}

#[test]
fn the_plan_is_one_github_comment_updated_in_place() {
    let repo = fleet_with_a_change();
    let (github, comments) = forge();
    let (code, stderr) = plan(&repo, "github", &github.base, "acme/fleet");
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("plan posted as a new comment"), "{stderr}");
    let posted = github.at("/repos/acme/fleet/issues/12/comments");
    assert_eq!(posted.len(), 2, "one list, one create");
    assert_eq!(posted[0].method, "GET");
    assert_eq!(posted[1].method, "POST");
    assert_eq!(
        posted[1].header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert_eq!(
        posted[1].header("accept"),
        Some("application/vnd.github+json")
    );
    let body = comments.lock().unwrap()[1].1.clone();
    assert!(
        body.starts_with("<!-- gitfleet-plan -->\n### gitfleet plan"),
        "{body}"
    );
    assert!(body.contains("crp/admission-guard"));

    // A second run (a new push to the pull request) edits the same comment.
    let (code, stderr) = plan(&repo, "github", &github.base, "acme/fleet");
    assert_eq!(code, 2);
    assert!(stderr.contains("plan comment 101 updated"), "{stderr}");
    let patched = github.at("/repos/acme/fleet/issues/comments/101");
    assert_eq!(patched.len(), 1);
    assert_eq!(patched[0].method, "PATCH");
    let all = comments.lock().unwrap().clone();
    assert_eq!(all.len(), 2, "the other user's comment and gitfleet's one");
    assert_eq!(all[0].1, "LGTM");
}

#[test]
fn the_plan_is_one_gitlab_note_updated_in_place() {
    let repo = fleet_with_a_change();
    let (gitlab, comments) = forge();
    let api = format!("{}/api/v4", gitlab.base);
    let (code, stderr) = plan(&repo, "gitlab", &api, "acme/fleet");
    assert_eq!(code, 2, "{stderr}");
    let notes = gitlab.at("/api/v4/projects/acme%2Ffleet/merge_requests/12/notes");
    assert_eq!(notes.len(), 2);
    assert_eq!(notes[1].method, "POST");
    assert_eq!(notes[1].header("private-token"), Some(TOKEN));
    let (code, _) = plan(&repo, "gitlab", &api, "acme/fleet");
    assert_eq!(code, 2);
    let put = gitlab.at("/api/v4/projects/acme%2Ffleet/merge_requests/12/notes/101");
    assert_eq!(put.len(), 1);
    assert_eq!(put[0].method, "PUT");
    assert!(put[0].body["body"]
        .as_str()
        .unwrap()
        .starts_with("<!-- gitfleet-plan -->"));
    assert_eq!(comments.lock().unwrap().len(), 2);
}

#[test]
fn a_comment_without_its_pull_request_is_a_usage_error() {
    let repo = fleet_with_a_change();
    let out = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .args(["plan", "--repo"])
        .arg(repo.path())
        .args([
            "--base",
            "HEAD~1",
            "--head",
            "HEAD",
            "--comment-on",
            "github",
        ])
        .args(["--forge-repository", "acme/fleet"])
        .env("GITFLEET_FORGE_TOKEN", TOKEN)
        .env_remove("GITFLEET_PULL_REQUEST")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--comment-on: give --pull-request"),
        "{stderr}"
    );
    assert_ne!(out.status.code(), Some(0));
    assert_ne!(out.status.code(), Some(2));
}
