//! The durable state store: what must survive between runs and leaders — the last schedule
//! (bindings, decisions, policy indices) and the rollout's state (see
//! [`crate::rollout::RolloutState`]) — behind one trait, [`StateBackend`], with two backends:
//!
//! - [`dir`]: a directory (`--state directory`, the default for one machine): `schedule.json`
//!   and `daemon.json`, written crash-safely, with an exclusive lock on the directory.
//! - [`kube`]: objects in the hosting cluster (`--state kubernetes`): one ConfigMap per
//!   placement and a head object ([`layout`]), every write with a resourceVersion precondition
//!   so that a deposed leader's late write fails instead of overwriting (fencing).
//!
//! The daemon reads and writes through the trait and does not know which backend it has.

pub mod dir;
pub mod journal;
pub mod kube;
pub mod layout;

use std::path::PathBuf;
use std::sync::Arc;

use crate::rollout::RolloutState;
use crate::schedule::{PlacementSchedule, Previous};

pub use dir::{read_rollout, write_atomic, StateStore, LOCK_FILE};

/// Bumped whenever the stored format changes incompatibly (files and objects alike).
pub const FORMAT_VERSION: u32 = 1;

/// Where the daemon keeps its state. Called from the blocking pool (saves are synchronous,
/// fsync'd or sent to the API server, before the step's effects are acted on).
pub trait StateBackend: Send + Sync + std::fmt::Debug {
    /// Whether a rollout state was ever saved (`false`: new or lost state, rebuilt from the
    /// members' records).
    fn has_rollout(&self) -> Result<bool, StateError>;

    /// The last saved schedule (and the commit it was made for), by placement; empty when
    /// nothing was saved yet.
    fn load_schedule(&self) -> Result<(Option<String>, Previous), StateError>;

    /// The rollout's state; empty when nothing was saved yet. Equal values of the clusters'
    /// entries are shared, as the pushes that made them shared them
    /// ([`RolloutState::share_equal_values`]).
    fn load_rollout(&self) -> Result<RolloutState, StateError>;

    /// Saves the schedule, when given, and the rollout state. A [`StateError::Fenced`] means
    /// another replica owns the state now: the caller must stop acting.
    fn save(
        &self,
        schedule: Option<(&str, &[Arc<PlacementSchedule>])>,
        state: &RolloutState,
    ) -> Result<(), StateError>;

    /// Writes the whole state where saves only recorded what changed (the directory's
    /// journal), when the daemon stops cleanly. Nothing to do by default.
    fn compact(&self, _state: &RolloutState) -> Result<(), StateError> {
        Ok(())
    }

    /// Where the state is, for logs (`directory /var/lib/gitfleet`, `configmaps gitfleet/gitfleet-*`).
    fn location(&self) -> String;
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot use state directory {dir}: {source}")]
    Dir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read {file}: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {file}: {source}")]
    Write {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file} is not a gitfleet state file: {message}")]
    Corrupt { file: PathBuf, message: String },
    #[error("state directory {dir} is in use by another gitfleet ({holder}, lock file {lock}); stop it first, or give this one another directory")]
    Locked {
        dir: PathBuf,
        lock: PathBuf,
        /// `pid N`, or why the pid is not known.
        holder: String,
    },
    #[error("{file} has state format version {found}, but this gitfleet reads version {FORMAT_VERSION}; use the gitfleet that wrote it, or move the directory away to start afresh")]
    Version { file: PathBuf, found: u32 },
    /// The hosting cluster refused or failed a read or write of a state object.
    #[error("state object {object}: {message}")]
    Kube { object: String, message: String },
    #[error("state object {object} is not gitfleet state: {message}")]
    CorruptObject { object: String, message: String },
    /// A write's resourceVersion precondition failed: another replica wrote the state since
    /// this one read it, so this one is no longer the leader and must stop acting.
    #[error("state object {object} was written by another replica since this one read it (resourceVersion {expected} is stale): this replica is no longer the leader")]
    Fenced { object: String, expected: String },
}
