//! The admin endpoint: a loopback HTTP port to look at the members and change their faults at
//! run time.
//!
//! - `GET /members` lists members: name, context, server, token, faults, injected error count.
//! - `GET /members/{name}` shows one.
//! - `POST /members/{name}/faults` (or PUT/PATCH) with JSON `{"latencyMs", "errorRate",
//!   "errorCodes", "down"}` changes the given fields and returns the member.
//! - `GET /members/{name}/changes[?resource=deployments]` lists the member's recent changes
//!   (writes and deletions, the workload controllers' status updates included) with a sequence
//!   number shared by all members, so the order of events across members can be checked.
//! - `GET /healthz` answers `ok`.

use std::sync::Arc;

use serde_json::{json, Value};

use super::fleet_file::FaultsUpdate;
use super::http::{Request, Response};
use super::member::Member;

pub fn describe(m: &Member) -> Value {
    let (faults, injected) = {
        let f = m.faults.lock().unwrap_or_else(|e| e.into_inner());
        (f.faults.clone(), f.injected)
    };
    json!({
        "name": m.name,
        "context": m.context,
        "server": m.url(),
        "token": m.token,
        "anonymousAuth": m.anonymous_auth,
        "faults": faults,
        "injectedErrors": injected,
    })
}

/// The member's change log, summarised: what changed, its generation and, for workloads, how
/// far its rollout is.
fn changes(m: &Member, resource: Option<&str>) -> Vec<Value> {
    let store = m.store.lock().unwrap_or_else(|e| e.into_inner());
    store
        .changes()
        .filter(|e| resource.is_none_or(|r| e.key.resource == r))
        .map(|e| {
            let o = &e.object;
            json!({
                "seq": e.seq,
                "type": e.kind.as_str(),
                "group": e.key.group,
                "resource": e.key.resource,
                "namespace": e.key.namespace,
                "name": e.key.name,
                "resourceVersion": e.rv.to_string(),
                "generation": o["metadata"]["generation"],
                "observedGeneration": o["status"]["observedGeneration"],
                "replicas": o["spec"]["replicas"],
                "updatedReplicas": o["status"]["updatedReplicas"],
                "availableReplicas": o["status"]["availableReplicas"],
                "fieldManagers": o["metadata"]["managedFields"]
                    .as_array()
                    .map(|a| a.iter().map(|f| f["manager"].clone()).collect::<Vec<_>>()),
            })
        })
        .collect()
}

fn problem(code: u16, message: impl Into<String>) -> Response {
    Response::json(code, &json!({"error": message.into()}))
}

pub fn handle(members: &[Arc<Member>], req: &Request) -> Response {
    let seg: Vec<&str> = req.segments.iter().map(String::as_str).collect();
    let find = |name: &str| members.iter().find(|m| m.name == name);
    match (req.method.as_str(), seg.as_slice()) {
        ("GET", ["healthz"]) => Response::bytes(200, "text/plain", b"ok".to_vec()),
        ("GET", ["members"]) => Response::json(
            200,
            &json!({"members": members.iter().map(|m| describe(m)).collect::<Vec<_>>()}),
        ),
        ("GET", ["members", name]) => match find(name) {
            Some(m) => Response::json(200, &describe(m)),
            None => problem(404, format!("no member named {name:?}")),
        },
        ("GET", ["members", name, "changes"]) => match find(name) {
            Some(m) => Response::json(200, &json!({"changes": changes(m, req.query("resource"))})),
            None => problem(404, format!("no member named {name:?}")),
        },
        ("POST" | "PUT" | "PATCH", ["members", name, "faults"]) => {
            let Some(m) = find(name) else {
                return problem(404, format!("no member named {name:?}"));
            };
            let update: FaultsUpdate = match serde_json::from_slice(&req.body) {
                Ok(u) => u,
                Err(e) => return problem(400, format!("faults must be JSON like {{\"latencyMs\": 100, \"errorRate\": 0.5, \"errorCodes\": [503], \"down\": false}}: {e}")),
            };
            match m.current_faults().updated(&update) {
                Ok(next) => {
                    m.set_faults(next);
                    Response::json(200, &describe(m))
                }
                Err(problems) => problem(422, problems.join("; ")),
            }
        }
        _ => problem(
            404,
            "not found: use GET /members, GET /members/{name}, POST /members/{name}/faults",
        ),
    }
}
