//! The scheduler benchmark: `cargo bench --bench schedule`.
//!
//! Schedules synthetic fleets (see `gitfleet::bench`) of 1,000 placements over 1,000 and over
//! 10,000 clusters, and prints a table with the time of `schedule_commit`, a label-selector
//! baseline and the peak memory. Set `GITFLEET_BENCH_SIZES="100x100,1000x1000"` (placements ×
//! clusters) to measure other sizes.

use std::process::ExitCode;

const DEFAULT_SIZES: &[(usize, usize)] = &[(1000, 1000), (1000, 10000)];

/// `"100x100,1000x1000"` → `[(100, 100), (1000, 1000)]`.
fn parse_sizes(text: &str) -> Result<Vec<(usize, usize)>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            let (p, c) = s
                .split_once(['x', 'X'])
                .ok_or_else(|| format!("{s:?}: expected PLACEMENTSxCLUSTERS, e.g. 1000x1000"))?;
            let number = |n: &str| {
                n.trim()
                    .replace('_', "")
                    .parse::<usize>()
                    .map_err(|e| format!("{s:?}: {n:?} is not a count: {e}"))
            };
            Ok((number(p)?, number(c)?))
        })
        .collect()
}

fn main() -> ExitCode {
    // `cargo bench` passes `--bench` (and any filter); this benchmark takes no arguments.
    let sizes = match std::env::var("GITFLEET_BENCH_SIZES") {
        Ok(text) => match parse_sizes(&text) {
            Ok(sizes) if !sizes.is_empty() => sizes,
            Ok(_) => {
                eprintln!("GITFLEET_BENCH_SIZES names no size");
                return ExitCode::from(2);
            }
            Err(e) => {
                eprintln!("GITFLEET_BENCH_SIZES: {e}");
                return ExitCode::from(2);
            }
        },
        Err(_) => DEFAULT_SIZES.to_vec(),
    };
    let report = gitfleet::bench::run(&sizes);
    println!("{report}");
    ExitCode::SUCCESS
}
