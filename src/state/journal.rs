//! The state directory's journal (`journal`), without I/O: what each daemon save changed,
//! appended to the directory's last whole files (`schedule.json`, `daemon.json`, the *bases*)
//! instead of writing them again: a save that rewrote them whole would write the whole fleet's
//! state to record a step of one placement; a journal record holds only the placements whose
//! schedule or rollout state changed, and the fleet-wide rest when it changed.
//!
//! The file is a header line naming the bases it applies to (the SHA-256 of each as it was
//! when the journal was begun, `-` for a file that did not exist), then frames:
//! `<length> <sha256 of the payload>\n<payload>\n`, each payload one [`Record`] in JSON. A
//! reader applies the records to a base only if that base's digest is the one the header
//! names: when the writer compacts (writes the bases whole again, then a new journal over the
//! old one), a reader or a restart that meets new bases and the old journal ignores the
//! journal, and the new bases hold everything it did. Replaying a complete journal onto a
//! base that already holds its changes gives the same state (each record carries whole
//! values, the newest last), which is what makes a crash between the two bases' writes safe.
//!
//! A frame cut short by a crash (the tail) is not a record: the save it belonged to did not
//! return, so the step it recorded was not acted on. A frame that does not check out followed
//! by more frames is corruption, refused.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::model::PlacementKey;
use crate::rollout::{PlacementState, RolloutState};
use crate::schedule::{PlacementSchedule, Previous};

pub const JOURNAL_FILE: &str = "journal";
const MAGIC: &str = "gitfleet-journal 1";

/// A file's digest as the header records it (`None`: the file did not exist).
pub type Digest32 = Option<[u8; 32]>;

pub fn digest(bytes: Option<&[u8]>) -> Digest32 {
    bytes.map(|b| Sha256::digest(b).into())
}

/// The bases a journal applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub schedule: Digest32,
    pub rollout: Digest32,
}

impl Header {
    pub fn encode(&self) -> Vec<u8> {
        let part = |d: &Digest32| d.map(|d| hex(&d)).unwrap_or_else(|| "-".into());
        format!(
            "{MAGIC} schedule:{} rollout:{}\n",
            part(&self.schedule),
            part(&self.rollout)
        )
        .into_bytes()
    }

    fn parse(line: &str) -> Option<Header> {
        let rest = line.strip_prefix(MAGIC)?.strip_prefix(' ')?;
        let (schedule, rollout) = rest.split_once(' ')?;
        let part = |s: &str, name: &str| -> Option<Digest32> {
            match s.strip_prefix(name)? {
                "-" => Some(None),
                h => Some(Some(unhex(h)?)),
            }
        };
        Some(Header {
            schedule: part(schedule, "schedule:")?,
            rollout: part(rollout, "rollout:")?,
        })
    }
}

/// One save's changes, as read back.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The commit the schedule was made for, when the save gave a schedule.
    #[serde(default)]
    pub schedule_commit: Option<String>,
    /// Placements whose schedule changed, by id; `null`: no longer scheduled.
    #[serde(default)]
    pub schedules: BTreeMap<String, Option<Arc<PlacementSchedule>>>,
    /// The fleet-wide rollout state (its placements empty), when it changed.
    #[serde(default)]
    pub rest: Option<RolloutState>,
    /// Placements whose rollout state changed, by id; `null`: removed.
    #[serde(default)]
    pub placements: BTreeMap<String, Option<PlacementState>>,
}

/// A record as it is written, from JSON already serialised (the rollout states' parts are the
/// ones `daemon.json` is assembled from, so they are serialised once).
#[derive(Debug, Default)]
pub struct RecordBytes<'a> {
    pub schedule_commit: Option<&'a str>,
    pub schedules: Vec<(String, Option<Vec<u8>>)>,
    pub rest: Option<&'a [u8]>,
    pub placements: Vec<(String, Option<&'a [u8]>)>,
}

impl RecordBytes<'_> {
    pub fn is_empty(&self) -> bool {
        self.schedule_commit.is_none()
            && self.schedules.is_empty()
            && self.rest.is_none()
            && self.placements.is_empty()
    }

    /// The framed record: `<length> <sha256>\n<payload>\n`.
    pub fn frame(&self) -> Vec<u8> {
        let mut p = Vec::new();
        let mut first = true;
        let mut field = |p: &mut Vec<u8>, name: &str| {
            p.extend_from_slice(if first { b"{\"" } else { b",\"" });
            first = false;
            p.extend_from_slice(name.as_bytes());
            p.extend_from_slice(b"\":");
        };
        if let Some(c) = self.schedule_commit {
            field(&mut p, "scheduleCommit");
            serde_json::to_writer(&mut p, c).expect("a string serialises");
        }
        let map = |p: &mut Vec<u8>, entries: &mut dyn Iterator<Item = (&String, Option<&[u8]>)>| {
            p.push(b'{');
            for (i, (id, value)) in entries.enumerate() {
                if i > 0 {
                    p.push(b',');
                }
                serde_json::to_writer(&mut *p, id).expect("an id serialises");
                p.push(b':');
                p.extend_from_slice(value.unwrap_or(b"null"));
            }
            p.push(b'}');
        };
        if !self.schedules.is_empty() {
            field(&mut p, "schedules");
            map(
                &mut p,
                &mut self.schedules.iter().map(|(k, v)| (k, v.as_deref())),
            );
        }
        if let Some(rest) = self.rest {
            field(&mut p, "rest");
            p.extend_from_slice(rest);
        }
        if !self.placements.is_empty() {
            field(&mut p, "placements");
            map(&mut p, &mut self.placements.iter().map(|(k, v)| (k, *v)));
        }
        if first {
            p.push(b'{');
        }
        p.push(b'}');
        let mut out = format!("{} {}\n", p.len(), hex(&Sha256::digest(&p))).into_bytes();
        out.extend_from_slice(&p);
        out.push(b'\n');
        out
    }
}

/// A journal as read.
#[derive(Debug)]
pub struct Parsed {
    pub header: Header,
    pub records: Vec<Record>,
}

/// Reads a journal's bytes; `Ok(None)` when not even its header was written whole. A torn
/// last frame is dropped; any other frame that does not check out is an error.
pub fn parse(bytes: &[u8]) -> Result<Option<Parsed>, String> {
    let Some(end) = bytes.iter().position(|&b| b == b'\n') else {
        return Ok(None);
    };
    let line = std::str::from_utf8(&bytes[..end]).map_err(|_| "the header is not text")?;
    let header = Header::parse(line).ok_or_else(|| format!("not a journal header: {line:?}"))?;
    let mut records = Vec::new();
    let mut at = end + 1;
    while at < bytes.len() {
        let frame = match frame_at(bytes, at) {
            Frame::Whole { payload, next } => {
                let record = serde_json::from_slice(payload)
                    .map_err(|e| format!("record {} at byte {at}: {e}", records.len() + 1))?;
                records.push(record);
                next
            }
            Frame::Torn => break,
            Frame::Bad(why) => {
                return Err(format!("record {} at byte {at}: {why}", records.len() + 1))
            }
        };
        at = frame;
    }
    Ok(Some(Parsed { header, records }))
}

/// The length of the journal's part that a writer may append after: the header and every
/// whole frame (a torn tail is cut off before appending, or it would end up mid-file).
pub fn whole_len(bytes: &[u8]) -> usize {
    let Some(end) = bytes.iter().position(|&b| b == b'\n') else {
        return 0;
    };
    let mut at = end + 1;
    while at < bytes.len() {
        match frame_at(bytes, at) {
            Frame::Whole { next, .. } => at = next,
            Frame::Torn | Frame::Bad(_) => break,
        }
    }
    at
}

enum Frame<'a> {
    Whole {
        payload: &'a [u8],
        next: usize,
    },
    /// Cut short, or not checking out with nothing after it: the tail of an interrupted save.
    Torn,
    Bad(String),
}

fn frame_at(bytes: &[u8], at: usize) -> Frame<'_> {
    let rest = &bytes[at..];
    let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
        return Frame::Torn;
    };
    let parsed = std::str::from_utf8(&rest[..nl]).ok().and_then(|l| {
        let (len, sum) = l.split_once(' ')?;
        Some((len.parse::<usize>().ok()?, unhex(sum)?))
    });
    let Some((len, sum)) = parsed else {
        return torn_or_bad(bytes, at + nl + 1, "not a frame header");
    };
    let start = nl + 1;
    if rest.len() < start + len + 1 {
        return Frame::Torn;
    }
    let payload = &rest[start..start + len];
    let next = at + start + len + 1;
    if rest[start + len] != b'\n' || <[u8; 32]>::from(Sha256::digest(payload)) != sum {
        return torn_or_bad(bytes, next, "its digest does not match");
    }
    Frame::Whole { payload, next }
}

/// A frame that does not check out is the torn tail if nothing follows it, else corruption.
fn torn_or_bad(bytes: &[u8], after: usize, why: &str) -> Frame<'static> {
    if after >= bytes.len() {
        Frame::Torn
    } else {
        Frame::Bad(why.to_string())
    }
}

/// `base` (the schedule file's commit and placements) with the records' schedule changes.
pub fn replay_schedule(
    mut commit: Option<String>,
    mut previous: Previous,
    records: Vec<Record>,
) -> Result<(Option<String>, Previous), String> {
    for r in records {
        if let Some(c) = r.schedule_commit {
            commit = Some(c);
        }
        for (id, s) in r.schedules {
            let key: PlacementKey = id.parse().map_err(|e| format!("{id:?}: {e}"))?;
            match s {
                Some(s) => previous.insert(key, s),
                None => previous.remove(&key),
            };
        }
    }
    Ok((commit, previous))
}

/// `base` (the rollout file's state) with the records' rollout changes.
pub fn replay_rollout(
    mut state: RolloutState,
    records: Vec<Record>,
) -> Result<RolloutState, String> {
    for r in records {
        if let Some(rest) = r.rest {
            let placements = std::mem::take(&mut state.placements);
            state = RolloutState { placements, ..rest };
        }
        for (id, p) in r.placements {
            let key: PlacementKey = id.parse().map_err(|e| format!("{id:?}: {e}"))?;
            match p {
                Some(p) => state.placements.insert(key, Arc::new(p)),
                None => state.placements.remove(&key),
            };
        }
    }
    Ok(state)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(commit: &str, id: &str, state: &[u8]) -> Vec<u8> {
        RecordBytes {
            schedule_commit: Some(commit),
            schedules: vec![],
            rest: None,
            placements: vec![(id.to_string(), Some(state))],
        }
        .frame()
    }

    fn journal(frames: &[Vec<u8>]) -> Vec<u8> {
        let mut bytes = Header {
            schedule: digest(Some(b"s")),
            rollout: None,
        }
        .encode();
        for f in frames {
            bytes.extend_from_slice(f);
        }
        bytes
    }

    #[test]
    fn the_header_round_trips() {
        for h in [
            Header {
                schedule: None,
                rollout: None,
            },
            Header {
                schedule: digest(Some(b"a")),
                rollout: digest(Some(b"")),
            },
        ] {
            let text = String::from_utf8(h.encode()).unwrap();
            assert_eq!(Header::parse(text.trim_end()), Some(h));
        }
        assert_eq!(
            Header::parse("gitfleet-journal 2 schedule:- rollout:-"),
            None
        );
    }

    #[test]
    fn records_read_back_and_a_torn_tail_is_dropped_but_corruption_inside_is_refused() {
        let a = record("c1", "crp/a", b"{\"clusters\": {}}");
        let b = record("c2", "crp/b", b"{}");
        let whole = journal(&[a.clone(), b.clone()]);
        let parsed = parse(&whole).unwrap().unwrap();
        assert_eq!(parsed.records.len(), 2);
        assert_eq!(parsed.records[1].schedule_commit.as_deref(), Some("c2"));
        assert!(parsed.records[0].placements["crp/a"].is_some());
        assert_eq!(whole_len(&whole), whole.len());

        // Every cut inside the last frame is a torn tail: the first record stays.
        let first = journal(std::slice::from_ref(&a)).len();
        for cut in first..whole.len() {
            let parsed = parse(&whole[..cut]).unwrap().unwrap();
            assert_eq!(parsed.records.len(), 1, "cut at {cut}");
            assert_eq!(whole_len(&whole[..cut]), first, "cut at {cut}");
        }
        // A header cut short is no journal at all.
        assert!(parse(&whole[..10]).unwrap().is_none());

        // A flipped byte in the first payload, with a frame after it, is corruption.
        let mut bad = whole.clone();
        let at = journal(&[]).len() + a.iter().position(|&x| x == b'\n').unwrap() + 5;
        bad[at] ^= 0x20;
        let e = parse(&bad).unwrap_err();
        assert!(e.contains("record 1") && e.contains("digest"), "{e}");
        // In the last frame, it is a torn tail.
        let mut tail = whole;
        let n = tail.len();
        tail[n - 3] ^= 0x20;
        assert_eq!(parse(&tail).unwrap().unwrap().records.len(), 1);
    }

    #[test]
    fn replay_takes_the_newest_value_of_each_placement_and_removals() {
        let state = |n: u64| {
            let mut p = PlacementState::default();
            p.clusters.insert(
                "m".into(),
                crate::rollout::ClusterState {
                    revision: None,
                    details: Default::default(),
                    commit: None,
                    health: crate::rollout::BindingHealth::Pending,
                    recheck: None,
                    drift: false,
                    reread: false,
                    delivered_by: None,
                    updated_at: n,
                    objects: Default::default(),
                },
            );
            serde_json::to_vec(&p).unwrap()
        };
        let (s1, s2) = (state(1), state(2));
        let rest = serde_json::to_vec(&RolloutState {
            serving: Some("c9".into()),
            ..Default::default()
        })
        .unwrap();
        let frames = [
            record("c1", "crp/a", &s1),
            RecordBytes {
                rest: Some(&rest),
                placements: vec![("crp/a".into(), Some(&s2)), ("crp/b".into(), Some(&s1))],
                ..Default::default()
            }
            .frame(),
            RecordBytes {
                placements: vec![("crp/b".into(), None)],
                ..Default::default()
            }
            .frame(),
        ];
        let parsed = parse(&journal(&frames)).unwrap().unwrap();
        let mut base = RolloutState::default();
        base.placements.insert(
            "crp/c".parse().unwrap(),
            Arc::new(PlacementState::default()),
        );
        let replayed = replay_rollout(base, parsed.records).unwrap();
        assert_eq!(replayed.serving.as_deref(), Some("c9"));
        let ids: Vec<String> = replayed.placements.keys().map(|k| k.to_string()).collect();
        assert_eq!(ids, ["crp/a", "crp/c"]);
        assert_eq!(
            replayed.placements[&"crp/a".parse().unwrap()].clusters["m"].updated_at,
            2
        );
    }
}
