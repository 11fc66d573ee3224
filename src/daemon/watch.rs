//! Watching what gitfleet put on members: one watch per member and kind it delivers, selected by
//! gitfleet's managed-by label, so that a deletion or a change on a member is seen within
//! seconds and the daemon re-applies (or, under IfNotDrifted and ReportDiff, reports) through
//! the rollout core. The periodic resync (`--resync`) is the backstop for whatever a watch
//! misses. I/O only: what a change means for the rollout is [`crate::rollout::RolloutState::recheck`].

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, WatchEvent, WatchParams};
use kube::config::Kubeconfig;
use kube::core::GroupVersionKind;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::AbortHandle;

use crate::members::MemberTarget;
use crate::push::decorate::{FIELD_MANAGER, MANAGED_BY, MANAGED_BY_LABEL, PLACEMENT_LABEL};
use crate::push::record::RECORD_LABEL;

/// After a watch cannot be set up or broke, the next try.
const RETRY: Duration = Duration::from_secs(2);
/// A watch request's server-side timeout; it is then resumed from the last version seen.
const WATCH_TIMEOUT_SECONDS: u32 = 290;

/// Something on a member changed under gitfleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberChange {
    pub member: String,
    /// The placement label of the object; `None`: anything on the member may have changed (a
    /// watch was restarted and may have missed events).
    pub placement_label: Option<String>,
    /// For logs and status, e.g. `ConfigMap default/app-config deleted on the member`.
    pub what: String,
    /// Seen changed on the member (drift), or maybe changed while the watch was down.
    pub cause: crate::rollout::state::RecheckCause,
    pub deleted: bool,
    /// The object that changed (`None` for a restarted watch).
    pub object: Option<crate::push::ObjectRef>,
}

/// `(apiVersion, kind)` of objects gitfleet delivers.
pub type Kind = (String, String);

/// The watches running, by member, context and kind; each a task that reports into the
/// daemon's channel until the member or kind is no longer delivered.
#[derive(Default)]
pub struct Watches {
    running: Mutex<HashMap<(String, String, Kind), AbortHandle>>,
}

impl Drop for Watches {
    fn drop(&mut self) {
        for h in self.running.lock().unwrap().values() {
            h.abort();
        }
    }
}

impl Watches {
    /// Makes sure `kinds` are watched on `target` (started when new; the others of that member
    /// keep running: a kind delivered once may be delivered again, and watching costs little).
    pub fn ensure(
        &self,
        kubeconfig: &Arc<Kubeconfig>,
        path: &std::path::Path,
        target: &MemberTarget,
        kinds: &BTreeSet<Kind>,
        changes: &UnboundedSender<MemberChange>,
    ) {
        let mut running = self.running.lock().unwrap();
        for kind in kinds {
            let key = (target.name.clone(), target.context.clone(), kind.clone());
            if running.get(&key).is_some_and(|h| !h.is_finished()) {
                continue;
            }
            let task = tokio::spawn(watch_kind(
                kubeconfig.clone(),
                path.to_path_buf(),
                target.clone(),
                kind.clone(),
                changes.clone(),
            ));
            running.insert(key, task.abort_handle());
        }
    }
}

/// Whether a created or changed object's last write was gitfleet's own apply or a status
/// update (by its field managers: the newest entries, to the second, are all gitfleet's or
/// all through the status subresource): nothing a re-check would restore. Otherwise every push
/// would come back through the watch as a change and be pushed again, and so would every status
/// update of a controller. Anyone else's write (kubectl, another controller's spec change)
/// is newer than gitfleet's entry, or as new, and is checked.
fn nothing_to_check(
    managed: &Option<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry>>,
) -> bool {
    let Some(entries) = managed.as_ref().filter(|e| !e.is_empty()) else {
        return false;
    };
    let newest = entries.iter().filter_map(|e| e.time.as_ref()).max();
    entries
        .iter()
        .filter(|e| e.time.as_ref() == newest)
        .all(|e| {
            e.manager.as_deref() == Some(FIELD_MANAGER)
                || e.subresource.as_deref() == Some("status")
        })
}

fn gvk_of((api_version, kind): &Kind) -> GroupVersionKind {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    GroupVersionKind::gvk(group, version, kind)
}

/// Lists then watches one kind on one member, reporting every change to an object gitfleet
/// manages (its own records excepted) until the channel closes. A broken watch is listed again
/// and reported as "anything may have changed" for the member.
async fn watch_kind(
    kubeconfig: Arc<Kubeconfig>,
    path: PathBuf,
    target: MemberTarget,
    kind: Kind,
    changes: UnboundedSender<MemberChange>,
) {
    let gvk = gvk_of(&kind);
    let selector = format!("{MANAGED_BY_LABEL}={MANAGED_BY}");
    let mut listed_before = false;
    loop {
        if changes.is_closed() {
            return;
        }
        let api = match crate::members::connect(&kubeconfig, &path, &target).await {
            Ok(client) => match kube::discovery::pinned_kind(&client, &gvk).await {
                Ok((ar, _)) => Api::<DynamicObject>::all_with(client, &ar),
                Err(e) => {
                    tracing::debug!(member = %target.name, kind = %kind.1, error = %e, "cannot resolve kind to watch");
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            },
            Err(e) => {
                tracing::debug!(member = %target.name, error = %e, "cannot connect to watch");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        // Only the list's resourceVersion is needed (where the watch starts): one item, not
        // every object gitfleet put there, parsed.
        let one = ListParams::default().labels(&selector).limit(1);
        let mut version = match api.list(&one).await {
            Ok(list) => list.metadata.resource_version.unwrap_or_default(),
            Err(e) => {
                tracing::debug!(member = %target.name, kind = %kind.1, error = %e, "cannot list to watch");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        if listed_before {
            // Events between the broken watch and this list are lost: look at everything.
            let _ = changes.send(MemberChange {
                member: target.name.clone(),
                placement_label: None,
                what: format!("watch of {} restarted", kind.1),
                cause: crate::rollout::state::RecheckCause::MayHaveChanged,
                deleted: false,
                object: None,
            });
        }
        listed_before = true;
        // Watch from `version`, resuming after each server-side timeout, until it breaks.
        'watching: loop {
            let params = WatchParams::default()
                .labels(&selector)
                .timeout(WATCH_TIMEOUT_SECONDS);
            let stream = match api.watch(&params, &version).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(member = %target.name, kind = %kind.1, error = %e, "watch failed");
                    break 'watching;
                }
            };
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                let (obj, verb) = match event {
                    Ok(WatchEvent::Added(o)) => (o, "created"),
                    Ok(WatchEvent::Modified(o)) => (o, "changed"),
                    Ok(WatchEvent::Deleted(o)) => (o, "deleted"),
                    Ok(WatchEvent::Bookmark(b)) => {
                        version = b.metadata.resource_version;
                        continue;
                    }
                    // 410 Gone and the like: list again.
                    Ok(WatchEvent::Error(_)) | Err(_) => break 'watching,
                };
                if let Some(v) = &obj.metadata.resource_version {
                    version = v.clone();
                }
                let labels = obj.metadata.labels.clone().unwrap_or_default();
                if labels.contains_key(RECORD_LABEL) {
                    continue;
                }
                if verb != "deleted" && nothing_to_check(&obj.metadata.managed_fields) {
                    continue;
                }
                let name = match &obj.metadata.namespace {
                    Some(ns) => format!("{ns}/{}", obj.metadata.name.as_deref().unwrap_or("")),
                    None => obj.metadata.name.clone().unwrap_or_default(),
                };
                let change = MemberChange {
                    member: target.name.clone(),
                    placement_label: labels.get(PLACEMENT_LABEL).cloned(),
                    what: format!("{} {name} {verb} on the member", kind.1),
                    cause: crate::rollout::state::RecheckCause::ChangedOnTheMember,
                    deleted: verb == "deleted",
                    object: Some(crate::push::ObjectRef {
                        api_version: kind.0.clone(),
                        kind: kind.1.clone(),
                        namespace: obj.metadata.namespace.clone().filter(|n| !n.is_empty()),
                        name: obj.metadata.name.clone().unwrap_or_default(),
                    }),
                };
                if changes.send(change).is_err() {
                    return;
                }
            }
        }
        tokio::time::sleep(RETRY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(
        manager: &str,
        time: &str,
        subresource: Option<&str>,
    ) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry {
        serde_json::from_value(serde_json::json!({
            "manager": manager,
            "operation": "Update",
            "time": time,
            "subresource": subresource,
        }))
        .unwrap()
    }

    #[test]
    fn gitfleets_own_writes_and_status_updates_need_no_check_anyone_elses_do() {
        let (t1, t2) = ("2026-11-26T10:00:01Z", "2026-11-26T10:00:02Z");
        let check = |entries: Vec<_>| !nothing_to_check(&Some(entries));
        // Created or last applied by gitfleet; then a controller's status update.
        assert!(!check(vec![entry("gitfleet", t1, None)]));
        assert!(!check(vec![
            entry("gitfleet", t1, None),
            entry("kube-controller-manager", t2, Some("status")),
        ]));
        // kubectl edited it after gitfleet's apply, or in the same second.
        assert!(check(vec![
            entry("gitfleet", t1, None),
            entry("kubectl-edit", t2, None),
        ]));
        assert!(check(vec![
            entry("gitfleet", t1, None),
            entry("kubectl-edit", t1, None),
        ]));
        // Another controller changed its spec after gitfleet.
        assert!(check(vec![
            entry("gitfleet", t1, None),
            entry("hpa", t2, None),
        ]));
        // Nothing known of who wrote it.
        assert!(check(vec![]));
        assert!(!nothing_to_check(&None) && check(vec![]));
    }

    #[test]
    fn kinds_of_the_core_group_have_no_group() {
        let g = gvk_of(&("v1".into(), "ConfigMap".into()));
        assert_eq!((g.group.as_str(), g.version.as_str()), ("", "v1"));
        let g = gvk_of(&("apps/v1".into(), "Deployment".into()));
        assert_eq!((g.group.as_str(), g.version.as_str()), ("apps", "v1"));
    }
}
