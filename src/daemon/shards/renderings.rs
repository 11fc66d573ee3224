//! Renderings in the hosting cluster: the leader stores each distinct rendering once
//! ([`Published`]), however many members' orders name it, and owners fetch each once
//! ([`Fetched`]). Most of a placement's clusters share one rendering, so a step over a thousand
//! members stores a few objects per placement, not one per binding.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;

use super::orders::{self, PayloadError, RenderingId, RENDERING_LABEL};
use super::Names;
use crate::rollout::Manifests;

/// Past this many, a cache starts again: what it held is worked out or fetched again.
const CACHE_LIMIT: usize = 20_000;
/// A stored rendering no order named for this long is deleted.
const UNUSED_FOR: Duration = Duration::from_secs(30 * 60);

/// The leader's renderings: each stored once, and remembered by the manifests' address (the
/// step shares one `Arc` among the clusters that render alike), so that it is serialized once.
pub struct Published {
    api: Api<Secret>,
    names: Names,
    /// By the address of the manifests, which are kept so that the address is not reused.
    ids: Mutex<HashMap<usize, (Manifests, RenderingId)>>,
    stored: Mutex<HashMap<RenderingId, Stored>>,
}

/// A rendering stored (or being stored), with when an order last named it.
struct Stored {
    written: Arc<tokio::sync::OnceCell<()>>,
    used: Instant,
}

impl Published {
    pub fn new(api: Api<Secret>, names: Names) -> Published {
        Published {
            api,
            names,
            ids: Mutex::default(),
            stored: Mutex::default(),
        }
    }

    /// The id of `manifests`, stored in the hosting cluster before this returns.
    pub async fn store(&self, manifests: &Manifests) -> Result<RenderingId, kube::Error> {
        let address = Arc::as_ptr(manifests) as usize;
        let known = self
            .ids
            .lock()
            .unwrap()
            .get(&address)
            .map(|(_, id)| id.clone());
        let (id, secrets) = match known {
            Some(id) => (id, None),
            None => {
                let (id, secrets) = orders::rendering_objects(&self.names, manifests);
                let mut ids = self.ids.lock().unwrap();
                if ids.len() >= CACHE_LIMIT {
                    ids.clear();
                }
                ids.insert(address, (manifests.clone(), id.clone()));
                (id, Some(secrets))
            }
        };
        let cell = {
            let mut stored = self.stored.lock().unwrap();
            let entry = stored.entry(id.clone()).or_insert_with(|| Stored {
                written: Arc::default(),
                used: Instant::now(),
            });
            entry.used = Instant::now();
            entry.written.clone()
        };
        cell.get_or_try_init(|| async {
            let secrets = match secrets {
                Some(s) => s,
                None => orders::rendering_objects(&self.names, manifests).1,
            };
            for secret in &secrets {
                match self.api.create(&PostParams::default(), secret).await {
                    Ok(_) => {}
                    // Stored before (by this leader or an earlier one): the same content.
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        })
        .await?;
        Ok(id)
    }

    /// Deletes the stored renderings that no order named for a while (and those of earlier
    /// leaders this one has not named).
    pub async fn collect_garbage(&self) -> Result<usize, kube::Error> {
        let listed = self
            .api
            .list_metadata(
                &ListParams::default().labels(&format!("{RENDERING_LABEL}={}", self.names.prefix)),
            )
            .await?;
        let now = Instant::now();
        let unused: Vec<String> = {
            let mut stored = self.stored.lock().unwrap();
            stored.retain(|_, s| now.duration_since(s.used) < UNUSED_FOR);
            let kept: std::collections::HashSet<String> = stored
                .keys()
                .map(|id| self.names.rendering_stem(id))
                .collect();
            listed
                .items
                .iter()
                .filter_map(|o| o.metadata.name.clone())
                .filter(|name| {
                    let stem = name.rsplit_once('-').map_or(name.as_str(), |(s, _)| s);
                    !kept.contains(stem)
                })
                .collect()
        };
        for name in &unused {
            let _ = self.api.delete(name, &DeleteParams::default()).await;
        }
        self.ids.lock().unwrap().clear();
        Ok(unused.len())
    }
}

/// An owner's renderings, fetched once each.
pub struct Fetched {
    api: Api<Secret>,
    names: Names,
    cache: Mutex<HashMap<RenderingId, Manifests>>,
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("cannot read rendering {id:?} from the hosting cluster: {source}")]
    Api {
        id: RenderingId,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Payload(#[from] PayloadError),
}

impl Fetched {
    pub fn new(api: Api<Secret>, names: Names) -> Fetched {
        Fetched {
            api,
            names,
            cache: Mutex::default(),
        }
    }

    pub async fn get(&self, id: &RenderingId) -> Result<Manifests, FetchError> {
        if let Some(m) = self.cache.lock().unwrap().get(id) {
            return Ok(m.clone());
        }
        let fail = |source| FetchError::Api {
            id: id.clone(),
            source,
        };
        let first = self
            .api
            .get(&self.names.rendering(id, 0))
            .await
            .map_err(fail)?;
        let mut parts = vec![first];
        for i in 1..orders::rendering_parts(&parts[0]) {
            parts.push(
                self.api
                    .get(&self.names.rendering(id, i))
                    .await
                    .map_err(fail)?,
            );
        }
        let manifests: Manifests = Arc::new(orders::read_rendering(id, &parts)?);
        let mut cache = self.cache.lock().unwrap();
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(id.clone(), manifests.clone());
        Ok(manifests)
    }
}
