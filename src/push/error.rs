//! Why a request to a member, or the handling of one object, failed: typed, so that callers
//! decide on the API server's `Status` (code, reason, `details.causes`) and never on message text.
//! Results carry the error's text ([`super::ObjectResult::error`]); its wording is the API
//! server's (`409 Conflict: Apply failed with 1 conflict: conflict with "other" using v1: .data.a`).

use super::record::RecordError;
use crate::members::retry::{classify_status, Classify, Retry};
use kube::core::Status;

/// The `reason` of a `details.causes` entry that names a server-side apply field conflict
/// (metav1.CauseTypeFieldManagerConflict).
pub const FIELD_MANAGER_CONFLICT: &str = "FieldManagerConflict";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server answered with a failure `Status`.
    #[error("{} {}: {}", .0.code, .0.reason, .0.message)]
    Api(Box<Status>),
    /// The request got no usable answer: connection refused or reset, timeout, TLS, a body cut
    /// short in transit. The member (or the way to it) may come back.
    #[error("{0}")]
    Transport(#[source] kube::Error),
    /// Anything else the client reports (discovery, request building, credentials): asking
    /// again would fail the same way.
    #[error("{0}")]
    Client(#[source] kube::Error),
    /// The last error of a request that was tried more than once.
    #[error("{source} (after {attempts} attempts)")]
    Retried {
        #[source]
        source: Box<Error>,
        attempts: u32,
    },
    /// A server-side apply without `force` met fields another manager owns: the API server's
    /// 409 (which names the manager and the fields), and what to do about it.
    #[error("{0}; set serverSideApplyConfig.force: true in the placement's applyStrategy to take these fields over")]
    NotForced(Box<Error>),
    #[error("the member does not serve {api_version} {kind}")]
    NotServed { api_version: String, kind: String },
    #[error("deletion in progress: the member accepted the DELETE but still has the object (finalizers {finalizers}); the next run checks again")]
    DeletionInProgress { finalizers: String },
    /// KubeFleet refuses these too: a generated name cannot be tracked, pruned or re-applied.
    #[error("the manifest has no metadata.name (generateName is not supported)")]
    NoName,
    #[error("manifest is not an object: {0}")]
    NotAnObject(#[source] serde_json::Error),
    #[error(transparent)]
    Record(#[from] RecordError),
    /// Another live gitfleet is writing this placement to the member (see
    /// [`super::writer`]).
    #[error("{holder} is writing this placement to the member (commit {commit}, its mark lasts until {until}); nothing of it was written by this push")]
    Held {
        holder: String,
        commit: String,
        until: String,
    },
    /// The record changed between this push's read and its mark: what it decided is stale.
    #[error("another gitfleet wrote this placement to the member while this push was reading it; nothing of it was written by this push (the next run starts from what is there)")]
    Changed,
    /// The placement's mark failed earlier in this push (see the first object's error).
    #[error("{0}")]
    NotMarked(String),
    /// The mark was taken by another writer while this push wrote (it expired): the member may
    /// hold some objects of each.
    #[error("another writer took this placement's record on the member while this push was writing (the mark expired): the member may hold objects of both; run again ({source})")]
    MarkLost {
        #[source]
        source: Box<Error>,
    },
}

/// One field another manager owns, as a 409's `details.causes` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldConflict {
    /// The manager's name (`kubectl`, `before-first-apply`), without the `using v1` /
    /// `with subresource "status"` qualifiers of an Update manager.
    pub manager: String,
    /// The field path, e.g. `.data.mode`.
    pub field: String,
}

impl From<kube::Error> for Error {
    fn from(e: kube::Error) -> Error {
        match e {
            kube::Error::Api(status) => Error::Api(status),
            // Connection refused/reset, timeouts, TLS and HTTP transport errors, and bodies cut
            // short or garbled in transit (they read as decoding errors).
            kube::Error::HyperError(_)
            | kube::Error::Service(_)
            | kube::Error::ReadEvents(_)
            | kube::Error::SerdeError(_)
            | kube::Error::FromUtf8(_) => Error::Transport(e),
            e => Error::Client(e),
        }
    }
}

impl Error {
    /// The API server's answer, if the request got one.
    pub fn status(&self) -> Option<&Status> {
        match self {
            Error::Api(status) => Some(status),
            Error::Retried { source, .. } | Error::NotForced(source) => source.status(),
            _ => None,
        }
    }

    fn has_code(&self, code: u16) -> bool {
        self.status().is_some_and(|s| s.code == code)
    }

    /// 404: the object (or its namespace, or its kind) does not exist.
    pub fn is_not_found(&self) -> bool {
        self.has_code(404)
    }

    /// 409: a resourceVersion precondition failed, or the object already exists (create).
    pub fn is_conflict(&self) -> bool {
        self.has_code(409)
    }

    /// 422: the object is invalid (e.g. an immutable field changed).
    pub fn is_invalid(&self) -> bool {
        self.has_code(422)
    }

    /// Discovery found no such kind, or the server answered 404 for its group version.
    pub fn is_unknown_kind(&self) -> bool {
        self.is_not_found() || matches!(self, Error::Client(kube::Error::Discovery(_)))
    }

    /// The field conflicts of a 409 from server-side apply, read from `details.causes`; empty for
    /// any other error (a 409 without field-manager causes is an optimistic-lock conflict).
    pub fn field_conflicts(&self) -> Vec<FieldConflict> {
        let Some(status) = self.status().filter(|s| s.code == 409) else {
            return Vec::new();
        };
        status
            .details
            .iter()
            .flat_map(|d| &d.causes)
            .filter(|c| c.reason == FIELD_MANAGER_CONFLICT)
            .map(|c| FieldConflict {
                manager: manager_of(&c.message),
                field: c.field.clone(),
            })
            .collect()
    }
}

impl Classify for Error {
    fn classify(&self) -> Retry {
        match self {
            Error::Api(status) => classify_status(
                status.code,
                status
                    .details
                    .as_ref()
                    .map(|d| d.retry_after_seconds)
                    .filter(|s| *s > 0),
            ),
            Error::Transport(_) => Retry::Retryable { retry_after: None },
            Error::Retried { source, .. } | Error::NotForced(source) => source.classify(),
            _ => Retry::Permanent,
        }
    }
}

/// The manager a conflict cause names. The API server writes the cause's message as
/// `conflict with <manager>`, where <manager> is Go-quoted and, for an Update manager, followed by
/// ` with subresource "…"` and/or ` using <apiVersion>` (apimachinery
/// pkg/util/managedfields/internal/conflict.go, `printManager`). Only the quoted name is kept.
fn manager_of(message: &str) -> String {
    let rest = message.strip_prefix("conflict with ").unwrap_or(message);
    let Some(quoted) = rest.strip_prefix('"') else {
        return rest.to_string();
    };
    let mut name = String::new();
    let mut chars = quoted.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return name,
            '\\' => name.extend(chars.next()),
            c => name.push(c),
        }
    }
    // No closing quote: not the API server's format; keep what there is.
    rest.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::response::{StatusCause, StatusDetails};

    fn api(code: u16, causes: &[(&str, &str, &str)]) -> Error {
        let mut s = Status::failure("Apply failed with 1 conflict", "Conflict").with_code(code);
        s.details = Some(StatusDetails {
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
            causes: causes
                .iter()
                .map(|(reason, message, field)| StatusCause {
                    reason: reason.to_string(),
                    message: message.to_string(),
                    field: field.to_string(),
                })
                .collect(),
            retry_after_seconds: 0,
        });
        Error::Api(Box::new(s))
    }

    #[test]
    fn conflicts_come_from_the_causes() {
        let e = api(
            409,
            &[
                (
                    FIELD_MANAGER_CONFLICT,
                    "conflict with \"kubectl\"",
                    ".data.a",
                ),
                (
                    FIELD_MANAGER_CONFLICT,
                    "conflict with \"kubectl-edit\" using v1",
                    ".data.b",
                ),
                (
                    FIELD_MANAGER_CONFLICT,
                    r#"conflict with "odd \"name\"" with subresource "status" using apps/v1"#,
                    ".status.x",
                ),
                ("FieldValueInvalid", "ignored", ".spec"),
            ],
        );
        let managers: Vec<(String, String)> = e
            .field_conflicts()
            .into_iter()
            .map(|c| (c.manager, c.field))
            .collect();
        assert_eq!(
            managers,
            [
                ("kubectl".to_string(), ".data.a".to_string()),
                ("kubectl-edit".to_string(), ".data.b".to_string()),
                ("odd \"name\"".to_string(), ".status.x".to_string()),
            ]
        );
        // The same causes on another code, or a 409 without causes: no field conflicts.
        assert!(api(
            422,
            &[(FIELD_MANAGER_CONFLICT, "conflict with \"k\"", ".a")]
        )
        .field_conflicts()
        .is_empty());
        assert!(api(409, &[]).field_conflicts().is_empty());
    }

    #[test]
    fn the_text_is_the_api_servers() {
        let e = api(404, &[]);
        assert_eq!(e.to_string(), "404 Conflict: Apply failed with 1 conflict");
        assert!(e.is_not_found() && !e.is_invalid());
        let retried = Error::Retried {
            source: Box::new(api(503, &[])),
            attempts: 3,
        };
        assert!(retried.to_string().ends_with("(after 3 attempts)"));
        assert!(retried.status().is_some_and(|s| s.code == 503));
    }

    #[test]
    fn a_conflict_not_forced_names_the_manager_the_field_and_the_way_out() {
        let conflict = api(
            409,
            &[(
                FIELD_MANAGER_CONFLICT,
                r#"conflict with "kubectl" with subresource "scale" using apps/v1"#,
                ".spec.replicas",
            )],
        );
        let e = Error::NotForced(Box::new(conflict));
        assert_eq!(
            e.to_string(),
            "409 Conflict: Apply failed with 1 conflict; set serverSideApplyConfig.force: true \
             in the placement's applyStrategy to take these fields over"
        );
        assert_eq!(e.field_conflicts()[0].manager, "kubectl");
        assert_eq!(e.field_conflicts()[0].field, ".spec.replicas");
        assert_eq!(e.classify(), Retry::Permanent);
    }

    #[test]
    fn transport_errors_are_retried_and_client_errors_are_not() {
        let refused = Error::from(kube::Error::Service("connection refused".into()));
        assert_eq!(refused.classify(), Retry::Retryable { retry_after: None });
        let built = Error::from(kube::Error::LinesCodecMaxLineLengthExceeded);
        assert_eq!(built.classify(), Retry::Permanent);
        assert_eq!(api(409, &[]).classify(), Retry::Permanent);
        assert!(matches!(api(503, &[]).classify(), Retry::Retryable { .. }));
        assert!(matches!(Error::NoName.classify(), Retry::Permanent));
    }
}
