//! `seedclient decode`: run each input through serde and say what it made of it.
//!
//! Input, one case per line: `<name>\t<kind>\t<raw json>`, kind `command`
//! (`DaemonCommand`) or `status` (`DaemonStatus`). The JSON is everything
//! after the second tab, handed to `serde_json::from_slice` byte for byte, so
//! number forms, duplicate keys and invalid UTF-8 reach serde unchanged.
//! Empty lines are skipped.
//!
//! Output, one line per case:
//!   `<name>\tok\t<serde's own re-serialization>` or
//!   `<name>\terr\t<serde's error message>`
//! with any newline, carriage return or tab inside a message written as
//! `\n`, `\r`, `\t` so that every case stays on one line (serde only puts
//! them there when it quotes a decoded string, such as an unknown variant);
//! everything else is serde's message verbatim.
//!
//! A malformed input line is a bug in the caller: stop with exit status 1.

use std::io::{self, BufRead, Write};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::daemon::{DaemonCommand, DaemonStatus};

pub fn run() -> Result<(), String> {
    let stdin = io::stdin().lock();
    let mut out = io::stdout().lock();
    for (index, line) in stdin.split(b'\n').enumerate() {
        let line = line.map_err(|e| format!("reading stdin: {e}"))?;
        if line.is_empty() {
            continue;
        }
        let mut parts = line.splitn(3, |&b| b == b'\t');
        let (Some(name), Some(kind), Some(json)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(format!(
                "input line {}: want <name>\\t<kind>\\t<json>",
                index + 1
            ));
        };
        let name = String::from_utf8_lossy(name);
        let outcome = match kind {
            b"command" => roundtrip::<DaemonCommand>(json),
            b"status" => roundtrip::<DaemonStatus>(json),
            _ => {
                return Err(format!(
                    "input line {}: kind {:?} is neither `command` nor `status`",
                    index + 1,
                    String::from_utf8_lossy(kind)
                ))
            }
        };
        let written = match outcome {
            Ok(json) => writeln!(out, "{name}\tok\t{json}"),
            Err(msg) => writeln!(out, "{name}\terr\t{}", one_line(&msg)),
        };
        written
            .and_then(|()| out.flush())
            .map_err(|e| format!("writing stdout: {e}"))?;
    }
    Ok(())
}

/// Decode `json` as `T` the way a serde client would, then encode it again.
fn roundtrip<T: DeserializeOwned + Serialize>(json: &[u8]) -> Result<String, String> {
    let value: T = serde_json::from_slice(json).map_err(|e| e.to_string())?;
    serde_json::to_string(&value).map_err(|e| format!("re-serializing: {e}"))
}

fn one_line(msg: &str) -> String {
    msg.replace('\n', "\\n")
        .replace('\r', "\\r")
        .replace('\t', "\\t")
}
