//! One member's objects, like etcd behind an API server: a map keyed by (group, resource,
//! namespace, name), one revision counter that every write advances (it becomes the object's
//! `resourceVersion`), and a bounded log of change events that watches replay and follow.
//!
//! The log is also how changes reach those who follow them (watches, the workloads
//! controller): each keeps the revision it has seen and reads the log after it when the store
//! signals a write, so a follower that falls behind costs nothing until it catches up or the
//! log drops what it had not read (then it is told, as a watch resuming from a revision the
//! server's watch cache no longer holds is).
//!
//! An object is stored once, as its JSON text ([`Stored`]): the map, the event that wrote it and
//! the event that replaced it (as its previous state) hold the same [`Arc`], so a member's
//! memory grows with the versions the log keeps, not with three copies of each. Readers get a
//! parsed copy, as a real API server's readers get a decoded copy of what etcd holds.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::watch;

use super::resources::Registry;

/// What [`Store::follow`] returns: the logged events after a revision, and the follower of
/// the ones to come.
pub type Following = (Vec<Arc<Event>>, Changes);

/// Where an object lives. `namespace` is empty for cluster-scoped objects.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjKey {
    pub group: String,
    pub resource: String,
    pub namespace: String,
    pub name: String,
}

impl ObjKey {
    pub fn new(group: &str, resource: &str, namespace: &str, name: &str) -> ObjKey {
        ObjKey {
            group: group.into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as watches see it.
#[derive(Debug, Clone)]
pub struct Event {
    /// Position among the changes of every member of this process, so a test can order what
    /// happened on different members (the admin endpoint's change log).
    pub seq: u64,
    pub rv: u64,
    pub kind: EventType,
    pub key: ObjKey,
    pub object: Arc<Stored>,
    /// The state before a modification (for watches whose selector the object enters or leaves).
    pub old: Option<Arc<Stored>>,
}

/// One version of an object as the store keeps it: its JSON text. A parsed value takes several
/// times the bytes of its text (with `preserve_order`, over a hundred bytes a map entry, and
/// `managedFields` is mostly empty maps), and a member of a large fleet holds hundreds of
/// objects and the versions its log keeps.
#[derive(Debug)]
pub struct Stored(Box<str>);

impl Stored {
    fn new(object: &Value) -> Stored {
        Stored(object.to_string().into_boxed_str())
    }

    /// A parsed copy.
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.0).expect("the store holds the JSON text of values")
    }

    /// The JSON text.
    pub fn text(&self) -> &str {
        &self.0
    }

    /// The object's `metadata.labels` (null when it has none), read without building the rest:
    /// a LIST or watch by label selector looks at every object of its resource, and parsing
    /// each whole would be most of a large member's work.
    pub fn labels(&self) -> Value {
        #[derive(serde::Deserialize)]
        struct Head {
            #[serde(default)]
            metadata: Meta,
        }
        #[derive(serde::Deserialize, Default)]
        struct Meta {
            #[serde(default)]
            labels: Value,
        }
        serde_json::from_str::<Head>(&self.0)
            .expect("the store holds the JSON text of objects")
            .metadata
            .labels
    }

    /// False when the object has no `ownerReferences`, found without parsing it.
    fn may_name_owners(&self) -> bool {
        self.0.contains("\"ownerReferences\"")
    }
}

static NEXT_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// How many events the log keeps unless the fleet file says ([`Store::keep_events`]); a watch
/// from an older revision gets 410 Expired.
pub const LOG_CAPACITY: usize = 20_000;

pub struct Store {
    rv: u64,
    objects: BTreeMap<ObjKey, Arc<Stored>>,
    /// The objects whose `ownerReferences` name each uid: garbage collection finds an owner's
    /// dependents here, as the real collector does from its graph, not by reading every object.
    dependents: HashMap<String, BTreeSet<ObjKey>>,
    log: VecDeque<Arc<Event>>,
    log_capacity: usize,
    /// The latest revision, for followers to wait on.
    written: watch::Sender<u64>,
    pub registry: Registry,
    uid_seed: String,
    uid_counter: u64,
}

impl Store {
    pub fn new(uid_seed: &str) -> Store {
        Store {
            rv: 1,
            objects: BTreeMap::new(),
            dependents: HashMap::new(),
            log: VecDeque::new(),
            log_capacity: LOG_CAPACITY,
            written: watch::channel(1).0,
            registry: Registry::default(),
            uid_seed: uid_seed.into(),
            uid_counter: 0,
        }
    }

    /// The latest revision.
    pub fn revision(&self) -> u64 {
        self.rv
    }

    /// A parsed copy of the object at `key`.
    pub fn get(&self, key: &ObjKey) -> Option<Value> {
        self.objects.get(key).map(|o| o.value())
    }

    pub fn contains(&self, key: &ObjKey) -> bool {
        self.objects.contains_key(key)
    }

    /// Objects of one resource, in one namespace or (None) all, ordered by namespace and name,
    /// each parsed as it is reached.
    pub fn list<'a: 'q, 'q>(
        &'a self,
        group: &'q str,
        resource: &'q str,
        namespace: Option<&'q str>,
    ) -> impl Iterator<Item = (&'a ObjKey, Value)> + 'q {
        self.list_stored(group, resource, namespace)
            .map(|(k, o)| (k, o.value()))
    }

    /// The keys of [`Store::list`], without parsing the objects.
    pub fn list_keys<'a: 'q, 'q>(
        &'a self,
        group: &'q str,
        resource: &'q str,
        namespace: Option<&'q str>,
    ) -> impl Iterator<Item = &'a ObjKey> + 'q {
        self.list_stored(group, resource, namespace).map(|(k, _)| k)
    }

    /// [`Store::list`] as stored, for a reader that looks before it parses.
    pub fn list_stored<'a: 'q, 'q>(
        &'a self,
        group: &'q str,
        resource: &'q str,
        namespace: Option<&'q str>,
    ) -> impl Iterator<Item = (&'a ObjKey, &'a Stored)> + 'q {
        let start = ObjKey::new(group, resource, namespace.unwrap_or(""), "");
        self.objects
            .range(start..)
            .take_while(move |(k, _)| {
                k.group == group
                    && k.resource == resource
                    && namespace.is_none_or(|ns| k.namespace == ns)
            })
            .map(|(k, o)| (k, &**o))
    }

    /// The objects whose `ownerReferences` name `owner_uid`, in key order.
    pub fn dependents_of(&self, owner_uid: &str) -> Vec<ObjKey> {
        self.dependents
            .get(owner_uid)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The key of every object (for namespace deletion).
    pub fn keys(&self) -> impl Iterator<Item = &ObjKey> {
        self.objects.keys()
    }

    /// A fresh, unique uid in the UUID form.
    pub fn new_uid(&mut self) -> String {
        use sha2::{Digest, Sha256};
        self.uid_counter += 1;
        let digest = Sha256::digest(format!("{}/{}", self.uid_seed, self.uid_counter).as_bytes());
        let h: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        format!(
            "{}-{}-4{}-a{}-{}",
            &h[0..8],
            &h[8..12],
            &h[13..16],
            &h[17..20],
            &h[20..32]
        )
    }

    /// Stores `object` at `key` with the next revision as its resourceVersion and records the
    /// event. Returns the stored object.
    pub fn put(&mut self, key: ObjKey, mut object: Value) -> Value {
        self.rv += 1;
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let stored = Arc::new(Stored::new(&object));
        let old = self.objects.insert(key.clone(), stored.clone());
        if let Some(old) = old.as_ref().filter(|o| o.may_name_owners()) {
            self.forget_owners(&key, &old.value());
        }
        for uid in owner_uids(&object) {
            self.dependents
                .entry(uid.to_string())
                .or_default()
                .insert(key.clone());
        }
        let kind = if old.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(kind, key, stored, old);
        object
    }

    /// Removes the object at `key`; its last state (with the deletion's revision) is returned.
    pub fn remove(&mut self, key: &ObjKey) -> Option<Value> {
        let mut object = self.objects.remove(key)?.value();
        self.forget_owners(key, &object);
        self.rv += 1;
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let stored = Arc::new(Stored::new(&object));
        self.record(EventType::Deleted, key.clone(), stored, None);
        Some(object)
    }

    /// Takes `key` out of the dependents of the owners `object` names.
    fn forget_owners(&mut self, key: &ObjKey, object: &Value) {
        for uid in owner_uids(object) {
            if let Some(keys) = self.dependents.get_mut(uid) {
                keys.remove(key);
                if keys.is_empty() {
                    self.dependents.remove(uid);
                }
            }
        }
    }

    fn record(
        &mut self,
        kind: EventType,
        key: ObjKey,
        object: Arc<Stored>,
        old: Option<Arc<Stored>>,
    ) {
        let event = Arc::new(Event {
            seq: NEXT_SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst),
            rv: self.rv,
            kind,
            key,
            object,
            old,
        });
        if self.log.len() >= self.log_capacity {
            self.log.pop_front();
        }
        self.log.push_back(event);
        self.written.send_replace(self.rv);
    }

    /// Keeps the last `capacity` events (at least one) from now on: each holds its object's
    /// versions, which a large fleet's members cannot all afford.
    pub fn keep_events(&mut self, capacity: usize) {
        self.log_capacity = capacity.max(1);
        while self.log.len() > self.log_capacity {
            self.log.pop_front();
        }
    }

    /// The logged changes, oldest first (at most [`LOG_CAPACITY`] or what
    /// [`Store::keep_events`] set).
    pub fn changes(&self) -> impl Iterator<Item = &Arc<Event>> {
        self.log.iter()
    }

    /// Starts following changes after revision `since`: the logged events after it and a
    /// receiver for the ones to come, with no gap and no overlap. `None` when `since` is older
    /// than the log (the caller reports 410 Expired).
    pub fn follow(&self, since: u64) -> Option<Following> {
        let replay = self.after(since)?;
        let seen = replay.last().map_or(since, |e| e.rv);
        Some((replay, self.changes_after(seen)))
    }

    /// A follower of the changes from now on.
    pub fn subscribe(&self) -> Changes {
        self.changes_after(self.rv)
    }

    fn changes_after(&self, seen: u64) -> Changes {
        Changes {
            seen,
            written: self.written.subscribe(),
        }
    }

    /// The logged events after revision `since`, oldest first; `None` when the log no longer
    /// holds all of them.
    fn after(&self, since: u64) -> Option<Vec<Arc<Event>>> {
        if self.log.front().is_some_and(|oldest| since + 1 < oldest.rv) {
            return None;
        }
        let first = self.log.partition_point(|e| e.rv <= since);
        Some(self.log.range(first..).cloned().collect())
    }
}

/// The uids an object's `ownerReferences` name.
fn owner_uids(object: &Value) -> impl Iterator<Item = &str> {
    object["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uid"].as_str())
}

/// One follower's place in a store's changes: the revision it has seen.
pub struct Changes {
    seen: u64,
    written: watch::Receiver<u64>,
}

/// Why [`Changes::next`] has no more events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missed {
    /// The log dropped events this follower had not read.
    Expired,
    /// The store is gone.
    Closed,
}

impl Changes {
    /// Waits for changes after those seen and returns them, oldest first. Cancel-safe: nothing
    /// is marked seen until it is returned.
    pub async fn next(&mut self, store: &Mutex<Store>) -> Result<Vec<Arc<Event>>, Missed> {
        loop {
            // Marked before the log is read: a write after the read wakes the wait below.
            self.written.borrow_and_update();
            let events = store
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .after(self.seen)
                .ok_or(Missed::Expired)?;
            if let Some(last) = events.last() {
                self.seen = last.rv;
                return Ok(events);
            }
            self.written.changed().await.map_err(|_| Missed::Closed)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "d"}})
    }

    #[test]
    fn every_write_advances_the_revision() {
        let mut s = Store::new("t");
        let k = ObjKey::new("", "configmaps", "d", "a");
        let a = s.put(k.clone(), cm("a"));
        let b = s.put(k.clone(), cm("a"));
        let rv = |v: &Value| {
            v["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        };
        assert!(rv(&b) > rv(&a));
        let gone = s.remove(&k).unwrap();
        assert!(rv(&gone) > rv(&b));
        assert_eq!(s.revision(), rv(&gone));
        assert!(s.remove(&k).is_none());
    }

    #[test]
    fn an_owners_dependents_follow_every_write() {
        let mut s = Store::new("t");
        let owned_by = |name: &str, uids: &[&str]| {
            let mut o = cm(name);
            o["metadata"]["ownerReferences"] = uids
                .iter()
                .map(|u| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": u}))
                .collect();
            o
        };
        let (a, b) = (
            ObjKey::new("", "configmaps", "d", "a"),
            ObjKey::new("", "configmaps", "d", "b"),
        );
        s.put(b.clone(), owned_by("b", &["u1"]));
        s.put(a.clone(), owned_by("a", &["u1", "u2"]));
        assert_eq!(s.dependents_of("u1"), [a.clone(), b.clone()]);
        assert_eq!(s.dependents_of("u2"), std::slice::from_ref(&a));
        // A replaced object is a dependent of the owners it names now, and only those.
        s.put(a.clone(), owned_by("a", &["u2"]));
        assert_eq!(s.dependents_of("u1"), std::slice::from_ref(&b));
        s.put(b.clone(), cm("b"));
        assert!(s.dependents_of("u1").is_empty());
        s.remove(&a);
        assert!(s.dependents_of("u2").is_empty());
        assert!(s.dependents.is_empty());
    }

    #[test]
    fn list_stays_within_resource_and_namespace() {
        let mut s = Store::new("t");
        s.put(ObjKey::new("", "configmaps", "a", "x"), cm("x"));
        s.put(ObjKey::new("", "configmaps", "b", "y"), cm("y"));
        s.put(ObjKey::new("", "secrets", "a", "z"), cm("z"));
        assert_eq!(s.list("", "configmaps", None).count(), 2);
        assert_eq!(s.list("", "configmaps", Some("b")).count(), 1);
        assert_eq!(s.list("", "secrets", Some("b")).count(), 0);
    }

    #[tokio::test]
    async fn follow_replays_after_a_revision_then_streams() {
        let s = Mutex::new(Store::new("t"));
        let first = s
            .lock()
            .unwrap()
            .put(ObjKey::new("", "configmaps", "d", "a"), cm("a"));
        let rv: u64 = first["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        s.lock()
            .unwrap()
            .put(ObjKey::new("", "configmaps", "d", "b"), cm("b"));
        let (replay, mut changes) = s.lock().unwrap().follow(rv).unwrap();
        assert_eq!(replay.len(), 1);
        assert_eq!(replay[0].key.name, "b");
        s.lock()
            .unwrap()
            .remove(&ObjKey::new("", "configmaps", "d", "a"));
        s.lock()
            .unwrap()
            .put(ObjKey::new("", "configmaps", "d", "c"), cm("c"));
        let events = changes.next(&s).await.unwrap();
        let seen: Vec<_> = events
            .iter()
            .map(|e| (e.kind, e.key.name.as_str()))
            .collect();
        assert_eq!(
            seen,
            [(EventType::Deleted, "a"), (EventType::Added, "c")],
            "every change after the replay, once, in order"
        );
        assert_eq!(events[0].rv, replay[0].rv + 1, "no gap after the replay");
    }

    /// A follower that does not read while the log turns over is told it missed events, as a
    /// watch resuming from a revision the server no longer holds is.
    #[tokio::test]
    async fn a_follower_left_behind_by_the_log_is_told() {
        let s = Mutex::new(Store::new("t"));
        let mut changes = s.lock().unwrap().subscribe();
        let key = ObjKey::new("", "configmaps", "d", "a");
        s.lock().unwrap().put(key.clone(), cm("a"));
        assert_eq!(changes.next(&s).await.unwrap().len(), 1);
        for _ in 0..LOG_CAPACITY {
            s.lock().unwrap().put(key.clone(), cm("a"));
        }
        assert_eq!(
            changes.next(&s).await.unwrap().len(),
            LOG_CAPACITY,
            "a whole log behind is still in time"
        );
        for _ in 0..=LOG_CAPACITY {
            s.lock().unwrap().put(key.clone(), cm("a"));
        }
        assert_eq!(changes.next(&s).await.unwrap_err(), Missed::Expired);
    }

    /// A smaller log keeps the newest changes only, and a follower further behind is told.
    #[tokio::test]
    async fn a_log_kept_short_forgets_the_oldest_changes() {
        let s = Mutex::new(Store::new("t"));
        let key = ObjKey::new("", "configmaps", "d", "a");
        for _ in 0..5 {
            s.lock().unwrap().put(key.clone(), cm("a"));
        }
        s.lock().unwrap().keep_events(3);
        let rvs: Vec<u64> = s.lock().unwrap().changes().map(|e| e.rv).collect();
        assert_eq!(rvs.len(), 3, "trimmed at once");
        let mut changes = s.lock().unwrap().subscribe();
        for _ in 0..3 {
            s.lock().unwrap().put(key.clone(), cm("a"));
        }
        assert_eq!(changes.next(&s).await.unwrap().len(), 3);
        assert_eq!(
            s.lock().unwrap().changes().count(),
            3,
            "bounded from then on"
        );
        for _ in 0..4 {
            s.lock().unwrap().put(key.clone(), cm("a"));
        }
        assert_eq!(changes.next(&s).await.unwrap_err(), Missed::Expired);
    }

    #[test]
    fn labels_are_read_as_the_whole_object_has_them() {
        let mut s = Store::new("t");
        let key = ObjKey::new("", "configmaps", "d", "a");
        let mut labelled = cm("a");
        labelled["metadata"]["labels"] = json!({"app": "web", "tier": "front"});
        labelled["data"] = json!({"labels": "not these"});
        s.put(key.clone(), labelled);
        let stored = &s.objects[&key];
        assert_eq!(stored.labels(), stored.value()["metadata"]["labels"]);
        s.put(key.clone(), cm("a"));
        assert_eq!(s.objects[&key].labels(), Value::Null, "none");
    }

    #[test]
    fn uids_are_unique_and_uuid_shaped() {
        let mut s = Store::new("t");
        let (a, b) = (s.new_uid(), s.new_uid());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(a.matches('-').count(), 4);
    }
}
