//! Placements gone from the commit.

use super::*;

#[test]
fn a_deleted_placement_is_removed_everywhere_and_forgotten() {
    let (mut state, mut previous) = settled_on_v1();
    let without = {
        let yaml = "apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n";
        let mut text = yaml.to_string();
        for m in MEMBERS {
            text.push_str(&format!(
                "---\napiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
                 metadata: {{name: {m}}}\nspec: {{identity: {{name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}}}\n"
            ));
        }
        crate::analyze(&[SourceFile {
            path: "fleet.yaml".into(),
            content: text.into_bytes(),
        }])
        .0
    };
    let (_, removed) = roll(
        &without,
        "c2",
        &mut state,
        &mut previous,
        BindingHealth::Available,
    );
    assert_eq!(removed, MEMBERS);
    assert!(state.placements.is_empty());
}
