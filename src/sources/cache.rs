//! Renderings kept by the ids of their inputs: in memory for the process, and on disk (one file
//! per rendering under the daemon's state folder) so a restart does not render again. A key is
//! a digest of the tool, its version and the git tree ids of everything it reads, so an entry
//! never goes stale: a changed input is a new key. Shared by every tool [`super::runner`] runs.

use sha2::Digest;
use std::collections::HashMap;
use std::path::PathBuf;
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

    /// The outcome of `key`, from memory or disk, or from `render` (stored unless `keep` says
    /// it is transient).
    pub fn get_or_render(
        &self,
        key: &Key,
        render: impl FnOnce() -> Outcome,
        keep: impl FnOnce(&Outcome) -> bool,
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
        if keep(&outcome) {
            self.remember(key, &outcome);
            if let (Some(file), Ok(bytes)) = (&file, &outcome) {
                // A cache that cannot be written only costs a rendering after a restart.
                let _ = write_atomically(file, bytes);
            }
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
        let keep = |_: &Outcome| true;
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
        failing.get_or_render(&other, fail, |_| false).unwrap_err();
        assert_eq!(
            failing
                .get_or_render(&other, render("b"), keep)
                .unwrap()
                .as_slice(),
            b"b"
        );
        assert_eq!(failing.misses(), 2);
    }
}
