//! A shard's record in the hosting cluster (a ConfigMap): claimed by each replica that takes
//! the shard, and written by it only with the resourceVersion of its own last write. Once a
//! successor has claimed the record, a deposed owner's write (a replica paused or cut off past
//! its Lease, that has not noticed yet) is refused by the API server with 409 Conflict: the
//! fencing that a Lease alone cannot give.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;

use super::{Names, ReplicaId, ShardId, GROUP_LABEL};

/// A shard's record as its owner last wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub shard: ShardId,
    pub name: String,
    /// What this claim's reports carry: the leader accepts a report only while the record
    /// still holds it ([`TOKEN_KEY`]), so a deposed owner's reports are refused.
    pub token: ClaimToken,
    resource_version: String,
}

/// One claim of one shard's record, unique among every claim ever made of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct ClaimToken(String);

impl ClaimToken {
    fn new(me: &ReplicaId) -> ClaimToken {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        ClaimToken(format!("{me}@{nanos}"))
    }

    /// The replica that made the claim.
    pub fn holder(&self) -> ReplicaId {
        let holder = self.0.rsplit_once('@').map_or(self.0.as_str(), |(h, _)| h);
        ReplicaId::from(holder)
    }

    /// The token a record holds now (`None`: never claimed, or not a record).
    pub fn of_record(record: &ConfigMap) -> Option<ClaimToken> {
        let token = record.data.as_ref()?.get(TOKEN_KEY)?;
        Some(ClaimToken(token.clone()))
    }
}

/// The record's key that holds its current claim's token.
pub const TOKEN_KEY: &str = "claim";

#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// Another replica claimed the shard since this one did: it must stop acting for it.
    #[error("{shard} was claimed by another replica since: this replica stops acting for it")]
    Fenced { shard: ShardId },
    #[error("cannot write the record of {shard}: {source}")]
    Api {
        shard: ShardId,
        #[source]
        source: kube::Error,
    },
}

fn record(
    names: &Names,
    shard: ShardId,
    (owner, token): (&ReplicaId, &ClaimToken),
    data: BTreeMap<String, String>,
) -> ConfigMap {
    let mut all = data;
    all.insert("owner".into(), owner.to_string());
    all.insert(TOKEN_KEY.into(), token.0.clone());
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(names.shard_record(shard)),
            labels: Some(BTreeMap::from([(
                GROUP_LABEL.to_string(),
                names.prefix.clone(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(all),
        ..ConfigMap::default()
    }
}

/// Claims `shard`'s record for `me`, whoever wrote it last: called once this replica holds the
/// shard's Lease, so that any write of the previous owner from now on is refused.
pub async fn claim(
    api: &Api<ConfigMap>,
    names: &Names,
    shard: ShardId,
    me: &ReplicaId,
) -> Result<Claim, ClaimError> {
    let fail = |source| ClaimError::Api { shard, source };
    let token = ClaimToken::new(me);
    let mut new = record(names, shard, (me, &token), BTreeMap::new());
    let written = match api
        .get_opt(&names.shard_record(shard))
        .await
        .map_err(fail)?
    {
        None => api.create(&Default::default(), &new).await,
        Some(old) => {
            new.metadata.resource_version = old.metadata.resource_version;
            api.replace(&names.shard_record(shard), &Default::default(), &new)
                .await
        }
    };
    match written {
        Ok(w) => Ok(Claim {
            shard,
            name: names.shard_record(shard),
            token,
            resource_version: w.metadata.resource_version.unwrap_or_default(),
        }),
        // Another replica wrote between the read and the write: it is the newer claim.
        Err(kube::Error::Api(s)) if s.code == 409 => Err(ClaimError::Fenced { shard }),
        Err(e) => Err(fail(e)),
    }
}

/// Writes `data` into the shard's record as its owner, if no one claimed it since `claim`.
pub async fn write(
    api: &Api<ConfigMap>,
    names: &Names,
    claim: &mut Claim,
    me: &ReplicaId,
    data: BTreeMap<String, String>,
) -> Result<(), ClaimError> {
    let shard = claim.shard;
    let mut new = record(names, shard, (me, &claim.token), data);
    new.metadata.resource_version = Some(claim.resource_version.clone());
    match api.replace(&claim.name, &Default::default(), &new).await {
        Ok(w) => {
            claim.resource_version = w.metadata.resource_version.unwrap_or_default();
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {
            Err(ClaimError::Fenced { shard })
        }
        Err(e) => Err(ClaimError::Api { shard, source: e }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_names_the_replica_that_made_it() {
        let token = ClaimToken::new(&ReplicaId::from("gitfleet-0@pod"));
        assert_eq!(token.holder(), ReplicaId::from("gitfleet-0@pod"));
    }
}
