//! Logs as go-plugin reads them from a plugin's stderr: one hclog JSON object per line, with
//! `@level`, `@message`, `@module`, `@timestamp` (six fractional digits, or the line is
//! taken as plain text) and the event's fields. Nomad re-logs each line at its level.
//!
//! Hand-written (a `tracing_subscriber` layer of some 60 lines) because the JSON formatter of
//! `tracing-subscriber` names its keys `level`/`fields.message`/`timestamp`, which hclog does
//! not read. Writes to stderr ignore errors: once Nomad has gone, the pipe is closed and the
//! plugin keeps running its tasks.

use std::io::Write;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_log::NormalizeEvent as _;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

/// A layer that writes hclog JSON lines to stderr.
pub struct HclogLayer;

struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(key(field), Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(key(field), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(key(field), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(key(field), Value::from(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // A record of the `log` crate carries its origin as `log.*` fields; the
        // normalized metadata says it once.
        if !field.name().starts_with("log.") {
            self.0.insert(key(field), Value::from(format!("{value:?}")));
        }
    }
}

fn key(field: &Field) -> String {
    match field.name() {
        "message" => "@message".into(),
        other => other.into(),
    }
}

/// hclog's level names.
pub fn level_name(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "trace",
        Level::DEBUG => "debug",
        Level::INFO => "info",
        Level::WARN => "warn",
        Level::ERROR => "error",
    }
}

/// One event as an hclog line (with its newline).
pub fn line(level: &Level, target: &str, mut fields: Map<String, Value>) -> String {
    let message = fields.remove("@message").unwrap_or_else(|| Value::from(""));
    // `@message` must be a string: go-plugin 1.0.1 asserts the type.
    let message = match message {
        Value::String(s) => s,
        other => other.to_string(),
    };
    let mut out = Map::new();
    out.insert("@level".into(), level_name(level).into());
    out.insert("@message".into(), message.into());
    out.insert("@module".into(), target.replace("::", ".").into());
    out.insert(
        "@timestamp".into(),
        jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string()
            .into(),
    );
    out.extend(fields);
    let mut s = Value::Object(out).to_string();
    s.push('\n');
    s
}

impl<S: Subscriber> Layer<S> for HclogLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Fields(Map::new());
        event.record(&mut fields);
        // Records of the `log` crate (wasmtime's) name their own module.
        let normalized = event.normalized_metadata();
        let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());
        let text = line(meta.level(), meta.target(), fields.0);
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_hclog_json_with_microseconds() {
        let mut f = Map::new();
        f.insert("@message".into(), "started".into());
        f.insert("task_id".into(), "a/b/c".into());
        let l = line(&Level::WARN, "paddock_nomad_driver::driver", f);
        assert!(l.ends_with('\n'));
        let v: Value = serde_json::from_str(&l).unwrap();
        assert_eq!(v["@level"], "warn");
        assert_eq!(v["@message"], "started");
        assert_eq!(v["@module"], "paddock_nomad_driver.driver");
        assert_eq!(v["task_id"], "a/b/c");
        let ts = v["@timestamp"].as_str().unwrap();
        // 2026-12-01T23:45:01.123456Z
        assert_eq!(ts.len(), 27, "{ts}");
        assert_eq!(&ts[19..20], ".");
        assert!(ts[20..26].bytes().all(|b| b.is_ascii_digit()), "{ts}");
    }
}
