//! What the rollout state holds per binding (placement × cluster), built as the daemon builds it:
//! a step renders each placement once and every member's delivery is absorbed on its own
//! (`rollout::absorb`, one call per member). Prints, per binding:
//!
//! - the entry's own bytes, counted by walking the state: its key and value as the map stores
//!   them, and the heap they own (an allocation shared by several entries counted once, with
//!   the 16 bytes of an `Arc`'s counts). Exact for what it counts; neither the allocator's
//!   overhead nor the map's spare room is in it (the workspace forbids the unsafe code a
//!   counting allocator needs);
//! - the growth of this process's resident memory while the state was built: everything,
//!   those included, read from `/proc/self/status` (Linux only; the test is alone in its
//!   binary, so nothing else allocates meanwhile but the harness).
//!
//! `cargo test --features test-hooks --test binding_memory -- --nocapture`
//!
//! `GITFLEET_BINDING_MEMORY="400x2000x160"` (placements × members × clusters per placement) sets
//! the fleet. It asserts nothing of the sizes: they are read, as a benchmark's are.

use std::collections::HashSet;
use std::mem::size_of;
use std::sync::Arc;

use gitfleet::model::{ClusterName, SharedText};
use gitfleet::render::Manifest;
use gitfleet::rollout::{
    absorb_indexed, Action, ApplyStrategy, BindingHealth, BindingIndex, ClusterState, DetailFields,
    Ledger, NameSource, Outcome, Revision, RolloutState, Work,
};

/// The bytes of the allocations walked, each counted once.
#[derive(Default)]
struct Walk {
    seen: HashSet<usize>,
    bytes: usize,
}

impl Walk {
    fn once(&mut self, at: *const u8, bytes: usize) {
        if bytes > 0 && self.seen.insert(at as usize) {
            self.bytes += bytes;
        }
    }
}

/// A text the state holds, owned or shared.
trait Text {
    fn walk(&self, w: &mut Walk);
}

impl Text for String {
    fn walk(&self, w: &mut Walk) {
        w.once(self.as_ptr(), self.capacity());
    }
}

impl Text for SharedText {
    fn walk(&self, w: &mut Walk) {
        // The counts, the text's pointer and length, and the text.
        w.once(self.as_ptr(), 4 * size_of::<usize>() + self.len());
    }
}

/// An entry's key and value, and what they own.
fn walk_entry(w: &mut Walk, name: &ClusterName, c: &ClusterState) {
    // The key as absorb makes it: the fleet's name, whose text and end are in the fleet's
    // table (counted once for every entry of the cluster).
    w.bytes += size_of::<ClusterName>() + size_of::<ClusterState>();
    w.once(name.as_ptr(), name.len() + size_of::<usize>());
    for r in [&c.revision, &c.details.attempted].into_iter().flatten() {
        r.rendered.walk(w);
    }
    c.commit.iter().for_each(|t| t.walk(w));
    c.recheck.iter().for_each(|t| t.walk(w));
    if let Some(d) = c.details.boxed() {
        w.once((d as *const DetailFields).cast(), size_of::<DetailFields>());
    }
    c.details.last_error.iter().for_each(|t| t.walk(w));
    for list in [&c.details.diffs, &c.details.not_available] {
        w.once(list.as_ptr().cast(), list.capacity() * size_of::<String>());
        list.iter().for_each(|t| t.walk(w));
    }
    let objects = &*c.objects;
    w.once(
        (objects as *const std::collections::BTreeSet<_>).cast(),
        2 * size_of::<usize>() + size_of_val(objects),
    );
}

/// `VmRSS` of `/proc/self/status`, in bytes.
fn resident() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|kb| {
            kb.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<usize>()
                .ok()
        })
        .map_or(0, |kb| kb * 1024)
}

const COMMIT: &str = "8f3b2c1d9e0a7b6c5d4e3f2a1b0c9d8e7f6a5b4c";

/// Placements, members, clusters per placement.
fn fleet() -> (usize, usize, usize) {
    let Ok(spec) = std::env::var("GITFLEET_BINDING_MEMORY") else {
        return (400, 2000, 160);
    };
    let n: Vec<usize> = spec.split('x').filter_map(|n| n.parse().ok()).collect();
    match n[..] {
        [p, m, c] if c <= m => (p, m, c),
        _ => panic!("GITFLEET_BINDING_MEMORY={spec}: expected PLACEMENTSxMEMBERSxCLUSTERS"),
    }
}

/// The members' names in one table, as the daemon's fleet holds them.
fn names_of(members: usize) -> Arc<Vec<ClusterName>> {
    let names: Vec<String> = (0..members).map(|m| format!("member-{m:05}")).collect();
    Arc::new(ClusterName::table(names.iter().map(String::as_str)))
}

/// A settled fleet's state: every cluster given its placement's one rendering by one commit,
/// each member's delivery absorbed on its own through one index naming from `names`.
fn settled_state(
    names: &Arc<Vec<ClusterName>>,
    (placements, members, clusters): (usize, usize, usize),
) -> RolloutState {
    let keys: Vec<gitfleet::model::PlacementKey> = (0..placements)
        .map(|p| format!("crp/app-{p:04}").parse().unwrap())
        .collect();
    // One rendering per placement, as the step hands it to every cluster's work.
    let renderings: Vec<(gitfleet::rollout::Manifests, Revision)> = (0..placements)
        .map(|p| {
            let object = |kind: &str| {
                let value = serde_json::json!({"apiVersion": "v1", "kind": kind,
                    "metadata": {"name": format!("app-{p}"), "namespace": "apps"}});
                Manifest {
                    value: Arc::new(value),
                    wave: 0,
                    envelope: None,
                    work: None,
                }
            };
            let manifests = Arc::new(vec![object("ConfigMap"), object("Service")]);
            let revision = Revision {
                resource_index: 1,
                rendered: format!("{p:064x}").into(),
            };
            (manifests, revision)
        })
        .collect();
    let mut state = RolloutState::default();
    let mut index = BindingIndex::naming_from(Some(names.clone() as Arc<dyn NameSource>));
    // Placement `p` targets `clusters` members from `p * members / placements` on.
    for m in 0..members {
        let member = format!("member-{m:05}");
        let results: Vec<(Work, Outcome)> = (0..placements)
            .filter(|p| (m + members - p * members / placements) % members < clusters)
            .map(|p| {
                let (manifests, revision) = renderings[p].clone();
                let work = Work {
                    placement: keys[p].clone(),
                    cluster: member.clone(),
                    action: Action::Apply {
                        manifests,
                        revision,
                        binds: false,
                        refresh: false,
                        strategy: ApplyStrategy::default(),
                        resource_snapshot: format!("{p:064x}").into(),
                        delivered_by: None,
                    },
                };
                let done = Outcome::Done(BindingHealth::Available, Default::default());
                (work, done)
            })
            .collect();
        let ledger = Ledger::default();
        absorb_indexed(&mut state, &mut [], &mut index, ledger, results, COMMIT, 1);
    }
    state
}

#[test]
fn bytes_per_binding_of_a_settled_fleets_rollout_state() {
    let (placements, members, clusters) = fleet();
    let names = names_of(members);
    let before = resident();
    let state = settled_state(&names, (placements, members, clusters));
    let grown = resident().saturating_sub(before);
    let bindings: usize = state.placements.values().map(|p| p.clusters.len()).sum();
    assert_eq!(
        bindings,
        placements * clusters,
        "every binding is in the state"
    );
    let mut walk = Walk::default();
    for ps in state.placements.values() {
        for (name, c) in &ps.clusters {
            walk_entry(&mut walk, name, c);
        }
    }
    let per = |n: usize| n as f64 / bindings as f64;
    println!(
        "{placements} placements × {clusters} of {members} members: {bindings} bindings; \
         size_of::<ClusterState>() = {} B; per binding: {:.1} B walked, {:.1} B resident",
        size_of::<ClusterState>(),
        per(walk.bytes),
        per(grown),
    );
}
