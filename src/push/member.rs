//! Pushing to one member: every request retried per [`crate::members::retry`] within the member's
//! budget and bounded by its request limit; kinds resolved by discovery, kept with the member's
//! connection for the pushes of the next minute ([`crate::members::Kinds`]; only found kinds
//! are kept, so a CRD applied in an earlier wave makes its custom resources resolvable in a
//! later one).
//!
//! A real API server serves a new CRD's kind only once the CRD is Established, a moment after
//! the apply returns; so the kinds of CRDs applied in this run are awaited (discovery asked again
//! on the retry schedule, within the budget) before their custom resources are called unserved.
//! Likewise a pruned object counts as pruned only once it is gone: a real server accepts a
//! Namespace's DELETE at once and removes it later, and finalizers hold any object.
//!
//! Apply strategies as KubeFleet's work applier has them:
//! - `ClientSideApply` (the default) is a server-side apply of the manifest by field manager
//!   `gitfleet` **with force**. KubeFleet sends a three-way merge patch (last-applied
//!   configuration, manifest, live object); for the user the two agree: a field the manifest
//!   sets is put back whoever changed it (`kubectl scale` writes `.spec.replicas` through the
//!   scale subresource as manager `kubectl`; force takes it back, where a patch would overwrite
//!   it); a field the manifest does not set is left alone (the patch does not name it, the
//!   apply does not own it); a field the manifest stopped setting is removed (the patch nulls
//!   what the last-applied annotation has, the apply drops what gitfleet's own managed-fields
//!   entry held and no other manager also holds). Lists merge by their keys (containers by
//!   name), as the strategic merge patch KubeFleet uses for built-in kinds does; lists of custom
//!   resources are replaced whole, as its JSON merge patch does. An object an older gitfleet
//!   applied client-side as a merge patch loses, at its next write, what that patch's
//!   annotation lists and the manifest no longer sets ([`legacy_removals`]).
//! - `ServerSideApply` applies without force unless `serverSideApplyConfig.force`; a field
//!   another manager holds is a conflict, the object failed with the API server's words (the
//!   manager, the field) and the way out ([`Error::NotForced`]). Conflicts with gitfleet's own
//!   earlier writes only are taken over, as KubeFleet does.
//! - `whenToApply: IfNotDrifted` compares before writing while the manifest is unchanged: drift
//!   is reported (`FoundDrifts`, the fields with the member's and git's values) and left; the
//!   write carries the resourceVersion it compared, so a change made in between is not
//!   overwritten.
//! - `ReportDiff` writes nothing ([`report_diff`]); `whenToTakeOver` and `comparisonOption` are
//!   applied before any write.

use super::availability::{availability, Availability};
use super::compare::{
    comparable, diff, holds_partial, obscure_secret, removals, three_way_patch, Comparison,
};
use super::decorate::{
    annotation, decorate, placement_label_of, spec_hash, Stamp, COMMIT_ANNOTATION, FIELD_MANAGER,
    LAST_APPLIED_ANNOTATION, MANAGED_BY, MANAGED_BY_LABEL, PLACEMENT_LABEL, SNAPSHOT_ANNOTATION,
    SPEC_HASH_ANNOTATION,
};
use super::error::Error;
use super::record::{self, Entry, Record};
use super::{
    MemberPush, MemberResult, ObjectRef, ObjectResult, Outcome, PlacementPush, PlacementResult,
    PruneUnlisted, PushOptions,
};
use crate::fast_hash::{HashMap, HashSet};
use crate::members::retry::{delay, with_retry, Budget};
use crate::members::{Connection, Kinds};
use crate::model::placement::{ApplyStrategyType, ComparisonOption, WhenToApply, WhenToTakeOver};
use crate::model::placement_key::label_value_of;
use crate::model::work::{ResourceOptions, UpdateMode, WorkConfig};
use crate::model::PlacementKind;
use crate::rollout::ApplyStrategy;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind, ObjectList};
use kube::discovery::Scope;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::sync::Semaphore;

use super::writer::{claim, pid_alive, Claim, Identity, Mark};

/// No intent: a mark taken for objects the record already lists.
static NOTHING: BTreeSet<ObjectRef> = BTreeSet::new();

/// Objects per page of a LIST.
const LIST_PAGE: u32 = 500;

/// Added to the retry budget for a mark's lifetime (see [`Member::mark_ttl`]).
const MARK_MARGIN: Duration = Duration::from_secs(300);

/// One member's connection, budget, request limit and discovered kinds (shared with the
/// member's later pushes, see [`Kinds`]) for this run.
pub struct Member {
    client: kube::Client,
    budget: Budget,
    requests: Semaphore,
    kinds: Arc<Kinds>,
    /// (apiVersion, kind) defined by CRDs applied in this run: worth waiting for in discovery.
    expected_kinds: Mutex<HashSet<(String, String)>>,
    /// Marks the records of the placements this push writes.
    writer: Identity,
    commit: String,
    /// How long a mark holds: longer than any push of one member can take (its retry budget
    /// bounds it), so only a writer that is gone loses its mark.
    mark_ttl: Duration,
    raw_json: crate::feedback::RawJson,
}

fn to_value(o: DynamicObject) -> Value {
    serde_json::to_value(o).expect("objects serialise")
}

impl Member {
    pub fn new(connection: Connection, opts: &PushOptions) -> Member {
        Member {
            client: connection.client,
            budget: Budget::starting_now(opts.retry_budget),
            requests: Semaphore::new(opts.parallel_requests.max(1)),
            kinds: connection.kinds,
            expected_kinds: Mutex::new(HashSet::default()),
            writer: opts.writer.clone(),
            commit: opts.commit.clone(),
            mark_ttl: opts.retry_budget + MARK_MARGIN,
            raw_json: opts.feedback_raw_json,
        }
    }

    /// One request with retries; each attempt takes a request slot.
    async fn call<T, F, Fut>(&self, op: F) -> Result<T, Error>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
    {
        with_retry(self.budget, || async {
            let _slot = self.requests.acquire().await.expect("never closed");
            op().await.map_err(Error::from)
        })
        .await
        .map_err(|(e, attempts)| {
            if attempts > 1 {
                Error::Retried {
                    source: Box::new(e),
                    attempts,
                }
            } else {
                e
            }
        })
    }

    /// An object's kind as the member serves it (and whether it is namespaced); `Ok(None)`
    /// when the member does not serve the kind.
    async fn resource(&self, obj: &ObjectRef) -> Result<Option<(ApiResource, bool)>, Error> {
        let cache_key = (obj.api_version.clone(), obj.kind.clone());
        let (ar, namespaced) = match self.kinds.get(&cache_key) {
            Some(found) => found,
            None => {
                let (group, version) = obj
                    .api_version
                    .rsplit_once('/')
                    .unwrap_or(("", &obj.api_version));
                let gvk = GroupVersionKind::gvk(group, version, &obj.kind);
                let mut attempt = 0u32;
                loop {
                    let found = with_retry(self.budget, || async {
                        let _slot = self.requests.acquire().await.expect("never closed");
                        kube::discovery::pinned_kind(&self.client, &gvk)
                            .await
                            .map_err(Error::from)
                    })
                    .await;
                    match found {
                        Ok((ar, caps)) => {
                            let namespaced = caps.scope == Scope::Namespaced;
                            self.kinds.put(cache_key, ar.clone(), namespaced);
                            break (ar, namespaced);
                        }
                        Err((e, _)) if e.is_unknown_kind() => {}
                        Err((e, _)) => return Err(e),
                    }
                    // Not served (yet): a CRD this run applied may still be getting established.
                    let expected = self
                        .expected_kinds
                        .lock()
                        .expect("not poisoned")
                        .contains(&cache_key);
                    let wait = delay(attempt, None);
                    if !expected || !self.budget.allows(tokio::time::Instant::now(), wait) {
                        return Ok(None);
                    }
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
            }
        };
        Ok(Some((ar, namespaced)))
    }

    /// The API of an object's kind, in its namespace; `Ok(None)` when the member does not serve
    /// the kind.
    async fn api(&self, obj: &ObjectRef) -> Result<Option<Api<DynamicObject>>, Error> {
        Ok(self.resource(obj).await?.map(|(ar, namespaced)| {
            if namespaced {
                let ns = obj.namespace.as_deref().unwrap_or("default");
                Api::namespaced_with(self.client.clone(), ns, &ar)
            } else {
                Api::all_with(self.client.clone(), &ar)
            }
        }))
    }

    /// Kinds that CRDs applied in this run define, to be awaited in discovery.
    fn expect_kinds(&self, kinds: Vec<(String, String)>) {
        self.expected_kinds
            .lock()
            .expect("not poisoned")
            .extend(kinds);
    }

    /// Waits, on the retry schedule and within the budget, until a deleted object is gone: a
    /// real API server accepts the DELETE of a Namespace at once and empties and removes it
    /// afterwards (the namespace controller), and finalizers hold other objects the same way.
    /// An object of the same name with another uid (made anew) counts as gone. When the budget
    /// ends first, the deletion is reported in progress (and the record keeps the object, so the
    /// next run looks again).
    async fn await_gone(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), Error> {
        let mut attempt = 0u32;
        loop {
            let still = match self.get(api, name).await? {
                None => return Ok(()),
                Some(live) => live,
            };
            if uid.is_some() && super::metadata_str(&still, "uid") != uid {
                return Ok(());
            }
            let wait = delay(attempt, None);
            if !self.budget.allows(tokio::time::Instant::now(), wait) {
                let finalizers = super::metadata_field(&still, "finalizers")
                    .or_else(|| still.pointer("/spec/finalizers"))
                    .map(Value::to_string)
                    .unwrap_or_else(|| "[]".into());
                return Err(Error::DeletionInProgress { finalizers });
            }
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    async fn served_api(&self, obj: &ObjectRef) -> Result<Api<DynamicObject>, Error> {
        self.api(obj).await?.ok_or_else(|| Error::NotServed {
            api_version: obj.api_version.clone(),
            kind: obj.kind.clone(),
        })
    }

    async fn get(&self, api: &Api<DynamicObject>, name: &str) -> Result<Option<Value>, Error> {
        Ok(self.call(|| api.get_opt(name)).await?.map(to_value))
    }

    /// `api.list(params)` with each item as the member sent it, but for its managed fields
    /// ([`super::listed`]). Parsing items as `DynamicObject` (typed metadata, managed fields
    /// included) and serialising them back into values would cost a fleet-wide confirmation (a
    /// restart's, a resync's) most of its CPU.
    async fn list_values(
        &self,
        api: &Api<DynamicObject>,
        params: &ListParams,
    ) -> Result<ObjectList<Value>, Error> {
        self.call(|| async {
            let mut req = kube::core::Request::new(api.resource_url())
                .list(params)
                .map_err(kube::Error::BuildRequest)?;
            req.extensions_mut().insert("list");
            let list = self
                .client
                .request::<ObjectList<super::listed::Listed>>(req)
                .await?;
            Ok(ObjectList {
                types: list.types,
                metadata: list.metadata,
                items: list.items.into_iter().map(|l| l.0).collect(),
            })
        })
        .await
    }

    /// Every object of `api` that carries gitfleet's placement label, page by page, but for
    /// gitfleet's own records (ConfigMaps that carry the label too, read on their own by
    /// [`Member::records_of`]: listing them here parsed every record of a member twice).
    async fn list_labelled(&self, api: &Api<DynamicObject>) -> Result<Vec<Value>, Error> {
        let mut params = ListParams::default()
            .labels(&format!("{PLACEMENT_LABEL},!{}", record::RECORD_LABEL))
            .limit(LIST_PAGE);
        let mut items = Vec::new();
        loop {
            let page = self.list_values(api, &params).await?;
            items.extend(page.items);
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(items),
            }
        }
    }

    async fn apply(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        obj: &Value,
        force: bool,
        dry_run: bool,
    ) -> Result<Value, Error> {
        self.apply_as(FIELD_MANAGER, api, name, obj, force, dry_run)
            .await
    }

    /// A server-side apply by `manager` (an OCM work's `serverSideApply.fieldManager`).
    async fn apply_as(
        &self,
        manager: &str,
        api: &Api<DynamicObject>,
        name: &str,
        obj: &Value,
        force: bool,
        dry_run: bool,
    ) -> Result<Value, Error> {
        let mut pp = PatchParams::apply(manager);
        pp.force = force;
        pp.dry_run = dry_run;
        let patch = Patch::Apply(obj);
        self.call(|| api.patch(name, &pp, &patch))
            .await
            .map(to_value)
    }

    async fn merge_patch(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        patch: &Value,
    ) -> Result<Value, Error> {
        let pp = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        let patch = Patch::Merge(patch);
        self.call(|| api.patch(name, &pp, &patch))
            .await
            .map(to_value)
    }

    /// The resource (plural) of an object's kind, once [`Member::api`] has resolved it.
    fn resource_name(&self, obj: &ObjectRef) -> Option<String> {
        self.kinds
            .plural(&(obj.api_version.clone(), obj.kind.clone()))
    }

    fn records_api(&self) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.client.clone(),
            record::NAMESPACE,
            &ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
        )
    }

    /// Creates `gitfleet-system` if missing (only when a record is written: ReportDiff writes
    /// nothing).
    async fn ensure_system_namespace(&self) -> Result<(), Error> {
        let api: Api<DynamicObject> = Api::all_with(
            self.client.clone(),
            &ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
        );
        if self.get(&api, record::NAMESPACE).await?.is_some() {
            return Ok(());
        }
        let ns = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": record::NAMESPACE, "labels": {MANAGED_BY_LABEL: MANAGED_BY}}});
        self.apply(&api, record::NAMESPACE, &ns, false, false)
            .await
            .map(drop)
    }

    /// Every record on the member, by placement key.
    async fn records(&self) -> Result<BTreeMap<String, Record>, Error> {
        self.records_of(None).await
    }

    /// The records of the placements `keys` (every record: `None`), in one list request.
    /// Reading and parsing every record of a member to push one placement would be a large
    /// share of the daemon's work for a one-placement commit.
    async fn records_of(
        &self,
        keys: Option<&BTreeSet<String>>,
    ) -> Result<BTreeMap<String, Record>, Error> {
        let mut selector = format!("{}=true", record::RECORD_LABEL);
        // A long selector would make a long URL: past that many, every record is read.
        let keys = keys.filter(|k| k.len() <= 64);
        if let Some(keys) = keys {
            let values: BTreeSet<String> = keys.iter().map(|k| label_value_of(k)).collect();
            let values: Vec<String> = values.into_iter().collect();
            selector.push_str(&format!(",{PLACEMENT_LABEL} in ({})", values.join(",")));
        }
        let api = self.records_api();
        let list = self
            .list_values(&api, &ListParams::default().labels(&selector))
            .await?;
        let mut out = BTreeMap::new();
        for cm in list.items {
            let r = record::parse(&cm)?;
            // A long key's label value is shortened with a hash: the key itself decides.
            if keys.is_none_or(|k| k.contains(&r.key)) {
                out.insert(r.key.clone(), r);
            }
        }
        Ok(out)
    }

    /// One record, fresh from the member (`None`: there is none).
    async fn read_record(&self, key: &str) -> Result<Option<Record>, Error> {
        match self.get(&self.records_api(), &record::name(key)).await? {
            Some(cm) => Ok(Some(record::parse(&cm)?)),
            None => Ok(None),
        }
    }

    /// Writes a record: a create when it carries no resourceVersion (409 if someone else
    /// created it meanwhile), else a replace with that resourceVersion as precondition (409 if
    /// it changed). Never server-side apply: apply is an upsert, and fields of another
    /// operation would survive it. Returns the record as written, with its new resourceVersion.
    async fn put_record(&self, r: &Record) -> Result<Record, Error> {
        let api = self.records_api();
        let obj: DynamicObject =
            serde_json::from_value(record::config_map(r)).map_err(Error::NotAnObject)?;
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        let name = record::name(&r.key);
        let written = match &r.resource_version {
            Some(_) => self.call(|| api.replace(&name, &pp, &obj)).await,
            None => match self.call(|| api.create(&pp, &obj)).await {
                // The first record on this member: its namespace comes first.
                Err(e) if e.is_not_found() => {
                    self.ensure_system_namespace().await?;
                    self.call(|| api.create(&pp, &obj)).await
                }
                r => r,
            },
        }?;
        Ok(Record {
            resource_version: written.metadata.resource_version.clone(),
            ..r.clone()
        })
    }

    /// Marks the placement's record as being written by this push, before anything of the
    /// placement is written (see [`super::writer`]); `read` is the record as the push read it
    /// at its start, and the mark is written with its resourceVersion as precondition. The
    /// marked record also lists `intent`, the objects about to be delivered, so an interrupted
    /// push still knows what it may have created. A record changed since it was read (by a live
    /// writer, or one that came and went) is not marked: what the push decided from it is stale,
    /// and nothing of the placement is written.
    async fn mark_record(
        &self,
        key: &str,
        read: Option<&Record>,
        intent: &BTreeSet<ObjectRef>,
        abandon: bool,
    ) -> Result<Record, Error> {
        let refused = |found: Option<&Record>| {
            let mark = found.and_then(|r| r.mark.as_ref());
            match claim(mark, &self.writer, SystemTime::now(), pid_alive) {
                Claim::Held(mark) => held(mark),
                Claim::Free => Error::Changed,
            }
        };
        if let Claim::Held(_) = claim(
            read.and_then(|r| r.mark.as_ref()),
            &self.writer,
            SystemTime::now(),
            pid_alive,
        ) {
            return Err(refused(read));
        }
        let mut next = read.cloned().unwrap_or_else(|| Record {
            key: key.to_string(),
            ..Record::default()
        });
        let known: BTreeSet<ObjectRef> = next.entries.iter().map(|e| e.object.clone()).collect();
        next.entries.extend(
            intent
                .iter()
                .filter(|o| !known.contains(*o))
                .map(|o| Entry {
                    object: o.clone(),
                    created: false,
                    orphan: false,
                }),
        );
        next.abandon = abandon;
        next.mark = Some(Mark::new(
            &self.writer,
            &self.commit,
            SystemTime::now(),
            self.mark_ttl,
        ));
        match self.put_record(&next).await {
            Ok(marked) => Ok(marked),
            // Changed, or created, by someone else since it was read.
            Err(e) if e.is_conflict() => Err(refused(self.read_record(key).await?.as_ref())),
            Err(e) => Err(e),
        }
    }

    /// The last write of a marked record: its entries as the push left them, the mark cleared;
    /// deleted instead when nothing is left and nothing is kept.
    async fn release_record(&self, marked: &Record, entries: BTreeSet<Entry>) -> Result<(), Error> {
        let done = Record {
            entries,
            mark: None,
            ..marked.clone()
        };
        let result = if done.entries.is_empty() {
            self.delete_record(&done).await
        } else {
            self.put_record(&done).await.map(drop)
        };
        result.map_err(|e| {
            if e.is_conflict() {
                Error::MarkLost {
                    source: Box::new(e),
                }
            } else {
                e
            }
        })
    }

    async fn delete_record(&self, r: &Record) -> Result<(), Error> {
        let api = self.records_api();
        let name = record::name(&r.key);
        let mut dp = DeleteParams::background();
        if let Some(rv) = &r.resource_version {
            dp = dp.preconditions(kube::api::Preconditions {
                resource_version: Some(rv.clone()),
                uid: None,
            });
        }
        match self.call(|| api.delete(&name, &dp)).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn held(mark: Mark) -> Error {
    let until = mark.until_text();
    Error::Held {
        holder: mark.holder,
        commit: if mark.commit.is_empty() {
            "unknown".into()
        } else {
            mark.commit
        },
        until,
    }
}

/// The member's records, by placement key (what `gitfleet apply`'s deletion guard counts).
pub async fn records(
    connection: Connection,
    opts: &PushOptions,
) -> Result<BTreeMap<String, Record>, Error> {
    Member::new(connection, opts).records().await
}

/// Pushes everything `target` should receive through `connection`.
pub async fn push_member(
    connection: Connection,
    target: MemberPush,
    opts: &PushOptions,
) -> MemberResult {
    let m = Arc::new(Member::new(connection, opts));
    let fail_all = |error: String| failed_member(&target, error);
    let listed: BTreeSet<String> = target
        .placements
        .iter()
        .map(|p| p.placement.record_key())
        .collect();
    // Only the records this push may touch: of the placements it pushes, and of those it may
    // prune when it prunes only some.
    let wanted: Option<BTreeSet<String>> = match &target.prune_unlisted {
        PruneUnlisted::Only(prune) => Some(listed.union(prune).cloned().collect()),
        PruneUnlisted::AllExcept(_) => None,
    };
    // Listing the records is the first request: it also tells whether the member answers.
    let records = match m.records_of(wanted.as_ref()).await {
        Ok(r) => r,
        Err(e) => {
            return fail_all(format!(
                "member unreachable, or its applied records unreadable: {e}"
            ))
        }
    };
    let mut placed = prefetch_placed(&m, &target).await;
    let mut placements = Vec::new();
    // ClusterResourcePlacements first: they deliver the namespaces that ResourcePlacements (and
    // OCM workloads) place into.
    let mut ordered: Vec<&PlacementPush> = target.placements.iter().collect();
    ordered.sort_by_key(|p| p.placement.kind != PlacementKind::ClusterResourcePlacement);
    for p in ordered {
        let key = p.placement.record_key();
        let old = records.get(&key);
        placements.push(
            push_placement(&m, &target.member, p, &key, old, &opts.commit, &mut placed).await,
        );
    }
    for r in records
        .values()
        .filter(|r| !listed.contains(&r.key) && target.prune_unlisted.covers(&r.key))
    {
        placements.push(prune_placement(&m, &target.member, r).await);
    }
    MemberResult {
        member: target.member,
        error: None,
        placements,
    }
}

/// A member none of whose placements could be pushed.
pub fn failed_member(target: &MemberPush, error: String) -> MemberResult {
    MemberResult {
        member: target.member.clone(),
        error: Some(error.clone()),
        placements: target
            .placements
            .iter()
            .map(|p| PlacementResult {
                placement: p.placement.record_key(),
                cluster: target.member.clone(),
                error: Some(error.clone()),
                objects: Vec::new(),
            })
            .collect(),
    }
}

/// Everything of a placement that is no longer delivered to this member at all.
async fn prune_placement(m: &Member, member: &str, read: &Record) -> PlacementResult {
    let key = read.key.as_str();
    let label = label_value_of(key);
    let mut result = PlacementResult {
        placement: key.to_string(),
        cluster: member.to_string(),
        error: None,
        objects: Vec::new(),
    };
    let mark = PlacementMark::new(key, Some(read), read.abandon, read.run.clone());
    if let Err(e) = mark.ensure(m, &NOTHING).await {
        result.error = Some(e.to_string());
        return result;
    }
    let mut kept = BTreeSet::new();
    for e in record::stale(&read.entries, &BTreeSet::new()) {
        let r = prune_entry(m, &mark, &e, &label, read.abandon).await;
        if r.outcome == Outcome::Failed {
            kept.insert(e);
        }
        result.objects.push(r);
    }
    if let Err(e) = mark.finish(m, kept).await {
        result.error = Some(format!("cannot update the applied record: {e}"));
    }
    result
}

async fn push_placement(
    m: &Arc<Member>,
    member: &str,
    p: &PlacementPush,
    key: &str,
    read: Option<&Record>,
    commit: &str,
    placed: &mut HashMap<LiveKey, Value>,
) -> PlacementResult {
    let label = label_value_of(key);
    let mut result = PlacementResult {
        placement: key.to_string(),
        cluster: member.to_string(),
        error: None,
        objects: Vec::new(),
    };
    let ctx = Arc::new(ObjectContext {
        strategy: p.strategy,
        label: label.clone(),
        resource_snapshot: p.resource_snapshot.clone(),
        commit: commit.to_string(),
        mark: PlacementMark::new(key, read, p.strategy.abandon, p.run.clone()),
    });
    let manifests: Vec<Arc<Value>> = p.manifests.iter().map(|m| m.value.clone()).collect();
    let works: Vec<Option<Arc<WorkConfig>>> = p
        .manifests
        .iter()
        .map(|m| m.work.clone().map(Arc::new))
        .collect();
    if p.strategy.type_ == ApplyStrategyType::ReportDiff {
        // One parallel wave; nothing is written, so no record and no prune.
        result.objects = run_wave(m, &ctx, manifests, works, placed)
            .await
            .into_iter()
            .map(|(r, _)| r.0)
            .collect();
        return result;
    }
    let old = read.map(|r| r.entries.clone()).unwrap_or_default();
    let delivered: BTreeSet<ObjectRef> = manifests.iter().map(|v| ObjectRef::of(v)).collect();
    if delivered.is_empty() && read.is_none() {
        // Nothing to write and nothing to prune: no record.
        return result;
    }
    // Objects the record does not list yet are listed (with the mark) before any is written,
    // so that an interrupted run still knows what it may have created.
    let old_objects: BTreeSet<&ObjectRef> = old.iter().map(|e| &e.object).collect();
    if delivered.iter().any(|o| !old_objects.contains(o)) {
        if let Err(e) = ctx.mark.ensure(m, &delivered).await {
            result.error = Some(format!("cannot mark the applied record: {e}"));
            return result;
        }
    }
    let created_before: BTreeSet<&ObjectRef> = old
        .iter()
        .filter(|e| e.created)
        .map(|e| &e.object)
        .collect();
    let mut entries = BTreeSet::new();
    let mut i = 0;
    while i < p.manifests.len() {
        let wave = p.manifests[i].wave;
        let end = p.manifests[i..]
            .iter()
            .position(|m| m.wave != wave)
            .map_or(p.manifests.len(), |n| i + n);
        let (these, their_works) = (manifests[i..end].to_vec(), works[i..end].to_vec());
        let wave_results = run_wave(m, &ctx, these, their_works, placed).await;
        // Results come in manifest order.
        for (((r, orphan), created), manifest) in wave_results.into_iter().zip(&manifests[i..end]) {
            if matches!(r.outcome, Outcome::Applied | Outcome::Unchanged) {
                m.expect_kinds(crd_kinds(manifest));
            }
            // What is only read (OCM ReadOnly) is never the work's: never pruned.
            if !matches!(r.outcome, Outcome::NotTakenOver | Outcome::ReadOnly) {
                entries.insert(Entry {
                    created: created || created_before.contains(&r.object),
                    object: r.object.clone(),
                    orphan,
                });
            }
            result.objects.push(r);
        }
        i = end;
    }
    for e in record::stale(&old, &delivered) {
        let r = prune_entry(m, &ctx.mark, &e, &label, p.strategy.abandon).await;
        if r.outcome == Outcome::Failed {
            entries.insert(e);
        }
        result.objects.push(r);
    }
    if let Some(e) = ctx.mark.failed() {
        // Nothing of the placement was written; its objects say so too.
        result.error = Some(format!("cannot mark the applied record: {e}"));
    } else if ctx.mark.is_marked()
        || entries != old
        || read.map(|r| r.abandon) != Some(p.strategy.abandon)
        || read.map(|r| &r.run) != Some(&p.run)
    {
        if let Err(e) = ctx.mark.finish(m, entries).await {
            result.error = Some(format!("cannot write the applied record: {e}"));
        }
    }
    result
}

/// A placement's mark on its record for one push (see [`super::writer`]): taken before the
/// first write of the placement — none at all when the member already holds everything as it
/// would be applied — and once for the whole push, by whichever object writes first.
struct PlacementMark {
    key: String,
    read: Option<Record>,
    abandon: bool,
    /// The run the record names once the push is done.
    run: Option<crate::rollout::staged::RunDelivery>,
    marked: tokio::sync::OnceCell<Result<Record, String>>,
}

impl PlacementMark {
    fn new(
        key: &str,
        read: Option<&Record>,
        abandon: bool,
        run: Option<crate::rollout::staged::RunDelivery>,
    ) -> PlacementMark {
        PlacementMark {
            key: key.to_string(),
            read: read.cloned(),
            abandon,
            run,
            marked: tokio::sync::OnceCell::new(),
        }
    }

    /// Marks the record unless this push already did; `intent` as [`Member::mark_record`]
    /// (only the first call's counts). Once marking failed, every later call fails the same.
    async fn ensure(&self, m: &Member, intent: &BTreeSet<ObjectRef>) -> Result<(), Error> {
        let marked = self
            .marked
            .get_or_init(|| async {
                m.mark_record(&self.key, self.read.as_ref(), intent, self.abandon)
                    .await
                    .map_err(|e| e.to_string())
            })
            .await;
        marked
            .as_ref()
            .map(drop)
            .map_err(|e| Error::NotMarked(e.clone()))
    }

    fn is_marked(&self) -> bool {
        matches!(self.marked.get(), Some(Ok(_)))
    }

    fn failed(&self) -> Option<&str> {
        match self.marked.get() {
            Some(Err(e)) => Some(e),
            _ => None,
        }
    }

    /// The push's last record write: the entries as it leaves them, the mark cleared (see
    /// [`Member::release_record`]); without a mark, a write fenced by the resourceVersion read.
    async fn finish(&self, m: &Member, entries: BTreeSet<Entry>) -> Result<(), Error> {
        let base = match self.marked.get() {
            Some(Ok(marked)) => Record {
                run: self.run.clone(),
                ..marked.clone()
            },
            Some(Err(e)) => return Err(Error::NotMarked(e.clone())),
            None => Record {
                abandon: self.abandon,
                run: self.run.clone(),
                ..self.read.clone().unwrap_or_else(|| Record {
                    key: self.key.clone(),
                    ..Record::default()
                })
            },
        };
        m.release_record(&base, entries).await
    }
}

/// The (apiVersion, kind) of every served version a CustomResourceDefinition manifest defines;
/// nothing for any other manifest.
fn crd_kinds(manifest: &Value) -> Vec<(String, String)> {
    let is_crd = manifest["kind"] == "CustomResourceDefinition"
        && manifest["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("apiextensions.k8s.io/"));
    let spec = &manifest["spec"];
    let (Some(group), Some(kind)) = (spec["group"].as_str(), spec["names"]["kind"].as_str()) else {
        return Vec::new();
    };
    if !is_crd {
        return Vec::new();
    }
    spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"].as_bool().unwrap_or(true))
        .filter_map(|v| v["name"].as_str())
        .map(|version| (format!("{group}/{version}"), kind.to_string()))
        .collect()
}

/// What every object of a placement shares.
struct ObjectContext {
    strategy: ApplyStrategy,
    label: String,
    resource_snapshot: String,
    commit: String,
    mark: PlacementMark,
}

/// A live object, by the address it is read at (its version too: a push that delivers one
/// object in two versions reads each).
type LiveKey = ObjectRef;

/// From this many objects of one kind in one push to a member (its placements together), the
/// ones gitfleet placed are read with one LIST across namespaces instead of one GET each.
const PLACED_LIST_THRESHOLD: usize = 8;

/// The live copies of the objects of `target` that carry gitfleet's placement label, for the
/// kinds with many objects in this push: a start-up or resync re-check of an unchanged fleet
/// reads each kind once per member, not each object. Left out, and read with a GET
/// one by one: objects that more than one placement of the push delivers (an earlier one's
/// write would make the copy stale), objects not found (absent, or without the label: takeover
/// looks at those), and every object of a kind whose LIST fails. The copies are as old as the
/// push; a change made meanwhile is the watch's to report, as after any apply.
async fn prefetch_placed(m: &Member, target: &MemberPush) -> HashMap<LiveKey, Value> {
    // Hashed, not ordered: a member's objects are looked up a few times each, and ordered maps
    // of four-string keys are a cost a restart's confirmation of every object would pay.
    let mut seen: HashMap<LiveKey, usize> = HashMap::default();
    for p in &target.placements {
        for manifest in p.manifests.iter() {
            *seen.entry(ObjectRef::of(&manifest.value)).or_default() += 1;
        }
    }
    let mut kinds: BTreeMap<(String, String), HashSet<LiveKey>> = BTreeMap::new();
    for (key, _) in seen.into_iter().filter(|(_, n)| *n == 1) {
        kinds
            .entry((key.api_version.clone(), key.kind.clone()))
            .or_default()
            .insert(key);
    }
    let mut out = HashMap::default();
    for ((api_version, kind), wanted) in kinds {
        if wanted.len() < PLACED_LIST_THRESHOLD {
            continue;
        }
        let of_kind = ObjectRef {
            api_version: api_version.clone(),
            kind: kind.clone(),
            namespace: None,
            name: String::new(),
        };
        let Ok(Some((ar, _))) = m.resource(&of_kind).await else {
            continue;
        };
        let api: Api<DynamicObject> = Api::all_with(m.client.clone(), &ar);
        let Ok(items) = m.list_labelled(&api).await else {
            continue;
        };
        for v in items {
            let key = ObjectRef {
                api_version: api_version.clone(),
                kind: kind.clone(),
                namespace: super::metadata_str(&v, "namespace")
                    .filter(|n| !n.is_empty())
                    .map(str::to_string),
                name: super::metadata_str(&v, "name")
                    .unwrap_or_default()
                    .to_string(),
            };
            if wanted.contains(&key) {
                out.insert(key, v);
            }
        }
    }
    out
}

/// Applies (or diffs) manifests in parallel; results in manifest order, with whether gitfleet
/// created each object.
/// From this many objects of one kind in one namespace, a wave reads them with one LIST instead
/// of one GET each (the reads that decide takeover, drift and ownership before each apply).
const LIST_THRESHOLD: usize = 8;

/// The live objects of the big (kind, namespace) groups of a wave, by (apiVersion, kind,
/// namespace, name); a group whose LIST fails is left to per-object GETs.
async fn prefetch(m: &Member, manifests: &[&Value]) -> HashMap<LiveKey, Option<Value>> {
    let mut groups: BTreeMap<(String, String, String), Vec<ObjectRef>> = BTreeMap::new();
    for v in manifests {
        let o = ObjectRef::of(v);
        let key = (
            o.api_version.clone(),
            o.kind.clone(),
            o.namespace.clone().unwrap_or_default(),
        );
        groups.entry(key).or_default().push(o);
    }
    let mut out = HashMap::default();
    for objects in groups.into_values() {
        if objects.len() < LIST_THRESHOLD {
            continue;
        }
        let Ok(Some(api)) = m.api(&objects[0]).await else {
            continue;
        };
        let params = kube::api::ListParams::default();
        let Ok(list) = m.list_values(&api, &params).await else {
            continue;
        };
        let mut live: BTreeMap<String, Value> = list
            .items
            .into_iter()
            .filter_map(|v| Some((super::metadata_str(&v, "name")?.to_string(), v)))
            .collect();
        for o in objects {
            let found = live.remove(&o.name);
            out.insert(o, found);
        }
    }
    out
}

/// Each result with whether the work orphans the object, and whether gitfleet created it.
/// `placed`: live copies read for the whole push ([`prefetch_placed`]); the others of a big
/// (kind, namespace) group are read here with one LIST ([`prefetch`]).
async fn run_wave(
    m: &Arc<Member>,
    ctx: &Arc<ObjectContext>,
    manifests: Vec<Arc<Value>>,
    works: Vec<Option<Arc<WorkConfig>>>,
    placed: &mut HashMap<LiveKey, Value>,
) -> Vec<((ObjectResult, bool), bool)> {
    let mut tasks = tokio::task::JoinSet::new();
    let n = manifests.len();
    let keys: Vec<LiveKey> = manifests.iter().map(|v| ObjectRef::of(v)).collect();
    let unread: Vec<&Value> = manifests
        .iter()
        .zip(&keys)
        .filter(|(_, k)| !placed.contains_key(*k))
        .map(|(v, _)| &**v)
        .collect();
    let mut prefetched = prefetch(m, &unread).await;
    let each = manifests.into_iter().zip(works).zip(keys).enumerate();
    for (i, ((manifest, work), key)) in each {
        let m = Arc::clone(m);
        let ctx = Arc::clone(ctx);
        let live = match placed.remove(&key) {
            Some(v) => Some(Some(v)),
            None => prefetched.remove(&key),
        };
        tasks.spawn(async move {
            let object = ObjectRef::of(&manifest);
            let r = if ctx.strategy.type_ == ApplyStrategyType::ReportDiff {
                report_diff(&m, &ctx, &manifest)
                    .await
                    .map(|r| ((r, false), false))
            } else {
                apply_object(&m, &ctx, &manifest, work.as_deref(), live).await
            };
            (
                i,
                r.unwrap_or_else(|e| ((ObjectResult::failed(object, e.to_string()), false), false)),
            )
        });
    }
    let mut out: Vec<Option<((ObjectResult, bool), bool)>> = (0..n).map(|_| None).collect();
    while let Some(done) = tasks.join_next().await {
        let (i, r) = done.expect("object tasks do not panic");
        out[i] = Some(r);
    }
    out.into_iter()
        .map(|r| r.expect("every task reported"))
        .collect()
}

fn comparison(c: ComparisonOption) -> Comparison {
    match c {
        ComparisonOption::PartialComparison => Comparison::Partial,
        ComparisonOption::FullComparison => Comparison::Full,
    }
}

/// Whether `live` holds every field `decorated` sets, with the same value (fields only `live`
/// has do not count), but for the commit stamp: an object is stamped with the commit that last
/// applied it, and an unchanged object is not written again only to be stamped with a newer
/// one (a rollout does not re-apply the placements a commit leaves unchanged either). Not the
/// type: `live` was read at the manifest's own resource, and objects read by a LIST carry no
/// `apiVersion` and `kind`.
///
/// Asked of every object a re-check confirms, so it walks `decorated` as it is instead of
/// copying it without those fields ([`holds_partial`] is [`diff`] without the diffs).
fn holds(live: &Value, decorated: &Value) -> bool {
    let (Some(want), Some(have)) = (decorated.as_object(), live.as_object()) else {
        return holds_partial(decorated, live);
    };
    let fields = want
        .iter()
        .filter(|(k, _)| *k != "apiVersion" && *k != "kind");
    fields.into_iter().all(|(k, want)| {
        have.get(k).is_some_and(|have| match k.as_str() {
            "metadata" => metadata_holds(want, have),
            _ => holds_partial(want, have),
        })
    })
}

/// [`holds`] for `metadata`: the commit annotation aside.
fn metadata_holds(want: &Value, have: &Value) -> bool {
    let (Some(want), Some(have)) = (want.as_object(), have.as_object()) else {
        return holds_partial(want, have);
    };
    want.iter().all(|(k, want)| {
        have.get(k).is_some_and(
            |have| match (k.as_str(), want.as_object(), have.as_object()) {
                ("annotations", Some(want), Some(have)) => want
                    .iter()
                    .filter(|(a, _)| *a != COMMIT_ANNOTATION)
                    .all(|(a, want)| have.get(a).is_some_and(|have| holds_partial(want, have))),
                _ => holds_partial(want, have),
            },
        )
    })
}

/// Whether an apply left the object as it was. Not by resourceVersion alone: the member's own
/// controllers may update the status between our read and our write.
fn same_content(before: &Value, after: &Value) -> bool {
    fn version(v: &Value) -> Option<&Value> {
        v.get("metadata")?.get("resourceVersion")
    }
    if std::ptr::eq(before, after) || version(before) == version(after) {
        return true;
    }
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(map) = v.as_object_mut() {
            map.remove("status");
        }
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            meta.remove("managedFields");
        }
        v
    };
    strip(before) == strip(after)
}

/// Applies one manifest: takeover and drift rules first, then SSA or CSA (or an OCM work's
/// update strategy), then availability. With whether the work orphans the object (`.0.1`) and
/// whether gitfleet created it (`.1`).
async fn apply_object(
    m: &Member,
    ctx: &ObjectContext,
    manifest: &Value,
    work: Option<&WorkConfig>,
    prefetched: Option<Option<Value>>,
) -> Result<((ObjectResult, bool), bool), Error> {
    let object = ObjectRef::of(manifest);
    if object.name.is_empty() {
        return Err(Error::NoName);
    }
    let s = ctx.strategy;
    let api = m.served_api(&object).await?;
    let name = object.name.as_str();
    let live = match prefetched {
        Some(live) => live,
        None => m.get(&api, name).await?,
    };
    // An OCM work's options for this object, found by its resource as the work agent finds
    // them (the member's discovery names the resource).
    let resource = m.resource_name(&object).unwrap_or_default();
    let options = match work {
        Some(w) => w.for_resource(
            object.group(),
            &resource,
            object.namespace.as_deref().unwrap_or_default(),
            name,
        ),
        None => ResourceOptions::default(),
    };
    let orphan = options.orphan;
    // The work's rules, read from the object as the member holds it after the write.
    let meta = options
        .rules
        .as_ref()
        .map(|_| crate::feedback::ResourceMeta {
            group: object.group().to_string(),
            version: object
                .api_version
                .rsplit_once('/')
                .map_or(object.api_version.as_str(), |(_, v)| v)
                .to_string(),
            kind: object.kind.clone(),
            resource,
            namespace: object.namespace.clone().unwrap_or_default(),
            name: object.name.clone(),
        });
    let feedback = |live: &Value| {
        let rules = options.rules.as_ref()?;
        Some(crate::feedback::read(
            meta.clone()?,
            rules,
            live,
            m.raw_json,
        ))
    };
    let done = |r: ObjectResult, created: bool| Ok(((r, orphan), created));
    match (&options.update, &live) {
        // ReadOnly: never written; only read, its availability reported.
        (UpdateMode::ReadOnly, _) => {
            let mut r = ObjectResult::new(object, Outcome::ReadOnly);
            r.availability = Some(match &live {
                Some(live) => availability(r.object.group(), &r.object.kind, live),
                None => Availability::NotYet(
                    "not found on the member (updateStrategy ReadOnly: never created)".into(),
                ),
            });
            r.feedback = live.as_ref().and_then(feedback);
            return done(r, false);
        }
        // CreateOnly: what exists is never updated.
        (UpdateMode::CreateOnly, Some(live)) => {
            let mut r = ObjectResult::new(object, Outcome::Unchanged);
            r.availability = Some(availability(r.object.group(), &r.object.kind, live));
            r.feedback = feedback(live);
            return done(r, false);
        }
        _ => {}
    }
    let how = comparison(s.comparison);
    // Only worked out when a rule compares (most applies never do).
    let desired = || comparable(manifest);
    if let Some(live) = &live {
        match placement_label_of(live) {
            Some(l) if l == ctx.label => {
                let unchanged_in_git =
                    annotation(live, SPEC_HASH_ANNOTATION) == Some(spec_hash(manifest).as_str());
                if s.when_to_apply == WhenToApply::IfNotDrifted && unchanged_in_git {
                    let mut drifts = diff(&desired(), Some(&comparable(live)), how);
                    if !drifts.is_empty() {
                        obscure_secret(&object.kind, &mut drifts);
                        let mut r = ObjectResult::new(object, Outcome::Drifted);
                        r.error = Some(format!(
                            "FoundDrifts: {} field(s) differ from what gitfleet applied; \
                             whenToApply is IfNotDrifted, so the member's values are left \
                             (a new commit of the object applies over them)",
                            drifts.len()
                        ));
                        r.diffs = drifts;
                        return done(r, false);
                    }
                }
            }
            Some(other) => {
                return done(
                    ObjectResult::failed(
                        object,
                        format!("already placed by another placement ({PLACEMENT_LABEL}={other})"),
                    ),
                    false,
                )
            }
            None => match s.when_to_take_over {
                WhenToTakeOver::Never => {
                    let mut r = ObjectResult::new(object, Outcome::NotTakenOver);
                    r.error = Some(
                        "exists on the member without gitfleet's label; whenToTakeOver is Never"
                            .into(),
                    );
                    return done(r, false);
                }
                WhenToTakeOver::IfNoDiff => {
                    let mut diffs = diff(&desired(), Some(&comparable(live)), how);
                    if !diffs.is_empty() {
                        obscure_secret(&object.kind, &mut diffs);
                        let mut r = ObjectResult::new(object, Outcome::NotTakenOver);
                        r.error = Some(format!(
                            "exists on the member without gitfleet's label and differs ({} difference(s)); whenToTakeOver is IfNoDiff",
                            diffs.len()
                        ));
                        r.diffs = diffs;
                        return done(r, false);
                    }
                }
                WhenToTakeOver::Always => {}
            },
        }
    }
    let stamp = Stamp {
        placement_label: &ctx.label,
        resource_snapshot: &ctx.resource_snapshot,
        commit: &ctx.commit,
    };
    let decorated = decorate(manifest, &stamp);
    // The placement's mark comes before each write.
    let write = || ctx.mark.ensure(m, &NOTHING);
    let create = |body: Value| {
        let api = &api;
        async move {
            let obj: DynamicObject = serde_json::from_value(body).map_err(Error::NotAnObject)?;
            let pp = PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PostParams::default()
            };
            write().await?;
            m.call(|| api.create(&pp, &obj)).await.map(to_value)
        }
    };
    let applied: Cow<Value> = match (&options.update, s.type_) {
        (UpdateMode::CreateOnly, _) => Cow::Owned(create(decorated.clone()).await?),
        (UpdateMode::Update, _) => match &live {
            None => Cow::Owned(create(decorated.clone()).await?),
            Some(live) if same_for_update(&decorated, live) => Cow::Borrowed(live),
            Some(live) => {
                write().await?;
                let obj: DynamicObject = serde_json::from_value(update_body(&decorated, live))
                    .map_err(Error::NotAnObject)?;
                let pp = PostParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..PostParams::default()
                };
                Cow::Owned(
                    m.call(|| api.replace(name, &pp, &obj))
                        .await
                        .map(to_value)?,
                )
            }
        },
        (
            UpdateMode::ServerSideApply {
                force,
                field_manager: Some(manager),
            },
            _,
        ) => match &live {
            Some(live) if holds(live, &decorated) => Cow::Borrowed(live),
            _ => {
                write().await?;
                Cow::Owned(
                    m.apply_as(manager, &api, name, &decorated, *force, false)
                        .await?,
                )
            }
        },
        (UpdateMode::ReadOnly, _) => unreachable!("returned above"),
        (UpdateMode::ServerSideApply { force, .. }, _) if *force && !s.force => match &live {
            Some(live) if holds(live, &decorated) => Cow::Borrowed(live),
            _ => {
                write().await?;
                Cow::Owned(m.apply(&api, name, &decorated, true, false).await?)
            }
        },
        // What the member already holds exactly as it would be applied (every field the
        // manifest and gitfleet's stamps set, the spec hash and commit included) is confirmed,
        // not written again: a start-up or resync re-check of an unchanged fleet writes nothing.
        // Fields only the member has do not count, as for a server-side apply of the same
        // manifest: they are another manager's (a field gitfleet no longer sends changes the
        // spec hash, so that is written).
        (UpdateMode::ServerSideApply { .. }, _)
            if live.as_ref().is_some_and(|live| holds(live, &decorated)) =>
        {
            Cow::Borrowed(live.as_ref().expect("checked"))
        }
        (UpdateMode::ServerSideApply { .. }, t) => {
            write().await?;
            // An older gitfleet applied ClientSideApply as a merge patch with its own
            // last-applied annotation: what that lists and the manifest no longer sets is
            // removed (once), and the annotation with it.
            let migrated = match live.as_ref().and_then(|l| legacy_removals(l, &decorated)) {
                Some(patch) => Some(m.merge_patch(&api, name, &patch).await?),
                None => None,
            };
            let body = optimistic_lock(
                &decorated,
                migrated.as_ref().or(live.as_ref()),
                s.when_to_apply,
            );
            Cow::Owned(match t {
                // ClientSideApply: the manifest's fields are taken, whoever changed them.
                ApplyStrategyType::ClientSideApply => {
                    m.apply(&api, name, &body, true, false).await?
                }
                _ => match m.apply(&api, name, &body, s.force, false).await {
                    // Conflicts only with gitfleet's own earlier writes (an older gitfleet's
                    // client-side updates, or kubectl's `before-first-apply`): take the fields
                    // over (KubeFleet's #59 fix).
                    Err(e) if !s.force && conflicts_only_with_self(&e) => {
                        m.apply(&api, name, &body, true, false).await?
                    }
                    Err(e) if !s.force && !e.field_conflicts().is_empty() => {
                        return Err(Error::NotForced(Box::new(e)))
                    }
                    r => r?,
                },
            })
        }
    };
    let outcome = match &live {
        Some(live) if same_content(live, &applied) => Outcome::Unchanged,
        _ => Outcome::Applied,
    };
    let mut r = ObjectResult::new(object, outcome);
    if how == Comparison::Full {
        // Post-apply drift check: differences (in fields others manage) are reported; the apply
        // still counts.
        r.diffs = diff(&desired(), Some(&comparable(&applied)), Comparison::Full);
        obscure_secret(&r.object.kind, &mut r.diffs);
    }
    r.availability = Some(availability(r.object.group(), &r.object.kind, &applied));
    r.feedback = feedback(&applied);
    done(r, live.is_none())
}

/// IfNotDrifted: the write carries the resourceVersion the drift check read, so that a change
/// made on the member in between fails the write (a 409) instead of being overwritten, as
/// KubeFleet's optimistic lock does.
fn optimistic_lock<'a>(
    decorated: &'a Value,
    live: Option<&Value>,
    when: WhenToApply,
) -> Cow<'a, Value> {
    let version = live.and_then(|l| l.pointer("/metadata/resourceVersion"));
    match version {
        Some(v) if when == WhenToApply::IfNotDrifted => {
            let mut body = decorated.clone();
            body["metadata"]["resourceVersion"] = v.clone();
            Cow::Owned(body)
        }
        _ => Cow::Borrowed(decorated),
    }
}

/// The merge patch that moves an object an older gitfleet applied client-side (a merge patch
/// with the [`LAST_APPLIED_ANNOTATION`]) to server-side apply: the fields that annotation
/// lists and `decorated` no longer sets are removed, and the annotation too. `None` when the
/// object carries no such annotation.
fn legacy_removals(live: &Value, decorated: &Value) -> Option<Value> {
    let original: Value = serde_json::from_str(annotation(live, LAST_APPLIED_ANNOTATION)?).ok()?;
    let mut patch =
        removals(&three_way_patch(Some(&original), decorated, live)).unwrap_or_else(|| json!({}));
    super::decorate::object_at(&mut patch, "metadata", "annotations")
        .insert(LAST_APPLIED_ANNOTATION.into(), Value::Null);
    Some(patch)
}

/// Whether an OCM `Update` would change nothing: every label and annotation it sets is already
/// on the live object (the commit stamp aside, as for [`holds`]), and everything but metadata
/// and status is the same (update_apply.go, isSameUnstructured). Unlike a server-side apply, a
/// field only the member has makes a difference: the update replaces the object.
fn same_for_update(decorated: &Value, live: &Value) -> bool {
    for field in ["labels", "annotations"] {
        let pointer = format!("/metadata/{field}");
        let have = live.pointer(&pointer).and_then(Value::as_object);
        for (k, v) in decorated
            .pointer(&pointer)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if k != COMMIT_ANNOTATION && have.and_then(|h| h.get(k)) != Some(v) {
                return false;
            }
        }
    }
    let rest = |v: &Value| {
        let mut m = v.as_object().cloned().unwrap_or_default();
        for f in ["apiVersion", "kind", "metadata", "status"] {
            m.remove(f);
        }
        m
    };
    rest(decorated) == rest(live)
}

/// The body of an OCM `Update`: the manifest as gitfleet applies it, over the live object's
/// labels, annotations, owner references, finalizers and resourceVersion (as the work agent's
/// update applier merges them: pkg/work/spoke/apply/update_apply.go).
fn update_body(decorated: &Value, live: &Value) -> Value {
    let mut body = decorated.clone();
    for field in ["labels", "annotations"] {
        let mut merged = live
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if let Some(want) = decorated
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_object)
        {
            merged.extend(want.clone());
        }
        if !merged.is_empty() {
            body["metadata"][field] = Value::Object(merged);
        }
    }
    for field in ["ownerReferences", "finalizers", "resourceVersion"] {
        if let Some(v) = live.pointer(&format!("/metadata/{field}")) {
            body["metadata"][field] = v.clone();
        }
    }
    body
}

/// Whether an apply failed with field conflicts (the 409's `details.causes`) that name only
/// gitfleet itself or `before-first-apply` as the other managers.
fn conflicts_only_with_self(e: &Error) -> bool {
    let conflicts = e.field_conflicts();
    !conflicts.is_empty()
        && conflicts
            .iter()
            .all(|c| matches!(c.manager.as_str(), FIELD_MANAGER | "before-first-apply"))
}

/// ReportDiff: a forced server-side dry-run of the manifest compared with the live object.
async fn report_diff(
    m: &Member,
    ctx: &ObjectContext,
    manifest: &Value,
) -> Result<ObjectResult, Error> {
    let object = ObjectRef::of(manifest);
    let api = m.served_api(&object).await?;
    let live = m.get(&api, &object.name).await?;
    let mut diffs = match &live {
        None => diff(&comparable(manifest), None, Comparison::Partial),
        Some(live) => {
            let stamp = Stamp {
                placement_label: &ctx.label,
                resource_snapshot: &ctx.resource_snapshot,
                commit: &ctx.commit,
            };
            let decorated = decorate(manifest, &stamp);
            let observed = comparable(live);
            match m.apply(&api, &object.name, &decorated, true, true).await {
                Ok(dry) => diff(&comparable(&dry), Some(&observed), Comparison::Full),
                // Degraded mode (e.g. an immutable field changed): compare with the manifest.
                Err(e) if e.is_invalid() => {
                    diff(&comparable(manifest), Some(&observed), Comparison::Partial)
                }
                Err(e) => return Err(e),
            }
        }
    };
    obscure_secret(&object.kind, &mut diffs);
    let outcome = if diffs.is_empty() {
        Outcome::NoDiff
    } else {
        Outcome::Diffed
    };
    let mut r = ObjectResult::new(object, outcome);
    r.diffs = diffs;
    Ok(r)
}

/// Removes an object no longer delivered, if and only if it carries this placement's label:
/// deleted, or (Abandon, or a Namespace gitfleet did not create) stripped of gitfleet's marks.
async fn prune_entry(
    m: &Member,
    mark: &PlacementMark,
    entry: &Entry,
    label: &str,
    abandon: bool,
) -> ObjectResult {
    let object = entry.object.clone();
    let api = match m.api(&object).await {
        // The kind is gone (its CRD deleted): so are its objects.
        Ok(None) => return ObjectResult::new(object, Outcome::Pruned),
        Ok(Some(api)) => api,
        Err(e) => return ObjectResult::failed(object, e.to_string()),
    };
    let live = match m.get(&api, &object.name).await {
        Ok(None) => return ObjectResult::new(object, Outcome::Pruned),
        Ok(Some(live)) => live,
        Err(e) => return ObjectResult::failed(object, e.to_string()),
    };
    if placement_label_of(&live) != Some(label) {
        let mut r = ObjectResult::new(object, Outcome::Left);
        r.error = Some("not labelled as this placement's: left alone".into());
        return r;
    }
    if let Err(e) = mark.ensure(m, &NOTHING).await {
        return ObjectResult::failed(object, e.to_string());
    }
    let foreign_namespace =
        object.kind == "Namespace" && object.group().is_empty() && !entry.created;
    // An OCM work's Orphan / SelectivelyOrphan: left on the member, as the work does not own it.
    if abandon || entry.orphan || foreign_namespace {
        let patch = json!({"metadata": {
            "labels": {MANAGED_BY_LABEL: null, PLACEMENT_LABEL: null},
            "annotations": {SNAPSHOT_ANNOTATION: null, COMMIT_ANNOTATION: null,
                SPEC_HASH_ANNOTATION: null, LAST_APPLIED_ANNOTATION: null},
        }});
        return match m.merge_patch(&api, &object.name, &patch).await {
            Ok(_) => ObjectResult::new(object, Outcome::Abandoned),
            Err(e) => ObjectResult::failed(object, e.to_string()),
        };
    }
    let dp = DeleteParams::background();
    match m.call(|| api.delete(&object.name, &dp)).await {
        Ok(_) => {
            let uid = super::metadata_str(&live, "uid");
            match m.await_gone(&api, &object.name, uid).await {
                Ok(()) => ObjectResult::new(object, Outcome::Pruned),
                Err(e) => ObjectResult::failed(object, e.to_string()),
            }
        }
        Err(e) if e.is_not_found() => ObjectResult::new(object, Outcome::Pruned),
        Err(e) => ObjectResult::failed(object, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member's kinds are discovered by its first push and taken from the connection by the
    /// pushes after it: a push through a connection that knows them makes exactly one request
    /// per API group fewer (here `/api/v1` for the ConfigMap, `/apis/apps/v1` for the
    /// Deployment) than the same push through a connection that does not.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_members_kinds_are_discovered_once_for_its_pushes() {
        let fleet = gitfleet_sim::fleet_file::FleetFile::parse(
            "members:\n  - name: m\n    nodes: [{count: 1}]\n",
            "fleet.yaml",
        )
        .unwrap();
        let options = gitfleet_sim::StartOptions {
            admin: None,
            admin_token: None,
        };
        let sim = gitfleet_sim::start(fleet, options).await.unwrap();
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
        let target = crate::members::MemberTarget {
            name: "m".into(),
            context: "m".into(),
        };
        let shared = crate::members::connection(&kubeconfig, std::path::Path::new("kc"), &target)
            .await
            .unwrap();
        let objects = [
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "namespace": "default"}, "data": {"a": "1"}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "d", "namespace": "default"},
                "spec": {"selector": {"matchLabels": {"app": "d"}},
                    "template": {"metadata": {"labels": {"app": "d"}},
                        "spec": {"containers": [{"name": "d", "image": "d"}]}}}}),
        ];
        let push = MemberPush {
            member: "m".into(),
            context: "m".into(),
            placements: vec![PlacementPush {
                placement: "crp/p".parse().unwrap(),
                strategy: ApplyStrategy::default(),
                resource_snapshot: "s".into(),
                manifests: (objects.iter())
                    .map(|v| crate::render::Manifest {
                        value: Arc::new(v.clone()),
                        wave: 0,
                        envelope: None,
                        work: None,
                    })
                    .collect(),
                run: None,
            }],
            prune_unlisted: super::super::PruneUnlisted::Only(BTreeSet::new()),
        };
        let opts = PushOptions {
            commit: "c".into(),
            parallel_members: 1,
            parallel_requests: 4,
            retry_budget: Duration::from_secs(10),
            writer: super::super::writer::Identity::process("test"),
            feedback_raw_json: Default::default(),
        };
        // How many requests a push of `push` makes through `connection`.
        let requests = |connection: Connection| {
            let (sim, push, opts) = (&sim, push.clone(), opts.clone());
            async move {
                let before = sim.member_request_counts("m").unwrap();
                let result = push_member(connection, push, &opts).await;
                let after = sim.member_request_counts("m").unwrap();
                assert!(result.error.is_none(), "{:?}", result.error);
                (after.0 - before.0) + (after.1 - before.1)
            }
        };
        requests(shared.clone()).await;
        let knowing = requests(shared.clone()).await;
        let fresh = Connection {
            client: shared.client.clone(),
            kinds: Arc::default(),
        };
        let not_knowing = requests(fresh).await;
        assert_eq!(
            not_knowing,
            knowing + 2,
            "{not_knowing} requests, {knowing} knowing the kinds"
        );
        sim.shutdown().await;
    }

    #[test]
    fn an_ocm_update_replaces_over_the_live_metadata() {
        let decorated = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"gitfleet.io/placement": "mw.a.w"},
                "annotations": {COMMIT_ANNOTATION: "new"}},
            "data": {"a": "1"}});
        let live = json!({"metadata": {"name": "c", "resourceVersion": "7",
                "labels": {"team": "x", "gitfleet.io/placement": "mw.a.w"},
                "annotations": {COMMIT_ANNOTATION: "old"}, "finalizers": ["f"]},
            "data": {"a": "1", "b": "theirs"}});
        let body = update_body(&decorated, &live);
        assert_eq!(
            body["metadata"],
            json!({"name": "c", "resourceVersion": "7", "finalizers": ["f"],
                "labels": {"team": "x", "gitfleet.io/placement": "mw.a.w"},
                "annotations": {COMMIT_ANNOTATION: "new"}})
        );
        assert_eq!(body["data"], json!({"a": "1"}));
        // A key only the member has is a difference for Update (it replaces)...
        assert!(!same_for_update(&decorated, &live));
        // ... a newer commit stamp alone is not, nor a label only the member has.
        let mut same = live.clone();
        same["data"] = json!({"a": "1"});
        assert!(same_for_update(&decorated, &same));
        same["metadata"]["labels"]["gitfleet.io/placement"] = json!("other");
        assert!(!same_for_update(&decorated, &same));
    }

    #[test]
    fn a_crd_defines_the_kinds_of_its_served_versions_only() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "spec": {"group": "example.com", "names": {"kind": "Widget"},
                "versions": [{"name": "v1", "served": true}, {"name": "v1beta1", "served": false},
                    {"name": "v2"}]}});
        assert_eq!(
            crd_kinds(&crd),
            [
                ("example.com/v1".to_string(), "Widget".to_string()),
                ("example.com/v2".to_string(), "Widget".to_string())
            ]
        );
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "spec": crd["spec"].clone()});
        assert!(crd_kinds(&cm).is_empty());
    }

    /// A 409 as the API server sends it for apply conflicts: one cause per field
    /// (`conflict with "<manager>"`, `using v1` for an Update manager).
    fn conflict(causes: &[(&str, &str)]) -> Error {
        let causes: Vec<Value> = causes
            .iter()
            .map(|(manager, field)| {
                json!({"reason": "FieldManagerConflict", "message": format!("conflict with {manager}"), "field": field})
            })
            .collect();
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": "Apply failed with conflicts", "reason": "Conflict", "code": 409,
            "details": {"causes": causes}});
        Error::Api(Box::new(serde_json::from_value(status).unwrap()))
    }

    #[test]
    fn self_conflicts_are_recognised_from_the_causes() {
        let own = conflict(&[
            ("\"gitfleet\" using v1", ".data.a"),
            ("\"before-first-apply\" using v1", ".data.b"),
        ]);
        assert!(conflicts_only_with_self(&own));
        let other = conflict(&[("\"other\"", ".data.a")]);
        assert!(!conflicts_only_with_self(&other));
        let both = conflict(&[
            ("\"gitfleet\" using v1", ".data.a"),
            ("\"kubectl\"", ".data.b"),
        ]);
        assert!(!conflicts_only_with_self(&both));
        // A 409 without causes (an optimistic-lock conflict) is not a field conflict.
        assert!(!conflicts_only_with_self(&conflict(&[])));
    }

    /// What the member holds as it would be applied is not written again.
    #[test]
    fn an_object_the_member_holds_as_applied_is_recognised() {
        let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "n"}, "data": {"k": "v"}});
        let stamp = |commit| Stamp {
            placement_label: "crp.app",
            resource_snapshot: "abc",
            commit,
        };
        let mut live = decorate(&manifest, &stamp("c1"));
        // What the server adds, and what a LIST leaves out.
        live["metadata"]["resourceVersion"] = json!("7");
        live["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!("n");
        live.as_object_mut().unwrap().remove("kind");
        assert!(holds(&live, &decorate(&manifest, &stamp("c1"))));
        // A newer commit stamp alone is no reason to write.
        assert!(holds(&live, &decorate(&manifest, &stamp("c2"))));
        // A changed value, a missing field or another snapshot is.
        let mut changed = manifest.clone();
        changed["data"]["k"] = json!("w");
        assert!(!holds(&live, &decorate(&changed, &stamp("c1"))));
        let mut more = manifest.clone();
        more["data"]["extra"] = json!("x");
        assert!(!holds(&live, &decorate(&more, &stamp("c1"))));
        let other = Stamp {
            resource_snapshot: "def",
            ..stamp("c1")
        };
        assert!(!holds(&live, &decorate(&manifest, &other)));
    }
}
