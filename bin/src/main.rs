//! The `corelb` command: nginx's command line (`-c` runs the proxy, `-t`/`-T` test a config, `-s` signals the
//! running proxy, `-v`/`-V`/`-h`, with `-p`, `-e`, `-g`, `-q`), and the subcommands `pick` (which peers requests
//! would reach) and `bench` (the load generator).

mod alloc;
mod bench;
mod check;
mod options;
mod pick;
mod run;
mod signal;
mod startup;
mod version;

use clap::{Parser, Subcommand};
use options::{Command as Line, Options};
use std::process::ExitCode;

/// corelb: a load balancer that reads nginx's config syntax and picks exactly the peers nginx 1.22 picks.
#[derive(Debug, Parser)]
#[command(
    name = "corelb",
    disable_version_flag = true,
    subcommand_required = true,
    after_help = "nginx's options: corelb [-?hvVtTq] [-s signal] [-p prefix] [-e filename] [-c filename] \
                  [-g directives] [--runtime tokio|glommio] (see corelb -h)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show the peer(s) each request would reach, using the same balancers and retry rules as the proxy.
    Pick(pick::PickArgs),
    /// Load-test an HTTP/1.1 or TCP echo target (closed loop, or open loop at a fixed rate).
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    alloc::install();
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    match options::parse(&args) {
        Ok(Line::Nginx(o)) => nginx(&o),
        Ok(Line::Clap) => subcommand(),
        Err(e) => {
            eprintln!("corelb: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn subcommand() -> ExitCode {
    match &Cli::parse().command {
        Command::Pick(args) => pick::main(args),
        Command::Bench(args) => bench::main(args),
    }
}

/// nginx's order: the version (and exit unless testing), then test, signal, or run.
fn nginx(o: &Options) -> ExitCode {
    if o.long_version {
        println!("corelb version {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    if o.version {
        eprint!("{}", version::text(o.help, o.configure));
        if !o.test {
            return ExitCode::SUCCESS;
        }
    }
    let startup = match startup::resolve(o) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("corelb: {e}");
            return ExitCode::from(1);
        }
    };
    if o.test {
        check::test_config(&startup, o)
    } else if let Some(action) = &o.signal {
        signal::main(&startup, action)
    } else {
        run::run(&startup, o.runtime.as_deref())
    }
}
