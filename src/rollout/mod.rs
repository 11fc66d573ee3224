//! Rollout planning (pure): how a placement's clusters move to a new revision. `rolling` is
//! KubeFleet's RollingUpdate controller step (kubefleet.md §3.1). The daemon that drives it with
//! live health from members is not built yet; `gitfleet apply` pushes without pacing.

pub mod rolling;

pub use rolling::{
    plan_step, BindingHealth, Budget, Revision, RollingParams, RolloutBinding, RolloutStep, Target,
};
