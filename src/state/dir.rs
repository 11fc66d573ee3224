//! The directory backend (`--state directory`, the default; `--state-dir DIR`): what must survive between runs —
//! the last schedule (bindings, decisions, policy indices; `schedule.json`, shared with
//! `gitfleet schedule --state`) and the rollout's state (`daemon.json`, see
//! [`crate::rollout::RolloutState`]) — written crash-safely (temporary file, fsync, rename, fsync
//! of the folder) in a versioned format. Directories written by gitfleet 0.1.0 read unchanged.
//!
//! The daemon's saves do not write those whole files each time: its first save does, then each
//! save appends what changed to `journal` (one synced record; [`super::journal`]), and the files
//! are written whole again once the journal reaches a quarter of their size (a restart after a
//! crash replays it) and when the daemon stops cleanly.
//! Every read goes through the journal, so a reader sees the last save either way.
//!
//! A writer ([`StateStore::lock`]: the daemon, `schedule --save`) holds an exclusive lock on
//! `gitfleet.lock` in the directory for as long as it lives (flock on Linux, std's
//! `File::try_lock`), with its pid in the file: two writers on one directory would interleave
//! their saves. Readers (`plan --state`, `schedule --state`) do not lock: every save is an
//! atomic rename.

use super::{journal, StateBackend, StateError, FORMAT_VERSION};
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
    placements: Vec<Arc<PlacementSchedule>>,
}

/// [`ScheduleFile`] as it is written: borrowed, since the daemon saves a schedule of thousands
/// of bindings at every reconcile and a copy of it only to serialise it was waste.
#[derive(Serialize)]
struct ScheduleFileRef<'a> {
    version: u32,
    commit: &'a str,
    placements: &'a [Arc<PlacementSchedule>],
}

/// A state directory.
#[derive(Debug, Clone)]
pub struct StateStore {
    dir: PathBuf,
    /// The writer's lock ([`StateStore::lock`]), released when the last clone is dropped.
    _lock: Option<std::sync::Arc<fs::File>>,
    /// What this store last wrote (clones share it): saves are serialised by it.
    written: std::sync::Arc<std::sync::Mutex<Written>>,
}

/// What a store knows of what it wrote to its directory.
#[derive(Debug, Default)]
struct Written {
    /// The digest of what this store last wrote to each whole file: a whole write of the same
    /// bytes again (the schedule between commits, most of the time) writes and syncs nothing.
    digests: std::collections::HashMap<&'static str, [u8; 32]>,
    /// Each placement's part of `daemon.json` as last written or journaled, with the state it
    /// was written from: a placement whose state is still that shared value is not serialised
    /// again, and not journaled again.
    fragments: Fragments,
    /// The journal this store began and appends to; `None`: the next save compacts (writes
    /// the whole files and begins a new journal), as the first save of every store does.
    journal: Option<Appending>,
    /// The schedule the directory holds (whole file and journal), as this store saved it.
    schedule: Option<(String, Previous)>,
    /// The digest and length of the schedule file this store last wrote, while no change of
    /// the schedule has been journaled since: a compaction then keeps the file as it is
    /// instead of serialising every placement's schedule again to find the same bytes (a
    /// restart compacts more than once with the schedule unchanged).
    schedule_file: Option<([u8; 32], u64)>,
    /// The fleet-wide rest of the rollout state as last written or journaled, and its compact
    /// JSON: a save whose rest is the same (most of them) does not serialise it to compare.
    rest: Option<(RolloutState, Vec<u8>)>,
    /// A writer's start ([`StateStore::adopt`]): what its schedule read found, kept until its
    /// rollout read takes both for written.
    adopted: Option<Adopted>,
}

/// The schedule half of an adoption.
#[derive(Debug)]
struct Adopted {
    schedule: Option<(String, Previous)>,
    schedule_file: Option<([u8; 32], u64)>,
}

#[derive(Debug)]
struct Appending {
    file: fs::File,
    /// Its length with no record yet (the header's).
    begun: u64,
    len: u64,
    /// The whole files' size when the journal was begun: it is compacted at a quarter of it.
    bases: u64,
}

type Fragments = crate::fast_hash::HashMap<PlacementKey, (Arc<PlacementState>, Part)>;

/// Where a placement's part of `daemon.json`, as last serialised, is.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    /// Compact JSON ([`fragment`]), journaled since the file was last written.
    Compact(Vec<u8>),
    /// Written out, pretty, at this range of the file this store last wrote, with the
    /// [`part_hash`] of those bytes: on disk, not in memory (held in memory, every placement's
    /// part would be a large share of the daemon's heap at rest). A compaction copies the
    /// range only when it still hashes alike (a failed write may have left another file).
    InFile(std::ops::Range<usize>, u64),
    /// In the file this store adopted ([`StateStore::adopt`]), where not known.
    Adopted,
}

/// A fast hash of a placement's part as written ([`Part::InFile`]).
fn part_hash(bytes: &[u8]) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = foldhash::fast::FixedState::with_seed(0).build_hasher();
    h.write(bytes);
    h.finish()
}

/// Where a compaction finds the parts of the file it wrote last.
trait PartSource {
    /// The bytes at `range`, if they are still the part that hashed to `hash`.
    fn part(&mut self, range: &std::ops::Range<usize>, hash: u64) -> Option<&[u8]>;
}

/// Parts in memory.
#[cfg(test)]
struct InMemory<'a>(Option<&'a [u8]>);

#[cfg(test)]
impl PartSource for InMemory<'_> {
    fn part(&mut self, range: &std::ops::Range<usize>, hash: u64) -> Option<&[u8]> {
        let bytes = self.0?.get(range.clone())?;
        (part_hash(bytes) == hash).then_some(bytes)
    }
}

/// Parts read from the file, one at a time: a compaction no longer holds the old file whole
/// next to the new one (the two together would set the daemon's peak memory at each
/// compaction of a first rollout).
struct OnDisk {
    file: Option<fs::File>,
    buf: Vec<u8>,
}

impl PartSource for OnDisk {
    fn part(&mut self, range: &std::ops::Range<usize>, hash: u64) -> Option<&[u8]> {
        use std::os::unix::fs::FileExt;
        let file = self.file.as_ref()?;
        self.buf.resize(range.len(), 0);
        file.read_exact_at(&mut self.buf, range.start as u64).ok()?;
        (part_hash(&self.buf) == hash).then_some(&self.buf)
    }
}

/// A writer that counts and hashes (SHA-256) what goes through it.
struct Hashing<W> {
    inner: W,
    sha: sha2::Sha256,
    len: usize,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        use sha2::Digest;
        let n = self.inner.write(buf)?;
        self.sha.update(&buf[..n]);
        self.len += n;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A journal is compacted once it is larger than a quarter of the whole files it applies to
/// (a restart after a crash reads it, twice), and than this.
const JOURNAL_MIN_COMPACT: u64 = 4 << 20;

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

    /// A file of the directory's bytes; `None` when it does not exist.
    fn read_bytes(&self, name: &str) -> Result<Option<Vec<u8>>, StateError> {
        let file = self.dir.join(name);
        match fs::read(&file) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StateError::Read { file, source }),
        }
    }

    /// A file's bytes, checked for the format version.
    fn versioned<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
        bytes: &[u8],
    ) -> Result<T, StateError> {
        let file = self.dir.join(name);
        let corrupt = |e: serde_json::Error| StateError::Corrupt {
            file: file.clone(),
            message: e.to_string(),
        };
        // The version first, skimming the rest; then the typed value straight from the bytes
        // (through a `Value` would take twice the time and memory, on every start).
        #[derive(serde::Deserialize)]
        struct Version {
            #[serde(default)]
            version: serde_json::Value,
        }
        let skimmed: Version = serde_json::from_slice(bytes).map_err(corrupt)?;
        let found = skimmed.version.as_u64().unwrap_or(0) as u32;
        if found != FORMAT_VERSION {
            return Err(StateError::Version { file, found });
        }
        serde_json::from_slice(bytes).map_err(corrupt)
    }

    /// The journal, read before the whole files (a compaction writes them before it replaces
    /// the journal, so a journal read first never names whole files newer than the ones read
    /// after it: either they match, or they are newer and hold all it recorded), with its
    /// length.
    fn read_journal_bytes(&self) -> Result<Option<(journal::Parsed, u64)>, StateError> {
        let Some(bytes) = self.read_bytes(journal::JOURNAL_FILE)? else {
            return Ok(None);
        };
        let parsed = journal::parse(&bytes).map_err(|message| self.corrupt_journal(message))?;
        Ok(parsed.map(|p| (p, bytes.len() as u64)))
    }

    /// Whether this store may take what it reads for what it wrote ([`StateStore::adopt`]):
    /// it is the directory's writer, it wrote nothing yet, and the journal it read holds no
    /// record (a clean stop's, or a compaction's just begun): the whole files are the state.
    fn may_adopt(&self, w: &Written, journal: &Option<(journal::Parsed, u64)>) -> bool {
        self._lock.is_some()
            && w.journal.is_none()
            && w.fragments.is_empty()
            && journal.as_ref().is_some_and(|(j, len)| {
                j.records.is_empty() && j.header.encode().len() as u64 == *len
            })
    }

    fn corrupt_journal(&self, message: String) -> StateError {
        StateError::Corrupt {
            file: self.dir.join(journal::JOURNAL_FILE),
            message,
        }
    }

    /// The last saved schedule, by placement; empty when nothing was saved yet.
    pub fn load_schedule(&self) -> Result<(Option<String>, Previous), StateError> {
        let mut w = self.written.lock().unwrap_or_else(|e| e.into_inner());
        self.read_schedule(Some(&mut w))
    }

    /// The schedule the directory holds. `start`: what this store wrote, when the read may
    /// begin an adoption ([`StateStore::adopt`]); `None` for a compaction's read, which holds
    /// the lock already and has begun writing.
    fn read_schedule(
        &self,
        start: Option<&mut Written>,
    ) -> Result<(Option<String>, Previous), StateError> {
        let journal = self.read_journal_bytes()?;
        let bytes = self.read_bytes(SCHEDULE_FILE)?;
        let digest = journal::digest(bytes.as_deref());
        let may_adopt = start
            .as_deref()
            .is_some_and(|w| self.may_adopt(w, &journal));
        let journal = journal.map(|(j, _)| j);
        let (commit, previous) = match &bytes {
            Some(b) => {
                let parsed: ScheduleFile = self.versioned(SCHEDULE_FILE, b)?;
                let previous = parsed
                    .placements
                    .into_iter()
                    .map(|p| (p.key.clone(), p))
                    .collect();
                (Some(parsed.commit), previous)
            }
            None => (None, Previous::new()),
        };
        if let Some(w) = start {
            w.adopted = None;
            if may_adopt
                && journal
                    .as_ref()
                    .is_some_and(|j| j.header.schedule == digest)
            {
                // The first half of an adoption: the schedule the directory holds, as if
                // written.
                w.adopted = Some(Adopted {
                    schedule: commit.clone().map(|c| (c, previous.clone())),
                    schedule_file: digest.zip(bytes.as_ref().map(|b| b.len() as u64)),
                });
            }
        }
        match journal {
            Some(j) if j.header.schedule == digest => {
                journal::replay_schedule(commit, previous, j.records)
                    .map_err(|m| self.corrupt_journal(m))
            }
            _ => Ok((commit, previous)),
        }
    }

    /// Writes the whole schedule file (`gitfleet schedule --save`); the daemon saves through
    /// [`StateBackend::save`], which journals.
    pub fn save_schedule(
        &self,
        commit: &str,
        placements: &[Arc<PlacementSchedule>],
    ) -> Result<(), StateError> {
        let mut w = self.written.lock().unwrap_or_else(|e| e.into_inner());
        // A journal begun on the old file no longer applies to it: the next save compacts.
        w.journal = None;
        w.schedule = None;
        self.write_schedule(&mut w, commit, placements)?;
        w.schedule = Some((commit.to_string(), by_key(placements)));
        Ok(())
    }

    fn write_schedule(
        &self,
        w: &mut Written,
        commit: &str,
        placements: &[Arc<PlacementSchedule>],
    ) -> Result<Vec<u8>, StateError> {
        let file = ScheduleFileRef {
            version: FORMAT_VERSION,
            commit,
            placements,
        };
        let bytes = serde_json::to_vec_pretty(&file).expect("state serialises");
        w.schedule_file = None;
        self.write_changed(w, SCHEDULE_FILE, &bytes)?;
        w.schedule_file = w
            .digests
            .get(SCHEDULE_FILE)
            .map(|d| (*d, bytes.len() as u64));
        Ok(bytes)
    }

    /// Whether a rollout state was ever saved here (`false`: a new or lost directory).
    pub fn has_rollout(&self) -> bool {
        self.dir.join(ROLLOUT_FILE).exists()
    }

    /// The rollout's state; empty when nothing was saved yet.
    pub fn load_rollout(&self) -> Result<RolloutState, StateError> {
        let journal = self.read_journal_bytes()?;
        let bytes = self.read_bytes(ROLLOUT_FILE)?;
        let mut state: RolloutState = match &bytes {
            Some(b) => self.versioned(ROLLOUT_FILE, b)?,
            None => RolloutState::default(),
        };
        // Before an adoption shares the placements: sharing after it would copy each one.
        state.share_equal_values();
        let digest = journal::digest(bytes.as_deref());
        let mut w = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if self.may_adopt(&w, &journal) {
            if let (Some(adopted), Some((j, len)), Some(b)) = (w.adopted.take(), &journal, &bytes) {
                let schedule_digest = adopted.schedule_file.map(|(d, _)| d);
                if j.header.rollout == digest && j.header.schedule == schedule_digest {
                    let rollout_file = digest.map(|d| (d, b.len() as u64));
                    self.adopt(&mut w, adopted, &state, *len, rollout_file)?;
                }
            }
        }
        w.adopted = None;
        drop(w);
        match journal {
            Some((j, _)) if j.header.rollout == digest => {
                let mut state = journal::replay_rollout(state, j.records)
                    .map_err(|m| self.corrupt_journal(m))?;
                state.share_equal_values();
                Ok(state)
            }
            _ => Ok(state),
        }
    }

    /// Takes the whole files read at start for what this store wrote, and goes on appending to
    /// their (empty) journal: the daemon's first save then journals only what changed instead
    /// of compacting, which would write every file whole again at every start, for the same
    /// bytes. The placements' parts are serialised at the next compaction.
    fn adopt(
        &self,
        w: &mut Written,
        adopted: Adopted,
        state: &RolloutState,
        journal_len: u64,
        rollout_file: Option<([u8; 32], u64)>,
    ) -> Result<(), StateError> {
        let path = self.dir.join(journal::JOURNAL_FILE);
        let file = fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|source| StateError::Write { file: path, source })?;
        let schedule_len = adopted.schedule_file.map_or(0, |(_, len)| len);
        let rollout_len = rollout_file.map_or(0, |(_, len)| len);
        for (name, file) in [
            (SCHEDULE_FILE, adopted.schedule_file),
            (ROLLOUT_FILE, rollout_file),
        ] {
            if let Some((digest, _)) = file {
                w.digests.insert(name, digest);
            }
        }
        w.schedule = adopted.schedule;
        w.schedule_file = adopted.schedule_file;
        w.rest = Some(rest_written(state));
        w.fragments = state
            .placements
            .iter()
            .map(|(key, ps)| (key.clone(), (ps.clone(), Part::Adopted)))
            .collect();
        w.journal = Some(Appending {
            file,
            begun: journal_len,
            len: journal_len,
            bases: schedule_len + rollout_len,
        });
        Ok(())
    }

    /// Writes the whole rollout file; the daemon saves through [`StateBackend::save`].
    pub fn save_rollout(&self, state: &RolloutState) -> Result<(), StateError> {
        let mut w = self.written.lock().unwrap_or_else(|e| e.into_inner());
        w.journal = None;
        self.write_rollout(&mut w, state)?;
        Ok(())
    }

    /// Writes `daemon.json` whole, streamed to a temporary file (unchanged parts copied from
    /// the file as it is, one at a time), unless this store last wrote exactly those bytes
    /// there. Returns the file's SHA-256 and length.
    fn write_rollout(
        &self,
        w: &mut Written,
        state: &RolloutState,
    ) -> Result<([u8; 32], usize), StateError> {
        use sha2::Digest;
        w.rest = None;
        let path = self.dir.join(ROLLOUT_FILE);
        let err = |source| StateError::Write {
            file: path.clone(),
            source,
        };
        let in_file = |(_, part): &(Arc<PlacementState>, Part)| matches!(part, Part::InFile(..));
        let mut previous = OnDisk {
            // Not there, or unreadable: every part is serialised again.
            file: w
                .fragments
                .values()
                .any(in_file)
                .then(|| fs::File::open(&path).ok())
                .flatten(),
            buf: Vec::new(),
        };
        let tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(err)?;
        let mut out = Hashing {
            inner: std::io::BufWriter::with_capacity(1 << 20, tmp),
            sha: sha2::Sha256::new(),
            len: 0,
        };
        let parts =
            write_rollout_file(state, &w.fragments, &mut previous, &mut out).map_err(err)?;
        drop(previous);
        let digest: [u8; 32] = out.sha.finalize().into();
        let len = out.len;
        let tmp = out.inner.into_inner().map_err(|e| err(e.into_error()))?;
        // The same bytes as last time: `tmp` is dropped (deleted) instead.
        write_unless_same(w, ROLLOUT_FILE, digest, || persist_synced(tmp, &path))?;
        w.fragments = parts;
        w.rest = Some(rest_written(state));
        Ok((digest, len))
    }

    /// Writes `bytes` to `name` ([`write_atomic`]) unless this store last wrote exactly them
    /// there.
    fn write_changed(
        &self,
        w: &mut Written,
        name: &'static str,
        bytes: &[u8],
    ) -> Result<(), StateError> {
        use sha2::Digest;
        let digest: [u8; 32] = sha2::Sha256::digest(bytes).into();
        write_unless_same(w, name, digest, || {
            write_atomic(&self.dir.join(name), bytes)
        })
    }

    /// The daemon's save: what changed since the last one (placements whose schedule or
    /// rollout state changed, the fleet-wide rest if it changed) appended to the journal and
    /// synced; or a compaction, for a store's first save and once the journal reaches a
    /// quarter of the whole files.
    fn save_journaled(
        &self,
        schedule: Option<(&str, &[Arc<PlacementSchedule>])>,
        state: &RolloutState,
    ) -> Result<(), StateError> {
        let mut guard = self.written.lock().unwrap_or_else(|e| e.into_inner());
        let w = &mut *guard;
        if w.journal.is_none() {
            return self.compact_with(w, schedule, state);
        }
        let mut record = journal::RecordBytes::default();
        // The schedule's changes, against what the directory holds.
        let (mut scheduled, mut unscheduled) = (Vec::new(), Vec::new());
        if let Some((commit, placements)) = schedule {
            let known = w.schedule.get_or_insert_with(Default::default);
            if known.0 != commit {
                record.schedule_commit = Some(commit);
            }
            let given: crate::fast_hash::HashSet<&PlacementKey> =
                placements.iter().map(|p| &p.key).collect();
            for p in placements {
                if !known
                    .1
                    .get(&p.key)
                    .is_some_and(|k| crate::schedule::same_schedule(k, p))
                {
                    let json = serde_json::to_vec(p).expect("a schedule serialises");
                    record.schedules.push((p.key.to_string(), Some(json)));
                    scheduled.push(p);
                }
            }
            for key in known.1.keys().filter(|k| !given.contains(k)) {
                record.schedules.push((key.to_string(), None));
                unscheduled.push(key.clone());
            }
        }
        // The rollout state's.
        let rest = match &w.rest {
            Some((last, _)) if same_rest(last, state) => None,
            _ => Some(rest_written(state)),
        };
        if let Some((_, bytes)) = &rest {
            if w.rest.as_ref().map(|(_, b)| b.as_slice()) != Some(bytes.as_slice()) {
                record.rest = Some(bytes);
            }
        }
        let mut fresh: Vec<&PlacementKey> = state
            .placements
            .iter()
            .filter(|(key, ps)| {
                !w.fragments
                    .get(*key)
                    .is_some_and(|(from, _)| Arc::ptr_eq(from, ps))
            })
            .map(|(key, _)| key)
            .collect();
        // A placement whose state was copied but is saved as it was (a confirmation's, a
        // re-check mark's) is not journaled again. The others' parts, pretty, for the record.
        let mut parts: Vec<Vec<u8>> = Vec::new();
        fresh.retain(|key| {
            let ps = &state.placements[*key];
            if let Some((from, _)) = w.fragments.get_mut(*key) {
                if from.saved_alike(ps) {
                    *from = ps.clone();
                    return false;
                }
            }
            let compact = fragment(ps);
            let mut part = Vec::new();
            pretty_part(&compact, &mut part);
            parts.push(part);
            w.fragments
                .insert((*key).clone(), (ps.clone(), Part::Compact(compact)));
            true
        });
        // Every placement has its fragment now: more fragments than placements means some left.
        let gone: Vec<PlacementKey> = if w.fragments.len() == state.placements.len() {
            Vec::new()
        } else {
            w.fragments
                .keys()
                .filter(|k| !state.placements.contains_key(*k))
                .cloned()
                .collect()
        };
        for key in &gone {
            w.fragments.remove(key);
        }
        record.placements = fresh
            .iter()
            .zip(&parts)
            .map(|(k, part)| (k.to_string(), Some(part.as_slice())))
            .chain(gone.iter().map(|k| (k.to_string(), None)))
            .collect();
        if record.is_empty() {
            return Ok(());
        }
        if record.schedule_commit.is_some() || !record.schedules.is_empty() {
            // The file no longer holds the whole schedule: the next compaction writes it.
            w.schedule_file = None;
        }
        let frame = record.frame();
        let schedules = record.schedules.len();
        drop(record);
        // What the directory will hold, whether it is journaled or compacted.
        if let Some((commit, _)) = schedule {
            let known = w.schedule.get_or_insert_with(Default::default);
            known.0 = commit.to_string();
            for key in &unscheduled {
                known.1.remove(key);
            }
            for p in scheduled {
                known.1.insert(p.key.clone(), p.clone());
            }
        }
        if let Some(rest) = rest {
            w.rest = Some(rest);
        }
        let appending = w.journal.as_mut().expect("checked above");
        let compacting =
            appending.len + frame.len() as u64 > (appending.bases / 4).max(JOURNAL_MIN_COMPACT);
        tracing::debug!(
            target: "gitfleet::daemon::timing",
            placements = fresh.len(),
            gone = gone.len(),
            schedules,
            bytes = frame.len(),
            compacting,
            "state journaled"
        );
        if compacting {
            return self.compact_with(w, schedule, state);
        }
        let appended = appending
            .file
            .write_all(&frame)
            .and_then(|()| appending.file.sync_data());
        match appended {
            Ok(()) => {
                appending.len += frame.len() as u64;
                Ok(())
            }
            Err(source) => {
                // What the journal holds now is not known: the next save compacts.
                w.journal = None;
                Err(StateError::Write {
                    file: self.dir.join(journal::JOURNAL_FILE),
                    source,
                })
            }
        }
    }

    /// Writes the whole files — the schedule given, or the one the directory holds — then a
    /// new, empty journal over the old one (the step that makes the old one stop applying).
    fn compact_with(
        &self,
        w: &mut Written,
        schedule: Option<(&str, &[Arc<PlacementSchedule>])>,
        state: &RolloutState,
    ) -> Result<(), StateError> {
        w.journal = None;
        let schedule_bytes = match schedule {
            Some((commit, placements)) => {
                w.schedule = None;
                let bytes = self.write_schedule(w, commit, placements)?;
                w.schedule = Some((commit.to_string(), by_key(placements)));
                Some(ScheduleBase::Written(bytes))
            }
            None => {
                if w.schedule.is_none() && self.dir.join(SCHEDULE_FILE).exists() {
                    let (commit, previous) = self.read_schedule(None)?;
                    w.schedule = commit.map(|c| (c, previous));
                }
                match (w.schedule.take(), w.schedule_file) {
                    (Some(held), Some((digest, len))) => {
                        w.schedule = Some(held);
                        Some(ScheduleBase::Kept { digest, len })
                    }
                    (Some((commit, previous)), None) => {
                        let placements: Vec<Arc<PlacementSchedule>> =
                            previous.into_values().collect();
                        let bytes = self.write_schedule(w, &commit, &placements)?;
                        w.schedule = Some((commit, by_key(&placements)));
                        Some(ScheduleBase::Written(bytes))
                    }
                    (None, _) => None,
                }
            }
        };
        let (rollout_digest, rollout_len) = self.write_rollout(w, state)?;
        let (schedule_digest, schedule_len) = match &schedule_bytes {
            Some(ScheduleBase::Written(bytes)) => (journal::digest(Some(bytes)), bytes.len()),
            Some(ScheduleBase::Kept { digest, len }) => (Some(*digest), *len as usize),
            None => (None, 0),
        };
        let header = journal::Header {
            schedule: schedule_digest,
            rollout: Some(rollout_digest),
        }
        .encode();
        let path = self.dir.join(journal::JOURNAL_FILE);
        write_atomic(&path, &header)?;
        let file = fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|source| StateError::Write {
                file: path.clone(),
                source,
            })?;
        w.journal = Some(Appending {
            file,
            begun: header.len() as u64,
            len: header.len() as u64,
            bases: (schedule_len + rollout_len) as u64,
        });
        Ok(())
    }
}

/// The schedule file a compaction's new journal applies to.
enum ScheduleBase {
    /// Written now, these bytes.
    Written(Vec<u8>),
    /// As this store last wrote it, unchanged since.
    Kept { digest: [u8; 32], len: u64 },
}

fn by_key(placements: &[Arc<PlacementSchedule>]) -> Previous {
    placements
        .iter()
        .map(|p| (p.key.clone(), p.clone()))
        .collect()
}

impl StateBackend for StateStore {
    fn has_rollout(&self) -> Result<bool, StateError> {
        Ok(StateStore::has_rollout(self))
    }

    fn load_schedule(&self) -> Result<(Option<String>, crate::schedule::Previous), StateError> {
        StateStore::load_schedule(self)
    }

    fn load_rollout(&self) -> Result<RolloutState, StateError> {
        StateStore::load_rollout(self)
    }

    /// One journal record (schedule and rollout together, so a save is one sync and a crash
    /// keeps all of it or none of it), or a compaction that writes the schedule first.
    fn save(
        &self,
        schedule: Option<(&str, &[Arc<PlacementSchedule>])>,
        state: &RolloutState,
    ) -> Result<(), StateError> {
        self.save_journaled(schedule, state)
    }

    /// Whole files again when this store journaled anything since it last wrote them: a
    /// stopped daemon leaves `schedule.json` and `daemon.json` whole.
    fn compact(&self, state: &RolloutState) -> Result<(), StateError> {
        let mut w = self.written.lock().unwrap_or_else(|e| e.into_inner());
        match &w.journal {
            Some(j) if j.len > j.begun => self.compact_with(&mut w, None, state),
            _ => Ok(()),
        }
    }

    fn location(&self) -> String {
        format!("directory {}", self.dir.display())
    }
}

/// Everything of the rollout state but the placements (a struct literal, so that a new field
/// is not forgotten).
fn rest_of(state: &RolloutState) -> RolloutState {
    RolloutState {
        serving: state.serving.clone(),
        rejected: state.rejected.clone(),
        verified: state.verified.clone(),
        held: state.held.clone(),
        placements: Default::default(),
        members: state.members.clone(),
        runs: state.runs.clone(),
        ended_runs: state.ended_runs.clone(),
        evictions: state.evictions.clone(),
    }
}

/// [`rest_of`] and its compact JSON.
fn rest_written(state: &RolloutState) -> (RolloutState, Vec<u8>) {
    let rest = rest_of(state);
    let bytes = serde_json::to_vec(&rest).expect("rollout state serialises");
    (rest, bytes)
}

/// Whether `state`'s rest is `rest` (destructured, so that a new field is not forgotten).
fn same_rest(rest: &RolloutState, state: &RolloutState) -> bool {
    let RolloutState {
        serving,
        rejected,
        verified,
        held,
        placements: _,
        members,
        runs,
        ended_runs,
        evictions,
    } = rest;
    *serving == state.serving
        && *rejected == state.rejected
        && *verified == state.verified
        && *held == state.held
        && *members == state.members
        && *runs == state.runs
        && *ended_runs == state.ended_runs
        && *evictions == state.evictions
}

/// A placement's part of `daemon.json`, kept compact: written out pretty ([`pretty_part`]).
/// Kept pretty, the parts of every placement's state would take twice the memory they take
/// compact, and they are a real share of the daemon's live memory.
fn fragment(ps: &PlacementState) -> Vec<u8> {
    serde_json::to_vec(&ps.persisted()).expect("placement state serialises")
}

/// `compact` (JSON as `serde_json::to_vec` writes it: no whitespace outside strings) as
/// `serde_json::to_vec_pretty` writes it, its lines moved in by the pretty printer's indent at
/// the placements' values (inside the file's object and the map): byte for byte the part
/// `daemon.json` has always had, without serialising the state again.
fn pretty_part(compact: &[u8], out: &mut Vec<u8>) {
    const BASE: usize = 4;
    let newline = |out: &mut Vec<u8>, depth: usize| {
        out.push(b'\n');
        out.resize(out.len() + BASE + 2 * depth, b' ');
    };
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let mut i = 0;
    while i < compact.len() {
        let b = compact[i];
        i += 1;
        if in_string {
            out.push(b);
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => {
                in_string = true;
                out.push(b);
            }
            b'{' | b'[' => {
                out.push(b);
                let close = if b == b'{' { b'}' } else { b']' };
                if compact.get(i) == Some(&close) {
                    // Empty: `{}` and `[]` stay on the line.
                    out.push(close);
                    i += 1;
                } else {
                    depth += 1;
                    newline(out, depth);
                }
            }
            b'}' | b']' => {
                depth -= 1;
                newline(out, depth);
                out.push(b);
            }
            b',' => {
                out.push(b);
                newline(out, depth);
            }
            b':' => out.extend_from_slice(b": "),
            _ => out.push(b),
        }
    }
}

/// `daemon.json`'s bytes: exactly `serde_json::to_vec_pretty` of the [`RolloutFile`], built
/// from each placement's part, which is serialised again only when its state is no longer
/// the shared value it was last serialised from (serialising the whole state would be most
/// of every reconcile's save, though a reconcile changes few placements).
/// A part `previous` still has is copied from it. Written to `out` as it is made; returns
/// every placement's part, now a range of what was written.
fn write_rollout_file(
    state: &RolloutState,
    fragments: &Fragments,
    previous: &mut dyn PartSource,
    out: &mut impl Write,
) -> std::io::Result<Fragments> {
    let rest = rest_of(state);
    let file = RolloutFile {
        version: FORMAT_VERSION,
        state: &rest,
    };
    let outline = serde_json::to_vec_pretty(&file).expect("rollout state serialises");
    let mut parts = Fragments::default();
    if state.placements.is_empty() {
        out.write_all(&outline)?;
        return Ok(parts);
    }
    // The pretty printer's indent at the placements' values (inside the file's object and the
    // map): each value's own lines move in by it.
    const EMPTY: &[u8] = b"\n  \"placements\": {}";
    const INDENT: &[u8] = b"    ";
    // Raw newlines only ever separate tokens (inside strings they are escaped), so the empty
    // map at the top level is found exactly once.
    let at = outline
        .windows(EMPTY.len())
        .position(|w| w == EMPTY)
        .expect("the file has a placements map");
    let head = at + EMPTY.len() - 1;
    let mut written = head;
    out.write_all(&outline[..head])?;
    let mut scratch = Vec::new();
    for (i, (key, ps)) in state.placements.iter().enumerate() {
        scratch.clear();
        scratch.extend_from_slice(if i == 0 { b"\n" } else { b",\n" });
        scratch.extend_from_slice(INDENT);
        serde_json::to_writer(&mut scratch, &key.to_string()).expect("an id serialises");
        scratch.extend_from_slice(b": ");
        out.write_all(&scratch)?;
        let begun = written + scratch.len();
        let kept = fragments
            .get(key)
            .filter(|(from, _)| Arc::ptr_eq(from, ps))
            .map(|(_, part)| part);
        let copied = match kept {
            Some(Part::InFile(range, hash)) => match previous.part(range, *hash) {
                Some(bytes) => {
                    out.write_all(bytes)?;
                    Some((bytes.len(), *hash))
                }
                None => None,
            },
            _ => None,
        };
        let (len, hash) = match copied {
            Some(copied) => copied,
            None => {
                scratch.clear();
                match kept {
                    Some(Part::Compact(compact)) => pretty_part(compact, &mut scratch),
                    _ => pretty_part(&fragment(ps), &mut scratch),
                }
                out.write_all(&scratch)?;
                (scratch.len(), part_hash(&scratch))
            }
        };
        written = begun + len;
        parts.insert(
            key.clone(),
            (ps.clone(), Part::InFile(begun..written, hash)),
        );
    }
    out.write_all(b"\n  }")?;
    out.write_all(&outline[head + 1..])?;
    Ok(parts)
}

/// [`write_rollout_file`] into memory, the parts of `previous` (the bytes the parts' ranges
/// are of) copied from it.
#[cfg(test)]
fn rollout_file_bytes(
    state: &RolloutState,
    fragments: &Fragments,
    previous: Option<&[u8]>,
) -> (Vec<u8>, Fragments) {
    let mut out = Vec::new();
    let parts = write_rollout_file(state, fragments, &mut InMemory(previous), &mut out)
        .expect("a Vec takes every write");
    (out, parts)
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
    }
    .load_rollout()
}

/// Runs `write` (a whole file's crash-safe write) unless this store last wrote the bytes of
/// `digest` to `name`, and remembers them as written.
fn write_unless_same(
    w: &mut Written,
    name: &'static str,
    digest: [u8; 32],
    write: impl FnOnce() -> Result<(), StateError>,
) -> Result<(), StateError> {
    if w.digests.get(name) == Some(&digest) {
        return Ok(());
    }
    // Forgotten first: a failed write must not be taken for the last one written.
    w.digests.remove(name);
    write()?;
    w.digests.insert(name, digest);
    Ok(())
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
    persist_synced(tmp, path)
}

/// Syncs `tmp` (written in `path`'s folder) and renames it to `path`, durably.
fn persist_synced(tmp: tempfile::NamedTempFile, path: &Path) -> Result<(), StateError> {
    let err = |source| StateError::Write {
        file: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
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
        store.save_schedule("c1", &[Arc::new(sample())]).unwrap();
        let first = inode(SCHEDULE_FILE);
        store.save_schedule("c1", &[Arc::new(sample())]).unwrap();
        assert_eq!(inode(SCHEDULE_FILE), first, "unchanged: not written");
        store.save_schedule("c2", &[Arc::new(sample())]).unwrap();
        let second = inode(SCHEDULE_FILE);
        assert_ne!(second, first, "changed: written");
        assert_eq!(store.load_schedule().unwrap().0.as_deref(), Some("c2"));
        // A clone is the same store: it knows what was written.
        store
            .clone()
            .save_schedule("c2", &[Arc::new(sample())])
            .unwrap();
        assert_eq!(inode(SCHEDULE_FILE), second);
    }

    #[test]
    fn round_trips_and_starts_empty() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(&dir.path().join("state")).unwrap();
        assert!(store.load_schedule().unwrap().1.is_empty());
        store.save_schedule("abc", &[Arc::new(sample())]).unwrap();
        let (commit, prev) = store.load_schedule().unwrap();
        assert_eq!(commit.as_deref(), Some("abc"));
        assert_eq!(*prev[&"crp/app".parse().unwrap()], sample());
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
                    details: Default::default(),
                    commit: Some("abc".into()),
                    health: BindingHealth::AvailableUntrackable { since: 7 },
                    recheck: None,
                    drift: false,
                    reread: false,
                    delivered_by: None,
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
        assert_eq!(
            charlie.details.attempted.as_ref().unwrap().resource_index,
            1
        );
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

    /// A compact part written out pretty is what the pretty printer writes, indented as a
    /// placement's value, whatever the nesting, empty containers and strings that hold JSON's
    /// own punctuation.
    #[test]
    fn a_compact_part_is_written_out_as_the_pretty_printer_writes_it() {
        let values = [
            serde_json::json!({}),
            serde_json::json!([]),
            serde_json::json!({"a": {}, "b": [], "c": [{}], "d": [[], [1, 2]], "e": null}),
            serde_json::json!({"s": "{[,:]}\\\"\n\\", "t": "\\", "n": -1.5e3, "b": true}),
            serde_json::json!([{"x": {"y": {"z": ["a", {"k": "v"}]}}}, "q\"", 0]),
            serde_json::json!("just a string, with: {punctuation}"),
        ];
        for v in values {
            let mut want = Vec::new();
            for &b in &serde_json::to_vec_pretty(&v).unwrap() {
                want.push(b);
                if b == b'\n' {
                    want.extend_from_slice(b"    ");
                }
            }
            let mut got = Vec::new();
            pretty_part(&serde_json::to_vec(&v).unwrap(), &mut got);
            assert_eq!(
                String::from_utf8(got).unwrap(),
                String::from_utf8(want).unwrap()
            );
        }
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
            details: crate::rollout::Details::new(crate::rollout::DetailFields {
                diffs: vec!["a\n\"b\"".into()],
                last_error: Some(error.into()),
                ..Default::default()
            }),
            commit: Some("c1".into()),
            health: BindingHealth::Failed,
            recheck: None,
            drift: false,
            reread: false,
            delivered_by: None,
            updated_at: 7,
            objects: Arc::new(
                [crate::model::ObjectKey::new(
                    "",
                    "ConfigMap",
                    Some("ns"),
                    "x",
                )]
                .into(),
            ),
        };
        let mut state = RolloutState {
            serving: Some("abc".into()),
            ..RolloutState::default()
        };
        let (bytes, _) = rollout_file_bytes(&state, &Fragments::default(), None);
        assert_eq!(bytes, whole(&state));
        for id in ["crp/a", "rp/ns/b\"q", "ocm/ns/c"] {
            let mut ps = PlacementState::default();
            ps.clusters
                .insert("m1".into(), cluster("x\n  \"placements\": {}"));
            ps.clusters.insert("m2".into(), cluster("y"));
            state.placements.insert(id.parse().unwrap(), Arc::new(ps));
        }
        let (previous, kept) = rollout_file_bytes(&state, &Fragments::default(), None);
        assert_eq!(previous, whole(&state));
        let range = |parts: &Fragments, key: &PlacementKey| match &parts[key].1 {
            Part::InFile(r, _) => r.clone(),
            other => panic!("{other:?}"),
        };
        let (a, b): (PlacementKey, PlacementKey) =
            ("crp/a".parse().unwrap(), "rp/ns/b\"q".parse().unwrap());
        Arc::make_mut(state.placements.get_mut(&b).unwrap())
            .clusters
            .get_mut("m2")
            .unwrap()
            .updated_at = 8;
        state.placements.remove(&"ocm/ns/c".parse().unwrap());
        let (bytes, parts) = rollout_file_bytes(&state, &kept, Some(&previous));
        assert_eq!(bytes, whole(&state));
        assert!(Arc::ptr_eq(&parts[&a].0, &kept[&a].0), "unchanged: reused");
        assert_eq!(
            bytes[range(&parts, &a)],
            previous[range(&kept, &a)],
            "copied from the file"
        );
        assert!(
            !Arc::ptr_eq(&parts[&b].0, &kept[&b].0),
            "changed: serialised again"
        );
        assert_eq!(parts.len(), 2, "a removed placement's part is dropped");

        // A journaled part is written out pretty; without the file, every part is serialised
        // again, to the same bytes.
        let mut journaled = parts.clone();
        Arc::make_mut(state.placements.get_mut(&a).unwrap())
            .clusters
            .remove("m1");
        let ps = state.placements[&a].clone();
        journaled.insert(a.clone(), (ps.clone(), Part::Compact(fragment(&ps))));
        assert_eq!(
            rollout_file_bytes(&state, &journaled, Some(&bytes)).0,
            whole(&state)
        );
        assert_eq!(
            rollout_file_bytes(&state, &journaled, None).0,
            whole(&state)
        );
        assert_eq!(
            rollout_file_bytes(&state, &journaled, Some(b"{}")).0,
            whole(&state)
        );
    }

    /// A state read back shares each placement's equal object sets, from the whole file and
    /// from the journal alike.
    #[test]
    fn a_loaded_state_shares_equal_object_sets() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::lock(dir.path()).unwrap();
        let (schedule, mut state) = fleet(2, "none");
        let with_twins = |state: &mut RolloutState, i: usize| {
            let key: PlacementKey = format!("crp/app-{i:03}").parse().unwrap();
            let ps = Arc::make_mut(state.placements.get_mut(&key).unwrap());
            let mut twin = ps.clusters["a"].clone();
            ps.clusters.get_mut("a").unwrap().objects =
                Arc::new([crate::model::ObjectKey::new("", "Namespace", None, "x")].into());
            twin.objects =
                Arc::new([crate::model::ObjectKey::new("", "Namespace", None, "x")].into());
            ps.clusters.insert("b".into(), twin);
            key
        };
        let whole = with_twins(&mut state, 0);
        store.save(Some(("c1", &schedule)), &state).unwrap();
        let journaled = with_twins(&mut state, 1);
        store.save(None, &state).unwrap();
        drop(store);
        let loaded = relock(dir.path()).load_rollout().unwrap();
        assert_eq!(loaded, state);
        for key in [whole, journaled] {
            let c = &loaded.placements[&key].clusters;
            assert!(Arc::ptr_eq(&c["a"].objects, &c["b"].objects), "{key}");
        }
    }

    /// A compaction copies an unchanged part from the file only while its bytes are still the
    /// ones the store wrote there: a file changed under it (as a failed write may leave one)
    /// has its changed parts serialised again.
    #[test]
    fn a_compaction_copies_parts_only_from_the_file_it_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::lock(dir.path()).unwrap();
        let (schedule, mut state) = fleet(20, "none");
        store.save(Some(("c1", &schedule)), &state).unwrap();
        let w = store.written.lock().unwrap();
        assert!(w
            .fragments
            .values()
            .all(|(_, p)| matches!(p, Part::InFile(..))));
        drop(w);
        set_error(&mut state, 3, "timeout");
        store.save(None, &state).unwrap();
        StateBackend::compact(&store, &state).unwrap();
        let file = dir.path().join(ROLLOUT_FILE);
        let whole = |state: &RolloutState| {
            serde_json::to_vec_pretty(&RolloutFile {
                version: FORMAT_VERSION,
                state: &unmarked(state),
            })
            .unwrap()
        };
        assert_eq!(fs::read(&file).unwrap(), whole(&state));

        let mut other = fs::read(&file).unwrap();
        other.iter_mut().for_each(|b| {
            if *b == b'c' {
                *b = b'x';
            }
        });
        fs::write(&file, other).unwrap();
        set_error(&mut state, 4, "refused");
        store.save(None, &state).unwrap();
        StateBackend::compact(&store, &state).unwrap();
        assert_eq!(fs::read(&file).unwrap(), whole(&state));
    }

    /// Locks `dir` again after this test dropped the store that held it. A child another test
    /// forks at that moment holds the lock's open file until its exec closes it (close-on-exec):
    /// the lock frees when that child execs, so this waits for it (at most 10 s).
    fn relock(dir: &Path) -> StateStore {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match StateStore::lock(dir) {
                Ok(store) => return store,
                Err(e) if std::time::Instant::now() > deadline => panic!("{e}"),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
    }

    /// A fleet of `n` placements for the daemon's saves: each with a schedule and a rollout
    /// state whose one cluster's last error is `error`.
    fn fleet(n: usize, error: &str) -> (Vec<Arc<PlacementSchedule>>, RolloutState) {
        use crate::rollout::{BindingHealth, ClusterState};
        let mut state = RolloutState {
            serving: Some("c1".into()),
            ..RolloutState::default()
        };
        let mut schedule = Vec::new();
        for i in 0..n {
            let key: PlacementKey = format!("crp/app-{i:03}").parse().unwrap();
            schedule.push(Arc::new(PlacementSchedule {
                key: key.clone(),
                ..sample()
            }));
            let mut ps = PlacementState::default();
            ps.clusters.insert(
                "a".into(),
                ClusterState {
                    revision: None,
                    details: crate::rollout::Details::new(crate::rollout::DetailFields {
                        last_error: Some(error.into()),
                        ..Default::default()
                    }),
                    commit: Some("c1".into()),
                    health: BindingHealth::Pending,
                    recheck: None,
                    drift: false,
                    reread: false,
                    delivered_by: None,
                    updated_at: 1,
                    objects: Default::default(),
                },
            );
            state.placements.insert(key, Arc::new(ps));
        }
        (schedule, state)
    }

    fn set_error(state: &mut RolloutState, i: usize, error: &str) {
        let key: PlacementKey = format!("crp/app-{i:03}").parse().unwrap();
        Arc::make_mut(state.placements.get_mut(&key).unwrap())
            .clusters
            .get_mut("a")
            .unwrap()
            .details
            .make_mut()
            .last_error = Some(error.into());
    }

    fn reads_back(
        dir: &Path,
        schedule: &[Arc<PlacementSchedule>],
        state: &RolloutState,
        commit: &str,
    ) {
        let store = StateStore::open(dir).unwrap();
        store.check().unwrap();
        let (c, previous) = store.load_schedule().unwrap();
        assert_eq!(c.as_deref(), Some(commit));
        assert_eq!(previous, by_key(schedule));
        assert_eq!(&store.load_rollout().unwrap(), state);
    }

    /// The daemon's saves: the first writes the whole files, later ones append only what
    /// changed (the whole files are not written again), and a reader sees the newest state,
    /// removals and a new commit included.
    #[test]
    fn a_save_journals_only_what_changed_and_reads_back_whole() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::lock(dir.path()).unwrap();
        let (mut schedule, mut state) = fleet(200, "none");
        store.save(Some(("c1", &schedule)), &state).unwrap();
        reads_back(dir.path(), &schedule, &state, "c1");
        let inode = |name: &str| fs::metadata(dir.path().join(name)).unwrap().ino();
        let size = |name: &str| fs::metadata(dir.path().join(name)).unwrap().len();
        let (schedule_inode, rollout_inode) = (inode(SCHEDULE_FILE), inode(ROLLOUT_FILE));
        let bases = size(SCHEDULE_FILE) + size(ROLLOUT_FILE);
        let begun = size(journal::JOURNAL_FILE);

        // One placement's rollout state changes, another's schedule: one record of both.
        set_error(&mut state, 7, "timeout");
        Arc::make_mut(&mut schedule[9]).policy_snapshot_index = Some(3);
        store.save(Some(("c1", &schedule)), &state).unwrap();
        let record = size(journal::JOURNAL_FILE) - begun;
        assert!(record > 0 && record * 50 < bases, "{record} of {bases}");
        reads_back(dir.path(), &schedule, &state, "c1");
        // Nothing changed: nothing written.
        store.save(None, &state).unwrap();
        store.save(Some(("c1", &schedule)), &state).unwrap();
        assert_eq!(size(journal::JOURNAL_FILE) - begun, record);

        // A new commit, a placement gone from both, the fleet-wide part changed.
        let gone: PlacementKey = "crp/app-003".parse().unwrap();
        schedule.retain(|p| p.key != gone);
        state.placements.remove(&gone);
        state.serving = Some("c2".into());
        store.save(Some(("c2", &schedule)), &state).unwrap();
        reads_back(dir.path(), &schedule, &state, "c2");
        assert_eq!(
            (inode(SCHEDULE_FILE), inode(ROLLOUT_FILE)),
            (schedule_inode, rollout_inode),
            "the whole files were not written again"
        );

        // A clean stop leaves the whole files holding everything, the journal empty.
        StateBackend::compact(&store, &state).unwrap();
        assert_eq!(size(journal::JOURNAL_FILE), begun);
        let journal_bytes = fs::read(dir.path().join(journal::JOURNAL_FILE)).unwrap();
        fs::remove_file(dir.path().join(journal::JOURNAL_FILE)).unwrap();
        reads_back(dir.path(), &schedule, &state, "c2");
        fs::write(dir.path().join(journal::JOURNAL_FILE), journal_bytes).unwrap();
        let rollout_inode = inode(ROLLOUT_FILE);

        // The next store (a restart) compacts at its first save, and goes on journaling.
        drop(store);
        let again = relock(dir.path());
        set_error(&mut state, 8, "refused");
        again.save(None, &state).unwrap();
        assert_ne!(inode(ROLLOUT_FILE), rollout_inode);
        assert_eq!(size(journal::JOURNAL_FILE), begun, "a new, empty journal");
        reads_back(dir.path(), &schedule, &state, "c2");
    }

    /// Re-check marks are not saved: a restart's marks, and the confirmations that clear them
    /// (copies of every placement's state, equal to what was saved), write nothing; a change
    /// made while marked is saved without its mark.
    #[test]
    fn re_check_marks_and_their_confirmations_write_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::lock(dir.path()).unwrap();
        let (schedule, mut state) = fleet(50, "none");
        store.save(Some(("c1", &schedule)), &state).unwrap();
        let journal = || fs::read(dir.path().join(journal::JOURNAL_FILE)).unwrap();
        let begun = journal();

        state.recheck_all("the daemon started");
        store.save(None, &state).unwrap();
        assert_eq!(journal(), begun, "marks alone are not saved");
        for ps in state.placements.values_mut() {
            for c in Arc::make_mut(ps).clusters.values_mut() {
                c.recheck = None;
            }
        }
        store.save(None, &state).unwrap();
        assert_eq!(journal(), begun, "confirmed as saved: nothing written");

        state.recheck_all("periodic resync");
        set_error(&mut state, 4, "refused");
        store.save(None, &state).unwrap();
        assert!(journal().len() > begun.len(), "the change is journaled");
        let unmarked = unmarked(&state);
        assert_ne!(unmarked, state);
        reads_back(dir.path(), &schedule, &unmarked, "c1");
    }

    /// `state` as it is saved: without re-check marks.
    fn unmarked(state: &RolloutState) -> RolloutState {
        let mut unmarked = state.clone();
        for ps in unmarked.placements.values_mut() {
            *ps = Arc::new(ps.persisted().into_owned());
        }
        unmarked
    }

    /// A writer that starts on a cleanly stopped directory takes the whole files it read for
    /// written: its first save journals what changed (nothing, for a state confirmed as it
    /// was) instead of writing them whole again, and a later compaction writes every
    /// placement's part. A journal holding records is compacted at the first save, as before.
    #[test]
    fn a_start_on_a_cleanly_stopped_directory_journals_instead_of_compacting() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::lock(dir.path()).unwrap();
        let (schedule, mut state) = fleet(50, "none");
        store.save(Some(("c1", &schedule)), &state).unwrap();
        set_error(&mut state, 3, "timeout");
        store.save(Some(("c1", &schedule)), &state).unwrap();
        StateBackend::compact(&store, &state).unwrap();
        drop(store);
        let inodes = || {
            let inode = |name: &str| fs::metadata(dir.path().join(name)).unwrap().ino();
            (inode(SCHEDULE_FILE), inode(ROLLOUT_FILE))
        };
        let journal = || fs::read(dir.path().join(journal::JOURNAL_FILE)).unwrap();
        let (whole, begun) = (inodes(), journal());

        let again = relock(dir.path());
        let (commit, _) = again.load_schedule().unwrap();
        let mut loaded = again.load_rollout().unwrap();
        assert_eq!((commit.as_deref(), &loaded), (Some("c1"), &state));
        loaded.recheck_all("the daemon started");
        again.save(Some(("c1", &schedule)), &loaded).unwrap();
        assert_eq!(inodes(), whole, "not compacted");
        assert_eq!(journal(), begun, "nothing changed: nothing written");
        set_error(&mut loaded, 7, "refused");
        again.save(None, &loaded).unwrap();
        assert!(journal().len() > begun.len(), "the change is journaled");
        assert_eq!(inodes(), whole);
        reads_back(dir.path(), &schedule, &unmarked(&loaded), "c1");

        // A clean stop compacts: the whole files hold everything, adopted parts included.
        StateBackend::compact(&again, &loaded).unwrap();
        assert_ne!(inodes(), whole);
        fs::remove_file(dir.path().join(journal::JOURNAL_FILE)).unwrap();
        reads_back(dir.path(), &schedule, &unmarked(&loaded), "c1");
        drop(again);

        // A journal with a record (a crash, not a clean stop): the first save compacts.
        let store = relock(dir.path());
        store.load_schedule().unwrap();
        let mut state = store.load_rollout().unwrap();
        store.save(None, &state).unwrap();
        set_error(&mut state, 9, "gone");
        store.save(None, &state).unwrap();
        drop(store);
        let compacted = inodes();
        let store = relock(dir.path());
        store.load_schedule().unwrap();
        let state = store.load_rollout().unwrap();
        store.save(None, &state).unwrap();
        assert_ne!(inodes(), compacted, "compacted at the first save");
        reads_back(dir.path(), &schedule, &state, "c1");
    }

    /// A crash mid-append (a torn last record) loses only the save that did not return; a
    /// crash between a compaction's writes (a whole file newer than the journal) loses
    /// nothing; a record damaged inside the journal is refused, naming the file.
    #[test]
    fn a_crash_mid_save_or_mid_compaction_keeps_every_save_that_returned() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::lock(dir.path()).unwrap();
        let (schedule, mut state) = fleet(20, "none");
        store.save(Some(("c1", &schedule)), &state).unwrap();
        for i in 0..5 {
            set_error(&mut state, i, "first");
            store.save(None, &state).unwrap();
        }
        let journal = dir.path().join(journal::JOURNAL_FILE);
        let whole = fs::read(&journal).unwrap();

        // Torn: half of another record.
        let mut later = state.clone();
        set_error(&mut later, 11, "never saved");
        store.save(None, &later).unwrap();
        let longer = fs::read(&journal).unwrap();
        let torn = &longer[..whole.len() + (longer.len() - whole.len()) / 2];
        fs::write(&journal, torn).unwrap();
        reads_back(dir.path(), &schedule, &state, "c1");
        // A restarted writer compacts it away and goes on from there.
        drop(store);
        let store = relock(dir.path());
        set_error(&mut state, 12, "second");
        store.save(None, &state).unwrap();
        set_error(&mut state, 13, "second");
        store.save(None, &state).unwrap();
        reads_back(dir.path(), &schedule, &state, "c1");

        // Mid-compaction: the whole schedule written again, then the rollout file, each
        // before the new journal replaces the old one.
        let mut schedule = schedule;
        Arc::make_mut(&mut schedule[2]).policy_snapshot_index = Some(9);
        store.save(Some(("c1", &schedule)), &state).unwrap();
        let kept = fs::read(&journal).unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let writer = StateStore::open(scratch.path()).unwrap();
        writer.save_schedule("c1", &schedule).unwrap();
        fs::copy(
            scratch.path().join(SCHEDULE_FILE),
            dir.path().join(SCHEDULE_FILE),
        )
        .unwrap();
        reads_back(dir.path(), &schedule, &state, "c1");
        writer.save_rollout(&state).unwrap();
        fs::copy(
            scratch.path().join(ROLLOUT_FILE),
            dir.path().join(ROLLOUT_FILE),
        )
        .unwrap();
        assert_eq!(fs::read(&journal).unwrap(), kept);
        reads_back(dir.path(), &schedule, &state, "c1");

        // Damage inside the journal (a record that does not check out, with one after it) is
        // refused at the start check, naming the file.
        drop(store);
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::lock(dir.path()).unwrap();
        store.save(Some(("c1", &schedule)), &state).unwrap();
        for i in 0..2 {
            set_error(&mut state, i, "third");
            store.save(None, &state).unwrap();
        }
        let journal = dir.path().join(journal::JOURNAL_FILE);
        let mut damaged = fs::read(&journal).unwrap();
        let header = damaged.iter().position(|&b| b == b'\n').unwrap();
        let frame = header
            + 1
            + damaged[header + 1..]
                .iter()
                .position(|&b| b == b'\n')
                .unwrap();
        damaged[frame + 3] ^= 0x20;
        fs::write(&journal, &damaged).unwrap();
        let e = StateStore::open(dir.path())
            .unwrap()
            .check()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&journal.display().to_string()) && e.contains("record 1"),
            "{e}"
        );
    }

    /// Once the journal is large enough it is compacted: the directory stays
    /// bounded, and reads back the newest state.
    #[test]
    fn the_journal_is_compacted_once_it_grows_large() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::lock(dir.path()).unwrap();
        let big = "x".repeat(64 << 10);
        let (schedule, mut state) = fleet(10, &big);
        store.save(Some(("c1", &schedule)), &state).unwrap();
        let size = |name: &str| fs::metadata(dir.path().join(name)).unwrap().len();
        let mut largest = 0;
        for round in 0..120 {
            set_error(&mut state, round % 10, &format!("{round}{big}"));
            store.save(None, &state).unwrap();
            largest = largest.max(size(journal::JOURNAL_FILE));
        }
        assert!(largest <= JOURNAL_MIN_COMPACT, "{largest}");
        assert!(
            largest > JOURNAL_MIN_COMPACT / 2,
            "{largest}: grew before compacting"
        );
        reads_back(dir.path(), &schedule, &state, "c1");
    }

    /// A compaction keeps the schedule file as it is only while no change of the schedule
    /// was journaled since it was written: a change journaled, then a compaction with the
    /// schedule not given, writes the changed schedule whole, and a restart reads it.
    #[test]
    fn a_compaction_after_a_journaled_schedule_change_writes_the_schedule() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::lock(dir.path()).unwrap();
        let big = "x".repeat(64 << 10);
        let (mut schedule, mut state) = fleet(10, &big);
        store.save(Some(("c1", &schedule)), &state).unwrap();
        // Compactions with the schedule unchanged keep the file.
        let before = fs::read(dir.path().join(SCHEDULE_FILE)).unwrap();
        for round in 0..80 {
            set_error(&mut state, round % 10, &format!("{round}{big}"));
            store.save(None, &state).unwrap();
        }
        assert_eq!(fs::read(dir.path().join(SCHEDULE_FILE)).unwrap(), before);
        reads_back(dir.path(), &schedule, &state, "c1");
        // A schedule change, journaled; then compactions with the schedule not given.
        let mut changed = (*schedule[3]).clone();
        changed.selected = vec!["somewhere-else".into()];
        schedule[3] = Arc::new(changed);
        store.save(Some(("c2", &schedule)), &state).unwrap();
        for round in 0..80 {
            set_error(&mut state, round % 10, &format!("{round}{big}"));
            store.save(None, &state).unwrap();
        }
        assert_ne!(fs::read(dir.path().join(SCHEDULE_FILE)).unwrap(), before);
        drop(store);
        reads_back(dir.path(), &schedule, &state, "c2");
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
        relock(dir.path());
    }

    #[test]
    fn a_truncated_schedule_is_refused_by_the_start_check_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::lock(dir.path()).unwrap();
        store.save_schedule("abc", &[Arc::new(sample())]).unwrap();
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
