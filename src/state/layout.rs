//! How the daemon's state is laid out in ConfigMaps of the hosting cluster (`--state
//! kubernetes`), without I/O: the state in, object contents out, and back.
//!
//! - `<prefix>-state`, the head: what is fleet-wide — the commit served, the rejected and held
//!   heads, the members' last probes, staged update runs, the commit the schedule was made
//!   for — and which replica claimed the state last.
//! - `<prefix>-p-<placement>-<hash>`, one per placement: its schedule (bindings, decisions,
//!   policy index) and its rollout state (snapshot history, what each cluster was given).
//!   Labelled with `gitfleet.io/shard-key` (the first 8 hex digits of the SHA-256 of the
//!   placement id), so that a sharded daemon can later own placements by key without moving
//!   any object.
//!
//! Every document is JSON, gzip-compressed into `binaryData` (the rollout state is highly
//! repetitive). A document whose compressed form exceeds [`MAX_OBJECT_BYTES`] is split into
//! parts, `<base>-g<generation>-<n>`, created anew by each write; the base object then lists
//! them and their digest, so that replacing the base is the one step that switches a document
//! to its new content (parts of older generations are deleted afterwards).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::FORMAT_VERSION;
use crate::rollout::{PlacementState, RolloutState};
use crate::schedule::{PlacementSchedule, Previous};

/// The most a state object's data may take: the API server refuses a ConfigMap over 1 MiB
/// (data and metadata together), and names, labels and managedFields need the rest.
pub const MAX_OBJECT_BYTES: usize = 900 * 1024;
/// `binaryData` key of a whole document (gzip of its JSON).
pub const DATA_KEY: &str = "state.json.gz";
/// `binaryData` key of one part of a split document.
pub const PART_KEY: &str = "part";
/// `data` key of a split document's base object: its parts and digest ([`Parts`]).
pub const PARTS_KEY: &str = "parts.json";

pub const LABEL_STATE: &str = "gitfleet.io/state";
pub const LABEL_OBJECT: &str = "gitfleet.io/state-object";
pub const LABEL_SHARD_KEY: &str = "gitfleet.io/shard-key";
pub const ANNOTATION_PLACEMENT: &str = "gitfleet.io/placement";

/// The fleet-wide document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeadDoc {
    pub version: u32,
    /// The replica that claimed the state last (its `--identity`), and how many claims so far:
    /// a new leader claims the state before it acts, so a deposed one's next write fails.
    #[serde(default)]
    pub leader: String,
    #[serde(default)]
    pub claims: u64,
    /// The commit the saved schedule was made for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_commit: Option<String>,
    /// The rollout state without its placements (they are in their own objects).
    pub rollout: RolloutState,
}

/// One placement's document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementDoc {
    pub version: u32,
    /// `crp/NAME`, `rp/NS/NAME`, `ocm/NS/NAME`.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Arc<PlacementSchedule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Shared with the rollout state it was saved from: a store's copy of what it last wrote
    /// costs no second copy of every binding.
    pub rollout: Option<Arc<PlacementState>>,
}

/// A split document's base object: its parts in order, and the SHA-256 of their
/// concatenation (a torn or mixed set of parts is refused, never read as state).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Parts {
    pub generation: u64,
    pub parts: Vec<String>,
    pub sha256: String,
}

/// The whole state as documents, by object name.
#[derive(Debug, Clone, PartialEq)]
pub struct Documents {
    pub head: HeadDoc,
    pub placements: BTreeMap<String, PlacementDoc>,
}

/// What a ConfigMap holds, as gitfleet writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub data: BTreeMap<String, String>,
    pub binary_data: BTreeMap<String, Vec<u8>>,
}

impl Object {
    /// Bytes the API server counts against its limit for the content (binaryData as base64).
    pub fn content_bytes(&self) -> usize {
        self.data
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum::<usize>()
            + self
                .binary_data
                .iter()
                .map(|(k, v)| k.len() + v.len().div_ceil(3) * 4)
                .sum::<usize>()
    }
}

/// Names of the head object and of the placements' objects of the state `prefix`.
pub fn head_name(prefix: &str) -> String {
    format!("{prefix}-state")
}

/// The first 8 hex digits of the SHA-256 of a placement id.
pub fn shard_key(id: &str) -> String {
    hex(&Sha256::digest(id.as_bytes()))[..8].to_string()
}

/// `<prefix>-p-<id as a name>-<shard key>`: readable, unique (the hash), and a valid
/// ConfigMap name however long the id (the readable part is cut to fit).
pub fn placement_name(prefix: &str, id: &str) -> String {
    let slug: String = id
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    // 253 is the limit; parts add `-g<generation>-<n>` (at most 43 more).
    let room = 200usize.saturating_sub(prefix.len() + 3 + 9);
    let slug: String = slug.chars().take(room).collect();
    format!("{prefix}-p-{}-{}", slug.trim_matches('-'), shard_key(id))
}

/// The state as documents: the head, and one document per placement that has a schedule or
/// a rollout state.
pub fn split(
    prefix: &str,
    leader: &str,
    claims: u64,
    schedule: &(Option<String>, Previous),
    state: &RolloutState,
) -> Documents {
    let mut placements: BTreeMap<String, PlacementDoc> = BTreeMap::new();
    let doc = |id: &str| PlacementDoc {
        version: FORMAT_VERSION,
        id: id.to_string(),
        schedule: None,
        rollout: None,
    };
    for (key, s) in &schedule.1 {
        let id = key.to_string();
        placements
            .entry(placement_name(prefix, &id))
            .or_insert_with(|| doc(&id))
            .schedule = Some(s.clone());
    }
    for (key, p) in &state.placements {
        let id = key.to_string();
        placements
            .entry(placement_name(prefix, &id))
            .or_insert_with(|| doc(&id))
            .rollout = Some(p.clone());
    }
    let head = HeadDoc {
        version: FORMAT_VERSION,
        leader: leader.to_string(),
        claims,
        schedule_commit: schedule.0.clone(),
        rollout: RolloutState {
            placements: BTreeMap::new(),
            ..state.clone()
        },
    };
    Documents { head, placements }
}

/// The state back from its documents: the schedule (and its commit) and the rollout state.
pub fn join(docs: Documents) -> Result<((Option<String>, Previous), RolloutState), String> {
    let mut previous = Previous::new();
    let mut state = docs.head.rollout;
    for doc in docs.placements.into_values() {
        let key: crate::model::PlacementKey = doc
            .id
            .parse()
            .map_err(|e| format!("placement id {:?}: {e}", doc.id))?;
        if let Some(s) = doc.schedule {
            previous.insert(key.clone(), s);
        }
        if let Some(p) = doc.rollout {
            state.placements.insert(key, p);
        }
    }
    Ok(((docs.head.schedule_commit, previous), state))
}

/// A document as gzip'd JSON.
pub fn encode<T: Serialize>(doc: &T) -> Vec<u8> {
    let json = serde_json::to_vec(doc).expect("state serialises");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&json).expect("writes to memory");
    gz.finish().expect("writes to memory")
}

/// A document back from gzip'd JSON, its version checked.
pub fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut json)
        .map_err(|e| format!("not gzip: {e}"))?;
    // The version first (a cheap pass that skips the rest), so that another version's
    // document is refused as such rather than as a shape this one cannot read.
    #[derive(Deserialize)]
    struct Version {
        #[serde(default)]
        version: u64,
    }
    let found = serde_json::from_slice::<Version>(&json)
        .map_err(|e| e.to_string())?
        .version;
    if found != u64::from(FORMAT_VERSION) {
        return Err(format!(
            "state format version {found}, but this gitfleet reads version {FORMAT_VERSION}"
        ));
    }
    serde_json::from_slice(&json).map_err(|e| e.to_string())
}

/// The objects holding one encoded document under `name`: one object, or (over
/// [`MAX_OBJECT_BYTES`]) a base object listing parts of generation `generation`.
pub fn objects(
    prefix: &str,
    name: &str,
    kind: &str,
    placement: Option<&str>,
    bytes: Vec<u8>,
    generation: u64,
) -> Vec<Object> {
    let mut labels = BTreeMap::from([
        (
            "app.kubernetes.io/managed-by".to_string(),
            "gitfleet".to_string(),
        ),
        (LABEL_STATE.to_string(), prefix.to_string()),
        (LABEL_OBJECT.to_string(), kind.to_string()),
    ]);
    let mut annotations = BTreeMap::new();
    if let Some(id) = placement {
        labels.insert(LABEL_SHARD_KEY.to_string(), shard_key(id));
        annotations.insert(ANNOTATION_PLACEMENT.to_string(), id.to_string());
    }
    let object = |name: String, labels, data, binary_data| Object {
        name,
        labels,
        annotations: annotations.clone(),
        data,
        binary_data,
    };
    if bytes.len() <= MAX_OBJECT_BYTES * 3 / 4 {
        return vec![object(
            name.to_string(),
            labels,
            BTreeMap::new(),
            BTreeMap::from([(DATA_KEY.to_string(), bytes)]),
        )];
    }
    // base64 makes 4 of 3 bytes.
    let chunk = MAX_OBJECT_BYTES * 3 / 4;
    let mut part_labels = labels.clone();
    part_labels.insert(LABEL_OBJECT.to_string(), "part".to_string());
    let parts: Vec<Object> = bytes
        .chunks(chunk)
        .enumerate()
        .map(|(n, c)| {
            object(
                format!("{name}-g{generation}-{n}"),
                part_labels.clone(),
                BTreeMap::new(),
                BTreeMap::from([(PART_KEY.to_string(), c.to_vec())]),
            )
        })
        .collect();
    let index = Parts {
        generation,
        parts: parts.iter().map(|p| p.name.clone()).collect(),
        sha256: hex(&Sha256::digest(&bytes)),
    };
    let base = object(
        name.to_string(),
        labels,
        BTreeMap::from([(
            PARTS_KEY.to_string(),
            serde_json::to_string(&index).expect("serialises"),
        )]),
        BTreeMap::new(),
    );
    let mut out = parts;
    out.push(base);
    out
}

/// The encoded document a base object holds, reading its parts (by name) from `part`.
pub fn document_bytes<'a>(
    base: &Object,
    part: impl Fn(&str) -> Option<&'a Object>,
) -> Result<Vec<u8>, String> {
    if let Some(bytes) = base.binary_data.get(DATA_KEY) {
        return Ok(bytes.clone());
    }
    let Some(index) = base.data.get(PARTS_KEY) else {
        return Err(format!(
            "neither binaryData {DATA_KEY} nor data {PARTS_KEY}"
        ));
    };
    let index: Parts = serde_json::from_str(index).map_err(|e| format!("data {PARTS_KEY}: {e}"))?;
    let mut bytes = Vec::new();
    for name in &index.parts {
        let p = part(name).ok_or_else(|| format!("part {name} is missing"))?;
        let chunk = p
            .binary_data
            .get(PART_KEY)
            .ok_or_else(|| format!("part {name} has no binaryData {PART_KEY}"))?;
        bytes.extend_from_slice(chunk);
    }
    if hex(&Sha256::digest(&bytes)) != index.sha256 {
        return Err("its parts do not add up to the digest it lists (a torn write)".into());
    }
    Ok(bytes)
}

/// The parts a base object lists (none for a whole one).
pub fn parts_of(base: &Object) -> Vec<String> {
    base.data
        .get(PARTS_KEY)
        .and_then(|i| serde_json::from_str::<Parts>(i).ok())
        .map(|i| i.parts)
        .unwrap_or_default()
}

/// The generation of a split base object's parts (0 for a whole one).
pub fn generation_of(base: &Object) -> u64 {
    base.data
        .get(PARTS_KEY)
        .and_then(|i| serde_json::from_str::<Parts>(i).ok())
        .map_or(0, |i| i.generation)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_names_are_valid_unique_and_bounded() {
        let a = placement_name("gitfleet", "rp/web/Front_End");
        assert!(a.starts_with("gitfleet-p-rp-web-front-end-"), "{a}");
        assert_ne!(a, placement_name("gitfleet", "rp/web/front-end"));
        let long = placement_name("gitfleet", &format!("crp/{}", "x".repeat(400)));
        assert!(long.len() <= 210, "{}", long.len());
        assert!(long
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
        assert_eq!(shard_key("crp/app").len(), 8);
    }

    #[test]
    fn a_large_document_is_split_into_parts_that_read_back_and_a_torn_set_is_refused() {
        // Incompressible bytes: 2.5 objects' worth.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let bytes: Vec<u8> = (0..MAX_OBJECT_BYTES * 5 / 2)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let objs = objects(
            "gf",
            "gf-p-crp-app-1",
            "placement",
            Some("crp/app"),
            bytes.clone(),
            7,
        );
        assert_eq!(objs.len(), 5, "four parts and the base");
        for o in &objs {
            assert!(
                o.content_bytes() <= MAX_OBJECT_BYTES + 64,
                "{}",
                o.content_bytes()
            );
        }
        let base = objs.last().unwrap();
        assert_eq!(parts_of(base)[0], "gf-p-crp-app-1-g7-0");
        assert_eq!(generation_of(base), 7);
        let by_name = |n: &str| objs.iter().find(|o| o.name == n);
        assert_eq!(document_bytes(base, by_name).unwrap(), bytes);
        // A part of another write: the digest no longer matches.
        let mut torn = objs.clone();
        torn[1].binary_data.insert(PART_KEY.into(), vec![0; 10]);
        let by_name = |n: &str| torn.iter().find(|o| o.name == n);
        let e = document_bytes(torn.last().unwrap(), by_name).unwrap_err();
        assert!(e.contains("torn"), "{e}");
    }

    #[test]
    fn the_state_splits_into_a_head_and_placements_and_joins_back() {
        let mut state = RolloutState {
            serving: Some("abc".into()),
            ..RolloutState::default()
        };
        state
            .placements
            .insert("crp/app".parse().unwrap(), Default::default());
        state
            .placements
            .insert("rp/ns/web".parse().unwrap(), Default::default());
        let sched = PlacementSchedule {
            key: "crp/app".parse().unwrap(),
            policy_snapshot_index: Some(1),
            policy_hash: None,
            selected: vec!["a".into()],
            decisions: vec![],
            conditions: vec![],
            bindings: vec![],
            decision_groups: vec![],
        };
        let schedule = (
            Some("abc".to_string()),
            Previous::from([(sched.key.clone(), Arc::new(sched))]),
        );
        let docs = split("gf", "me", 3, &schedule, &state);
        assert_eq!(docs.placements.len(), 2);
        assert!(docs.head.rollout.placements.is_empty());
        assert_eq!((docs.head.leader.as_str(), docs.head.claims), ("me", 3));
        let web = &docs.placements[&placement_name("gf", "rp/ns/web")];
        assert!(web.schedule.is_none() && web.rollout.is_some());
        // Through the encoding, as stored.
        let head: HeadDoc = decode(&encode(&docs.head)).unwrap();
        assert_eq!(head, docs.head);
        let (s, r) = join(docs).unwrap();
        assert_eq!((s, r), (schedule, state));
    }

    #[test]
    fn other_versions_and_garbage_are_refused() {
        let e = decode::<HeadDoc>(b"plain").unwrap_err();
        assert!(e.contains("not gzip"), "{e}");
        let mut doc = HeadDoc {
            version: 99,
            ..HeadDoc::default()
        };
        let e = decode::<HeadDoc>(&encode(&doc)).unwrap_err();
        assert!(e.contains("version 99"), "{e}");
        doc.version = FORMAT_VERSION;
        decode::<HeadDoc>(&encode(&doc)).unwrap();
    }
}
