//! Watching what gitfleet put on members: one watch per member and kind it delivers, selected by
//! gitfleet's managed-by label, so that a deletion or a change on a member is seen within
//! seconds and the daemon re-applies (or, under IfNotDrifted and ReportDiff, reports) through
//! the rollout core. A status update is nothing to restore, but the status of an object an OCM
//! work's rules read ([`StatusReads`]) is read again when it changes, as OCM's work agent
//! reports it. The periodic resync (`--resync`) is the backstop for whatever a watch misses.
//! I/O only: what a change means for the rollout is [`crate::rollout::RolloutState::recheck`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};
use kube::api::{Api, DynamicObject, ListParams, WatchEvent, WatchParams};
use kube::config::Kubeconfig;
use kube::core::GroupVersionKind;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::AbortHandle;

use crate::members::MemberTarget;
use crate::push::decorate::{FIELD_MANAGER, MANAGED_BY, MANAGED_BY_LABEL, PLACEMENT_LABEL};
use crate::push::record::RECORD_LABEL;
use crate::push::ObjectRef;
use crate::rollout::state::RecheckCause;

/// After a watch cannot be set up or broke, the next try.
const RETRY: Duration = Duration::from_secs(2);
/// A watch request's server-side timeout; it is then resumed from the last version seen.
const WATCH_TIMEOUT_SECONDS: u32 = 290;
const _: () = assert!(
    (WATCH_TIMEOUT_SECONDS as u64) < crate::members::connect::WATCH_READ_TIMEOUT.as_secs(),
    "the server ends a watch before its client gives up on the silence"
);

/// Something on a member changed under gitfleet.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MemberChange {
    pub member: String,
    /// The placement label of the object; `None`: anything on the member may have changed (a
    /// watch was restarted and may have missed events).
    pub placement_label: Option<String>,
    /// For logs and status, e.g. `ConfigMap default/app-config deleted on the member`.
    pub what: String,
    /// Seen changed on the member (drift), maybe changed while the watch was down, or only a
    /// status that a work's rules read.
    pub cause: RecheckCause,
    pub deleted: bool,
    /// The object that changed (`None` for a restarted watch).
    pub object: Option<ObjectRef>,
}

/// The objects whose status an OCM work's rules read, by member and placement, as each
/// placement's last delivery to the member found them: a status update of one of them is
/// read again; any other object's is nothing gitfleet reports.
#[derive(Default)]
pub struct StatusReads(RwLock<HashMap<String, HashMap<String, HashSet<ObjectRef>>>>);

impl StatusReads {
    /// What `placement` (its record key) reads on `member` now: replaces what it read before.
    pub fn record(&self, member: &str, placement: &str, objects: HashSet<ObjectRef>) {
        let mut reads = self.0.write().unwrap();
        if objects.is_empty() {
            let Some(of_member) = reads.get_mut(member) else {
                return;
            };
            of_member.remove(placement);
            if of_member.is_empty() {
                reads.remove(member);
            }
            return;
        }
        reads
            .entry(member.to_string())
            .or_default()
            .insert(placement.to_string(), objects);
    }

    /// Whether any placement reads `object`'s status on `member`.
    pub fn covers(&self, member: &str, object: &ObjectRef) -> bool {
        self.0
            .read()
            .unwrap()
            .get(member)
            .is_some_and(|m| m.values().any(|objects| objects.contains(object)))
    }
}

/// `(apiVersion, kind)` of objects gitfleet delivers.
pub type Kind = (String, String);

/// The kinds of objects each member is given, by member.
pub type Delivered = BTreeMap<String, BTreeSet<Kind>>;

/// What gitfleet applied of one kind on a member, by object, with the label of the placement
/// whose record lists it: what a watch taking the member over from another replica checks.
pub type Expected = BTreeMap<ObjectRef, String>;

/// What the records on a member say gitfleet applied there, by kind.
pub fn expected_of<'a>(
    records: impl Iterator<Item = &'a crate::push::record::Record>,
) -> BTreeMap<Kind, Expected> {
    let mut expected: BTreeMap<Kind, Expected> = BTreeMap::new();
    for record in records {
        let label = crate::model::placement_key::label_value_of(&record.key);
        for entry in &record.entries {
            let o = &entry.object;
            expected
                .entry((o.api_version.clone(), o.kind.clone()))
                .or_default()
                .insert(o.clone(), label.clone());
        }
    }
    expected
}

/// A watch's first list, compared with what gitfleet applied ([`Watches::check`]): the
/// differences go to `answer` before the watch begins, from the version listed.
struct Check {
    expected: Expected,
    answer: tokio::sync::oneshot::Sender<Vec<MemberChange>>,
}

/// Adds the kinds `work` applies to each member's in `watched`; whether any is new.
pub fn add_delivered_kinds(work: &[crate::rollout::Work], watched: &mut Delivered) -> bool {
    let mut new = false;
    for w in work {
        if let crate::rollout::Action::Apply { manifests, .. } = &w.action {
            let kinds = watched.entry(w.cluster.clone()).or_default();
            for m in manifests.iter() {
                let api_version = m.value["apiVersion"].as_str().unwrap_or_default();
                let kind = m.value["kind"].as_str().unwrap_or_default();
                new |= kinds.insert((api_version.to_string(), kind.to_string()));
            }
        }
    }
    new
}

/// `watched` with each member's kubeconfig context (`contexts`: member to context), as
/// [`super::Deliverer::watch`] takes it; members without a context are left out.
pub fn with_contexts(
    watched: &Delivered,
    contexts: &BTreeMap<String, String>,
) -> BTreeMap<String, (String, BTreeSet<Kind>)> {
    watched
        .iter()
        .filter_map(|(m, kinds)| Some((m.clone(), (contexts.get(m)?.clone(), kinds.clone()))))
        .collect()
}

/// The watches running, by member, context and kind; each a task that reports into the
/// daemon's channel until the member or kind is no longer delivered.
#[derive(Default)]
pub struct Watches {
    running: Mutex<HashMap<(String, String, Kind), AbortHandle>>,
    /// What the watches report status updates of; kept by the deliveries.
    pub status_reads: Arc<StatusReads>,
}

impl Drop for Watches {
    fn drop(&mut self) {
        for h in self.running.lock().unwrap().values() {
            h.abort();
        }
    }
}

impl Watches {
    /// Stops the watches of the members `keep` refuses (members this replica no longer acts
    /// for): another replica watches them now.
    pub fn keep_members(&self, keep: impl Fn(&str) -> bool) {
        self.running.lock().unwrap().retain(|(member, _, _), task| {
            let kept = keep(member);
            if !kept {
                task.abort();
            }
            kept
        });
    }

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
                self.status_reads.clone(),
                None,
            ));
            running.insert(key, task.abort_handle());
        }
    }

    /// Watches each kind of `expected` on `target` from a first list compared with what
    /// gitfleet applied there: one receiver per kind, answered with what changed while no
    /// replica watched (objects changed by someone else, or gone). A watch of the kind already
    /// running is started again, so that every object of the kind is compared. A receiver
    /// whose sender is dropped: the kind could not be listed at once (the watch reports the
    /// member as anything that may have changed once it starts late).
    pub fn check(
        &self,
        kubeconfig: &Arc<Kubeconfig>,
        path: &std::path::Path,
        target: &MemberTarget,
        expected: BTreeMap<Kind, Expected>,
        changes: &UnboundedSender<MemberChange>,
    ) -> Vec<tokio::sync::oneshot::Receiver<Vec<MemberChange>>> {
        let mut running = self.running.lock().unwrap();
        let mut answers = Vec::with_capacity(expected.len());
        for (kind, expected) in expected {
            let key = (target.name.clone(), target.context.clone(), kind.clone());
            if let Some(before) = running.remove(&key) {
                before.abort();
            }
            let (answer, answered) = tokio::sync::oneshot::channel();
            let task = tokio::spawn(watch_kind(
                kubeconfig.clone(),
                path.to_path_buf(),
                target.clone(),
                kind,
                changes.clone(),
                self.status_reads.clone(),
                Some(Check { expected, answer }),
            ));
            running.insert(key, task.abort_handle());
            answers.push(answered);
        }
        answers
    }
}

/// Who wrote a created or changed object last, by its field managers: the newest entries, to
/// the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LastWrite {
    /// gitfleet's own apply: nothing a re-check would restore. Otherwise every push would come
    /// back through the watch as a change and be pushed again.
    Gitfleet,
    /// A status update (with, in the same second, gitfleet's apply at most): nothing to
    /// restore either, but what a work's rules read.
    Status,
    /// Anyone else (kubectl, another controller's spec change), newer than gitfleet's entry or
    /// as new, or nobody known: checked.
    Someone,
}

fn last_write(managed: &Option<Vec<ManagedFieldsEntry>>) -> LastWrite {
    let Some(entries) = managed.as_ref().filter(|e| !e.is_empty()) else {
        return LastWrite::Someone;
    };
    let newest = entries.iter().filter_map(|e| e.time.as_ref()).max();
    let last = || entries.iter().filter(|e| e.time.as_ref() == newest);
    let gitfleets = |e: &&ManagedFieldsEntry| e.manager.as_deref() == Some(FIELD_MANAGER);
    if last().all(|e| gitfleets(&e)) {
        LastWrite::Gitfleet
    } else if last().all(|e| gitfleets(&e) || e.subresource.as_deref() == Some("status")) {
        LastWrite::Status
    } else {
        LastWrite::Someone
    }
}

/// Writes whose field-manager entries carry no time, seen per object: the API server's scale
/// subresource writes its entries back without one (k8s.io/apimachinery, managedfields'
/// `ScaleHandler.ToParent`), so a `kubectl scale` is not the newest write by time. Such an
/// entry of anyone but gitfleet and the status subresource that is new or changed since the
/// object's last event, or the object's generation changed while it has one (a second scale
/// changes no entry), is a write to check. Only objects with such entries are remembered.
#[derive(Default)]
struct UntimedWrites(HashMap<(Option<String>, String), u64>);

impl UntimedWrites {
    /// Whether `managed` holds untimed writes not seen in the object's last event (remembered
    /// for the next; forgotten with the object).
    fn changed(&mut self, object: &ObjectRef, meta: &ObjectMeta, deleted: bool) -> bool {
        let key = (object.namespace.clone(), object.name.clone());
        let fingerprint = untimed_fingerprint(meta);
        let seen = match fingerprint {
            Some(f) if !deleted => self.0.insert(key, f),
            _ => self.0.remove(&key),
        };
        fingerprint.is_some_and(|f| seen != Some(f))
    }
}

/// A digest of the entries without a time of anyone but gitfleet and the status subresource,
/// with the generation, or `None` when there are none.
fn untimed_fingerprint(meta: &ObjectMeta) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut untimed = meta.managed_fields.iter().flatten().filter(|e| {
        e.time.is_none()
            && e.manager.as_deref() != Some(FIELD_MANAGER)
            && e.subresource.as_deref() != Some("status")
    });
    let first = untimed.next()?;
    let mut digest = std::collections::hash_map::DefaultHasher::new();
    meta.generation.hash(&mut digest);
    for e in std::iter::once(first).chain(untimed) {
        (&e.manager, &e.operation, &e.subresource, &e.api_version).hash(&mut digest);
        e.fields_v1
            .as_ref()
            .map(|f| f.0.to_string())
            .hash(&mut digest);
    }
    Some(digest.finish())
}

fn gvk_of((api_version, kind): &Kind) -> GroupVersionKind {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    GroupVersionKind::gvk(group, version, kind)
}

/// The object `obj` of `kind` names.
fn object_of(kind: &Kind, obj: &DynamicObject) -> ObjectRef {
    ObjectRef {
        api_version: kind.0.clone(),
        kind: kind.1.clone(),
        namespace: obj.metadata.namespace.clone().filter(|n| !n.is_empty()),
        name: obj.metadata.name.clone().unwrap_or_default(),
    }
}

/// How a change is told: `ConfigMap app/settings deleted on the member`.
fn told(object: &ObjectRef, what: &str) -> String {
    match &object.namespace {
        Some(ns) => format!("{} {ns}/{} {what} on the member", object.kind, object.name),
        None => format!("{} {} {what} on the member", object.kind, object.name),
    }
}

/// What a watch reports of `obj` as seen on `member` (`verb`: created, changed or deleted):
/// `None` for gitfleet's own records and writes, and for a status update nothing reads.
fn change_of(
    member: &str,
    kind: &Kind,
    obj: &DynamicObject,
    verb: &str,
    untimed: &mut UntimedWrites,
    status_reads: &StatusReads,
) -> Option<MemberChange> {
    let labels = obj.metadata.labels.as_ref();
    if labels.is_some_and(|l| l.contains_key(RECORD_LABEL)) {
        return None;
    }
    let object = object_of(kind, obj);
    let deleted = verb == "deleted";
    let last = if untimed.changed(&object, &obj.metadata, deleted) {
        LastWrite::Someone
    } else {
        last_write(&obj.metadata.managed_fields)
    };
    let (cause, what) = match (verb, last) {
        ("deleted", _) | (_, LastWrite::Someone) => (RecheckCause::ChangedOnTheMember, verb),
        (_, LastWrite::Status) if status_reads.covers(member, &object) => {
            (RecheckCause::StatusChanged, "status changed")
        }
        _ => return None,
    };
    Some(MemberChange {
        member: member.to_string(),
        placement_label: labels.and_then(|l| l.get(PLACEMENT_LABEL)).cloned(),
        what: told(&object, what),
        cause,
        deleted,
        object: Some(object),
    })
}

/// What changed of `expected` on `member` while no replica watched it, by a list of every
/// object of the kind gitfleet labels: each listed object a watch would have reported changed
/// (its last write someone else's), and each expected object not listed, as deleted. Objects
/// no record lists are not gitfleet's to check.
fn unwatched_changes(
    member: &str,
    kind: &Kind,
    listed: &[DynamicObject],
    expected: &Expected,
    untimed: &mut UntimedWrites,
    status_reads: &StatusReads,
) -> Vec<MemberChange> {
    let mut found = Vec::new();
    let mut seen = HashSet::new();
    for obj in listed {
        let object = object_of(kind, obj);
        if !expected.contains_key(&object) {
            continue;
        }
        found.extend(change_of(
            member,
            kind,
            obj,
            "changed",
            untimed,
            status_reads,
        ));
        seen.insert(object);
    }
    for (object, label) in expected {
        if !seen.contains(object) {
            found.push(MemberChange {
                member: member.to_string(),
                placement_label: Some(label.clone()),
                what: told(object, "deleted"),
                cause: RecheckCause::ChangedOnTheMember,
                deleted: true,
                object: Some(object.clone()),
            });
        }
    }
    found
}

/// Lists then watches one kind on one member, reporting every change to an object gitfleet
/// manages (its own records excepted) until the channel closes. A broken watch is listed again
/// and reported as "anything may have changed" for the member; so is a first watch that could
/// not start at once (a kind whose CRD the same push created is served only after it): what
/// the push applied may have changed before the watch began. With `check`, the first list
/// reads every object and answers what changed unwatched ([`unwatched_changes`]); a first
/// attempt that fails drops the answer.
async fn watch_kind(
    kubeconfig: Arc<Kubeconfig>,
    path: PathBuf,
    target: MemberTarget,
    kind: Kind,
    changes: UnboundedSender<MemberChange>,
    status_reads: Arc<StatusReads>,
    mut check: Option<Check>,
) {
    let gvk = gvk_of(&kind);
    let selector = format!("{MANAGED_BY_LABEL}={MANAGED_BY}");
    let mut listed_before = false;
    let mut attempts = 0u32;
    let mut untimed = UntimedWrites::default();
    loop {
        if changes.is_closed() {
            return;
        }
        attempts += 1;
        let checking = check.take();
        let api = match crate::members::connect_watching(&kubeconfig, &path, &target).await {
            Ok(client) => match kube::discovery::pinned_kind(&client, &gvk).await {
                Ok((ar, _)) => Api::<DynamicObject>::all_with(client, &ar),
                Err(e) => {
                    tracing::debug!(member = %target.name, kind = %kind.1, error = %e, "cannot resolve kind to watch");
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            },
            Err(e) => {
                tracing::debug!(member = %target.name, kind = %kind.1, error = %e, "cannot connect to watch");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        // Unless checking, only the list's resourceVersion is needed (where the watch
        // starts): one item, not every object gitfleet put there, parsed.
        let params = match &checking {
            Some(_) => ListParams::default().labels(&selector),
            None => ListParams::default().labels(&selector).limit(1),
        };
        let mut version = match api.list(&params).await {
            Ok(list) => {
                if let Some(Check { expected, answer }) = checking {
                    let found = unwatched_changes(
                        &target.name,
                        &kind,
                        &list.items,
                        &expected,
                        &mut untimed,
                        &status_reads,
                    );
                    let _ = answer.send(found);
                }
                list.metadata.resource_version.unwrap_or_default()
            }
            Err(e) => {
                tracing::debug!(member = %target.name, kind = %kind.1, error = %e, "cannot list to watch");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        if listed_before || attempts > 1 {
            // Events between the broken (or late) watch and this list are lost: look at
            // everything.
            let how = if listed_before {
                "restarted"
            } else {
                "started late"
            };
            let _ = changes.send(MemberChange {
                member: target.name.clone(),
                placement_label: None,
                what: format!("watch of {} {how}", kind.1),
                cause: RecheckCause::MayHaveChanged,
                deleted: false,
                object: None,
            });
        }
        listed_before = true;
        tracing::debug!(member = %target.name, kind = %kind.1, "watching");
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
                let seen = change_of(&target.name, &kind, &obj, verb, &mut untimed, &status_reads);
                if let Some(change) = seen {
                    if changes.send(change).is_err() {
                        return;
                    }
                }
            }
        }
        tokio::time::sleep(RETRY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(manager: &str, time: &str, subresource: Option<&str>) -> ManagedFieldsEntry {
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
        use LastWrite::*;
        let (t1, t2) = ("2026-11-26T10:00:01Z", "2026-11-26T10:00:02Z");
        let last = |entries: Vec<_>| last_write(&Some(entries));
        // Created or last applied by gitfleet; then a controller's status update, later or in
        // the same second.
        assert_eq!(last(vec![entry("gitfleet", t1, None)]), Gitfleet);
        assert_eq!(
            last(vec![
                entry("gitfleet", t1, None),
                entry("kube-controller-manager", t2, Some("status")),
            ]),
            Status
        );
        assert_eq!(
            last(vec![
                entry("gitfleet", t1, None),
                entry("kube-controller-manager", t1, Some("status")),
            ]),
            Status
        );
        // kubectl edited it after gitfleet's apply, or in the same second.
        for t in [t2, t1] {
            assert_eq!(
                last(vec![
                    entry("gitfleet", t1, None),
                    entry("kubectl-edit", t, None),
                ]),
                Someone
            );
        }
        // Another controller changed its spec after gitfleet, with its status.
        assert_eq!(
            last(vec![
                entry("gitfleet", t1, None),
                entry("hpa", t2, None),
                entry("hpa", t2, Some("status")),
            ]),
            Someone
        );
        // Nothing known of who wrote it.
        assert_eq!(last(vec![]), Someone);
        assert_eq!(last_write(&None), Someone);
    }

    #[test]
    fn a_scale_whose_entry_has_no_time_is_checked_once_and_again_when_the_generation_moves() {
        let t1 = "2026-11-26T10:00:01Z";
        let meta = |generation: i64, scaled: bool, status_at: &str| {
            let mut entries = vec![
                entry("gitfleet", t1, None),
                entry("kube-controller-manager", status_at, Some("status")),
            ];
            if scaled {
                let mut scale = entry("kubectl", t1, Some("scale"));
                scale.time = None;
                entries.push(scale);
            }
            ObjectMeta {
                generation: Some(generation),
                managed_fields: Some(entries),
                ..ObjectMeta::default()
            }
        };
        let web = ObjectRef {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: Some("app".into()),
            name: "web".into(),
        };
        let mut untimed = UntimedWrites::default();
        let (t2, t3) = ("2026-11-26T10:00:02Z", "2026-11-26T10:00:03Z");
        // By time alone, the scale's event is a status update (its entry has none).
        assert_eq!(
            last_write(&meta(2, true, t2).managed_fields),
            LastWrite::Status
        );
        assert!(!untimed.changed(&web, &meta(1, false, t2), false));
        assert!(untimed.changed(&web, &meta(2, true, t2), false), "scaled");
        assert!(
            !untimed.changed(&web, &meta(2, true, t3), false),
            "its status"
        );
        assert!(
            untimed.changed(&web, &meta(3, true, t3), false),
            "scaled again"
        );
        // Taken back (the entry gone): nothing remembered, nothing to check.
        assert!(!untimed.changed(&web, &meta(4, false, t3), false));
        assert!(untimed.0.is_empty());
        assert!(untimed.changed(&web, &meta(5, true, t3), false));
        assert!(!untimed.changed(&web, &meta(5, true, t3), true) && untimed.0.is_empty());
    }

    #[test]
    fn a_status_is_read_while_a_placements_last_delivery_read_it() {
        let object = |name: &str| ObjectRef {
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
            namespace: Some("default".into()),
            name: name.into(),
        };
        let reads = StatusReads::default();
        reads.record("m1", "mw.a", HashSet::from([object("a")]));
        reads.record("m1", "mw.b", HashSet::from([object("a"), object("b")]));
        assert!(reads.covers("m1", &object("a")) && reads.covers("m1", &object("b")));
        assert!(!reads.covers("m2", &object("a")) && !reads.covers("m1", &object("c")));
        // A later delivery without rules for `b` (or a removal) stops reading it; `a` is still
        // read for the other placement.
        reads.record("m1", "mw.b", HashSet::new());
        assert!(reads.covers("m1", &object("a")) && !reads.covers("m1", &object("b")));
        reads.record("m1", "mw.a", HashSet::new());
        assert!(!reads.covers("m1", &object("a")));
        assert!(reads.0.read().unwrap().is_empty());
    }

    #[test]
    fn a_list_taken_over_reports_what_changed_unwatched_and_what_is_gone() {
        let kind: Kind = ("v1".into(), "ConfigMap".into());
        let (t1, t2) = ("2026-11-26T10:00:01Z", "2026-11-26T10:00:02Z");
        let listed = |name: &str, entries: Vec<ManagedFieldsEntry>| {
            let mut obj = DynamicObject::new(
                name,
                &kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
            )
            .within("app");
            obj.metadata.labels = Some(BTreeMap::from([(
                PLACEMENT_LABEL.to_string(),
                "crp.web".to_string(),
            )]));
            obj.metadata.managed_fields = Some(entries);
            obj
        };
        let object = |name: &str| ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("app".into()),
            name: name.into(),
        };
        let expected: Expected = ["kept", "edited", "gone", "status"]
            .into_iter()
            .map(|n| (object(n), "crp.web".to_string()))
            .collect();
        let items = vec![
            listed("kept", vec![entry("gitfleet", t1, None)]),
            listed(
                "edited",
                vec![entry("gitfleet", t1, None), entry("kubectl-edit", t2, None)],
            ),
            listed(
                "status",
                vec![
                    entry("gitfleet", t1, None),
                    entry("kcm", t2, Some("status")),
                ],
            ),
            // Labelled by gitfleet but in no record: not this check's to judge.
            listed("stray", vec![entry("kubectl-edit", t2, None)]),
        ];
        let reads = StatusReads::default();
        reads.record("m1", "crp.web", HashSet::from([object("status")]));
        let found = unwatched_changes(
            "m1",
            &kind,
            &items,
            &expected,
            &mut UntimedWrites::default(),
            &reads,
        );
        let told: Vec<_> = found
            .iter()
            .map(|c| {
                (
                    c.what.as_str(),
                    c.cause,
                    c.deleted,
                    c.placement_label.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            told,
            [
                (
                    "ConfigMap app/edited changed on the member",
                    RecheckCause::ChangedOnTheMember,
                    false,
                    Some("crp.web")
                ),
                (
                    "ConfigMap app/status status changed on the member",
                    RecheckCause::StatusChanged,
                    false,
                    Some("crp.web")
                ),
                (
                    "ConfigMap app/gone deleted on the member",
                    RecheckCause::ChangedOnTheMember,
                    true,
                    Some("crp.web")
                ),
            ]
        );
        assert!(found.iter().all(|c| c.member == "m1"));
        // Nothing expected: nothing to report, whatever is listed.
        let none = unwatched_changes(
            "m1",
            &kind,
            &items,
            &Expected::new(),
            &mut UntimedWrites::default(),
            &reads,
        );
        assert!(none.is_empty());
    }

    #[test]
    fn kinds_of_the_core_group_have_no_group() {
        let g = gvk_of(&("v1".into(), "ConfigMap".into()));
        assert_eq!((g.group.as_str(), g.version.as_str()), ("", "v1"));
        let g = gvk_of(&("apps/v1".into(), "Deployment".into()));
        assert_eq!((g.group.as_str(), g.version.as_str()), ("apps", "v1"));
    }
}
