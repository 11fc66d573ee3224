use super::*;

fn tree(entries: &[(&str, EntryKind)]) -> Tree {
    Tree {
        root: "root".into(),
        entries: entries
            .iter()
            .map(|(p, k)| (p.to_string(), (*k, format!("id-{p}"))))
            .collect(),
    }
}

#[test]
fn references_are_resolved_inside_the_repository_and_remote_ones_recognised() {
    assert_eq!(
        resolve("apps/web/overlays/prod", "../../base"),
        Some("apps/web/base".into())
    );
    assert_eq!(resolve("apps", "./web/"), Some("apps/web".into()));
    assert_eq!(resolve("apps", "../../x"), None);
    assert_eq!(resolve("", "/etc"), None);
    for remote in [
        "https://github.com/org/repo//base?ref=v1",
        "github.com/org/repo/base",
        "git@github.com:org/repo.git",
        "ssh://git@host/repo",
        "../base?ref=main",
    ] {
        assert!(is_remote(remote), "{remote}");
    }
    assert!(!is_remote("../../base"));
}

#[test]
fn the_inputs_are_the_folders_reached_and_hostile_references_are_refused() {
    use EntryKind::*;
    let files: BTreeMap<&str, &str> = [
        ("app/base/kustomization.yaml", "resources: [deploy.yaml]\n"),
        (
            "app/prod/kustomization.yaml",
            "resources: [../base]\ncomponents: [../../shared/labels]\n",
        ),
        ("shared/labels/kustomization.yaml", "kind: Component\n"),
        (
            "bad/remote/kustomization.yaml",
            "resources: [github.com/org/repo/base]\n",
        ),
        ("bad/outside/kustomization.yaml", "bases: [../../../etc]\n"),
        ("bad/link/kustomization.yaml", "resources: [../linked]\n"),
        ("bad/inner/kustomization.yaml", "resources: [secret.yaml]\n"),
    ]
    .into_iter()
    .collect();
    let t = tree(&[
        ("app", Tree),
        ("app/base", Tree),
        ("app/base/kustomization.yaml", Blob),
        ("app/base/deploy.yaml", Blob),
        ("app/prod", Tree),
        ("app/prod/kustomization.yaml", Blob),
        ("shared", Tree),
        ("shared/labels", Tree),
        ("shared/labels/kustomization.yaml", Blob),
        ("bad", Tree),
        ("bad/remote", Tree),
        ("bad/remote/kustomization.yaml", Blob),
        ("bad/outside", Tree),
        ("bad/outside/kustomization.yaml", Blob),
        ("bad/link", Tree),
        ("bad/link/kustomization.yaml", Blob),
        ("bad/linked", Link),
        ("bad/inner", Tree),
        ("bad/inner/kustomization.yaml", Blob),
        ("bad/inner/secret.yaml", Link),
    ]);
    let read = |p: &str| {
        files
            .get(p)
            .map(|c| c.as_bytes().to_vec())
            .ok_or_else(|| "missing".to_string())
    };
    let read = |p: &str| references(&read(p)?);
    let got = inputs(&t, "app/prod", &read).unwrap();
    assert_eq!(
        got.folders,
        [
            ("app/base".to_string(), "id-app/base".to_string()),
            ("app/prod".into(), "id-app/prod".into()),
            ("shared/labels".into(), "id-shared/labels".into()),
        ]
    );
    let refusal = |folder: &str| inputs(&t, folder, &read).unwrap_err();
    assert_eq!(
        refusal("bad/remote"),
        (
            "bad/remote/kustomization.yaml".into(),
            Refusal::Remote {
                reference: "github.com/org/repo/base".into()
            }
        )
    );
    assert_eq!(
        refusal("bad/outside").1,
        Refusal::Outside {
            reference: "../../../etc".into()
        }
    );
    assert_eq!(
        refusal("bad/link").1,
        Refusal::Symlink {
            path: "bad/linked".into()
        }
    );
    assert_eq!(
        refusal("bad/inner").1,
        Refusal::Symlink {
            path: "bad/inner/secret.yaml".into()
        }
    );
    assert!(refusal("bad/outside")
        .1
        .to_string()
        .contains("leaves the repository"));
}

#[test]
fn objects_of_a_kustomization_file_are_traced_to_kustomize() {
    assert_eq!(
        rendered_by("apps/web/prod/kustomization.yaml"),
        Some("kustomize")
    );
    assert_eq!(rendered_by("Kustomization"), Some("kustomize"));
    assert_eq!(rendered_by("apps/web/deploy.yaml"), None);
}
