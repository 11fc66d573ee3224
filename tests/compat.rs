//! The compatibility corpus: real manifests published by KubeFleet and OCM (beside the
//! repository, see [`common::compat_corpus`]), committed to one git repository and validated.
//! Every object must be understood; the only diagnostics are pinned below, each with the reason
//! it is right. Without the corpus these tests say so and pass, unless CI requires it.

mod common;
use common::{compat_corpus, gitfleet, Repo};

/// The exact diagnostics the corpus produces, and why each is right. The corpus files come from
/// several independent examples; put in one repository, some of them meet objects they were
/// never meant to share a hub with, or lack objects their tutorial creates by other means.
const PINNED: &[(&str, &str)] = &[
    (
        "kubefleet-examples/kueue/cluster-queue.yaml:1: ClusterQueue/cluster-queue: unknown scope: kind ClusterQueue of group \"kueue.x-k8s.io\" is neither a built-in kind nor defined by a CustomResourceDefinition in the repository",
        "the Kueue CRDs are installed by Kueue's own release, not by the example; without them a hub could not accept the object either",
    ),
    (
        "kubefleet-examples/kueue/flavors.yaml:1: ResourceFlavor/default-flavor: unknown scope: kind ResourceFlavor of group \"kueue.x-k8s.io\" is neither a built-in kind nor defined by a CustomResourceDefinition in the repository",
        "as above: Kueue CRD not in the corpus",
    ),
    (
        "kubefleet-examples/kueue/job-team-a.yaml:3: Job/?: metadata.name: Required value: generateName is not supported; gitfleet needs a stable name",
        "the tutorial runs `kubectl create` on a Job with only generateName; a declarative hub needs a name to track the object",
    ),
    (
        "kubefleet-examples/kueue/job-team-b.yaml:4: Job/?: metadata.name: Required value: generateName is not supported; gitfleet needs a stable name",
        "as above",
    ),
    (
        "kubefleet-examples/kueue/local-queue.yaml:1: LocalQueue/lq-team-a: unknown scope: kind LocalQueue of group \"kueue.x-k8s.io\" is neither a built-in kind nor defined by a CustomResourceDefinition in the repository",
        "Kueue CRD not in the corpus",
    ),
    (
        "kubefleet-examples/kueue/local-queue.yaml:9: LocalQueue/lq-team-b: unknown scope: kind LocalQueue of group \"kueue.x-k8s.io\" is neither a built-in kind nor defined by a CustomResourceDefinition in the repository",
        "Kueue CRD not in the corpus (second document of the file, its own line)",
    ),
    (
        "kubefleet-examples/kueue/team-a-crp.yaml:7: ClusterResourcePlacement/team-a-crp: spec.resourceSelectors[0]: failed to get GVR of the selector: kind ResourceFlavor of group \"kueue.x-k8s.io\" is neither built in nor defined by a CustomResourceDefinition in the repository",
        "Kueue's CRDs are not in the corpus: KubeFleet's webhook refuses a selector whose kind its hub does not serve (pkg/utils/validator: failed to get GVR of the selector)",
    ),
    (
        "kubefleet-examples/kueue/team-a-crp.yaml:11: ClusterResourcePlacement/team-a-crp: spec.resourceSelectors[1]: failed to get GVR of the selector: kind ClusterQueue of group \"kueue.x-k8s.io\" is neither built in nor defined by a CustomResourceDefinition in the repository",
        "as above",
    ),
    (
        "kubefleet-examples/kueue/team-b-crp.yaml:7: ClusterResourcePlacement/team-b-crp: spec.resourceSelectors[0]: failed to get GVR of the selector: kind ResourceFlavor of group \"kueue.x-k8s.io\" is neither built in nor defined by a CustomResourceDefinition in the repository",
        "as above",
    ),
    (
        "kubefleet-examples/kueue/team-b-crp.yaml:11: ClusterResourcePlacement/team-b-crp: spec.resourceSelectors[1]: failed to get GVR of the selector: kind ClusterQueue of group \"kueue.x-k8s.io\" is neither built in nor defined by a CustomResourceDefinition in the repository",
        "as above",
    ),
    (
        "kubefleet-examples/migration/crp-2.yaml:4: ClusterResourcePlacement/crp-example: metadata.name: duplicate object: ClusterResourcePlacement/crp-example is already defined at kubefleet-examples/migration/crp-1.yaml:1",
        "crp-1 and crp-2 are the before and after of a migration: the same placement, edited",
    ),
    (
        "kubefleet-examples/migration/resourceoverride.yaml:5: ResourceOverride/ro-1: metadata.namespace: namespace \"test-namespace\" does not exist in the repository (no Namespace object declares it)",
        "the migration tutorial creates test-namespace with kubectl; it is not in the corpus",
    ),
    (
        "kubefleet-examples/resourceplacement/rp-cm.yaml:8: ResourcePlacement/rp-cm: metadata.namespace: namespace \"test-ns\" does not exist in the repository (no Namespace object declares it)",
        "the ResourcePlacement tutorial's namespace is created by hand, not by a corpus file",
    ),
    (
        "kubefleet-examples/resourceplacement/rp-deploy.yaml:8: ResourcePlacement/rp-nginx: metadata.namespace: namespace \"test-ns\" does not exist in the repository (no Namespace object declares it)",
        "as above",
    ),
    (
        "kubefleet-examples/test-crp1.yaml:11: ClusterResourcePlacement/crp-1: spec.policy.numberOfClusters: Required value: number of clusters cannot be nil for policy type PickN",
        "really invalid: KubeFleet's validating webhook rejects PickN without numberOfClusters (pkg/utils/validator)",
    ),
    (
        "kubefleet-examples/test-ro1.yaml:4: ResourceOverride/ro-1: metadata.name: duplicate object: ResourceOverride/test-namespace/ro-1 is already defined at kubefleet-examples/migration/resourceoverride.yaml:1",
        "two independent examples both define test-namespace/ro-1",
    ),
    (
        "kubefleet-examples/test-ro1.yaml:5: ResourceOverride/ro-1: metadata.namespace: namespace \"test-namespace\" does not exist in the repository (no Namespace object declares it)",
        "test-namespace is not in the corpus",
    ),
    (
        "ocm-examples/deploy-argocd-apps--guestbook-app-placement.yaml:5: Placement/guestbook-app-placement: metadata.namespace: namespace \"argocd\" does not exist in the repository (no Namespace object declares it)",
        "Argo CD's namespace comes from Argo CD's installation",
    ),
    (
        "ocm-examples/deploy-argocd-apps--ocm-placement-generator-cm.yaml:5: ConfigMap/ocm-placement-generator: metadata.namespace: namespace \"argocd\" does not exist in the repository (no Namespace object declares it)",
        "as above",
    ),
    (
        "ocm-examples/kueue-admission-check--placement-demo2-1.yaml:5: Placement/multikueue-config-demo2: metadata.namespace: namespace \"kueue-system\" does not exist in the repository (no Namespace object declares it)",
        "kueue-system comes from Kueue's installation",
    ),
    (
        "ocm-examples/kueue-admission-check--placement-demo2-2.yaml:4: Placement/multikueue-config-demo2: metadata.name: duplicate object: Placement/kueue-system/multikueue-config-demo2 is already defined at ocm-examples/kueue-admission-check--placement-demo2-1.yaml:1",
        "demo2-1 and demo2-2 are two alternative versions of the same Placement",
    ),
    (
        "ocm-examples/kueue-admission-check--placement-demo2-2.yaml:5: Placement/multikueue-config-demo2: metadata.namespace: namespace \"kueue-system\" does not exist in the repository (no Namespace object declares it)",
        "kueue-system comes from Kueue's installation",
    ),
    (
        "ocm-examples/multicluster-gateway--nginx-application--placement.yaml:4: Placement/demo-placement: metadata.name: duplicate object: Placement/default/demo-placement is already defined at ocm-examples/deploy-a-helm-chart--placement.yaml:1",
        "two OCM solutions both name their Placement default/demo-placement",
    ),
];

/// Resource-selection errors: not diagnostics of the commit (KubeFleet's hub admits the
/// placement and reports the error on it), so `validate` warns of them and exits 0 for them.
const PINNED_HELD: &[(&str, &str)] = &[];

/// The corpus as a repository, or `None` when it is absent (the test is then skipped, noted).
fn corpus_repo() -> Option<Repo> {
    let dir = compat_corpus::corpus()?;
    let repo = Repo::new();
    repo.copy_dir(&dir, "");
    repo.remove("README.md");
    repo.commit("compat corpus");
    Some(repo)
}

#[test]
fn every_object_is_understood() {
    let Some(repo) = corpus_repo() else {
        return;
    };
    let commit = gitfleet::source::read_commit(repo.path(), "HEAD", "").unwrap();
    assert_eq!(commit.files.len(), 49, "every corpus file is read");
    let (cat, _) = gitfleet::analyze(&commit.files);
    // Every fleet API object decoded into its typed model and passed its own rules, but the one
    // the corpus really gets wrong (test-crp1.yaml, pinned below).
    let typed: Vec<usize> = [
        cat.placements.iter().map(|e| e.index).collect::<Vec<_>>(),
        cat.ocm_placements.iter().map(|e| e.index).collect(),
        cat.cluster_overrides.iter().map(|e| e.index).collect(),
        cat.resource_overrides.iter().map(|e| e.index).collect(),
        cat.cluster_envelopes.iter().map(|e| e.index).collect(),
        cat.resource_envelopes.iter().map(|e| e.index).collect(),
        cat.member_clusters.iter().map(|e| e.index).collect(),
        cat.update_strategies.iter().map(|e| e.index).collect(),
        cat.update_runs.iter().map(|e| e.index).collect(),
        cat.approval_requests.iter().map(|e| e.index).collect(),
        cat.evictions.iter().map(|e| e.index).collect(),
        cat.disruption_budgets.iter().map(|e| e.index).collect(),
    ]
    .concat();
    let not_typed: Vec<String> = cat
        .objects
        .iter()
        .enumerate()
        .filter(|(i, o)| gitfleet::catalog::fleet_versions(&o.gvk).is_some() && !typed.contains(i))
        .map(|(_, o)| format!("{} {}", o.origin, o.display_name()))
        .collect();
    assert_eq!(
        not_typed,
        vec!["kubefleet-examples/test-crp1.yaml:1 ClusterResourcePlacement/crp-1"]
    );
    assert!(typed.len() >= 40, "{} typed fleet objects", typed.len());
    // Hub objects whose scope is known (all but the Kueue kinds and generateName-only Jobs).
    let unknown_scope: Vec<&str> = cat
        .objects
        .iter()
        .filter(|o| cat.scope_of(&o.gvk).is_none())
        .map(|o| o.gvk.kind.as_str())
        .collect();
    assert_eq!(
        unknown_scope,
        vec!["ClusterQueue", "ResourceFlavor", "LocalQueue", "LocalQueue"]
    );
}

#[test]
fn diagnostics_are_exactly_the_pinned_ones() {
    let Some(repo) = corpus_repo() else {
        return;
    };
    let run = gitfleet(&["validate", "--repo", &repo.path().display().to_string()]);
    let (warnings, got): (Vec<&str>, Vec<&str>) = run
        .stderr
        .lines()
        .filter(|l| !l.ends_with(" found"))
        .partition(|l| l.starts_with("warning: "));
    let want: Vec<&str> = PINNED.iter().map(|(d, _)| *d).collect();
    assert_eq!(got, want, "\n{}", run.stderr);
    let want_warnings: Vec<String> = PINNED_HELD
        .iter()
        .map(|(d, _)| format!("warning: {d} (reported on the placement as Scheduled=False InvalidResourceSelectors and not rejected: KubeFleet's hub admits it; the placement is held, keeping what it placed)"))
        .collect();
    assert_eq!(warnings, want_warnings, "\n{}", run.stderr);
    assert_eq!(run.code, if want.is_empty() { 0 } else { 1 });
}
