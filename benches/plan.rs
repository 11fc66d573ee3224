//! The plan benchmark: `cargo bench --bench plan`.
//!
//! Plans a synthetic base and head commit (see `gitfleet_testkit::bench::plan`) of 1,000 placements over
//! 1,000 clusters with the function `gitfleet plan` runs, prints it in the three formats, and
//! reports the times, a baseline (the two schedules alone) and the peak memory. Then it commits
//! the same two commits into a real git repository and times the real `gitfleet plan` binary on
//! them, reading git included. Set `GITFLEET_BENCH_SIZES="100x100,1000x1000"` (placements ×
//! clusters) to measure other sizes.

use gitfleet::catalog::SourceFile;
use gitfleet_testkit::bench::git::git;
use gitfleet_testkit::bench::plan::{generate_plan, PlanFleet};
use gitfleet_testkit::bench::FleetSpec;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

const DEFAULT_SIZES: &[(usize, usize)] = &[(1000, 1000)];
/// Each size is planned this many times; the best time counts.
const RUNS: usize = 3;

fn main() -> ExitCode {
    let sizes = match gitfleet_testkit::bench::sizes_from_env(DEFAULT_SIZES) {
        Ok(sizes) => sizes,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let report = gitfleet_testkit::bench::plan::run_plan(&sizes, RUNS);
    println!("{report}");
    println!("The real command, `gitfleet plan --repo R --base base --head head --inventory F`:");
    for &(placements, clusters) in &sizes {
        match time_command(placements, clusters) {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("{placements}x{clusters}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

/// Commits the generated base and head into a fresh repository and times the release binary on
/// them, best of [`RUNS`], for each output format.
fn time_command(placements: usize, clusters: usize) -> Result<String, String> {
    let fleet = generate_plan(FleetSpec::new(placements, clusters));
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let repo = dir.path().join("fleet");
    commit_both(&fleet, &repo)?;
    let inventory = dir.path().join("inventory.yaml");
    let text = gitfleet::yaml::to_string(&fleet.inventory).map_err(|e| e.to_string())?;
    std::fs::write(&inventory, text).map_err(|e| e.to_string())?;
    let mut parts = Vec::new();
    for format in ["text", "markdown", "json"] {
        let mut best = Duration::MAX;
        for _ in 0..RUNS {
            let start = Instant::now();
            let status = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
                .args(["plan", "--repo"])
                .arg(&repo)
                .args(["--base", "base", "--head", "head", "--inventory"])
                .arg(&inventory)
                .args(["--format", format])
                .stdout(Stdio::null())
                .status()
                .map_err(|e| e.to_string())?;
            let elapsed = start.elapsed();
            // Exit code 2: the plan changes the fleet, as the head does.
            if status.code() != Some(2) {
                return Err(format!(
                    "gitfleet plan --format {format} exited with {status}"
                ));
            }
            best = best.min(elapsed);
        }
        parts.push(format!("{format} {:.2} s", best.as_secs_f64()));
    }
    Ok(format!(
        "{placements:>10} {clusters:>8}  {} (best of {RUNS}, wall time, exit code 2 each time)",
        parts.join(" · ")
    ))
}

fn commit_both(fleet: &PlanFleet, repo: &Path) -> Result<(), String> {
    std::fs::create_dir_all(repo).map_err(|e| e.to_string())?;
    git(repo, &["init", "-q", "-b", "main"])?;
    write_files(repo, &fleet.base)?;
    git(repo, &["add", "-A"])?;
    git(repo, &["commit", "-qm", "base"])?;
    git(repo, &["tag", "base"])?;
    git(repo, &["rm", "-rq", "."])?;
    write_files(repo, &fleet.head)?;
    git(repo, &["add", "-A"])?;
    git(repo, &["commit", "-qm", "head"])?;
    git(repo, &["tag", "head"]).map(drop)
}

fn write_files(repo: &Path, files: &[SourceFile]) -> Result<(), String> {
    for f in files {
        let path = repo.join(&f.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(&path, &f.content).map_err(|e| e.to_string())?;
    }
    Ok(())
}
