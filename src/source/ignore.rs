//! `.gitfleetignore`: files at the root of the fleet's `--path` that gitfleet leaves out, in
//! gitignore syntax (`#` comments, `!` to take a file back, `dir/` for folders, `/x` anchored,
//! `**`). Read from the commit, never from the working tree, so every reader of the same commit
//! leaves out the same files. Matching is gitoxide's own gitignore implementation
//! (`gix::ignore`, the `gix-ignore` crate), the one `gix status` uses, so the rules are git's.
//!
//! Pure: patterns in, yes or no out.

use gix::bstr::{BStr, ByteSlice};
use gix::ignore::glob::pattern::Case;

/// The file's name, at the root of `--path`.
pub const FILE_NAME: &str = crate::catalog::unrendered::IGNORE_FILE;

/// The patterns of one `.gitfleetignore` (none: nothing is left out).
#[derive(Debug, Default, Clone)]
pub struct FleetIgnore {
    search: gix::ignore::Search,
}

impl FleetIgnore {
    /// Parses a `.gitfleetignore`'s bytes (gitignore never fails to parse: a line that is no
    /// pattern is no pattern).
    pub fn parse(bytes: &[u8]) -> FleetIgnore {
        let mut search = gix::ignore::Search::default();
        // In memory: with no root, the patterns are relative to the path's root, which is what
        // `relative` paths below are.
        search
            .add_patterns_buffer(
                bytes,
                FILE_NAME,
                None,
                gix::ignore::search::Ignore::default(),
            )
            .expect("patterns without a root directory have no base path to convert");
        FleetIgnore { search }
    }

    /// Is the file at `relative` (to the path's root, `/`-separated) left out? As git decides
    /// it: a file in a left-out folder stays out even if a later `!` line names it.
    pub fn excludes(&self, relative: &str) -> bool {
        let mut end = 0;
        while let Some(slash) = relative[end..].find('/') {
            end += slash;
            if self.ignored(relative.as_bytes()[..end].as_bstr(), true) {
                return true;
            }
            end += 1;
        }
        self.ignored(relative.as_bytes().as_bstr(), false)
    }

    fn ignored(&self, path: &BStr, is_dir: bool) -> bool {
        self.search
            .pattern_matching_relative_path(path, Some(is_dir), Case::Sensitive)
            .is_some_and(|m| !m.pattern.is_negative())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gitignore_rules_as_git_applies_them() {
        let ignore = FleetIgnore::parse(
            b"# rendered elsewhere\ncharts/\n*.tmpl.yaml\n/top.yaml\ndocs/**/*.json\n!keep.tmpl.yaml\nvendor/\n!vendor/kept.yaml\n",
        );
        for (path, want) in [
            ("charts/web/Chart.yaml", true),
            ("apps/charts/x.yaml", true),
            ("charts.yaml", false),
            ("a.tmpl.yaml", true),
            ("apps/b.tmpl.yaml", true),
            ("keep.tmpl.yaml", false),
            ("top.yaml", true),
            ("apps/top.yaml", false),
            ("docs/a/b/c.json", true),
            ("docs/c.json", true),
            ("app.yaml", false),
            // A folder left out cannot have a file taken back (git: "It is not possible to
            // re-include a file if a parent directory of that file is excluded").
            ("vendor/kept.yaml", true),
        ] {
            assert_eq!(ignore.excludes(path), want, "{path}");
        }
    }

    #[test]
    fn nothing_is_left_out_without_patterns() {
        let ignore = FleetIgnore::parse(b"\n# only a comment\n");
        assert!(!ignore.excludes("a.yaml"));
        assert!(!FleetIgnore::default().excludes("dir/a.yaml"));
    }
}
