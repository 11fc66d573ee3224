//! The mass-deletion guard: a new commit that would delete more than a share of
//! what gitfleet manages on members is held — nothing of it is applied, the commit served
//! before goes on being served — until a commit says, in Git, how many deletions it allows.
//!
//! - What is managed: the objects on members, per placement and cluster ([`Recorded`]): for the
//!   daemon, what its state recorded as applied; for `gitfleet apply`, the members' records;
//!   for `gitfleet plan`, what the base commit delivers. Placements that abandon their objects
//!   (deleteStrategy Abandon) and members removed from the repository (they keep what they
//!   have, as in KubeFleet) delete nothing: one rule, in [`assess`].
//! - What the commit does to each ([`Fate`], from the step's [`StepSummary`]s): keeps a set of
//!   objects (the rest is pruned), removes all of them, or leaves them as they are.
//! - The rule ([`Policy`]): held when the deletions are at least `min` and more than `share`
//!   percent of everything managed.
//! - The release ([`allowance`]): a trailer `Gitfleet-Allow-Deletions: <count>` (or `all`) in
//!   the message of the commit being judged, read as git reads a commit's trailers
//!   ([`trailers`]: the last paragraph, never the subject) — the commit that deletes, or a
//!   later one (an empty commit on top releases the deletions of the commits before it, since
//!   the daemon serves heads). It is in the history, with its author (and signature under
//!   `--verify-commits`), and survives restarts; a count below the deletions does not release.
//!
//! Holding the whole commit rather than applying all but its deletions follows Argo CD's
//! automated sync, which refuses the sync (not only the prune) when it would delete every
//! resource of an application (`syncPolicy.automated.allowEmpty: false`): half a commit applied
//! (a renamed object created, its old name kept) is a state no commit describes.
//!
//! Pure: it must not know where the counts come from nor how the verdict is shown.

use std::collections::{BTreeMap, BTreeSet};

use super::step::StepSummary;
use super::strategy::Strategy;
use crate::model::{ObjectKey, PlacementKey};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub mod trailers;

/// The trailer that releases held deletions.
pub const TRAILER: &str = "Gitfleet-Allow-Deletions";

/// When a commit is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Held when the deletions are more than this percentage of what is managed (0-100).
    pub share_percent: u32,
    /// ... and at least this many (small fleets may delete a few objects freely).
    pub min: usize,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            share_percent: 50,
            min: 10,
        }
    }
}

impl Policy {
    /// Whether `deleting` of `managed` objects is a mass deletion.
    pub fn is_mass_deletion(&self, deleting: usize, managed: usize) -> bool {
        deleting > 0
            && deleting >= self.min
            && (deleting as u128) * 100 > (managed as u128) * u128::from(self.share_percent)
    }
}

/// Parses `50%` or `50` (a percentage from 0 to 100).
pub fn parse_share(s: &str) -> Result<u32, String> {
    let n = s.trim().trim_end_matches('%').trim();
    match n.parse::<u32>() {
        Ok(v) if v <= 100 => Ok(v),
        _ => Err(format!("{s:?} is not a percentage from 0% to 100%")),
    }
}

/// What a commit does to one placement's objects on one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate<'a> {
    /// These are delivered; every other object is pruned.
    Keeps(&'a BTreeSet<ObjectKey>),
    /// Everything is removed.
    Removed,
    /// Nothing is deleted (not rendered, not moved by this commit).
    Untouched,
}

/// The fate of `cluster`'s objects of a placement under its step summary (`None`: not stepped,
/// e.g. outside `--placement`: untouched).
pub fn fate_in<'a>(step: Option<&'a StepSummary>, cluster: &str) -> Fate<'a> {
    let Some(s) = step else {
        return Fate::Untouched;
    };
    if s.held {
        // Invalid resource selectors: what it placed stays as it is.
        return Fate::Untouched;
    }
    if s.settled.is_some() {
        // Settled: every cluster holds what this commit renders for it (no new resource
        // snapshot, nothing to apply or remove), so it deletes nothing; not comparing each of
        // its clusters' objects again keeps judging a commit cheap in a large fleet.
        return Fate::Untouched;
    }
    if let Some(objects) = s.objects(cluster) {
        return Fate::Keeps(objects);
    }
    if s.removing.iter().any(|c| c == cluster) {
        return Fate::Removed;
    }
    if s.render_errors.contains_key(cluster)
        || matches!(s.strategy, Strategy::External | Strategy::Deleted)
    {
        // Kept as is: a render error keeps what runs; External placements move only by runs;
        // a deleted placement not removing a cluster keeps it (a member gone from the repo).
        return Fate::Untouched;
    }
    // No longer scheduled there: the rollout removes it.
    Fate::Removed
}

/// How many objects a commit deletes, of how many managed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Assessment {
    pub managed: usize,
    pub deleting: usize,
    /// Deletions by placement id (`crp/NAME`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_placement: BTreeMap<String, usize>,
}

/// One placement's objects on members, borrowed where the caller keeps them (the daemon's
/// state, members' records, a base commit's rendering): copying every cluster's object ids
/// would dominate judging a commit in a large fleet.
pub struct Recorded<'m, C> {
    pub placement: &'m PlacementKey,
    /// Its deleteStrategy when the objects were recorded (Abandon: `true`).
    pub abandon: bool,
    /// Its objects by cluster.
    pub clusters: C,
}

/// The commit being judged, as the rollout's step decided it.
pub struct Judged<'a> {
    steps: BTreeMap<&'a PlacementKey, &'a StepSummary>,
    abandon: &'a BTreeMap<PlacementKey, bool>,
}

impl<'a> Judged<'a> {
    pub fn new(
        decision_steps: &'a [Arc<StepSummary>],
        abandon: &'a BTreeMap<PlacementKey, bool>,
    ) -> Self {
        Judged {
            steps: decision_steps
                .iter()
                .map(|s| (&s.placement, &**s))
                .collect(),
            abandon,
        }
    }
}

/// Counts what `commit` deletes of what is on members. The one rule of what is managed: the
/// objects on clusters still members of the commit (`is_member`: a member removed from the
/// repository keeps what it has, as in KubeFleet), of placements that do not abandon them
/// (the commit's deleteStrategy while it still has the placement, else the recorded one). A
/// placement the commit did not step gets `unstepped`'s fate on each cluster (the daemon steps
/// every placement; `plan` and `apply` each know what becomes of one they did not).
pub fn assess<'a, 'm, C>(
    on_members: impl IntoIterator<Item = Recorded<'m, C>>,
    commit: &Judged<'a>,
    is_member: impl Fn(&str) -> bool,
    unstepped: impl Fn(&PlacementKey, &str) -> Fate<'a>,
) -> Assessment
where
    C: IntoIterator<Item = (&'m str, &'m BTreeSet<ObjectKey>)>,
{
    let mut a = Assessment::default();
    for r in on_members {
        let abandons = commit
            .abandon
            .get(r.placement)
            .copied()
            .unwrap_or(r.abandon);
        if abandons {
            continue;
        }
        // Looked up once per placement, not per cluster.
        let step = commit.steps.get(r.placement).copied();
        let mut gone = 0;
        for (cluster, objects) in r.clusters {
            if !is_member(cluster) {
                continue;
            }
            a.managed += objects.len();
            let fate = match step {
                Some(s) => fate_in(Some(s), cluster),
                None => unstepped(r.placement, cluster),
            };
            gone += match fate {
                Fate::Keeps(kept) => objects.difference(kept).count(),
                Fate::Removed => objects.len(),
                Fate::Untouched => 0,
            };
        }
        if gone > 0 {
            a.deleting += gone;
            *a.by_placement.entry(r.placement.to_string()).or_default() += gone;
        }
    }
    a
}

/// What a commit's message allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowance {
    Count(usize),
    All,
}

impl Allowance {
    fn covers(self, deleting: usize) -> bool {
        match self {
            Allowance::All => true,
            Allowance::Count(n) => n >= deleting,
        }
    }
}

/// The `Gitfleet-Allow-Deletions` trailer of a commit message (the largest when given twice),
/// read as git reads a commit's trailers ([`trailers`]): never from the subject.
pub fn allowance(message: &str) -> Option<Allowance> {
    trailers::parse(message)
        .into_iter()
        .filter(|t| t.token.eq_ignore_ascii_case(TRAILER))
        .filter_map(|t| match t.value.as_str() {
            v if v.eq_ignore_ascii_case("all") => Some(Allowance::All),
            v => v.parse().ok().map(Allowance::Count),
        })
        .max_by_key(|a| match a {
            Allowance::All => usize::MAX,
            Allowance::Count(n) => *n,
        })
}

/// A commit held by the guard, as status shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Held {
    pub commit: String,
    #[serde(flatten)]
    pub assessment: Assessment,
    /// Why, and exactly how to release it.
    pub message: String,
}

/// The guard's verdict on a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Not a mass deletion.
    Proceed,
    /// A mass deletion the commit's trailer allows.
    Released(Allowance),
    Held(Held),
}

/// Judges `commit` (with `message`) deleting what `assessment` counts.
pub fn judge(policy: &Policy, assessment: Assessment, commit: &str, message: &str) -> Verdict {
    if !policy.is_mass_deletion(assessment.deleting, assessment.managed) {
        return Verdict::Proceed;
    }
    let allowed = allowance(message);
    if let Some(a) = allowed.filter(|a| a.covers(assessment.deleting)) {
        return Verdict::Released(a);
    }
    let short = &commit[..commit.len().min(12)];
    let mut message = format!(
        "commit {short} would delete {} of the {} objects gitfleet manages on members (more \
         than {}% and at least {}): held, nothing of it is applied. To release it, push a commit \
         whose message ends with the trailer `{TRAILER}: {}` (e.g. `git commit --allow-empty \
         --trailer \"{TRAILER}: {}\"`), or revert the deletion",
        assessment.deleting,
        assessment.managed,
        policy.share_percent,
        policy.min,
        assessment.deleting,
        assessment.deleting,
    );
    if let Some(Allowance::Count(n)) = allowed {
        message.push_str(&format!("; its trailer allows only {n}"));
    }
    Verdict::Held(Held {
        commit: commit.to_string(),
        assessment,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(name: &str) -> PlacementKey {
        PlacementKey::new(
            crate::model::PlacementKind::ClusterResourcePlacement,
            None,
            name,
        )
    }

    fn set(ids: &[&str]) -> BTreeSet<ObjectKey> {
        ids.iter().map(|s| ObjectKey::from_id(s).unwrap()).collect()
    }

    #[test]
    fn the_rule_needs_both_the_share_and_the_minimum() {
        let p = Policy::default();
        assert!(!p.is_mass_deletion(5, 6), "under the minimum");
        assert!(
            !p.is_mass_deletion(10, 20),
            "exactly half is not more than half"
        );
        assert!(p.is_mass_deletion(11, 20));
        assert!(p.is_mass_deletion(55, 55));
        let none = Policy {
            share_percent: 0,
            min: 0,
        };
        assert!(!none.is_mass_deletion(0, 10), "no deletion is never held");
        assert!(none.is_mass_deletion(1, 10));
        assert_eq!(parse_share("50%"), Ok(50));
        assert_eq!(parse_share("7"), Ok(7));
        assert!(parse_share("150%").is_err());
        assert!(parse_share("half").is_err());
    }

    #[test]
    fn deletions_are_counted_per_object_by_fate() {
        let (a, b) = (key("a"), key("b"));
        let two = set(&["ConfigMap/x/1", "ConfigMap/x/2"]);
        let ns = set(&["Namespace/b"]);
        let kept = set(&["ConfigMap/x/1", "ConfigMap/x/3"]);
        let on_members = || {
            [
                Recorded {
                    placement: &a,
                    abandon: false,
                    clusters: vec![("m1", &two), ("m2", &two)],
                },
                Recorded {
                    placement: &b,
                    abandon: false,
                    clusters: vec![("m1", &ns)],
                },
            ]
        };
        let no_abandon = BTreeMap::new();
        let commit = Judged::new(&[], &no_abandon);
        let fate = |p: &PlacementKey, c: &str| match (p.name.as_str(), c) {
            ("a", "m1") => Fate::Keeps(&kept),
            ("a", _) => Fate::Removed,
            _ => Fate::Untouched,
        };
        let counted = assess(on_members(), &commit, |_| true, fate);
        assert_eq!(counted.managed, 5);
        assert_eq!(counted.deleting, 3);
        assert_eq!(
            counted.by_placement,
            BTreeMap::from([("crp/a".to_string(), 3)])
        );

        let gone_m2 = assess(on_members(), &commit, |c| c != "m2", fate);
        assert_eq!(
            (gone_m2.managed, gone_m2.deleting),
            (3, 1),
            "a member gone keeps what it has"
        );

        let abandon_a = BTreeMap::from([(a.clone(), true)]);
        let commit = Judged::new(&[], &abandon_a);
        let abandoned = assess(on_members(), &commit, |_| true, fate);
        assert_eq!(
            (abandoned.managed, abandoned.deleting),
            (1, 0),
            "the commit's Abandon wins"
        );
    }

    #[test]
    fn a_placement_gone_from_the_commit_keeps_its_recorded_delete_strategy() {
        let a = key("a");
        let two = set(&["ConfigMap/x/1", "ConfigMap/x/2"]);
        let recorded = |abandon| {
            [Recorded {
                placement: &a,
                abandon,
                clusters: vec![("m1", &two)],
            }]
        };
        let none = BTreeMap::new();
        let commit = Judged::new(&[], &none);
        let removed = |_: &PlacementKey, _: &str| Fate::Removed;
        assert_eq!(
            assess(recorded(false), &commit, |_| true, removed).deleting,
            2
        );
        assert_eq!(
            assess(recorded(true), &commit, |_| true, removed).deleting,
            0
        );
        let now_deletes = BTreeMap::from([(a.clone(), false)]);
        let commit = Judged::new(&[], &now_deletes);
        assert_eq!(
            assess(recorded(true), &commit, |_| true, removed).deleting,
            2,
            "the commit's deleteStrategy overrides the recorded one"
        );
    }

    #[test]
    fn the_trailer_is_read_from_the_last_paragraph_and_must_cover_the_count() {
        assert_eq!(
            allowance(
                "remove apps\n\nbody\n\nGitfleet-Allow-Deletions: 55\nSigned-off-by: A <a@x>\n"
            ),
            Some(Allowance::Count(55))
        );
        assert_eq!(
            allowance("x\n\ngitfleet-allow-deletions: all"),
            Some(Allowance::All)
        );
        assert_eq!(
            allowance("Gitfleet-Allow-Deletions: 55\n\nlater paragraph"),
            None,
            "not a trailer outside the last paragraph"
        );
        assert_eq!(allowance("x\n\nGitfleet-Allow-Deletions: many"), None);
        let p = Policy::default();
        let a = Assessment {
            managed: 20,
            deleting: 20,
            by_placement: BTreeMap::new(),
        };
        assert_eq!(
            judge(&p, a.clone(), "c", "x\n\nGitfleet-Allow-Deletions: 20"),
            Verdict::Released(Allowance::Count(20))
        );
        let Verdict::Held(h) = judge(
            &p,
            a.clone(),
            "0123456789abcdef",
            "x\n\nGitfleet-Allow-Deletions: 19",
        ) else {
            panic!("19 does not cover 20");
        };
        assert!(
            h.message.contains("would delete 20 of the 20 objects")
                && h.message.contains("Gitfleet-Allow-Deletions: 20")
                && h.message.contains("only 19")
                && h.message.contains("0123456789ab "),
            "{}",
            h.message
        );
        assert_eq!(
            judge(&p, Assessment { deleting: 3, ..a }, "c", ""),
            Verdict::Proceed
        );
    }

    /// git reads no trailer in a commit's first paragraph: a message that is only the trailer,
    /// or a subject with the trailer on the next line, releases nothing.
    #[test]
    fn a_subject_only_message_releases_nothing() {
        for message in [
            "Gitfleet-Allow-Deletions: all",
            "Gitfleet-Allow-Deletions: all\n",
            "Gitfleet-Allow-Deletions: 20\nSigned-off-by: A <a@x>\n",
            "remove the apps\nGitfleet-Allow-Deletions: all\n",
            "remove the apps\n\nsee the ticket\nGitfleet-Allow-Deletions: all\n",
        ] {
            assert_eq!(allowance(message), None, "{message:?}");
        }
        assert_eq!(
            allowance("remove the apps\n\nGitfleet-Allow-Deletions: all\n"),
            Some(Allowance::All)
        );
    }

    #[test]
    fn objects_are_named_with_group_namespace_and_name() {
        let id = |v: serde_json::Value| ObjectKey::of(&v).to_string();
        assert_eq!(
            id(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}})
            ),
            "ConfigMap/n/c"
        );
        assert_eq!(
            id(
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"}})
            ),
            "Deployment.apps/n/d"
        );
        assert_eq!(
            id(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}})),
            "Namespace/n"
        );
    }
}
