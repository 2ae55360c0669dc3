//! The `agentd` executable: parses the command line and runs it on a tokio runtime.

#![warn(clippy::too_many_lines)]
#![cfg_attr(not(test), warn(clippy::indexing_slicing))]

use std::process::ExitCode;

use agentd::api::cli::EXIT_DID_NOT_RUN;
use agentd::api::cli::{Cli, Command, execute};
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
    // A one-shot command waits on one thing at a time (the helper, a command, a file): one
    // thread serves it, and no worker threads are started for it. What serves a client or runs
    // a turn (acp, exec, demo) gets a worker per core.
    let mut builder = match cli.command {
        Command::Acp(_) | Command::Exec(_) | Command::Demo(_) => {
            tokio::runtime::Builder::new_multi_thread()
        }
        _ => tokio::runtime::Builder::new_current_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("agentd: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_DID_NOT_RUN);
        }
    };
    runtime.block_on(execute(cli))
}
