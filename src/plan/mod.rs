//! The difference between two worlds — the fleet at a base commit and at a head commit — as a
//! pull-request review wants it: per placement what changed in its spec, which clusters it gains
//! and loses and why, its new snapshot indices and rollout impact; per cluster, object by object,
//! how the rendered manifests change. Pure: both worlds are computed by the callers with the same
//! core functions the daemon uses (catalog, snapshot, schedule, render).

pub mod format;
pub mod story;

use crate::catalog::Catalog;
use crate::model::placement::RolloutStrategyType;
use crate::model::placement_key::as_id;
use crate::model::Labels;
use crate::model::{ClusterName, ObjectKey, PlacementKey, PlacementKind};
use crate::render::cluster::{CommitRenderer, Selections, SharedManifests};
use crate::render::ClusterTarget;
use crate::rollout::staged;
pub use crate::rollout::staged::preview::{RunNote, RunNoteKind, StageImpact};
use crate::rollout::strategy::Strategy;
use crate::rollout::{preview, RolloutState};
use crate::schedule::{
    schedule_commit, ClusterDecision, Condition, Fleet, Inventory, PlacementSchedule, Previous,
};
use crate::snapshot::{hash_value, resource_hash};
use serde::Serialize;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::sync::Arc;

/// One side of the comparison.
pub struct World<'a> {
    pub commit: &'a str,
    pub cat: &'a Catalog,
    pub fleet: &'a Fleet,
    pub schedule: &'a [Arc<PlacementSchedule>],
    /// The daemon's rollout state (what clusters run, the runs' records), when known: a run
    /// the daemon initialised is shown as it recorded it, and clusters a run would move back
    /// to an older snapshot are found.
    pub rollout: Option<&'a RolloutState>,
}

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Only these clusters' manifests are diffed (all when empty).
    pub clusters: Vec<String>,
    /// Lines of context in the unified diffs.
    pub context: usize,
}

/// The whole plan. Its JSON form is documented in docs/reference/plan-json.md.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub base: String,
    pub head: String,
    /// The head commit's validation errors: when any, nothing else is computed.
    pub errors: Vec<String>,
    /// With trust files given: who signed the head, as `--verify-commits` would judge it (a
    /// head that would be refused has its reason in `errors`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head_signature: Option<String>,
    /// The daemon would hold the head as a mass deletion ([`deletion_guard`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<crate::rollout::guard::Held>,
    /// Likely mistakes the head brings that the base did not have ([`crate::lint`]): a
    /// selector that selects nothing, an override of a missing placement, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    pub summary: Summary,
    pub placements: Vec<PlacementPlan>,
    pub clusters: Vec<ClusterPlan>,
    /// The `ClusterResourcePlacementEviction`s the head brings, judged as the daemon would
    /// judge them ([`crate::rollout::eviction::preview`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evictions: Vec<EvictionPlan>,
}

/// One eviction the head brings: whether it would execute (the placement then loses the
/// cluster), and the message of the condition that decides it, with the disruption budget's
/// counts when one applies.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EvictionPlan {
    pub name: String,
    /// The placement, by id (`crp/NAME`).
    pub placement: String,
    pub cluster: String,
    /// `executed`, `blocked` or `invalid`.
    pub outcome: EvictionOutcome,
    pub message: String,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum EvictionOutcome {
    Executed,
    Blocked,
    Invalid,
}

impl EvictionPlan {
    fn of(j: &crate::rollout::eviction::Judged) -> EvictionPlan {
        use crate::rollout::eviction::Verdict;
        let (outcome, message) = match &j.verdict {
            Verdict::Executed(m) => (EvictionOutcome::Executed, m.clone()),
            Verdict::Blocked(m) => (EvictionOutcome::Blocked, m.clone()),
            Verdict::Invalid(m) => (EvictionOutcome::Invalid, m.to_string()),
        };
        EvictionPlan {
            name: j.name.clone(),
            placement: j.placement.to_string(),
            cluster: j.cluster.clone(),
            outcome,
            message,
        }
    }
}

impl Plan {
    /// Does the head change anything on the fleet?
    pub fn has_changes(&self) -> bool {
        self.placements
            .iter()
            .any(|p| p.change != Change::Unchanged)
            || !self.clusters.is_empty()
    }
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub placements_added: usize,
    pub placements_removed: usize,
    pub placements_changed: usize,
    pub clusters_gained: usize,
    pub clusters_lost: usize,
    pub clusters_with_manifest_changes: usize,
    pub objects_added: usize,
    pub objects_removed: usize,
    pub objects_changed: usize,
    pub render_errors: usize,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    Added,
    Removed,
    Changed,
    Unchanged,
}

/// A value on each side.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Transition<T> {
    pub base: Option<T>,
    pub head: Option<T>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlacementPlan {
    #[serde(flatten)]
    pub key: PlacementKey,
    pub change: Change,
    /// Spec fields that differ (`policy`, `resourceSelectors`, `strategy`, … for KubeFleet
    /// placements; the OCM Placement's own spec fields), and `overrides` when those differ.
    pub changed_fields: Vec<String>,
    pub policy_snapshot_index: Transition<u64>,
    /// Resource snapshot index, counted from the base (0, or 1 if the head's selection differs):
    /// the daemon's history starts wherever it stands.
    pub resource_snapshot_index: Transition<u64>,
    /// Selected resources (`Kind/namespace/name`) added, removed or changed in content.
    pub resources: ResourceChanges,
    /// Overrides (`ClusterResourceOverride/name`, `ResourceOverride/namespace/name`) that follow
    /// this placement and select one of its resources, added, removed or changed.
    pub overrides: ResourceChanges,
    pub gained: Vec<ClusterMove>,
    pub lost: Vec<ClusterMove>,
    /// When a cluster is lost while the placement stays: the clusters the head picks, with
    /// their scores, to set beside the lost one's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub winners: Vec<ClusterScore>,
    /// Clusters selected on both sides.
    pub kept: Vec<String>,
    /// Clusters the head cannot place on, and why (new or still failing when unfulfilled).
    pub unschedulable: Vec<ClusterReason>,
    /// The head's scheduling condition.
    pub condition: Option<Condition>,
    pub rollout: Option<RolloutImpact>,
    /// What the change means, riskiest first: the plan's summary line ([`story`]). Absent
    /// when it means nothing a reviewer must weigh.
    #[serde(skip_serializing_if = "story::Story::is_empty")]
    pub story: story::Story,
    /// An OCM key's feedback and condition rules, as the head's works declare them: what the
    /// status will report once applied (the values exist only then).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feedback: Vec<DeclaredFeedback>,
}

/// One `manifestConfigs` entry with rules, of a work an OCM key delivers.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DeclaredFeedback {
    /// `ManifestWork NS/NAME` or `ManifestWorkReplicaSet NS/NAME`.
    pub work: String,
    /// The entry's `resourceIdentifier`: `RESOURCE[.GROUP] [NAMESPACE/]NAME`, wildcards as
    /// written.
    pub resource: String,
    /// The workload's manifests of that group, namespace and name whose kind is the resource's
    /// (the member's discovery has the last word on the resource): `Kind [ns/]name`.
    pub manifests: Vec<String>,
    /// `WellKnownStatus`, or `NAME=PATH` for each JSONPath (`@VERSION` when it names one).
    pub feedback: Vec<String>,
    /// `CONDITION: WellKnownConditions` or `CONDITION: CEL EXPR && EXPR`.
    pub conditions: Vec<String>,
}

/// The feedback an OCM key's works declare, in the head's catalog.
fn declared_feedback(world: &World, key: &PlacementKey) -> Vec<DeclaredFeedback> {
    let cat = world.cat;
    let mut out = Vec::new();
    for (index, t) in cat.ocm_work_templates(key) {
        let o = &cat.objects[index];
        let work = format!(
            "{} {}/{}",
            o.gvk.kind,
            o.namespace.as_deref().unwrap_or_default(),
            o.name
        );
        for c in &t.manifest_configs {
            if !c.reads_status() {
                continue;
            }
            out.push(DeclaredFeedback {
                work: work.clone(),
                resource: c.resource_identifier.to_string(),
                manifests: t
                    .workload
                    .manifests
                    .iter()
                    .filter(|m| c.resource_identifier.may_name(m))
                    .map(manifest_text)
                    .collect(),
                feedback: c.feedback_rules.iter().flat_map(feedback_texts).collect(),
                conditions: c.condition_rules.iter().map(condition_text).collect(),
            });
        }
    }
    out
}

/// `Kind [ns/]name` of a workload manifest.
fn manifest_text(m: &Value) -> String {
    fn text(v: Option<&Value>) -> &str {
        v.and_then(Value::as_str).unwrap_or_default()
    }
    let meta = m.get("metadata");
    let kind = text(m.get("kind"));
    let name = text(meta.and_then(|x| x.get("name")));
    match text(meta.and_then(|x| x.get("namespace"))) {
        "" => format!("{kind} {name}"),
        ns => format!("{kind} {ns}/{name}"),
    }
}

/// `WellKnownStatus`, or `NAME=PATH[@VERSION]` for each JSONPath of `rule`.
fn feedback_texts(rule: &crate::model::work::FeedbackRule) -> Vec<String> {
    match rule.type_ {
        crate::model::work::FeedbackType::WellKnownStatus => vec!["WellKnownStatus".to_string()],
        crate::model::work::FeedbackType::JsonPaths => rule
            .json_paths
            .iter()
            .map(|p| match p.version.as_str() {
                "" => format!("{}={}", p.name, p.path.trim()),
                v => format!("{}={}@{v}", p.name, p.path.trim()),
            })
            .collect(),
    }
}

/// `CONDITION: WellKnownConditions` or `CONDITION: CEL EXPR && EXPR`.
fn condition_text(rule: &crate::model::work::ConditionRule) -> String {
    match rule.type_ {
        crate::model::work::ConditionRuleType::WellKnownConditions => {
            format!("{}: WellKnownConditions", rule.condition)
        }
        crate::model::work::ConditionRuleType::Cel => {
            format!(
                "{}: CEL {}",
                rule.condition,
                rule.cel_expressions.join(" && ")
            )
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ResourceChanges {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterMove {
    pub cluster: String,
    pub reason: String,
    pub base_score: Option<Score>,
    pub head_score: Option<Score>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Score {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology_spread: Option<i32>,
    /// OCM: the total prioritizer score.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ClusterScore {
    pub cluster: String,
    pub score: Score,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ClusterReason {
    pub cluster: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutImpact {
    /// `RollingUpdate`, `External` (staged update runs) or `OCM`.
    pub strategy: Strategy,
    /// Clusters that stay selected and whose manifests change: they update.
    pub updating: Vec<String>,
    /// RollingUpdate: `maxUnavailable` and `maxSurge` resolved for the head's target count.
    pub max_unavailable: Option<usize>,
    pub max_surge: Option<usize>,
    /// How the rollout proceeds, in words.
    pub description: String,
    /// External: the stages of the update runs that roll this placement out.
    pub stages: Vec<StageImpact>,
    /// External: what a reviewer must know of a run beyond its stages.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub run_notes: Vec<RunNote>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ClusterPlan {
    pub cluster: String,
    pub objects: Vec<ObjectDiff>,
    /// Rendering failures on the head side (an override that fails for this cluster, …).
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ObjectDiff {
    /// `Kind/namespace/name` (`Kind/name` when cluster-scoped).
    pub object: String,
    /// The placement that delivers it (the head's, or the base's for a removed object), by id.
    #[serde(with = "as_id")]
    pub placement: PlacementKey,
    pub change: Change,
    /// The object, typed (its text form is `object`).
    #[serde(skip)]
    pub key: ObjectKey,
    /// The file a tool rendered it from (`kustomize` and the kustomization file), when it
    /// was rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Unified diff of the YAML, secrets' values masked; one text shared by every cluster
    /// that has the same change (a large commit's diffs are its size again, per copy).
    #[serde(serialize_with = "shared_text")]
    pub diff: Arc<str>,
}

fn shared_text<S: serde::Serializer>(text: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(text)
}

/// What `gitfleet plan` needs besides the two commits: the live inventory (if any), the bindings
/// of the last run and the clock.
pub struct Inputs<'a> {
    pub inventory: Option<&'a Inventory>,
    pub previous: &'a Previous,
    /// The daemon's rollout state, when known (`--state`).
    pub rollout: Option<&'a RolloutState>,
    pub now_unix: i64,
}

/// Both sides of a plan scheduled: each side's fleet and schedule, the head scheduled with the
/// base's decisions as previous, as the daemon would.
struct Scheduled {
    base_fleet: Fleet,
    head_fleet: Fleet,
    base_schedule: Vec<Arc<PlacementSchedule>>,
    head_schedule: Vec<Arc<PlacementSchedule>>,
    /// The evictions the head brings, judged.
    evictions: Vec<crate::rollout::eviction::Judged>,
}

fn schedule_both(base_cat: &Catalog, head_cat: &Catalog, inputs: &Inputs) -> Scheduled {
    let base_fleet = Fleet::build(base_cat, inputs.inventory);
    let head_fleet = Fleet::build(head_cat, inputs.inventory);
    let base_invalid = crate::snapshot::invalid_selections(base_cat);
    let head_invalid = crate::snapshot::invalid_selections(head_cat);
    let base_schedule = schedule_commit(
        base_cat,
        &base_invalid,
        &base_fleet,
        inputs.previous,
        inputs.now_unix,
    );
    // The base's results are the head's previous ones (shared, not copied: they are large).
    let mut as_previous: Previous = base_schedule
        .iter()
        .map(|p| (p.key.clone(), p.clone()))
        .collect();
    // The head's evictions act on them before the head is scheduled, as in the daemon.
    let evictions =
        crate::rollout::eviction::preview(base_cat, head_cat, &mut as_previous, inputs.rollout);
    let head_schedule = schedule_commit(
        head_cat,
        &head_invalid,
        &head_fleet,
        &as_previous,
        inputs.now_unix,
    );
    Scheduled {
        base_fleet,
        head_fleet,
        base_schedule,
        head_schedule,
        evictions,
    }
}

/// The plan of two valid commits, as `gitfleet plan` computes it: both sides scheduled
/// ([`schedule_both`]), then [`compare`]. The command and the plan benchmark both go through
/// here.
pub fn plan_catalogs(
    (base_commit, base_cat): (&str, &Catalog),
    (head_commit, head_cat): (&str, &Catalog),
    inputs: &Inputs,
    opts: &Options,
) -> Plan {
    let sides = schedule_both(base_cat, head_cat, inputs);
    let plan = compare(
        &World {
            commit: base_commit,
            cat: base_cat,
            fleet: &sides.base_fleet,
            schedule: &sides.base_schedule,
            rollout: inputs.rollout,
        },
        &World {
            commit: head_commit,
            cat: head_cat,
            fleet: &sides.head_fleet,
            schedule: &sides.head_schedule,
            rollout: inputs.rollout,
        },
        opts,
    );
    Plan {
        warnings: new_warnings(base_cat, head_cat),
        evictions: sides.evictions.iter().map(EvictionPlan::of).collect(),
        ..plan
    }
}

/// The head's likely mistakes that the base did not have (a warning is the same when its
/// object, field and message are: lines move as files are edited).
pub fn new_warnings(base_cat: &Catalog, head_cat: &Catalog) -> Vec<String> {
    let known: BTreeSet<(String, String, String)> = crate::lint::lint(base_cat)
        .into_iter()
        .map(|d| (d.object, d.field, d.message))
        .collect();
    crate::lint::lint(head_cat)
        .into_iter()
        .filter(|d| !known.contains(&(d.object.clone(), d.field.clone(), d.message.clone())))
        .map(|d| d.to_string())
        .collect()
}

/// Whether the daemon's deletion guard would hold `head` (with its commit `message`) after
/// `base`: what base delivers is taken as what members hold, and every placement and cluster
/// is stepped at once (the rollout's pace spreads deletions over steps; the guard judges the
/// whole commit). Placements that abandon their objects and members gone from the head's
/// repository delete nothing.
pub fn deletion_guard(
    (base_commit, base_cat): (&str, &Catalog),
    (head_commit, head_cat, message): (&str, &Catalog, &str),
    inputs: &Inputs,
    policy: &crate::rollout::guard::Policy,
) -> Option<crate::rollout::guard::Held> {
    use crate::rollout::guard::{self, Fate};
    use crate::rollout::{step, Input, Pacing, RolloutState};
    let Scheduled {
        base_fleet,
        head_fleet,
        base_schedule,
        head_schedule,
        evictions: _,
    } = schedule_both(base_cat, head_cat, inputs);
    let none = BTreeMap::new();
    let decide =
        |commit: &str, cat: &Catalog, fleet: &Fleet, schedule: &[Arc<PlacementSchedule>]| {
            let input = Input {
                cat,
                commit,
                schedule,
                fleet,
                unreachable: &none,
                only: None,
                now: inputs.now_unix.max(0) as u64,
                staged: Default::default(),
                selected: None,
            };
            // Only what the guard reads is kept: the work carries a copy of every rendering.
            let decision = step(&input, &RolloutState::default(), Pacing::Immediate);
            (decision.steps, decision.ledger.abandon)
        };
    let (base_steps, base_abandon) = decide(base_commit, base_cat, &base_fleet, &base_schedule);
    let (head_steps, head_abandon) = decide(head_commit, head_cat, &head_fleet, &head_schedule);
    let members: BTreeSet<&str> = head_fleet
        .clusters
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    let on_members = base_steps.iter().map(|s| guard::Recorded {
        placement: &s.placement,
        abandon: base_abandon.get(&s.placement).copied().unwrap_or(false),
        clusters: s
            .rendered
            .iter()
            .filter_map(|(c, r)| Some((c.as_str(), &**r.objects.as_ref()?))),
    });
    let assessment = guard::assess(
        on_members,
        &guard::Judged::new(&head_steps, &head_abandon),
        |cluster| members.contains(cluster),
        // Gone from the head: the daemon removes it.
        |_, _| Fate::Removed,
    );
    match guard::judge(policy, assessment, head_commit, message) {
        guard::Verdict::Held(h) => Some(h),
        _ => None,
    }
}

/// A plan that only reports the head's validation errors.
pub fn invalid(base: &str, head: &str, errors: Vec<String>) -> Plan {
    Plan {
        base: base.into(),
        head: head.into(),
        errors,
        head_signature: None,
        held: None,
        warnings: vec![],
        summary: Summary::default(),
        placements: vec![],
        clusters: vec![],
        evictions: vec![],
    }
}

/// Compares two worlds.
pub fn compare(base: &World, head: &World, opts: &Options) -> Plan {
    let base_by: BTreeMap<&PlacementKey, &PlacementSchedule> =
        base.schedule.iter().map(|p| (&p.key, &**p)).collect();
    let head_by: BTreeMap<&PlacementKey, &PlacementSchedule> =
        head.schedule.iter().map(|p| (&p.key, &**p)).collect();
    let ids: BTreeSet<&PlacementKey> = base_by.keys().chain(head_by.keys()).copied().collect();
    // Every cluster counts for the placements, the summary and the exit code; `--cluster` only
    // narrows which diffs are shown.
    let sel = (Selections::new(base.cat), Selections::new(head.cat));
    let mut clusters = compare_clusters(base, head, &sel, opts.context);
    let changed = changed_clusters(&clusters);
    let removed = story::removed_by_placement(&clusters);
    let mut placements = Vec::new();
    for id in ids {
        let b = base_by.get(id).copied();
        let h = head_by.get(id).copied();
        let mut p = compare_placement(base, head, &sel, b, h, &changed);
        p.story = story::of(&p, removed.get(id).map_or(&[][..], Vec::as_slice));
        placements.push(p);
    }
    let mut summary = Summary::default();
    for p in &placements {
        match p.change {
            Change::Added => summary.placements_added += 1,
            Change::Removed => summary.placements_removed += 1,
            Change::Changed => summary.placements_changed += 1,
            Change::Unchanged => {}
        }
        summary.clusters_gained += p.gained.len();
        summary.clusters_lost += p.lost.len();
    }
    for c in &clusters {
        summary.clusters_with_manifest_changes += usize::from(!c.objects.is_empty());
        summary.render_errors += c.errors.len();
        for o in &c.objects {
            match o.change {
                Change::Added => summary.objects_added += 1,
                Change::Removed => summary.objects_removed += 1,
                _ => summary.objects_changed += 1,
            }
        }
    }
    if !opts.clusters.is_empty() {
        clusters.retain(|c| opts.clusters.contains(&c.cluster));
    }
    Plan {
        held: None,
        warnings: vec![],
        base: base.commit.into(),
        head: head.commit.into(),
        errors: vec![],
        head_signature: None,
        summary,
        placements,
        clusters,
        evictions: vec![],
    }
}

/// Placement → the clusters where an object it delivers changes.
type ChangedClusters<'a> = HashMap<&'a PlacementKey, BTreeSet<&'a str>>;

fn changed_clusters(clusters: &[ClusterPlan]) -> ChangedClusters<'_> {
    let mut out: ChangedClusters = HashMap::new();
    for c in clusters {
        for o in &c.objects {
            out.entry(&o.placement)
                .or_default()
                .insert(c.cluster.as_str());
        }
    }
    out
}

/// The spec of a placement as JSON, for field-by-field comparison.
fn spec_of(world: &World, key: &PlacementKey) -> Option<Value> {
    let cat = world.cat;
    if key.kind == PlacementKind::OcmPlacement {
        return cat
            .ocm_placements
            .iter()
            .find(|e| {
                e.spec.metadata.name == key.name && cat.objects[e.index].namespace == key.namespace
            })
            .map(|e| serde_json::to_value(&e.spec.spec).unwrap_or_default());
    }
    if key.kind == PlacementKind::ManifestWork {
        return cat
            .manifest_works
            .iter()
            .find(|e| {
                e.spec.metadata.name == key.name && cat.objects[e.index].namespace == key.namespace
            })
            .map(|e| serde_json::to_value(&e.spec.spec).unwrap_or_default());
    }
    cat.placement(&key.name, key.namespace.as_deref())
        .map(|e| serde_json::to_value(e.spec.defaulted_spec()).unwrap_or_default())
}

/// The overrides that follow a placement and select one of its resources, with their hashes.
/// As in rendering, an envelope is never selected itself: the objects it carries are.
fn overrides_of(world: &World, sel: &Selections, key: &PlacementKey) -> BTreeMap<String, String> {
    let cat = world.cat;
    let mut out = BTreeMap::new();
    let Some(resources) = sel.of_key(key) else {
        return out;
    };
    // (group, kind, namespace, name) of what the overrides may apply to.
    let mut targets: Vec<(String, String, Option<String>, String)> = Vec::new();
    for r in resources.iter() {
        match crate::model::envelope::envelope_contents_of(&r.value, &cat.scopes) {
            None => targets.push((
                r.gvk.group.clone(),
                r.gvk.kind.clone(),
                r.namespace.clone(),
                r.name.clone(),
            )),
            Some(contents) => {
                for v in contents.unwrap_or_default() {
                    let text = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_string);
                    let gvk = crate::model::Gvk::from_api_version(
                        &text("/apiVersion").unwrap_or_default(),
                        &text("/kind").unwrap_or_default(),
                    );
                    targets.push((
                        gvk.group,
                        gvk.kind,
                        text("/metadata/namespace"),
                        text("/metadata/name").unwrap_or_default(),
                    ));
                }
            }
        }
    }
    for e in &cat.cluster_overrides {
        let o = &e.spec;
        let selects = targets.iter().any(|(group, kind, ns, name)| match ns {
            None => o.selects(group, kind, name),
            Some(ns) => o.selects_namespace(ns),
        });
        if o.follows_placement(&key.name, key.namespace.as_deref()) && selects {
            out.insert(
                cat.objects[e.index].display_name(),
                hash_value(&cat.objects[e.index].value),
            );
        }
    }
    for e in &cat.resource_overrides {
        let o = &e.spec;
        let selects = targets.iter().any(|(group, kind, ns, name)| {
            ns.as_deref()
                .is_some_and(|ns| o.selects(group, kind, ns, name))
        });
        if o.follows_placement(&key.name, key.namespace.as_deref()) && selects {
            let id = cat.objects[e.index].key().short().to_string();
            out.insert(id, hash_value(&cat.objects[e.index].value));
        }
    }
    out
}

/// Which keys of two `id → hash` maps were added, removed or changed.
fn diff_maps(base: &BTreeMap<String, String>, head: &BTreeMap<String, String>) -> ResourceChanges {
    let mut changes = ResourceChanges::default();
    for (id, hash) in head {
        match base.get(id) {
            None => changes.added.push(id.clone()),
            Some(b) if b != hash => changes.changed.push(id.clone()),
            _ => {}
        }
    }
    changes.removed = base
        .keys()
        .filter(|id| !head.contains_key(*id))
        .cloned()
        .collect();
    changes
}

impl ResourceChanges {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

fn selection_of(sel: &Selections, key: &PlacementKey) -> Option<BTreeMap<String, String>> {
    let resources = sel.of_key(key)?;
    Some(
        resources
            .iter()
            .map(|r| (r.key().short().to_string(), hash_value(&r.value)))
            .collect(),
    )
}

fn compare_placement(
    base: &World,
    head: &World,
    sel: &(Selections, Selections),
    b: Option<&PlacementSchedule>,
    h: Option<&PlacementSchedule>,
    changed: &ChangedClusters,
) -> PlacementPlan {
    let key = h.or(b).map(|p| p.key.clone()).expect("one side exists");
    let base_spec = b.and_then(|_| spec_of(base, &key));
    let head_spec = h.and_then(|_| spec_of(head, &key));
    let mut changed_fields = Vec::new();
    if let (Some(bs), Some(hs)) = (&base_spec, &head_spec) {
        let (bo, ho) = (bs.as_object(), hs.as_object());
        if let (Some(bo), Some(ho)) = (bo, ho) {
            let fields: BTreeSet<&String> = bo.keys().chain(ho.keys()).collect();
            for f in fields {
                let (bv, hv) = (bo.get(f), ho.get(f));
                if bv == hv {
                    continue;
                }
                // The policy and the strategy name the field that changed within them.
                let inner = match (bv.and_then(Value::as_object), hv.and_then(Value::as_object)) {
                    (Some(bi), Some(hi)) if matches!(f.as_str(), "policy" | "strategy") => {
                        let keys: BTreeSet<&String> = bi.keys().chain(hi.keys()).collect();
                        keys.into_iter()
                            .filter(|k| bi.get(*k) != hi.get(*k))
                            .map(|k| format!("{f}.{k}"))
                            .collect()
                    }
                    _ => vec![],
                };
                if inner.is_empty() {
                    changed_fields.push(f.clone());
                } else {
                    changed_fields.extend(inner);
                }
            }
        }
    }
    let (base_sel, head_sel) = (
        b.and_then(|_| selection_of(&sel.0, &key)),
        h.and_then(|_| selection_of(&sel.1, &key)),
    );
    let resources = match (&base_sel, &head_sel) {
        (Some(bs), Some(hs)) => diff_maps(bs, hs),
        _ => ResourceChanges::default(),
    };
    // A placement held at head takes no new resource snapshot: it stays at the base's, with
    // the base's overrides.
    let head_held = h.is_some_and(|p| p.held().is_some());
    let overrides = match (b, h) {
        _ if head_held => ResourceChanges::default(),
        (Some(_), Some(_)) => diff_maps(
            &overrides_of(base, &sel.0, &key),
            &overrides_of(head, &sel.1, &key),
        ),
        _ => ResourceChanges::default(),
    };
    if !overrides.is_empty() {
        changed_fields.push("overrides".to_string());
    }
    let resources_differ = !(resources.added.is_empty()
        && resources.removed.is_empty()
        && resources.changed.is_empty());
    let resource_snapshot_index = Transition {
        base: base_sel.as_ref().map(|_| 0),
        head: match &head_sel {
            _ if head_held => base_sel.as_ref().map(|_| 0),
            Some(hs) => Some(match &base_sel {
                Some(bs) if resource_hash_of(bs) == resource_hash_of(hs) => 0,
                Some(_) => 1,
                None => 0,
            }),
            None => None,
        },
    };
    let base_selected: BTreeSet<&ClusterName> =
        b.map(|p| p.selected.iter().collect()).unwrap_or_default();
    let head_selected: BTreeSet<&ClusterName> =
        h.map(|p| p.selected.iter().collect()).unwrap_or_default();
    let n_of = |w: &World| -> Option<i32> {
        w.cat
            .placement(&key.name, key.namespace.as_deref())
            .and_then(|e| e.spec.spec.policy_or_default().number_of_clusters)
    };
    let (base_n, head_n) = (b.and(n_of(base)), h.and(n_of(head)));
    let policy_changed = b.and_then(|p| p.policy_snapshot_index)
        != h.and_then(|p| p.policy_snapshot_index)
        && b.is_some()
        && h.is_some();
    let mut gained = Vec::new();
    for c in head_selected.difference(&base_selected) {
        let hd = decision(h, c);
        let bd = decision(b, c);
        let (bs, hs) = (bd.map(score_of), hd.map(score_of));
        let mut reason = String::new();
        if let (Some(bs), Some(hs)) = (&bs, &hs) {
            reason.push_str(&score_change(bs, hs));
        }
        let why = if b.is_none() {
            "new placement".to_string()
        } else if head.fleet.get(c).is_some() && base.fleet.get(c).is_none() {
            "new member cluster".to_string()
        } else if base_n != head_n && !policy_changed {
            format!("numberOfClusters {} → {}", fmt_n(base_n), fmt_n(head_n))
        } else if policy_changed {
            "policy changed".to_string()
        } else {
            "now eligible".to_string()
        };
        push_reason(&mut reason, &why);
        push_reason(&mut reason, "picked by scheduling policy");
        gained.push(ClusterMove {
            cluster: c.to_string(),
            reason,
            base_score: bs,
            head_score: hs,
        });
    }
    let mut lost = Vec::new();
    for c in base_selected.difference(&head_selected) {
        let bd = decision(b, c);
        let hd = decision(h, c);
        let reason = if h.is_none() {
            let abandon = base
                .cat
                .placement(&key.name, key.namespace.as_deref())
                .and_then(|e| e.spec.spec.strategy.delete_strategy.as_ref())
                .and_then(|d| d.propagation_policy)
                == Some(crate::model::placement::PropagationPolicy::Abandon);
            if abandon {
                "placement removed: deleteStrategy Abandon leaves its resources on the cluster"
                    .to_string()
            } else {
                "placement removed: its resources are deleted from the cluster".to_string()
            }
        } else if head
            .fleet
            .get(c)
            .is_none_or(|m| !m.fleet_member && !m.ocm_member)
        {
            "member cluster removed from the repository".to_string()
        } else if base_n != head_n && !policy_changed {
            format!(
                "numberOfClusters {} → {}, lowest score",
                fmt_n(base_n),
                fmt_n(head_n)
            )
        } else {
            let mut r = if policy_changed {
                "policy changed".to_string()
            } else {
                String::new()
            };
            match hd {
                Some(d) => push_reason(&mut r, &d.reason()),
                None => push_reason(&mut r, "not selected"),
            }
            r
        };
        lost.push(ClusterMove {
            cluster: c.to_string(),
            reason,
            base_score: bd.map(score_of),
            head_score: hd.map(score_of),
        });
    }
    let kept: Vec<String> = base_selected
        .intersection(&head_selected)
        .map(|c| c.to_string())
        .collect();
    let winners: Vec<ClusterScore> = match h {
        Some(h) if !lost.is_empty() => h
            .selected
            .iter()
            .filter_map(|c| {
                let score = score_of(decision(Some(h), c)?);
                let scored = score.affinity.is_some()
                    || score.topology_spread.is_some()
                    || score.total.is_some();
                scored.then(|| ClusterScore {
                    cluster: c.to_string(),
                    score,
                })
            })
            .collect(),
        _ => vec![],
    };
    let condition = h.and_then(|p| p.conditions.first().cloned());
    let unfulfilled = condition.as_ref().is_some_and(|c| c.status != "True");
    let mut unschedulable = Vec::new();
    if let Some(h) = h {
        for d in h
            .decisions
            .iter()
            .filter(|d| !d.selected && !d.reason().contains("does not score high enough"))
        {
            let was_same =
                decision(b, &d.cluster).is_some_and(|bd| !bd.selected && bd.reason == d.reason);
            let already_lost = lost.iter().any(|l| l.cluster == d.cluster);
            if (unfulfilled || !was_same) && !already_lost {
                unschedulable.push(ClusterReason {
                    cluster: d.cluster.to_string(),
                    reason: d.reason().into_owned(),
                });
            }
        }
    }
    let change = match (b, h) {
        (None, Some(_)) => Change::Added,
        (Some(_), None) => Change::Removed,
        _ if !changed_fields.is_empty()
            || resources_differ
            || !gained.is_empty()
            || !lost.is_empty() =>
        {
            Change::Changed
        }
        _ => Change::Unchanged,
    };
    let rollout = h
        .filter(|_| !head_held)
        .and_then(|h| rollout_impact((base, head), &sel.1, h, b, &kept, changed, change));
    let feedback = if h.is_some() {
        declared_feedback(head, &key)
    } else {
        Vec::new()
    };
    PlacementPlan {
        policy_snapshot_index: Transition {
            base: b.and_then(|p| p.policy_snapshot_index),
            head: h.and_then(|p| p.policy_snapshot_index),
        },
        key,
        change,
        changed_fields,
        resource_snapshot_index,
        resources,
        overrides,
        gained,
        lost,
        winners,
        kept,
        unschedulable,
        condition,
        rollout,
        story: Default::default(),
        feedback,
    }
}

fn resource_hash_of(sel: &BTreeMap<String, String>) -> String {
    hash_value(&serde_json::to_value(sel).unwrap_or_default())
}

fn fmt_n(n: Option<i32>) -> String {
    n.map_or("-".to_string(), |n| n.to_string())
}

fn push_reason(reason: &mut String, part: &str) {
    if part.is_empty() {
        return;
    }
    if !reason.is_empty() {
        reason.push_str(", ");
    }
    reason.push_str(part);
}

fn decision<'a>(p: Option<&'a PlacementSchedule>, cluster: &str) -> Option<&'a ClusterDecision> {
    p.and_then(|p| p.decisions.iter().find(|d| d.cluster == cluster))
}

fn score_of(d: &ClusterDecision) -> Score {
    Score {
        affinity: d.affinity_score,
        topology_spread: d.topology_spread_score,
        total: d.score,
    }
}

/// `affinity score 20 → 35` for the parts that differ.
fn score_change(b: &Score, h: &Score) -> String {
    let mut parts = Vec::new();
    if let (Some(x), Some(y)) = (b.affinity, h.affinity) {
        if x != y {
            parts.push(format!("affinity score {x} → {y}"));
        }
    }
    if let (Some(x), Some(y)) = (b.topology_spread, h.topology_spread) {
        if x != y {
            parts.push(format!("topology spread score {x} → {y}"));
        }
    }
    if let (Some(x), Some(y)) = (b.total, h.total) {
        if x != y {
            parts.push(format!("score {x} → {y}"));
        }
    }
    parts.join(", ")
}

/// How the head rolls out to the placement's clusters: the rollout core's own preview of the
/// daemon's steps (same pace, target and budget), from the clusters whose manifests change.
/// `None` for a placement that is unchanged and updates no cluster.
fn rollout_impact(
    (base, head): (&World, &World),
    head_sel: &Selections,
    h: &PlacementSchedule,
    b: Option<&PlacementSchedule>,
    kept: &[String],
    changed: &ChangedClusters,
    change: Change,
) -> Option<RolloutImpact> {
    let changed_clusters = changed.get(&h.key);
    let updating: Vec<String> = kept
        .iter()
        .filter(|c| changed_clusters.is_some_and(|cs| cs.contains(c.as_str())))
        .cloned()
        .collect();
    let kubefleet = !matches!(
        h.key.kind,
        PlacementKind::OcmPlacement | PlacementKind::ManifestWork
    );
    let entry = head
        .cat
        .placement(&h.key.name, h.key.namespace.as_deref())
        .filter(|_| kubefleet);
    // Whether a run delivers the commit's resources matters only when some cluster updates.
    let impact_of = |spec| {
        let (stages, mut notes) = staged_impact(base, head, head_sel, h, spec);
        if updating.is_empty() {
            notes.retain(|n| !matches!(n.kind, RunNoteKind::DoesNotDeliver { .. }));
        }
        (stages, notes)
    };
    let mut staged = entry
        .filter(|e| e.spec.spec.strategy.type_ == Some(RolloutStrategyType::External))
        .map(|e| impact_of(&e.spec.spec));
    // A run the head brings moves clusters even when the placement is unchanged; one that
    // fails (or rolls back) is news even when it is not new.
    let runs_news = brings_runs(base, head, &h.key)
        || staged.as_ref().is_some_and(|(_, notes)| !notes.is_empty());
    if change == Change::Unchanged && updating.is_empty() && !runs_news {
        return None;
    }
    let impact = |strategy: Strategy, description: String| RolloutImpact {
        strategy,
        updating: updating.clone(),
        max_unavailable: None,
        max_surge: None,
        description,
        stages: vec![],
        run_notes: vec![],
    };
    if h.key.kind == PlacementKind::OcmPlacement {
        return Some(impact(Strategy::Ocm, ocm_rollout_description(head, h)));
    }
    if h.key.kind == PlacementKind::ManifestWork {
        return Some(impact(
            Strategy::Ocm,
            "the ManifestWork is applied at once on its cluster, as OCM's work agent applies it"
                .into(),
        ));
    }
    let Some(entry) = entry else {
        return Some(impact(Strategy::RollingUpdate, String::new()));
    };
    let updating_set: BTreeSet<&str> = updating.iter().map(String::as_str).collect();
    let change = preview::Change {
        base: b.map_or(&[], |b| b.selected.as_slice()),
        head: &h.selected,
        updating: &updating_set,
    };
    let (budget, steps) = match preview::preview(&entry.spec.spec, change) {
        preview::Preview::Staged => {
            let (stages, run_notes) = staged.take().unwrap_or_else(|| impact_of(&entry.spec.spec));
            let delivering: BTreeSet<&str> = stages
                .iter()
                .filter(|s| s.delivers)
                .map(|s| s.run.as_str())
                .collect();
            let description = if stages.is_empty() && run_notes.is_empty() {
                "strategy External: nothing rolls out until a staged update run names this placement".to_string()
            } else if updating.is_empty() {
                "strategy External: staged update runs roll out stage by stage".to_string()
            } else if delivering.is_empty() {
                "strategy External: no staged update run delivers this change; a new run naming this placement will".to_string()
            } else {
                let runs: Vec<&str> = delivering.into_iter().collect();
                format!(
                    "strategy External: staged update run {} delivers this change stage by stage",
                    runs.join(", ")
                )
            };
            return Some(RolloutImpact {
                stages,
                run_notes,
                ..impact(Strategy::External, description)
            });
        }
        preview::Preview::Rolling { budget, steps } => (budget, steps),
    };
    // maxSurge matters only when clusters are added.
    let adds = h
        .selected
        .iter()
        .any(|c| !b.is_some_and(|b| b.selected.contains(c)));
    let surge = match budget.max_surge {
        _ if !adds => String::new(),
        0 => "; new clusters are added only as others finish".to_string(),
        s => format!("; up to {s} cluster(s) above the target while new clusters are added"),
    };
    let m = budget.max_unavailable;
    let description = match (updating.len(), steps) {
        (0, _) => format!("RollingUpdate: no cluster that stays selected updates{surge}"),
        (n, Some(steps)) => format!(
            "RollingUpdate: {n} cluster(s) update, at most {m} unavailable at a time ({steps} step(s)){surge}"
        ),
        (n, None) => format!(
            "RollingUpdate: {n} cluster(s) should update, but maxUnavailable resolves to {m} of {} cluster(s): none is updated{surge}",
            budget.target
        ),
    };
    Some(RolloutImpact {
        max_unavailable: Some(m),
        max_surge: Some(budget.max_surge),
        ..impact(Strategy::RollingUpdate, description)
    })
}

/// How the replica sets of OCM Placement `h` roll out: at once, or their progressive order by
/// decision group ([`crate::rollout::progressive::order`]).
fn ocm_rollout_description(head: &World, h: &PlacementSchedule) -> String {
    use crate::rollout::progressive;
    let Some(r) = progressive::replica_set_ref(head.cat, &h.key) else {
        return "no ManifestWorkReplicaSet uses this Placement".into();
    };
    let type_ = r.rollout_type();
    match progressive::Strategy::of_progressive(r) {
        None => "the ManifestWorkReplicaSets that use this Placement roll out to every cluster at once (rolloutStrategy All)".into(),
        Some(Ok(s)) => {
            let groups = crate::rollout::step::ocm_groups_of(h);
            format!(
                "{type_:?}: {} (each step once the one before is available)",
                progressive::order_line(&progressive::order(&s, &groups))
            )
        }
        Some(Err(e)) => format!("rolloutStrategy {type_:?} cannot be carried out: {e}"),
    }
}

/// Whether the head has a staged update run for `key` that the base has not (or has otherwise).
fn brings_runs(base: &World, head: &World, key: &PlacementKey) -> bool {
    let runs = |w: &World| -> Vec<Value> {
        w.cat
            .update_runs
            .iter()
            .filter(|e| staged::placement_of(&e.spec) == *key)
            .map(|e| (*w.cat.objects[e.index].value).clone())
            .collect()
    };
    let base_runs = runs(base);
    runs(head).iter().any(|r| !base_runs.contains(r))
}

/// The stages of the head's update runs that roll the placement out, and the notes on them,
/// as the rollout core previews them.
fn staged_impact(
    base: &World,
    head: &World,
    sel: &Selections,
    h: &PlacementSchedule,
    spec: &crate::model::placement::PlacementSpec,
) -> (Vec<StageImpact>, Vec<RunNote>) {
    let resource_hash = sel.of_key(&h.key).map(|r| resource_hash(&r));
    let base_runs: BTreeSet<String> = base
        .cat
        .update_runs
        .iter()
        .filter(|e| staged::placement_of(&e.spec) == h.key)
        .map(|e| crate::rollout::step::run_key_of(&e.spec))
        .collect();
    let at = staged::preview::Commit {
        commit: head.commit,
        cat: head.cat,
        fleet: head.fleet,
        rollout: head.rollout,
        resource_hash: resource_hash.as_deref(),
        base_runs: &base_runs,
    };
    staged::preview::preview(&at, h, spec)
}

/// Fingerprint of everything that shapes one placement's manifests in a world, so clusters
/// whose inputs did not change are not rendered twice.
fn render_inputs(world: &World, sel: &Selections) -> (HashMap<PlacementKey, String>, String) {
    let mut per_placement = HashMap::new();
    for e in &world.cat.placements {
        let ns = world.cat.objects[e.index].namespace.as_deref();
        let id = PlacementKey::new(e.spec.kind, ns, &e.spec.metadata.name);
        if let Some(res) = sel.of(e) {
            per_placement.insert(id, resource_hash(&res));
        }
    }
    for e in &world.cat.manifest_work_replica_sets {
        let ns = world.cat.objects[e.index].namespace.as_deref();
        for r in &e.spec.spec.placement_refs {
            let id = PlacementKey::new(PlacementKind::OcmPlacement, ns, &r.name);
            let h = hash_value(
                &serde_json::to_value(&e.spec.spec.manifest_work_template).unwrap_or_default(),
            );
            per_placement
                .entry(id)
                .and_modify(|x: &mut String| x.push_str(&h))
                .or_insert(h);
        }
    }
    let overrides: Vec<&Value> = world
        .cat
        .objects
        .iter()
        .zip(&world.cat.classes)
        .filter(|(_, c)| **c == crate::catalog::Class::Override)
        .map(|(o, _)| &*o.value)
        .collect();
    (per_placement, hash_value(&serde_json::json!(overrides)))
}

fn compare_clusters(
    base: &World,
    head: &World,
    sel: &(Selections, Selections),
    context: usize,
) -> Vec<ClusterPlan> {
    let (base_inputs, base_overrides) = render_inputs(base, &sel.0);
    let (head_inputs, head_overrides) = render_inputs(head, &sel.1);
    let base_side = Side::new(base, &sel.0, None);
    let head_side = Side::new(head, &sel.1, Some(&base_side));
    // Placements held at head (invalid resource selectors) keep what they placed: their
    // objects are the base's on the head side, never lost.
    let held: BTreeSet<&PlacementKey> = head
        .schedule
        .iter()
        .filter(|p| p.held().is_some())
        .map(|p| &p.key)
        .collect();
    let names: BTreeSet<&str> = base
        .fleet
        .clusters
        .iter()
        .chain(&head.fleet.clusters)
        .map(|c| c.name.as_str())
        .collect();
    // Objects a tool rendered, traced to the file they came from (the head's where both have
    // it).
    let rendered: HashMap<ObjectKey, String> = [base, head]
        .iter()
        .flat_map(|w| &w.cat.objects)
        .filter_map(|o| {
            crate::catalog::unrendered::rendered_by(&o.origin.file)
                .map(|tool| (o.key(), format!("{tool} {}", o.origin.file)))
        })
        .collect();
    let empty = Labels::new();
    let mut diffs = DiffMemo::new(context);
    let mut out = Vec::new();
    for name in names {
        let base_labels = base.fleet.get(name).map_or(&empty, |c| &c.labels);
        let head_labels = head.fleet.get(name).map_or(&empty, |c| &c.labels);
        let (bp, hp) = (base_side.placements_of(name), head_side.placements_of(name));
        let same_inputs = bp == hp
            && base_labels == head_labels
            && base_overrides == head_overrides
            && bp
                .iter()
                .all(|id| base_inputs.get(id) == head_inputs.get(id));
        if same_inputs {
            continue;
        }
        let base_rendered = base_side.render(name, base_labels, false);
        let head_rendered = head_side.render(name, head_labels, base_labels == head_labels);
        let (base_objects, _, _) = base_side.objects(&base_rendered);
        let (mut head_objects, errors, failed) = head_side.objects(&head_rendered);
        for (id, o) in &base_objects {
            if held.contains(o.placement) {
                head_objects.entry(id.clone()).or_insert(Object {
                    value: o.value,
                    at: o.at,
                    placement: o.placement,
                });
            }
        }
        let mut objects = Vec::new();
        let ids: BTreeSet<&Rc<ObjectKey>> =
            base_objects.keys().chain(head_objects.keys()).collect();
        for id in ids {
            let (b, h) = (base_objects.get(id), head_objects.get(id));
            let change = match (b, h) {
                (None, Some(_)) => Change::Added,
                // A placement that fails to render on the head deletes nothing: the daemon
                // reports the failure and leaves what is applied in place.
                (Some(x), None) if failed.contains(x.placement) => continue,
                (Some(_), None) => Change::Removed,
                (Some(_), Some(_)) => Change::Changed,
                (None, None) => continue,
            };
            let Some(diff) = diffs.diff(id, b, h) else {
                continue;
            };
            let Some(placement) = h.or(b).map(|o| o.placement.clone()) else {
                continue;
            };
            objects.push(ObjectDiff {
                key: (**id).clone(),
                object: id.short().to_string(),
                placement,
                change,
                source: rendered.get(id.as_ref()).cloned(),
                diff,
            });
        }
        if !objects.is_empty() || !errors.is_empty() {
            out.push(ClusterPlan {
                cluster: name.to_string(),
                objects,
                errors,
            });
        }
    }
    out
}

/// One world's rendering for the cluster comparison: its [`CommitRenderer`] (each placement
/// rendered once per distinct cluster input) and the placements' ids.
struct Side<'a> {
    renderer: Rc<CommitRenderer<'a>>,
    ids: Vec<PlacementKey>,
    /// The objects' ids of each shared rendering, by its address (renderings live as long as
    /// the renderer, so addresses are not reused).
    object_ids: RefCell<HashMap<usize, Rc<[Rc<ObjectKey>]>>>,
}

/// One rendered object of a cluster: its value, where it sits in a shared rendering (which
/// identifies the value: equal positions, equal values), and the placement delivering it.
struct Object<'r> {
    value: &'r Value,
    at: (usize, usize),
    placement: &'r PlacementKey,
}

/// A cluster's rendered objects by identity; later placements win, as in one apply.
/// By identity: two kinds of one name in different API groups are two objects.
type Objects<'r> = BTreeMap<Rc<ObjectKey>, Object<'r>>;

impl<'a> Side<'a> {
    /// The head's side reuses the base's renderings where a placement renders alike.
    fn new(world: &World<'a>, sel: &Selections<'a>, base: Option<&Side<'a>>) -> Self {
        let renderer = sel.renderer(world.schedule);
        let renderer = match base {
            Some(b) => renderer.reusing(b.renderer.clone()),
            None => renderer,
        };
        Self {
            renderer: Rc::new(renderer),
            ids: world.schedule.iter().map(|p| p.key.clone()).collect(),
            object_ids: RefCell::new(HashMap::new()),
        }
    }

    /// The placements that selected the cluster, in schedule order.
    fn placements_of(&self, cluster: &str) -> Vec<&PlacementKey> {
        self.renderer
            .indices_of(cluster)
            .iter()
            .map(|&i| &self.ids[i])
            .collect()
    }

    /// `same_cluster`: the cluster has the same labels on the other side.
    fn render(
        &self,
        cluster: &str,
        labels: &Labels,
        same_cluster: bool,
    ) -> Vec<(usize, SharedManifests)> {
        let target = ClusterTarget {
            name: cluster,
            labels,
        };
        self.renderer.render_reusing(&target, same_cluster)
    }

    /// A cluster's rendered objects, the rendering errors, and the placements that failed.
    fn objects<'r>(
        &'r self,
        rendered: &'r [(usize, SharedManifests)],
    ) -> (Objects<'r>, Vec<String>, BTreeSet<&'r PlacementKey>) {
        let mut objects = BTreeMap::new();
        let mut errors = Vec::new();
        let mut failed = BTreeSet::new();
        for (i, manifests) in rendered {
            let placement = &self.ids[*i];
            match manifests.as_ref() {
                Ok(ms) => {
                    let rendering = Rc::as_ptr(manifests) as usize;
                    let ids = self
                        .object_ids
                        .borrow_mut()
                        .entry(rendering)
                        .or_insert_with(|| {
                            ms.iter().map(|m| ObjectKey::of(&m.value).into()).collect()
                        })
                        .clone();
                    for (j, m) in ms.iter().enumerate() {
                        let object = Object {
                            value: &m.value,
                            at: (rendering, j),
                            placement,
                        };
                        objects.insert(ids[j].clone(), object);
                    }
                }
                Err(e) => {
                    errors.push(format!("{placement}: {e}"));
                    failed.insert(placement);
                }
            }
        }
        (objects, errors, failed)
    }
}

/// The diffs of object pairs already compared: clusters that render alike share their
/// renderings, so most pairs recur on many clusters and are diffed once.
struct DiffMemo {
    context: usize,
    seen: HashMap<(Option<Position>, Option<Position>), Option<SharedDiff>>,
}

/// A diff text shared by every cluster that has it.
type SharedDiff = Arc<str>;

/// Where an object sits: (address of its shared rendering, index in it).
type Position = (usize, usize);

impl DiffMemo {
    fn new(context: usize) -> Self {
        Self {
            context,
            seen: HashMap::new(),
        }
    }

    /// The unified diff of an object between the two sides, `None` when it is the same.
    fn diff(
        &mut self,
        id: &ObjectKey,
        b: Option<&Object>,
        h: Option<&Object>,
    ) -> Option<SharedDiff> {
        let key = (b.map(|o| o.at), h.map(|o| o.at));
        if key.0.is_some() && key.0 == key.1 {
            // One rendering shared by both sides.
            return None;
        }
        let context = self.context;
        self.seen
            .entry(key)
            .or_insert_with(|| {
                let (bv, hv) = (b.map(|o| o.value), h.map(|o| o.value));
                if bv == hv {
                    return None;
                }
                let (bt, ht) = masked_yaml(bv, hv);
                Some(unified(&bt, &ht, &id.short().to_string(), context).into())
            })
            .clone()
    }
}

/// YAML of both sides with Secret values masked: `***` where equal, `*** (changed)` where the
/// head's value differs, so a review sees that a secret changed but never its value.
fn masked_yaml(b: Option<&Value>, h: Option<&Value>) -> (String, String) {
    let is_secret = crate::render::is_secret;
    let yaml = |v: Option<&Value>| {
        v.map(|v| crate::yaml::to_string(v).unwrap_or_default())
            .unwrap_or_default()
    };
    if !(b.is_some_and(is_secret) || h.is_some_and(is_secret)) {
        // Nothing to mask: written from the values as they are, not from copies.
        return (yaml(b), yaml(h));
    }
    let mut b = b.cloned();
    let mut h = h.cloned();
    {
        for field in ["data", "stringData"] {
            let base_map = b
                .as_ref()
                .and_then(|v| v.get(field))
                .and_then(Value::as_object)
                .cloned();
            if let Some(m) = h
                .as_mut()
                .and_then(|v| v.get_mut(field))
                .and_then(Value::as_object_mut)
            {
                for (k, val) in m.iter_mut() {
                    // Changed only when the base had this key with another value.
                    let before = base_map.as_ref().and_then(|bm| bm.get(k));
                    let changed = before.is_some_and(|v| v != val);
                    *val = Value::String(if changed { "*** (changed)" } else { "***" }.into());
                }
            }
            if let Some(m) = b
                .as_mut()
                .and_then(|v| v.get_mut(field))
                .and_then(Value::as_object_mut)
            {
                for val in m.values_mut() {
                    *val = Value::String("***".into());
                }
            }
        }
    }
    (yaml(b.as_ref()), yaml(h.as_ref()))
}

fn unified(base: &str, head: &str, id: &str, context: usize) -> String {
    similar::TextDiff::from_lines(base, head)
        .unified_diff()
        .context_radius(context)
        .header(&format!("base/{id}"), &format!("head/{id}"))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three members with `labels` (YAML flow maps), an External placement, a strategy with
    /// `stages` (YAML, indented as list items of `spec.stages`) and, with `run`, run r1.
    fn staged_fleet(labels: [&str; 3], stages: &str, run: bool) -> Catalog {
        staged_fleet_with(labels, stages, run, "")
    }

    /// [`staged_fleet`] and `extra` documents.
    fn staged_fleet_with(labels: [&str; 3], stages: &str, run: bool, extra: &str) -> Catalog {
        let mut y = String::from("apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n");
        for (i, l) in labels.iter().enumerate() {
            y.push_str(&format!(
                "---\napiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
                 metadata: {{name: m{}, labels: {l}}}\n\
                 spec: {{identity: {{name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}}}\n",
                i + 1
            ));
        }
        y.push_str(
            "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\n\
             metadata: {name: app}\nspec:\n  resourceSelectors: [{group: '', version: v1, kind: Namespace, name: app}]\n\
             \x20 policy: {placementType: PickAll}\n  strategy: {type: External}\n\
             ---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateStrategy\n\
             metadata: {name: s}\nspec:\n  stages:\n",
        );
        y.push_str(stages);
        if run {
            y.push_str(
                "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateRun\n\
                 metadata: {name: r1}\nspec: {placementName: app, stagedRolloutStrategyName: s, state: Run}\n",
            );
        }
        y.push_str(extra);
        let (cat, diags) = crate::analyze(&[crate::catalog::SourceFile {
            path: "fleet.yaml".into(),
            content: y.into_bytes(),
        }]);
        assert!(diags.is_empty(), "{diags:#?}");
        cat
    }

    /// What the daemon records when it first steps run r1 of `cat`: its stages, or the
    /// `Initialized=False` message.
    fn daemon_initialises(cat: &Catalog) -> Result<Vec<Vec<String>>, String> {
        use crate::rollout::staged::status;
        let fleet = Fleet::build(cat, None);
        let schedule = schedule_commit(
            cat,
            &crate::snapshot::invalid_selections(cat),
            &fleet,
            &Previous::new(),
            0,
        );
        let none = BTreeMap::new();
        let input = crate::rollout::Input {
            cat,
            commit: "head",
            schedule: &schedule,
            fleet: &fleet,
            unreachable: &none,
            only: None,
            now: 0,
            staged: Default::default(),
            selected: None,
        };
        let decision = crate::rollout::step(
            &input,
            &RolloutState::default(),
            crate::rollout::Pacing::Rolling,
        );
        let st = decision.ledger.runs["r1"].clone().expect("a record");
        match status::find(&st.conditions, status::INITIALIZED) {
            Some(c) if c.status == "False" => Err(c.message.clone()),
            _ => Ok(
                crate::rollout::staged::init::stage_clusters(&st.stages_status)
                    .into_iter()
                    .map(|(_, c)| c)
                    .collect(),
            ),
        }
    }

    /// What plan shows of run r1 when the head brings it: its stages' clusters, or the
    /// initialisation failure it reports.
    fn plan_shows(base: &Catalog, head: &Catalog) -> Result<Vec<Vec<String>>, String> {
        let previous = Previous::new();
        let inputs = Inputs {
            inventory: None,
            previous: &previous,
            rollout: None,
            now_unix: 0,
        };
        let plan = plan_catalogs(("base", base), ("head", head), &inputs, &Options::default());
        let rollout = plan.placements[0]
            .rollout
            .clone()
            .expect("a rollout impact");
        match rollout.run_notes.as_slice() {
            [] => Ok(rollout.stages.into_iter().map(|s| s.clusters).collect()),
            [RunNote {
                run,
                kind: RunNoteKind::InitializationFailed,
                message,
            }] if run == "r1" => Err(message.clone()),
            other => panic!("{other:#?}"),
        }
    }

    /// Two kinds of one name in different API groups are two objects: each is planned (the
    /// group is part of an object's identity, as in Kubernetes).
    #[test]
    fn objects_of_the_same_kind_and_name_in_two_groups_are_both_planned() {
        let fleet = "apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n\
            ---\napiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
            metadata: {name: m1}\n\
            spec: {identity: {name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}\n\
            ---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\n\
            metadata: {name: app}\n\
            spec: {resourceSelectors: [{group: '', version: v1, kind: Namespace, name: app}], policy: {placementType: PickAll}}\n";
        let crd = |group: &str| {
            format!(
                "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
                 metadata: {{name: widgets.{group}}}\n\
                 spec: {{group: {group}, scope: Namespaced, names: {{kind: Widget, plural: widgets}}, \
                 versions: [{{name: v1, served: true, storage: true}}]}}\n"
            )
        };
        let fleet = format!("{fleet}{}{}", crd("a.example.com"), crd("b.example.com"));
        let fleet = fleet.as_str();
        let widgets = "---\napiVersion: a.example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: app}\n\
            ---\napiVersion: b.example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: app}\n";
        let catalog = |y: String| {
            let (cat, diags) = crate::analyze(&[crate::catalog::SourceFile {
                path: "fleet.yaml".into(),
                content: y.into_bytes(),
            }]);
            assert!(diags.is_empty(), "{diags:#?}");
            cat
        };
        let (base, head) = (catalog(fleet.into()), catalog(format!("{fleet}{widgets}")));
        let previous = Previous::new();
        let inputs = Inputs {
            inventory: None,
            previous: &previous,
            rollout: None,
            now_unix: 0,
        };
        let plan = plan_catalogs(
            ("base", &base),
            ("head", &head),
            &inputs,
            &Options::default(),
        );
        let m1 = plan
            .clusters
            .iter()
            .find(|c| c.cluster == "m1")
            .unwrap_or_else(|| panic!("m1 is planned: {plan:#?}"));
        let added: Vec<(&str, &str)> = m1
            .objects
            .iter()
            .filter(|o| o.change == Change::Added)
            .map(|o| (o.object.as_str(), &*o.diff))
            .collect();
        assert_eq!(added.len(), 2, "{added:#?}");
        assert!(
            added.iter().all(|(id, _)| *id == "Widget/app/w"),
            "{added:#?}"
        );
        for group in ["a.example.com", "b.example.com"] {
            let api_version = format!("apiVersion: {group}/v1");
            assert!(
                added.iter().any(|(_, d)| d.contains(&api_version)),
                "{added:#?}"
            );
        }
    }

    /// `plan` shows the stages the daemon's initialisation cuts, and where plan's own rules
    /// used to differ from it (a missing or non-integer sorting label, a cluster in two
    /// stages, integer order), plan reports the daemon's own outcome, word for word.
    #[test]
    fn plan_shows_the_stages_or_the_initialisation_failure_the_daemon_records() {
        let by_order = "  - name: all\n    labelSelector: {}\n    sortingLabelKey: order\n";
        let two_stages = "  - name: first\n    labelSelector: {matchLabels: {env: a}}\n\
                          \x20 - name: second\n    labelSelector: {matchLabels: {tier: x}}\n";
        // (the members' labels, the strategy's stages, the stages' clusters or the failure)
        type Case<'a> = ([&'a str; 3], &'a str, Result<Vec<Vec<&'a str>>, &'a str>);
        let cases: [Case; 4] = [
            (
                ["{order: '10'}", "{order: '9'}", "{order: '0'}"],
                by_order,
                Ok(vec![vec!["m3", "m2", "m1"]]),
            ),
            (
                ["{order: '1'}", "{}", "{order: '2'}"],
                by_order,
                Err("the sorting label `order:` on cluster `m2` is not valid: strconv.Atoi: parsing \"\": invalid syntax"),
            ),
            (
                ["{order: '1'}", "{order: two}", "{order: '2'}"],
                by_order,
                Err("the sorting label `order:two` on cluster `m2` is not valid"),
            ),
            (
                ["{env: a}", "{env: a, tier: x}", "{tier: x}"],
                two_stages,
                Err("cluster `m2` appears in more than one stages"),
            ),
        ];
        for (labels, stages, want) in cases {
            let base = staged_fleet(labels, stages, false);
            let head = staged_fleet(labels, stages, true);
            let daemon = daemon_initialises(&head);
            let planned = plan_shows(&base, &head);
            assert_eq!(planned, daemon, "{labels:?}");
            match want {
                Ok(order) => assert_eq!(
                    daemon,
                    Ok(order
                        .iter()
                        .map(|s| s.iter().map(|c| c.to_string()).collect())
                        .collect()),
                    "{labels:?}"
                ),
                Err(part) => {
                    let msg = daemon.expect_err("the daemon fails the run");
                    assert!(msg.contains(part), "{labels:?}: {msg}");
                }
            }
        }
    }

    /// A run started earlier that has clusters left to update which a newer run moved to a
    /// newer snapshot: with the daemon's state, plan says the run moves them back, with the
    /// run, the clusters and both indices — the rollout core's own finding (`RollingBack`).
    #[test]
    fn plan_says_when_a_run_moves_clusters_back_to_an_older_snapshot() {
        use crate::rollout::{absorb, step, BindingHealth, Input, Outcome, Pacing};
        let two_stages = "  - name: first\n    labelSelector: {matchLabels: {env: a}}\n\
                          \x20   afterStageTasks: [{type: Approval}]\n\
                          \x20 - name: second\n    labelSelector: {matchLabels: {env: b}}\n";
        let labels = ["{env: a}", "{env: b}", "{env: b}"];
        let r2 = "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\n\
            kind: ClusterStagedUpdateStrategy\nmetadata: {name: fast}\n\
            spec:\n  stages:\n  - name: all\n    labelSelector: {}\n    maxConcurrency: 3\n\
            ---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateRun\n\
            metadata: {name: r2}\nspec: {placementName: app, stagedRolloutStrategyName: fast, state: Run}\n\
            ---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: v2, namespace: app}\n";
        let c1 = staged_fleet(labels, two_stages, true);
        let c2 = staged_fleet_with(labels, two_stages, true, r2);
        // The daemon: r1 (snapshot 0) updates m1 and waits for its approval; r2 (snapshot 1,
        // new content) moves every cluster.
        let mut state = RolloutState::default();
        let mut previous = Previous::new();
        let mut catalogs = BTreeMap::new();
        for (now, (sha, cat)) in [("c1", &c1), ("c1", &c1), ("c2", &c2), ("c2", &c2)]
            .into_iter()
            .enumerate()
        {
            let fleet = Fleet::build(cat, None);
            let mut schedule = schedule_commit(
                cat,
                &crate::snapshot::invalid_selections(cat),
                &fleet,
                &previous,
                now as i64,
            );
            let none = BTreeMap::new();
            let input = Input {
                cat,
                commit: sha,
                schedule: &schedule,
                fleet: &fleet,
                unreachable: &none,
                only: None,
                now: now as u64,
                staged: crate::rollout::StagedInput {
                    approvals: BTreeMap::new(),
                    catalogs: catalogs.clone(),
                },
                selected: None,
            };
            let d = step(&input, &state, Pacing::Rolling);
            let results = d
                .work
                .into_iter()
                .map(|w| {
                    (
                        w,
                        Outcome::Done(BindingHealth::Available, Default::default()),
                    )
                })
                .collect();
            absorb(
                &mut state,
                &mut schedule,
                d.ledger,
                results,
                sha,
                now as u64,
            );
            catalogs.insert(sha.to_string(), Arc::new(cat.clone()));
            previous = schedule.into_iter().map(|p| (p.key.clone(), p)).collect();
        }
        use crate::rollout::staged::rollback::ROLLING_BACK;
        let daemon_says =
            crate::rollout::staged::status::find(&state.runs["r1"].conditions, ROLLING_BACK)
                .expect("r1 says it rolls back")
                .message
                .clone();
        assert_eq!(
            daemon_says,
            "The updateRun r1 moves clusters m2, m3 from resource snapshot index 1 back to the older index 0"
        );
        // A pull request touching the placement's content again, planned with that state.
        let c3 = staged_fleet_with(
            labels,
            two_stages,
            true,
            &format!(
                "{r2}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x, namespace: app}}\n"
            ),
        );
        let inputs = Inputs {
            inventory: None,
            previous: &previous,
            rollout: Some(&state),
            now_unix: 10,
        };
        let plan = plan_catalogs(("c2", &c2), ("c3", &c3), &inputs, &Options::default());
        let rollout = plan.placements[0]
            .rollout
            .clone()
            .expect("a rollout impact");
        let note = rollout
            .run_notes
            .iter()
            .find(|n| n.run == "r1")
            .unwrap_or_else(|| panic!("{rollout:#?}"));
        assert_eq!(note.message, daemon_says);
        let RunNoteKind::RollsBack { to, clusters } = &note.kind else {
            panic!("{note:#?}");
        };
        assert_eq!(*to, 0);
        let moved: Vec<(&str, u64)> = clusters
            .iter()
            .map(|c| (c.cluster.as_str(), c.from))
            .collect();
        assert_eq!(moved, [("m2", 1), ("m3", 1)]);
        let text = format::text(&plan, false);
        assert!(
            text.contains("run r1 rolls back: The updateRun r1 moves clusters m2, m3"),
            "{text}"
        );
    }

    /// `gitfleet plan` shows which cluster an eviction the head brings takes the placement
    /// from, and whether the disruption budget allows it (the base taken as rolled out).
    #[test]
    fn plan_shows_what_an_eviction_takes_and_whether_the_budget_allows_it() {
        let members = |tainted: bool| {
            (1..=3)
                .map(|i| {
                    let taint = if tainted && i == 1 {
                        ", taints: [{key: evict, value: 'yes', effect: NoSchedule}]"
                    } else {
                        ""
                    };
                    format!(
                        "---\napiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
                         metadata: {{name: m{i}}}\n\
                         spec: {{identity: {{name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}{taint}}}\n"
                    )
                })
                .collect::<String>()
        };
        let crp = "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\n\
            metadata: {name: app}\n\
            spec: {resourceSelectors: [{group: '', version: v1, kind: Namespace, name: app}], policy: {placementType: PickAll}}\n";
        let eviction = "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacementEviction\n\
            metadata: {name: e1}\nspec: {placementName: app, clusterName: m1}\n";
        let budget = |min: u32| {
            format!(
                "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacementDisruptionBudget\n\
                 metadata: {{name: app}}\nspec: {{minAvailable: {min}}}\n"
            )
        };
        let catalog = |y: String| {
            let (cat, diags) = crate::analyze(&[crate::catalog::SourceFile {
                path: "fleet.yaml".into(),
                content: format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: app}}\n{y}")
                    .into_bytes(),
            }]);
            assert!(diags.is_empty(), "{diags:#?}");
            cat
        };
        let previous = Previous::new();
        let inputs = Inputs {
            inventory: None,
            previous: &previous,
            rollout: None,
            now_unix: 0,
        };
        let base = catalog(format!("{}{crp}{}", members(false), budget(2)));
        let allowed = catalog(format!("{}{crp}{}{eviction}", members(true), budget(2)));
        let plan = plan_catalogs(("b", &base), ("h", &allowed), &inputs, &Options::default());
        assert_eq!(
            plan.evictions,
            vec![EvictionPlan {
                name: "e1".into(),
                placement: "crp/app".into(),
                cluster: "m1".into(),
                outcome: EvictionOutcome::Executed,
                message: "Eviction is allowed by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: 3, totalPlacements: 3".into(),
            }]
        );
        let lost: Vec<&str> = plan.placements[0]
            .lost
            .iter()
            .map(|m| m.cluster.as_str())
            .collect();
        assert_eq!(lost, ["m1"]);
        let text = format::text(&plan, false);
        assert!(
            text.contains("- e1: crp/app loses m1: Eviction is allowed"),
            "{text}"
        );

        let blocked = catalog(format!("{}{crp}{}{eviction}", members(true), budget(3)));
        let plan = plan_catalogs(("b", &base), ("h", &blocked), &inputs, &Options::default());
        assert_eq!(plan.evictions[0].outcome, EvictionOutcome::Blocked);
        assert!(plan.placements[0].lost.is_empty());
        let text = format::text(&plan, false);
        assert!(
            text.contains("! e1: crp/app keeps m1 (not executed): Eviction is blocked by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: 3, totalPlacements: 3"),
            "{text}"
        );

        // Judged already: an eviction the base has is not judged again.
        let plan = plan_catalogs(
            ("b", &blocked),
            ("h", &blocked),
            &inputs,
            &Options::default(),
        );
        assert!(plan.evictions.is_empty());
    }
}
