//! The simulator checked with the real `kubectl`: what kubectl sends, the simulator answers as a
//! Kubernetes API server does.

mod common;

use common::sim::SimFleet;

const FLEET: &str = r#"
anonymousAuth: true
members:
  - name: alpha
    nodes:
      - count: 2
        cpu: "4"
        memory: 16Gi
        instanceType: Standard_D4s_v5
  - name: beta
    nodes:
      - count: 1
        cpu: "8"
        memory: 32Gi
        instanceType: Standard_D8s_v5
"#;

#[test]
fn kubectl_lists_each_members_nodes() {
    let sim = SimFleet::start(FLEET);
    let alpha = sim.get_json("alpha", &["nodes"]);
    assert_eq!(alpha["items"].as_array().unwrap().len(), 2);
    let beta = sim.get_json("beta", &["nodes"]);
    let items = beta["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["status"]["capacity"]["cpu"], "8");
}
