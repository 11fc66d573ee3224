//! The rollout core: **one step for one commit**. Given the commit's catalog and schedule, the
//! fleet, the state of the rollout and the clock, which cluster gets which snapshot now — the
//! work for members, with its manifests, apply strategy and snapshot stamp — and, once push has
//! done the work, the state it leaves and the KubeFleet/OCM status conditions. `gitfleet run`,
//! `gitfleet apply` and `gitfleet plan` all go through here; none of them decides any of this
//! on its own.
//!
//! - [`step()`]: the step, with the pacing as its parameter ([`Pacing::Immediate`] for `apply`,
//!   [`Pacing::Rolling`] for `run`, where staged update runs move External placements,
//!   [`Pace::Staged`]), and
//!   [`absorb`], which folds the outcomes back into the state;
//! - [`rolling`]: KubeFleet's RollingUpdate decision for one placement;
//! - [`work`]: the work items and their outcomes; [`strategy`]: how objects are applied;
//! - [`state`]: what a rollout remembers between steps (values; `crate::state` stores them);
//! - [`conditions`]: the placements' status conditions;
//! - [`preview`]: the rolling step played forward, for `gitfleet plan`;
//! - [`progressive`]: OCM's rollout strategies (All, Progressive, ProgressivePerGroup);
//! - [`guard`]: the mass-deletion guard: which new commits are held, and what releases them;
//! - [`serve`]: which commit is served: the head, the one served before, or none;
//! - [`staged`]: staged update runs (External strategy), stage by stage;
//! - [`eviction`]: KubeFleet's evictions within their disruption budgets, each judged once;
//! - [`approval`]: the approval requests of staged runs and what an accepted approval records;
//! - [`wake`]: when to look again after a step.
//!
//! Pure: no I/O, no clock (time is a parameter), no async. It must not know how work reaches a
//! member (push), where commits come from (git) or how anything is printed.

pub mod approval;
pub mod conditions;
pub mod eviction;
pub mod guard;
pub mod preview;
pub mod progressive;
pub mod rolling;
pub mod serve;
pub mod staged;
pub mod state;
pub mod step;
pub mod strategy;
pub mod wake;
pub mod work;

pub use rolling::{
    plan_step, BindingHealth, Budget, Revision, RollingParams, RolloutBinding, RolloutStep, Target,
};
pub use state::{
    ClusterState, ClusterStates, DetailFields, Details, LastProbe, PlacementState, Rejected,
    RolloutState,
};
pub use step::{
    absorb, absorb_indexed, step, step_memoized, BindingIndex, Decision, Input, Ledger, NameSource,
    Pace, Pacing, Rendered, StagedInput, StepMemo, StepSummary,
};
pub use strategy::{ApplyStrategy, Strategy};
pub use wake::{next_wake, Wake};
pub use work::{Action, Manifests, Observed, Outcome, Prune, Sweep, Work};
