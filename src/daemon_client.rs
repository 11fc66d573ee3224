//! Reading a running gitfleet daemon (`--server URL`): its live inventory and its current
//! schedule (bindings, decisions, policy indices), so `plan` starts from the fleet as it is, and
//! its placements for `gitfleet status`. The documents are the server's own types
//! ([`crate::daemon::wire`]):
//! - `GET /api/v1/inventory`: the inventory, in the inventory file's format;
//! - `GET /api/v1/schedule`: the last schedule, in the state directory's `schedule.json` format;
//! - `GET /api/v1/placements`: every placement's rollout.

use crate::daemon::wire;
use crate::schedule::{Inventory, Previous};
use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach gitfleet daemon at {url}: {message}")]
    Request { url: String, message: String },
    #[error("gitfleet daemon at {url} answered with something that is not {what}: {message}")]
    Decode {
        url: String,
        what: &'static str,
        message: String,
    },
}

fn get<T: for<'de> Deserialize<'de>>(url: &str, what: &'static str) -> Result<T, ClientError> {
    let body = ureq::get(url)
        .call()
        .map_err(|e| ClientError::Request {
            url: url.to_string(),
            message: e.to_string(),
        })?
        .body_mut()
        .read_to_string()
        .map_err(|e| ClientError::Request {
            url: url.to_string(),
            message: e.to_string(),
        })?;
    serde_json::from_str(&body).map_err(|e| ClientError::Decode {
        url: url.to_string(),
        what,
        message: e.to_string(),
    })
}

fn endpoint(server: &str, path: &str) -> String {
    format!("{}{path}", server.trim_end_matches('/'))
}

pub fn inventory(server: &str) -> Result<Inventory, ClientError> {
    get(&endpoint(server, "/api/v1/inventory"), "an inventory")
}

/// The daemon's current schedule, by placement id.
pub fn schedule(server: &str) -> Result<Previous, ClientError> {
    let doc: wire::Schedule = get(&endpoint(server, "/api/v1/schedule"), "a schedule")?;
    Ok(doc
        .placements
        .into_iter()
        .map(|p| (p.key.clone(), p))
        .collect())
}

/// The daemon's staged update runs and approval requests, as one document
/// (`{"updateRuns": [...], "approvalRequests": [...]}`).
pub fn update_runs(server: &str) -> Result<serde_json::Value, ClientError> {
    let mut runs: serde_json::Value =
        get(&endpoint(server, "/api/v1/updateruns"), "the update runs")?;
    let requests: serde_json::Value = get(
        &endpoint(server, "/api/v1/approvalrequests"),
        "the approval requests",
    )?;
    runs["approvalRequests"] = requests["approvalRequests"].clone();
    Ok(runs)
}

/// The daemon's placements, as `GET /api/v1/placements` answers (for `gitfleet status`).
pub fn placements(server: &str) -> Result<wire::Placements, ClientError> {
    get(
        &endpoint(server, "/api/v1/placements"),
        "the placements status",
    )
}
