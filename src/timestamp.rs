//! Kubernetes timestamps (RFC 3339, as `metav1.Time` writes them), and the one clock gitfleet
//! reads.
//!
//! The formats come from the `gitfleet-kube-text` crate, which the simulator shares. The clock
//! lives here, at the edge: the core (schedule, rollout, plan) is given the time as a number and
//! never reads it, so the same commit and the same `now` always give the same decisions.

pub use gitfleet_kube_text::timestamp::*;

/// The environment variable naming a file whose number (seconds) is added to the clock: how
/// end-to-end tests pass a TimedWait of hours, or a key's expiry, without waiting (as gpg's
/// `--faked-system-time`). Read at every call, so a test moves time forward by rewriting the
/// file. Only in a build with the test-only `test-hooks` feature: a product build never reads
/// it, so no environment can move the clock that judges waits and expiries.
#[cfg(feature = "test-hooks")]
pub const CLOCK_SKEW_FILE_ENV: &str = "GITFLEET_TEST_CLOCK_SKEW_FILE";

/// The time now, Unix seconds (moved by `GITFLEET_TEST_CLOCK_SKEW_FILE` in a `test-hooks`
/// build). Every command and the daemon read the time through this function only.
pub fn now_unix() -> u64 {
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    real.saturating_add(clock_skew())
}

/// [`now_unix`] as the signed seconds Kubernetes timestamps and the scheduler count in.
pub fn now_unix_signed() -> i64 {
    i64::try_from(now_unix()).unwrap_or(i64::MAX)
}

/// Seconds the test clock is moved forward; 0 when the variable is not set. A file that
/// cannot be read or parsed is a broken test set-up: it panics rather than run on real time.
#[cfg(feature = "test-hooks")]
fn clock_skew() -> u64 {
    static FILE: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    let Some(file) =
        FILE.get_or_init(|| std::env::var_os(CLOCK_SKEW_FILE_ENV).map(std::path::PathBuf::from))
    else {
        return 0;
    };
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("{CLOCK_SKEW_FILE_ENV}={}: {e}", file.display()));
    text.trim().parse().unwrap_or_else(|e| {
        panic!(
            "{CLOCK_SKEW_FILE_ENV}={}: not a number of seconds: {e}",
            file.display()
        )
    })
}

/// A product build's clock is the real one.
#[cfg(not(feature = "test-hooks"))]
fn clock_skew() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_reads_the_real_time_without_a_skew_file() {
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let now = now_unix();
        assert!(now >= before, "{now} < {before}");
        assert!(now_unix_signed() >= now as i64);
    }
}
