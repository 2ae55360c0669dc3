fn main() -> std::process::ExitCode {
    confine_helper::cli::main()
}
