//! A minimal JSON-RPC 2.0 client for `daemon.control` (SPEC section 1):
//! newline-delimited, one request per line, one reply per line, in order.
//!
//! Every request is serialized from a seed `DaemonCommand`. Every `result`
//! is decoded with `serde_json::from_str::<DaemonStatus>` from its raw text
//! (not from a `serde_json::Value`, which would hide duplicate keys and
//! number forms) and must come back unchanged when serde re-serializes it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::daemon::{DaemonCommand, DaemonStatus};

const METHOD: &str = "daemon.control";
const TIMEOUT: Duration = Duration::from_secs(10);

/// A JSON-RPC error object, as the daemon sent it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(default)]
    pub data: Option<Value>,
}

impl RpcError {
    /// `data.reason`, when it is a string.
    pub fn reason(&self) -> Option<&str> {
        self.data.as_ref()?.get("reason")?.as_str()
    }
}

/// One reply: a `DaemonStatus` or a JSON-RPC error, never both.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one reply at a time
pub enum Reply {
    Result(DaemonStatus),
    Error(RpcError),
}

#[derive(Serialize)]
struct Request<'a> {
    jsonrpc: &'static str,
    id: u64,
    method: &'static str,
    params: &'a DaemonCommand,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Response<'a> {
    jsonrpc: String,
    id: Value,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<RpcError>,
}

pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
    /// Also require each `result` to be byte-for-byte serde's own encoding.
    exact: bool,
    /// Replies whose text differed from serde's encoding (when not `exact`).
    pub inexact: Vec<String>,
}

impl Client {
    pub fn connect(path: &str, exact: bool) -> Result<Client, String> {
        let stream = UnixStream::connect(path).map_err(|e| format!("connect {path}: {e}"))?;
        stream
            .set_read_timeout(Some(TIMEOUT))
            .and_then(|()| stream.set_write_timeout(Some(TIMEOUT)))
            .map_err(|e| format!("socket timeouts: {e}"))?;
        let writer = stream
            .try_clone()
            .map_err(|e| format!("clone socket: {e}"))?;
        Ok(Client {
            reader: BufReader::new(stream),
            writer,
            next_id: 1,
            exact,
            inexact: Vec::new(),
        })
    }

    /// Send one command and read its reply. `Err` means the exchange itself
    /// broke the protocol or the seed's types; a JSON-RPC error is `Ok`.
    pub fn call(&mut self, command: &DaemonCommand) -> Result<Reply, String> {
        let id = self.next_id;
        self.next_id += 1;
        let request = Request {
            jsonrpc: "2.0",
            id,
            method: METHOD,
            params: command,
        };
        let mut line = serde_json::to_string(&request).map_err(|e| format!("encode: {e}"))?;
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .map_err(|e| format!("send: {e}"))?;

        let mut reply = String::new();
        let n = self
            .reader
            .read_line(&mut reply)
            .map_err(|e| format!("read reply to id {id}: {e}"))?;
        if n == 0 || !reply.ends_with('\n') {
            return Err(format!(
                "daemon closed the connection before a full reply to id {id}"
            ));
        }
        let reply = reply.trim_end_matches('\n');
        let frame: Response =
            serde_json::from_str(reply).map_err(|e| format!("reply {reply}: not JSON-RPC: {e}"))?;
        if frame.jsonrpc != "2.0" {
            return Err(format!("reply {reply}: jsonrpc is not \"2.0\""));
        }
        if frame.id != id {
            return Err(format!("reply {reply}: id is {}, want {id}", frame.id));
        }
        match (frame.result, frame.error) {
            (Some(raw), None) => self.decode_status(raw.get()).map(Reply::Result),
            (None, Some(error)) => Ok(Reply::Error(error)),
            (Some(_), Some(_)) => Err(format!("reply {reply}: has both result and error")),
            (None, None) => Err(format!("reply {reply}: has neither result nor error")),
        }
    }

    fn decode_status(&mut self, raw: &str) -> Result<DaemonStatus, String> {
        let status: DaemonStatus = serde_json::from_str(raw)
            .map_err(|e| format!("result is not a seed DaemonStatus: {e}\n  result: {raw}"))?;
        let again = serde_json::to_string(&status).map_err(|e| format!("re-encode: {e}"))?;
        // Same JSON value: no missing defaults, no extra fields, no `null`
        // where serde skips the field, and the reverse.
        let sent: Value = serde_json::from_str(raw).map_err(|e| format!("result: {e}"))?;
        let serde: Value = serde_json::from_str(&again).map_err(|e| format!("re-encode: {e}"))?;
        if sent != serde {
            return Err(format!(
                "result does not survive a serde round trip\n  daemon: {raw}\n  serde:  {again}"
            ));
        }
        // Same text: field order, escaping, number forms.
        if raw != again {
            if self.exact {
                return Err(format!(
                    "result is not serde's own encoding\n  daemon: {raw}\n  serde:  {again}"
                ));
            }
            self.inexact.push(raw.to_string());
        }
        Ok(status)
    }
}
