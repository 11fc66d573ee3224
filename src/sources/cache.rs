//! Renderings kept by the ids of their inputs: in memory for the process, and on disk (one file
//! per rendering under the daemon's state folder) so a restart does not render again. A key is
//! a digest of the tool, its version and the git tree ids of everything it reads, so an entry
//! never goes stale: a changed input is a new key. Shared by every tool [`super::runner`] runs;
//! the tools' versions, part of every key, are kept the same way by their program file.

use sha2::Digest;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The key of one rendering: what identifies its inputs, digested.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key(String);

impl Key {
    /// The key of `parts` (tool, version, the rendered folder, the input tree ids), in order.
    pub fn of<'a>(parts: impl IntoIterator<Item = &'a str>) -> Key {
        let mut hash = sha2::Sha256::new();
        for part in parts {
            hash.update(part.len().to_le_bytes());
            hash.update(part.as_bytes());
        }
        Key(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a rendering gave: its output, or the message of its failure (a failure is as
/// deterministic as a success for the same inputs; a transient one is never stored).
pub type Outcome = Result<Arc<Vec<u8>>, String>;

/// Where an outcome may be kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Nowhere: running again may give another outcome.
    Not,
    /// In this process only: the output holds decrypted values, which never reach the disk.
    InMemory,
    /// In memory and, when the cache has a folder, on disk.
    Everywhere,
}

#[derive(Debug, Default)]
pub struct Cache {
    memory: Mutex<HashMap<Key, Outcome>>,
    /// Where successful renderings are kept across restarts, when anywhere.
    dir: Option<PathBuf>,
    /// Renderings run (not found in memory or on disk): what tests and benchmarks observe.
    misses: std::sync::atomic::AtomicU64,
}

impl Cache {
    /// A cache in memory, and on disk under `dir` when given.
    pub fn new(dir: Option<PathBuf>) -> Self {
        Cache {
            dir,
            ..Cache::default()
        }
    }

    /// The outcome of `key`, from memory or disk, or from `render`, stored where `keep` says.
    pub fn get_or_render(
        &self,
        key: &Key,
        render: impl FnOnce() -> Outcome,
        keep: impl FnOnce(&Outcome) -> Keep,
    ) -> Outcome {
        if let Some(hit) = self.memory.lock().expect("cache lock").get(key) {
            return hit.clone();
        }
        let file = self.dir.as_ref().map(|d| d.join(format!("{}.yaml", key.0)));
        if let Some(bytes) = file.as_ref().and_then(|f| std::fs::read(f).ok()) {
            let outcome: Outcome = Ok(Arc::new(bytes));
            self.remember(key, &outcome);
            return outcome;
        }
        self.misses
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let outcome = render();
        let keep = keep(&outcome);
        if keep != Keep::Not {
            self.remember(key, &outcome);
        }
        if let (Keep::Everywhere, Some(file), Ok(bytes)) = (keep, &file, &outcome) {
            // A cache that cannot be written only costs a rendering after a restart.
            let _ = write_atomically(file, bytes);
        }
        outcome
    }

    fn remember(&self, key: &Key, outcome: &Outcome) {
        let mut memory = self.memory.lock().expect("cache lock");
        // Bounded: a long-running daemon sees many commits; their renderings are on disk.
        if memory.len() >= 4096 {
            memory.clear();
        }
        memory.insert(key.clone(), outcome.clone());
    }

    /// How many renderings were run rather than found.
    pub fn misses(&self) -> u64 {
        self.misses.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The version `ask` reports of the tool `program`, kept on disk by the program file's
    /// identity (path, size, modification time, inode): every key holds the version, and
    /// asking runs the tool, so without this a restart would run it once although every
    /// rendering is found. A replaced program is a new identity and is asked again.
    pub fn tool_version<E>(
        &self,
        program: &Path,
        ask: impl FnOnce() -> Result<String, E>,
    ) -> Result<String, E> {
        let file = self.dir.as_ref().zip(identity(program)).map(|(dir, id)| {
            let key = Key::of(["version", id.as_str()]);
            dir.join(format!("{}.version", key.0))
        });
        if let Some(version) = file.as_ref().and_then(|f| std::fs::read_to_string(f).ok()) {
            return Ok(version);
        }
        let version = ask()?;
        if let Some(file) = &file {
            // Not kept: the next process asks again.
            let _ = write_atomically(file, version.as_bytes());
        }
        Ok(version)
    }
}

/// What tells one program file from another at the same path.
fn identity(program: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::metadata(program).ok()?;
    Some(format!(
        "{}\0{}\0{}.{}\0{}",
        program.display(),
        m.len(),
        m.mtime(),
        m.mtime_nsec(),
        m.ino()
    ))
}

fn write_atomically(file: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = file.parent().expect("a file in the cache folder");
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(file).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rendering_is_run_once_per_key_and_found_again_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let key = Key::of(["kustomize", "v5.8.2", "apps/web", "tree-1"]);
        let other = Key::of(["kustomize", "v5.8.2", "apps/web", "tree-2"]);
        assert_ne!(key, other);
        let cache = Cache::new(Some(dir.path().to_path_buf()));
        let render = |text: &'static str| move || Ok(Arc::new(text.as_bytes().to_vec()));
        let keep = |_: &Outcome| Keep::Everywhere;
        assert_eq!(
            cache
                .get_or_render(&key, render("a"), keep)
                .unwrap()
                .as_slice(),
            b"a"
        );
        assert_eq!(
            cache
                .get_or_render(&key, render("x"), keep)
                .unwrap()
                .as_slice(),
            b"a"
        );
        assert_eq!(cache.misses(), 1);
        // A new process: the disk has it.
        let restarted = Cache::new(Some(dir.path().to_path_buf()));
        assert_eq!(
            restarted
                .get_or_render(&key, render("x"), keep)
                .unwrap()
                .as_slice(),
            b"a"
        );
        assert_eq!(restarted.misses(), 0);
        // A transient failure is not kept.
        let failing = Cache::new(None);
        let fail = || Err("timed out".to_string());
        failing
            .get_or_render(&other, fail, |_| Keep::Not)
            .unwrap_err();
        assert_eq!(
            failing
                .get_or_render(&other, render("b"), keep)
                .unwrap()
                .as_slice(),
            b"b"
        );
        assert_eq!(failing.misses(), 2);
    }

    #[test]
    fn an_output_kept_in_memory_never_reaches_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let key = Key::of(["kustomize", "v5.8.2", "apps/db", "tree-1"]);
        let cache = Cache::new(Some(dir.path().to_path_buf()));
        let render = |text: &'static str| move || Ok(Arc::new(text.as_bytes().to_vec()));
        let in_memory = |_: &Outcome| Keep::InMemory;
        cache
            .get_or_render(&key, render("plain"), in_memory)
            .unwrap();
        cache.get_or_render(&key, render("x"), in_memory).unwrap();
        assert_eq!(cache.misses(), 1);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // A new process renders it again.
        let restarted = Cache::new(Some(dir.path().to_path_buf()));
        let again = restarted
            .get_or_render(&key, render("again"), in_memory)
            .unwrap();
        assert_eq!(again.as_slice(), b"again");
        assert_eq!(restarted.misses(), 1);
    }

    #[test]
    fn a_tools_version_is_asked_once_per_program_file_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("kustomize");
        std::fs::write(&program, "one build").unwrap();
        let asked = std::cell::Cell::new(0);
        let ask = |v: &'static str| {
            || {
                asked.set(asked.get() + 1);
                Ok::<_, String>(v.to_string())
            }
        };
        let renders = dir.path().join("renders");
        let cache = Cache::new(Some(renders.clone()));
        assert_eq!(
            cache.tool_version(&program, ask("v5.8.2")).unwrap(),
            "v5.8.2"
        );
        // A new process: the disk has it, nothing runs.
        let restarted = Cache::new(Some(renders.clone()));
        assert_eq!(
            restarted.tool_version(&program, ask("x")).unwrap(),
            "v5.8.2"
        );
        assert_eq!(asked.get(), 1);
        // Another program at the same path is asked.
        std::fs::write(&program, "another build, longer").unwrap();
        assert_eq!(
            restarted.tool_version(&program, ask("v5.9.0")).unwrap(),
            "v5.9.0"
        );
        assert_eq!(asked.get(), 2);
        // A failure is not kept; without a folder, every process asks.
        let failed = Cache::new(Some(renders));
        std::fs::write(&program, "a third build, longer still").unwrap();
        failed
            .tool_version(&program, || Err::<String, _>("cannot run"))
            .unwrap_err();
        assert_eq!(failed.tool_version(&program, ask("v6")).unwrap(), "v6");
        let memory = Cache::new(None);
        memory.tool_version(&program, ask("v6")).unwrap();
        memory.tool_version(&program, ask("v6")).unwrap();
        assert_eq!(asked.get(), 5);
    }
}
