fn main() -> std::process::ExitCode {
    gitfleet::cli::main()
}
