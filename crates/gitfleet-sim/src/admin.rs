//! The admin endpoint: a loopback HTTP port to look at the members and change their faults at
//! run time. It hands out member tokens and can take members down, so every request, `/healthz`
//! included, must carry the endpoint's own token, `Authorization: Bearer <token>` (401
//! otherwise); `gitfleet sim` generates it at start (or takes `--admin-token`) and writes it
//! beside the kubeconfig.
//!
//! - `GET /members` lists members: name, context, server, token, faults, injected error count,
//!   requests received (`requests.reads`: GET/HEAD/OPTIONS, `requests.writes`: the rest).
//! - `GET /members/{name}` shows one.
//! - `POST /members/{name}/faults` (or PUT/PATCH) with JSON `{"latencyMs", "errorRate",
//!   "errorCodes", "down", "garbage"}` changes the given fields and returns the member.
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
        "requests": {"reads": m.requests.get().0, "writes": m.requests.get().1},
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
            let o = e.object.value();
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

/// Lets `req` through when it carries `token` as its bearer token.
pub fn authorize(token: &str, req: &Request) -> Result<(), Response> {
    use sha2::{Digest, Sha256};
    let given = req
        .header("authorization")
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim);
    // Digests compared, not the tokens: the comparison's time tells nothing of the token.
    let matches = given.is_some_and(|g| {
        !token.is_empty() && Sha256::digest(g.as_bytes()) == Sha256::digest(token.as_bytes())
    });
    if matches {
        return Ok(());
    }
    let why = if given.is_some() {
        "wrong admin token"
    } else {
        "the admin endpoint needs `Authorization: Bearer <token>`: the token is in the file \
         `gitfleet sim` names on start (<kubeconfig>.admin-token), or the one given with --admin-token"
    };
    Err(problem(401, why).with_header("WWW-Authenticate", "Bearer"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_needs_the_admin_token() {
        let req = |auth: Option<&str>| {
            let headers: Vec<(&str, &str)> =
                auth.map(|a| ("Authorization", a)).into_iter().collect();
            Request::new("GET", "/members", &headers, b"")
        };
        assert!(authorize("s3cret", &req(Some("Bearer s3cret"))).is_ok());
        for (auth, why) in [
            (None, "needs `Authorization: Bearer <token>`"),
            (Some("Bearer s3cre"), "wrong admin token"),
            (Some("Bearer s3cret2"), "wrong admin token"),
            (Some("Basic s3cret"), "needs `Authorization"),
        ] {
            let mut refused = authorize("s3cret", &req(auth)).unwrap_err();
            assert_eq!(refused.status, 401, "{auth:?}");
            let body = String::from_utf8(refused.body_bytes()).unwrap();
            assert!(body.contains(why), "{auth:?}: {body}");
        }
        // An empty token never matches (it is refused at start anyway).
        assert!(authorize("", &req(Some("Bearer "))).is_err());
    }
}
