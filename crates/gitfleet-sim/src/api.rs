//! The API verbs over one member's store: get, list, create, update, patch (apply, merge, JSON,
//! strategic), delete and deletecollection, with the semantics of a real API server:
//! resourceVersion and generation, namespaces that must exist, status and scale subresources,
//! finalizers, owner-reference garbage collection, CRDs that add resources, dry runs.
//! Synchronous and free of HTTP: the caller holds the store lock and turns results into responses.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::apply::{self, ownable, record_update, Writer};
use super::defaults::{apply_defaults, selector_string, validate};
use super::patch::{self, PatchType};
use super::resources::{split_api_version, ResourceType};
use super::selector::{supported_fields, FieldSelector, LabelSelector};
use super::status::{delete_success, ApiError};
use super::store::{ObjKey, Store, Stored};

pub type ApiResult<T> = Result<T, ApiError>;

/// What a request addresses.
#[derive(Debug, Clone)]
pub struct Target {
    pub rt: Arc<ResourceType>,
    /// The namespace in the URL (namespaced resources).
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

impl Target {
    fn key(&self, name: &str) -> ObjKey {
        ObjKey::new(
            &self.rt.group,
            &self.rt.plural,
            if self.rt.namespaced {
                self.namespace.as_deref().unwrap_or("")
            } else {
                ""
            },
            name,
        )
    }

    fn name(&self) -> ApiResult<&str> {
        self.name
            .as_deref()
            .ok_or_else(|| ApiError::bad_request("a resource name is required"))
    }

    fn not_found(&self, name: &str) -> ApiError {
        ApiError::not_found(&self.rt.group, &self.rt.plural, name)
    }
}

/// Options common to writes.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    pub dry_run: bool,
    /// `fieldManager`, or the default the server derives from the user agent.
    pub manager: String,
    /// Whether `fieldManager` was given (apply requires it).
    pub manager_given: bool,
    pub force: bool,
    /// Timestamp for metadata (creationTimestamp, managedFields time).
    pub now: String,
}

#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub propagation: Option<String>,
    pub dry_run: bool,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
}

/// The object as a client of `rt`'s version sees it.
pub fn present(rt: &ResourceType, obj: &Value) -> Value {
    let mut out = obj.clone();
    out["apiVersion"] = json!(rt.api_version());
    out["kind"] = json!(rt.kind);
    out
}

// ---------------------------------------------------------------------------------------------
// Reads

pub fn get(store: &Store, t: &Target) -> ApiResult<Value> {
    let name = t.name()?;
    let obj = store.get(&t.key(name)).ok_or_else(|| t.not_found(name))?;
    match t.subresource.as_deref() {
        Some("scale") => scale_of(&t.rt, &obj),
        _ => Ok(present(&t.rt, &obj)),
    }
}

/// Compiled list filters.
pub struct Filter {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    pub fn new(t: &Target, label: Option<&str>, field: Option<&str>) -> ApiResult<Filter> {
        let labels = LabelSelector::parse(label.unwrap_or("")).map_err(ApiError::bad_request)?;
        let supported = supported_fields(&t.rt.group, &t.rt.plural);
        let fields =
            FieldSelector::parse(field.unwrap_or(""), &supported).map_err(ApiError::bad_request)?;
        Ok(Filter {
            namespace: if t.rt.namespaced {
                t.namespace.clone()
            } else {
                None
            },
            labels,
            fields,
        })
    }

    /// Whether a stored object is selected, parsing no more of it than the selectors read.
    pub fn matches(&self, key: &ObjKey, obj: &Stored) -> bool {
        self.namespace
            .as_ref()
            .is_none_or(|ns| &key.namespace == ns)
            && (self.labels.is_empty() || self.labels.matches(&obj.labels()))
            && (self.fields.matches_name(&key.namespace, &key.name))
                .unwrap_or_else(|| self.fields.matches(&obj.value()))
    }
}

/// A LIST's answer before it is one value: its items serialised one by one
/// ([`Listing::to_json`]) instead of copied into a list value first, which would be most of
/// the simulator's CPU when a thousand members are listed at once (a restart's re-check).
pub struct Listing<'a> {
    rt: &'a ResourceType,
    metadata: Value,
    items: Vec<Value>,
}

impl Listing<'_> {
    /// The list as a value (for the shapes built from it: tables, partial metadata).
    pub fn to_value(&self) -> Value {
        let items: Vec<Value> = self.items.iter().map(|o| list_item(self.rt, o)).collect();
        json!({
            "kind": self.rt.list_kind(),
            "apiVersion": self.rt.api_version(),
            "metadata": self.metadata,
            "items": items,
        })
    }

    /// The bytes of [`Listing::to_value`], without making it.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("JSON values serialise")
    }
}

impl serde::Serialize for Listing<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let items: Vec<ListItem> = self
            .items
            .iter()
            .map(|obj| ListItem { rt: self.rt, obj })
            .collect();
        let mut map = s.serialize_map(Some(4))?;
        map.serialize_entry("kind", &self.rt.list_kind())?;
        map.serialize_entry("apiVersion", &self.rt.api_version())?;
        map.serialize_entry("metadata", &self.metadata)?;
        map.serialize_entry("items", &items)?;
        map.end()
    }
}

/// [`list_item`] of a stored object, serialised without copying it.
struct ListItem<'a> {
    rt: &'a ResourceType,
    obj: &'a Value,
}

impl serde::Serialize for ListItem<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Some(fields) = self.obj.as_object() else {
            return list_item(self.rt, self.obj).serialize(s);
        };
        let custom = self.rt.is_custom();
        let (api_version, kind) = (self.rt.api_version(), self.rt.kind.as_str());
        let mut map = s.serialize_map(None)?;
        // As `present` then `list_item` leave it: a custom item's type in place (or last when
        // missing), a built-in item's left out.
        for (k, v) in fields {
            match k.as_str() {
                "apiVersion" if custom => map.serialize_entry(k, &api_version)?,
                "kind" if custom => map.serialize_entry(k, kind)?,
                "apiVersion" | "kind" => {}
                _ => map.serialize_entry(k, v)?,
            }
        }
        if custom && !fields.contains_key("apiVersion") {
            map.serialize_entry("apiVersion", &api_version)?;
        }
        if custom && !fields.contains_key("kind") {
            map.serialize_entry("kind", kind)?;
        }
        map.end()
    }
}

pub fn list(store: &Store, t: &Target, opts: &ListOptions) -> ApiResult<Value> {
    Ok(list_refs(store, t, opts)?.to_value())
}

/// [`list`], before it is made one value.
pub fn list_refs<'a>(
    store: &'a Store,
    t: &'a Target,
    opts: &ListOptions,
) -> ApiResult<Listing<'a>> {
    let filter = Filter::new(
        t,
        opts.label_selector.as_deref(),
        opts.field_selector.as_deref(),
    )?;
    let (snapshot_rv, after) = match &opts.continue_token {
        Some(tok) if !tok.is_empty() => {
            let (rv, after) = decode_continue(tok)
                .ok_or_else(|| ApiError::bad_request("continue key is not valid"))?;
            (rv, Some(after))
        }
        _ => (store.revision(), None),
    };
    let mut items = Vec::new();
    let mut next = None;
    let mut remaining = 0usize;
    for (key, obj) in store.list_stored(&t.rt.group, &t.rt.plural, filter.namespace.as_deref()) {
        let pos = format!("{}/{}", key.namespace, key.name);
        if after.as_ref().is_some_and(|a| pos.as_str() <= a.as_str()) || !filter.matches(key, obj) {
            continue;
        }
        if let Some(limit) = opts.limit.filter(|l| *l > 0) {
            if items.len() == limit {
                remaining += 1;
                continue;
            }
            if items.len() + 1 == limit {
                next = Some(pos.clone());
            }
        }
        items.push(obj.value());
    }
    let mut metadata = json!({"resourceVersion": snapshot_rv.to_string()});
    if remaining > 0 {
        if let Some(last) = next {
            metadata["continue"] = json!(encode_continue(snapshot_rv, &last));
            metadata["remainingItemCount"] = json!(remaining);
        }
    }
    Ok(Listing {
        rt: &t.rt,
        metadata,
        items,
    })
}

/// Items of built-in lists carry no apiVersion/kind, as on a real server; custom ones do.
pub fn list_item(rt: &ResourceType, obj: &Value) -> Value {
    let mut item = present(rt, obj);
    if !rt.is_custom() {
        if let Some(m) = item.as_object_mut() {
            m.shift_remove("apiVersion");
            m.shift_remove("kind");
        }
    }
    item
}

fn encode_continue(rv: u64, after: &str) -> String {
    format!("{rv}:{after}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode_continue(tok: &str) -> Option<(u64, String)> {
    if !tok.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..tok.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(tok.get(i..i + 2)?, 16).ok())
        .collect();
    let text = String::from_utf8(bytes?).ok()?;
    let (rv, after) = text.split_once(':')?;
    Some((rv.parse().ok()?, after.to_string()))
}

fn scale_of(rt: &ResourceType, obj: &Value) -> ApiResult<Value> {
    if !rt.subresources.iter().any(|s| s == "scale") {
        return Err(ApiError::no_route());
    }
    let m = &obj["metadata"];
    Ok(json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": m["name"], "namespace": m["namespace"], "uid": m["uid"],
            "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"],
        },
        "spec": {"replicas": obj["spec"]["replicas"].as_i64().unwrap_or(1)},
        "status": {
            "replicas": obj["status"]["replicas"].as_i64().unwrap_or(0),
            "selector": selector_string(&obj["spec"]["selector"]),
        },
    }))
}

// ---------------------------------------------------------------------------------------------
// Writes

fn check_namespace(store: &Store, t: &Target) -> ApiResult<()> {
    if !t.rt.namespaced {
        return Ok(());
    }
    let ns = t.namespace.as_deref().unwrap_or("");
    let key = ObjKey::new("", "namespaces", "", ns);
    match store.get(&key) {
        None => Err(ApiError::not_found("", "namespaces", ns)),
        Some(n) if !n["metadata"]["deletionTimestamp"].is_null() => Err(ApiError::forbidden(format!(
            "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
            t.rt.plural,
            t.name.as_deref().unwrap_or("")
        ))
        .with_details(json!({
            "name": t.name.as_deref().unwrap_or(""),
            "kind": t.rt.plural,
            "causes": [{"reason": "NamespaceTerminating",
                "message": format!("namespace {ns} is being terminated"),
                "field": "metadata.namespace"}],
        }))),
        Some(_) => Ok(()),
    }
}

/// Checks the body's apiVersion, kind, name and namespace against the URL, and fills them in.
fn check_identity(t: &Target, body: &mut Value, require_type: bool) -> ApiResult<()> {
    if !body.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON or YAML object",
        ));
    }
    let want_av = t.rt.api_version();
    match body["apiVersion"].as_str() {
        Some(av) if av != want_av => {
            let (g, _) = split_api_version(av);
            if g != t.rt.group || t.subresource.is_none() {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({av}) does not match the expected API version ({want_av})"
                )));
            }
        }
        None if require_type => {
            return Err(ApiError::bad_request(format!(
                "Object 'apiVersion' is missing in '{}'",
                compact_json(body)
            )))
        }
        _ => {}
    }
    match body["kind"].as_str() {
        Some(k) if k != t.rt.kind && t.subresource.is_none() => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                t.rt.kind
            )))
        }
        None if require_type => {
            return Err(ApiError::bad_request(format!(
                "Object 'Kind' is missing in '{}'",
                compact_json(body)
            )))
        }
        _ => {}
    }
    body["apiVersion"] = json!(want_av);
    body["kind"] = json!(t.rt.kind);
    if !body["metadata"].is_object() {
        body["metadata"] = json!({});
    }
    if let Some(url_name) = &t.name {
        match body["metadata"]["name"].as_str() {
            Some(n) if n != url_name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({url_name})"
                )))
            }
            _ => body["metadata"]["name"] = json!(url_name),
        }
    }
    if t.rt.namespaced {
        let url_ns = t.namespace.as_deref().unwrap_or("");
        match body["metadata"]["namespace"].as_str() {
            Some(ns) if !ns.is_empty() && ns != url_ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ))
            }
            _ => body["metadata"]["namespace"] = json!(url_ns),
        }
    } else if let Some(m) = body["metadata"].as_object_mut() {
        m.shift_remove("namespace");
    }
    Ok(())
}

fn compact_json(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 200 {
        format!("{}...", &s[..200])
    } else {
        s
    }
}

fn writer<'a>(t: &Target, opts: &'a WriteOptions, api_version: &'a str) -> Writer<'a> {
    Writer {
        manager: &opts.manager,
        api_version,
        subresource: match t.subresource.as_deref() {
            Some("status") => Some("status"),
            Some("scale") => Some("scale"),
            _ => None,
        },
        associative: !t.rt.is_custom(),
        now: &opts.now,
    }
}

const SERVER_FIELDS: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// Creates an object (POST).
pub fn create(
    store: &mut Store,
    t: &Target,
    mut body: Value,
    opts: &WriteOptions,
) -> ApiResult<(u16, Value)> {
    check_identity(t, &mut body, true)?;
    if body["metadata"]["name"].as_str().unwrap_or("").is_empty() {
        match body["metadata"]["generateName"].as_str() {
            Some(prefix) if !prefix.is_empty() => {
                let suffix: String = store.new_uid().replace('-', "").chars().take(5).collect();
                body["metadata"]["name"] = json!(format!("{prefix}{suffix}"));
            }
            _ => {
                return Err(ApiError::invalid(
                    &t.rt.group,
                    &t.rt.kind,
                    "",
                    &[(
                        "metadata.name".into(),
                        "Required value: name or generateName is required".into(),
                    )],
                ))
            }
        }
    }
    let name = body["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let named = Target {
        name: Some(name.clone()),
        ..t.clone()
    };
    check_namespace(store, &named)?;
    if store.get(&named.key(&name)).is_some() {
        return Err(ApiError::already_exists(&t.rt.group, &t.rt.plural, &name));
    }
    if let Some(m) = body["metadata"].as_object_mut() {
        for f in SERVER_FIELDS {
            m.shift_remove(*f);
        }
    }
    if t.rt.has_status() {
        if let Some(m) = body.as_object_mut() {
            m.shift_remove("status");
        }
    }
    body["metadata"]["uid"] = json!(store.new_uid());
    body["metadata"]["creationTimestamp"] = json!(opts.now);
    if t.rt.generation {
        body["metadata"]["generation"] = json!(1);
    }
    let mut obj = body;
    prepare(store, &named, &mut obj)?;
    let av = t.rt.api_version();
    record_update(
        None,
        &mut obj,
        &writer(&named, opts, &av),
        named.rt.has_status(),
    );
    commit_new(store, &named, obj, opts.dry_run)
}

/// Defaults, validation and CRD bookkeeping shared by every write.
fn prepare(store: &mut Store, t: &Target, obj: &mut Value) -> ApiResult<()> {
    let mut ips = ServiceIps(store);
    apply_defaults(&t.rt, obj, &mut || ips.next());
    let problems = validate(&t.rt, obj);
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if !problems.is_empty() {
        return Err(ApiError::invalid(&t.rt.group, &t.rt.kind, &name, &problems));
    }
    if is_crd(&t.rt) {
        super::resources::crd_types(obj)
            .map_err(|p| ApiError::invalid(&t.rt.group, &t.rt.kind, &name, &p))?;
        crd_status(obj);
    }
    Ok(())
}

struct ServiceIps<'a>(&'a Store);

impl ServiceIps<'_> {
    fn next(&mut self) -> String {
        let used: std::collections::BTreeSet<String> = self
            .0
            .list("", "services", None)
            .filter_map(|(_, s)| s["spec"]["clusterIP"].as_str().map(String::from))
            .collect();
        (1..65_000u32)
            .map(|n| format!("10.96.{}.{}", n / 250, n % 250 + 1))
            .find(|ip| !used.contains(ip))
            .unwrap_or_else(|| "10.96.255.254".into())
    }
}

fn is_crd(rt: &ResourceType) -> bool {
    rt.group == "apiextensions.k8s.io" && rt.kind == "CustomResourceDefinition"
}

fn crd_status(obj: &mut Value) {
    let names = obj["spec"]["names"].clone();
    let kind = names["kind"].as_str().unwrap_or_default().to_string();
    let mut accepted = json!({
        "plural": names["plural"],
        "singular": names["singular"].as_str().map(String::from).unwrap_or_else(|| kind.to_lowercase()),
        "kind": kind,
        "listKind": names["listKind"].as_str().map(String::from).unwrap_or_else(|| format!("{kind}List")),
    });
    for f in ["shortNames", "categories"] {
        if names[f].is_array() {
            accepted[f] = names[f].clone();
        }
    }
    let storage: Vec<Value> = obj["spec"]["versions"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter(|v| v["storage"] == json!(true))
                .map(|v| v["name"].clone())
                .collect()
        })
        .unwrap_or_default();
    let since = obj["metadata"]["creationTimestamp"].clone();
    obj["status"] = json!({
        "acceptedNames": accepted,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": since},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": since},
        ],
        "storedVersions": storage,
    });
}

fn commit_new(store: &mut Store, t: &Target, obj: Value, dry_run: bool) -> ApiResult<(u16, Value)> {
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if is_crd(&t.rt) && !dry_run {
        store
            .registry
            .set_crd(&obj)
            .map_err(|p| ApiError::invalid(&t.rt.group, &t.rt.kind, &name, &p))?;
    }
    if dry_run {
        return Ok((201, present(&t.rt, &obj)));
    }
    let stored = store.put(t.key(&name), obj);
    if t.rt.group.is_empty() && t.rt.kind == "Namespace" {
        namespace_defaults(store, &name, &stored);
    }
    Ok((201, present(&t.rt, &stored)))
}

/// What a namespace controller adds to a new namespace.
fn namespace_defaults(store: &mut Store, ns: &str, ns_obj: &Value) {
    let now = ns_obj["metadata"]["creationTimestamp"].clone();
    let sa_key = ObjKey::new("", "serviceaccounts", ns, "default");
    if store.get(&sa_key).is_none() {
        let uid = store.new_uid();
        store.put(
            sa_key,
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": "default", "namespace": ns, "uid": uid, "creationTimestamp": now}}),
        );
    }
    let cm_key = ObjKey::new("", "configmaps", ns, "kube-root-ca.crt");
    if store.get(&cm_key).is_none() {
        let uid = store.new_uid();
        store.put(
            cm_key,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "kube-root-ca.crt", "namespace": ns, "uid": uid, "creationTimestamp": now,
                                "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
                   "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\nsimulated\n-----END CERTIFICATE-----\n"}}),
        );
    }
}

/// Replaces an object (PUT).
pub fn update(
    store: &mut Store,
    t: &Target,
    mut body: Value,
    opts: &WriteOptions,
) -> ApiResult<(u16, Value)> {
    let name = t.name()?.to_string();
    check_identity(t, &mut body, false)?;
    let old = store.get(&t.key(&name)).ok_or_else(|| t.not_found(&name))?;
    check_rv(t, &name, &old, &body)?;
    if t.subresource.as_deref() == Some("scale") {
        let replicas = body["spec"]["replicas"].clone();
        let mut new = old.clone();
        new["spec"]["replicas"] = replicas;
        let (code, obj) = finish_update(store, t, &old, new, opts, Op::Update)?;
        return Ok((
            code,
            if code == 200 {
                scale_of(&t.rt, &obj)?
            } else {
                obj
            },
        ));
    }
    let new = merge_by_subresource(t, &old, body);
    finish_update(store, t, &old, new, opts, Op::Update)
}

fn check_rv(t: &Target, name: &str, old: &Value, body: &Value) -> ApiResult<()> {
    if let Some(rv) = body["metadata"]["resourceVersion"].as_str() {
        if !rv.is_empty() && Some(rv) != old["metadata"]["resourceVersion"].as_str() {
            return Err(ApiError::stale(
                &t.rt.group,
                &t.rt.plural,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
    }
    Ok(())
}

/// The object a write through `t` produces from `old` and the submitted full object: the status
/// subresource changes only status; the main resource never changes status when there is a
/// status subresource.
fn merge_by_subresource(t: &Target, old: &Value, mut submitted: Value) -> Value {
    match t.subresource.as_deref() {
        Some("status") => {
            let mut new = old.clone();
            new["status"] = submitted.get("status").cloned().unwrap_or(Value::Null);
            if new["status"].is_null() {
                if let Some(m) = new.as_object_mut() {
                    m.shift_remove("status");
                }
            }
            new
        }
        _ => {
            if t.rt.has_status() {
                match old.get("status") {
                    Some(s) => submitted["status"] = s.clone(),
                    None => {
                        if let Some(m) = submitted.as_object_mut() {
                            m.shift_remove("status");
                        }
                    }
                }
            }
            submitted
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Update,
    Apply,
}

/// Completes a write of an existing object: server metadata, defaults, validation, generation,
/// managed fields, no-op detection, finalizer-driven deletion, persistence.
fn finish_update(
    store: &mut Store,
    t: &Target,
    old: &Value,
    mut new: Value,
    opts: &WriteOptions,
    op: Op,
) -> ApiResult<(u16, Value)> {
    let name = old["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for f in ["name", "namespace"] {
        if new["metadata"][f] != old["metadata"][f] && !new["metadata"][f].is_null() {
            return Err(ApiError::invalid(
                &t.rt.group,
                &t.rt.kind,
                &name,
                &[(
                    format!("metadata.{f}"),
                    "Invalid value: field is immutable".into(),
                )],
            ));
        }
    }
    for f in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match old["metadata"].get(f) {
            Some(v) => new["metadata"][f] = v.clone(),
            None => {
                if let Some(m) = new["metadata"].as_object_mut() {
                    m.shift_remove(f);
                }
            }
        }
    }
    if !old["metadata"]["deletionTimestamp"].is_null() {
        // Finalizers may only be removed while an object is being deleted.
        let before: Vec<Value> = old["metadata"]["finalizers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let after: Vec<Value> = new["metadata"]["finalizers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let added: Vec<&str> = after
            .iter()
            .filter(|f| !before.contains(f))
            .filter_map(Value::as_str)
            .collect();
        if !added.is_empty() {
            let go_list: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
            return Err(ApiError::invalid(
                &t.rt.group,
                &t.rt.kind,
                &name,
                &[(
                    "metadata.finalizers".into(),
                    format!(
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                        go_list.join(", ")
                    ),
                )],
            ));
        }
    }
    prepare(store, t, &mut new)?;
    if t.rt.generation && spec_changed(&t.rt, old, &new) {
        let g = old["metadata"]["generation"].as_i64().unwrap_or(1);
        new["metadata"]["generation"] = json!(g + 1);
    }
    if op == Op::Update {
        let av = t.rt.api_version();
        record_update(
            Some(old),
            &mut new,
            &writer(t, opts, &av),
            t.rt.has_status(),
        );
    }
    new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
    if same_but_times(old, &new) {
        return Ok((200, present(&t.rt, old)));
    }
    if is_crd(&t.rt) && !opts.dry_run {
        store
            .registry
            .set_crd(&new)
            .map_err(|p| ApiError::invalid(&t.rt.group, &t.rt.kind, &name, &p))?;
    }
    if opts.dry_run {
        return Ok((200, present(&t.rt, &new)));
    }
    let deleting = !new["metadata"]["deletionTimestamp"].is_null();
    let no_finalizers = new["metadata"]["finalizers"]
        .as_array()
        .is_none_or(|f| f.is_empty());
    let key = t.key(&name);
    let stored = store.put(key.clone(), new);
    if deleting && no_finalizers {
        let gone = remove_object(store, &key).unwrap_or(stored);
        return Ok((200, present(&t.rt, &gone)));
    }
    Ok((200, present(&t.rt, &stored)))
}

/// Whether anything but metadata (and status, with a status subresource) changed.
fn spec_changed(rt: &ResourceType, old: &Value, new: &Value) -> bool {
    // A Deployment's annotations are copied to its ReplicaSets: the API server bumps its
    // generation when they change too (apps/deployment strategy's PrepareForUpdate).
    if rt.group == "apps"
        && rt.kind == "Deployment"
        && old["metadata"]["annotations"] != new["metadata"]["annotations"]
    {
        return true;
    }
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.as_object_mut() {
            m.shift_remove("metadata");
            if rt.has_status() {
                m.shift_remove("status");
            }
        }
        v
    };
    strip(old) != strip(new)
}

fn same_but_times(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(list) = v["metadata"]["managedFields"].as_array_mut() {
            for e in list {
                if let Some(m) = e.as_object_mut() {
                    m.shift_remove("time");
                }
            }
        }
        v
    };
    strip(old) == strip(new)
}

/// PATCH in any of its four forms.
pub fn patch(
    store: &mut Store,
    t: &Target,
    kind: PatchType,
    body: &[u8],
    opts: &WriteOptions,
) -> ApiResult<(u16, Value)> {
    let name = t.name()?.to_string();
    if kind != PatchType::Apply && opts.force {
        return Err(ApiError::invalid(
            &t.rt.group,
            &t.rt.kind,
            &name,
            &[(
                "force".into(),
                "Forbidden: may not be specified for non-apply patch".into(),
            )],
        ));
    }
    if kind == PatchType::Apply {
        return server_side_apply(store, t, &name, body, opts);
    }
    if kind == PatchType::Strategic && t.rt.is_custom() {
        return Err(ApiError::strategic_merge_unsupported());
    }
    let patch_body: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    let old = store.get(&t.key(&name)).ok_or_else(|| t.not_found(&name))?;
    if t.subresource.as_deref() == Some("scale") {
        let scale = scale_of(&t.rt, &old)?;
        let patched = patch::patch(&scale, kind, &patch_body).map_err(ApiError::from)?;
        let mut new = old.clone();
        new["spec"]["replicas"] = patched["spec"]["replicas"].clone();
        let (code, obj) = finish_update(store, t, &old, new, opts, Op::Update)?;
        return Ok((code, scale_of(&t.rt, &obj)?));
    }
    let view = present(&t.rt, &old);
    let patched = patch::patch(&view, kind, &patch_body).map_err(ApiError::from)?;
    check_rv(t, &name, &old, &patched)?;
    let new = merge_by_subresource(t, &old, patched);
    finish_update(store, t, &old, new, opts, Op::Update)
}

fn server_side_apply(
    store: &mut Store,
    t: &Target,
    name: &str,
    body: &[u8],
    opts: &WriteOptions,
) -> ApiResult<(u16, Value)> {
    if !opts.manager_given || opts.manager.is_empty() {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "PatchOptions",
            "",
            &[(
                "fieldManager".into(),
                "Required value: is required for apply patch".into(),
            )],
        ));
    }
    let mut config: Value = gitfleet_kube_text::yaml::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    check_identity(t, &mut config, true)?;
    if config["metadata"]["managedFields"]
        .as_array()
        .is_some_and(|a| !a.is_empty())
    {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    let key = t.key(name);
    let existing = store.get(&key);
    if let Some(old) = &existing {
        check_rv(t, name, old, &config)?;
    }
    let av = t.rt.api_version();
    let w = writer(t, opts, &av);
    let drop_status = t.rt.has_status() && t.subresource.is_none();
    let owned = ownable(&config, w.subresource, drop_status);
    let to_conflicts = |c: Vec<apply::Conflict>| {
        let pairs: Vec<(String, String)> = c.into_iter().map(|c| (c.manager, c.field)).collect();
        ApiError::apply_conflicts(&pairs)
    };
    match existing {
        Some(old) => {
            let merged = apply::apply(&old, &owned, &w, opts.force).map_err(to_conflicts)?;
            finish_update(store, t, &old, merged, opts, Op::Apply)
        }
        None => {
            if t.subresource.is_some() {
                return Err(t.not_found(name));
            }
            check_namespace(store, t)?;
            let mut base = json!({"apiVersion": t.rt.api_version(), "kind": t.rt.kind, "metadata": {"name": name}});
            if t.rt.namespaced {
                base["metadata"]["namespace"] = json!(t.namespace.as_deref().unwrap_or(""));
            }
            let mut obj = apply::apply(&base, &owned, &w, opts.force).map_err(to_conflicts)?;
            obj["metadata"]["uid"] = json!(store.new_uid());
            obj["metadata"]["creationTimestamp"] = json!(opts.now);
            if t.rt.generation {
                obj["metadata"]["generation"] = json!(1);
            }
            prepare(store, t, &mut obj)?;
            commit_new(store, t, obj, opts.dry_run)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Deletion

const PROTECTED_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// DELETE of one object.
pub fn delete(
    store: &mut Store,
    t: &Target,
    opts: &DeleteOptions,
    now: &str,
) -> ApiResult<(u16, Value)> {
    let name = t.name()?.to_string();
    let key = t.key(&name);
    let obj = store.get(&key).ok_or_else(|| t.not_found(&name))?;
    let meta = &obj["metadata"];
    if let Some(uid) = &opts.precondition_uid {
        if meta["uid"].as_str() != Some(uid) {
            return Err(ApiError::stale(
                &t.rt.group,
                &t.rt.plural,
                &name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta["uid"].as_str().unwrap_or("")
                ),
            ));
        }
    }
    if let Some(rv) = &opts.precondition_rv {
        if meta["resourceVersion"].as_str() != Some(rv) {
            return Err(ApiError::stale(&t.rt.group, &t.rt.plural, &name, &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                meta["resourceVersion"].as_str().unwrap_or("")
            )));
        }
    }
    let is_namespace = t.rt.group.is_empty() && t.rt.kind == "Namespace";
    if is_namespace && PROTECTED_NAMESPACES.contains(&name.as_str()) {
        return Err(ApiError::forbidden(format!(
            "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
        )));
    }
    let policy = opts.propagation.as_deref().unwrap_or("Background");
    if !["Background", "Foreground", "Orphan"].contains(&policy) {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "DeleteOptions",
            "",
            &[("propagationPolicy".into(), format!("Unsupported value: {policy:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""))],
        ));
    }
    let finalizers: Vec<Value> = meta["finalizers"].as_array().cloned().unwrap_or_default();
    let already_deleting = !meta["deletionTimestamp"].is_null();

    // The object as the response shows it when deletion is not immediate.
    let mut marked = obj.clone();
    if !already_deleting {
        marked["metadata"]["deletionTimestamp"] = json!(now);
        // A namespace has no grace period (its deletion is the namespace controller's).
        if !is_namespace {
            marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        }
    }
    if is_namespace {
        marked["status"]["phase"] = json!("Terminating");
    }
    if policy == "Foreground" && !is_namespace {
        let mut f = finalizers.clone();
        if !f.contains(&json!("foregroundDeletion")) {
            f.push(json!("foregroundDeletion"));
        }
        marked["metadata"]["finalizers"] = json!(f);
    }
    if opts.dry_run {
        return Ok(
            if !finalizers.is_empty() || policy == "Foreground" || is_namespace {
                (200, present(&t.rt, &marked))
            } else {
                deleted_response(t, &name, &obj)
            },
        );
    }
    let uid = meta["uid"].as_str().unwrap_or_default().to_string();

    if is_namespace {
        let marked = store.put(key.clone(), marked);
        let contents: Vec<ObjKey> = store
            .keys()
            .filter(|k| k.namespace == name)
            .cloned()
            .collect();
        // As the namespace controller does: what has finalizers is marked for deletion and
        // stays (the namespace stays Terminating until it is gone, see `remove_object`); the
        // rest goes now.
        let mut held = false;
        for k in contents {
            let finalized = store.get(&k).is_some_and(|o| {
                o["metadata"]["finalizers"]
                    .as_array()
                    .is_some_and(|f| !f.is_empty())
            });
            if finalized {
                held = true;
                let mut o = store.get(&k).unwrap_or_default();
                if o["metadata"]["deletionTimestamp"].is_null() {
                    o["metadata"]["deletionTimestamp"] = json!(now);
                    o["metadata"]["deletionGracePeriodSeconds"] = json!(0);
                    store.put(k, o);
                }
            } else {
                remove_object(store, &k);
            }
        }
        // Only user finalizers keep it; the namespace controller's `kubernetes` finalizer is in spec.
        if finalizers.is_empty() && !held {
            remove_object(store, &key);
        }
        return Ok((200, present(&t.rt, &marked)));
    }
    if !finalizers.is_empty() || policy == "Foreground" {
        let marked = if already_deleting && policy != "Foreground" {
            obj.clone()
        } else {
            store.put(key.clone(), marked)
        };
        if policy == "Foreground" {
            delete_dependents(store, &uid, "Background");
            // The garbage collector drops its finalizer once dependents are gone.
            let mut done = store.get(&key).unwrap_or_else(|| marked.clone());
            let rest: Vec<Value> = done["metadata"]["finalizers"]
                .as_array()
                .map(|f| {
                    f.iter()
                        .filter(|x| *x != "foregroundDeletion")
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            if rest.is_empty() {
                remove_object(store, &key);
            } else {
                done["metadata"]["finalizers"] = json!(rest);
                store.put(key.clone(), done);
            }
        }
        return Ok((200, present(&t.rt, &marked)));
    }
    let response = deleted_response(t, &name, &obj);
    remove_object(store, &key);
    delete_dependents(store, &uid, policy);
    Ok(response)
}

fn deleted_response(t: &Target, name: &str, obj: &Value) -> (u16, Value) {
    if t.rt.returns_deleted_object {
        (200, present(&t.rt, obj))
    } else {
        let uid = obj["metadata"]["uid"].as_str().unwrap_or_default();
        (200, delete_success(&t.rt.group, &t.rt.plural, name, uid))
    }
}

/// Removes an object and what hangs off it (a CRD's custom resources); dependents are the
/// caller's business.
pub fn remove_object(store: &mut Store, key: &ObjKey) -> Option<Value> {
    if key.group == "apiextensions.k8s.io" && key.resource == "customresourcedefinitions" {
        if let Some(types) = store.registry.remove_crd(&key.name) {
            if let Some(rt) = types.first() {
                let crs: Vec<ObjKey> = store
                    .list_keys(&rt.group, &rt.plural, None)
                    .cloned()
                    .collect();
                for k in crs {
                    store.remove(&k);
                }
            }
        }
    }
    let removed = store.remove(key);
    if !key.namespace.is_empty() {
        remove_namespace_once_empty(store, &key.namespace);
    }
    removed
}

/// A Terminating namespace whose last object is gone goes too (the namespace controller's
/// last step), unless finalizers of its own keep it.
fn remove_namespace_once_empty(store: &mut Store, namespace: &str) {
    let ns_key = ObjKey::new("", "namespaces", "", namespace);
    let terminating = store.get(&ns_key).is_some_and(|ns| {
        !ns["metadata"]["deletionTimestamp"].is_null()
            && ns["metadata"]["finalizers"]
                .as_array()
                .is_none_or(|f| f.is_empty())
    });
    if terminating && !store.keys().any(|k| k.namespace == namespace) {
        store.remove(&ns_key);
    }
}

/// Garbage collection: dependents of `owner_uid` are deleted (Background/Foreground) or lose the
/// owner reference (Orphan).
/// A container's log (`GET pods/{name}/log`). Simulated containers print nothing, so a started
/// container's log is empty; the errors are the API server's: an unknown container, a missing
/// container name when the pod has several, a container still waiting to start.
pub fn pod_log(store: &Store, t: &Target, container: Option<&str>) -> ApiResult<String> {
    let name = t.name()?.to_string();
    let pod_target = Target {
        subresource: None,
        ..t.clone()
    };
    let pod = store
        .get(&pod_target.key(&name))
        .ok_or_else(|| pod_target.not_found(&name))?;
    let names: Vec<&str> = ["initContainers", "containers"]
        .iter()
        .flat_map(|f| pod["spec"][*f].as_array().into_iter().flatten())
        .filter_map(|c| c["name"].as_str())
        .collect();
    let container = match container.filter(|c| !c.is_empty()) {
        Some(c) if names.contains(&c) => c.to_string(),
        Some(c) => {
            return Err(ApiError::bad_request(format!(
                "container {c} is not valid for pod {name}"
            )))
        }
        None => match pod["spec"]["containers"].as_array().map(Vec::as_slice) {
            Some([one]) => one["name"].as_str().unwrap_or_default().to_string(),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    names.join(" ")
                )))
            }
        },
    };
    if pod["spec"]["nodeName"]
        .as_str()
        .unwrap_or_default()
        .is_empty()
    {
        // Not scheduled: the API server has no kubelet to ask and answers with nothing.
        return Ok(String::new());
    }
    let started = pod["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(
            pod["status"]["initContainerStatuses"]
                .as_array()
                .into_iter()
                .flatten(),
        )
        .any(|s| {
            s["name"] == container.as_str()
                && (s["state"]["running"].is_object() || s["state"]["terminated"].is_object())
        });
    if !started {
        return Err(ApiError::bad_request(format!(
            "container \"{container}\" in pod \"{name}\" is waiting to start: ContainerCreating"
        )));
    }
    Ok(String::new())
}

/// Evicts a pod (`POST pods/{name}/eviction`): deletes it with the Eviction's delete options,
/// unless a PodDisruptionBudget selecting it would drop below what it needs (429, as the
/// eviction API answers; clients such as kubectl drain retry).
pub fn evict(
    store: &mut Store,
    t: &Target,
    eviction: &Value,
    now: &str,
) -> ApiResult<(u16, Value)> {
    let name = t.name()?.to_string();
    if eviction["metadata"]["name"]
        .as_str()
        .is_some_and(|n| !n.is_empty() && n != name)
    {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let pod_target = Target {
        subresource: None,
        ..t.clone()
    };
    let pod = store
        .get(&pod_target.key(&name))
        .ok_or_else(|| pod_target.not_found(&name))?;
    let d = &eviction["deleteOptions"];
    let opts = DeleteOptions {
        propagation: d["propagationPolicy"].as_str().map(String::from),
        dry_run: d["dryRun"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x == "All")),
        precondition_uid: d["preconditions"]["uid"].as_str().map(String::from),
        precondition_rv: d["preconditions"]["resourceVersion"]
            .as_str()
            .map(String::from),
    };
    if pod_ready_for_budget(&pod) {
        check_disruption_budgets(store, &pod)?;
    }
    delete(store, &pod_target, &opts, now)?;
    Ok((
        201,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

fn pod_ready_for_budget(p: &Value) -> bool {
    p["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// A ready pod may go only if every budget selecting it keeps what it needs: healthy pods
/// after the eviction >= minAvailable, or unhealthy <= maxUnavailable (percentages of the pods
/// the budget selects).
fn check_disruption_budgets(store: &Store, pod: &Value) -> ApiResult<()> {
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let labels = &pod["metadata"]["labels"];
    for (_, pdb) in store.list("policy", "poddisruptionbudgets", Some(ns)) {
        let selector = &pdb["spec"]["selector"];
        if selector.is_null() || !super::defaults::selector_matches(selector, labels) {
            continue;
        }
        let selected: Vec<Value> = store
            .list("", "pods", Some(ns))
            .map(|(_, p)| p)
            .filter(|p| super::defaults::selector_matches(selector, &p["metadata"]["labels"]))
            .collect();
        let expected = selected.len() as i64;
        let healthy = selected.iter().filter(|p| pod_ready_for_budget(p)).count() as i64;
        let of = |v: &Value, round_up: bool| -> Option<i64> {
            match v {
                Value::Number(n) => n.as_i64(),
                Value::String(s) => {
                    let pct: i64 = s.strip_suffix('%')?.parse().ok()?;
                    let scaled = expected * pct;
                    Some(if round_up {
                        (scaled + 99) / 100
                    } else {
                        scaled / 100
                    })
                }
                _ => None,
            }
        };
        let desired_healthy = if let Some(min) = of(&pdb["spec"]["minAvailable"], true) {
            min
        } else if let Some(max) = of(&pdb["spec"]["maxUnavailable"], true) {
            expected - max
        } else {
            continue;
        };
        if healthy - 1 < desired_healthy {
            let name = pdb["metadata"]["name"].as_str().unwrap_or_default();
            return Err(ApiError::disruption_budget(name, desired_healthy, healthy));
        }
    }
    Ok(())
}

pub fn delete_dependents(store: &mut Store, owner_uid: &str, policy: &str) {
    if owner_uid.is_empty() {
        return;
    }
    for k in store.dependents_of(owner_uid) {
        let Some(mut o) = store.get(&k) else {
            continue;
        };
        if policy == "Orphan" {
            if let Some(refs) = o["metadata"]["ownerReferences"].as_array_mut() {
                refs.retain(|r| r["uid"] != owner_uid);
                if refs.is_empty() {
                    if let Some(m) = o["metadata"].as_object_mut() {
                        m.shift_remove("ownerReferences");
                    }
                }
            }
            store.put(k, o);
        } else {
            let uid = o["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            remove_object(store, &k);
            delete_dependents(store, &uid, policy);
        }
    }
}

/// DELETE of a collection: deletes what the selectors match and returns them as a list.
pub fn delete_collection(
    store: &mut Store,
    t: &Target,
    list_opts: &ListOptions,
    opts: &DeleteOptions,
    now: &str,
) -> ApiResult<(u16, Value)> {
    let filter = Filter::new(
        t,
        list_opts.label_selector.as_deref(),
        list_opts.field_selector.as_deref(),
    )?;
    let names: Vec<(String, String)> = store
        .list_stored(&t.rt.group, &t.rt.plural, filter.namespace.as_deref())
        .filter(|(k, o)| filter.matches(k, o))
        .map(|(k, _)| (k.namespace.clone(), k.name.clone()))
        .collect();
    let mut items = Vec::new();
    for (ns, name) in names {
        let one = Target {
            namespace: if ns.is_empty() {
                None
            } else {
                Some(ns.clone())
            },
            name: Some(name.clone()),
            ..t.clone()
        };
        let before = store.get(&one.key(&name));
        if delete(store, &one, opts, now).is_ok() {
            if let Some(b) = before {
                items.push(list_item(&t.rt, &b));
            }
        }
    }
    Ok((
        200,
        json!({"kind": t.rt.list_kind(), "apiVersion": t.rt.api_version(),
               "metadata": {"resourceVersion": store.revision().to_string()}, "items": items}),
    ))
}

/// Builds an object map for tests and seeding.
pub fn object(api_version: &str, kind: &str, meta: Value, rest: Value) -> Value {
    let mut m = Map::new();
    m.insert("apiVersion".into(), json!(api_version));
    m.insert("kind".into(), json!(kind));
    m.insert("metadata".into(), meta);
    if let Value::Object(r) = rest {
        m.extend(r);
    }
    Value::Object(m)
}
