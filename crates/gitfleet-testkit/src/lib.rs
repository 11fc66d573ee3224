//! What gitfleet's benchmarks (benches/), fuzz targets (fuzz/) and tests share. Not part of the
//! product: nothing in the `gitfleet` library depends on it.
//!
//! - [`bench`]: synthetic fleets of any size, the schedule and plan benchmarks' measurements, and
//!   the process figures (thread CPU time, peak RSS) every benchmark reports;
//! - [`fuzzing`]: the fuzz targets' entry points, which `tests/fuzz_corpus.rs` replays on stable;
//! - [`tools`]: the external tools the tests drive (helm, kustomize, sops), found or skipped.

pub mod bench;
pub mod fuzzing;
pub mod tools;
