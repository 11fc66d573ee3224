//! Pushing to many members at once: at most `parallel_members` at a time, each with its own
//! client, budget and request limit, so one down or slow member delays only itself.

use super::member::{failed_member, push_member};
use super::record::Record;
use super::{MemberPush, MemberResult, PushOptions};
use crate::members::{connect, MemberTarget};
use kube::config::Kubeconfig;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Pushes to every member; results sorted by member name. `progress` sees each member's result
/// as soon as it is done.
pub async fn push_fleet(
    kubeconfig: &Kubeconfig,
    kubeconfig_path: &Path,
    members: Vec<MemberPush>,
    opts: &PushOptions,
    progress: Arc<dyn Fn(&MemberResult) + Send + Sync>,
) -> Vec<MemberResult> {
    let slots = Arc::new(Semaphore::new(opts.parallel_members.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for target in members {
        let slots = Arc::clone(&slots);
        let kubeconfig = kubeconfig.clone();
        let path = kubeconfig_path.to_path_buf();
        let opts = opts.clone();
        let progress = Arc::clone(&progress);
        tasks.spawn(async move {
            let _slot = slots.acquire_owned().await.expect("never closed");
            let member_target = MemberTarget {
                name: target.member.clone(),
                context: target.context.clone(),
            };
            let result = match connect(&kubeconfig, &path, &member_target).await {
                Ok(client) => push_member(client, target, &opts).await,
                Err(e) => failed_member(&target, e.to_string()),
            };
            progress(&result);
            result
        });
    }
    let mut out = Vec::new();
    while let Some(done) = tasks.join_next().await {
        out.push(done.expect("member tasks do not panic"));
    }
    out.sort_by(|a, b| a.member.cmp(&b.member));
    out
}

/// A member's records by placement key, or why they cannot be read.
pub type MemberRecords = (String, Result<BTreeMap<String, Record>, String>);

/// Every member's records (what gitfleet applied there, by placement key), read at once; a
/// member that cannot be read gives its error.
pub async fn records_of(
    kubeconfig: &Kubeconfig,
    kubeconfig_path: &Path,
    members: Vec<MemberTarget>,
    opts: &PushOptions,
) -> Vec<MemberRecords> {
    let slots = Arc::new(Semaphore::new(opts.parallel_members.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for target in members {
        let slots = Arc::clone(&slots);
        let kubeconfig = kubeconfig.clone();
        let path = kubeconfig_path.to_path_buf();
        let opts = opts.clone();
        tasks.spawn(async move {
            let _slot = slots.acquire_owned().await.expect("never closed");
            let records = match connect(&kubeconfig, &path, &target).await {
                Ok(client) => super::member::records(client, &opts)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            (target.name, records)
        });
    }
    let mut out = Vec::new();
    while let Some(done) = tasks.join_next().await {
        out.push(done.expect("member tasks do not panic"));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}
