/// mimalloc rather than glibc's malloc: see Cargo.toml (allocator time and resident memory of
/// the daemon at fleet scale).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    purge_freed_pages_at_once();
    gitfleet::cli_main()
}

/// mimalloc's `mi_option_purge_delay` (the `mi_option_e` of its v3 `mimalloc.h`), which the
/// Rust bindings do not name.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Has mimalloc give pages back to the system as soon as they are free rather than a second
/// later, its default. It purges only when a thread allocates or frees again, so a daemon that
/// goes quiet after a large step (a rollout, a resync) kept the pages that step freed resident.
// The workspace's only unsafe code: mimalloc's options are set through its C interface.
#[allow(unsafe_code)]
fn purge_freed_pages_at_once() {
    // SAFETY: mi_option_set stores one option's value; called first in main, before the
    // program starts any other thread.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, 0) }
}

#[cfg(test)]
mod tests {
    #[test]
    #[allow(unsafe_code)]
    fn the_purge_delay_named_is_mimallocs() {
        // The option's default tells it from its neighbours (15: 1,000 ms; 14 and 16: 1 and 0).
        // SAFETY: mi_option_get reads one option's value.
        let delay = unsafe { libmimalloc_sys::mi_option_get(super::PURGE_DELAY) };
        assert_eq!(delay, 1000);
    }
}
