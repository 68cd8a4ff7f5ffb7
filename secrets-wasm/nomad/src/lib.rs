//! The built-in secret provider `nomad` (Nomad 1.11's `provider = "nomad"`): the items of
//! the Nomad Variable at the block's `path`, read through the host's `variables` interface,
//! so within what the task's workload identity may read (its job's `nomad/jobs/...` paths,
//! in its namespace), with the `variables` grant:
//!
//! ```hcl
//! secret "db" {
//!   provider = "nomad"
//!   path     = "nomad/jobs/web/db"
//! }
//! env {
//!   DB_PASSWORD = "${secret.db.password}"
//! }
//! ```
//!
//! `config { namespace }` may name only the task's own namespace (a task reads no other's).

use paddock_secret_sdk::host::variables;
use paddock_secret_sdk::{
    FieldError, HostError, PluginInfo, SecretError, SecretProvider, StringMap,
};

struct NomadSecrets;

impl SecretProvider for NomadSecrets {
    fn info() -> PluginInfo {
        PluginInfo::new("nomad", env!("CARGO_PKG_VERSION"))
    }

    fn fetch(path: String, config: StringMap) -> Result<StringMap, SecretError> {
        for (k, _) in config.iter().filter(|(k, _)| k != "namespace") {
            return Err(SecretError::InvalidConfig(vec![FieldError {
                field: k.clone(),
                message: "unknown option (the nomad provider takes `namespace` only)".into(),
            }]));
        }
        if path.contains(['{', '}', '(', ')']) {
            return Err(SecretError::InvalidConfig(vec![FieldError {
                field: "path".into(),
                message: "cannot hold template delimiters or parentheses".into(),
            }]));
        }
        match variables::get(&path) {
            Ok(Some(items)) => Ok(items),
            Ok(None) => Err(SecretError::NotFound(format!("no variable at {path:?}"))),
            Err(HostError::Denied(m)) => Err(SecretError::Failed(m)),
            Err(HostError::NotFound(m)) => Err(SecretError::NotFound(m)),
            Err(HostError::Invalid(m) | HostError::Failed(m)) => Err(SecretError::Failed(m)),
        }
    }
}

paddock_secret_sdk::export_secret_provider!(NomadSecrets);

#[cfg(test)]
mod tests {
    use super::*;
    use paddock_secret_sdk::fake::{self, FakeHost};

    #[test]
    fn a_variable_s_items_or_a_named_failure() {
        let mut h = FakeHost::default();
        h.variables.insert(
            "nomad/jobs/web/db".into(),
            vec![("password".into(), "hunter2".into())],
        );
        fake::install(h);
        assert_eq!(
            NomadSecrets::fetch("nomad/jobs/web/db".into(), Vec::new()).unwrap(),
            [("password".to_string(), "hunter2".to_string())]
        );
        assert!(matches!(
            NomadSecrets::fetch("nomad/jobs/web/none".into(), Vec::new()),
            Err(SecretError::NotFound(m)) if m.contains("nomad/jobs/web/none")
        ));
        assert!(matches!(
            NomadSecrets::fetch("x".into(), vec![("token".into(), "t".into())]),
            Err(SecretError::InvalidConfig(f)) if f[0].field == "token"
        ));
    }
}
