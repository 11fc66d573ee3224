//! A validation problem, located: `file:line: Kind/name: field.path: message`.

use crate::model::Origin;
use serde::Serialize;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Diagnostic {
    /// File, document index and the line of the offending field (or of the document).
    pub origin: Origin,
    /// `Kind/name`, or `document N` when the document has no usable kind or name.
    pub object: String,
    /// Field path inside the object (`spec.policy.numberOfClusters`); empty for whole-object problems.
    pub field: String,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: ", self.origin, self.object)?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        write!(f, "{}", self.message)
    }
}
