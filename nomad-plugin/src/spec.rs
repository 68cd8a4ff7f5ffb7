//! hclspec schemas: how Nomad parses the agent's `plugin "paddock" { config {…} }` block and a
//! job's `config {}` block before encoding them as cty msgpack for this plugin.
//!
//! Paddock's driver contract carries no config schema (a component checks its config in
//! `validate-config`), so a task's config is described as one attribute of type `any` per
//! field the driver takes: Nomad passes each value as written and the component checks it,
//! with its own per-field errors. The built-in drivers' fields are listed here; a
//! third-party driver's come from the plugin config's `task_config_fields`.

use crate::proto::hclspec::{Attr, Block, Default as DefaultSpec, Literal, Object, Spec, spec};

/// The fields of each built-in driver's task config.
pub const BUILT_IN_FIELDS: &[(&str, &[&str])] = &[
    (
        "mock",
        &[
            "run_for",
            "exit_code",
            "exit_signal",
            "exit_err_msg",
            "start_error",
            "start_error_recoverable",
            "start_block_for",
            "kill_after",
            "signal_error",
            "driver_event",
            "stdout_string",
            "stdout_repeat",
            "stdout_repeat_duration",
            "misbehave",
        ],
    ),
    ("raw_exec", &["command", "args"]),
    (
        "exec",
        &[
            "command", "args", "pid_mode", "ipc_mode", "cap_add", "cap_drop",
        ],
    ),
];

/// The fields a built-in driver's task config takes, if `driver` is one.
pub fn built_in_fields(driver: &str) -> Option<&'static [&'static str]> {
    BUILT_IN_FIELDS
        .iter()
        .find(|(d, _)| *d == driver)
        .map(|(_, f)| *f)
}

fn spec(block: spec::Block) -> Spec {
    Spec { block: Some(block) }
}

/// An attribute of a type expression (`string`, `list(string)`, `any`…).
pub fn attr(name: &str, ty: &str) -> Spec {
    spec(spec::Block::Attr(Attr {
        name: name.into(),
        r#type: ty.into(),
        required: false,
    }))
}

/// An attribute with a default (an HCL expression, so strings are quoted).
fn with_default(primary: Spec, literal: &str) -> Spec {
    spec(spec::Block::Default(Box::new(DefaultSpec {
        primary: Some(Box::new(primary)),
        default: Some(Box::new(spec(spec::Block::Literal(Literal {
            value: literal.into(),
        })))),
    })))
}

fn object<'a>(attrs: impl IntoIterator<Item = (&'a str, Spec)>) -> Spec {
    spec(spec::Block::Object(Object {
        attributes: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    }))
}

fn block(name: &str, nested: Spec) -> Spec {
    spec(spec::Block::BlockValue(Box::new(Block {
        name: name.into(),
        required: false,
        nested: Some(Box::new(nested)),
    })))
}

/// The plugin config's attributes, as the root object's keys.
pub const PLUGIN_CONFIG_KEYS: &[&str] = &[
    "component_config",
    "components",
    "data_dir",
    "driver",
    "driver_file",
    "driver_sha256",
    "grant",
    "limits",
    "task_config_fields",
    "verify_key",
];

/// The plugin's own config: which driver component to expose, where third-party components
/// are, the data dir, and the component's grants, limits and config in the shape of the
/// agent's `plugin` block.
pub fn plugin_config() -> Spec {
    object([
        (
            "driver",
            with_default(attr("driver", "string"), "\"raw_exec\""),
        ),
        ("components", attr("components", "list(string)")),
        ("driver_file", attr("driver_file", "string")),
        ("driver_sha256", attr("driver_sha256", "string")),
        ("verify_key", attr("verify_key", "string")),
        ("data_dir", attr("data_dir", "string")),
        (
            "task_config_fields",
            attr("task_config_fields", "list(string)"),
        ),
        ("component_config", attr("component_config", "any")),
        (
            "grant",
            block(
                "grant",
                object([
                    ("env", attr("env", "bool")),
                    ("devices", attr("devices", "bool")),
                    ("events", attr("events", "bool")),
                    ("process", attr("process", "list(string)")),
                    ("task_dir", attr("task_dir", "bool")),
                    ("variables", attr("variables", "bool")),
                    ("isolation", attr("isolation", "bool")),
                    ("loader_env", attr("loader_env", "list(string)")),
                    ("chroot_env", attr("chroot_env", "any")),
                    ("denied_host_uids", attr("denied_host_uids", "string")),
                    ("denied_host_gids", attr("denied_host_gids", "string")),
                    ("pids_max", attr("pids_max", "number")),
                ]),
            ),
        ),
        (
            "limits",
            block(
                "limits",
                object([
                    ("memory_mb", attr("memory_mb", "number")),
                    ("call_timeout", attr("call_timeout", "string")),
                    ("instance_reuse", attr("instance_reuse", "number")),
                    (
                        "max_concurrent_calls",
                        attr("max_concurrent_calls", "number"),
                    ),
                ]),
            ),
        ),
    ])
}

/// A task config of these fields, each of any type.
pub fn task_config(fields: &[String]) -> Spec {
    object(fields.iter().map(|f| (f.as_str(), attr(f, "any"))))
}
