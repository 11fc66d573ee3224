//! Replicas of `gitfleet run --state kubernetes` for the election's and the shards' tests, with
//! short leases (4 s / 3 s / 1 s) so that takeovers are quick, and the reads those tests share.

use std::ffi::OsStr;
use std::path::Path;

use super::daemon::Daemon;
use super::Repo;

/// Where the replicas keep their state: a kubeconfig of the hosting cluster (its context
/// `hosting`) and a namespace there.
pub struct Hosting<'a> {
    pub kubeconfig: &'a Path,
    pub namespace: &'a str,
}

/// Starts replica `identity` of `repo` whose members are reached with `members_kubeconfig`;
/// its files go into `dir/<identity>`; `more` flags are added.
pub fn start(
    repo: &Repo,
    members_kubeconfig: &Path,
    dir: &Path,
    hosting: &Hosting,
    identity: &str,
    more: &[&str],
) -> Daemon {
    let dir = dir.join(identity);
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let args = [
        "--state",
        "kubernetes",
        "--state-namespace",
        hosting.namespace,
        "--hosting-context",
        "hosting",
        "--identity",
        identity,
        "--lease-duration",
        "4s",
        "--renew-deadline",
        "3s",
        "--retry-period",
        "1s",
        "--hosting-kubeconfig",
    ];
    let flags: Vec<&OsStr> = args
        .iter()
        .map(OsStr::new)
        .chain([hosting.kubeconfig.as_os_str()])
        .chain(more.iter().map(OsStr::new))
        .collect();
    Daemon::start_with(
        repo.path(),
        members_kubeconfig,
        &dir.join("cache"),
        &secret,
        "1h",
        &flags,
        &[],
    )
}

/// A GET of the replica's API (empty when it does not answer).
pub fn get(daemon: &Daemon, path: &str) -> String {
    ureq::get(&format!("{}{path}", daemon.addr))
        .call()
        .ok()
        .and_then(|mut r| r.body_mut().read_to_string().ok())
        .unwrap_or_default()
}

pub fn placements(daemon: &Daemon) -> serde_json::Value {
    serde_json::from_str(&get(daemon, "/api/v1/placements")).unwrap_or_default()
}

pub fn leading(daemon: &Daemon) -> bool {
    placements(daemon)["leader"]["leading"] == true
}

/// A client of the `hosting` context of `kubeconfig`.
pub async fn hosting_client(kubeconfig: &Path) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let options = kube::config::KubeConfigOptions {
        context: Some("hosting".into()),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}
