//! A placement held for invalid resource selectors.

use super::*;

/// A placement whose selectors become invalid (a reserved namespace) is held as KubeFleet
/// holds it (pkg/controllers/placement/controller.go handleUpdate: no new snapshot, works
/// left as they are): its schedule is the previous one, no work of it at either pace (no
/// apply, no removal, not swept), no new history, the deletion guard counts nothing of it,
/// its status says Scheduled=False InvalidResourceSelectors while its clusters keep their
/// conditions; the other placement rolls on. Fixed, it is scheduled and stepped again.
#[test]
fn a_placement_with_invalid_selectors_is_held_while_the_others_roll() {
    use crate::model::PlacementKind;
    let other = |name: &str| {
        format!(
            "---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: other}}\n---\n\
             apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
             metadata: {{name: other}}\nspec:\n\
             \x20 resourceSelectors: [{{group: '', version: v1, kind: Namespace, name: {name}}}]\n"
        )
    };
    let key = PlacementKey::new(PlacementKind::ClusterResourcePlacement, None, "other");
    let v1 = commit("1", &other("other"));
    let (mut state, mut previous) = (RolloutState::default(), Default::default());
    for _ in 0..10 {
        roll(
            &v1,
            "c1",
            &mut state,
            &mut previous,
            BindingHealth::Available,
        );
    }
    let before = state.placements[&key].clone();
    let scheduled_before = previous[&key].clone();
    assert_eq!(before.clusters.len(), MEMBERS.len());

    let v2 = commit("2", &other("kube-system"));
    let fleet = Fleet::build(&v2, None);
    let invalid = crate::snapshot::invalid_selections(&v2);
    let schedule = crate::schedule::schedule_commit(&v2, &invalid, &fleet, &previous, 0);
    let held = schedule.iter().find(|p| p.key == key).unwrap();
    assert_eq!(held.held(), Some(invalid[&key].message.as_str()));
    assert_eq!(
        PlacementSchedule {
            conditions: scheduled_before.conditions.clone(),
            ..(**held).clone()
        },
        *scheduled_before
    );
    for pacing in [Pacing::Rolling, Pacing::Immediate] {
        let d = decide(&v2, "c2", &schedule, &fleet, &state, pacing);
        assert!(d.work.iter().all(|w| w.placement != key), "{pacing:?}");
        assert!(
            d.work.iter().any(|w| w.placement.name == "app"),
            "{pacing:?}"
        );
        assert!(!d.ledger.histories.contains_key(&key));
        for sweep in &d.sweeps {
            assert!(matches!(&sweep.prune, Prune::AllExcept(keep) if keep.contains(&key)));
        }
        let step = d.steps.iter().find(|s| s.placement == key).unwrap();
        assert!(step.held);
        assert!(step.note.as_deref().unwrap().contains(held.held().unwrap()));
        for m in MEMBERS {
            assert_eq!(
                crate::rollout::guard::fate_in(Some(step), m),
                crate::rollout::guard::Fate::Untouched
            );
        }
        let (placement, clusters) =
            crate::rollout::conditions::of_step(step, Some(held), Some(&before));
        // What a publish works out: the same, without the clusters' own.
        assert_eq!(
            crate::rollout::conditions::placement_conditions_of_step(
                step,
                Some(held),
                Some(&before)
            ),
            (placement.clone(), !clusters.is_empty())
        );
        assert_eq!(
            (
                placement[0].type_.as_str(),
                placement[0].status.as_str(),
                placement[0].reason.as_str()
            ),
            (
                "ClusterResourcePlacementScheduled",
                "False",
                "InvalidResourceSelectors"
            )
        );
        assert_eq!(clusters.len(), MEMBERS.len());
        for c in &clusters {
            assert!(
                c.conditions.iter().all(|x| x.status == "True"),
                "{:?}",
                c.conditions
            );
        }
    }
    for _ in 0..10 {
        roll(
            &v2,
            "c2",
            &mut state,
            &mut previous,
            BindingHealth::Available,
        );
    }
    assert_eq!(state.placements[&key], before);
    assert_eq!(previous[&key].bindings, scheduled_before.bindings);

    // Fixed (and changed): scheduled and rolled out again.
    let v3 = commit(
        "2",
        &other("other").replace("name: other}\n---", "name: other, labels: {v: '3'}}\n---"),
    );
    let fleet = Fleet::build(&v3, None);
    let invalid = crate::snapshot::invalid_selections(&v3);
    assert!(invalid.is_empty());
    let schedule = crate::schedule::schedule_commit(&v3, &invalid, &fleet, &previous, 0);
    assert!(schedule.iter().all(|p| p.held().is_none()));
    let (applied, _) = roll(
        &v3,
        "c3",
        &mut state,
        &mut previous,
        BindingHealth::Available,
    );
    assert!(!applied.is_empty());
}
