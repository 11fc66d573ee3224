//! The record of what gitfleet applied for a placement on a member: ConfigMap
//! `gitfleet-system/applied.<placement key>`, so that pruning survives restarts and never touches
//! objects gitfleet did not apply. Pure: building the ConfigMap, reading it back, and deciding
//! what to prune.

use super::decorate::{MANAGED_BY, MANAGED_BY_LABEL, PLACEMENT_LABEL};
use super::writer::Mark;
use super::ObjectRef;
use crate::model::placement_key::label_value_of;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeSet;

pub const NAMESPACE: &str = "gitfleet-system";
/// Marks record ConfigMaps, so a member's records can be listed.
pub const RECORD_LABEL: &str = "gitfleet.io/applied-record";
/// The full placement key (the label value may be shortened).
pub const KEY_ANNOTATION: &str = "gitfleet.io/placement-key";
/// The placement's deleteStrategy, so that a placement removed from git is still pruned (or
/// abandoned) as it asked.
pub const PROPAGATION_ANNOTATION: &str = "gitfleet.io/propagation-policy";
/// The staged update run that delivered what the placement put there (JSON), so that a state
/// rebuilt from the members knows which runs finished.
pub const RUN_ANNOTATION: &str = "gitfleet.io/update-run";

/// A placement's record on one member.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    pub key: String,
    pub entries: BTreeSet<Entry>,
    /// deleteStrategy Abandon: objects no longer delivered are left on the member.
    pub abandon: bool,
    /// The staged update run that delivered the objects, if a run did.
    pub run: Option<crate::rollout::staged::RunDelivery>,
    /// The writer pushing the placement right now, if any (see [`super::writer`]).
    pub mark: Option<Mark>,
    /// The ConfigMap's resourceVersion as read; written back as a precondition.
    pub resource_version: Option<String>,
}

/// One applied object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    #[serde(flatten)]
    pub object: ObjectRef,
    /// gitfleet created it (it did not exist before): only then may a Namespace be deleted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub created: bool,
    /// An OCM work orphans it (deleteOption Orphan or SelectivelyOrphan): when no longer
    /// delivered it is left on the member, stripped of gitfleet's marks, never deleted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub orphan: bool,
}

pub fn name(placement_key: &str) -> String {
    format!("applied.{placement_key}")
}

/// The record ConfigMap.
pub fn config_map(record: &Record) -> Value {
    let placement_key = record.key.as_str();
    let list: Vec<&Entry> = record.entries.iter().collect();
    let policy = if record.abandon { "Abandon" } else { "Delete" };
    let mut cm = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name(placement_key),
            "namespace": NAMESPACE,
            "labels": {
                MANAGED_BY_LABEL: MANAGED_BY,
                PLACEMENT_LABEL: label_value_of(placement_key),
                RECORD_LABEL: "true",
            },
            "annotations": {KEY_ANNOTATION: placement_key, PROPAGATION_ANNOTATION: policy},
        },
        "data": {"objects": serde_json::to_string(&list).expect("entries serialise")},
    });
    if let Some(run) = &record.run {
        cm["metadata"]["annotations"][RUN_ANNOTATION] = serde_json::to_string(run)
            .expect("a run delivery serialises")
            .into();
    }
    if let Some(mark) = &record.mark {
        for (k, v) in mark.annotations() {
            cm["metadata"]["annotations"][k] = v.into();
        }
    }
    if let Some(rv) = &record.resource_version {
        cm["metadata"]["resourceVersion"] = rv.as_str().into();
    }
    cm
}

#[derive(Debug, thiserror::Error)]
#[error("record {NAMESPACE}/{name}: {message}")]
pub struct RecordError {
    pub name: String,
    pub message: String,
}

/// Reads a record ConfigMap back.
pub fn parse(cm: &Value) -> Result<Record, RecordError> {
    let cm_name = super::metadata_str(cm, "name")
        .unwrap_or_default()
        .to_string();
    let err = |message: String| RecordError {
        name: cm_name.clone(),
        message,
    };
    let key = super::metadata_field(cm, "annotations")
        .and_then(|a| a.get(KEY_ANNOTATION))
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| cm_name.strip_prefix("applied.").map(str::to_string))
        .ok_or_else(|| err("no placement key".into()))?;
    let text = cm
        .get("data")
        .and_then(|d| d.get("objects"))
        .and_then(Value::as_str)
        .unwrap_or("[]");
    let entries: Vec<Entry> =
        serde_json::from_str(text).map_err(|e| err(format!("data.objects: {e}")))?;
    let abandon = super::metadata_field(cm, "annotations")
        .and_then(|a| a.get(PROPAGATION_ANNOTATION))
        .and_then(Value::as_str)
        == Some("Abandon");
    let run = match super::metadata_field(cm, "annotations")
        .and_then(|a| a.get(RUN_ANNOTATION))
        .and_then(Value::as_str)
    {
        Some(text) => Some(
            serde_json::from_str(text)
                .map_err(|e| err(format!("annotation {RUN_ANNOTATION}: {e}")))?,
        ),
        None => None,
    };
    Ok(Record {
        key,
        entries: entries.into_iter().collect(),
        abandon,
        run,
        mark: super::metadata_field(cm, "annotations").and_then(Mark::read),
        resource_version: super::metadata_str(cm, "resourceVersion").map(str::to_string),
    })
}

/// Entries of `old` whose objects are not delivered any more, in prune order: last wave first,
/// so custom resources go before their CRDs and namespaced objects before their Namespace.
pub fn stale(old: &BTreeSet<Entry>, delivered: &BTreeSet<ObjectRef>) -> Vec<Entry> {
    let mut out: Vec<Entry> = old
        .iter()
        .filter(|e| !delivered.contains(&e.object))
        .cloned()
        .collect();
    out.sort_by_key(|e| std::cmp::Reverse(e.object.wave()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(api_version: &str, kind: &str, ns: Option<&str>, name: &str) -> ObjectRef {
        ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: ns.map(str::to_string),
            name: name.into(),
        }
    }

    #[test]
    fn records_round_trip() {
        let entries: BTreeSet<Entry> = [
            Entry {
                object: obj("v1", "Namespace", None, "web"),
                created: true,
                orphan: false,
            },
            Entry {
                object: obj("v1", "ConfigMap", Some("web"), "c"),
                created: false,
                orphan: false,
            },
        ]
        .into();
        let record = Record {
            key: "crp.web".into(),
            entries,
            abandon: true,
            run: Some(crate::rollout::staged::RunDelivery {
                run: "web-rollout".into(),
                stage: "canary".into(),
                resource_snapshot_index: 3,
                resource_snapshot: "h".into(),
                render_commit: "c2".into(),
                init_commit: "c1".into(),
            }),
            mark: Some(Mark::new(
                &crate::push::writer::Identity::process("apply"),
                "abc",
                std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000),
                std::time::Duration::from_secs(60),
            )),
            resource_version: Some("42".into()),
        };
        let cm = config_map(&record);
        assert_eq!(cm["metadata"]["name"], "applied.crp.web");
        assert_eq!(parse(&cm).unwrap(), record);
    }

    #[test]
    fn a_broken_record_names_itself() {
        let cm = json!({"metadata": {"name": "applied.crp.x"}, "data": {"objects": "{"}});
        let e = parse(&cm).unwrap_err().to_string();
        assert!(
            e.starts_with("record gitfleet-system/applied.crp.x: data.objects"),
            "{e}"
        );
    }

    #[test]
    fn stale_entries_come_last_wave_first() {
        let ns = Entry {
            object: obj("v1", "Namespace", None, "web"),
            created: true,
            orphan: false,
        };
        let cm = Entry {
            object: obj("v1", "ConfigMap", Some("web"), "c"),
            created: true,
            orphan: false,
        };
        let kept = Entry {
            object: obj("v1", "ConfigMap", Some("web"), "keep"),
            created: true,
            orphan: false,
        };
        let old: BTreeSet<Entry> = [ns.clone(), cm.clone(), kept.clone()].into();
        let delivered: BTreeSet<ObjectRef> = [kept.object].into();
        assert_eq!(stale(&old, &delivered), [cm, ns]);
    }
}
