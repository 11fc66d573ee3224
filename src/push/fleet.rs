//! Pushing to many members at once: at most `parallel_members` at a time, each with its own
//! client, budget and request limit, so one down or slow member delays only itself.

use super::member::{failed_member, push_member};
use super::record::Record;
use super::{MemberPush, MemberResult, PushOptions};
use crate::members::{connection, Connection, MemberTarget};
use kube::config::Kubeconfig;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Runs `work` for every member, at most `parallel` at a time, each with its own client (or the
/// reason it could not be made); results in the order the members finish.
async fn each_member<I, T, F, Fut>(
    kubeconfig: &Arc<Kubeconfig>,
    kubeconfig_path: &Path,
    parallel: usize,
    members: Vec<(MemberTarget, I)>,
    work: F,
) -> Vec<T>
where
    I: Send + 'static,
    T: Send + 'static,
    F: Fn(Result<Connection, String>, MemberTarget, I) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = T> + Send,
{
    let slots = Arc::new(Semaphore::new(parallel.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for (target, item) in members {
        let slots = Arc::clone(&slots);
        let kubeconfig = Arc::clone(kubeconfig);
        let path = kubeconfig_path.to_path_buf();
        let work = work.clone();
        tasks.spawn(async move {
            let _slot = slots.acquire_owned().await.expect("never closed");
            let client = connection(&kubeconfig, &path, &target)
                .await
                .map_err(|e| e.to_string());
            work(client, target, item).await
        });
    }
    let mut out = Vec::new();
    while let Some(done) = tasks.join_next().await {
        out.push(done.expect("member tasks do not panic"));
    }
    out
}

/// Pushes to every member; results sorted by member name. `progress` sees each member's result
/// as soon as it is done.
///
/// `kubeconfig` is shared, not copied: it holds every member's entries, and the daemon pushes
/// one member at a time, so a copy per push would be a cost quadratic in the fleet's size.
pub async fn push_fleet(
    kubeconfig: &Arc<Kubeconfig>,
    kubeconfig_path: &Path,
    members: Vec<MemberPush>,
    opts: &PushOptions,
    progress: Arc<dyn Fn(&MemberResult) + Send + Sync>,
) -> Vec<MemberResult> {
    let members = members
        .into_iter()
        .map(|push| {
            let target = MemberTarget {
                name: push.member.clone(),
                context: push.context.clone(),
            };
            (target, push)
        })
        .collect();
    let opts = opts.clone();
    let mut out = each_member(
        kubeconfig,
        kubeconfig_path,
        opts.parallel_members,
        members,
        move |client, _, push| {
            let (opts, progress) = (opts.clone(), Arc::clone(&progress));
            async move {
                let result = match client {
                    Ok(client) => push_member(client, push, &opts).await,
                    Err(e) => failed_member(&push, e),
                };
                progress(&result);
                result
            }
        },
    )
    .await;
    out.sort_by(|a, b| a.member.cmp(&b.member));
    out
}

/// A member's records by placement key, or why they cannot be read.
pub type MemberRecords = (String, Result<BTreeMap<String, Record>, String>);

/// Every member's records (what gitfleet applied there, by placement key), read at once; a
/// member that cannot be read gives its error.
pub async fn records_of(
    kubeconfig: &Arc<Kubeconfig>,
    kubeconfig_path: &Path,
    members: Vec<MemberTarget>,
    opts: &PushOptions,
) -> Vec<MemberRecords> {
    let members = members.into_iter().map(|t| (t, ())).collect();
    let opts = opts.clone();
    let mut out = each_member(
        kubeconfig,
        kubeconfig_path,
        opts.parallel_members,
        members,
        move |client, target, ()| {
            let opts = opts.clone();
            async move {
                let records = match client {
                    Ok(client) => super::member::records(client, &opts)
                        .await
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(e),
                };
                (target.name, records)
            }
        },
    )
    .await;
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}
