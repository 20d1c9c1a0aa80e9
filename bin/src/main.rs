//! The `corelb` command: `bench` runs the load generator.

mod bench;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// corelb: a load balancer that reads nginx's config syntax and picks exactly the peers nginx 1.22 picks.
#[derive(Debug, Parser)]
#[command(name = "corelb", disable_version_flag = true, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Load-test an HTTP/1.1 or TCP echo target (closed loop, or open loop at a fixed rate).
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Bench(args)) = &cli.command {
        return bench::main(args);
    }
    ExitCode::SUCCESS
}
