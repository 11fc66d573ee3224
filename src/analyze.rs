//! Analysing one commit: its catalog and every problem found in it, in one sorted list. What
//! `validate` prints, and what `run`, `apply` and `plan` check before they roll a commit out.
//! A placement's resource-selection error is not among them: KubeFleet's hub admits such a
//! placement and reports the error on it (`Scheduled=False`, `InvalidResourceSelectors`), so
//! gitfleet holds that placement and serves the rest of the commit
//! ([`crate::snapshot::invalid_selections`]). Nor are likely mistakes ([`crate::lint`]), which
//! the hub admits too. Pure.

use crate::catalog::{Catalog, Diagnostic, SourceFile};

/// Everything one commit declares, validated: the catalog plus every problem found. A commit
/// with any diagnostic must not be rolled out.
pub fn analyze(files: &[SourceFile]) -> (Catalog, Vec<Diagnostic>) {
    let (cat, diags) = Catalog::load(files);
    (cat, crate::lint::with_field_hints(diags))
}

/// [`analyze`], with the documents of files parsed for an earlier commit taken from `cache`.
pub fn analyze_cached(
    files: &[SourceFile],
    cache: &mut crate::catalog::ParseCache,
) -> (Catalog, Vec<Diagnostic>) {
    let (cat, diags) = Catalog::load_cached(files, cache);
    (cat, crate::lint::with_field_hints(diags))
}
