//! What a rollout remembers between steps: the commit it serves, the last rejected commit, per
//! placement its resource snapshot history and what every cluster was last given (with the
//! health push reported), and each member's last good probe. Values only: the state store
//! (`crate::state`) reads and writes them, crash-safely, in the format gitfleet 0.1.0 wrote.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::rolling::{BindingHealth, Revision};
use super::staged::RunStatus;
use crate::model::{ClusterMap, ClusterName, ObjectKey, PlacementKey, SharedText};
use crate::schedule::{Inventory, InventoryCluster};
use crate::snapshot::History;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutState {
    /// The last commit that validated and is being rolled out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<String>,
    /// The newest commit that failed validation, and why; cleared by the next good commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<Rejected>,
    /// Under `--verify-commits`, the commit served whose signature verified when it began to
    /// be served ([`super::serve`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<super::serve::Verified>,
    /// The newest commit the deletion guard holds ([`super::guard`]); cleared when a head is
    /// served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<super::guard::Held>,
    /// By placement; in the file, by id (`crp/NAME`, `rp/NS/NAME`, `ocm/NS/NAME`). Shared
    /// (`Arc`) with the step memo, the status and the store's last save, and copied on write
    /// (`Arc::make_mut`): what a reconcile did not change is neither copied nor written again.
    #[serde(default, with = "crate::model::placement_key::by_id_shared")]
    pub placements: BTreeMap<PlacementKey, Arc<PlacementState>>,
    /// Each member's last successful probe and when it was made (unix seconds).
    #[serde(default)]
    pub members: BTreeMap<String, LastProbe>,
    /// Staged update runs' progress, by run key (`<name>` or `<namespace>/<name>`). Absent in
    /// state files written before staged runs existed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub runs: BTreeMap<String, RunStatus>,
    /// Keys of runs that left the repository while clusters still name them as what delivered
    /// their resources: a run of the same name added again is a new run, not the finished one
    /// those deliveries (and the members' records) name. Kept while a cluster names the run.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub ended_runs: BTreeSet<String>,
    /// Evictions judged, by name, while the repository keeps them ([`super::eviction`]): an
    /// eviction is judged once. Absent in state files written before evictions were carried
    /// out.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub evictions: BTreeMap<String, super::eviction::EvictionRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastProbe {
    pub at: u64,
    /// Shared: the state is copied and compared at every save.
    pub cluster: Arc<InventoryCluster>,
}

/// How long a member stays eligible for new placements after its last successful probe
/// (docs/guides/concepts.md).
pub const ELIGIBLE_FOR: u64 = 300;

/// Why a cluster is re-applied at the next step ([`RolloutState::recheck`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RecheckCause {
    /// The members' watch saw an object changed or deleted on the member: drift.
    ChangedOnTheMember,
    /// Something may have changed unseen: a restarted watch, a start, the periodic resync.
    MayHaveChanged,
    /// Only the status of an object an OCM work's rules read changed: the cluster is read
    /// again (a push that changes nothing), no drift.
    StatusChanged,
}

impl RecheckCause {
    /// Its name in metrics.
    pub fn name(self) -> &'static str {
        match self {
            RecheckCause::ChangedOnTheMember => "changed",
            RecheckCause::MayHaveChanged => "watch_restarted",
            RecheckCause::StatusChanged => "status",
        }
    }
}

/// One change to mark for a re-apply ([`RolloutState::recheck_each`]).
#[derive(Debug, Clone, Copy)]
pub struct Recheck<'a> {
    pub member: &'a str,
    /// Only what this placement (by its label) put on the member; every placement when `None`
    /// (for a status change: every placement whose last push read a status there).
    pub placement_label: Option<&'a str>,
    pub why: &'a str,
    pub cause: RecheckCause,
    /// The change deleted an object.
    pub deleted: bool,
}

impl RolloutState {
    /// Marks what `placement_label` (every placement when `None`) put on `member` for a
    /// re-apply at the next step, because of `why`. A deletion makes the cluster not available
    /// until the re-apply says otherwise: status tells the member's truth, not the last push.
    /// Returns how many clusters were marked.
    pub fn recheck(
        &mut self,
        member: &str,
        placement_label: Option<&str>,
        (why, cause): (&str, RecheckCause),
        deleted: bool,
        now: u64,
    ) -> usize {
        let change = Recheck {
            member,
            placement_label,
            why,
            cause,
            deleted,
        };
        self.recheck_each(&[change], now)[0]
    }

    /// [`Self::recheck`] of each change, in order; how many clusters each marked. One pass
    /// over the placements for them all: a shard that changes owner marks each of its
    /// members, and a pass per member over every placement costs members × placements.
    pub fn recheck_each(&mut self, changes: &[Recheck<'_>], now: u64) -> Vec<usize> {
        let mut marked = vec![0; changes.len()];
        let mut by_member: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, c) in changes.iter().enumerate() {
            by_member.entry(c.member).or_default().push(i);
        }
        let whys: Vec<SharedText> = changes.iter().map(|c| SharedText::from(c.why)).collect();
        let mut reached: Vec<&str> = Vec::new();
        let mut applying: Vec<(&str, usize)> = Vec::new();
        for (key, ps) in &mut self.placements {
            // The members first, from the smaller side: most placements of a large fleet do
            // not reach a given member, and the label is built only for those that do.
            reached.clear();
            if by_member.len() <= ps.clusters.len() {
                reached.extend(by_member.keys().filter(|m| ps.clusters.contains_key(m)));
            } else {
                reached.extend(
                    ps.clusters
                        .keys()
                        .filter_map(|m| by_member.get_key_value(m.as_str()).map(|(k, _)| *k)),
                );
            }
            if reached.is_empty() {
                continue;
            }
            let label = key.label_value();
            applying.clear();
            for member in &reached {
                // A member's statuses as a whole (no placement named) are re-read only where
                // the last push read one.
                let reads_status = || {
                    ps.clusters
                        .get(member)
                        .is_some_and(|c| c.details.work_status.is_some())
                };
                applying.extend(
                    by_member[member]
                        .iter()
                        .filter(|&&i| match changes[i].placement_label {
                            Some(l) => l == label,
                            None => {
                                changes[i].cause != RecheckCause::StatusChanged || reads_status()
                            }
                        })
                        .map(|&i| (*member, i)),
                );
            }
            if applying.is_empty() {
                continue;
            }
            // Copied only when shared (with the state store's record of the last save).
            let ps = Arc::make_mut(ps);
            for &(member, i) in &applying {
                let Some(c) = ps.clusters.get_mut(member) else {
                    continue;
                };
                let change = &changes[i];
                marked[i] += 1;
                if change.cause == RecheckCause::StatusChanged {
                    c.reread = true;
                    continue;
                }
                c.recheck = Some(whys[i].clone());
                c.drift = change.cause == RecheckCause::ChangedOnTheMember;
                if change.deleted && c.health != BindingHealth::Failed {
                    c.health = BindingHealth::Pending;
                    c.updated_at = now;
                }
            }
        }
        marked
    }

    /// Shares equal values between the clusters' entries, as the pushes that made them did (a
    /// state read back has one of each per cluster): each placement's object sets, and the
    /// clusters' names, renderings, commits and run deliveries of every placement. A placement
    /// whose values are shared already is not touched (nor copied, when a store shares it too).
    pub fn share_equal_values(&mut self) {
        let mut shared = Shared::default();
        for ps in self.placements.values_mut() {
            shared.objects.clear();
            let names = &mut shared.names;
            if ps.clusters.keys().all(|n| held(names, n))
                && ps.clusters.values().all(|c| shared.holds(c))
            {
                continue;
            }
            shared.objects.clear();
            let clusters = &mut Arc::make_mut(ps).clusters;
            clusters.share_keys(|n| share(&mut shared.names, n));
            for c in clusters.values_mut() {
                shared.share(c);
            }
        }
    }

    /// Marks every cluster of every placement for a re-apply (start-up, periodic resync).
    pub fn recheck_all(&mut self, why: &str) {
        // One for every cluster: a start marks them all at once.
        let why = SharedText::from(why);
        for ps in self.placements.values_mut() {
            for c in Arc::make_mut(ps).clusters.values_mut() {
                c.recheck = Some(why.clone());
                c.drift = false;
            }
        }
    }

    /// Records this probe's healthy members, and returns the inventory to schedule with: a
    /// member whose probe failed keeps its last good answer while that is at most
    /// [`ELIGIBLE_FOR`] seconds old; after that it is unhealthy. `answered_at`: when each
    /// member's answer came (Unix seconds; `now` for those not known), so that an answer
    /// reused until the member's next probe is remembered once, not again at every step.
    ///
    /// `known`: the last call was given this very inventory, so that its healthy answers are
    /// remembered as they are and only their times can be new (the daemon's looks between
    /// probes: comparing every member's answer at every look is a cost those looks avoid).
    /// The probe itself is returned, not a copy, when no member needs its last good answer.
    pub fn remember_probe(
        &mut self,
        probe: &Arc<Inventory>,
        known: bool,
        answered_at: &dyn Fn(&str) -> Option<u64>,
        now: u64,
    ) -> Arc<Inventory> {
        let mut substituted: Vec<(usize, Arc<InventoryCluster>)> = Vec::new();
        for (i, c) in probe.clusters.iter().enumerate() {
            if c.healthy {
                let at = answered_at(&c.name).unwrap_or(now);
                match self.members.get_mut(&c.name) {
                    Some(l) if known || l.cluster == *c => l.at = at,
                    _ => {
                        let last = LastProbe {
                            at,
                            cluster: c.clone(),
                        };
                        self.members.insert(c.name.clone(), last);
                    }
                }
            } else if let Some(last) = self
                .members
                .get(&c.name)
                .filter(|l| now.saturating_sub(l.at) <= ELIGIBLE_FOR)
            {
                substituted.push((i, last.cluster.clone()));
            }
        }
        if substituted.is_empty() {
            return probe.clone();
        }
        let mut out = Inventory::clone(probe);
        for (i, c) in substituted {
            out.clusters[i] = c;
        }
        Arc::new(out)
    }
}

/// One of each value the entries share ([`RolloutState::share_equal_values`]).
#[derive(Default)]
struct Shared {
    objects: HashSet<Arc<BTreeSet<ObjectKey>>>,
    strings: HashSet<SharedText>,
    /// The clusters' names: a state read back has one per entry.
    names: HashSet<ClusterName>,
    runs: HashSet<Arc<super::staged::RunDelivery>>,
}

type HashSet<T> = crate::fast_hash::HashSet<T>;

impl Shared {
    /// Whether every shared value of `c` is the one held (those not held yet are from now on).
    fn holds(&mut self, c: &ClusterState) -> bool {
        held(&mut self.objects, &c.objects)
            && [&c.revision, &c.details.attempted]
                .into_iter()
                .flatten()
                .all(|r| held(&mut self.strings, &r.rendered))
            && c.commit.iter().all(|t| held(&mut self.strings, t))
            && c.delivered_by.iter().all(|d| held(&mut self.runs, d))
    }

    /// Makes `c`'s values the ones held, holding those not held yet.
    fn share(&mut self, c: &mut ClusterState) {
        share(&mut self.objects, &mut c.objects);
        if let Some(r) = &mut c.revision {
            share(&mut self.strings, &mut r.rendered);
        }
        if let Some(r) = c.details.0.as_mut().and_then(|d| d.attempted.as_mut()) {
            share(&mut self.strings, &mut r.rendered);
        }
        if let Some(commit) = &mut c.commit {
            share(&mut self.strings, commit);
        }
        if let Some(run) = &mut c.delivered_by {
            share(&mut self.runs, run);
        }
    }
}

/// A value behind a shared pointer, one of many equal ones until they are made one.
trait Shareable: Clone + Eq + std::hash::Hash {
    /// Whether `self` and `other` are the same allocation.
    fn same(&self, other: &Self) -> bool;
}

impl<T: Eq + std::hash::Hash + ?Sized> Shareable for Arc<T> {
    fn same(&self, other: &Self) -> bool {
        Arc::ptr_eq(self, other)
    }
}

impl Shareable for ClusterName {
    fn same(&self, other: &Self) -> bool {
        ClusterName::ptr_eq(self, other)
    }
}

impl Shareable for SharedText {
    fn same(&self, other: &Self) -> bool {
        SharedText::ptr_eq(self, other)
    }
}

/// Whether `value` is the one `held` holds equal to it (held from now on when none was).
fn held<T: Shareable>(held: &mut HashSet<T>, value: &T) -> bool {
    match held.get(value) {
        Some(h) => h.same(value),
        None => held.insert(value.clone()),
    }
}

/// Makes `value` the one `held` holds equal to it (held from now on when none was).
fn share<T: Shareable>(held: &mut HashSet<T>, value: &mut T) {
    match held.get(value) {
        Some(h) => {
            if !h.same(value) {
                *value = h.clone();
            }
        }
        None => {
            held.insert(value.clone());
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rejected {
    pub commit: String,
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementState {
    #[serde(default)]
    pub resources: History,
    /// `deleteStrategy.propagationPolicy: Abandon`, kept for when the placement is deleted.
    #[serde(default)]
    pub abandon: bool,
    /// By cluster name: what the cluster was last given by this placement.
    #[serde(default)]
    pub clusters: ClusterStates,
}

/// A placement's clusters' entries, by name: one per binding, so kept without a map's nodes.
pub type ClusterStates = ClusterMap<ClusterState>;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "ClusterRecord")]
pub struct ClusterState {
    /// What was last pushed successfully; `None` when nothing was yet.
    pub revision: Option<Revision>,
    /// The commit whose push delivered `revision` (a later push of the same revision, a
    /// re-check's, keeps it). Shared by the clusters a delivery pushed it to.
    pub commit: Option<SharedText>,
    pub health: BindingHealth,
    /// What the last push reported beyond the health, and a failed push's revision and error.
    pub details: Details,
    /// The member changed what this placement put there (an object deleted or modified, seen
    /// by the daemon's watch, or the periodic resync): re-applied at the next step, whatever
    /// its health, and cleared by that push. Why, for status and logs (shared by the clusters
    /// one change marked).
    pub recheck: Option<SharedText>,
    /// The re-check is for a change the members' watch saw on the member (not a start or a
    /// resync): what notifications call drift. Cleared with `recheck`.
    pub drift: bool,
    /// The status an OCM work's rules read changed on the member: pushed again at the next
    /// step (a write that changes nothing) to read it. Not a re-check: nothing drifted, and
    /// status keeps saying what it said. Cleared by that push; never saved.
    pub reread: bool,
    /// The staged update run that delivered `revision`, as the member's record names it too:
    /// what a finished run is known by when the state is rebuilt from the members. Behind a
    /// pointer: most entries have none, and the delivery is five strings wide.
    pub delivered_by: Option<Arc<super::staged::RunDelivery>>,
    /// Unix seconds of the last change of this entry.
    pub updated_at: u64,
    /// The objects the last successful push put there (written as their ids): what
    /// the deletion guard counts as managed. Empty in state written before the guard existed
    /// (such a cluster counts once it is next applied).
    /// Shared (`Arc`) between the clusters of a placement that were given the same rendering:
    /// one set per rendering, not one per binding.
    pub objects: Arc<std::collections::BTreeSet<ObjectKey>>,
}

/// A cluster's [`DetailFields`], behind a pointer that is null when they are all empty: an
/// entry is kept per binding, and most entries (a push that went well, with nothing to report)
/// have none of them. Reads through to the fields (empty ones when there are none);
/// [`Details::make_mut`] to change them.
#[derive(Debug, Clone, Default)]
pub struct Details(Option<Box<DetailFields>>);

/// What few clusters' entries hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DetailFields {
    /// A revision whose push failed (the cluster still runs `revision`); retried.
    pub attempted: Option<Revision>,
    /// Differences the last push reported (ReportDiff, or drift seen under FullComparison).
    pub diffs: Vec<String>,
    /// Objects the last push found not available yet, and why: what a pending cluster waits
    /// for.
    pub not_available: Vec<String>,
    /// An OCM work's status as its feedback and condition rules read it at the last push
    /// (only for manifests that have rules; [`crate::feedback`]). Shared: published statuses
    /// read it through.
    pub work_status: Option<Arc<crate::feedback::WorkStatus>>,
    pub last_error: Option<String>,
}

static NO_DETAILS: DetailFields = DetailFields {
    attempted: None,
    diffs: Vec::new(),
    not_available: Vec::new(),
    work_status: None,
    last_error: None,
};

impl DetailFields {
    fn is_empty(&self) -> bool {
        *self == NO_DETAILS
    }
}

impl Details {
    /// `fields`, boxed only when there is something in them.
    pub fn new(fields: DetailFields) -> Details {
        Details((!fields.is_empty()).then(|| Box::new(fields)))
    }

    /// The fields, when there are any (boxed).
    pub fn boxed(&self) -> Option<&DetailFields> {
        self.0.as_deref()
    }

    /// The fields to change (boxed from now on).
    pub fn make_mut(&mut self) -> &mut DetailFields {
        self.0.get_or_insert_with(Default::default)
    }
}

impl std::ops::Deref for Details {
    type Target = DetailFields;

    fn deref(&self) -> &DetailFields {
        self.0.as_deref().unwrap_or(&NO_DETAILS)
    }
}

/// Equal when they say the same, boxed or not.
impl PartialEq for Details {
    fn eq(&self, other: &Details) -> bool {
        **self == **other
    }
}

/// Written as gitfleet always wrote an entry: the details' fields among the others, in their
/// places, each only when set.
impl Serialize for ClusterState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let ClusterState {
            revision,
            commit,
            health,
            details,
            recheck,
            drift,
            reread: _,
            delivered_by,
            updated_at,
            objects,
        } = self;
        let DetailFields {
            attempted,
            diffs,
            not_available,
            work_status,
            last_error,
        } = &**details;
        let mut st = s.serialize_struct("ClusterState", 13)?;
        fn field<S: SerializeStruct, T: Serialize + ?Sized>(
            st: &mut S,
            name: &'static str,
            value: &T,
            set: bool,
        ) -> Result<(), S::Error> {
            if set {
                st.serialize_field(name, value)
            } else {
                st.skip_field(name)
            }
        }
        field(&mut st, "revision", revision, revision.is_some())?;
        field(&mut st, "attempted", attempted, attempted.is_some())?;
        field(&mut st, "commit", commit, commit.is_some())?;
        st.serialize_field("health", health)?;
        field(&mut st, "diffs", diffs, !diffs.is_empty())?;
        field(
            &mut st,
            "notAvailable",
            not_available,
            !not_available.is_empty(),
        )?;
        field(&mut st, "workStatus", work_status, work_status.is_some())?;
        field(&mut st, "lastError", last_error, last_error.is_some())?;
        field(&mut st, "recheck", recheck, recheck.is_some())?;
        field(&mut st, "drift", drift, *drift)?;
        field(&mut st, "deliveredBy", delivered_by, delivered_by.is_some())?;
        st.serialize_field("updatedAt", updated_at)?;
        field(&mut st, "objects", objects, !no_objects(objects))?;
        st.end()
    }
}

/// An entry as written ([`ClusterState`]'s `Serialize`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClusterRecord {
    #[serde(default)]
    revision: Option<Revision>,
    #[serde(default)]
    attempted: Option<Revision>,
    #[serde(default)]
    commit: Option<SharedText>,
    health: BindingHealth,
    #[serde(default)]
    diffs: Vec<String>,
    #[serde(default)]
    not_available: Vec<String>,
    #[serde(default)]
    work_status: Option<Arc<crate::feedback::WorkStatus>>,
    #[serde(default)]
    last_error: Option<String>,
    #[serde(default)]
    recheck: Option<SharedText>,
    #[serde(default)]
    drift: bool,
    #[serde(default)]
    delivered_by: Option<Arc<super::staged::RunDelivery>>,
    updated_at: u64,
    #[serde(default)]
    objects: Arc<std::collections::BTreeSet<ObjectKey>>,
}

impl From<ClusterRecord> for ClusterState {
    fn from(r: ClusterRecord) -> ClusterState {
        ClusterState {
            revision: r.revision,
            commit: r.commit,
            health: r.health,
            details: Details::new(DetailFields {
                attempted: r.attempted,
                diffs: r.diffs,
                not_available: r.not_available,
                work_status: r.work_status,
                last_error: r.last_error,
            }),
            recheck: r.recheck,
            drift: r.drift,
            reread: false,
            delivered_by: r.delivered_by,
            updated_at: r.updated_at,
            objects: r.objects,
        }
    }
}

fn no_objects(objects: &Arc<std::collections::BTreeSet<ObjectKey>>) -> bool {
    objects.is_empty()
}

impl PlacementState {
    /// The state as the state stores save it: without re-check marks. Every start marks every
    /// cluster again, and the push a mark asks for clears it; saved, the marks only made a
    /// restart (and a periodic resync) write every placement's state twice over, once marked
    /// and once cleared, for nothing a later start reads. Borrowed when nothing is marked.
    pub fn persisted(&self) -> std::borrow::Cow<'_, PlacementState> {
        if self.clusters.values().all(|c| !c.is_marked()) {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut saved = self.clone();
        for c in saved.clusters.values_mut() {
            c.recheck = None;
            c.drift = false;
            c.reread = false;
        }
        std::borrow::Cow::Owned(saved)
    }

    /// Whether `self` and `other` are saved alike ([`Self::persisted`]), without serialising
    /// either: a store tells a copied but unchanged placement (a confirmation's, a mark's) from
    /// a changed one at the cost of a comparison (destructured, so that a new field is not
    /// forgotten).
    pub fn saved_alike(&self, other: &PlacementState) -> bool {
        let PlacementState {
            resources,
            abandon,
            clusters,
        } = self;
        *resources == other.resources
            && *abandon == other.abandon
            && clusters.len() == other.clusters.len()
            && clusters
                .iter()
                .zip(&other.clusters)
                .all(|((a, x), (b, y))| {
                    a == b && x.updated_at == y.updated_at && x.same_but_for_time_and_recheck(y)
                })
    }
}

impl ClusterState {
    /// Whether the cluster is pushed again at the next step although it is up to date: a
    /// re-check ([`Self::recheck`]) or a re-read of status ([`Self::reread`]).
    pub fn is_marked(&self) -> bool {
        self.recheck.is_some() || self.reread
    }

    /// Whether `other` says the same of the cluster, but for when it was last changed and
    /// whether it waits for a re-check (destructured, so that a new field is not forgotten).
    pub fn same_but_for_time_and_recheck(&self, other: &ClusterState) -> bool {
        let ClusterState {
            revision,
            commit,
            health,
            details,
            recheck: _,
            drift: _,
            reread: _,
            delivered_by,
            updated_at: _,
            objects,
        } = self;
        *revision == other.revision
            && *commit == other.commit
            && *health == other.health
            && *details == other.details
            && *objects == other.objects
            && *delivered_by == other.delivered_by
    }
}

impl ClusterState {
    /// A cluster of which only `health` is known (nothing recorded as pushed): what tests build
    /// on, changing the fields they are about, and what `plan` assumes of a rolled-out base.
    pub fn with_health(health: BindingHealth) -> ClusterState {
        ClusterState {
            revision: None,
            commit: None,
            health,
            details: Details::default(),
            recheck: None,
            drift: false,
            reread: false,
            delivered_by: None,
            updated_at: 0,
            objects: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state read back shares each placement's equal object sets again; distinct sets stay.
    #[test]
    fn a_loaded_states_equal_object_sets_are_shared() {
        let set =
            |ids: &[&str]| Arc::new(ids.iter().map(|s| ObjectKey::from_id(s).unwrap()).collect());
        let mut ps = PlacementState::default();
        for (m, ids) in [
            ("m1", &["Namespace/a"][..]),
            ("m2", &["Namespace/a"]),
            ("m3", &["Namespace/b"]),
        ] {
            ps.clusters.insert(
                m.into(),
                ClusterState {
                    objects: set(ids),
                    ..ClusterState::with_health(BindingHealth::Available)
                },
            );
        }
        let mut state = RolloutState::default();
        state
            .placements
            .insert("crp/a".parse().unwrap(), Arc::new(ps));
        let before = state.clone();
        state.share_equal_values();
        assert_eq!(state, before);
        let c = &state.placements[&"crp/a".parse().unwrap()].clusters;
        assert!(Arc::ptr_eq(&c["m1"].objects, &c["m2"].objects));
        assert!(!Arc::ptr_eq(&c["m1"].objects, &c["m3"].objects));

        // Shared already: left as it is, not copied from under another holder.
        let held = state.placements[&"crp/a".parse().unwrap()].clone();
        state.share_equal_values();
        assert!(Arc::ptr_eq(
            &held,
            &state.placements[&"crp/a".parse().unwrap()]
        ));
    }

    /// A state read back shares its equal names, renderings, commits and run deliveries again,
    /// across placements too.
    #[test]
    fn a_loaded_states_equal_strings_are_shared() {
        let cluster = r#"{"revision":{"resourceIndex":1,"rendered":"r"},"commit":"c","health":{"state":"available"},"deliveredBy":{"run":"r","stage":"s","resourceSnapshotIndex":1,"resourceSnapshot":"h","renderCommit":"c","initCommit":"c"},"updatedAt":1}"#;
        let placement = format!(r#"{{"clusters":{{"m1":{cluster},"m2":{cluster}}}}}"#);
        let mut state = RolloutState::default();
        for key in ["crp/a", "crp/b"] {
            let ps: PlacementState = serde_json::from_str(&placement).unwrap();
            state.placements.insert(key.parse().unwrap(), Arc::new(ps));
        }
        let before = state.clone();
        state.share_equal_values();
        assert_eq!(state, before);
        let entries: Vec<&ClusterState> = state
            .placements
            .values()
            .flat_map(|p| p.clusters.values())
            .collect();
        let first = entries[0];
        for c in &entries[1..] {
            let rendered = |c: &ClusterState| c.revision.clone().unwrap().rendered;
            assert!(SharedText::ptr_eq(&rendered(first), &rendered(c)));
            assert!(SharedText::ptr_eq(
                first.commit.as_ref().unwrap(),
                c.commit.as_ref().unwrap()
            ));
            assert!(Arc::ptr_eq(
                first.delivered_by.as_ref().unwrap(),
                c.delivered_by.as_ref().unwrap()
            ));
        }
        // Each cluster's name is one, whichever placement's entry holds it.
        let [a, b] = ["crp/a", "crp/b"].map(|k| &state.placements[&k.parse().unwrap()].clusters);
        for ((x, _), (y, _)) in a.iter().zip(b.iter()) {
            assert!(ClusterName::ptr_eq(x, y), "{x} is shared");
        }
        assert!(!ClusterName::ptr_eq(
            a.keys().next().unwrap(),
            b.keys().nth(1).unwrap()
        ));
    }

    /// `saved_alike` is equality of what is saved: the serialised persisted forms.
    #[test]
    fn placements_are_saved_alike_when_their_saved_forms_are_equal() {
        let base = {
            let mut ps = PlacementState::default();
            for m in ["m1", "m2"] {
                ps.clusters.insert(
                    m.into(),
                    ClusterState {
                        delivered_by: None,
                        updated_at: 3,
                        ..ClusterState::with_health(BindingHealth::Available)
                    },
                );
            }
            ps
        };
        let variants: Vec<PlacementState> = vec![
            base.clone(),
            {
                let mut p = base.clone();
                p.clusters.get_mut("m1").unwrap().recheck = Some("the daemon started".into());
                p
            },
            {
                let mut p = base.clone();
                p.clusters.get_mut("m2").unwrap().updated_at = 4;
                p
            },
            {
                let mut p = base.clone();
                p.clusters.get_mut("m2").unwrap().health = BindingHealth::Pending;
                p
            },
            {
                let mut p = base.clone();
                Arc::make_mut(&mut p.clusters.get_mut("m2").unwrap().objects)
                    .insert(ObjectKey::new("", "ConfigMap", Some("a"), "b"));
                p
            },
            {
                let mut p = base.clone();
                p.clusters.remove("m2");
                p
            },
            {
                let mut p = base.clone();
                let c = p.clusters.remove("m2").unwrap();
                p.clusters.insert("m3".into(), c);
                p
            },
            PlacementState {
                abandon: true,
                ..base.clone()
            },
        ];
        let saved = |p: &PlacementState| serde_json::to_vec(&p.persisted()).unwrap();
        for a in &variants {
            for b in &variants {
                assert_eq!(a.saved_alike(b), saved(a) == saved(b), "{a:?}\n{b:?}");
            }
        }
        assert!(variants[0].saved_alike(&variants[1]), "a mark is not saved");
    }

    /// An entry holds its details behind a box only when it has some, read or made; boxed or
    /// not, equal details are equal.
    #[test]
    fn an_entry_boxes_its_details_only_when_it_has_some() {
        let read = |json: &str| serde_json::from_str::<ClusterState>(json).unwrap();
        let ok = read(r#"{"health":{"state":"available"},"updatedAt":1}"#);
        assert!(ok.details.boxed().is_none());
        assert!(Details::new(DetailFields::default()).boxed().is_none());
        let failed = read(r#"{"health":{"state":"available"},"lastError":"e","updatedAt":1}"#);
        let boxed = failed.details.boxed().expect("boxed");
        assert_eq!(boxed.last_error.as_deref(), Some("e"));
        let mut made = ok.clone();
        made.details.make_mut().last_error = Some("e".into());
        assert_eq!(made, failed);
        made.details.make_mut().last_error = None;
        assert_eq!(made, ok, "an emptied box says what no box says");
    }

    /// A placement's clusters are written as gitfleet always wrote them, whatever their entries
    /// share in memory: every field set, and only the required ones.
    #[test]
    fn a_placements_clusters_read_and_write_the_same_json() {
        let json = concat!(
            r#"{"resources":{"records":[]},"abandon":false,"clusters":{"#,
            r#""m1":{"revision":{"resourceIndex":2,"rendered":"r2"},"#,
            r#""attempted":{"resourceIndex":3,"rendered":"r3"},"commit":"c1","#,
            r#""health":{"state":"availableUntrackable","since":5},"diffs":["d"],"#,
            r#""notAvailable":["n"],"workStatus":{"resourceStatus":{"manifests":[]}},"#,
            r#""lastError":"e","recheck":"w","drift":true,"#,
            r#""deliveredBy":{"run":"r","stage":"s","resourceSnapshotIndex":1,"#,
            r#""resourceSnapshot":"h","renderCommit":"c0","initCommit":"c0"},"#,
            r#""updatedAt":7,"objects":["ConfigMap/app/x"]},"#,
            r#""m2":{"health":{"state":"pending"},"updatedAt":0}}}"#,
        );
        let ps: PlacementState = serde_json::from_str(json).unwrap();
        assert_eq!(serde_json::to_string(&ps).unwrap(), json);
        let m1 = &ps.clusters["m1"];
        assert_eq!(m1.commit.as_deref(), Some("c1"));
        assert_eq!(m1.revision.as_ref().map(|r| &*r.rendered), Some("r2"));
        assert_eq!(
            ps.clusters["m2"],
            ClusterState::with_health(BindingHealth::Pending)
        );
    }

    #[test]
    fn a_member_stays_eligible_for_five_minutes_after_its_last_good_probe() {
        let good = InventoryCluster {
            name: "m".into(),
            healthy: true,
            error: None,
            properties: [(
                "kubernetes-fleet.io/node-count".to_string(),
                "3".to_string(),
            )]
            .into(),
            add_on_scores: Default::default(),
            namespaces: None,
            namespace_collection_degraded: false,
        };
        let bad = InventoryCluster {
            healthy: false,
            error: Some("connection refused".into()),
            properties: Default::default(),
            ..good.clone()
        };
        let mut s = RolloutState::default();
        let inv = |c: &InventoryCluster| {
            Arc::new(Inventory {
                clusters: vec![Arc::new(c.clone())],
            })
        };
        let never = |_: &str| None;
        assert_eq!(
            *s.remember_probe(&inv(&good), false, &never, 1000).clusters[0],
            good
        );
        assert_eq!(
            *s.remember_probe(&inv(&bad), false, &never, 1300).clusters[0],
            good
        );
        assert_eq!(
            *s.remember_probe(&inv(&bad), false, &never, 1301).clusters[0],
            bad
        );
        // Never probed successfully: unhealthy at once.
        let mut fresh = RolloutState::default();
        assert_eq!(
            *fresh.remember_probe(&inv(&bad), false, &never, 5).clusters[0],
            bad
        );
    }

    /// Looks between probes give the daemon's very inventory again: it comes back as it is,
    /// and only the answer's time is remembered anew. A changed answer is remembered whole.
    #[test]
    fn a_known_probe_is_returned_as_it_is_and_only_its_time_is_remembered() {
        let mut good = InventoryCluster {
            name: "m".into(),
            healthy: true,
            error: None,
            properties: Default::default(),
            add_on_scores: Default::default(),
            namespaces: Some(vec!["a".into()]),
            namespace_collection_degraded: false,
        };
        let probe = Arc::new(Inventory {
            clusters: vec![Arc::new(good.clone())],
        });
        let mut s = RolloutState::default();
        let first = s.remember_probe(&probe, false, &|_| Some(100), 120);
        assert!(Arc::ptr_eq(&first, &probe), "nothing substituted: no copy");
        assert_eq!(s.members["m"].at, 100);
        let again = s.remember_probe(&probe, true, &|_| Some(160), 170);
        assert!(Arc::ptr_eq(&again, &probe));
        assert_eq!(s.members["m"].at, 160);
        assert_eq!(*s.members["m"].cluster, good);

        good.namespaces = Some(vec!["a".into(), "b".into()]);
        let changed = Arc::new(Inventory {
            clusters: vec![Arc::new(good.clone())],
        });
        s.remember_probe(&changed, false, &|_| Some(200), 200);
        assert_eq!(*s.members["m"].cluster, good, "a new answer is remembered");
        assert_eq!(s.members["m"].at, 200);
    }

    fn cluster(health: BindingHealth) -> ClusterState {
        ClusterState {
            delivered_by: None,
            updated_at: 1,
            ..ClusterState::with_health(health)
        }
    }

    #[test]
    fn a_change_on_a_member_marks_only_that_placements_cluster_and_a_deletion_makes_it_pending() {
        let mut s = RolloutState::default();
        for id in ["crp/app", "crp/other"] {
            let ps = Arc::make_mut(s.placements.entry(id.parse().unwrap()).or_default());
            ps.clusters
                .insert("m1".into(), cluster(BindingHealth::Available));
            ps.clusters
                .insert("m2".into(), cluster(BindingHealth::Available));
        }
        let marked = s.recheck(
            "m1",
            Some("crp.app"),
            ("ConfigMap app/x deleted", RecheckCause::ChangedOnTheMember),
            true,
            9,
        );
        assert_eq!(marked, 1);
        let app = &s.placements[&"crp/app".parse().unwrap()];
        assert_eq!(app.clusters["m1"].health, BindingHealth::Pending);
        assert!(app.clusters["m1"].drift, "a change the watch saw is drift");
        assert_eq!(
            app.clusters["m1"].recheck.as_deref(),
            Some("ConfigMap app/x deleted")
        );
        assert_eq!(app.clusters["m2"].recheck, None);
        let other = &s.placements[&"crp/other".parse().unwrap()];
        assert_eq!(other.clusters["m1"].recheck, None);
        // A change that is not a deletion keeps the health; `None` marks every placement.
        assert_eq!(
            s.recheck(
                "m2",
                None,
                ("watch restarted", RecheckCause::MayHaveChanged),
                false,
                9
            ),
            2
        );
        let other = &s.placements[&"crp/other".parse().unwrap()];
        assert_eq!(other.clusters["m2"].health, BindingHealth::Available);
        assert!(other.clusters["m2"].recheck.is_some());
        assert!(!other.clusters["m2"].drift, "a restarted watch is no drift");
    }

    #[test]
    fn changes_marked_together_mark_what_they_mark_one_by_one() {
        let mut s = RolloutState::default();
        // Placements of every size: some reach fewer members than the changes name, some more.
        for (p, reach) in [(0, 1), (1, 3), (2, 8), (3, 0), (4, 5)] {
            let key = format!("crp/p{p}").parse().unwrap();
            let ps = Arc::make_mut(s.placements.entry(key).or_default());
            for m in 0..reach {
                let health = if m % 3 == 2 {
                    BindingHealth::Failed
                } else {
                    BindingHealth::Available
                };
                ps.clusters.insert(format!("m{m}").into(), cluster(health));
            }
        }
        let changes = [
            (
                "m0",
                None,
                "watch restarted",
                RecheckCause::MayHaveChanged,
                false,
            ),
            (
                "m1",
                Some("crp.p2"),
                "ConfigMap deleted",
                RecheckCause::ChangedOnTheMember,
                true,
            ),
            (
                "m2",
                None,
                "Secret deleted",
                RecheckCause::ChangedOnTheMember,
                true,
            ),
            // No placement named, and none of m1's read a status at their last push.
            ("m1", None, "Job status", RecheckCause::StatusChanged, false),
            (
                "m4",
                Some("crp.p4"),
                "edited",
                RecheckCause::ChangedOnTheMember,
                false,
            ),
            (
                "m9",
                None,
                "a member no placement reaches",
                RecheckCause::MayHaveChanged,
                false,
            ),
            (
                "m4",
                Some("crp.p1"),
                "a placement that does not reach it",
                RecheckCause::MayHaveChanged,
                true,
            ),
            (
                "m0",
                Some("crp.p1"),
                "edited again",
                RecheckCause::ChangedOnTheMember,
                false,
            ),
        ];
        let each: Vec<Recheck> = changes
            .iter()
            .map(|&(member, placement_label, why, cause, deleted)| Recheck {
                member,
                placement_label,
                why,
                cause,
                deleted,
            })
            .collect();
        let mut one_by_one = s.clone();
        let counts: Vec<usize> = each
            .iter()
            .map(|c| one_by_one.recheck_each(std::slice::from_ref(c), 9)[0])
            .collect();
        let together = s.recheck_each(&each, 9);
        assert_eq!(together, counts);
        assert_eq!(together, [4, 1, 3, 0, 1, 0, 0, 1]);
        assert_eq!(s, one_by_one);
        // The last change of a cluster says why it is checked.
        let p1 = &s.placements[&"crp/p1".parse().unwrap()];
        assert_eq!(p1.clusters["m0"].recheck.as_deref(), Some("edited again"));
        assert!(p1.clusters["m0"].drift);
        // A Failed cluster stays Failed when its object is deleted.
        let p2 = &s.placements[&"crp/p2".parse().unwrap()];
        assert_eq!(p2.clusters["m2"].health, BindingHealth::Failed);
        assert_eq!(p2.clusters["m1"].health, BindingHealth::Pending);
    }

    #[test]
    fn a_status_change_is_read_again_without_calling_it_drift_and_is_never_saved() {
        let mut s = RolloutState::default();
        let key: crate::model::PlacementKey = "mw/m1/web".parse().unwrap();
        let ps = Arc::make_mut(s.placements.entry(key.clone()).or_default());
        ps.clusters
            .insert("m1".into(), cluster(BindingHealth::Available));
        let why = (
            "Job default/x status changed on the member",
            RecheckCause::StatusChanged,
        );
        // Named by its placement's label, or (no label) because its last push read a status.
        assert_eq!(
            s.recheck("m1", Some(key.label_value().as_str()), why, false, 9),
            1
        );
        let c = &s.placements[&key].clusters["m1"];
        assert!(c.reread && c.is_marked());
        let mut unread = s.clone();
        let c = Arc::make_mut(unread.placements.get_mut(&key).unwrap())
            .clusters
            .get_mut("m1")
            .unwrap();
        c.reread = false;
        assert_eq!(
            unread.recheck("m1", None, why, false, 9),
            0,
            "it reads no status"
        );
        Arc::make_mut(unread.placements.get_mut(&key).unwrap())
            .clusters
            .get_mut("m1")
            .unwrap()
            .details
            .make_mut()
            .work_status = Some(Arc::new(crate::feedback::WorkStatus::default()));
        assert_eq!(unread.recheck("m1", None, why, false, 9), 1);
        assert!(unread.placements[&key].clusters["m1"].reread);
        let c = &s.placements[&key].clusters["m1"];
        assert_eq!((c.recheck.as_deref(), c.drift), (None, false));
        assert_eq!((c.health, c.updated_at), (BindingHealth::Available, 1));
        let saved = s.placements[&key].persisted();
        assert!(!saved.clusters["m1"].is_marked());
    }
}
