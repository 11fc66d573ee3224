//! API errors as the Kubernetes API server reports them: a `Status` body with code, reason,
//! message and details. Everything that fails in the simulator ends up as one of these.

use serde_json::{json, Value};

/// One failed API request.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
    /// Seconds for a `Retry-After` header (429, 503).
    pub retry_after: Option<u64>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// `<resource>.<group> "<name>" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        ApiError::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, resource)),
        )
        .with_details(details(group, resource, name))
    }

    /// A path the server does not serve.
    pub fn no_route() -> Self {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, resource)),
        )
        .with_details(details(group, resource, name))
    }

    /// Optimistic-concurrency failure (stale resourceVersion or uid precondition).
    pub fn stale(group: &str, resource: &str, name: &str, why: &str) -> Self {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, resource)
            ),
        )
        .with_details(details(group, resource, name))
    }

    /// Server-side apply conflicts: `(manager description, field path)` pairs.
    pub fn apply_conflicts(conflicts: &[(String, String)]) -> Self {
        let message = if conflicts.len() == 1 {
            format!(
                "Apply failed with 1 conflict: conflict with {}: {}",
                conflicts[0].0, conflicts[0].1
            )
        } else {
            let mut managers: Vec<&String> = conflicts.iter().map(|(m, _)| m).collect();
            managers.sort();
            managers.dedup();
            let mut lines = Vec::new();
            for m in managers {
                lines.push(format!("conflicts with {m}:"));
                for (_, path) in conflicts.iter().filter(|(cm, _)| cm == m) {
                    lines.push(format!("- {path}"));
                }
            }
            format!(
                "Apply failed with {} conflicts: {}",
                conflicts.len(),
                lines.join("\n")
            )
        };
        let causes: Vec<Value> = conflicts
            .iter()
            .map(|(m, p)| {
                json!({"reason": "FieldManagerConflict", "message": format!("conflict with {m}"), "field": p})
            })
            .collect();
        ApiError::new(409, "Conflict", message).with_details(json!({ "causes": causes }))
    }

    /// 422 with one cause per invalid field: `(field, message)`.
    pub fn invalid(group: &str, kind: &str, name: &str, problems: &[(String, String)]) -> Self {
        let list: Vec<String> = problems.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        let summary = if list.len() == 1 {
            list[0].clone()
        } else {
            format!("[{}]", list.join(", "))
        };
        let causes: Vec<Value> = problems
            .iter()
            .map(|(f, m)| json!({"reason": cause_reason(m), "message": m, "field": f}))
            .collect();
        ApiError::new(
            422,
            "Invalid",
            format!(
                "{} \"{name}\" is invalid: {summary}",
                qualified(group, kind)
            ),
        )
        .with_details(invalid_details(name, group, kind, causes))
    }

    /// 422 as the API server answers a JSON patch that cannot be applied (a failed `test`, a
    /// path that is not there): its generic message, no details.
    pub fn unprocessable_patch() -> Self {
        ApiError::new(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
        )
        .with_details(json!({}))
    }

    /// 415 for a strategic merge patch of a custom resource, worded as the API server does
    /// (the accepted types only).
    pub fn strategic_merge_unsupported() -> Self {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        )
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(400, "BadRequest", message)
    }

    /// A request body over the server's limit (the API server's `MaxRequestBodyBytes`).
    pub fn entity_too_large(limit: usize) -> Self {
        ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    pub fn unauthorized() -> Self {
        ApiError::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::new(403, "Forbidden", message)
    }

    pub fn method_not_allowed(verb: &str, group: &str, resource: &str) -> Self {
        ApiError::new(
            405,
            "MethodNotAllowed",
            format!(
                "the server does not allow this method on the requested resource ({verb} {})",
                qualified(group, resource)
            ),
        )
    }

    /// A body in a format the server does not read; `accepted` lists the ones it does.
    pub fn unsupported_media_type(content_type: &str, accepted: &str) -> Self {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: {accepted} (got {content_type:?})"),
        )
    }

    /// A body in a media type the server reads, but with content it cannot (the simulator's
    /// protobuf covers a subset of kinds).
    pub fn unsupported_media_type_because(content_type: &str, why: &str) -> Self {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request ({content_type}) cannot be read: {why}"),
        )
    }

    /// An eviction a PodDisruptionBudget forbids (429, which kubectl drain retries).
    pub fn disruption_budget(pdb: &str, needs: i64, has: i64) -> Self {
        ApiError::new(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
        )
        .with_details(json!({"causes": [{
            "reason": "DisruptionBudget",
            "message": format!("The disruption budget {pdb} needs {needs} healthy pods and has {has} currently"),
        }]}))
    }

    /// An error the API server did not turn into a Status: 500 with no reason (kubectl prints
    /// `Error from server: <message>`).
    pub fn unknown_internal(message: impl Into<String>) -> Self {
        ApiError::new(500, "", message)
    }

    pub fn gone(message: impl Into<String>) -> Self {
        ApiError::new(410, "Expired", message)
    }

    /// An injected fault.
    pub fn injected(code: u16) -> Self {
        match code {
            429 => ApiError {
                retry_after: Some(1),
                ..ApiError::new(
                    429,
                    "TooManyRequests",
                    "Too many requests, please try again later.",
                )
                .with_details(json!({"retryAfterSeconds": 1}))
            },
            // As the API server's own 503 (an unavailable aggregated API, or a timeout
            // filter): no Retry-After. Only its 429 (max-in-flight, priority and fairness)
            // carries one, and client-go retries a 5xx only when Retry-After is present.
            503 => ApiError::new(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request (simulated fault)",
            ),
            504 => ApiError::new(
                504,
                "Timeout",
                "the server was unable to return a response in the time allotted (simulated fault)",
            ),
            502 => ApiError::new(502, "InternalError", "bad gateway (simulated fault)"),
            c => ApiError::new(
                c,
                "InternalError",
                "Internal error occurred: simulated fault",
            ),
        }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    /// The `Status` body.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty() {
            // Go omits an empty reason.
            if let Some(m) = status.as_object_mut() {
                m.remove("reason");
            }
        }
        if let Some(d) = &self.details {
            status["details"] = d.clone();
        }
        status
    }
}

/// The `Status` a delete returns when the object is gone at once.
pub fn delete_success(group: &str, resource: &str, name: &str, uid: &str) -> Value {
    let mut d = details(group, resource, name);
    d["uid"] = json!(uid);
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": d})
}

fn details(group: &str, resource: &str, name: &str) -> Value {
    let mut d = json!({"name": name, "kind": resource});
    if !group.is_empty() {
        d["group"] = json!(group);
    }
    d
}

fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

/// A cause's reason, from its message as field.ErrorList words it (`Required value`, ...).
fn cause_reason(message: &str) -> &'static str {
    [
        ("Required value", "FieldValueRequired"),
        ("Forbidden", "FieldValueForbidden"),
        ("Unsupported value", "FieldValueNotSupported"),
        ("Duplicate value", "FieldValueDuplicate"),
        ("Too long", "FieldValueTooLong"),
        ("Too many", "FieldValueTooMany"),
        ("Not found", "FieldValueNotFound"),
    ]
    .iter()
    .find(|(prefix, _)| message.starts_with(prefix))
    .map_or("FieldValueInvalid", |(_, reason)| reason)
}

/// Status details; an empty name or (core) group is left out, as the API server's JSON omits
/// them.
fn invalid_details(name: &str, group: &str, kind: &str, causes: Vec<Value>) -> Value {
    let mut d = json!({"name": name, "group": group, "kind": kind, "causes": causes});
    if let Some(m) = d.as_object_mut() {
        if group.is_empty() {
            m.shift_remove("group");
        }
        if name.is_empty() {
            m.shift_remove("name");
        }
    }
    d
}

impl From<super::patch::PatchError> for ApiError {
    fn from(e: super::patch::PatchError) -> Self {
        match e {
            super::patch::PatchError::Malformed(m) => ApiError::bad_request(m),
            super::patch::PatchError::NotApplicable(_) => ApiError::unprocessable_patch(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_reads_like_the_api_server() {
        let s = ApiError::not_found("", "namespaces", "x").to_status();
        assert_eq!(s["message"], "namespaces \"x\" not found");
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["code"], 404);
        assert_eq!(s["kind"], "Status");
        let s = ApiError::not_found("apps", "deployments", "web").to_status();
        assert_eq!(s["message"], "deployments.apps \"web\" not found");
        assert_eq!(s["details"]["group"], "apps");
    }

    #[test]
    fn conflict_messages_match_the_api_server() {
        let one = ApiError::apply_conflicts(&[("\"other\"".into(), ".data.a".into())]);
        assert_eq!(
            one.message,
            "Apply failed with 1 conflict: conflict with \"other\": .data.a"
        );
        assert_eq!(
            one.to_status()["details"]["causes"][0]["reason"],
            "FieldManagerConflict"
        );
        let two = ApiError::apply_conflicts(&[
            ("\"b\"".into(), ".data.x".into()),
            ("\"a\"".into(), ".data.y".into()),
        ]);
        assert_eq!(
            two.message,
            "Apply failed with 2 conflicts: conflicts with \"a\":\n- .data.y\nconflicts with \"b\":\n- .data.x"
        );
    }
}
