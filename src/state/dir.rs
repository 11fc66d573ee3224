//! The directory backend (`--state directory`, the default; `--state-dir DIR`): what must survive between runs —
//! the last schedule (bindings, decisions, policy indices; `schedule.json`, shared with
//! `gitfleet schedule --state`) and the rollout's state (`daemon.json`, see
//! [`crate::rollout::RolloutState`]) — written crash-safely (temporary file, fsync, rename, fsync
//! of the folder) in a versioned format. Directories written by gitfleet 0.1.0 read unchanged.
//!
//! A writer ([`StateStore::lock`]: the daemon, `schedule --save`) holds an exclusive lock on
//! `gitfleet.lock` in the directory for as long as it lives (flock on Linux, std's
//! `File::try_lock`), with its pid in the file: two writers on one directory would interleave
//! their saves. Readers (`plan --state`, `schedule --state`) do not lock: every save is an
//! atomic rename.

use super::{StateBackend, StateError, FORMAT_VERSION};
use crate::model::PlacementKey;
use crate::rollout::{PlacementState, RolloutState};
use crate::schedule::{PlacementSchedule, Previous};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const SCHEDULE_FILE: &str = "schedule.json";
const ROLLOUT_FILE: &str = "daemon.json";
/// Held by the directory's one writer; holds its pid.
pub const LOCK_FILE: &str = "gitfleet.lock";

/// `daemon.json`: the rollout's state behind the format version.
#[derive(Serialize)]
struct RolloutFile<'a> {
    version: u32,
    #[serde(flatten)]
    state: &'a RolloutState,
}

/// `schedule.json` as it is read (its `version` is checked before: [`StateStore::read_versioned`]).
#[derive(Debug, Deserialize)]
struct ScheduleFile {
    commit: String,
    placements: Vec<PlacementSchedule>,
}

/// [`ScheduleFile`] as it is written: borrowed, since the daemon saves a schedule of thousands
/// of bindings at every reconcile and a copy of it only to serialise it was waste.
#[derive(Serialize)]
struct ScheduleFileRef<'a> {
    version: u32,
    commit: &'a str,
    placements: &'a [PlacementSchedule],
}

/// A state directory.
#[derive(Debug, Clone)]
pub struct StateStore {
    dir: PathBuf,
    /// The writer's lock ([`StateStore::lock`]), released when the last clone is dropped.
    _lock: Option<std::sync::Arc<fs::File>>,
    /// The digest of what this store last wrote to each file: a save that would write the
    /// same bytes again (the schedule between commits, most of the time) writes and syncs
    /// nothing.
    written: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<&'static str, [u8; 32]>>>,
    /// Each placement's part of `daemon.json` as last written, with the state it was written
    /// from: a placement whose state is still that shared value is not serialised again.
    fragments: std::sync::Arc<std::sync::Mutex<Fragments>>,
}

type Fragments = std::collections::HashMap<PlacementKey, (Arc<PlacementState>, Vec<u8>)>;

impl StateStore {
    /// Opens (and creates if needed) a state directory.
    pub fn open(dir: &Path) -> Result<StateStore, StateError> {
        fs::create_dir_all(dir).map_err(|source| StateError::Dir {
            dir: dir.to_path_buf(),
            source,
        })?;
        Ok(StateStore {
            dir: dir.to_path_buf(),
            _lock: None,
            written: Default::default(),
            fragments: Default::default(),
        })
    }

    /// Opens a state directory to write it: takes its exclusive lock, or fails at once naming
    /// the holder's pid ([`StateError::Locked`]). A directory that cannot be written is refused
    /// here, before anything else happens.
    pub fn lock(dir: &Path) -> Result<StateStore, StateError> {
        let mut store = StateStore::open(dir)?;
        let path = dir.join(LOCK_FILE);
        // Not truncated on open: the holder's pid must stay readable to the loser.
        let mut file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|source| StateError::Dir {
                dir: dir.to_path_buf(),
                source,
            })?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                let mut text = String::new();
                use std::io::Read;
                let holder = match file.read_to_string(&mut text) {
                    Ok(_) if !text.trim().is_empty() => format!("pid {}", text.trim()),
                    Ok(_) => "pid not written yet".to_string(),
                    Err(e) => format!("pid unreadable: {e}"),
                };
                return Err(StateError::Locked {
                    dir: dir.to_path_buf(),
                    lock: path,
                    holder,
                });
            }
            Err(fs::TryLockError::Error(source)) => {
                return Err(StateError::Write { file: path, source })
            }
        }
        let write_pid = |file: &mut fs::File| -> std::io::Result<()> {
            file.set_len(0)?;
            use std::io::Seek;
            file.seek(std::io::SeekFrom::Start(0))?;
            writeln!(file, "{}", std::process::id())?;
            file.sync_all()
        };
        write_pid(&mut file).map_err(|source| StateError::Write {
            file: path.clone(),
            source,
        })?;
        store._lock = Some(std::sync::Arc::new(file));
        Ok(store)
    }

    /// Reads every state file once, so that a truncated or corrupt one is refused at start
    /// (naming the file) rather than at the first reconcile.
    pub fn check(&self) -> Result<(), StateError> {
        self.load_schedule()?;
        self.load_rollout()?;
        Ok(())
    }

    /// A file of the directory, checked for the format version; `None` when it does not exist.
    fn read_versioned<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<Option<T>, StateError> {
        let file = self.dir.join(name);
        let bytes = match fs::read(&file) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(StateError::Read { file, source }),
        };
        let corrupt = |e: serde_json::Error| StateError::Corrupt {
            file: file.clone(),
            message: e.to_string(),
        };
        let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(corrupt)?;
        let found = value.get("version").and_then(|v| v.as_u64()).unwrap_or(0) as u32;
        if found != FORMAT_VERSION {
            return Err(StateError::Version { file, found });
        }
        serde_json::from_value(value).map(Some).map_err(corrupt)
    }

    /// The last saved schedule, by placement; empty when nothing was saved yet.
    pub fn load_schedule(&self) -> Result<(Option<String>, Previous), StateError> {
        let Some(parsed) = self.read_versioned::<ScheduleFile>(SCHEDULE_FILE)? else {
            return Ok((None, Previous::new()));
        };
        let previous = parsed
            .placements
            .into_iter()
            .map(|p| (p.key.clone(), p))
            .collect();
        Ok((Some(parsed.commit), previous))
    }

    pub fn save_schedule(
        &self,
        commit: &str,
        placements: &[PlacementSchedule],
    ) -> Result<(), StateError> {
        let file = ScheduleFileRef {
            version: FORMAT_VERSION,
            commit,
            placements,
        };
        let bytes = serde_json::to_vec_pretty(&file).expect("state serialises");
        self.write_changed(SCHEDULE_FILE, &bytes)
    }

    /// Whether a rollout state was ever saved here (`false`: a new or lost directory).
    pub fn has_rollout(&self) -> bool {
        self.dir.join(ROLLOUT_FILE).exists()
    }

    /// The rollout's state; empty when nothing was saved yet.
    pub fn load_rollout(&self) -> Result<RolloutState, StateError> {
        Ok(self.read_versioned(ROLLOUT_FILE)?.unwrap_or_default())
    }

    pub fn save_rollout(&self, state: &RolloutState) -> Result<(), StateError> {
        let mut fragments = self.fragments.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = rollout_file_bytes(state, &mut fragments);
        self.write_changed(ROLLOUT_FILE, &bytes)
    }

    /// Writes `bytes` to `name` ([`write_atomic`]) unless this store last wrote exactly them
    /// there.
    fn write_changed(&self, name: &'static str, bytes: &[u8]) -> Result<(), StateError> {
        use sha2::Digest;
        let digest: [u8; 32] = sha2::Sha256::digest(bytes).into();
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if written.get(name) == Some(&digest) {
            return Ok(());
        }
        // Forgotten first: a failed write must not be taken for the last one written.
        written.remove(name);
        write_atomic(&self.dir.join(name), bytes)?;
        written.insert(name, digest);
        Ok(())
    }
}

impl StateBackend for StateStore {
    fn check(&self) -> Result<(), StateError> {
        StateStore::check(self)
    }

    fn has_rollout(&self) -> Result<bool, StateError> {
        Ok(StateStore::has_rollout(self))
    }

    fn load_schedule(&self) -> Result<(Option<String>, crate::schedule::Previous), StateError> {
        StateStore::load_schedule(self)
    }

    fn load_rollout(&self) -> Result<RolloutState, StateError> {
        StateStore::load_rollout(self)
    }

    /// The schedule first: a crash between the two writes re-applies one step, which is
    /// idempotent; it never forgets one.
    fn save(
        &self,
        schedule: Option<(&str, &[PlacementSchedule])>,
        state: &RolloutState,
    ) -> Result<(), StateError> {
        if let Some((commit, placements)) = schedule {
            self.save_schedule(commit, placements)?;
        }
        self.save_rollout(state)
    }

    fn location(&self) -> String {
        format!("directory {}", self.dir.display())
    }
}

/// `daemon.json`'s bytes: exactly `serde_json::to_vec_pretty` of the [`RolloutFile`], built
/// from each placement's part, which is serialised again only when its state is no longer
/// the shared value it was last serialised from. At 1,000 placements serialising the whole
/// state took most of every reconcile's save, though a reconcile changes few placements.
fn rollout_file_bytes(state: &RolloutState, fragments: &mut Fragments) -> Vec<u8> {
    // Everything but the placements (a struct literal, so that a new field is not forgotten).
    let rest = RolloutState {
        serving: state.serving.clone(),
        rejected: state.rejected.clone(),
        held: state.held.clone(),
        placements: Default::default(),
        members: state.members.clone(),
        runs: state.runs.clone(),
    };
    let file = RolloutFile {
        version: FORMAT_VERSION,
        state: &rest,
    };
    let outline = serde_json::to_vec_pretty(&file).expect("rollout state serialises");
    // The pretty printer's indent at the placements' values (inside the file's object and the
    // map): each value's own lines move in by it.
    const EMPTY: &[u8] = b"\n  \"placements\": {}";
    const INDENT: &[u8] = b"    ";
    fragments.retain(|key, _| state.placements.contains_key(key));
    let mut map = Vec::new();
    for (i, (key, ps)) in state.placements.iter().enumerate() {
        let fresh = match fragments.get(key) {
            Some((from, _)) => !Arc::ptr_eq(from, ps),
            None => true,
        };
        if fresh {
            let plain = serde_json::to_vec_pretty(&**ps).expect("placement state serialises");
            let mut indented = Vec::with_capacity(plain.len() + plain.len() / 8);
            for &b in &plain {
                indented.push(b);
                if b == b'\n' {
                    indented.extend_from_slice(INDENT);
                }
            }
            fragments.insert(key.clone(), (ps.clone(), indented));
        }
        map.extend_from_slice(if i == 0 { b"\n" } else { b",\n" });
        map.extend_from_slice(INDENT);
        serde_json::to_writer(&mut map, &key.to_string()).expect("an id serialises");
        map.extend_from_slice(b": ");
        map.extend_from_slice(&fragments[key].1);
    }
    if state.placements.is_empty() {
        return outline;
    }
    map.extend_from_slice(b"\n  }");
    // Raw newlines only ever separate tokens (inside strings they are escaped), so the empty
    // map at the top level is found exactly once.
    let at = outline
        .windows(EMPTY.len())
        .position(|w| w == EMPTY)
        .expect("the file has a placements map");
    let mut out = Vec::with_capacity(outline.len() + map.len());
    out.extend_from_slice(&outline[..at + EMPTY.len() - 1]);
    out.extend_from_slice(&map);
    out.extend_from_slice(&outline[at + EMPTY.len()..]);
    out
}

/// The rollout state a daemon saved in `dir`, read without creating, locking or writing
/// anything (for commands that look at a daemon's state while it runs: it writes by atomic
/// rename, so a read sees one whole file). A directory without the file is an error here: it
/// is not a daemon's state directory (yet).
pub fn read_rollout(dir: &Path) -> Result<RolloutState, StateError> {
    let file = dir.join(ROLLOUT_FILE);
    if !file.exists() {
        return Err(StateError::Read {
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no saved state: is this the --state-dir of a `gitfleet run`?",
            ),
            file,
        });
    }
    StateStore {
        dir: dir.to_path_buf(),
        _lock: None,
        written: Default::default(),
        fragments: Default::default(),
    }
    .load_rollout()
}

/// Writes `bytes` to `path` so that a crash leaves either the old or the new content.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    let err = |source| StateError::Write {
        file: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(err)?;
    tmp.write_all(bytes).map_err(err)?;
    tmp.as_file().sync_all().map_err(err)?;
    tmp.persist(path).map_err(|e| err(e.error))?;
    // The rename is durable only once the folder itself is synced.
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{Binding, BindingState};

    fn sample() -> PlacementSchedule {
        PlacementSchedule {
            key: "crp/app".parse().unwrap(),
            policy_snapshot_index: Some(2),
            policy_hash: Some("h".into()),
            selected: vec!["a".into()],
            decisions: vec![],
            conditions: vec![],
            bindings: vec![Binding {
                cluster: "a".into(),
                state: BindingState::Bound,
                policy_index: 2,
                affinity_score: Some(3),
                topology_spread_score: Some(0),
                previous_state: None,
            }],
            decision_groups: vec![],
        }
    }

    /// A save that would write the same bytes again leaves the file alone (each write is a new
    /// file renamed over the old one, so its inode tells).
    #[test]
    fn the_same_bytes_are_not_written_twice() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::lock(dir.path()).unwrap();
        let inode = |name: &str| fs::metadata(dir.path().join(name)).unwrap().ino();
        store.save_schedule("c1", &[sample()]).unwrap();
        let first = inode(SCHEDULE_FILE);
        store.save_schedule("c1", &[sample()]).unwrap();
        assert_eq!(inode(SCHEDULE_FILE), first, "unchanged: not written");
        store.save_schedule("c2", &[sample()]).unwrap();
        let second = inode(SCHEDULE_FILE);
        assert_ne!(second, first, "changed: written");
        assert_eq!(store.load_schedule().unwrap().0.as_deref(), Some("c2"));
        // A clone is the same store: it knows what was written.
        store.clone().save_schedule("c2", &[sample()]).unwrap();
        assert_eq!(inode(SCHEDULE_FILE), second);
    }

    #[test]
    fn round_trips_and_starts_empty() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(&dir.path().join("state")).unwrap();
        assert!(store.load_schedule().unwrap().1.is_empty());
        store.save_schedule("abc", &[sample()]).unwrap();
        let (commit, prev) = store.load_schedule().unwrap();
        assert_eq!(commit.as_deref(), Some("abc"));
        assert_eq!(prev[&"crp/app".parse().unwrap()], sample());
        // No temporary files are left behind.
        let names: Vec<_> = fs::read_dir(dir.path().join("state"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("schedule.json")]);
    }

    #[test]
    fn the_rollout_state_round_trips_and_refuses_other_versions() {
        use crate::rollout::{BindingHealth, ClusterState, Revision};
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).unwrap();
        assert_eq!(store.load_rollout().unwrap(), RolloutState::default());
        let mut s = RolloutState {
            serving: Some("abc".into()),
            ..RolloutState::default()
        };
        std::sync::Arc::make_mut(s.placements.entry("crp/app".parse().unwrap()).or_default())
            .clusters
            .insert(
                "m1".into(),
                ClusterState {
                    objects: Default::default(),
                    revision: Some(Revision {
                        resource_index: 2,
                        rendered: "h".into(),
                    }),
                    attempted: None,
                    commit: Some("abc".into()),
                    health: BindingHealth::AvailableUntrackable { since: 7 },
                    diffs: vec![],
                    not_available: vec![],
                    last_error: None,
                    recheck: None,
                    updated_at: 9,
                },
            );
        store.save_rollout(&s).unwrap();
        assert_eq!(store.load_rollout().unwrap(), s);
        let text = fs::read_to_string(dir.path().join(ROLLOUT_FILE)).unwrap();
        assert!(
            text.starts_with(&format!(
                "{{\n  \"version\": {FORMAT_VERSION},\n  \"serving\""
            )),
            "{text}"
        );
        fs::write(
            dir.path().join(ROLLOUT_FILE),
            text.replacen(
                &format!("\"version\": {FORMAT_VERSION}"),
                "\"version\": 99",
                1,
            ),
        )
        .unwrap();
        let e = store.load_rollout().unwrap_err().to_string();
        assert!(e.contains("version 99"), "{e}");
    }

    /// A state directory gitfleet 0.1.0 wrote mid-rollout (tests/fixtures/state-0.1.0) reads
    /// into typed placement keys, and writes back byte for byte.
    #[test]
    fn a_state_directory_written_by_0_1_0_reads_and_writes_back_unchanged() {
        use crate::model::PlacementKind;
        use crate::rollout::BindingHealth;
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/state-0.1.0/state");
        let store = StateStore::open(&fixture).unwrap();
        let state = store.load_rollout().unwrap();
        let kinds: Vec<(PlacementKind, String)> = state
            .placements
            .keys()
            .map(|k| (k.kind, k.to_string()))
            .collect();
        assert_eq!(
            kinds,
            [
                (PlacementKind::ClusterResourcePlacement, "crp/batch".into()),
                (PlacementKind::ClusterResourcePlacement, "crp/shop".into()),
                (
                    PlacementKind::ClusterResourcePlacement,
                    "crp/web-namespace".into()
                ),
                (PlacementKind::OcmPlacement, "ocm/ocm-apps/agent".into()),
                (PlacementKind::ResourcePlacement, "rp/web/web".into()),
            ]
        );
        let shop = &state.placements[&"crp/shop".parse().unwrap()];
        let charlie = &shop.clusters["charlie"];
        assert_eq!(charlie.health, BindingHealth::Failed);
        assert_eq!(charlie.revision.as_ref().unwrap().resource_index, 0);
        assert_eq!(charlie.attempted.as_ref().unwrap().resource_index, 1);
        let (commit, previous) = store.load_schedule().unwrap();
        assert_eq!(commit, state.serving);
        assert_eq!(previous.len(), 5);

        let copy = tempfile::tempdir().unwrap();
        let again = StateStore::open(copy.path()).unwrap();
        again.save_rollout(&state).unwrap();
        assert_eq!(
            fs::read(copy.path().join(ROLLOUT_FILE)).unwrap(),
            fs::read(fixture.join(ROLLOUT_FILE)).unwrap()
        );
    }

    /// `daemon.json` built from per-placement parts is byte for byte what serialising the
    /// whole state writes, after the first save and after one placement changed (its part
    /// serialised again, the others reused), with ids and strings that need escaping.
    #[test]
    fn the_rollout_file_from_parts_is_the_whole_state_serialised() {
        use crate::rollout::{BindingHealth, ClusterState};
        let whole = |state: &RolloutState| {
            serde_json::to_vec_pretty(&RolloutFile {
                version: FORMAT_VERSION,
                state,
            })
            .unwrap()
        };
        let cluster = |error: &str| ClusterState {
            revision: None,
            attempted: None,
            commit: Some("c1".into()),
            health: BindingHealth::Failed,
            diffs: vec!["a\n\"b\"".into()],
            not_available: vec![],
            last_error: Some(error.into()),
            recheck: None,
            updated_at: 7,
            objects: ["v1/ConfigMap/ns/x".to_string()].into(),
        };
        let mut state = RolloutState {
            serving: Some("abc".into()),
            ..RolloutState::default()
        };
        let mut fragments = Fragments::new();
        assert_eq!(rollout_file_bytes(&state, &mut fragments), whole(&state));
        for id in ["crp/a", "rp/ns/b\"q", "ocm/ns/c"] {
            let mut ps = PlacementState::default();
            ps.clusters
                .insert("m1".into(), cluster("x\n  \"placements\": {}"));
            ps.clusters.insert("m2".into(), cluster("y"));
            state.placements.insert(id.parse().unwrap(), Arc::new(ps));
        }
        assert_eq!(rollout_file_bytes(&state, &mut fragments), whole(&state));
        let kept = fragments.clone();
        let b: PlacementKey = "rp/ns/b\"q".parse().unwrap();
        Arc::make_mut(state.placements.get_mut(&b).unwrap())
            .clusters
            .get_mut("m2")
            .unwrap()
            .updated_at = 8;
        state.placements.remove(&"ocm/ns/c".parse().unwrap());
        assert_eq!(rollout_file_bytes(&state, &mut fragments), whole(&state));
        let a: PlacementKey = "crp/a".parse().unwrap();
        assert!(
            Arc::ptr_eq(&fragments[&a].0, &kept[&a].0),
            "unchanged: reused"
        );
        assert_ne!(fragments[&b].1, kept[&b].1, "changed: serialised again");
        assert_eq!(fragments.len(), 2, "a removed placement's part is dropped");
    }

    #[test]
    fn a_second_writer_is_refused_naming_the_holder_and_gets_in_once_it_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let first = StateStore::lock(dir.path()).unwrap();
        let held = first.clone();
        drop(first);
        let e = StateStore::lock(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains(&format!("pid {}", std::process::id())) && e.contains(LOCK_FILE),
            "{e}"
        );
        // Readers are not locked out.
        StateStore::open(dir.path()).unwrap().check().unwrap();
        drop(held);
        // A child another test forks at this moment holds the lock's open file until its exec
        // closes it (close-on-exec): the lock frees when that child execs, so this waits for it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match StateStore::lock(dir.path()) {
                Ok(_) => break,
                Err(e) if std::time::Instant::now() > deadline => panic!("{e}"),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
    }

    #[test]
    fn a_truncated_schedule_is_refused_by_the_start_check_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::lock(dir.path()).unwrap();
        store.save_schedule("abc", &[sample()]).unwrap();
        let file = dir.path().join(SCHEDULE_FILE);
        let text = fs::read(&file).unwrap();
        fs::write(&file, &text[..text.len() / 2]).unwrap();
        let e = store.check().unwrap_err().to_string();
        assert!(e.contains(&file.display().to_string()), "{e}");
    }

    #[test]
    fn unknown_versions_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("schedule.json"),
            r#"{"version": 99, "commit": "x", "placements": []}"#,
        )
        .unwrap();
        let err = StateStore::open(dir.path())
            .unwrap()
            .load_schedule()
            .unwrap_err();
        assert!(err.to_string().contains("format version 99"), "{err}");
        fs::write(dir.path().join("schedule.json"), "not json").unwrap();
        let err = StateStore::open(dir.path())
            .unwrap()
            .load_schedule()
            .unwrap_err();
        assert!(
            err.to_string().contains("is not a gitfleet state file"),
            "{err}"
        );
    }
}
