//! The plan benchmark: `cargo bench --bench plan`.
//!
//! Plans a synthetic base and head commit (see `gitfleet::bench::plan`) of 1,000 placements over
//! 1,000 clusters with the function `gitfleet plan` runs, prints it in the three formats, and
//! reports the times, a baseline (the two schedules alone) and the peak memory. Set
//! `GITFLEET_BENCH_SIZES="100x100,1000x1000"` (placements × clusters) to measure other sizes.

use std::process::ExitCode;

const DEFAULT_SIZES: &[(usize, usize)] = &[(1000, 1000)];
/// Each size is planned this many times; the best time counts.
const RUNS: usize = 3;

fn main() -> ExitCode {
    let sizes = match gitfleet::bench::sizes_from_env(DEFAULT_SIZES) {
        Ok(sizes) => sizes,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let report = gitfleet::bench::plan::run_plan(&sizes, RUNS);
    println!("{report}");
    ExitCode::SUCCESS
}
