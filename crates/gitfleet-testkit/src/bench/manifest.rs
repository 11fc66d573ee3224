//! One very large manifest, to measure how much memory `gitfleet validate` and `gitfleet plan`
//! take per byte of input (issue 15.6: under 10× the input). [`configmaps`] writes ConfigMaps of
//! about 1.3 KB each (ten data keys of pseudo-random text) as `---` documents or as one
//! `kind: List`, deterministically; [`fleet`] the small commit around them: three members, the
//! namespace and a placement that selects it with everything in it. The ignored test
//! `big_manifest_repo` writes a git repository with the commits README's figures are measured on.

use super::Rng;
use std::fmt::Write as _;

/// The namespace the ConfigMaps live in.
pub const NAMESPACE: &str = "bulk";
/// Data keys per ConfigMap.
const KEYS: usize = 10;
/// Characters of each data value.
const VALUE_LEN: usize = 100;

/// How the ConfigMaps are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One YAML document each, separated by `---`.
    Documents,
    /// One document: a `v1` `List` whose `items` are the ConfigMaps.
    List,
}

/// ConfigMaps in [`NAMESPACE`] until the text reaches `bytes`. `revision` 0 and 1 give the same
/// objects with the first data value of every one changed: a head that changes every object.
pub fn configmaps(bytes: usize, shape: Shape, revision: u32) -> (String, usize) {
    let mut out = String::with_capacity(bytes + 4096);
    let indent = match shape {
        Shape::Documents => "",
        Shape::List => {
            out.push_str("apiVersion: v1\nkind: List\nitems:\n");
            "  "
        }
    };
    let mut rng = Rng::new(0x6269_676d_6170);
    let mut n = 0;
    while out.len() < bytes {
        if shape == Shape::Documents && n > 0 {
            out.push_str("---\n");
        }
        let first = match shape {
            Shape::Documents => "",
            Shape::List => "- ",
        };
        let _ = write!(
            out,
            "{first}apiVersion: v1\n{indent}kind: ConfigMap\n{indent}metadata:\n\
             {indent}  name: bulk-{n:06}\n{indent}  namespace: {NAMESPACE}\n\
             {indent}  labels:\n{indent}    app: bulk\n{indent}    shard: \"{}\"\n{indent}data:\n",
            n % 64
        );
        for k in 0..KEYS {
            let mut value = text(&mut rng);
            if k == 0 && revision > 0 {
                // Same length, so both revisions hold the same objects.
                let tag = format!("r{revision}-");
                value.replace_range(..tag.len(), &tag);
            }
            let _ = writeln!(out, "{indent}  key-{k}: {value}");
        }
        n += 1;
    }
    (out, n)
}

/// `VALUE_LEN` lowercase letters and digits: plain YAML scalars, never read as numbers.
fn text(rng: &mut Rng) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut s = String::with_capacity(VALUE_LEN);
    s.push('v');
    while s.len() < VALUE_LEN {
        s.push(ALPHABET[rng.below(ALPHABET.len())] as char);
    }
    s
}

/// The commit around the ConfigMaps: `members.yaml` (three MemberClusters) and
/// `placement.yaml` (the namespace and a PickAll ClusterResourcePlacement selecting it, which
/// takes everything in it).
pub fn fleet() -> Vec<(&'static str, String)> {
    let mut members = String::new();
    for (i, region) in ["eastus", "westeurope", "southeastasia"].iter().enumerate() {
        if i > 0 {
            members.push_str("---\n");
        }
        let _ = write!(
            members,
            "apiVersion: cluster.kubernetes-fleet.io/v1\nkind: MemberCluster\nmetadata:\n  \
             name: member-{i}\n  labels:\n    region: {region}\nspec:\n  identity:\n    \
             kind: ServiceAccount\n    name: fleet-member-agent\n    namespace: fleet-system\n"
        );
    }
    let placement = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n---\n\
         apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
         metadata:\n  name: {NAMESPACE}\nspec:\n  resourceSelectors:\n  - group: \"\"\n    \
         version: v1\n    kind: Namespace\n    name: {NAMESPACE}\n  policy:\n    \
         placementType: PickAll\n"
    );
    vec![("members.yaml", members), ("placement.yaml", placement)]
}

/// The files of a commit of [`fleet`], with `bulk` (made by [`configmaps`]) as `bulk.yaml`.
pub fn commit_files(bulk: Option<String>) -> Vec<gitfleet::catalog::SourceFile> {
    let mut files: Vec<gitfleet::catalog::SourceFile> = fleet()
        .into_iter()
        .map(|(path, text)| gitfleet::catalog::SourceFile {
            path: path.into(),
            content: text.into_bytes(),
        })
        .collect();
    if let Some(text) = bulk {
        files.push(gitfleet::catalog::SourceFile {
            path: "bulk.yaml".into(),
            content: text.into_bytes(),
        });
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_shapes_validate_and_are_selected_whole() {
        for shape in [Shape::Documents, Shape::List] {
            let (text, n) = configmaps(200_000, shape, 0);
            assert!(text.len() >= 200_000 && n > 100, "{shape:?}: {n} objects");
            let (cat, diags) = gitfleet::analyze(&commit_files(Some(text)));
            assert!(diags.is_empty(), "{shape:?}: {diags:#?}");
            let placement = &cat.placements[0].spec;
            let selected = gitfleet::snapshot::select(&cat, placement).unwrap();
            // The namespace and every ConfigMap in it.
            assert_eq!(selected.len(), n + 1, "{shape:?}");
        }
    }

    #[test]
    fn revision_one_changes_one_value_of_every_object() {
        let (a, n) = configmaps(50_000, Shape::Documents, 0);
        let (b, m) = configmaps(50_000, Shape::Documents, 1);
        assert_eq!((n, a.len()), (m, b.len()));
        let changed = a.lines().zip(b.lines()).filter(|(x, y)| x != y).count();
        assert_eq!(changed, n);
    }

    /// `GITFLEET_BIG_REPO=/tmp/big cargo test --release --lib big_manifest_repo -- --ignored`
    /// (`GITFLEET_BIG_MB`, default 50): a repository whose branches README's memory figures are
    /// measured on. `base`: the fleet alone; `add`: base plus `bulk.yaml`, ConfigMaps as `---`
    /// documents; `change`: `add` with one value of every ConfigMap changed; `list`: base plus
    /// the same ConfigMaps as one `kind: List`.
    #[test]
    #[ignore = "a tool: writes a large repository for memory measurements"]
    fn big_manifest_repo() {
        let dir = std::path::PathBuf::from(
            std::env::var("GITFLEET_BIG_REPO").expect("GITFLEET_BIG_REPO names a folder"),
        );
        let mb: usize = std::env::var("GITFLEET_BIG_MB")
            .map(|v| v.parse().expect("GITFLEET_BIG_MB is a number"))
            .unwrap_or(50);
        let bytes = mb * 1_000_000;
        std::fs::create_dir_all(&dir).unwrap();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args([
                    "-c",
                    "user.name=bench",
                    "-c",
                    "user.email=bench@example.com",
                ])
                .args(args)
                .current_dir(&dir)
                .output()
                .expect("git runs");
            assert!(out.status.success(), "git {args:?}: {out:?}");
        };
        let write = |path: &str, text: &str| std::fs::write(dir.join(path), text).unwrap();
        git(&["init", "-q", "-b", "base"]);
        for (path, text) in fleet() {
            write(path, &text);
        }
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "base: three members and a placement"]);
        let steps = [
            ("add", "base", Shape::Documents, 0),
            ("change", "add", Shape::Documents, 1),
            ("list", "base", Shape::List, 0),
        ];
        for (branch, from, shape, revision) in steps {
            git(&["checkout", "-q", "-b", branch, from]);
            let (text, n) = configmaps(bytes, shape, revision);
            write("bulk.yaml", &text);
            git(&["add", "-A"]);
            let message = format!("{branch}: bulk.yaml, {n} ConfigMaps, {} bytes", text.len());
            git(&["commit", "-q", "-m", &message]);
            eprintln!("{message}");
        }
    }
}
