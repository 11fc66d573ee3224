//! Why a reconcile failed, as the daemon acts on it: look again after a pause, or stop acting.

use crate::state::StateError;

/// A reconcile that did not finish. The variants are the daemon's two answers: a replica that
/// no longer leads must stop before it writes to a member again; any other failure (an
/// unreadable commit, an API server that did not answer) is logged and looked at again.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// This replica's lease was not renewed in time (a pause, a lost API server).
    #[error(transparent)]
    NotLeading(#[from] super::leader::NotLeading),
    /// A newer leader wrote the state since this replica last read it.
    #[error(transparent)]
    Fenced(StateError),
    /// Anything else: worth another look.
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl ReconcileError {
    /// Whether the daemon looks again (after a pause) rather than stop acting.
    pub fn retry(&self) -> bool {
        matches!(self, ReconcileError::Other(_))
    }

    /// The error as the command line reports it: a failure of the reconcile itself keeps its
    /// own type (the exit code is chosen by it), the others are wrapped.
    pub fn into_anyhow(self) -> anyhow::Error {
        match self {
            ReconcileError::Other(e) => e,
            other => anyhow::Error::new(other),
        }
    }
}

impl From<StateError> for ReconcileError {
    fn from(e: StateError) -> Self {
        match e {
            StateError::Fenced { .. } => ReconcileError::Fenced(e),
            other => ReconcileError::Other(other.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_replica_that_still_leads_retries() {
        let fenced = StateError::Fenced {
            object: "ConfigMap/gf".into(),
            expected: "7".into(),
        };
        assert!(!ReconcileError::from(fenced).retry());
        assert!(!ReconcileError::from(super::super::leader::NotLeading).retry());
        assert!(ReconcileError::from(anyhow::anyhow!("cannot read the commit")).retry());
    }
}
