//! How fast a step moves the fleet ([`Pacing`]), and so each placement ([`Pace`]).

use crate::model::placement::{
    PlacementPolicy, PlacementSpec, PlacementType, RollingUpdateConfig, RolloutStrategyType,
};
use crate::rollout::rolling::{RollingParams, Target};
use crate::rollout::strategy::Strategy;

/// How fast a step moves the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pacing {
    /// `gitfleet apply`: every selected cluster gets every placement's current manifests now,
    /// whatever its strategy, without a budget; what a member no longer receives is swept from
    /// its records ([`Sweep`]).
    Immediate,
    /// `gitfleet run`: each placement at its own pace. KubeFleet's RollingUpdate within the
    /// budget of `strategy.rollingUpdate`; OCM workloads to every selected cluster at once;
    /// `strategy.type: External` placements move only as staged update runs say (see
    /// [`Pace::Staged`]).
    Rolling,
}

/// How one placement moves in a step, from the pacing and its strategy.
#[derive(Debug, Clone, PartialEq)]
pub enum Pace {
    /// Every binding now.
    Now,
    /// KubeFleet's RollingUpdate (its rollout controller).
    Rolling {
        target: Target,
        params: RollingParams,
    },
    /// `strategy.type: External`: the staged update runs of the commit decide which clusters
    /// move, stage by stage ([`crate::rollout::staged`]); without a run
    /// nothing moves.
    Staged,
}

impl Pace {
    /// The pace of a KubeFleet placement with `spec` under `pacing`.
    pub fn of(pacing: Pacing, spec: &PlacementSpec) -> Pace {
        match (pacing, spec.strategy.type_.unwrap_or_default()) {
            (Pacing::Immediate, _) => Pace::Now,
            (Pacing::Rolling, RolloutStrategyType::External) => Pace::Staged,
            (Pacing::Rolling, RolloutStrategyType::RollingUpdate) => Pace::Rolling {
                target: target_of(spec.policy.as_ref()),
                params: rolling_params(spec.strategy.rolling_update.as_ref()),
            },
        }
    }

    /// How status names the pace.
    pub fn strategy(&self) -> Strategy {
        match self {
            Pace::Now => Strategy::Immediate,
            Pace::Rolling { .. } => Strategy::RollingUpdate,
            Pace::Staged => Strategy::External,
        }
    }
}

/// How many clusters a placement targets (as KubeFleet's rollout controller counts it).
pub fn target_of(policy: Option<&PlacementPolicy>) -> Target {
    match policy.map_or(PlacementType::PickAll, |p| p.placement_type) {
        PlacementType::PickAll => Target::PickAll,
        PlacementType::PickFixed => Target::Count(policy.map_or(0, |p| p.cluster_names.len())),
        PlacementType::PickN => Target::Count(
            policy
                .and_then(|p| p.number_of_clusters)
                .unwrap_or(0)
                .max(0) as usize,
        ),
    }
}

/// `strategy.rollingUpdate` with KubeFleet's defaults.
pub fn rolling_params(ru: Option<&RollingUpdateConfig>) -> RollingParams {
    let d = RollingParams::default();
    let Some(ru) = ru else { return d };
    RollingParams {
        max_unavailable: ru.max_unavailable.clone().unwrap_or(d.max_unavailable),
        max_surge: ru.max_surge.clone().unwrap_or(d.max_surge),
        unavailable_period_seconds: ru
            .unavailable_period_seconds
            .map_or(d.unavailable_period_seconds, |s| s.max(0) as u64),
    }
}
