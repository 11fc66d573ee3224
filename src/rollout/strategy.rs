//! How a placement's objects are applied on a member: its `applyStrategy` and `deleteStrategy`,
//! defaulted the gitfleet way. Decided here, once, for every command; push only carries it out.

use serde::{Deserialize, Serialize};

use crate::model::placement::{
    ApplyStrategyType, ComparisonOption, PropagationPolicy, RolloutStrategy, WhenToApply,
    WhenToTakeOver,
};

/// How a placement moves in a step, as status, plans and logs name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Strategy {
    /// Every cluster at once, without a budget (`gitfleet apply`).
    Immediate,
    /// `strategy.rollingUpdate`'s budget.
    RollingUpdate,
    /// `strategy.type: External`: moved only by staged update runs.
    External,
    /// OCM workloads: every selected cluster at once.
    #[serde(rename = "OCM")]
    Ocm,
    /// Gone from the commit: what it placed is removed.
    Deleted,
}

impl Strategy {
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Immediate => "Immediate",
            Strategy::RollingUpdate => "RollingUpdate",
            Strategy::External => "External",
            Strategy::Ocm => "OCM",
            Strategy::Deleted => "Deleted",
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyStrategy {
    pub type_: ApplyStrategyType,
    pub comparison: ComparisonOption,
    pub when_to_apply: WhenToApply,
    pub when_to_take_over: WhenToTakeOver,
    pub force: bool,
    pub abandon: bool,
}

impl Default for ApplyStrategy {
    /// What OCM workloads get, and a deleted placement whose strategy is gone.
    fn default() -> Self {
        ApplyStrategy::from_rollout(None)
    }
}

impl ApplyStrategy {
    /// The placement's strategy with KubeFleet's defaults: ClientSideApply when no type is
    /// given, so that a field the manifest sets and someone changed on a member is put back
    /// (how push does it: [`crate::push::member`]).
    pub fn from_rollout(strategy: Option<&RolloutStrategy>) -> ApplyStrategy {
        let apply = strategy.and_then(|s| s.apply_strategy.as_ref());
        ApplyStrategy {
            type_: apply.and_then(|a| a.type_).unwrap_or_default(),
            comparison: apply.and_then(|a| a.comparison_option).unwrap_or_default(),
            when_to_apply: apply.and_then(|a| a.when_to_apply).unwrap_or_default(),
            when_to_take_over: apply.and_then(|a| a.when_to_take_over).unwrap_or_default(),
            force: apply
                .and_then(|a| a.server_side_apply_config.as_ref())
                .is_some_and(|c| c.force),
            abandon: strategy
                .and_then(|s| s.delete_strategy.as_ref())
                .and_then(|d| d.propagation_policy)
                == Some(PropagationPolicy::Abandon),
        }
    }

    /// ReportDiff: nothing is written; status reports DiffReported instead of Applied/Available.
    pub fn reports_diff(&self) -> bool {
        self.type_ == ApplyStrategyType::ReportDiff
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_strategy_is_kubefleets_client_side_apply() {
        let s = ApplyStrategy::from_rollout(None);
        assert_eq!(s.type_, ApplyStrategyType::ClientSideApply);
        assert_eq!(s.when_to_take_over, WhenToTakeOver::Always);
        assert!(!s.force && !s.abandon && !s.reports_diff());
    }
}
