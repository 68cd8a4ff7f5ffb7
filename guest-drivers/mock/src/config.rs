//! The mock driver's task config (a task's `config` block) and plugin config, checked field by
//! field so that every bad field gets its own [`FieldError`].

use paddock_driver_sdk::{FieldError, duration};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A driver operation a misbehaviour can be attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// `info`.
    Info,
    /// `capabilities`.
    Capabilities,
    /// `validate-config`.
    ValidateConfig,
    /// `fingerprint`.
    Fingerprint,
    /// `start`.
    Start,
    /// `recover`.
    Recover,
    /// `wait`.
    Wait,
    /// `stop`.
    Stop,
    /// `destroy`.
    Destroy,
    /// `inspect`.
    Inspect,
    /// `signal`.
    Signal,
    /// `stats`.
    Stats,
}

/// Ops a task's own `misbehave` may name: those that get its config or its handle.
pub const TASK_OPS: &[Op] = &[
    Op::Start,
    Op::Wait,
    Op::Stop,
    Op::Inspect,
    Op::Signal,
    Op::Stats,
    Op::Recover,
    Op::Destroy,
];

/// Every op, which the plugin config's `misbehave` may name.
pub const ALL_OPS: &[Op] = &[
    Op::Info,
    Op::Capabilities,
    Op::ValidateConfig,
    Op::Fingerprint,
    Op::Start,
    Op::Recover,
    Op::Wait,
    Op::Stop,
    Op::Destroy,
    Op::Inspect,
    Op::Signal,
    Op::Stats,
];

impl Op {
    /// The op's name in configs (`validate_config`; `validate-config` is accepted too).
    pub fn name(self) -> &'static str {
        match self {
            Op::Info => "info",
            Op::Capabilities => "capabilities",
            Op::ValidateConfig => "validate_config",
            Op::Fingerprint => "fingerprint",
            Op::Start => "start",
            Op::Recover => "recover",
            Op::Wait => "wait",
            Op::Stop => "stop",
            Op::Destroy => "destroy",
            Op::Inspect => "inspect",
            Op::Signal => "signal",
            Op::Stats => "stats",
        }
    }
}

/// How the driver misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Spin forever in pure wasm.
    Loop,
    /// Panic, which traps.
    Trap,
    /// Allocate and touch memory without bound.
    Oom,
    /// Sleep in the host forever.
    Hang,
}

const KINDS: &[(&str, Kind)] = &[
    ("loop", Kind::Loop),
    ("trap", Kind::Trap),
    ("oom", Kind::Oom),
    ("hang", Kind::Hang),
];

/// A deliberate misbehaviour: `{"op": "wait", "kind": "loop"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Misbehave {
    /// The op that misbehaves.
    pub op: Op,
    /// How it misbehaves.
    pub kind: Kind,
}

/// A task's `config` block for the mock driver. Durations are nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskConfig {
    /// How long the task runs before it exits by itself.
    pub run_for: u64,
    /// Exit code when it exits by itself.
    pub exit_code: i32,
    /// Signal number when it exits by itself.
    pub exit_signal: i32,
    /// Driver error reported with that exit.
    pub exit_err_msg: Option<String>,
    /// `start` fails with this message.
    pub start_error: Option<String>,
    /// Whether that start error is recoverable.
    pub start_error_recoverable: bool,
    /// `start` sleeps this long (in the host) before answering.
    pub start_block_for: u64,
    /// After a stop, the task runs this long before it exits.
    pub kill_after: u64,
    /// `signal` fails with this message.
    pub signal_error: Option<String>,
    /// A task event `start` emits (type "Driver"), to exercise driver event routing.
    pub driver_event: Option<String>,
    /// Written to the task's stdout at start.
    pub stdout_string: Option<String>,
    /// How many more times it is written while the task runs.
    pub stdout_repeat: i32,
    /// Time between the repeats.
    pub stdout_repeat_duration: u64,
    /// `stdout_string` goes through the host's `env.interpolate` first.
    pub stdout_interpolate: bool,
    /// The task's device reservations (host `devices`) are written after `stdout_string`.
    pub stdout_devices: bool,
    /// A deliberate misbehaviour of one op.
    pub misbehave: Option<Misbehave>,
    /// Bytes of padding kept in the task's handle (a driver that keeps too much state).
    pub handle_padding: u64,
    /// How many times `start` emits `driver_event` (a driver that floods; 0 means once).
    pub driver_event_repeat: u64,
}

/// The mock driver's plugin config (`plugin "mock" { config { ... } }`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginConfig {
    /// A deliberate misbehaviour of one op, for every task.
    pub misbehave: Option<Misbehave>,
}

/// Parses and checks a task's `config` block (JSON; blank means `{}`).
pub fn parse_task_config(json: &str) -> Result<TaskConfig, Vec<FieldError>> {
    let mut config = TaskConfig::default();
    let mut errors = Vec::new();
    for (key, value) in object(json)? {
        let checked = match key.as_str() {
            "run_for" => duration(&value).map(|v| config.run_for = v),
            "exit_code" => int(&value).map(|v| config.exit_code = v),
            "exit_signal" => int(&value).map(|v| config.exit_signal = v),
            "exit_err_msg" => string(&value).map(|v| config.exit_err_msg = Some(v)),
            "start_error" => string(&value).map(|v| config.start_error = Some(v)),
            "start_error_recoverable" => {
                boolean(&value).map(|v| config.start_error_recoverable = v)
            }
            "start_block_for" => duration(&value).map(|v| config.start_block_for = v),
            "kill_after" => duration(&value).map(|v| config.kill_after = v),
            "signal_error" => string(&value).map(|v| config.signal_error = Some(v)),
            "driver_event" => string(&value).map(|v| config.driver_event = Some(v)),
            "stdout_string" => string(&value).map(|v| config.stdout_string = Some(v)),
            "stdout_repeat" => int(&value).map(|v| config.stdout_repeat = v),
            "stdout_repeat_duration" => duration(&value).map(|v| config.stdout_repeat_duration = v),
            "stdout_interpolate" => boolean(&value).map(|v| config.stdout_interpolate = v),
            "stdout_devices" => boolean(&value).map(|v| config.stdout_devices = v),
            "misbehave" => {
                config.misbehave = misbehave(&value, TASK_OPS, &mut errors);
                Ok(())
            }
            "driver_event_repeat" => match value.as_u64() {
                Some(n) if n <= 10_000_000 => {
                    config.driver_event_repeat = n;
                    Ok(())
                }
                _ => Err(format!("expected a count from 0 to 10000000, got {value}")),
            },
            "handle_padding" => match value.as_u64() {
                Some(n) if n <= 32 << 20 => {
                    config.handle_padding = n;
                    Ok(())
                }
                _ => Err(format!(
                    "expected bytes from 0 to {}, got {value}",
                    32 << 20
                )),
            },
            _ => Err("unknown field".to_string()),
        };
        if let Err(message) = checked {
            errors.push(FieldError::new(key, message));
        }
    }
    if errors.is_empty() {
        Ok(config)
    } else {
        Err(errors)
    }
}

/// Parses and checks the plugin config (JSON; blank means `{}`).
pub fn parse_plugin_config(json: &str) -> Result<PluginConfig, Vec<FieldError>> {
    let mut config = PluginConfig::default();
    let mut errors = Vec::new();
    for (key, value) in object(json)? {
        match key.as_str() {
            "misbehave" => config.misbehave = misbehave(&value, ALL_OPS, &mut errors),
            _ => errors.push(FieldError::new(key, "unknown field")),
        }
    }
    if errors.is_empty() {
        Ok(config)
    } else {
        Err(errors)
    }
}

/// The JSON object's fields, without those set to `null` (which count as absent).
fn object(json: &str) -> Result<Map<String, Value>, Vec<FieldError>> {
    let json = if json.trim().is_empty() { "{}" } else { json };
    match serde_json::from_str(json) {
        Ok(Value::Object(map)) => Ok(map.into_iter().filter(|(_, v)| !v.is_null()).collect()),
        Ok(other) => Err(vec![FieldError::new(
            "",
            format!("expected a JSON object, got {other}"),
        )]),
        Err(e) => Err(vec![FieldError::new("", format!("invalid JSON: {e}"))]),
    }
}

/// Parses `{"op": .., "kind": ..}`, pushing errors for `misbehave.*` fields.
fn misbehave(value: &Value, ops: &[Op], errors: &mut Vec<FieldError>) -> Option<Misbehave> {
    let Value::Object(map) = value else {
        let message = format!("expected an object, got {value}");
        errors.push(FieldError::new("misbehave", message));
        return None;
    };
    let mut bad = |name: &str, message: String| {
        errors.push(FieldError::new(format!("misbehave.{name}"), message));
    };
    let mut clean = true;
    for key in map.keys().filter(|k| *k != "op" && *k != "kind") {
        bad(key, "unknown field".into());
        clean = false;
    }
    let op_names: Vec<(&str, Op)> = ops.iter().map(|&op| (op.name(), op)).collect();
    let op = choose(map.get("op"), "op", &op_names).map_err(|e| bad("op", e));
    let kind = choose(map.get("kind"), "kind", KINDS).map_err(|e| bad("kind", e));
    match (op, kind) {
        (Ok(op), Ok(kind)) if clean => Some(Misbehave { op, kind }),
        _ => None,
    }
}

/// The choice that `value` names among `choices` (`-` and `_` are the same).
fn choose<T: Copy>(value: Option<&Value>, what: &str, choices: &[(&str, T)]) -> Result<T, String> {
    let name = string(value.ok_or_else(|| "missing".to_string())?)?;
    let wanted = name.replace('-', "_");
    let found = choices.iter().find(|(choice, _)| *choice == wanted);
    found.map(|&(_, value)| value).ok_or_else(|| {
        let names: Vec<&str> = choices.iter().map(|(choice, _)| *choice).collect();
        format!("unknown {what} {name:?} (one of {})", names.join(", "))
    })
}

fn duration(value: &Value) -> Result<u64, String> {
    duration::from_json(value).map_err(|e| e.to_string())
}

fn int(value: &Value) -> Result<i32, String> {
    value
        .as_i64()
        .and_then(|v| i32::try_from(v).ok())
        .ok_or_else(|| format!("expected a 32-bit integer, got {value}"))
}

fn string(value: &Value) -> Result<String, String> {
    value
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("expected a string, got {value}"))
}

fn boolean(value: &Value) -> Result<bool, String> {
    value
        .as_bool()
        .ok_or_else(|| format!("expected a boolean, got {value}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn errors(json: &str) -> Vec<(String, String)> {
        parse_task_config(json)
            .unwrap_err()
            .into_iter()
            .map(|e| (e.field, e.message))
            .collect()
    }

    #[test]
    fn defaults_to_exiting_at_once() {
        assert_eq!(parse_task_config("").unwrap(), TaskConfig::default());
        assert_eq!(parse_task_config("{}").unwrap(), TaskConfig::default());
    }

    #[test]
    fn reads_every_field() {
        let config = parse_task_config(
            r#"{"run_for": "1m30s", "exit_code": 3, "exit_signal": 9, "exit_err_msg": "boom",
                "start_error": "nope", "start_error_recoverable": true, "start_block_for": 250,
                "kill_after": "2s", "signal_error": "no signals", "stdout_string": "hi",
                "driver_event": "pulling image",
                "stdout_repeat": 2, "stdout_repeat_duration": "1s", "misbehave": null,
                "handle_padding": 10, "driver_event_repeat": 3, "stdout_interpolate": true,
                "stdout_devices": true}"#,
        )
        .unwrap();
        assert_eq!(
            config,
            TaskConfig {
                run_for: 90 * S,
                exit_code: 3,
                exit_signal: 9,
                exit_err_msg: Some("boom".into()),
                start_error: Some("nope".into()),
                start_error_recoverable: true,
                start_block_for: 250,
                kill_after: 2 * S,
                signal_error: Some("no signals".into()),
                driver_event: Some("pulling image".into()),
                stdout_string: Some("hi".into()),
                stdout_repeat: 2,
                stdout_repeat_duration: S,
                misbehave: None,
                handle_padding: 10,
                driver_event_repeat: 3,
                stdout_interpolate: true,
                stdout_devices: true,
            }
        );
    }

    #[test]
    fn names_each_bad_field() {
        assert_eq!(
            errors(
                r#"{"run_for": "abc", "exit_code": "x", "bogus": 1, "start_error_recoverable": 1}"#
            ),
            vec![
                ("bogus".into(), "unknown field".into()),
                (
                    "exit_code".into(),
                    r#"expected a 32-bit integer, got "x""#.into()
                ),
                ("run_for".into(), r#"invalid duration "abc""#.into()),
                (
                    "start_error_recoverable".into(),
                    "expected a boolean, got 1".into()
                ),
            ]
        );
        assert_eq!(
            errors("[1]"),
            vec![("".into(), "expected a JSON object, got [1]".into())]
        );
        assert_eq!(errors("{").len(), 1);
        assert_eq!(errors(r#"{"exit_code": 4294967296}"#)[0].0, "exit_code");
    }

    #[test]
    fn reads_misbehave() {
        let config = parse_task_config(r#"{"misbehave": {"op": "start", "kind": "oom"}}"#).unwrap();
        assert_eq!(
            config.misbehave,
            Some(Misbehave {
                op: Op::Start,
                kind: Kind::Oom
            })
        );
        assert_eq!(
            errors(r#"{"misbehave": {"op": "fingerprint", "kind": "melt", "x": 1}}"#),
            vec![
                ("misbehave.x".into(), "unknown field".into()),
                (
                    "misbehave.op".into(),
                    r#"unknown op "fingerprint" (one of start, wait, stop, inspect, signal, stats, recover, destroy)"#.into()
                ),
                ("misbehave.kind".into(), r#"unknown kind "melt" (one of loop, trap, oom, hang)"#.into()),
            ]
        );
        assert_eq!(
            errors(r#"{"misbehave": {"op": "wait"}}"#),
            vec![("misbehave.kind".into(), "missing".into())]
        );
        assert_eq!(errors(r#"{"misbehave": "wait"}"#)[0].0, "misbehave");
    }

    #[test]
    fn plugin_config_may_name_any_op() {
        let config =
            parse_plugin_config(r#"{"misbehave": {"op": "validate-config", "kind": "hang"}}"#)
                .unwrap();
        assert_eq!(
            config.misbehave,
            Some(Misbehave {
                op: Op::ValidateConfig,
                kind: Kind::Hang
            })
        );
        assert_eq!(parse_plugin_config("{}").unwrap(), PluginConfig::default());
        assert_eq!(
            parse_plugin_config(r#"{"run_for": "1s"}"#).unwrap_err()[0].field,
            "run_for"
        );
    }

    #[test]
    fn misbehave_survives_a_handle() {
        let m = Misbehave {
            op: Op::ValidateConfig,
            kind: Kind::Trap,
        };
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(json, r#"{"op":"validate_config","kind":"trap"}"#);
        assert_eq!(serde_json::from_str::<Misbehave>(&json).unwrap(), m);
    }
}
