//! The `redis-ping` check: connects to the service's address and port, sends Redis's
//! `PING` (as RESP, with `AUTH` first when the plugin config gives a `password`), and
//! reads one reply line:
//!
//! - `+PONG` passes;
//! - `-NOAUTH …`, `-WRONGPASS …`, `-LOADING …`: the server answers but is not ready for
//!   the caller, a warning;
//! - any other reply, a closed connection or a timeout: critical.
//!
//! ```hcl
//! service {
//!   name = "cache"
//!   port = "redis"
//!   provider = "nomad"
//!   check {
//!     type     = "redis-ping"
//!     interval = "5s"
//!     timeout  = "2s"
//!   }
//! }
//! ```
//!
//! It reaches only what its `network` grant lists:
//! `plugin "redis-ping" { grant { network { hosts = ["127.0.0.1:*"] } } }`.

use std::io::{BufRead, BufReader, Read, Write};

use paddock_check_sdk::{
    Check, CheckError, CheckResult, CheckStatus, CheckTarget, PluginInfo, connect,
};

struct RedisPing;

/// The longest reply line read.
const MAX_LINE: usize = 512;

/// The password to send with `AUTH`: the plugin config's `password`, if any.
fn password() -> Option<String> {
    let config: serde_json::Value = paddock_check_sdk::host::config::get().ok()?;
    config["password"].as_str().map(str::to_string)
}

/// A RESP array of bulk strings.
fn command(parts: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", parts.len()).into_bytes();
    for p in parts {
        out.extend_from_slice(format!("${}\r\n{p}\r\n", p.len()).as_bytes());
    }
    out
}

/// What a reply line to `PING` says.
pub fn judge(line: &str) -> CheckResult {
    let line = line.trim_end_matches(['\r', '\n']);
    if line == "+PONG" {
        CheckResult::new(CheckStatus::Passing, "redis: PONG")
    } else if ["-NOAUTH", "-WRONGPASS", "-LOADING", "-BUSY", "-MASTERDOWN"]
        .iter()
        .any(|p| line.starts_with(p))
    {
        CheckResult::new(CheckStatus::Warning, format!("redis: {line}"))
    } else if line.is_empty() {
        CheckResult::new(
            CheckStatus::Critical,
            "redis: the connection closed without a reply",
        )
    } else {
        CheckResult::new(
            CheckStatus::Critical,
            format!("redis: unexpected reply {line:?}"),
        )
    }
}

impl Check for RedisPing {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "redis-ping".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    fn probe(target: CheckTarget, _config: String) -> Result<CheckResult, CheckError> {
        let stream = connect(&target)?;
        // One stream, written and read through shared references (WASI sockets cannot
        // clone it).
        let mut reader = BufReader::new(&stream).take(MAX_LINE as u64 * 2);
        let send = |bytes: Vec<u8>| {
            (&stream)
                .write_all(&bytes)
                .map_err(|e| CheckError::Failed(format!("redis: writing: {e}")))
        };
        let mut line = String::new();
        if let Some(p) = password() {
            send(command(&["AUTH", &p]))?;
            reader
                .read_line(&mut line)
                .map_err(|e| CheckError::Failed(format!("redis: reading: {e}")))?;
            if !line.starts_with("+OK") {
                return Ok(CheckResult::new(
                    CheckStatus::Warning,
                    format!("redis: AUTH answered {:?}", line.trim_end()),
                ));
            }
            line.clear();
        }
        send(command(&["PING"]))?;
        reader
            .read_line(&mut line)
            .map_err(|e| CheckError::Failed(format!("redis: reading: {e}")))?;
        line.truncate(MAX_LINE);
        Ok(judge(&line))
    }
}

paddock_check_sdk::export_check!(RedisPing);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_judged_as_redis_means_them() {
        assert_eq!(judge("+PONG\r\n").status, CheckStatus::Passing);
        assert_eq!(
            judge("-NOAUTH Authentication required.\r\n").status,
            CheckStatus::Warning
        );
        assert_eq!(judge("-ERR unknown\r\n").status, CheckStatus::Critical);
        assert_eq!(judge("").status, CheckStatus::Critical);
        assert_eq!(command(&["PING"]), b"*1\r\n$4\r\nPING\r\n");
    }
}
