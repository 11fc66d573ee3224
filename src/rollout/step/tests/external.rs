//! External placements.

use super::*;

#[test]
fn external_strategy_is_scheduled_but_not_pushed() {
    let mut cat = commit("1", "");
    cat.placements[0].spec.spec.strategy.type_ = Some(RolloutStrategyType::External);
    let (fleet, schedule) = scheduled(&cat, &Default::default());
    assert_eq!(schedule[0].selected, MEMBERS);
    let d = decide(
        &cat,
        "c1",
        &schedule,
        &fleet,
        &RolloutState::default(),
        Pacing::Rolling,
    );
    assert!(d.work.is_empty());
    assert!(d.steps[0].note.as_deref().unwrap().contains("External"));
}
