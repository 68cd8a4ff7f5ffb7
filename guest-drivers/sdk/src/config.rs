//! A task's `config` block (JSON) read into a serde type, every wrong field named in one
//! `invalid-config` answer:
//!
//! ```ignore
//! #[derive(serde::Deserialize, Default)]
//! #[serde(default, deny_unknown_fields)]
//! struct Config {
//!     #[serde(deserialize_with = "paddock_driver_sdk::duration::deserialize")]
//!     run_for: u64,
//!     exit_code: i32,
//! }
//!
//! fn validate_config(json: &str) -> Result<(), DriverError> {
//!     config::parse_checked::<Config>(json, |c, k| {
//!         k.field("exit_code", c.exit_code >= 0, "must be >= 0");
//!     })
//!     .map(drop)
//! }
//! ```
//!
//! The type must be `#[serde(default)]` (each field is read on its own, the others taking
//! their defaults); with `deny_unknown_fields` a field it does not know is reported too.

use serde::de::DeserializeOwned;

pub use paddock_guest_core::fields::Checks;

use crate::{DriverError, FieldError};

fn invalid(wrong: Vec<paddock_guest_core::fields::WrongField>) -> DriverError {
    DriverError::InvalidConfig(
        wrong
            .into_iter()
            .map(|(field, message)| FieldError::new(field, message))
            .collect(),
    )
}

/// Reads `json` (blank means `{}`) into `T`; every wrong field is one `field-error`.
pub fn parse<T: DeserializeOwned>(json: &str) -> Result<T, DriverError> {
    paddock_guest_core::fields::parse(json).map_err(invalid)
}

/// [`parse`], then `check`; the wrong fields of both in one `invalid-config`.
pub fn parse_checked<T: DeserializeOwned>(
    json: &str,
    check: impl FnOnce(&T, &mut Checks),
) -> Result<T, DriverError> {
    paddock_guest_core::fields::parse_checked(json, check).map_err(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, serde::Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Config {
        #[serde(deserialize_with = "crate::duration::deserialize")]
        run_for: u64,
        exit_code: i32,
    }

    #[test]
    fn wrong_fields_are_field_errors_of_one_invalid_config() {
        let check = |c: &Config, k: &mut Checks| {
            k.field("exit_code", c.exit_code >= 0, "must be >= 0");
        };
        match parse_checked::<Config>(r#"{"run_for": "soon", "colour": 1}"#, check) {
            Err(DriverError::InvalidConfig(fields)) => {
                let names: Vec<&str> = fields.iter().map(|f| f.field.as_str()).collect();
                assert_eq!(names, ["colour", "run_for"], "{fields:?}");
                assert!(fields[1].message.contains("soon"), "{fields:?}");
            }
            other => panic!("{other:?}"),
        }
        match parse_checked::<Config>(r#"{"run_for": "2s", "exit_code": -1}"#, check) {
            Err(DriverError::InvalidConfig(fields)) => {
                assert_eq!(fields, [FieldError::new("exit_code", "must be >= 0")])
            }
            other => panic!("{other:?}"),
        }
        let c = parse::<Config>(r#"{"run_for": "2s"}"#).unwrap();
        assert_eq!(c.run_for, 2_000_000_000);
    }
}
