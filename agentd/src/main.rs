//! The `agentd` executable: parses the command line and runs it on a tokio runtime.

use std::process::ExitCode;

use agentd::api::cli::EXIT_DID_NOT_RUN;
use agentd::api::cli::{Cli, execute};
use clap::Parser;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // --help and --version end here too, successfully; usage errors mean nothing ran.
            return if e.exit_code() == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_DID_NOT_RUN)
            };
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("agentd: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_DID_NOT_RUN);
        }
    };
    runtime.block_on(execute(cli))
}
