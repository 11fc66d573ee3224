//! What the daemon keeps in `--state-dir` besides the schedule (`schedule.json`, shared with
//! `gitfleet schedule --state`): the commit it serves, the last rejected commit, and per
//! placement its resource snapshot history and what every cluster was last given, with the
//! health that push reported. Written crash-safely after every step, so a restart resumes where
//! the rollout was.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::rollout::{BindingHealth, Revision};
use crate::snapshot::History;
use crate::state::{write_atomic, StateError, FORMAT_VERSION};

const FILE: &str = "daemon.json";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonState {
    pub version: u32,
    /// The last commit that validated and is being rolled out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<String>,
    /// The newest commit that failed validation, and why; cleared by the next good commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<Rejected>,
    /// By placement id (`crp/NAME`, `rp/NS/NAME`, `ocm/NS/NAME`).
    #[serde(default)]
    pub placements: BTreeMap<String, PlacementState>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rejected {
    pub commit: String,
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementState {
    #[serde(default)]
    pub resources: History,
    /// `deleteStrategy.propagationPolicy: Abandon`, kept for when the placement is deleted.
    #[serde(default)]
    pub abandon: bool,
    /// By cluster name: what the cluster was last given by this placement.
    #[serde(default)]
    pub clusters: BTreeMap<String, ClusterState>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterState {
    /// What was last pushed successfully; `None` when nothing was yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<Revision>,
    /// A revision whose push failed (the cluster still runs `revision`); retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempted: Option<Revision>,
    /// The commit of that push.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    pub health: BindingHealth,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Unix seconds of the last change of this entry.
    pub updated_at: u64,
}

impl DaemonState {
    pub fn load(dir: &Path) -> Result<DaemonState, StateError> {
        let file = dir.join(FILE);
        let bytes = match std::fs::read(&file) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(DaemonState {
                    version: FORMAT_VERSION,
                    ..DaemonState::default()
                })
            }
            Err(source) => return Err(StateError::Read { file, source }),
        };
        let corrupt = |file: &PathBuf, e: serde_json::Error| StateError::Corrupt {
            file: file.clone(),
            message: e.to_string(),
        };
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| corrupt(&file, e))?;
        let found = value.get("version").and_then(|v| v.as_u64()).unwrap_or(0) as u32;
        if found != FORMAT_VERSION {
            return Err(StateError::Version { file, found });
        }
        serde_json::from_value(value).map_err(|e| corrupt(&file, e))
    }

    pub fn save(&self, dir: &Path) -> Result<(), StateError> {
        let bytes = serde_json::to_vec_pretty(self).expect("daemon state serialises");
        write_atomic(&dir.join(FILE), &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_versions() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = DaemonState::load(dir.path()).unwrap();
        assert_eq!(fresh.version, FORMAT_VERSION);
        let mut s = fresh.clone();
        s.serving = Some("abc".into());
        s.placements
            .entry("crp/app".into())
            .or_default()
            .clusters
            .insert(
                "m1".into(),
                ClusterState {
                    revision: Some(Revision {
                        resource_index: 2,
                        rendered: "h".into(),
                    }),
                    attempted: None,
                    commit: Some("abc".into()),
                    health: BindingHealth::AvailableUntrackable { since: 7 },
                    last_error: None,
                    updated_at: 9,
                },
            );
        s.save(dir.path()).unwrap();
        assert_eq!(DaemonState::load(dir.path()).unwrap(), s);

        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        std::fs::write(
            dir.path().join(FILE),
            text.replacen(
                &format!("\"version\": {FORMAT_VERSION}"),
                "\"version\": 99",
                1,
            ),
        )
        .unwrap();
        let e = DaemonState::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("version 99"), "{e}");
    }
}
