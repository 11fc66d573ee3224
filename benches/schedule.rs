//! The scheduler benchmark: `cargo bench --bench schedule`.
//!
//! Schedules synthetic fleets (see `gitfleet_testkit::bench`) of 1,000 placements over 1,000 and over
//! 10,000 clusters, and prints a table with the time of `schedule_commit`, a label-selector
//! baseline and the peak memory. Set `GITFLEET_BENCH_SIZES="100x100,1000x1000"` (placements ×
//! clusters) to measure other sizes.

use std::process::ExitCode;

const DEFAULT_SIZES: &[(usize, usize)] = &[(1000, 1000), (1000, 10000)];

fn main() -> ExitCode {
    // `cargo bench` passes `--bench` (and any filter); this benchmark takes no arguments.
    let sizes = match gitfleet_testkit::bench::sizes_from_env(DEFAULT_SIZES) {
        Ok(sizes) => sizes,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let report = gitfleet_testkit::bench::run(&sizes);
    println!("{report}");
    ExitCode::SUCCESS
}
