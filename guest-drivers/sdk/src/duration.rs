//! Nomad-style durations, as they appear in a task's `config` block: a JSON string in Go's
//! `time.ParseDuration` syntax (`"10s"`, `"250ms"`, `"1m30s"`, `"1.5h"`, `"0"`) or a JSON
//! integer counting nanoseconds. Values are nanoseconds; negative durations are refused.

use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::fmt;

/// A value that is not a valid duration; displays as `invalid duration <value as JSON>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidDuration(pub String);

impl fmt::Display for InvalidDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid duration {}", self.0)
    }
}

impl std::error::Error for InvalidDuration {}

/// Nanoseconds per unit suffix; the longest matching suffix wins (`ms` over `m`).
const UNITS: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Parses a Go duration string (`"1m30s"`) into nanoseconds.
pub fn parse(text: &str) -> Result<u64, InvalidDuration> {
    let invalid = || InvalidDuration(Value::from(text).to_string());
    let rest = text.strip_prefix('+').unwrap_or(text);
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut rest = rest;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(invalid)?;
        let (number, tail) = rest.split_at(number_len);
        let (&(_, scale), tail) = UNITS
            .iter()
            .filter_map(|u| tail.strip_prefix(u.0).map(|t| (u, t)))
            .max_by_key(|(u, _)| u.0.len())
            .ok_or_else(invalid)?;
        total += scaled(number, scale).ok_or_else(invalid)?;
        rest = tail;
    }
    u64::try_from(total).map_err(|_| invalid())
}

/// `number` (digits with at most one `.`) times `scale`, truncated to whole nanoseconds.
fn scaled(number: &str, scale: u128) -> Option<u128> {
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() || frac.contains('.') {
        return None;
    }
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut value = whole.checked_mul(scale)?;
    let mut unit = scale;
    for digit in frac.bytes() {
        unit /= 10;
        value = value.checked_add(u128::from(digit - b'0') * unit)?;
    }
    Some(value)
}

/// Reads a duration from JSON: a Go duration string or a non-negative integer of nanoseconds.
pub fn from_json(value: &Value) -> Result<u64, InvalidDuration> {
    match value {
        Value::String(text) => parse(text),
        Value::Number(n) => n.as_u64().ok_or_else(|| InvalidDuration(n.to_string())),
        other => Err(InvalidDuration(other.to_string())),
    }
}

/// For `#[serde(deserialize_with = "paddock_driver_sdk::duration::deserialize")]`.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    from_json(&Value::deserialize(deserializer)?).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const S: u64 = 1_000_000_000;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse("10s"), Ok(10 * S));
        assert_eq!(parse("250ms"), Ok(250_000_000));
        assert_eq!(parse("1m30s"), Ok(90 * S));
        assert_eq!(parse("1h"), Ok(3600 * S));
        assert_eq!(parse("1.5h"), Ok(5400 * S));
        assert_eq!(parse(".5s"), Ok(S / 2));
        assert_eq!(parse("1h2m3s4ms5us6ns"), Ok(3723 * S + 4_005_006));
        assert_eq!(parse("3µs"), Ok(3_000));
        assert_eq!(parse("0"), Ok(0));
        assert_eq!(parse("+2s"), Ok(2 * S));
        assert_eq!(parse("0s"), Ok(0));
    }

    #[test]
    fn refuses_bad_durations() {
        for bad in [
            "",
            "abc",
            "10",
            "-1s",
            "1x",
            "s",
            "1..5s",
            ".s",
            "1s2",
            "99999999999h",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be refused");
        }
        assert_eq!(
            parse("abc").unwrap_err().to_string(),
            r#"invalid duration "abc""#
        );
    }

    #[test]
    fn reads_json() {
        assert_eq!(from_json(&json!("1m")), Ok(60 * S));
        assert_eq!(from_json(&json!(1500)), Ok(1500));
        assert_eq!(
            from_json(&json!(-1)).unwrap_err().to_string(),
            "invalid duration -1"
        );
        assert_eq!(
            from_json(&json!(1.5)).unwrap_err().to_string(),
            "invalid duration 1.5"
        );
        assert_eq!(
            from_json(&json!(true)).unwrap_err().to_string(),
            "invalid duration true"
        );
    }

    #[test]
    fn deserializes_fields() {
        #[derive(Deserialize)]
        struct Config {
            #[serde(deserialize_with = "deserialize")]
            run_for: u64,
        }
        let config: Config = serde_json::from_value(json!({"run_for": "2s"})).unwrap();
        assert_eq!(config.run_for, 2 * S);
        let err = serde_json::from_value::<Config>(json!({"run_for": "x"}))
            .err()
            .unwrap();
        assert!(err.to_string().contains(r#"invalid duration "x""#));
    }
}
