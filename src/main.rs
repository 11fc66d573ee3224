/// jemalloc rather than glibc's malloc: see Cargo.toml (allocator time and resident memory of
/// the daemon at fleet scale).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    gitfleet::cli_main()
}

/// jemalloc's options, read when it starts (before `main`): freed pages go back to the system
/// about a tenth of a second after they were last used, by jemalloc's own background threads,
/// whether or not the daemon allocates again. Its default of ten seconds would leave a replica
/// that just took over shards (or a leader after a step over every binding) holding every page
/// the work freed for that long; a large fleet's leader ends each phase near its memory limit.
const MALLOC_CONF: &std::ffi::CStr = c"background_thread:true,dirty_decay_ms:100,muzzy_decay_ms:0";

/// What jemalloc reads as its `malloc_conf` (a C `const char *`): the pointer alone.
#[repr(transparent)]
struct Conf(*const std::ffi::c_char);

// SAFETY: the pointer is to a static string that nothing writes.
#[allow(unsafe_code)]
unsafe impl Sync for Conf {}

// The workspace's only unsafe code: jemalloc takes its options from this C symbol (the crate's
// prefixed name of `malloc_conf`, which the library declares weak for a program to define).
#[allow(unsafe_code, non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
static malloc_conf: Conf = Conf(MALLOC_CONF.as_ptr());

#[cfg(test)]
mod tests {
    /// The options are jemalloc's, as read at its start: what `malloc_conf` says is in force.
    #[test]
    #[allow(unsafe_code)]
    fn jemalloc_runs_with_the_options_given() {
        assert!(tikv_jemalloc_ctl::opt::background_thread::read().unwrap());
        // SAFETY: both names are jemalloc's `ssize_t` options, read as such.
        let (dirty, muzzy) = unsafe {
            (
                tikv_jemalloc_ctl::raw::read::<isize>(b"opt.dirty_decay_ms\0").unwrap(),
                tikv_jemalloc_ctl::raw::read::<isize>(b"opt.muzzy_decay_ms\0").unwrap(),
            )
        };
        assert_eq!((dirty, muzzy), (100, 0));
        assert_eq!(super::malloc_conf.0, super::MALLOC_CONF.as_ptr());
    }
}
