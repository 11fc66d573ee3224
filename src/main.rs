/// mimalloc rather than glibc's malloc: see Cargo.toml (allocator time and resident memory of
/// the daemon at fleet scale).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    gitfleet::cli_main()
}
