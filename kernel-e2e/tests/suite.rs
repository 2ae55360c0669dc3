//! The kernel-e2e suite: every catalogue case, per backend, mode and user.

fn main() -> std::process::ExitCode {
    kernel_e2e::suite::main()
}
