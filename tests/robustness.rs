//! Nothing panics on any input: every prefix and several corruptions of every sample and corpus
//! file go through the same analysis the binary runs. Without the compatibility corpus (beside
//! the repository, see [`common::compat_corpus`]) the samples alone do, with a note.

mod common;
use gitfleet::catalog::SourceFile;

fn corpus() -> Vec<(String, String)> {
    let root = common::manifest_dir();
    let mut files = Vec::new();
    let samples = root.join("examples/fleet-repo");
    for dir in std::iter::once(samples).chain(common::compat_corpus::corpus()) {
        for f in common::walk(&dir) {
            let name = f.display().to_string();
            if name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json") {
                files.push((name, std::fs::read_to_string(&f).unwrap()));
            }
        }
    }
    assert!(files.len() > 40);
    files
}

fn analyze_one(path: &str, content: &str) {
    let files = vec![SourceFile {
        path: path.into(),
        content: content.as_bytes().to_vec(),
    }];
    let (cat, diags) = gitfleet::analyze(&files);
    for d in &diags {
        let _ = d.to_string();
    }
    for p in &cat.placements {
        let _ = gitfleet::snapshot::take(&cat, &p.spec);
    }
    // The scheduler and the renderer take whatever the catalog understood.
    let fleet = gitfleet::schedule::Fleet::build(&cat, None);
    let schedule = gitfleet::schedule::schedule_commit(
        &cat,
        &gitfleet::snapshot::invalid_selections(&cat),
        &fleet,
        &Default::default(),
        0,
    );
    for c in &fleet.clusters {
        let target = gitfleet::render::ClusterTarget {
            name: &c.name,
            labels: &c.labels,
        };
        let _ = gitfleet::render::cluster::render_cluster(&cat, &schedule, &target);
    }
}

#[test]
fn truncated_files_never_panic() {
    for (path, content) in corpus() {
        let lines: Vec<&str> = content.lines().collect();
        for n in 0..=lines.len() {
            analyze_one(&path, &lines[..n].join("\n"));
        }
    }
}

#[test]
fn corrupted_files_never_panic() {
    let corruptions: &[(&str, &str)] = &[
        (":", ": :"),
        ("- ", "-- "),
        ("  ", "\t"),
        ("name:", "name: [1, 2]"),
        ("kind:", "kind: {a: 1}\nx:"),
        ("metadata:", "metadata: 7\nm:"),
        ("spec:", "spec: null\ns:"),
        ("\"", ""),
        ("apiVersion: ", "apiVersion: /"),
        ("v1", "v1/v2/v3"),
    ];
    for (path, content) in corpus() {
        for (from, to) in corruptions {
            analyze_one(&path, &content.replace(from, to));
            analyze_one(&path, &content.replacen(from, to, 1));
        }
    }
}

#[test]
fn a_corrupted_file_in_a_whole_fleet_never_panics() {
    let root = common::manifest_dir().join("examples/fleet-repo");
    let files: Vec<(String, String)> = common::walk(&root)
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "yaml"))
        .map(|f| {
            (
                f.display().to_string(),
                std::fs::read_to_string(&f).unwrap(),
            )
        })
        .collect();
    let corruptions: &[(&str, &str)] = &[
        ("numberOfClusters: 3", "numberOfClusters: -3"),
        ("name:", "name: [x]\n  n:"),
        ("labels:", "labels: 3\n  l:"),
        ("value:", "value: {a: [1]}\n  v:"),
        ("- ", "- - "),
    ];
    for i in 0..files.len() {
        for (from, to) in corruptions {
            let source: Vec<SourceFile> = files
                .iter()
                .enumerate()
                .map(|(j, (p, c))| SourceFile {
                    path: p.clone(),
                    content: if i == j {
                        c.replacen(from, to, 1)
                    } else {
                        c.clone()
                    }
                    .into_bytes(),
                })
                .collect();
            let (cat, _) = gitfleet::analyze(&source);
            let fleet = gitfleet::schedule::Fleet::build(&cat, None);
            let schedule = gitfleet::schedule::schedule_commit(
                &cat,
                &gitfleet::snapshot::invalid_selections(&cat),
                &fleet,
                &Default::default(),
                0,
            );
            for c in &fleet.clusters {
                let target = gitfleet::render::ClusterTarget {
                    name: &c.name,
                    labels: &c.labels,
                };
                let _ = gitfleet::render::cluster::render_cluster(&cat, &schedule, &target);
            }
        }
    }
}
