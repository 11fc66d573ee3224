//! The Kubernetes backend (`--state kubernetes`): the state in ConfigMaps of one namespace of
//! the hosting cluster, laid out by [`super::layout`].
//!
//! The leader reads everything once when it takes over ([`KubeStore::open`]), claims the state
//! by writing the head object, and from then on is the only writer: loads are answered from
//! what it read and wrote, and every write carries the resourceVersion it last saw. A write
//! the API server answers with 409 Conflict (or an object gone, or one created meanwhile)
//! means another replica wrote since: [`StateError::Fenced`], and the daemon stops acting.
//!
//! A save writes the head first (so that a deposed leader's save stops at its first write
//! once a successor has claimed the state), then the placements whose documents changed,
//! then deletes the objects of placements that are gone. Each placement's document is
//! replaced whole (one object, or parts and then their base), so it is never half-written; a
//! crash between objects leaves some placements one step ahead of the head, and the next step
//! re-applies what they decided (pushes are idempotent), as a crash between `schedule.json`
//! and `daemon.json` does in a directory.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;

use super::layout::{self, Object};
use super::{StateBackend, StateError};
use crate::rollout::RolloutState;
use crate::schedule::{PlacementSchedule, Previous};

/// What the API server answered to a write or read, as the store needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiFailure {
    /// 409: a resourceVersion precondition failed.
    Conflict,
    NotFound,
    AlreadyExists,
    Other(String),
}

/// An object as read, with its resourceVersion.
#[derive(Debug, Clone)]
pub struct Stored {
    pub object: Object,
    pub resource_version: String,
}

/// The hosting cluster's ConfigMaps of one namespace, as the store uses them. A trait so that
/// the store's fencing is tested on a model of the API server's preconditions as well as on a
/// real one.
pub trait Objects: Send + Sync + std::fmt::Debug {
    /// The objects with label `gitfleet.io/state=<prefix>`.
    fn list(&self, prefix: &str) -> Result<Vec<Stored>, ApiFailure>;
    /// Creates `object`; its resourceVersion.
    fn create(&self, object: &Object) -> Result<String, ApiFailure>;
    /// Replaces `object` if its resourceVersion is still `rv`; the new one.
    fn replace(&self, object: &Object, rv: &str) -> Result<String, ApiFailure>;
    /// Deletes `name` if its resourceVersion is still `rv`.
    fn delete(&self, name: &str, rv: &str) -> Result<(), ApiFailure>;
    /// `configmaps NAMESPACE/`, for messages.
    fn describe(&self) -> String;
}

/// What the store last read or wrote of an object.
#[derive(Debug, Clone)]
struct Known {
    rv: String,
    /// Parts a split base object lists.
    parts: Vec<(String, String)>,
    generation: u64,
}

#[derive(Debug)]
struct Cache {
    /// By object name: head and placement base objects.
    known: BTreeMap<String, Known>,
    /// The head and the placements' documents as last read or written: the state this
    /// replica owns. A save writes the placements whose document differs (compared as
    /// values: encoding every placement at every step would cost as much as writing it).
    head: layout::HeadDoc,
    docs: BTreeMap<String, layout::PlacementDoc>,
    had_rollout: bool,
    claims: u64,
    /// Objects written so far (creates, replaces and deletes), for the scale notes.
    writes: u64,
    written_bytes: u64,
}

/// State in the hosting cluster.
#[derive(Debug)]
pub struct KubeStore<O: Objects> {
    objects: O,
    prefix: String,
    identity: String,
    cache: Mutex<Cache>,
}

/// What [`KubeStore::open`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    pub objects: usize,
    pub bytes: usize,
    /// Who claimed the state before (empty: nobody yet).
    pub previous_leader: String,
}

impl<O: Objects> KubeStore<O> {
    /// Reads the state `prefix` and claims it for `identity` (the head object is written with
    /// the new leader's name before anything else happens). Parts no base object lists (a
    /// write cut short) are deleted.
    pub fn open(objects: O, prefix: &str, identity: &str) -> Result<(Self, Loaded), StateError> {
        let kube = |e: ApiFailure| StateError::Kube {
            object: format!("{}{prefix}-*", objects.describe()),
            message: format!("cannot list: {e:?}"),
        };
        let listed = objects.list(prefix).map_err(kube)?;
        let bytes: usize = listed.iter().map(|s| s.object.content_bytes()).sum();
        let by_name: BTreeMap<&str, &Stored> =
            listed.iter().map(|s| (s.object.name.as_str(), s)).collect();
        let corrupt = |name: &str, message: String| StateError::CorruptObject {
            object: format!("{}{name}", objects.describe()),
            message,
        };
        let part = |n: &str| by_name.get(n).map(|s| &s.object);
        let mut known = BTreeMap::new();
        let mut read = |s: &Stored| -> Result<Vec<u8>, StateError> {
            let doc =
                layout::document_bytes(&s.object, part).map_err(|m| corrupt(&s.object.name, m))?;
            let parts = layout::parts_of(&s.object)
                .into_iter()
                .map(|p| {
                    let rv = by_name[p.as_str()].resource_version.clone();
                    (p, rv)
                })
                .collect();
            known.insert(
                s.object.name.clone(),
                Known {
                    rv: s.resource_version.clone(),
                    parts,
                    generation: layout::generation_of(&s.object),
                },
            );
            Ok(doc)
        };
        let head_name = layout::head_name(prefix);
        let head = match by_name.get(head_name.as_str()) {
            Some(s) => Some(
                layout::decode::<layout::HeadDoc>(&read(s)?).map_err(|m| corrupt(&head_name, m))?,
            ),
            None => None,
        };
        let mut placements = BTreeMap::new();
        for s in &listed {
            if s.object
                .labels
                .get(layout::LABEL_OBJECT)
                .map(String::as_str)
                != Some("placement")
            {
                continue;
            }
            let doc: layout::PlacementDoc =
                layout::decode(&read(s)?).map_err(|m| corrupt(&s.object.name, m))?;
            if layout::placement_name(prefix, &doc.id) != s.object.name {
                return Err(corrupt(
                    &s.object.name,
                    format!(
                        "it holds placement {}, which another object's name is for",
                        doc.id
                    ),
                ));
            }
            placements.insert(s.object.name.clone(), doc);
        }
        let orphans: Vec<(String, String)> = listed
            .iter()
            .filter(|s| {
                s.object
                    .labels
                    .get(layout::LABEL_OBJECT)
                    .map(String::as_str)
                    == Some("part")
            })
            .filter(|s| {
                !known
                    .values()
                    .any(|k| k.parts.iter().any(|(p, _)| *p == s.object.name))
            })
            .map(|s| (s.object.name.clone(), s.resource_version.clone()))
            .collect();
        let had_rollout = head.is_some();
        let head = head.unwrap_or(layout::HeadDoc {
            version: super::FORMAT_VERSION,
            ..Default::default()
        });
        let previous_leader = head.leader.clone();
        let claims = head.claims;
        for (name, doc) in &placements {
            doc.id
                .parse::<crate::model::PlacementKey>()
                .map_err(|e| corrupt(name, format!("placement id {:?}: {e}", doc.id)))?;
        }
        let store = KubeStore {
            objects,
            prefix: prefix.to_string(),
            identity: identity.to_string(),
            cache: Mutex::new(Cache {
                known,
                head,
                docs: placements,
                had_rollout,
                claims,
                writes: 0,
                written_bytes: 0,
            }),
        };
        for (name, rv) in orphans {
            store.delete(&name, &rv)?;
        }
        store.claim()?;
        Ok((
            store,
            Loaded {
                objects: listed.len(),
                bytes,
                previous_leader,
            },
        ))
    }

    /// Writes the head with this replica as the leader (one more claim).
    fn claim(&self) -> Result<(), StateError> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.claims += 1;
        cache.head.leader = self.identity.clone();
        cache.head.claims = cache.claims;
        let bytes = layout::encode(&cache.head);
        self.write_document(
            &mut cache,
            &layout::head_name(&self.prefix),
            "head",
            None,
            bytes,
        )
    }

    /// Objects written (creates, replaces, deletes) and their content bytes since open.
    pub fn writes(&self) -> (u64, u64) {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        (cache.writes, cache.written_bytes)
    }

    fn fenced(&self, name: &str, rv: &str) -> StateError {
        StateError::Fenced {
            object: format!("{}{name}", self.objects.describe()),
            expected: rv.to_string(),
        }
    }

    fn failed(&self, name: &str, e: ApiFailure) -> StateError {
        StateError::Kube {
            object: format!("{}{name}", self.objects.describe()),
            message: format!("{e:?}"),
        }
    }

    fn delete(&self, name: &str, rv: &str) -> Result<(), StateError> {
        match self.objects.delete(name, rv) {
            Ok(()) => Ok(()),
            Err(ApiFailure::Conflict | ApiFailure::NotFound) => Err(self.fenced(name, rv)),
            Err(e) => Err(self.failed(name, e)),
        }
    }

    /// Creates or replaces (with its resourceVersion) one object.
    fn put(&self, known: Option<&str>, object: &Object) -> Result<String, StateError> {
        let result = match known {
            Some(rv) => self.objects.replace(object, rv),
            None => self.objects.create(object),
        };
        match result {
            Ok(rv) => Ok(rv),
            // Someone replaced, deleted or created it since this replica read the state.
            Err(ApiFailure::Conflict | ApiFailure::NotFound | ApiFailure::AlreadyExists) => {
                Err(self.fenced(&object.name, known.unwrap_or("(none: created meanwhile)")))
            }
            Err(e) => Err(self.failed(&object.name, e)),
        }
    }

    /// Writes one encoded document under `name`.
    fn write_document(
        &self,
        cache: &mut Cache,
        name: &str,
        kind: &str,
        placement: Option<&str>,
        bytes: Vec<u8>,
    ) -> Result<(), StateError> {
        let old = cache.known.get(name).cloned();
        let generation = old.as_ref().map_or(0, |k| k.generation) + 1;
        let objects = layout::objects(
            &self.prefix,
            name,
            kind,
            placement,
            bytes.clone(),
            generation,
        );
        let mut parts = Vec::new();
        for o in &objects {
            cache.writes += 1;
            cache.written_bytes += o.content_bytes() as u64;
            if o.name == name {
                let rv = self.put(old.as_ref().map(|k| k.rv.as_str()), o)?;
                cache.known.insert(
                    name.to_string(),
                    Known {
                        rv,
                        parts: parts.clone(),
                        generation,
                    },
                );
            } else {
                // Parts are new objects of a new generation.
                parts.push((o.name.clone(), self.put(None, o)?));
            }
        }
        // The base now lists the new parts: the old ones are garbage.
        for (part, rv) in old.map(|k| k.parts).unwrap_or_default() {
            cache.writes += 1;
            self.delete(&part, &rv)?;
        }
        Ok(())
    }
}

impl<O: Objects> StateBackend for KubeStore<O> {
    fn has_rollout(&self) -> Result<bool, StateError> {
        Ok(self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .had_rollout)
    }

    fn load_schedule(&self) -> Result<(Option<String>, Previous), StateError> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let mut previous = Previous::new();
        for doc in cache.docs.values() {
            if let Some(s) = &doc.schedule {
                previous.insert(s.key.clone(), s.clone());
            }
        }
        Ok((cache.head.schedule_commit.clone(), previous))
    }

    fn load_rollout(&self) -> Result<RolloutState, StateError> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let mut state = cache.head.rollout.clone();
        for doc in cache.docs.values() {
            if let Some(p) = &doc.rollout {
                let key = doc.id.parse().expect("checked at open");
                state.placements.insert(key, p.clone());
            }
        }
        state.share_equal_values();
        Ok(state)
    }

    fn save(
        &self,
        schedule: Option<(&str, &[Arc<PlacementSchedule>])>,
        state: &RolloutState,
    ) -> Result<(), StateError> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        // The head first, always: its write is the fence a successor's claim trips.
        let head = layout::HeadDoc {
            version: super::FORMAT_VERSION,
            leader: self.identity.clone(),
            claims: cache.claims,
            schedule_commit: match schedule {
                Some((commit, _)) => Some(commit.to_string()),
                None => cache.head.schedule_commit.clone(),
            },
            rollout: RolloutState {
                serving: state.serving.clone(),
                rejected: state.rejected.clone(),
                verified: state.verified.clone(),
                held: state.held.clone(),
                placements: BTreeMap::new(),
                members: state.members.clone(),
                runs: state.runs.clone(),
                ended_runs: state.ended_runs.clone(),
                evictions: state.evictions.clone(),
            },
        };
        let head_name = layout::head_name(&self.prefix);
        self.write_document(&mut cache, &head_name, "head", None, layout::encode(&head))?;
        cache.head = head;
        // Then each placement whose schedule or rollout state changed.
        let schedules: Option<BTreeMap<String, &Arc<PlacementSchedule>>> =
            schedule.map(|(_, s)| {
                s.iter()
                    .map(|p| (layout::placement_name(&self.prefix, &p.key.to_string()), p))
                    .collect()
            });
        let rollouts: BTreeMap<String, (String, &Arc<crate::rollout::PlacementState>)> = state
            .placements
            .iter()
            .map(|(k, p)| {
                let id = k.to_string();
                (layout::placement_name(&self.prefix, &id), (id, p))
            })
            .collect();
        let mut ids: BTreeMap<String, String> = rollouts
            .iter()
            .map(|(n, (id, _))| (n.clone(), id.clone()))
            .collect();
        match &schedules {
            Some(s) => ids.extend(s.iter().map(|(n, p)| (n.clone(), p.key.to_string()))),
            None => ids.extend(
                cache
                    .docs
                    .iter()
                    .filter(|(_, d)| d.schedule.is_some())
                    .map(|(n, d)| (n.clone(), d.id.clone())),
            ),
        }
        for (name, id) in &ids {
            let old = cache.docs.get(name);
            let new_schedule = match &schedules {
                Some(s) => s.get(name).copied(),
                None => old.and_then(|d| d.schedule.as_ref()),
            };
            let new_rollout = rollouts.get(name).map(|(_, p)| *p);
            let same_schedule = |d: &layout::PlacementDoc| match (&d.schedule, new_schedule) {
                (Some(a), Some(b)) => crate::schedule::same_schedule(a, b),
                (a, b) => a.is_none() && b.is_none(),
            };
            let same_rollout = |d: &layout::PlacementDoc| match (&d.rollout, new_rollout) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a.saved_alike(b),
                (a, b) => a.is_none() && b.is_none(),
            };
            if old.is_some_and(|d| same_schedule(d) && same_rollout(d)) {
                // Remember the state's own copy: an older one, kept here, would be a second
                // copy of the placement once the state has changed it in ways not saved.
                if let (Some(d), Some(p)) = (cache.docs.get_mut(name), rollouts.get(name)) {
                    d.rollout = Some(p.1.clone());
                }
                continue;
            }
            // Written without re-check marks, but remembered as the state itself: marks are
            // not compared, and a copy of every marked placement (a start's, a resync's) would
            // double the state while the marks last.
            let doc = layout::PlacementDoc {
                version: super::FORMAT_VERSION,
                id: id.clone(),
                schedule: new_schedule.cloned(),
                rollout: new_rollout.cloned(),
            };
            let bytes = match new_rollout.map(|p| p.persisted()) {
                Some(std::borrow::Cow::Owned(saved)) => layout::encode(&layout::PlacementDoc {
                    rollout: Some(Arc::new(saved)),
                    ..doc.clone()
                }),
                _ => layout::encode(&doc),
            };
            self.write_document(&mut cache, name, "placement", Some(id), bytes)?;
            cache.docs.insert(name.clone(), doc);
        }
        // Then the placements that are gone.
        let gone: Vec<(String, Known)> = cache
            .known
            .iter()
            .filter(|(n, _)| **n != head_name && !ids.contains_key(*n))
            .map(|(n, k)| (n.clone(), k.clone()))
            .collect();
        for (name, k) in gone {
            cache.writes += 1;
            self.delete(&name, &k.rv)?;
            for (part, rv) in &k.parts {
                cache.writes += 1;
                self.delete(part, rv)?;
            }
            cache.known.remove(&name);
            cache.docs.remove(&name);
        }
        cache.had_rollout = true;
        Ok(())
    }

    fn location(&self) -> String {
        format!("{}{}-*", self.objects.describe(), self.prefix)
    }
}

/// [`Objects`] on a real API server: `Api<ConfigMap>` of one namespace, called from the
/// blocking pool through the runtime's handle.
#[derive(Clone)]
pub struct ConfigMaps {
    api: kube::Api<k8s_openapi::api::core::v1::ConfigMap>,
    namespace: String,
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for ConfigMaps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConfigMaps({})", self.namespace)
    }
}

impl ConfigMaps {
    pub fn new(client: kube::Client, namespace: &str, runtime: tokio::runtime::Handle) -> Self {
        ConfigMaps {
            api: kube::Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            runtime,
        }
    }

    fn to_configmap(object: &Object, rv: Option<&str>) -> k8s_openapi::api::core::v1::ConfigMap {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        use k8s_openapi::ByteString;
        k8s_openapi::api::core::v1::ConfigMap {
            metadata: ObjectMeta {
                name: Some(object.name.clone()),
                labels: Some(object.labels.clone()),
                annotations: (!object.annotations.is_empty()).then(|| object.annotations.clone()),
                resource_version: rv.map(str::to_string),
                ..ObjectMeta::default()
            },
            data: (!object.data.is_empty()).then(|| object.data.clone()),
            binary_data: (!object.binary_data.is_empty()).then(|| {
                object
                    .binary_data
                    .iter()
                    .map(|(k, v)| (k.clone(), ByteString(v.clone())))
                    .collect()
            }),
            ..Default::default()
        }
    }

    fn from_configmap(cm: k8s_openapi::api::core::v1::ConfigMap) -> Stored {
        Stored {
            resource_version: cm.metadata.resource_version.clone().unwrap_or_default(),
            object: Object {
                name: cm.metadata.name.unwrap_or_default(),
                labels: cm.metadata.labels.unwrap_or_default(),
                annotations: cm.metadata.annotations.unwrap_or_default(),
                data: cm.data.unwrap_or_default(),
                binary_data: cm
                    .binary_data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect(),
            },
        }
    }
}

fn failure(e: kube::Error) -> ApiFailure {
    match &e {
        kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists" => {
            ApiFailure::AlreadyExists
        }
        kube::Error::Api(s) if s.code == 409 => ApiFailure::Conflict,
        kube::Error::Api(s) if s.code == 404 => ApiFailure::NotFound,
        _ => ApiFailure::Other(format!("{e}")),
    }
}

impl Objects for ConfigMaps {
    fn list(&self, prefix: &str) -> Result<Vec<Stored>, ApiFailure> {
        self.runtime.block_on(async {
            let mut out = Vec::new();
            let mut params = kube::api::ListParams::default()
                .labels(&format!("{}={prefix}", layout::LABEL_STATE))
                .limit(50);
            loop {
                let page = self.api.list(&params).await.map_err(failure)?;
                let next = page.metadata.continue_.clone().filter(|c| !c.is_empty());
                out.extend(page.items.into_iter().map(Self::from_configmap));
                match next {
                    Some(c) => params = params.continue_token(&c),
                    None => break,
                }
            }
            Ok(out)
        })
    }

    fn create(&self, object: &Object) -> Result<String, ApiFailure> {
        self.runtime.block_on(async {
            let cm = self
                .api
                .create(
                    &kube::api::PostParams::default(),
                    &Self::to_configmap(object, None),
                )
                .await
                .map_err(failure)?;
            Ok(cm.metadata.resource_version.unwrap_or_default())
        })
    }

    fn replace(&self, object: &Object, rv: &str) -> Result<String, ApiFailure> {
        self.runtime.block_on(async {
            let cm = self
                .api
                .replace(
                    &object.name,
                    &kube::api::PostParams::default(),
                    &Self::to_configmap(object, Some(rv)),
                )
                .await
                .map_err(failure)?;
            Ok(cm.metadata.resource_version.unwrap_or_default())
        })
    }

    fn delete(&self, name: &str, rv: &str) -> Result<(), ApiFailure> {
        self.runtime.block_on(async {
            let params = kube::api::DeleteParams {
                preconditions: Some(kube::api::Preconditions {
                    resource_version: Some(rv.to_string()),
                    uid: None,
                }),
                ..Default::default()
            };
            self.api.delete(name, &params).await.map_err(failure)?;
            Ok(())
        })
    }

    fn describe(&self) -> String {
        format!("configmaps {}/", self.namespace)
    }
}

/// A model of the API server's ConfigMaps for tests: resourceVersions and their
/// preconditions as the API server checks them (a replace or delete with a stale one is a
/// 409 Conflict; a create of an existing name is AlreadyExists).
#[derive(Debug, Default, Clone)]
pub struct MemoryObjects {
    inner: std::sync::Arc<Mutex<(u64, BTreeMap<String, Stored>)>>,
}

impl MemoryObjects {
    /// Every object, by name.
    pub fn all(&self) -> BTreeMap<String, Stored> {
        self.inner.lock().unwrap().1.clone()
    }

    /// Replaces an object behind the store's back (another writer).
    pub fn tamper(&self, name: &str) {
        let mut inner = self.inner.lock().unwrap();
        inner.0 += 1;
        let rv = inner.0.to_string();
        if let Some(s) = inner.1.get_mut(name) {
            s.resource_version = rv;
        }
    }
}

impl Objects for MemoryObjects {
    fn list(&self, prefix: &str) -> Result<Vec<Stored>, ApiFailure> {
        let inner = self.inner.lock().unwrap();
        Ok(inner
            .1
            .values()
            .filter(|s| {
                s.object.labels.get(layout::LABEL_STATE).map(String::as_str) == Some(prefix)
            })
            .cloned()
            .collect())
    }

    fn create(&self, object: &Object) -> Result<String, ApiFailure> {
        let mut inner = self.inner.lock().unwrap();
        if inner.1.contains_key(&object.name) {
            return Err(ApiFailure::AlreadyExists);
        }
        inner.0 += 1;
        let rv = inner.0.to_string();
        inner.1.insert(
            object.name.clone(),
            Stored {
                object: object.clone(),
                resource_version: rv.clone(),
            },
        );
        Ok(rv)
    }

    fn replace(&self, object: &Object, rv: &str) -> Result<String, ApiFailure> {
        let mut inner = self.inner.lock().unwrap();
        match inner.1.get(&object.name) {
            None => return Err(ApiFailure::NotFound),
            Some(s) if s.resource_version != rv => return Err(ApiFailure::Conflict),
            Some(_) => {}
        }
        inner.0 += 1;
        let new = inner.0.to_string();
        inner.1.insert(
            object.name.clone(),
            Stored {
                object: object.clone(),
                resource_version: new.clone(),
            },
        );
        Ok(new)
    }

    fn delete(&self, name: &str, rv: &str) -> Result<(), ApiFailure> {
        let mut inner = self.inner.lock().unwrap();
        match inner.1.get(name) {
            None => Err(ApiFailure::NotFound),
            Some(s) if s.resource_version != rv => Err(ApiFailure::Conflict),
            Some(_) => {
                inner.1.remove(name);
                Ok(())
            }
        }
    }

    fn describe(&self) -> String {
        "configmaps memory/".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(placements: &[&str], serving: &str) -> RolloutState {
        let mut s = RolloutState {
            serving: Some(serving.into()),
            ..RolloutState::default()
        };
        for p in placements {
            let mut ps = crate::rollout::PlacementState::default();
            ps.clusters.insert(
                "m1".into(),
                crate::rollout::ClusterState::with_health(crate::rollout::BindingHealth::Available),
            );
            s.placements
                .insert(p.parse().unwrap(), std::sync::Arc::new(ps));
        }
        s
    }

    #[test]
    fn state_round_trips_through_objects_and_only_changed_placements_are_written() {
        let api = MemoryObjects::default();
        let (store, loaded) = KubeStore::open(api.clone(), "gf", "a").unwrap();
        assert_eq!(loaded.previous_leader, "");
        assert!(!store.has_rollout().unwrap());
        let s1 = state(&["crp/one", "crp/two"], "c1");
        store.save(None, &s1).unwrap();
        let (w0, _) = store.writes();
        // The head (always: it is the fence) and nothing else.
        store.save(None, &s1).unwrap();
        assert_eq!(store.writes().0 - w0, 1);
        // Re-check marks are not saved: marking every cluster writes only the head again.
        let mut marked = s1.clone();
        marked.recheck_all("the daemon started");
        store.save(None, &marked).unwrap();
        assert_eq!(store.writes().0 - w0, 2);
        let mut s2 = s1.clone();
        s2.placements.remove(&"crp/two".parse().unwrap());
        std::sync::Arc::make_mut(s2.placements.get_mut(&"crp/one".parse().unwrap()).unwrap())
            .abandon = true;
        store.save(None, &s2).unwrap();
        assert_eq!(
            api.all().len(),
            2,
            "head and crp/one: crp/two's object is deleted"
        );
        drop(store);
        let (again, loaded) = KubeStore::open(api.clone(), "gf", "b").unwrap();
        assert_eq!(loaded.previous_leader, "a");
        assert!(again.has_rollout().unwrap());
        assert_eq!(again.load_rollout().unwrap(), s2);
    }

    /// What a store remembers of its last save is the state's own placements, not a copy of
    /// each, marked or not; what it writes leaves the marks out.
    #[test]
    fn the_last_save_shares_the_states_placements() {
        let api = MemoryObjects::default();
        let (store, _) = KubeStore::open(api.clone(), "gf", "a").unwrap();
        let saved = |store: &KubeStore<MemoryObjects>| {
            let cache = store.cache.lock().unwrap();
            let doc = &cache.docs[&layout::placement_name("gf", "crp/one")];
            doc.rollout.clone().unwrap()
        };
        let key: crate::model::PlacementKey = "crp/one".parse().unwrap();
        let s = state(&["crp/one"], "c1");
        store.save(None, &s).unwrap();
        assert!(Arc::ptr_eq(&saved(&store), &s.placements[&key]));
        let mut marked = state(&["crp/one"], "c2");
        marked.recheck_all("the daemon started");
        Arc::make_mut(marked.placements.get_mut(&key).unwrap()).abandon = true;
        store.save(None, &marked).unwrap();
        assert!(Arc::ptr_eq(&saved(&store), &marked.placements[&key]));
        // A copy the state made, saved alike (only its marks differ), is remembered too, and
        // the older copy let go.
        let mut cleared = marked.clone();
        for c in Arc::make_mut(cleared.placements.get_mut(&key).unwrap())
            .clusters
            .values_mut()
        {
            c.recheck = None;
        }
        let writes = store.writes().0;
        store.save(None, &cleared).unwrap();
        assert_eq!(store.writes().0 - writes, 1, "the head only");
        assert!(Arc::ptr_eq(&saved(&store), &cleared.placements[&key]));
        drop(store);
        let (again, _) = KubeStore::open(api, "gf", "b").unwrap();
        let written = again.load_rollout().unwrap();
        assert!(
            written.placements[&key].abandon,
            "the marked save was written"
        );
        assert!(written.placements[&key]
            .clusters
            .values()
            .all(|c| c.recheck.is_none()));
    }

    /// Fencing: once a new leader has claimed the state, the old one's next write is refused
    /// (its resourceVersion is stale) and says it is no longer the leader.
    #[test]
    fn a_deposed_leaders_late_write_is_refused() {
        let api = MemoryObjects::default();
        let (old, _) = KubeStore::open(api.clone(), "gf", "old").unwrap();
        old.save(None, &state(&["crp/one"], "c1")).unwrap();
        let (new, _) = KubeStore::open(api.clone(), "gf", "new").unwrap();
        let e = old.save(None, &state(&["crp/one"], "c2")).unwrap_err();
        assert!(matches!(e, StateError::Fenced { .. }), "{e}");
        assert!(e.to_string().contains("no longer the leader"), "{e}");
        // The new leader's view is what it read, and it goes on writing.
        assert_eq!(new.load_rollout().unwrap().serving.as_deref(), Some("c1"));
        new.save(None, &state(&["crp/one"], "c3")).unwrap();
        // A placement object written behind the leader's back fences it too.
        let name = layout::placement_name("gf", "crp/one");
        api.tamper(&name);
        let mut s = state(&["crp/one"], "c3");
        std::sync::Arc::make_mut(s.placements.get_mut(&"crp/one".parse().unwrap()).unwrap())
            .abandon = true;
        let e = new.save(None, &s).unwrap_err();
        assert!(
            matches!(e, StateError::Fenced { ref object, .. } if object.contains(&name)),
            "{e}"
        );
    }

    #[test]
    fn a_corrupt_object_is_refused_at_open_naming_it() {
        let api = MemoryObjects::default();
        let (store, _) = KubeStore::open(api.clone(), "gf", "a").unwrap();
        store.save(None, &state(&["crp/one"], "c1")).unwrap();
        let name = layout::placement_name("gf", "crp/one");
        let mut o = api.all()[&name].object.clone();
        o.binary_data
            .insert(layout::DATA_KEY.into(), b"garbage".to_vec());
        let rv = api.all()[&name].resource_version.clone();
        api.replace(&o, &rv).unwrap();
        let e = KubeStore::open(api.clone(), "gf", "b")
            .unwrap_err()
            .to_string();
        assert!(e.contains(&name) && e.contains("not gitfleet state"), "{e}");
    }
}
