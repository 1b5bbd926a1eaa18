//! `distlock-bench`: the flash-sale demo and the benchmark of the distlock library, kept out
//! of `distlock-cli` (as parking_lot and redis-rs keep their benchmarks out of what users
//! install): its charts, histograms and private test deployments are not built by
//! `cargo install distlock-cli`. Not published.

mod bench;
mod demo;
mod embedded;

// The `distlock` command's connection arguments, exit codes and output helpers, built from
// its files (it publishes no library target for them).
#[allow(dead_code)]
#[path = "../../distlock-cli/src/args.rs"]
mod args;
#[allow(dead_code)]
#[path = "../../distlock-cli/src/connect.rs"]
mod connect;
#[allow(dead_code)]
#[path = "../../distlock-cli/src/exit.rs"]
mod exit;
#[allow(dead_code, unused_macros, unused_imports)]
#[path = "../../distlock-cli/src/out.rs"]
mod out;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The distlock flash-sale demo and benchmark, on a private redis-server or --url.
#[derive(Parser, Debug)]
#[command(name = "distlock-bench", version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    connection: args::ConnectionArgs,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// A flash sale: many processes buy under locks; checks no oversell and no duplicate
    /// orders.
    Demo(demo::DemoArgs),
    /// Benchmark distlock: the standard lock workloads (uncontended, distinct, contended,
    /// handoff) plus watchdog, waiters, memory and lost; a table, or JSON lines with --json;
    /// charts (SVG, PNG) with --plot DIR, other runs beside distlock's with --compare.
    Bench(bench::BenchArgs),
    /// One worker process of `demo` (started by `demo` itself).
    #[command(hide = true)]
    DemoWorker(demo::WorkerArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help into a closed pipe is not an error.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { exit::USAGE } else { 0 });
        }
    };
    out::init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            out::errln!("distlock-bench: cannot start the async runtime: {e}");
            return ExitCode::from(exit::ERROR);
        }
    };
    let result = runtime.block_on(async move {
        let opts = cli.connection.options()?;
        match cli.command {
            Command::Demo(args) => demo::run(&opts, args).await,
            Command::DemoWorker(args) => demo::worker(&opts, args).await,
            Command::Bench(args) => bench::run(&opts, args).await,
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        // A closed stdout ends a command quietly (see the `distlock` command's `out.rs`).
        Err(e) if out::is_closed(&e) => ExitCode::SUCCESS,
        Err(e) => {
            out::errln!("distlock-bench: {e:#}");
            ExitCode::from(exit::ERROR)
        }
    }
}
