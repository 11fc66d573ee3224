//! What the leader asks a shard's owner to do and what the owner answers, as objects in the
//! hosting cluster: an [`Order`] (one member's work of one step, its manifests named by the
//! renderings they come from), a [`Report`] (an order's outcomes, or changes the owner's watches
//! saw) and the renderings themselves, stored once however many members receive them. Pure: the
//! objects are built and read here, written and watched by [`super::remote`] and
//! [`super::executor`].

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use serde::{Deserialize, Serialize};

use super::claims::ClaimToken;
use super::{Names, ShardId};
use crate::model::PlacementKey;
use crate::render::Manifest;
use crate::rollout::rolling::Revision;
use crate::rollout::staged::RunDelivery;
use crate::rollout::strategy::ApplyStrategy;
use crate::rollout::{Action, Manifests, Outcome, Work};

/// Marks the orders of a group of replicas (its value: the `--lease-name`).
pub const ORDER_LABEL: &str = "gitfleet.io/order-of";
/// Marks the reports of a group of replicas.
pub const REPORT_LABEL: &str = "gitfleet.io/report-of";
/// Marks the renderings of a group of replicas.
pub const RENDERING_LABEL: &str = "gitfleet.io/rendering-of";
/// The shard an order is for.
pub const SHARD_LABEL: &str = "gitfleet.io/shard";

/// Where an object keeps its payload: gzipped JSON, so that a member's work of a thousand
/// placements stays far below the API server's object size limit.
const PAYLOAD: &str = "payload.json.gz";
/// A rendering's bytes per Secret: well below the 1 MiB an object may hold.
const PART_BYTES: usize = 512 * 1024;

/// An order, by its object's name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OrderName(pub String);

impl std::fmt::Display for OrderName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A rendering, by the digest of its manifests as stored: what an owner fetches is checked
/// against it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RenderingId(String);

/// What the leader asks of a shard's owner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Order {
    Deliver(MemberWork),
    Probe(ProbeMembers),
    Check(CheckMembers),
}

/// The members of a shard its owner took over from another, to compare with what gitfleet
/// applied there (the records on each member) and to watch from then on: a change made while no
/// replica watched them is reported as the watch would have reported it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckMembers {
    pub members: Vec<CheckedMember>,
}

/// A member to check, and the kubeconfig context that reaches it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckedMember {
    pub name: String,
    pub context: String,
}

/// Some members of one shard, to probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeMembers {
    pub members: Vec<ProbedMember>,
}

/// A member to probe, as [`crate::members::inventory::Member`] says (but how often).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbedMember {
    pub name: String,
    pub context: String,
    pub declared: BTreeMap<String, String>,
}

impl ProbedMember {
    pub fn of(m: &crate::members::inventory::Member) -> ProbedMember {
        ProbedMember {
            name: m.target.name.clone(),
            context: m.target.context.clone(),
            declared: m.declared.clone(),
        }
    }

    pub fn into_member(self) -> crate::members::inventory::Member {
        crate::members::inventory::Member {
            target: crate::members::MemberTarget {
                name: self.name,
                context: self.context,
            },
            declared: self.declared,
            heartbeat: std::time::Duration::ZERO,
        }
    }
}

/// One member's work of one step, for the owner of the member's shard to deliver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberWork {
    pub member: String,
    /// The member's kubeconfig context (empty: the leader knows none).
    pub context: String,
    pub commit: String,
    pub works: Vec<OrderedWork>,
}

/// A [`Work`] with its manifests named by their rendering.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrderedWork {
    pub placement: PlacementKey,
    pub cluster: String,
    pub action: OrderedAction,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum OrderedAction {
    Apply(Box<OrderedApply>),
    Remove { strategy: ApplyStrategy },
}

/// [`Action::Apply`], its manifests named by their rendering.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrderedApply {
    pub rendering: RenderingId,
    pub revision: Revision,
    pub binds: bool,
    pub refresh: bool,
    pub strategy: ApplyStrategy,
    pub resource_snapshot: crate::model::SharedText,
    pub delivered_by: Option<Arc<RunDelivery>>,
}

impl OrderedWork {
    /// `work` as ordered: the manifests it applies (if any) stored by `store`, which names
    /// them.
    pub async fn of<E>(
        work: &Work,
        store: impl AsyncFnOnce(&Manifests) -> Result<RenderingId, E>,
    ) -> Result<OrderedWork, E> {
        let action = match &work.action {
            Action::Apply {
                manifests,
                revision,
                binds,
                refresh,
                strategy,
                resource_snapshot,
                delivered_by,
            } => OrderedAction::Apply(Box::new(OrderedApply {
                rendering: store(manifests).await?,
                revision: revision.clone(),
                binds: *binds,
                refresh: *refresh,
                strategy: *strategy,
                resource_snapshot: resource_snapshot.clone(),
                delivered_by: delivered_by.clone(),
            })),
            Action::Remove { strategy } => OrderedAction::Remove {
                strategy: *strategy,
            },
        };
        Ok(OrderedWork {
            placement: work.placement.clone(),
            cluster: work.cluster.clone(),
            action,
        })
    }

    /// The work again, with the manifests of its rendering as `fetch` reads them.
    pub async fn into_work<E>(
        self,
        fetch: impl AsyncFnOnce(&RenderingId) -> Result<Manifests, E>,
    ) -> Result<Work, E> {
        let action = match self.action {
            OrderedAction::Apply(apply) => {
                let OrderedApply {
                    rendering,
                    revision,
                    binds,
                    refresh,
                    strategy,
                    resource_snapshot,
                    delivered_by,
                } = *apply;
                Action::Apply {
                    manifests: fetch(&rendering).await?,
                    revision,
                    binds,
                    refresh,
                    strategy,
                    resource_snapshot,
                    delivered_by,
                }
            }
            OrderedAction::Remove { strategy } => Action::Remove { strategy },
        };
        Ok(Work {
            placement: self.placement,
            cluster: self.cluster,
            action,
        })
    }
}

/// What an owner tells the leader, under the claim it acts by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub shard: ShardId,
    pub token: ClaimToken,
    pub body: ReportBody,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ReportBody {
    /// An order delivered: one outcome per ordered work, in the order's order, and the members
    /// it could not reach at all.
    Delivered {
        order: OrderName,
        outcomes: Vec<Outcome>,
        unreachable: BTreeMap<String, String>,
    },
    /// A probe order's answers: every member's inventory (an unhealthy one for a member that
    /// did not answer), or why the owner could not probe at all.
    Probed {
        order: OrderName,
        inventory: Result<crate::schedule::Inventory, String>,
    },
    /// A check order's findings: what changed on the members while no replica watched them,
    /// and each member that could not be checked (as anything that may have changed).
    Checked {
        order: OrderName,
        changes: Vec<super::super::watch::MemberChange>,
    },
    /// What the owner's watches saw change on its members.
    Changed {
        changes: Vec<super::super::watch::MemberChange>,
    },
}

/// Why an object of the protocol cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    #[error("{0} has no {PAYLOAD}")]
    Missing(String),
    #[error("{name}: cannot read its payload: {reason}")]
    Unreadable { name: String, reason: String },
    #[error("{name}: no valid {SHARD_LABEL} label")]
    NoShard { name: String },
    #[error("rendering {id}: {reason}")]
    Rendering { id: String, reason: String },
}

fn gzip(value: &impl Serialize) -> Vec<u8> {
    let json = serde_json::to_vec(value).expect("protocol types serialize");
    compress(&json)
}

fn compress(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}

fn gunzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out)?;
    Ok(out)
}

fn meta(name: &str, labels: &[(&str, String)]) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        labels: Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        ),
        ..ObjectMeta::default()
    }
}

fn payload<T: for<'de> Deserialize<'de>>(cm: &ConfigMap) -> Result<T, PayloadError> {
    let name = cm.metadata.name.clone().unwrap_or_default();
    let bytes = cm
        .binary_data
        .as_ref()
        .and_then(|d| d.get(PAYLOAD))
        .ok_or_else(|| PayloadError::Missing(name.clone()))?;
    let unreadable = |reason: String| PayloadError::Unreadable {
        name: name.clone(),
        reason,
    };
    let json = gunzip(&bytes.0).map_err(|e| unreadable(e.to_string()))?;
    serde_json::from_slice(&json).map_err(|e| unreadable(e.to_string()))
}

impl Names {
    /// A new order's name: unique without asking the API server (`n` counts this process's
    /// orders, and the time tells processes apart).
    pub fn order(&self, me: &super::ReplicaId, n: u64) -> OrderName {
        OrderName(format!("{}-order-{}", self.prefix, unique(me, n)))
    }

    /// The report of an order's delivery: one per order, whichever owner delivers it.
    pub fn delivered_report(&self, order: &OrderName) -> String {
        format!("{order}-report")
    }

    /// A new report of changes.
    pub fn changes_report(&self, me: &super::ReplicaId, n: u64) -> String {
        format!("{}-changes-{}", self.prefix, unique(me, n))
    }

    /// A rendering's `part`-th Secret.
    pub fn rendering(&self, id: &RenderingId, part: usize) -> String {
        format!("{}-{part}", self.rendering_stem(id))
    }

    /// What the names of a rendering's Secrets share, before `-<part>`.
    pub fn rendering_stem(&self, id: &RenderingId) -> String {
        format!("{}-rendering-{}", self.prefix, id.0)
    }
}

fn unique(me: &super::ReplicaId, n: u64) -> String {
    use sha2::Digest;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let digest = sha2::Sha256::digest(format!("{me}/{nanos}/{n}").as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The object that carries `order` to the owner of `shard`.
pub fn order_object(names: &Names, name: &OrderName, shard: ShardId, order: &Order) -> ConfigMap {
    ConfigMap {
        metadata: meta(
            &name.0,
            &[
                (ORDER_LABEL, names.prefix.clone()),
                (SHARD_LABEL, shard.0.to_string()),
            ],
        ),
        binary_data: Some(BTreeMap::from([(
            PAYLOAD.to_string(),
            ByteString(gzip(order)),
        )])),
        ..ConfigMap::default()
    }
}

/// An order object's name, shard and order.
pub fn read_order(cm: &ConfigMap) -> Result<(OrderName, ShardId, Order), PayloadError> {
    let (name, shard) = order_header(cm)?;
    Ok((name, shard, order_payload(cm)?))
}

/// An order's name and shard, from its metadata: every replica sees every order, and reads
/// the payload only of those it acts for.
pub fn order_header(cm: &ConfigMap) -> Result<(OrderName, ShardId), PayloadError> {
    let name = cm.metadata.name.clone().unwrap_or_default();
    let shard = cm
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(SHARD_LABEL))
        .and_then(|s| s.parse().ok())
        .map(ShardId)
        .ok_or_else(|| PayloadError::NoShard { name: name.clone() })?;
    Ok((OrderName(name), shard))
}

/// What an order asks.
pub fn order_payload(cm: &ConfigMap) -> Result<Order, PayloadError> {
    payload(cm)
}

pub fn report_object(names: &Names, name: &str, report: &Report) -> ConfigMap {
    ConfigMap {
        metadata: meta(name, &[(REPORT_LABEL, names.prefix.clone())]),
        binary_data: Some(BTreeMap::from([(
            PAYLOAD.to_string(),
            ByteString(gzip(report)),
        )])),
        ..ConfigMap::default()
    }
}

pub fn read_report(cm: &ConfigMap) -> Result<Report, PayloadError> {
    payload(cm)
}

/// A rendering as stored: its id and its Secrets (Secrets, not ConfigMaps: manifests may hold
/// a Secret's data, and the hosting cluster protects them as it protects any Secret).
pub fn rendering_objects(names: &Names, manifests: &[Manifest]) -> (RenderingId, Vec<Secret>) {
    use sha2::Digest;
    let json = serde_json::to_vec(manifests).expect("manifests serialize");
    let digest = sha2::Sha256::digest(&json);
    let id = RenderingId(digest[..16].iter().map(|b| format!("{b:02x}")).collect());
    let bytes = compress(&json);
    let chunks: Vec<&[u8]> = bytes.chunks(PART_BYTES).collect();
    let parts = chunks.len().max(1);
    let secrets = (0..parts)
        .map(|i| {
            let chunk = chunks.get(i).copied().unwrap_or_default();
            let mut data = BTreeMap::from([(PAYLOAD.to_string(), ByteString(chunk.to_vec()))]);
            if i == 0 {
                data.insert("parts".into(), ByteString(parts.to_string().into_bytes()));
            }
            Secret {
                metadata: meta(
                    &names.rendering(&id, i),
                    &[(RENDERING_LABEL, names.prefix.clone())],
                ),
                data: Some(data),
                ..Secret::default()
            }
        })
        .collect();
    (id, secrets)
}

/// How many Secrets a rendering's first one says it has.
pub fn rendering_parts(first: &Secret) -> usize {
    first
        .data
        .as_ref()
        .and_then(|d| d.get("parts"))
        .and_then(|p| std::str::from_utf8(&p.0).ok()?.parse().ok())
        .unwrap_or(1)
}

/// The manifests of rendering `id` from its Secrets in order, checked against the id.
pub fn read_rendering(id: &RenderingId, parts: &[Secret]) -> Result<Vec<Manifest>, PayloadError> {
    use sha2::Digest;
    let fail = |reason: String| PayloadError::Rendering {
        id: id.0.clone(),
        reason,
    };
    let mut bytes = Vec::new();
    for part in parts {
        let chunk = part
            .data
            .as_ref()
            .and_then(|d| d.get(PAYLOAD))
            .ok_or_else(|| fail("a part has no payload".into()))?;
        bytes.extend_from_slice(&chunk.0);
    }
    let json = gunzip(&bytes).map_err(|e| fail(e.to_string()))?;
    let digest = sha2::Sha256::digest(&json);
    let found: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    if found != id.0 {
        return Err(fail(format!("its content's digest is {found}")));
    }
    serde_json::from_slice(&json).map_err(|e| fail(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::rolling::BindingHealth;
    use crate::rollout::Observed;
    use std::sync::Arc;

    fn names() -> Names {
        Names {
            prefix: "gitfleet".into(),
        }
    }

    fn manifest(name: &str, filler: usize) -> Manifest {
        Manifest {
            value: Arc::new(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "app"},
                "data": {"blob": (0..filler).map(|i| format!("{i:x}")).collect::<String>()},
            })),
            wave: 1,
            envelope: None,
            work: None,
        }
    }

    fn work(manifests: Manifests) -> Work {
        Work::apply(
            &"crp/app".parse().unwrap(),
            "m1",
            (
                manifests,
                Revision {
                    resource_index: 3,
                    rendered: "abc".into(),
                },
            ),
            ApplyStrategy::default(),
            "snap".into(),
            true,
            false,
        )
    }

    #[tokio::test]
    async fn an_order_carries_a_members_work_and_reads_back_the_same() {
        let manifests: Manifests = Arc::new(vec![manifest("a", 10)]);
        let (id, _) = rendering_objects(&names(), &manifests);
        let removed = Work::remove(&"crp/old".parse().unwrap(), "m1", ApplyStrategy::default());
        let work = MemberWork {
            member: "m1".into(),
            context: "ctx-m1".into(),
            commit: "c1".into(),
            works: vec![
                OrderedWork::of(&work(manifests.clone()), async |m| {
                    assert!(Arc::ptr_eq(m, &manifests));
                    Ok::<_, ()>(id.clone())
                })
                .await
                .unwrap(),
                OrderedWork::of(&removed, async |_| Err("a removal stores nothing"))
                    .await
                    .unwrap(),
            ],
        };
        let order = Order::Deliver(work.clone());
        let name = names().order(&"r1".into(), 7);
        assert!(name.0.starts_with("gitfleet-order-"), "{name}");
        let cm = order_object(&names(), &name, ShardId(5), &order);
        let (read_name, shard, read) = read_order(&cm).unwrap();
        assert_eq!((read_name, shard), (name, ShardId(5)));
        assert_eq!(read, order);
        let again = work.works[0]
            .clone()
            .into_work(async |r| {
                assert_eq!(r, &id);
                Ok::<_, ()>(manifests.clone())
            })
            .await
            .unwrap();
        let Action::Apply {
            manifests: m,
            revision,
            binds,
            ..
        } = again.action
        else {
            panic!("an apply");
        };
        assert!(Arc::ptr_eq(&m, &manifests));
        assert_eq!((revision.resource_index, binds), (3, true));
        let removal = work.works[1]
            .clone()
            .into_work(async |_| Err("a removal fetches nothing"))
            .await
            .unwrap();
        assert!(matches!(removal.action, Action::Remove { .. }));
    }

    #[test]
    fn a_report_reads_back_the_same() {
        let report = Report {
            shard: ShardId(2),
            token: serde_json::from_str("\"r1@1\"").unwrap(),
            body: ReportBody::Delivered {
                order: OrderName("gitfleet-order-1".into()),
                outcomes: vec![
                    Outcome::Done(BindingHealth::Available, Observed::default()),
                    Outcome::Failed("refused".into()),
                ],
                unreachable: BTreeMap::new(),
            },
        };
        let cm = report_object(&names(), "gitfleet-order-1-report", &report);
        assert_eq!(read_report(&cm).unwrap(), report);
    }

    #[test]
    fn a_large_rendering_is_split_and_a_tampered_one_refused() {
        // Incompressible enough to need several parts.
        let many: Vec<Manifest> = (0..40)
            .map(|i| {
                let mut m = manifest(&format!("cm-{i}"), 0);
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ i;
                let noise: String = (0..10_000)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        format!("{x:016x}")
                    })
                    .collect();
                Arc::make_mut(&mut m.value)["data"]["blob"] = noise.into();
                m
            })
            .collect();
        let (id, parts) = rendering_objects(&names(), &many);
        assert!(parts.len() > 1, "{} parts", parts.len());
        assert_eq!(rendering_parts(&parts[0]), parts.len());
        assert_eq!(read_rendering(&id, &parts).unwrap(), many);
        let (same, _) = rendering_objects(&names(), &many);
        assert_eq!(same, id, "a rendering's id is its content's");
        let (other, other_parts) = rendering_objects(&names(), &[manifest("x", 1)]);
        assert_ne!(other, id);
        let e = read_rendering(&id, &other_parts).unwrap_err();
        assert!(e.to_string().contains("digest"), "{e}");
    }
}
