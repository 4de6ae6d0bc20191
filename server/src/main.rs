//! The composition root: parse the command line, set up logging, and hand off to the library.
//! Only this file reads the process environment (through clap's `env` attributes), with two
//! exceptions: `recourse acp`'s exec into `recourse-acp` passes the environment on and marks it
//! (`server::editor::binary`), and `recourse acp` reads its token from the variable its
//! `--token-env` names.

use clap::Parser;
use server::cli::{Cli, Command};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut cli = Cli::parse();
    // `serve` names its replica before the first log line, so every line carries it.
    let replica = match &mut cli.command {
        Command::Serve(args) => Some(
            args.replica_id
                .get_or_insert_with(server::replica::ReplicaId::of_this_process)
                .clone(),
        ),
        _ => None,
    };
    server::telemetry::init(cli.log_format, replica.as_ref());
    let result = match cli.command {
        Command::Serve(args) => run_async(server::serve::serve(args)),
        Command::Migrate(args) => run_async(server::serve::migrate(args)),
        Command::Classify(args) => server::serve::classify(&args),
        Command::Catalogue {
            command: server::cli::CatalogueCommand::Check { fixtures },
        } => server::serve::catalogue_check(&fixtures),
        Command::User {
            command: server::cli::UserCommand::Add(args),
        } => run_async(server::auth::bootstrap::user_add(args)),
        Command::User {
            command: server::cli::UserCommand::List(args),
        } => run_async(async move { server::auth::bootstrap::user_list(&args.database).await }),
        Command::Token {
            command: server::cli::TokenCommand::Add(args),
        } => run_async(server::auth::bootstrap::token_add(args)),
        Command::Agents {
            command: server::cli::AgentsCommand::Check { config },
        } => run_async(server::serve::agents_check(&config)),
        Command::Acp(args) => {
            server::editor::binary::exec_own_binary();
            server::editor::binary::serve(args)
        }
        Command::AgentGuard { command, args } => return server::editor::guard::run(command, args),
    };
    server::telemetry::exit(result)
}

fn run_async<F: std::future::Future<Output = anyhow::Result<ExitCode>>>(fut: F) -> anyhow::Result<ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(fut)
}
