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
    /// A resource-selection error: not a diagnostic of the commit (KubeFleet's hub admits the
    /// placement and reports the error on it), but the placement's, which holds it.
    held: bool,
}

fn case(name: &'static str, content: impl Into<String>, want: &[&'static str]) -> Case {
    Case {
        name,
        file: "case.yaml",
        content: content.into(),
        want: want.to_vec(),
        held: false,
    }
}

/// A case whose placement is held for invalid resource selectors, with these diagnostics.
fn held(name: &'static str, content: impl Into<String>, want: &[&'static str]) -> Case {
    Case {
        held: true,
        ..case(name, content, want)
    }
}

fn crp(policy_and_more: &str) -> String {
    format!("{CRP_HEAD}{policy_and_more}")
}

fn cases() -> Vec<Case> {
    vec![
        // --- syntax and shape
        case("malformed YAML", "a: [1, 2\nb: 3\n", &["case.yaml:2: document 0: invalid YAML: illegal placement of ':' indicator"]),
        case("duplicate key", "apiVersion: v1\nkind: ConfigMap\nkind: Secret\n", &["case.yaml:3: document 0: invalid YAML: duplicate key \"kind\" (first written at line 2)"]),
        case("tab indentation", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: x\n", &["case.yaml:4: document 0: invalid YAML: tabs disallowed within this context (block indentation)"]),
        case("scalar document", "just a string\n", &["case.yaml:1: document 0: a Kubernetes object must be a mapping"]),
        case("list document", "- a\n- b\n", &["case.yaml:1: document 0: a Kubernetes object must be a mapping"]),
        case("missing apiVersion", "kind: ConfigMap\nmetadata:\n  name: x\n  namespace: app\n", &["case.yaml:1: ConfigMap/x: apiVersion: Required value: must be a non-empty string"]),
        case("missing kind", "apiVersion: v1\nmetadata:\n  name: x\n", &["case.yaml:1: document 0: kind: Required value: must be a non-empty string"]),
        case("missing name", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: app\n", &["case.yaml:3: ConfigMap/?: metadata.name: Required value: name is required"]),
        case("generateName", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  generateName: x-\n  namespace: app\n", &["case.yaml:3: ConfigMap/?: metadata.name: Required value: generateName is not supported; gitfleet needs a stable name"]),
        case("kind is a number", "apiVersion: v1\nkind: 3\nmetadata:\n  name: x\n", &["case.yaml:2: document 0: kind: Required value: must be a non-empty string"]),
        case("second document broken", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ok\n---\nkey: {unclosed\n", &["case.yaml:6: document 1: invalid YAML: unclosed bracket '{'"]),
        Case {
            name: "malformed JSON",
            file: "case.json",
            content: "{\n  \"apiVersion\": \"v1\",\n  \"kind\": }\n".into(),
            want: vec!["case.json:3: document 0: invalid JSON: expected value at line 3 column 11"],
            held: false,
        },
        case("List items not a list", "apiVersion: v1\nkind: List\nitems: {a: 1}\n", &["case.yaml:3: List: items: must be a list of objects"]),
        // --- YAML read as Kubernetes reads it (YAML 1.1 scalars, then JSON)
        case("ConfigMap data YAML reads as a boolean", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: app\ndata:\n  enabled: yes\n  mode: 0755\n  name: plain\n  quoted: \"on\"\n  empty:\n", &[
            "case.yaml:7: ConfigMap/c: data.enabled: Invalid value: must be a string, not a boolean; YAML reads `yes` as the boolean true here; quote it (\"yes\") to keep the text",
            "case.yaml:8: ConfigMap/c: data.mode: Invalid value: must be a string, not a number; YAML reads `0755` as the number 493 here; quote it (\"0755\") to keep the text",
        ]),
        case("label and annotation values that are not strings", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: other\n  labels: {app.kubernetes.io/managed: on}\n  annotations:\n    replicas: 3\n", &[
            "case.yaml:5: Namespace/other: metadata.labels.app.kubernetes.io/managed: Invalid value: must be a string, not a boolean; YAML reads `on` as the boolean true here; quote it (\"on\") to keep the text",
            "case.yaml:7: Namespace/other: metadata.annotations.replicas: Invalid value: must be a string, not a number; YAML reads `3` as the number 3 here; quote it (\"3\") to keep the text",
        ]),
        case("container env value and args YAML reads as numbers", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: app}\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n        args: [--port, 8080]\n        env:\n        - {name: DEBUG, value: no}\n        - {name: EMPTY}\n", &[
            "case.yaml:9: Deployment/d: spec.template.spec.containers[0].args[1]: Invalid value: must be a string, not a number; YAML reads `8080` as the number 8080 here; quote it (\"8080\") to keep the text",
            "case.yaml:11: Deployment/d: spec.template.spec.containers[0].env[0].value: Invalid value: must be a string, not a boolean; YAML reads `no` as the boolean false here; quote it (\"no\") to keep the text",
        ]),
        case("a fleet API string field YAML reads as a boolean", crp("  policy:\n    tolerations:\n    - key: gpu\n      operator: Equal\n      value: yes\n"), &["case.yaml:12: ClusterResourcePlacement/p: spec.policy.tolerations[0].value: invalid type: boolean `true`, expected a string; YAML reads `yes` as the boolean true here; quote it (\"yes\") to keep the text"]),
        // --- what the API server refuses by encoding and size (checked with a real kube-apiserver)
        case("Secret data that is not base64", "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: app}\ndata:\n  ok: YWJj\n  wrapped: \"YW\\nJj\"\n  token: not-base64!\n  short: YWI\n", &[
            "case.yaml:7: Secret/s: data.token: Invalid value: not base64 ('-' at character 3); the API server reads data values as standard base64 with padding (put plain text in stringData)",
            "case.yaml:8: Secret/s: data.short: Invalid value: not base64 (missing or misplaced `=` padding); the API server reads data values as standard base64 with padding (put plain text in stringData)",
        ]),
        case("ConfigMap binaryData that is not base64", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: app}\nbinaryData:\n  blob: '%%%'\n", &[
            "case.yaml:5: ConfigMap/c: binaryData.blob: Invalid value: not base64 ('%' at character 0); the API server reads binaryData values as standard base64 with padding (put plain text in data)",
        ]),
        case("ConfigMap of exactly 1 MiB of values", format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c, namespace: app}}\ndata:\n  a: {}\n  b: 'y'\n", "x".repeat(1024 * 1024 - 1)), &[]),
        case("ConfigMap over 1 MiB", format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c, namespace: app}}\ndata:\n  a: {}\nbinaryData:\n  b: eHh4\n", "x".repeat(1024 * 1024 - 2)), &[
            "case.yaml:4: ConfigMap/c: data: Too long: 1048577 bytes of data, the API server accepts at most 1048576 bytes (1 MiB) in a ConfigMap",
        ]),
        case("Secret over 1 MiB with stringData", format!("apiVersion: v1\nkind: Secret\nmetadata: {{name: s, namespace: app}}\ndata:\n  a: eHh4\nstringData:\n  a: x\n  b: {}\n", "x".repeat(1024 * 1024)), &[
            "case.yaml:4: Secret/s: data: Too long: 1048577 bytes of data, the API server accepts at most 1048576 bytes (1 MiB) in a Secret",
        ]),
        case("infinity", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: app}\ndata:\n  limit: .inf\n", &["case.yaml:5: document 0: invalid YAML: YAML reads `.inf` as infinity, which JSON cannot carry; quote it to keep the text"]),
        case("null map key", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: app}\ndata:\n  ~: x\n", &["case.yaml:5: document 0: invalid YAML: a null map key cannot be a JSON object key"]),
        case("duplicate key in a nested mapping", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: app\n  name: d\n", &["case.yaml:6: document 0: invalid YAML: duplicate key \"name\" (first written at line 4)"]),
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
        case("unknown field", crp("  polcy: {}\n"), &["case.yaml:8: ClusterResourcePlacement/p: spec.polcy: unknown field `polcy`, expected one of `resourceSelectors`, `policy`, `strategy`, `revisionHistoryLimit`, `statusReportingScope` (did you mean `policy`?)"]),
        case("wrong type", crp("  revisionHistoryLimit: ten\n"), &["case.yaml:8: ClusterResourcePlacement/p: spec.revisionHistoryLimit: invalid type: string \"ten\", expected i32"]),
        case("unknown enum value", crp("  policy:\n    placementType: PickSome\n"), &["case.yaml:9: ClusterResourcePlacement/p: spec.policy.placementType: unknown variant `PickSome`, expected one of `PickAll`, `PickN`, `PickFixed`"]),
        case("missing spec", "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\n", &["case.yaml:1: ClusterResourcePlacement/p: missing field `spec`"]),
        case("unknown metadata field", "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\n  label: {a: b}\nspec:\n  resourceSelectors: []\n", &["case.yaml:5: ClusterResourcePlacement/p: metadata.label: unknown field `label`, expected one of `name`, `namespace`, `generateName`, `labels`, `annotations`, `uid`, `resourceVersion`, `generation`, `creationTimestamp`, `deletionTimestamp`, `deletionGracePeriodSeconds`, `finalizers`, `ownerReferences`, `managedFields`, `selfLink` (did you mean `labels`?)"]),
        case("placement name too long", "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: a-very-long-placement-name-that-goes-on-and-on-past-sixty-three-chars\nspec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: app}\n", &["case.yaml:4: ClusterResourcePlacement/a-very-long-placement-name-that-goes-on-and-on-past-sixty-three-chars: metadata.name: the name field cannot have length exceeding 63 (it has 69)"]),
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
        case("Exists toleration with value", crp("  policy:\n    tolerations:\n    - key: gpu\n      operator: Exists\n      value: \"yes\"\n"), &["case.yaml:12: ClusterResourcePlacement/p: spec.policy.tolerations[0].value: toleration value needs to be empty, when operator is Exists"]),
        case("toleration effect", crp("  policy:\n    tolerations:\n    - key: gpu\n      operator: Exists\n      effect: NoExecute\n"), &["case.yaml:12: ClusterResourcePlacement/p: spec.policy.tolerations[0].effect: unknown variant `NoExecute`, expected `NoSchedule`"]),
        case("rollingUpdate with External", crp("  strategy:\n    type: External\n    rollingUpdate: {maxSurge: 1}\n"), &["case.yaml:10: ClusterResourcePlacement/p: spec.strategy.rollingUpdate: rollingUpdate config is not valid for External rollout strategy type"]),
        case("maxUnavailable pattern", crp("  strategy:\n    rollingUpdate:\n      maxUnavailable: 120%\n"), &["case.yaml:10: ClusterResourcePlacement/p: spec.strategy.rollingUpdate.maxUnavailable: String(\"120%\") must match ^((100|[0-9]{1,2})%|[0-9]+)$"]),
        case("v1beta1-only field in v1", "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\nspec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: app}\n  strategy:\n    deleteStrategy: {propagationPolicy: Abandon}\n", &["case.yaml:9: ClusterResourcePlacement/p: spec.strategy.deleteStrategy: unknown field \"deleteStrategy\" (v1beta1 only)"]),
        // --- overrides
        case("CRO selecting a namespaced kind", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourceOverride\nmetadata:\n  name: cro\nspec:\n  clusterResourceSelectors:\n  - {group: '', version: v1, kind: ConfigMap, name: cm}\n  policy:\n    overrideRules:\n    - jsonPatchOverrides:\n      - {op: add, path: /metadata/labels/a, value: b}\n", &["case.yaml:7: ClusterResourceOverride/cro: spec.clusterResourceSelectors[0]: clusterResourceOverride can only select cluster scoped resources; ConfigMap is namespaced (use a ResourceOverride, or select its Namespace)"]),
        case("CRO with Namespaced placement scope", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourceOverride\nmetadata:\n  name: cro\nspec:\n  placement: {name: base, scope: Namespaced}\n  clusterResourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: app}\n  policy:\n    overrideRules:\n    - overrideType: Delete\n", &["case.yaml:6: ClusterResourceOverride/cro: spec.placement.scope: clusterResourceOverride placement reference cannot be Namespaced scope"]),
        case("override patching /kind", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourceOverride\nmetadata:\n  name: cro\nspec:\n  clusterResourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: app}\n  policy:\n    overrideRules:\n    - jsonPatchOverrides:\n      - {op: add, path: /kind, value: b}\n", &["case.yaml:11: ClusterResourceOverride/cro: spec.policy.overrideRules[0].jsonPatchOverrides[0].path: path \"/kind\": cannot override typeMeta fields"]),
        case("override patching metadata.name", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourceOverride\nmetadata:\n  name: cro\nspec:\n  clusterResourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: app}\n  policy:\n    overrideRules:\n    - jsonPatchOverrides:\n      - {op: replace, path: /metadata/name, value: b}\n", &["case.yaml:11: ClusterResourceOverride/cro: spec.policy.overrideRules[0].jsonPatchOverrides[0].path: path \"/metadata/name\": cannot override metadata fields except annotations and labels"]),
        case("override remove with value", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourceOverride\nmetadata:\n  name: cro\nspec:\n  clusterResourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: app}\n  policy:\n    overrideRules:\n    - jsonPatchOverrides:\n      - {op: remove, path: /metadata/labels/x, value: b}\n", &["case.yaml:11: ClusterResourceOverride/cro: spec.policy.overrideRules[0].jsonPatchOverrides[0].value: remove operation cannot have value"]),
        case("override path without slash", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourceOverride\nmetadata:\n  name: cro\nspec:\n  clusterResourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: app}\n  policy:\n    overrideRules:\n    - jsonPatchOverrides:\n      - {op: replace, path: spec/x, value: b}\n", &["case.yaml:11: ClusterResourceOverride/cro: spec.policy.overrideRules[0].jsonPatchOverrides[0].path: path \"spec/x\" must start with /"]),
        case("Delete rule with patches", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourceOverride\nmetadata:\n  name: cro\nspec:\n  clusterResourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: app}\n  policy:\n    overrideRules:\n    - overrideType: Delete\n      jsonPatchOverrides:\n      - {op: add, path: /metadata/labels/a, value: b}\n", &["case.yaml:11: ClusterResourceOverride/cro: spec.policy.overrideRules[0].jsonPatchOverrides: jsonPatchOverrides cannot be set when the overrideType is Delete"]),
        case("override without rules", "apiVersion: placement.kubernetes-fleet.io/v1alpha1\nkind: ResourceOverride\nmetadata:\n  name: ro\n  namespace: app\nspec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: ConfigMap, name: cm}\n  policy:\n    overrideRules: []\n", &["case.yaml:10: ResourceOverride/ro: spec.policy.overrideRules: Required value: at least one override rule is required"]),
        case("two ResourceOverrides on one resource", "apiVersion: placement.kubernetes-fleet.io/v1alpha1\nkind: ResourceOverride\nmetadata:\n  name: ro-a\n  namespace: app\nspec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: ConfigMap, name: cm}\n  policy:\n    overrideRules:\n    - overrideType: Delete\n---\napiVersion: placement.kubernetes-fleet.io/v1alpha1\nkind: ResourceOverride\nmetadata:\n  name: ro-b\n  namespace: app\nspec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: ConfigMap, name: cm}\n  policy:\n    overrideRules:\n    - overrideType: Delete\n", &["case.yaml:20: ResourceOverride/ro-b: spec.resourceSelectors[0]: the resource ConfigMap/cm is already selected by ResourceOverride \"ro-a\"; a resource may be selected by at most one ResourceOverride"]),
        // --- envelopes
        case("namespaced object in a ClusterResourceEnvelope", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourceEnvelope\nmetadata:\n  name: env\ndata:\n  cm.yaml:\n    apiVersion: v1\n    kind: ConfigMap\n    metadata: {name: inner, namespace: app}\n", &["case.yaml:6: ClusterResourceEnvelope/env: data.cm.yaml: a namespaced object ConfigMap app/inner has been wrapped in a cluster resource envelope; a ClusterResourceEnvelope may carry only cluster-scoped objects (gitfleet's own rule: KubeFleet's hub admits the envelope, and its work generator refuses the carried object when it places it)"]),
        case("ResourceEnvelope carrying another namespace", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ResourceEnvelope\nmetadata:\n  name: env\n  namespace: app\ndata:\n  cm.yaml:\n    apiVersion: v1\n    kind: ConfigMap\n    metadata: {name: inner, namespace: default}\n", &["case.yaml:10: ResourceEnvelope/env: data.cm.yaml.metadata.namespace: a namespaced object ConfigMap default/inner has been wrapped in a ResourceEnvelope from another namespace (\"app\") (gitfleet's own rule: KubeFleet's hub admits the envelope, and its work generator refuses the carried object when it places it)"]),
        case("legacy envelope ConfigMap with broken YAML", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: legacy\n  namespace: app\n  annotations: {kubernetes-fleet.io/envelope-configmap: \"true\", gitfleet.io/legacy-envelope: \"true\"}\ndata:\n  bad.yaml: \"kind: [\\n\"\n", &["case.yaml:8: ConfigMap/legacy: data.bad.yaml: is not valid YAML or JSON: line 1: unclosed bracket '[' (gitfleet's own rule: KubeFleet's hub admits the envelope, and its work generator refuses the carried object when it places it)"]),
        // --- staged updates
        case("stage name", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateStrategy\nmetadata:\n  name: s\nspec:\n  stages:\n  - name: Canary\n    labelSelector: {}\n", &["case.yaml:7: ClusterStagedUpdateStrategy/s: spec.stages[0].name: \"Canary\" must match '^[a-z0-9]+$'"]),
        case("TimedWait without waitTime", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateStrategy\nmetadata:\n  name: s\nspec:\n  stages:\n  - name: canary\n    afterStageTasks:\n    - type: TimedWait\n", &["case.yaml:9: ClusterStagedUpdateStrategy/s: spec.stages[0].afterStageTasks[0].waitTime: AfterStageTaskType is TimedWait, waitTime is required"]),
        case("Approval with waitTime", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateStrategy\nmetadata:\n  name: s\nspec:\n  stages:\n  - name: canary\n    afterStageTasks:\n    - type: Approval\n      waitTime: 1h\n", &["case.yaml:10: ClusterStagedUpdateStrategy/s: spec.stages[0].afterStageTasks[0].waitTime: AfterStageTaskType is Approval, waitTime is not allowed"]),
        case("TimedWait before a stage", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateStrategy\nmetadata:\n  name: s\nspec:\n  stages:\n  - name: canary\n    beforeStageTasks:\n    - type: TimedWait\n      waitTime: 1h\n", &["case.yaml:9: ClusterStagedUpdateStrategy/s: spec.stages[0].beforeStageTasks[0].type: BeforeStageTaskType cannot be TimedWait"]),
        case("maxConcurrency zero", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateStrategy\nmetadata:\n  name: s\nspec:\n  stages:\n  - name: canary\n    maxConcurrency: 0\n", &["case.yaml:8: ClusterStagedUpdateStrategy/s: spec.stages[0].maxConcurrency: maxConcurrency must be at least 1"]),
        case("update run state", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateRun\nmetadata:\n  name: run\nspec:\n  placementName: base\n  stagedRolloutStrategyName: s\n  state: Paused\n", &["case.yaml:8: ClusterStagedUpdateRun/run: spec.state: unknown variant `Paused`, expected one of `Initialize`, `Run`, `Stop`"]),
        case("update run on a RollingUpdate placement", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateRun\nmetadata:\n  name: run\nspec:\n  placementName: base\n  stagedRolloutStrategyName: s\n", &["case.yaml:6: ClusterStagedUpdateRun/run: spec.placementName: placement \"base\" does not have strategy type External, so it cannot be rolled out by an update run"]),
        case("update run on a missing placement", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateRun\nmetadata:\n  name: run\nspec:\n  placementName: ghost\n  stagedRolloutStrategyName: s\n", &["case.yaml:6: ClusterStagedUpdateRun/run: spec.placementName: placement \"ghost\" does not exist in the repository"]),
        // --- members
        case("heartbeat out of range", "apiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\nmetadata:\n  name: m1\nspec:\n  identity: {name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}\n  heartbeatPeriodSeconds: 0\n", &["case.yaml:7: MemberCluster/m1: spec.heartbeatPeriodSeconds: must be between 1 and 600, got 0"]),
        case("taint value", "apiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\nmetadata:\n  name: m1\nspec:\n  identity: {name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}\n  taints:\n  - key: gpu\n    value: yes please\n    effect: NoSchedule\n", &["case.yaml:9: MemberCluster/m1: spec.taints[0].value: invalid taint value \"yes please\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"]),
        case("member without identity", "apiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\nmetadata:\n  name: m2\nspec: {}\n", &["case.yaml:5: MemberCluster/m2: spec: missing field `identity`"]),
        case("OCM taint effect", "apiVersion: cluster.open-cluster-management.io/v1\nkind: ManagedCluster\nmetadata:\n  name: mc1\nspec:\n  hubAcceptsClient: true\n  taints:\n  - {key: a, effect: NoExecute}\n", &["case.yaml:8: ManagedCluster/mc1: spec.taints[0].effect: unknown variant `NoExecute`, expected one of `NoSelect`, `PreferNoSelect`, `NoSelectIfNew`"]),
        // --- OCM placement and friends
        case("PlacementDecision unknown status field", "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: PlacementDecision\nmetadata:\n  name: pl-decision-1\n  namespace: app\nstatus:\n  decisions:\n  - {clusterName: a, reason: '', weight: 1}\n", &["case.yaml:8: PlacementDecision/pl-decision-1: status.decisions[0].weight: unknown field `weight`, expected one of `clusterName`, `reason`, `score`"]),
        case("PlacementDecision spec", "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: PlacementDecision\nmetadata:\n  name: pl-decision-1\n  namespace: app\nspec: {}\n", &["case.yaml:6: PlacementDecision/pl-decision-1: spec: unknown field `spec`, expected one of `apiVersion`, `kind`, `metadata`, `status`"]),
        case("OCM numberOfClusters", "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\nmetadata:\n  name: pl\n  namespace: app\nspec:\n  numberOfClusters: -1\n", &["case.yaml:7: Placement/pl: spec.numberOfClusters: must be greater than or equal to 0, got -1 (gitfleet's own rule: an OCM hub admits it; OCM's scheduler cannot select a negative number of clusters)"]),
        case("OCM prioritizer weight", "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\nmetadata:\n  name: pl\n  namespace: app\nspec:\n  prioritizerPolicy:\n    mode: Exact\n    configurations:\n    - scoreCoordinate: {type: BuiltIn, builtIn: ResourceAllocatableCPU}\n      weight: 11\n", &["case.yaml:11: Placement/pl: spec.prioritizerPolicy.configurations[0].weight: must be between -10 and 10, got 11"]),
        // An Exists toleration with a value is admitted by OCM's CRD and reported by its scheduler
        // (tests/scenarios/ocm-misconfigured-toleration.yaml); a key that breaks the CRD pattern is not.
        case("OCM toleration key", "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\nmetadata:\n  name: pl\n  namespace: app\nspec:\n  tolerations:\n  - key: -a\n    operator: Exists\n", &["case.yaml:8: Placement/pl: spec.tolerations[0].key: \"-a\" must match '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$'"]),
        case("set binding naming another set", "apiVersion: cluster.open-cluster-management.io/v1beta2\nkind: ManagedClusterSetBinding\nmetadata:\n  name: prod\n  namespace: app\nspec:\n  clusterSet: staging\n", &["case.yaml:7: ManagedClusterSetBinding/prod: spec.clusterSet: The ManagedClusterSetBinding must have the same name as the target ManagedClusterSet"]),
        // A ManifestWork goes to the cluster its namespace names; a namespace that is neither declared nor a cluster's does not exist on the hub.
        case("a plain ManifestWork in no namespace of the hub", "apiVersion: work.open-cluster-management.io/v1\nkind: ManifestWork\nmetadata:\n  name: mw\n  namespace: cluster1\nspec:\n  workload:\n    manifests:\n    - {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: default}}\n", &["case.yaml:5: ManifestWork/mw: metadata.namespace: namespace \"cluster1\" does not exist in the repository (no Namespace object declares it)"]),
        case("ManifestWork with a feedback path that does not parse", "apiVersion: work.open-cluster-management.io/v1\nkind: ManifestWork\nmetadata:\n  name: mw\n  namespace: default\nspec:\n  manifestConfigs:\n  - resourceIdentifier: {group: '', resource: configmaps, namespace: default, name: c}\n    feedbackRules: [{type: JSONPaths, jsonPaths: [{name: a, path: '.data[x]'}]}]\n  workload:\n    manifests:\n    - {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: default}}\n", &["case.yaml:9: ManifestWork/mw: spec.manifestConfigs[0].feedbackRules[0].jsonPaths[0].path: invalid JSONPath \".data[x]\": invalid array index x"]),
        case("ManifestWork fieldManager outside work-agent", "apiVersion: work.open-cluster-management.io/v1\nkind: ManifestWork\nmetadata:\n  name: mw\n  namespace: default\nspec:\n  manifestConfigs:\n  - resourceIdentifier: {group: '', resource: configmaps, namespace: default, name: c}\n    updateStrategy: {type: ServerSideApply, serverSideApply: {fieldManager: me}}\n  workload:\n    manifests:\n    - {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: default}}\n", &["case.yaml:9: ManifestWork/mw: spec.manifestConfigs[0].updateStrategy.serverSideApply.fieldManager: \"me\" should match '^work-agent'"]),
        case("ManifestWorkReplicaSet with a condition rule of no such type", "apiVersion: work.open-cluster-management.io/v1alpha1\nkind: ManifestWorkReplicaSet\nmetadata:\n  name: mwrs\n  namespace: app\nspec:\n  placementRefs:\n  - name: pl\n  manifestWorkTemplate:\n    manifestConfigs:\n    - resourceIdentifier: {group: '', resource: configmaps, namespace: app, name: c}\n      updateStrategy: {type: ReadOnly}\n      conditionRules: [{type: WellKnownCompletions, condition: Complete}]\n    workload:\n      manifests:\n      - {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: app}}\n", &["case.yaml:13: ManifestWorkReplicaSet/mwrs: spec.manifestWorkTemplate.manifestConfigs[0].conditionRules[0].type: unknown variant `WellKnownCompletions`, expected `WellKnownConditions` or `CEL`"]),
        case("ManifestWorkReplicaSets of one Placement with two rollout strategies", "apiVersion: work.open-cluster-management.io/v1alpha1\nkind: ManifestWorkReplicaSet\nmetadata:\n  name: a\n  namespace: app\nspec:\n  placementRefs:\n  - name: pl\n    rolloutStrategy: {type: Progressive}\n  manifestWorkTemplate:\n    workload:\n      manifests:\n      - {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: app}}\n---\napiVersion: work.open-cluster-management.io/v1alpha1\nkind: ManifestWorkReplicaSet\nmetadata:\n  name: b\n  namespace: app\nspec:\n  placementRefs:\n  - name: pl\n  manifestWorkTemplate:\n    workload:\n      manifests:\n      - {apiVersion: v1, kind: ConfigMap, metadata: {name: b, namespace: app}}\n", &["case.yaml:22: ManifestWorkReplicaSet/b: spec.placementRefs[0].rolloutStrategy: differs from the rolloutStrategy ManifestWorkReplicaSet/a gives Placement \"pl\" (gitfleet's own rule: gitfleet delivers the workloads of the replica sets of one Placement to each cluster together, so they share one rolloutStrategy)"]),
        case("ManifestWorkReplicaSet without manifests", "apiVersion: work.open-cluster-management.io/v1alpha1\nkind: ManifestWorkReplicaSet\nmetadata:\n  name: mwrs\n  namespace: app\nspec:\n  placementRefs:\n  - name: pl\n  manifestWorkTemplate:\n    workload:\n      manifests: []\n", &["case.yaml:11: ManifestWorkReplicaSet/mwrs: spec.manifestWorkTemplate.workload.manifests: Workload manifests should not be empty"]),
        // --- resource selection: the commit is valid, the placement held (validate warns)
        held("reserved namespace", "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\nspec:\n  resourceSelectors:\n  - group: ''\n    version: v1\n    kind: Namespace\n    name: kube-system\n", &["case.yaml:10: ClusterResourcePlacement/p: spec.resourceSelectors[0].name: namespace \"kube-system\" is reserved (fleet-* and kube-* namespaces are never propagated)"]),
        // KubeFleet's webhook refuses these two at admission (its resource informer knows the
        // scopes), so the commit is invalid; selection holds the placement as well.
        held("CRP selecting a namespaced kind", "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\nspec:\n  resourceSelectors:\n  - group: ''\n    version: v1\n    kind: ConfigMap\n", &["commit: case.yaml:7: ClusterResourcePlacement/p: spec.resourceSelectors[0]: a ClusterResourcePlacement selects cluster-scoped resources; ConfigMap is namespaced (select its Namespace, or use a Namespace selector with selectionScope NamespaceWithResourceSelectors)", "case.yaml:7: ClusterResourcePlacement/p: spec.resourceSelectors[0]: a ClusterResourcePlacement can only select cluster-scoped resources, but ConfigMap is namespaced"]),
        held("RP selecting a cluster-scoped kind", "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ResourcePlacement\nmetadata:\n  name: rp\n  namespace: app\nspec:\n  resourceSelectors:\n  - group: rbac.authorization.k8s.io\n    version: v1\n    kind: ClusterRole\n", &["commit: case.yaml:8: ResourcePlacement/rp: spec.resourceSelectors[0]: a ResourcePlacement selects namespaced resources of its own namespace; ClusterRole is cluster-scoped (use a ClusterResourcePlacement)", "case.yaml:8: ResourcePlacement/rp: spec.resourceSelectors[0]: a ResourcePlacement can only select namespaced resources, but ClusterRole is cluster-scoped"]),
        held("duplicate selection", "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\nspec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: app}\n  - {group: '', version: v1, kind: Namespace, labelSelector: {}}\n", &["case.yaml:6: ClusterResourcePlacement/p: spec.resourceSelectors: found duplicate resource Namespace/app: it is selected more than once"]),
        held("NamespaceWithResourceSelectors on a missing namespace", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\nspec:\n  resourceSelectors:\n  - group: ''\n    version: v1\n    kind: Namespace\n    name: ghost\n    selectionScope: NamespaceWithResourceSelectors\n", &["case.yaml:10: ClusterResourcePlacement/p: spec.resourceSelectors[0].name: namespace \"ghost\" does not exist in the repository"]),
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
    let (cat, diags) = gitfleet::analyze(&files);
    let held = gitfleet::snapshot::invalid_selections(&cat);
    if c.held {
        // The commit itself is valid: only the placement is held.
        let mut out: Vec<String> = diags.iter().map(|d| format!("commit: {d}")).collect();
        out.extend(
            held.values()
                .flat_map(|i| &i.diagnostics)
                .map(|d| d.to_string()),
        );
        return out;
    }
    assert!(held.is_empty(), "{}: {held:?}", c.name);
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
