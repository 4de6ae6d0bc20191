//! `recourse acp` in a binary of its own (`server::editor::binary`): the same command line as
//! `recourse`, of which it runs only `acp` and the agent guard, so the linker keeps none of the
//! server. `recourse acp` replaces itself with this binary when it lies beside it; this one
//! hands back when that `recourse` is of another version.

use clap::Parser;
use server::cli::{Cli, Command};
use std::process::ExitCode;

fn main() -> ExitCode {
    // Before the command line is read: a `recourse` of another version may give arguments this
    // one does not know.
    server::editor::binary::hand_back_if_another_version();
    let cli = Cli::parse();
    server::telemetry::init(cli.log_format, None);
    let result = match cli.command {
        Command::Acp(args) => server::editor::binary::serve(args),
        Command::AgentGuard { command, args } => return server::editor::guard::run(command, args),
        _ => {
            eprintln!("error: recourse-acp runs `recourse acp` only; run the other commands with `recourse`");
            return ExitCode::from(2);
        }
    };
    server::telemetry::exit(result)
}
