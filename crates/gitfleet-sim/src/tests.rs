//! Tests of the simulator through its request path, in process: a [`Member`] answers
//! [`Request`]s the way it does over a socket, without one. What only a real client shows
//! (kubectl's messages, connection refused) is in tests/sim_kubectl.rs.

use serde_json::{json, Value};

use super::clock;
use super::fleet_file::{MemberSpec, NodeGroup};
use super::http::{Body, Request, Response};
use super::member::{handle, Member};
use super::seed;
use super::store::{ObjKey, LOG_CAPACITY};

const TOKEN: &str = "tok";

fn member(anonymous: bool) -> Member {
    member_with(anonymous, 0)
}

fn member_with(anonymous: bool, workload_delay_ms: u64) -> Member {
    let spec = MemberSpec {
        name: "m".into(),
        nodes: vec![NodeGroup::default()],
        workload_delay_ms,
        ..MemberSpec::default()
    };
    let m = Member::new(
        &spec,
        TOKEN.into(),
        anonymous,
        "v1.33.1".into(),
        "127.0.0.1:1".parse().unwrap(),
        1,
    );
    seed::seed(&mut m.store(), &spec, "v1.33.1", &clock::now_rfc3339());
    m
}

async fn call(
    m: &Member,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    let mut all = vec![("Authorization", "Bearer tok")];
    all.extend_from_slice(headers);
    handle(m, Request::new(method, target, &all, body.as_bytes())).await
}

async fn json_of(mut r: Response) -> (u16, Value) {
    let bytes = r.body_bytes();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)));
    (r.status, v)
}

async fn apply(m: &Member, target: &str, obj: &Value) -> (u16, Value) {
    let r = call(
        m,
        "PATCH",
        target,
        &[("Content-Type", "application/apply-patch+yaml")],
        &obj.to_string(),
    )
    .await;
    json_of(r).await
}

fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"}, "data": data})
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn dry_run_apply_returns_the_merged_object_and_persists_nothing() {
    let m = member(false);
    let (code, _) = apply(
        &m,
        &format!("{CMS}/c?fieldManager=a"),
        &cm("c", json!({"x": "1"})),
    )
    .await;
    assert_eq!(code, 201);
    let (code, merged) = apply(
        &m,
        &format!("{CMS}/c?&dryRun=All&fieldManager=b"),
        &cm("c", json!({"y": "2"})),
    )
    .await;
    assert_eq!(code, 200, "{merged}");
    assert_eq!(merged["data"], json!({"x": "1", "y": "2"}));
    let (_, stored) = json_of(call(&m, "GET", &format!("{CMS}/c"), &[], "").await).await;
    assert_eq!(stored["data"], json!({"x": "1"}));
    assert_eq!(
        stored["metadata"]["resourceVersion"], merged["metadata"]["resourceVersion"],
        "a dry run does not advance the resourceVersion"
    );
}

#[tokio::test]
async fn an_appliers_dropped_field_is_removed() {
    let m = member(false);
    apply(
        &m,
        &format!("{CMS}/c?fieldManager=a"),
        &cm("c", json!({"x": "1", "y": "2"})),
    )
    .await;
    let (code, after) = apply(
        &m,
        &format!("{CMS}/c?fieldManager=a"),
        &cm("c", json!({"x": "1"})),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(after["data"], json!({"x": "1"}));
}

#[tokio::test]
async fn lists_page_with_limit_and_continue() {
    let m = member(false);
    for i in 0..5 {
        apply(
            &m,
            &format!("{CMS}/c{i}?fieldManager=a"),
            &cm(&format!("c{i}"), json!({})),
        )
        .await;
    }
    let mut seen = Vec::new();
    let mut target = format!("{CMS}?&limit=2");
    for _ in 0..10 {
        let (code, page) = json_of(call(&m, "GET", &target, &[], "").await).await;
        assert_eq!(code, 200, "{page}");
        assert!(page["items"].as_array().unwrap().len() <= 2);
        assert!(!page["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .is_empty());
        for i in page["items"].as_array().unwrap() {
            seen.push(i["metadata"]["name"].as_str().unwrap().to_string());
        }
        match page["metadata"]["continue"].as_str() {
            Some(c) if !c.is_empty() => target = format!("{CMS}?&limit=2&continue={c}"),
            _ => break,
        }
    }
    assert_eq!(seen, ["c0", "c1", "c2", "c3", "c4", "kube-root-ca.crt"]);
    let (code, _) = json_of(
        call(
            &m,
            "GET",
            &format!("{CMS}?limit=2&continue=garbage"),
            &[],
            "",
        )
        .await,
    )
    .await;
    assert_eq!(code, 400);
}

/// Spec §6: a watch from a revision the log no longer holds gets HTTP 200 and one ERROR event
/// (410 Expired), so that kube-runtime's watcher relists.
#[tokio::test]
async fn a_watch_from_a_forgotten_revision_gets_an_expired_error_event() {
    let m = member(false);
    {
        let mut store = m.store();
        let key = ObjKey::new("", "configmaps", "default", "busy");
        for i in 0..=LOG_CAPACITY {
            store.put(key.clone(), cm("busy", json!({"i": i.to_string()})));
        }
    }
    let r = call(
        &m,
        "GET",
        &format!("{CMS}?&watch=true&resourceVersion=1"),
        &[],
        "",
    )
    .await;
    assert_eq!(r.status, 200);
    let Body::Stream(mut rx) = r.body else {
        panic!("a watch streams");
    };
    let mut body = Vec::new();
    while let Some(chunk) = rx.recv().await {
        body.extend(chunk);
    }
    let lines: Vec<Value> = String::from_utf8(body)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["type"], "ERROR");
    let status = &lines[0]["object"];
    assert_eq!(
        (
            status["kind"].as_str(),
            status["code"].as_i64(),
            status["reason"].as_str()
        ),
        (Some("Status"), Some(410), Some("Expired"))
    );
}

#[tokio::test]
async fn tokens_are_checked_and_anonymous_requests_need_anonymous_auth() {
    for anonymous in [false, true] {
        let m = member(anonymous);
        let ok = handle(
            &m,
            Request::new("GET", "/version", &[("Authorization", "Bearer tok")], b""),
        )
        .await;
        assert_eq!(ok.status, 200);
        let (code, status) = json_of(
            handle(
                &m,
                Request::new("GET", "/version", &[("Authorization", "Bearer nope")], b""),
            )
            .await,
        )
        .await;
        assert_eq!(
            (code, status["reason"].as_str()),
            (401, Some("Unauthorized"))
        );
        let none = handle(&m, Request::new("GET", "/version", &[], b"")).await;
        assert_eq!(none.status, if anonymous { 200 } else { 401 });
    }
}

/// Spec §2.2 and §4: kube's aggregated discovery sees a CRD's group once the CRD is applied.
#[tokio::test]
async fn aggregated_discovery_includes_an_applied_crds_group() {
    let m = member(false);
    let accept =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let groups = |v: &Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["metadata"]["name"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let (_, before) = json_of(call(&m, "GET", "/apis", &[("Accept", accept)], "").await).await;
    assert_eq!(before["kind"], "APIGroupDiscoveryList");
    assert!(groups(&before).contains(&"apps".to_string()));
    assert!(!groups(&before).contains(&"example.com".to_string()));
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}}}]}
    });
    let (code, _) = apply(
        &m,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com?fieldManager=a",
        &crd,
    )
    .await;
    assert_eq!(code, 201);
    let (_, after) = json_of(call(&m, "GET", "/apis", &[("Accept", accept)], "").await).await;
    let group = after["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "example.com")
        .expect("the CRD's group");
    let resource = &group["versions"][0]["resources"][0];
    assert_eq!(resource["resource"], "widgets");
    assert_eq!(resource["responseKind"]["kind"], "Widget");
    assert_eq!(resource["scope"], "Cluster");
}

/// Without a kubeconfig to sit beside, the generated admin token is printed; an empty one given
/// on the command line is refused.
#[tokio::test]
async fn the_admin_token_is_printed_without_a_kubeconfig_and_never_empty() {
    let fleet = || super::FleetFile {
        members: vec![MemberSpec {
            name: "m".into(),
            ..MemberSpec::default()
        }],
        ..super::FleetFile::default()
    };
    let admin = Some("127.0.0.1:0".parse().unwrap());
    let running = super::start(
        fleet(),
        super::StartOptions {
            admin,
            admin_token: None,
        },
    )
    .await
    .unwrap();
    let token = running.admin_token().unwrap().to_string();
    assert_eq!(token.len(), 32);
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    let banner = super::ready_text(&running, None);
    assert!(
        banner.contains(&format!("admin token: {token}\n")),
        "{banner}"
    );
    let with_file = super::ready_text(&running, Some(std::path::Path::new("/tmp/k")));
    assert!(
        with_file.contains("admin token file: /tmp/k.admin-token\n"),
        "{with_file}"
    );
    assert!(!with_file.contains(&token), "{with_file}");
    running.shutdown().await;
    let empty = super::start(
        fleet(),
        super::StartOptions {
            admin,
            admin_token: Some(" ".into()),
        },
    )
    .await;
    assert!(matches!(empty, Err(super::SimError::InvalidAdminToken(_))));
}

/// As the namespace controller: deleting a namespace deletes what it holds, but an object with
/// finalizers is only marked, and keeps its namespace Terminating until it goes.
#[tokio::test]
async fn a_finalized_object_keeps_its_namespace_terminating_until_it_goes() {
    let m = member(false);
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "app"}});
    assert_eq!(
        apply(&m, "/api/v1/namespaces/app?fieldManager=t", &ns)
            .await
            .0,
        201
    );
    let cms = "/api/v1/namespaces/app/configmaps";
    let mut held = cm("held", json!({"a": "1"}));
    held["metadata"]["namespace"] = json!("app");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    assert_eq!(
        apply(&m, &format!("{cms}/held?fieldManager=t"), &held)
            .await
            .0,
        201
    );
    let mut free = cm("free", json!({"a": "1"}));
    free["metadata"]["namespace"] = json!("app");
    assert_eq!(
        apply(&m, &format!("{cms}/free?fieldManager=t"), &free)
            .await
            .0,
        201
    );

    let (code, gone) = json_of(call(&m, "DELETE", "/api/v1/namespaces/app", &[], "").await).await;
    assert_eq!(code, 200, "{gone}");
    assert_eq!(gone["status"]["phase"], "Terminating");
    let get = |path: String| {
        let m = &m;
        async move { json_of(call(m, "GET", &path, &[], "").await).await }
    };
    assert_eq!(get(format!("{cms}/free")).await.0, 404);
    let (code, still) = get(format!("{cms}/held")).await;
    assert_eq!(code, 200);
    assert!(
        still["metadata"]["deletionTimestamp"].is_string(),
        "{still}"
    );
    let (code, ns) = get("/api/v1/namespaces/app".into()).await;
    assert_eq!((code, &ns["status"]["phase"]), (200, &json!("Terminating")));

    let r = call(
        &m,
        "PATCH",
        &format!("{cms}/held"),
        &[("Content-Type", "application/merge-patch+json")],
        r#"{"metadata":{"finalizers":null}}"#,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(get(format!("{cms}/held")).await.0, 404);
    assert_eq!(get("/api/v1/namespaces/app".into()).await.0, 404);
}

#[tokio::test]
async fn the_garbage_fault_answers_200_with_a_body_that_is_not_json_until_it_is_lifted() {
    let m = member(false);
    let mut faults = m.current_faults();
    faults.garbage = true;
    m.set_faults(faults.clone());
    let mut r = call(&m, "GET", "/api/v1/namespaces", &[], "").await;
    assert_eq!(r.status, 200);
    assert!(serde_json::from_slice::<Value>(&r.body_bytes()).is_err());
    faults.garbage = false;
    m.set_faults(faults);
    let (code, list) = json_of(call(&m, "GET", "/api/v1/namespaces", &[], "").await).await;
    assert_eq!((code, list["kind"].as_str()), (200, Some("NamespaceList")));
}

/// The deployment controller's part: a Deployment whose annotations changed gets a new
/// generation (as from the API server) and its status observes it at once, while a template
/// change still waits for the member's delay (pods starting). Paused clock: a wait for the delay
/// would show as 60 s passed.
#[tokio::test(start_paused = true)]
async fn a_new_generation_with_the_same_spec_is_observed_without_the_pods_delay() {
    const DELAY: std::time::Duration = std::time::Duration::from_secs(60);
    let m = std::sync::Arc::new(member_with(false, DELAY.as_millis() as u64));
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(super::workloads::run(m.clone(), stopped));
    // Lets the controller subscribe to the store's changes before the first write (one thread).
    tokio::task::yield_now().await;
    let path = "/apis/apps/v1/namespaces/default/deployments/web";
    let deployment = |annotation: &str, image: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "annotations": {"stamp": annotation}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": image}]}}}})
    };
    // How long, on the member's clock, until the Deployment's status observes what was applied.
    let applied_then_observed = |d: Value| {
        let m = m.clone();
        async move {
            let (code, applied) = apply(&m, &format!("{path}?fieldManager=t&force=true"), &d).await;
            assert!(code == 200 || code == 201, "{code} {applied}");
            let start = tokio::time::Instant::now();
            loop {
                let (_, live) = json_of(call(&m, "GET", path, &[], "").await).await;
                let status = &live["status"];
                if status["observedGeneration"] == live["metadata"]["generation"]
                    && status["availableReplicas"] == json!(2)
                {
                    return (start.elapsed(), live);
                }
                assert!(start.elapsed() < DELAY * 10, "never observed: {live}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    };

    let (first, live) = applied_then_observed(deployment("1", "web:1")).await;
    assert!(
        first >= DELAY,
        "the first rollout waits for pods: {first:?}"
    );
    assert_eq!(live["metadata"]["generation"], 1);

    let (annotated, live) = applied_then_observed(deployment("2", "web:1")).await;
    assert_eq!(live["metadata"]["generation"], 2, "{live}");
    assert!(
        annotated < DELAY,
        "no pods change, yet waited {annotated:?}"
    );

    let (new_template, live) = applied_then_observed(deployment("2", "web:2")).await;
    assert_eq!(live["metadata"]["generation"], 3, "{live}");
    // A reconcile due already (the status write after the annotation) is the one that comes.
    assert!(
        new_template > DELAY / 2,
        "a new template waits for pods: {new_template:?}"
    );
}

/// A list is answered straight from the store: the bytes are those of the list as a value
/// (`api::list`), for a built-in kind (items without their type) and a custom one (with it),
/// paged or not.
#[tokio::test]
async fn a_list_answered_from_the_store_is_the_list_value_serialised() {
    let m = member(false);
    for name in ["a", "b", "c"] {
        let (code, _) = apply(
            &m,
            &format!("{CMS}/{name}?fieldManager=t"),
            &cm(name, json!({"k": name})),
        )
        .await;
        assert_eq!(code, 201);
    }
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (code, _) = apply(
        &m,
        &format!("{crds}/widgets.example.com?fieldManager=t"),
        &crd,
    )
    .await;
    assert_eq!(code, 201);
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default"}, "spec": {"size": 1}});
    let (code, _) = apply(&m, &format!("{widgets}/w?fieldManager=t"), &widget).await;
    assert_eq!(code, 201);
    let cases = [
        ("", "v1", "configmaps", None),
        ("", "v1", "configmaps", Some(2)),
        ("example.com", "v1", "widgets", None),
    ];
    for (group, version, plural, limit) in cases {
        let target = super::api::Target {
            rt: m.store().registry.lookup(group, version, plural).unwrap(),
            namespace: Some("default".into()),
            name: None,
            subresource: None,
        };
        let opts = super::api::ListOptions {
            limit,
            ..Default::default()
        };
        let want =
            serde_json::to_vec(&super::api::list(&m.store(), &target, &opts).unwrap()).unwrap();
        let prefix = if group.is_empty() {
            "/api/v1".to_string()
        } else {
            format!("/apis/{group}/{version}")
        };
        let query = limit.map_or(String::new(), |l| format!("?limit={l}"));
        let mut r = call(
            &m,
            "GET",
            &format!("{prefix}/namespaces/default/{plural}{query}"),
            &[],
            "",
        )
        .await;
        assert_eq!(r.status, 200);
        let got = r.body_bytes();
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "{plural}"
        );
        let items: Value = serde_json::from_slice(&got).unwrap();
        let first = &items["items"][0];
        assert_eq!(first.get("kind").is_some(), !group.is_empty(), "{first}");
    }
}
