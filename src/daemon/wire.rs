//! The status API's JSON documents: one type per document, written by the daemon's server
//! ([`super::server`]) and read by `gitfleet status` and `plan --server`
//! ([`crate::daemon_client`]). The inventory (`GET /api/v1/inventory`) is
//! [`crate::schedule::Inventory`] itself.

use serde::{Deserialize, Serialize};

use super::PlacementStatus;
use crate::rollout::Rejected;
use crate::schedule::PlacementSchedule;

/// `GET /api/v1/placements`: the branch followed and every placement's rollout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Placements {
    pub branch: String,
    /// The newest head seen (`null` before the first look).
    #[serde(default)]
    pub head: Option<String>,
    /// The commit being rolled out (the last valid one).
    #[serde(default)]
    pub serving: Option<String>,
    /// The newest head, when it was refused, with why.
    #[serde(default)]
    pub rejected: Option<Rejected>,
    /// The newest head, when the deletion guard holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<crate::rollout::guard::Held>,
    pub placements: Vec<PlacementStatus>,
}

impl Placements {
    /// One placement by its id (`crp/NAME`, `rp/NS/NAME`, `ocm/NS/NAME`).
    pub fn placement(&self, id: &str) -> Option<&PlacementStatus> {
        self.placements.iter().find(|p| p.id == id)
    }
}

/// `GET /api/v1/schedule`: the last schedule, in the state directory's `schedule.json` format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub version: u32,
    /// The commit the schedule is of.
    #[serde(default)]
    pub commit: Option<String>,
    pub placements: Vec<PlacementSchedule>,
}
