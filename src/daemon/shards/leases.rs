//! The replica's side of sharding, against the hosting cluster: every retry period it renews its
//! replica Lease, reads the group's Leases (one LIST), works out what it owns
//! ([`super::ownership`]) and writes the shard Leases that changes: releases first (after it
//! stopped acting for them), then takes (each record claimed before the shard is acted for),
//! then renewals. What it holds is published on a watch channel; a shard not renewed within the
//! renew deadline is no longer acted for, before any other replica may take it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::ListParams;
use kube::Api;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::ownership::{self, Observations, ShardAction};
use super::{assign, claims, Names, ReplicaId, ShardId, GROUP_LABEL, ROLE_LABEL};
use crate::daemon::leader::{next_attempt, Role, Seen};

/// A replica Lease unchanged for this many lease durations belongs to a replica gone for good.
const GONE_AFTER_DURATIONS: u32 = 20;

/// `--shards` and the election's timings, shared by every replica of a group.
#[derive(Debug, Clone)]
pub struct Sharding {
    pub shards: u32,
    pub names: Names,
    pub identity: ReplicaId,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

/// What this replica holds, as it last knew.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Owned {
    /// The shards it holds, with when each was last renewed (or taken).
    pub shards: BTreeMap<ShardId, Instant>,
    /// The live replicas as it sees them, itself included.
    pub live: BTreeSet<ReplicaId>,
    /// Each held shard's record as this replica claimed it when it took the shard: whoever
    /// acts for the shard writes the record from there.
    pub claims: BTreeMap<ShardId, claims::Claim>,
}

impl Owned {
    /// The shards it may act for at `now`: renewed within the renew deadline.
    pub fn acting_for(&self, renew_deadline: Duration, now: Instant) -> BTreeSet<ShardId> {
        self.shards
            .iter()
            .filter(|(_, renewed)| now < **renewed + renew_deadline)
            .map(|(s, _)| *s)
            .collect()
    }
}

fn now_micro() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

fn labels(names: &Names, role: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (GROUP_LABEL.to_string(), names.prefix.clone()),
        (ROLE_LABEL.to_string(), role.to_string()),
    ])
}

fn held(name: String, labels: BTreeMap<String, String>, me: &ReplicaId, secs: i32) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(me.to_string()),
            lease_duration_seconds: Some(secs),
            acquire_time: Some(now_micro()),
            renew_time: Some(now_micro()),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }),
    }
}

/// Runs until `stop` is cancelled; then stops acting for every shard, releases them and
/// removes its replica Lease, so the others take over at once. `election` is this replica's
/// view of the leader election: the leader serves no shard while another replica is live.
pub async fn run(
    leases: Api<Lease>,
    records: Api<ConfigMap>,
    sharding: Sharding,
    (election, owned): (watch::Receiver<Seen>, watch::Sender<Owned>),
    stop: CancellationToken,
) {
    // The election reads its Lease at once: waiting for that spares a replica that turns out
    // to lead taking shards only to hand them over a round later.
    let mut first = election.clone();
    let known = first.wait_for(|seen| seen.role != Role::Unknown);
    let _ = tokio::time::timeout(sharding.retry_period, known).await;
    let mut seen_replicas = Observations::default();
    let mut seen_shards = Observations::default();
    let mut claims: BTreeMap<ShardId, claims::Claim> = BTreeMap::new();
    loop {
        let started = Instant::now();
        let mut wake = started + sharding.retry_period;
        let round = tokio::time::timeout(
            sharding.retry_period.max(Duration::from_secs(1)),
            round(
                &leases,
                &records,
                &sharding,
                (&election, &owned),
                (&mut seen_replicas, &mut seen_shards),
                &mut claims,
            ),
        );
        tokio::select! {
            () = stop.cancelled() => break,
            r = round => match r {
                Ok(Ok(expiry)) => wake = next_attempt(started, sharding.retry_period, expiry),
                Ok(Err(e)) => tracing::warn!(error = %e, "cannot read or write the shard leases"),
                Err(_) => tracing::warn!("the shard leases' API server did not answer in time"),
            },
        }
        // Whatever happened, a shard not renewed in time is not acted for.
        let now = Instant::now();
        owned.send_if_modified(|o| {
            let before = o.shards.len();
            o.shards
                .retain(|_, renewed| now < *renewed + sharding.renew_deadline);
            let Owned { shards, claims, .. } = o;
            claims.retain(|s, _| shards.contains_key(s));
            o.shards.len() != before
        });
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep_until(wake) => {}
        }
    }
    let held: Vec<ShardId> = owned.borrow().shards.keys().copied().collect();
    owned.send_replace(Owned::default());
    let leave = async {
        for shard in held {
            release(
                &leases,
                &sharding.names.shard_lease(shard),
                &sharding.identity,
            )
            .await;
        }
        let me = sharding.names.replica_lease(&sharding.identity);
        let _ = leases.delete(&me, &Default::default()).await;
    };
    if tokio::time::timeout(sharding.retry_period.max(Duration::from_secs(1)), leave)
        .await
        .is_err()
    {
        tracing::warn!("cannot release the shard leases: no answer");
    }
}

/// One read of the group's Leases and the writes it calls for. Returns when the first Lease
/// another replica holds expires unless renewed, if before the next retry period matters.
async fn round(
    leases: &Api<Lease>,
    records: &Api<ConfigMap>,
    sharding: &Sharding,
    (election, owned): (&watch::Receiver<Seen>, &watch::Sender<Owned>),
    (seen_replicas, seen_shards): (&mut Observations, &mut Observations),
    claims: &mut BTreeMap<ShardId, claims::Claim>,
) -> Result<Option<Instant>, kube::Error> {
    let me = &sharding.identity;
    let names = &sharding.names;
    let secs = sharding.lease_duration.as_secs().max(1) as i32;
    let listed = leases
        .list(&ListParams::default().labels(&format!("{GROUP_LABEL}={}", names.prefix)))
        .await?
        .items;
    let role = |l: &Lease, r: &str| {
        l.metadata
            .labels
            .as_ref()
            .and_then(|m| m.get(ROLE_LABEL))
            .is_some_and(|v| v == r)
    };
    // This replica's own Lease first: it is what tells the others it is alive.
    let mine = names.replica_lease(me);
    match listed
        .iter()
        .find(|l| l.metadata.name.as_deref() == Some(&mine))
    {
        Some(lease) => {
            let mut renewed = lease.clone();
            let spec = renewed.spec.get_or_insert_with(LeaseSpec::default);
            spec.holder_identity = Some(me.to_string());
            spec.renew_time = Some(now_micro());
            spec.lease_duration_seconds = Some(secs);
            leases.replace(&mine, &Default::default(), &renewed).await?;
        }
        None => {
            let new = held(mine.clone(), labels(names, "replica"), me, secs);
            leases.create(&Default::default(), &new).await?;
        }
    }
    let now = Instant::now();
    let others: Vec<Lease> = listed
        .iter()
        .filter(|l| role(l, "replica") && l.metadata.name.as_deref() != Some(&mine))
        .cloned()
        .collect();
    let live = ownership::live_replicas(me, &others, seen_replicas, (now, jiff::Timestamp::now()));
    let after = GONE_AFTER_DURATIONS * sharding.lease_duration;
    for (name, rv) in ownership::gone_replicas(&others, &live, seen_replicas, after, now) {
        let unchanged = kube::api::DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                resource_version: Some(rv),
                uid: None,
            }),
            ..Default::default()
        };
        // Another replica may delete it first, or its replica renew it: either way, no error.
        if leases.delete(&name, &unchanged).await.is_ok() {
            tracing::info!(lease = %name, "deleted the Lease of a replica gone for good");
        }
    }
    let shard_leases: BTreeMap<ShardId, Lease> = listed
        .into_iter()
        .filter(|l| role(l, "shard"))
        .filter_map(|l| Some((names.shard_of_lease(l.metadata.name.as_deref()?)?, l)))
        .collect();
    let leader = ownership::leader(me, &election.borrow().role);
    let owners = assign::owners(sharding.shards, &assign::serving(&live, leader.as_ref()));
    let actions = ownership::plan(me, &owners, &shard_leases, seen_shards, now);
    let expiry = [
        seen_replicas.next_expiry(me, &others, now),
        seen_shards.next_expiry(me, shard_leases.values(), now),
    ]
    .into_iter()
    .flatten()
    .min();
    // Stop acting for what moves away before letting go of it.
    let leaving: Vec<ShardId> = actions
        .iter()
        .filter(|(_, a)| **a == ShardAction::Release)
        .map(|(s, _)| *s)
        .collect();
    owned.send_modify(|o| {
        for s in &leaving {
            o.shards.remove(s);
            o.claims.remove(s);
        }
        o.live.clone_from(&live);
    });
    for shard in &leaving {
        claims.remove(shard);
        release(leases, &names.shard_lease(*shard), me).await;
        tracing::info!(%shard, "released: another replica owns it now");
    }
    for (shard, action) in actions {
        let name = names.shard_lease(shard);
        let written = match &action {
            ShardAction::Create => {
                let new = held(name.clone(), labels(names, "shard"), me, secs);
                leases.create(&Default::default(), &new).await.map(|_| ())
            }
            ShardAction::Renew | ShardAction::Take => {
                let mut lease = shard_leases[&shard].clone();
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                if action == ShardAction::Take {
                    spec.holder_identity = Some(me.to_string());
                    spec.acquire_time = Some(now_micro());
                    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                }
                spec.renew_time = Some(now_micro());
                spec.lease_duration_seconds = Some(secs);
                leases
                    .replace(&name, &Default::default(), &lease)
                    .await
                    .map(|_| ())
            }
            ShardAction::Release | ShardAction::Wait { .. } => continue,
        };
        match written {
            Ok(()) => {}
            // Another replica wrote it since it was read: not this replica's (yet).
            Err(kube::Error::Api(s)) if s.code == 409 => {
                owned.send_modify(|o| {
                    o.shards.remove(&shard);
                    o.claims.remove(&shard);
                });
                claims.remove(&shard);
                continue;
            }
            Err(e) => return Err(e),
        }
        if action != ShardAction::Renew || !claims.contains_key(&shard) {
            match claims::claim(records, names, shard, me).await {
                Ok(c) => {
                    claims.insert(shard, c);
                    tracing::info!(%shard, "took the shard");
                }
                Err(e) => {
                    tracing::warn!(%shard, error = %e, "cannot claim the shard's record");
                    continue;
                }
            }
        }
        owned.send_modify(|o| {
            o.shards.insert(shard, Instant::now());
            if let Some(c) = claims.get(&shard) {
                if o.claims.get(&shard).map(|held| &held.token) != Some(&c.token) {
                    o.claims.insert(shard, c.clone());
                }
            }
        });
    }
    Ok(expiry)
}

/// Gives a shard Lease up (holder cleared, duration 1 s) if this replica still holds it.
async fn release(leases: &Api<Lease>, name: &str, me: &ReplicaId) {
    let result = async {
        let Some(mut lease) = leases.get_opt(name).await? else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(me.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now_micro());
        leases
            .replace(name, &Default::default(), &lease)
            .await
            .map(|_| ())
    };
    if let Err(e) = result.await {
        tracing::warn!(lease = %name, error = %e, "cannot release the shard lease");
    }
}
