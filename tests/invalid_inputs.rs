//! A corpus of invalid inputs, each pinned to the exact diagnostic it must produce
//! (`file:line: Kind/name: field: message`). Runs the same `analyze` the binary runs.

use gitfleet::catalog::SourceFile;

/// Every case is added to a small valid fleet (Namespace `app`, a CRP selecting it).
const BASE: &[(&str, &str)] = &[
    ("base/ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n"),
    (
        "base/crp.yaml",
        "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: base\nspec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: app}\n",
    ),
];

const CRP_HEAD: &str = "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\nspec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: app}\n";

struct Case {
    name: &'static str,
    file: &'static str,
    content: String,
    /// The diagnostics expected, exactly, in order.
    want: Vec<&'static str>,
}

fn case(name: &'static str, content: impl Into<String>, want: &[&'static str]) -> Case {
    Case {
        name,
        file: "case.yaml",
        content: content.into(),
        want: want.to_vec(),
    }
}

fn crp(policy_and_more: &str) -> String {
    format!("{CRP_HEAD}{policy_and_more}")
}

fn cases() -> Vec<Case> {
    vec![
        // --- syntax and shape
        case("malformed YAML", "a: [1, 2\nb: 3\n", &["case.yaml:2: document 0: invalid YAML: did not find expected ',' or ']'"]),
        case("duplicate key", "apiVersion: v1\nkind: ConfigMap\nkind: Secret\n", &["case.yaml:3: document 0: invalid YAML: duplicate entry with key \"kind\""]),
        case("tab indentation", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: x\n", &["case.yaml:4: document 0: invalid YAML: found character that cannot start any token"]),
        case("scalar document", "just a string\n", &["case.yaml:1: document 0: a Kubernetes object must be a mapping"]),
        case("list document", "- a\n- b\n", &["case.yaml:1: document 0: a Kubernetes object must be a mapping"]),
        case("missing apiVersion", "kind: ConfigMap\nmetadata:\n  name: x\n  namespace: app\n", &["case.yaml:1: ConfigMap/x: apiVersion: Required value: must be a non-empty string"]),
        case("missing kind", "apiVersion: v1\nmetadata:\n  name: x\n", &["case.yaml:1: document 0: kind: Required value: must be a non-empty string"]),
        case("missing name", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: app\n", &["case.yaml:3: ConfigMap/?: metadata.name: Required value: name is required"]),
        case("generateName", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  generateName: x-\n  namespace: app\n", &["case.yaml:3: ConfigMap/?: metadata.name: Required value: generateName is not supported; gitfleet needs a stable name"]),
        case("kind is a number", "apiVersion: v1\nkind: 3\nmetadata:\n  name: x\n", &["case.yaml:2: document 0: kind: Required value: must be a non-empty string"]),
        case("second document broken", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ok\n---\nkey: {unclosed\n", &["case.yaml:7: document 1: invalid YAML: did not find expected ',' or '}'"]),
        Case {
            name: "malformed JSON",
            file: "case.json",
            content: "{\n  \"apiVersion\": \"v1\",\n  \"kind\": }\n".into(),
            want: vec!["case.json:3: document 0: invalid JSON: expected value at line 3 column 11"],
        },
        case("List items not a list", "apiVersion: v1\nkind: List\nitems: {a: 1}\n", &["case.yaml:1: List: items: must be a list of objects"]),
        case("bad object inside a List", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n", &["case.yaml:6: ConfigMap/c: metadata.namespace: Required value: ConfigMap is namespaced and must name its namespace"]),
        // --- scope, namespaces, identities
        case("unknown scope", "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n", &["case.yaml:1: Widget/w: unknown scope: kind Widget of group \"example.com\" is neither a built-in kind nor defined by a CustomResourceDefinition in the repository"]),
        case("namespaced without namespace", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n", &["case.yaml:3: Deployment/d: metadata.namespace: Required value: Deployment is namespaced and must name its namespace"]),
        case("missing namespace", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: ghost\n", &["case.yaml:5: ConfigMap/c: metadata.namespace: namespace \"ghost\" does not exist in the repository (no Namespace object declares it)"]),
        case("duplicate identity", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n", &["case.yaml:4: Namespace/app: metadata.name: duplicate object: Namespace/app is already defined at base/ns.yaml:1"]),
        case("duplicate across versions", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\nmetadata:\n  name: base\nspec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: app}\n", &["case.yaml:4: ClusterResourcePlacement/base: metadata.name: duplicate object: ClusterResourcePlacement/base is already defined at base/crp.yaml:1"]),
        case("CRD without scope", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  names: {kind: Widget, plural: widgets}\n", &["case.yaml:5: CustomResourceDefinition/widgets.example.com: spec.scope: Required value: must be Namespaced or Cluster"]),
        // --- typed fleet APIs
        case("unregistered version", "apiVersion: placement.kubernetes-fleet.io/v2\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\nspec: {}\n", &["case.yaml:1: ClusterResourcePlacement/p: apiVersion: no kind \"ClusterResourcePlacement\" is registered for version \"placement.kubernetes-fleet.io/v2\" (accepted: placement.kubernetes-fleet.io/v1, placement.kubernetes-fleet.io/v1beta1)"]),
        case("unknown field", crp("  polcy: {}\n"), &["case.yaml:8: ClusterResourcePlacement/p: spec.polcy: unknown field `polcy`, expected one of `resourceSelectors`, `policy`, `strategy`, `revisionHistoryLimit`, `statusReportingScope`"]),
        case("wrong type", crp("  revisionHistoryLimit: ten\n"), &["case.yaml:8: ClusterResourcePlacement/p: spec.revisionHistoryLimit: invalid type: string \"ten\", expected i32"]),
        case("unknown enum value", crp("  policy:\n    placementType: PickSome\n"), &["case.yaml:9: ClusterResourcePlacement/p: spec.policy.placementType: unknown variant `PickSome`, expected one of `PickAll`, `PickN`, `PickFixed`"]),
        case("missing spec", "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\n", &["case.yaml:1: ClusterResourcePlacement/p: missing field `spec`"]),
        case("unknown metadata field", "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\n  label: {a: b}\nspec:\n  resourceSelectors: []\n", &["case.yaml:5: ClusterResourcePlacement/p: metadata.label: unknown field `label`, expected one of `name`, `namespace`, `generateName`, `labels`, `annotations`, `uid`, `resourceVersion`, `generation`, `creationTimestamp`, `deletionTimestamp`, `deletionGracePeriodSeconds`, `finalizers`, `ownerReferences`, `managedFields`, `selfLink`"]),
        case("placement name too long", "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: a-very-long-placement-name-that-goes-on-and-on-past-sixty-three-chars\nspec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: app}\n", &["case.yaml:4: ClusterResourcePlacement/a-very-long-placement-name-that-goes-on-and-on-past-sixty-three-chars: metadata.name: must be no more than 63 characters (it has 69)"]),
        case("no selectors", "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\nspec:\n  resourceSelectors: []\n", &["case.yaml:6: ClusterResourcePlacement/p: spec.resourceSelectors: Required value: at least one resource selector is required"]),
        case("name and labelSelector", "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\nspec:\n  resourceSelectors:\n  - group: ''\n    version: v1\n    kind: Namespace\n    name: app\n    labelSelector: {matchLabels: {a: b}}\n", &["case.yaml:7: ClusterResourcePlacement/p: spec.resourceSelectors[0]: the labelSelector and name fields are mutually exclusive"]),
        case("PickN without N", crp("  policy:\n    placementType: PickN\n"), &["case.yaml:8: ClusterResourcePlacement/p: spec.policy.numberOfClusters: Required value: number of clusters cannot be nil for policy type PickN"]),
        case("PickN negative N", crp("  policy:\n    placementType: PickN\n    numberOfClusters: -2\n"), &["case.yaml:10: ClusterResourcePlacement/p: spec.policy.numberOfClusters: number of clusters cannot be -2 for policy type PickN"]),
        case("PickFixed with affinity", crp("  policy:\n    placementType: PickFixed\n    clusterNames: [a]\n    affinity:\n      clusterAffinity: {}\n"), &["case.yaml:11: ClusterResourcePlacement/p: spec.policy.affinity: affinity must be nil for policy type PickFixed"]),
        case("PickFixed duplicate names", crp("  policy:\n    placementType: PickFixed\n    clusterNames:\n    - a\n    - a\n"), &["case.yaml:12: ClusterResourcePlacement/p: spec.policy.clusterNames[1]: duplicate cluster name \"a\""]),
        case("PickAll with N", crp("  policy:\n    placementType: PickAll\n    numberOfClusters: 2\n"), &["case.yaml:10: ClusterResourcePlacement/p: spec.policy.numberOfClusters: number of clusters must be nil for policy type PickAll"]),
        case("PickAll with preferred affinity", crp("  policy:\n    affinity:\n      clusterAffinity:\n        preferredDuringSchedulingIgnoredDuringExecution:\n        - weight: 10\n          preference: {labelSelector: {matchLabels: {a: b}}}\n"), &["case.yaml:11: ClusterResourcePlacement/p: spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution: PreferredDuringSchedulingIgnoredDuringExecution will be ignored for placement policy type PickAll"]),
        case("property sorter in required term", crp("  policy:\n    affinity:\n      clusterAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution:\n          clusterSelectorTerms:\n          - propertySorter: {name: x, sortOrder: Ascending}\n"), &["case.yaml:13: ClusterResourcePlacement/p: spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[0].propertySorter: propertySorter is not allowed in required affinity terms"]),
        case("bad property quantity", crp("  policy:\n    affinity:\n      clusterAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution:\n          clusterSelectorTerms:\n          - propertySelector:\n              matchExpressions:\n              - name: kubernetes-fleet.io/node-count\n                operator: Ge\n                values: [three]\n"), &["case.yaml:17: ClusterResourcePlacement/p: spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[0].propertySelector.matchExpressions[0].values[0]: \"three\" is not a valid quantity: it must start with a number"]),
        case("weight out of range", crp("  policy:\n    placementType: PickN\n    numberOfClusters: 1\n    affinity:\n      clusterAffinity:\n        preferredDuringSchedulingIgnoredDuringExecution:\n        - weight: 150\n          preference: {}\n"), &["case.yaml:14: ClusterResourcePlacement/p: spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: must be between -100 and 100, got 150"]),
        case("Exists toleration with value", crp("  policy:\n    tolerations:\n    - key: gpu\n      operator: Exists\n      value: yes\n"), &["case.yaml:12: ClusterResourcePlacement/p: spec.policy.tolerations[0].value: toleration value needs to be empty, when operator is Exists"]),
        case("toleration effect", crp("  policy:\n    tolerations:\n    - key: gpu\n      operator: Exists\n      effect: NoExecute\n"), &["case.yaml:12: ClusterResourcePlacement/p: spec.policy.tolerations[0].effect: unknown variant `NoExecute`, expected `NoSchedule`"]),
        case("rollingUpdate with External", crp("  strategy:\n    type: External\n    rollingUpdate: {maxSurge: 1}\n"), &["case.yaml:10: ClusterResourcePlacement/p: spec.strategy.rollingUpdate: rollingUpdate config is not valid for External rollout strategy type"]),
        case("maxUnavailable pattern", crp("  strategy:\n    rollingUpdate:\n      maxUnavailable: 120%\n"), &["case.yaml:10: ClusterResourcePlacement/p: spec.strategy.rollingUpdate.maxUnavailable: String(\"120%\") must match ^((100|[0-9]{1,2})%|[0-9]+)$"]),
        case("v1beta1-only field in v1", "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\nspec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: app}\n  strategy:\n    deleteStrategy: {propagationPolicy: Abandon}\n", &["case.yaml:9: ClusterResourcePlacement/p: spec.strategy.deleteStrategy: unknown field \"deleteStrategy\" (v1beta1 only)"]),
        // --- resource selection
        case("reserved namespace", "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\nspec:\n  resourceSelectors:\n  - group: ''\n    version: v1\n    kind: Namespace\n    name: kube-system\n", &["case.yaml:10: ClusterResourcePlacement/p: spec.resourceSelectors[0].name: namespace \"kube-system\" is reserved (fleet-* and kube-* namespaces are never propagated)"]),
        case("CRP selecting a namespaced kind", "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\nspec:\n  resourceSelectors:\n  - group: ''\n    version: v1\n    kind: ConfigMap\n", &["case.yaml:7: ClusterResourcePlacement/p: spec.resourceSelectors[0]: a ClusterResourcePlacement can only select cluster-scoped resources, but ConfigMap is namespaced"]),
        case("RP selecting a cluster-scoped kind", "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ResourcePlacement\nmetadata:\n  name: rp\n  namespace: app\nspec:\n  resourceSelectors:\n  - group: rbac.authorization.k8s.io\n    version: v1\n    kind: ClusterRole\n", &["case.yaml:8: ResourcePlacement/rp: spec.resourceSelectors[0]: a ResourcePlacement can only select namespaced resources, but ClusterRole is cluster-scoped"]),
        case("disabled kind", "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\nspec:\n  resourceSelectors:\n  - group: cluster.kubernetes-fleet.io\n    version: v1beta1\n    kind: MemberCluster\n", &["case.yaml:7: ClusterResourcePlacement/p: spec.resourceSelectors[0]: resource cluster.kubernetes-fleet.io/MemberCluster is disabled: gitfleet never propagates it"]),
        case("duplicate selection", "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\nspec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: app}\n  - {group: '', version: v1, kind: Namespace, labelSelector: {}}\n", &["case.yaml:6: ClusterResourcePlacement/p: spec.resourceSelectors: found duplicate resource Namespace/app: it is selected more than once"]),
        case("NamespaceWithResourceSelectors on a missing namespace", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\nspec:\n  resourceSelectors:\n  - group: ''\n    version: v1\n    kind: Namespace\n    name: ghost\n    selectionScope: NamespaceWithResourceSelectors\n", &["case.yaml:10: ClusterResourcePlacement/p: spec.resourceSelectors[0].name: namespace \"ghost\" does not exist in the repository"]),
    ]
}

fn run_case(c: &Case) -> Vec<String> {
    let mut files: Vec<SourceFile> = BASE
        .iter()
        .map(|(p, c)| SourceFile {
            path: p.to_string(),
            content: c.as_bytes().to_vec(),
        })
        .collect();
    files.push(SourceFile {
        path: c.file.into(),
        content: c.content.as_bytes().to_vec(),
    });
    let (_, diags) = gitfleet::analyze(&files);
    diags.iter().map(|d| d.to_string()).collect()
}

#[test]
fn base_fleet_is_valid() {
    let files: Vec<SourceFile> = BASE
        .iter()
        .map(|(p, c)| SourceFile {
            path: p.to_string(),
            content: c.as_bytes().to_vec(),
        })
        .collect();
    assert!(gitfleet::analyze(&files).1.is_empty());
}

#[test]
fn every_invalid_input_has_its_diagnostic() {
    let cases = cases();
    assert!(cases.len() >= 40, "the corpus has {} cases", cases.len());
    let mut failures = Vec::new();
    for c in &cases {
        let got = run_case(c);
        if got != c.want {
            failures.push(format!(
                "{}:\n  want {:?}\n  got  {:?}",
                c.name, c.want, got
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
