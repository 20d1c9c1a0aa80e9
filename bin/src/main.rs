//! The `corelb` command: `-c` runs the proxy, `-t` tests a config, `-s` signals the running proxy, `pick` shows
//! which peers requests would reach, `bench` runs the load generator.

mod bench;
mod check;
mod pick;
mod run;
mod signal;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// corelb: a load balancer that reads nginx's config syntax and picks exactly the peers nginx 1.22 picks.
#[derive(Debug, Parser)]
#[command(name = "corelb", disable_version_flag = true, args_conflicts_with_subcommands = true)]
struct Cli {
    /// Test the configuration file and exit (like `nginx -t`).
    #[arg(short = 't')]
    test: bool,
    /// Send a signal to the running proxy (found through the config's `pid` file), like `nginx -s`.
    #[arg(short = 's', value_name = "SIGNAL", value_parser = signal::ACTIONS)]
    signal: Option<String>,
    /// The configuration file.
    #[arg(short = 'c', value_name = "FILE")]
    config: Option<PathBuf>,
    /// The shard runtime of the proxy.
    #[arg(long, value_name = "RUNTIME", value_parser = ["tokio", "glommio"])]
    runtime: Option<String>,
    /// Print the version and exit.
    #[arg(short = 'v', long = "version")]
    version: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show the peer(s) each request would reach, using the same balancers and retry rules as the proxy.
    Pick(pick::PickArgs),
    /// Load-test an HTTP/1.1 or TCP echo target (closed loop, or open loop at a fixed rate).
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.version {
        println!("corelb version {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    match &cli.command {
        Some(Command::Pick(args)) => return pick::main(args),
        Some(Command::Bench(args)) => return bench::main(args),
        None => {}
    }
    let Some(config) = cli.config else {
        eprintln!("corelb: [emerg] no configuration file given: use -c FILE (see --help)");
        return ExitCode::from(1);
    };
    if let Some(action) = &cli.signal {
        signal::main(&config, action)
    } else if cli.test {
        check::test_config(&config)
    } else {
        run::run(&config, cli.runtime)
    }
}
