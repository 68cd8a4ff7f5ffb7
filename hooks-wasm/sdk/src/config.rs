//! A hook's plugin config (JSON, from `host::config::raw()`) read into a serde type, every
//! wrong field named in one `invalid-config` answer, as the driver SDK does for a task's
//! config:
//!
//! ```ignore
//! #[derive(serde::Deserialize, Default)]
//! #[serde(default, deny_unknown_fields)]
//! struct Config {
//!     max_memory_mb: u32,
//! }
//!
//! let config: Config = config::parse_checked(&host::config::raw(), |c: &Config, k| {
//!     k.field("max_memory_mb", c.max_memory_mb > 0, "must be > 0");
//! })?;
//! ```

use serde::de::DeserializeOwned;

pub use paddock_guest_core::fields::Checks;

use crate::{FieldError, HookError};

fn invalid(wrong: Vec<paddock_guest_core::fields::WrongField>) -> HookError {
    HookError::InvalidConfig(
        wrong
            .into_iter()
            .map(|(field, message)| FieldError { field, message })
            .collect(),
    )
}

/// Reads `json` (blank means `{}`) into `T`; every wrong field is one `field-error`.
pub fn parse<T: DeserializeOwned>(json: &str) -> Result<T, HookError> {
    paddock_guest_core::fields::parse(json).map_err(invalid)
}

/// [`parse`], then `check`; the wrong fields of both in one `invalid-config`.
pub fn parse_checked<T: DeserializeOwned>(
    json: &str,
    check: impl FnOnce(&T, &mut Checks),
) -> Result<T, HookError> {
    paddock_guest_core::fields::parse_checked(json, check).map_err(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, serde::Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Config {
        max_memory_mb: u32,
    }

    #[test]
    fn wrong_fields_are_field_errors_of_one_invalid_config() {
        let check = |c: &Config, k: &mut Checks| {
            k.field("max_memory_mb", c.max_memory_mb > 0, "must be > 0");
        };
        match parse_checked::<Config>(r#"{"max_memory_mb": "lots", "colour": 1}"#, check) {
            Err(HookError::InvalidConfig(fields)) => {
                let names: Vec<&str> = fields.iter().map(|f| f.field.as_str()).collect();
                assert_eq!(names, ["colour", "max_memory_mb"], "{fields:?}");
            }
            other => panic!("{other:?}"),
        }
        match parse_checked::<Config>(r#"{"max_memory_mb": 0}"#, check) {
            Err(HookError::InvalidConfig(fields)) => {
                assert_eq!(fields[0].message, "must be > 0")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(parse::<Config>("").unwrap().max_memory_mb, 0);
    }
}
