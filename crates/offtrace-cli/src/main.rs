// Not `forbid`: forwarding signals to the traced program needs `sigaction`/`kill`, which live in
// `signals.rs` (the one module allowed unsafe code, each block with its SAFETY argument).
#![deny(unsafe_code)]
//! `offtrace`: record a program's accelerator-runtime activity, report on a trace, export it.
//!
//! Exit codes: 0 ok (for `record`: the program's own status, 128+signal if it was killed),
//! 1 error, 2 usage.

mod cli;
mod cli_metrics;
mod export_cmd;
mod format;
mod metrics_cmd;
mod opencl_loader;
mod record;
mod report;
mod signals;
mod traces;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = match cli::Cli::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match run(args) {
        Ok(code) => ExitCode::from(code),
        // The reader of our output went away (`offtrace report t | head`): nothing to say.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // Causes whose text the message already holds (thiserror messages often embed
            // their source) are not repeated.
            let mut msg = e.to_string();
            for cause in e.chain().skip(1) {
                let c = cause.to_string();
                if !msg.contains(&c) {
                    msg.push_str(": ");
                    msg.push_str(&c);
                }
            }
            eprintln!("offtrace: error: {msg}");
            ExitCode::from(1)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<serde_json::Error>()
                .and_then(|j| j.io_error_kind())
                .is_some_and(|k| k == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<csv::Error>().is_some_and(
                |c| matches!(c.kind(), csv::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::BrokenPipe),
            )
    })
}

fn run(args: cli::Cli) -> anyhow::Result<u8> {
    match args.command {
        cli::Command::Record(r) => record::run(r.into_config()?),
        cli::Command::Report(r) => report::run(&r.into_config()),
        cli::Command::Export(e) => export_cmd::run(&e.into_config()),
        cli::Command::Metrics(m) => match m.command {
            cli_metrics::MetricsCommand::List(l) => metrics_cmd::list(&l.into_config()),
            cli_metrics::MetricsCommand::OpenclProbe => metrics_cmd::opencl_probe(),
        },
        cli::Command::Monitor(m) => metrics_cmd::monitor(&m.into_config()),
    }
}
