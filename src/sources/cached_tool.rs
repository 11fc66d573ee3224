//! A rendering tool with what every use of it shares: its bounds, its cache of renderings and
//! its version (a part of every cache key, asked once per program file, across restarts).

use super::cache::Cache;
use super::runner::{Limits, RunError, Tool};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

#[derive(Debug)]
pub struct CachedTool {
    tool: Tool,
    limits: Limits,
    pub cache: Cache,
    version: OnceLock<Result<String, RunError>>,
}

impl CachedTool {
    /// `program` (a path, or a name looked up on PATH; the tool's name when `None`); renderings
    /// kept under `cache_dir` as well as in memory.
    pub fn new(
        name: &'static str,
        install: &'static str,
        program: Option<PathBuf>,
        cache_dir: Option<PathBuf>,
        limits: Limits,
    ) -> Self {
        let program = program.unwrap_or_else(|| PathBuf::from(name));
        CachedTool {
            tool: Tool {
                name,
                program: on_path(&program),
                install,
            },
            limits,
            cache: Cache::new(cache_dir),
            version: OnceLock::new(),
        }
    }

    /// Whether the program exists (a rendering may still fail).
    pub fn found(&self) -> bool {
        self.tool.program.is_file()
    }

    /// How many renderings were run rather than found in the cache.
    pub fn runs(&self) -> u64 {
        self.cache.misses()
    }

    /// Runs the tool within its bounds, with `env` set ([`Tool::run_with`]).
    pub fn run(
        &self,
        args: &[&str],
        dir: &Path,
        env: &[(&str, PathBuf)],
    ) -> Result<Vec<u8>, RunError> {
        self.tool.run_with(args, dir, env, &self.limits)
    }

    /// The tool's version, which `ask` gets from the tool when neither this process nor the
    /// cache folder has it for this program file.
    pub fn version(
        &self,
        ask: impl FnOnce(&Self) -> Result<String, RunError>,
    ) -> Result<&str, RunError> {
        self.version
            .get_or_init(|| self.cache.tool_version(&self.tool.program, || ask(self)))
            .as_deref()
            .map_err(Clone::clone)
    }
}

/// `program` as a path: a bare name is looked up on this process's PATH (the tool runs with an
/// empty one).
fn on_path(program: &Path) -> PathBuf {
    if program.components().count() != 1 {
        return program.to_path_buf();
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| program.to_path_buf())
}
