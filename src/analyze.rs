//! Analysing one commit: its catalog and every problem found in it, the catalog's own
//! diagnostics and the placements' resource-selection errors, in one sorted list. What `validate`
//! prints, and what `run`, `apply` and `plan` check before they roll a commit out. Pure.

use crate::catalog::{Catalog, Diagnostic, SourceFile};

/// Everything one commit declares, validated: the catalog plus every problem found, including the
/// placements' resource-selection errors. A commit with any diagnostic must not be rolled out.
pub fn analyze(files: &[SourceFile]) -> (Catalog, Vec<Diagnostic>) {
    let (cat, mut diags) = Catalog::load(files);
    diags.extend(crate::snapshot::selection_diagnostics(&cat));
    diags.sort();
    diags.dedup();
    (cat, diags)
}
