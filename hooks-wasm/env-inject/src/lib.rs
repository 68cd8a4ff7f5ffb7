//! The `env-inject` hook: adds environment variables from its plugin config to every task,
//! after interpolating `${...}` in their values against the task's environment (host
//! `env.interpolate`):
//!
//! ```json
//! {"env": {"GREETING": "hello from ${NOMAD_TASK_NAME}"}}
//! ```
//!
//! Prestart returns the variables sorted by name, with state `applied` = their names joined
//! by `,`, and `done = false` so they are computed again on every start. A config that is not
//! an object of strings makes prestart fail, naming the bad key.

use paddock_hook_sdk::host::{config, env};
use paddock_hook_sdk::{
    FieldError, Hook, HookError, PluginInfo, PrestartRequest, PrestartResponse,
};
use serde_json::{Map, Value};

fn field_error(field: &str, message: String) -> FieldError {
    FieldError {
        field: field.to_string(),
        message,
    }
}

/// The `env` pairs of a plugin config (JSON; blank means `{}`), sorted by name. An error
/// names the bad field; `""` stands for the whole config.
fn configured_env(json: &str) -> Result<Vec<(String, String)>, FieldError> {
    let config: Map<String, Value> =
        config::parse(json).map_err(|e| field_error("", format!("invalid plugin config: {e}")))?;
    if let Some(key) = config.keys().find(|k| *k != "env") {
        return Err(field_error(key, "unknown field".into()));
    }
    match config.get("env") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(vars)) => vars
            .iter()
            .map(|(key, value)| match value {
                Value::String(s) => Ok((key.clone(), s.clone())),
                other => Err(field_error(
                    &format!("env.{key}"),
                    format!("expected a string, got {other}"),
                )),
            })
            .collect(),
        Some(other) => Err(field_error(
            "env",
            format!("expected an object of strings, got {other}"),
        )),
    }
}

/// The prestart answer for `vars`, with each value passed through `interpolate`.
fn respond(
    vars: Vec<(String, String)>,
    interpolate: impl Fn(&str) -> Result<String, String>,
) -> Result<PrestartResponse, HookError> {
    let mut applied = Vec::with_capacity(vars.len());
    let mut out = Vec::with_capacity(vars.len());
    for (key, template) in vars {
        let value = interpolate(&template)
            .map_err(|e| HookError::Failed(format!("env.{key}: interpolation failed: {e}")))?;
        applied.push(key.clone());
        out.push((key, value));
    }
    Ok(PrestartResponse {
        env: out,
        state: vec![("applied".to_string(), applied.join(","))],
        ..PrestartResponse::default()
    })
}

/// The env-inject hook.
pub struct EnvInject;

impl Hook for EnvInject {
    fn info() -> PluginInfo {
        PluginInfo::new("env-inject", env!("CARGO_PKG_VERSION"))
    }

    fn prestart(_req: PrestartRequest) -> Result<PrestartResponse, HookError> {
        let vars = configured_env(&config::raw()).map_err(|e| HookError::InvalidConfig(vec![e]))?;
        respond(vars, |template| {
            env::interpolate(template).map_err(|e| e.to_string())
        })
    }
}

paddock_hook_sdk::export_hook!(EnvInject);

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(k: &str, v: &str) -> (String, String) {
        (k.to_string(), v.to_string())
    }

    #[test]
    fn reads_env_sorted() {
        let vars = configured_env(r#"{"env": {"B": "2", "A": "${x}"}}"#).unwrap();
        assert_eq!(vars, vec![pair("A", "${x}"), pair("B", "2")]);
        assert_eq!(configured_env("").unwrap(), vec![]);
        assert_eq!(configured_env(r#"{"env": null}"#).unwrap(), vec![]);
    }

    #[test]
    fn names_the_bad_key() {
        let e = configured_env(r#"{"env": {"A": "1", "N": 2}}"#).unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            ("env.N", "expected a string, got 2")
        );
        let e = configured_env(r#"{"env": ["A"]}"#).unwrap_err();
        assert_eq!(e.field, "env");
        assert_eq!(e.message, r#"expected an object of strings, got ["A"]"#);
        let e = configured_env(r#"{"envs": {}}"#).unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            ("envs", "unknown field")
        );
        let e = configured_env("[]").unwrap_err();
        assert_eq!(e.field, "");
        assert!(e.message.starts_with("invalid plugin config"));
    }

    #[test]
    fn interpolates_and_records_keys() {
        let vars = vec![pair("A", "task ${NOMAD_TASK_NAME}"), pair("B", "plain")];
        let response = respond(vars, |t| Ok(t.replace("${NOMAD_TASK_NAME}", "web"))).unwrap();
        assert_eq!(
            response.env,
            vec![pair("A", "task web"), pair("B", "plain")]
        );
        assert_eq!(response.state, vec![pair("applied", "A,B")]);
        assert!(!response.done);
        let failed = respond(vec![pair("A", "x")], |_| Err("denied".into())).unwrap_err();
        assert_eq!(
            failed,
            HookError::Failed("env.A: interpolation failed: denied".into())
        );
    }
}
