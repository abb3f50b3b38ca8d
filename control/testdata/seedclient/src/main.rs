//! seedclient: an offline harness built from the seed's own serde types.
//!
//! `decode` lets Go tests compare their strict decoder with serde itself;
//! `drive` runs a project lifecycle against a live daemon socket and checks
//! every reply with those same types. See README.md.

// The wire contract, compiled unchanged from `<clone>/../shared/seed/daemon.rs`.
// A `#[path]` in the crate root resolves from this file's folder (`src/`):
// src -> seedclient -> testdata -> control -> <clone> -> its parent.
#[allow(dead_code)]
#[path = "../../../../../shared/seed/daemon.rs"]
mod daemon;

mod decode;
mod drive;
mod rpc;

use std::process::ExitCode;

const USAGE: &str = "usage:
  seedclient decode                      < lines of <name>\\t<command|status>\\t<json>
  seedclient drive [--exact] <socket-path>";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        ["decode"] => decode::run(),
        ["drive", socket] => drive::run(socket, false),
        ["drive", "--exact", socket] => drive::run(socket, true),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("seedclient {}: FAIL: {msg}", args[0]);
            ExitCode::FAILURE
        }
    }
}
