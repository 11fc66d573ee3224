//! Nothing panics on any input: every prefix and several corruptions of every sample and corpus
//! file go through the same analysis the binary runs.

mod common;
use gitfleet::catalog::SourceFile;

fn corpus() -> Vec<(String, String)> {
    let root = common::manifest_dir();
    let mut files = Vec::new();
    for dir in [
        root.join("examples/fleet-repo"),
        root.join("../shared/compat"),
    ] {
        if !dir.is_dir() {
            continue;
        }
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
