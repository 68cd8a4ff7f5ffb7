//! Go's scalar types whose JSON form is not a JSON scalar of the same kind: `time.Time`,
//! `[]byte` and the `error` interface.

use std::fmt;

use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// Go's `time.Time` as `encoding/json` takes it: a JSON string in RFC 3339
/// (`2006-01-02T15:04:05Z07:00`, optional `.fraction` of any length, `Z` or
/// `±hh:mm`), checked the way Go 1.20+'s `Time.UnmarshalJSON`
/// (`parseStrictRFC3339`) checks it: exact field widths, `T` and `Z` upper
/// case, month/day/hour/minute/second and offset ranges (no leap second 60),
/// day within its month. `null` is the zero time. Numbers are refused, as Go
/// refuses them ("Time.UnmarshalJSON: input is not a JSON string").
///
/// The value keeps the text as sent; `"0001-01-01T00:00:00Z"` is Go's zero time.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GoTime(pub String);

impl Default for GoTime {
    fn default() -> Self {
        GoTime("0001-01-01T00:00:00Z".to_string())
    }
}

impl GoTime {
    /// Parses like Go's strict RFC 3339; the error text says what is wrong.
    pub fn parse(s: &str) -> Result<GoTime, String> {
        check_rfc3339(s).map(|_| GoTime(s.to_string()))
    }

    /// True for Go's zero `time.Time`.
    pub fn is_zero(&self) -> bool {
        self.0 == "0001-01-01T00:00:00Z"
    }
}

fn check_rfc3339(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let bad = |why: &str| Err(format!("{s:?} is not an RFC 3339 time: {why}"));
    if b.len() < "2006-01-02T15:04:05".len() {
        return bad("too short");
    }
    let num = |from: usize, to: usize| -> Option<u32> {
        let mut n = 0u32;
        for &c in &b[from..to] {
            if !c.is_ascii_digit() {
                return None;
            }
            n = n * 10 + u32::from(c - b'0');
        }
        Some(n)
    };
    if !(b[4] == b'-' && b[7] == b'-' && b[10] == b'T' && b[13] == b':' && b[16] == b':') {
        return bad("separators must be YYYY-MM-DDThh:mm:ss");
    }
    let (Some(year), Some(month), Some(day), Some(hour), Some(min), Some(sec)) = (
        num(0, 4),
        num(5, 7),
        num(8, 10),
        num(11, 13),
        num(14, 16),
        num(17, 19),
    ) else {
        return bad("date and time fields must be digits of fixed width");
    };
    if !(1..=12).contains(&month) {
        return bad("month out of range");
    }
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if day < 1 || day > days {
        return bad("day out of range");
    }
    if hour > 23 || min > 59 || sec > 59 {
        return bad("hour, minute or second out of range");
    }
    let mut rest = &b[19..];
    if rest.len() >= 2 && rest[0] == b'.' && rest[1].is_ascii_digit() {
        let n = 1 + rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
        rest = &rest[n..];
    }
    if rest == b"Z" {
        return Ok(());
    }
    if rest.len() != "-07:00".len() || !(rest[0] == b'+' || rest[0] == b'-') || rest[3] != b':' {
        return bad("offset must be Z or ±hh:mm");
    }
    let off = |i: usize| -> Option<u32> {
        if rest[i].is_ascii_digit() && rest[i + 1].is_ascii_digit() {
            Some(u32::from(rest[i] - b'0') * 10 + u32::from(rest[i + 1] - b'0'))
        } else {
            None
        }
    };
    match (off(1), off(4)) {
        (Some(h), Some(m)) if h <= 23 && m <= 59 => Ok(()),
        _ => bad("offset out of range"),
    }
}

impl<'de> Deserialize<'de> for GoTime {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = GoTime;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an RFC 3339 time string (Go time.Time)")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<GoTime, E> {
                GoTime::parse(s).map_err(E::custom)
            }
            fn visit_none<E: de::Error>(self) -> Result<GoTime, E> {
                Ok(GoTime::default())
            }
            fn visit_unit<E: de::Error>(self) -> Result<GoTime, E> {
                Ok(GoTime::default())
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<GoTime, D::Error> {
                d.deserialize_str(self)
            }
        }
        d.deserialize_option(V)
    }
}

/// Go's `[]byte`: `encoding/json` takes a standard, padded base64 string (or,
/// as for any slice, an array of `uint8` numbers). Keeps the text as sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GoBytes(pub String);

fn check_base64(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    if !b.len().is_multiple_of(4) {
        return Err(format!(
            "{s:?} is not padded standard base64 (length not a multiple of 4)"
        ));
    }
    let pad = b.iter().rev().take_while(|&&c| c == b'=').count();
    if pad > 2 {
        return Err(format!("{s:?} is not standard base64 (too much padding)"));
    }
    let ok = b[..b.len() - pad]
        .iter()
        .all(|c| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/');
    if ok {
        Ok(())
    } else {
        Err(format!("{s:?} is not standard base64"))
    }
}

impl<'de> Deserialize<'de> for GoBytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = GoBytes;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a base64 string (Go []byte)")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<GoBytes, E> {
                check_base64(s).map_err(E::custom)?;
                Ok(GoBytes(s.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<GoBytes, E> {
                Ok(GoBytes::default())
            }
            fn visit_none<E: de::Error>(self) -> Result<GoBytes, E> {
                Ok(GoBytes::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<GoBytes, A::Error> {
                let mut n = 0usize;
                while a.next_element::<u8>()?.is_some() {
                    n += 1;
                }
                Ok(GoBytes(format!("<{n} bytes as an array>")))
            }
        }
        d.deserialize_any(V)
    }
}

/// A Go field of the interface type `error` (`Events.Err`): `encoding/json`
/// can only store `null` in it; any other value is an `UnmarshalTypeError`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GoError;

impl<'de> Deserialize<'de> for GoError {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = GoError;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("null (Go error)")
            }
            fn visit_unit<E: de::Error>(self) -> Result<GoError, E> {
                Ok(GoError)
            }
            fn visit_none<E: de::Error>(self) -> Result<GoError, E> {
                Ok(GoError)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gotypes::{Events, decode};

    crate::gotypes::go_struct! {
        /// A `[]byte` field, as Job.Payload.
        BytesProbe { Payload: GoBytes }
    }
    use serde_json::{Value, json};

    fn time(v: Value) -> Result<GoTime, serde_json::Error> {
        decode::<GoTime>(&v)
    }

    #[test]
    fn go_time_accepts_rfc3339() {
        for s in [
            "2024-05-01T10:00:00.123456789Z",
            "0001-01-01T00:00:00Z",
            "2024-05-01T10:00:00+02:00",
            "2024-05-01T10:00:00Z",
            "2024-02-29T23:59:59.1-07:30",
            "2024-05-01T10:00:00.1234567891234Z",
        ] {
            assert_eq!(time(json!(s)).unwrap().0, s, "{s}");
            assert_eq!(
                serde_json::from_value::<GoTime>(json!(s)).unwrap().0,
                s,
                "{s}"
            );
        }
        assert!(time(Value::Null).unwrap().is_zero());
    }

    #[test]
    fn go_time_rejects_what_go_rejects() {
        for v in [
            json!(0),
            json!(1714557600000000000u64),
            json!("yesterday"),
            json!(""),
            json!("2024-05-01 10:00:00Z"),
            json!("2024-05-01t10:00:00Z"),
            json!("2024-05-01T10:00:00z"),
            json!("2024-05-01T10:00:00"),
            json!("2024-05-01T10:00:60Z"),
            json!("2024-02-30T10:00:00Z"),
            json!("2023-02-29T10:00:00Z"),
            json!("2024-05-01T24:00:00Z"),
            json!("2024-05-01T10:00:00+24:00"),
            json!("2024-05-01T10:00:00+0200"),
            json!("2024-05-01T10:00:00,5Z"),
            json!("2024-05-01T1:00:00Z"),
            json!(1.5),
            json!(true),
            json!({}),
        ] {
            assert!(time(v.clone()).is_err(), "{v} must be refused");
            assert!(
                serde_json::from_value::<GoTime>(v.clone()).is_err(),
                "{v} must be refused"
            );
        }
    }

    #[test]
    fn bytes_and_error_fields() {
        assert!(decode::<BytesProbe>(&json!({"Payload": "aGVsbG8="})).is_ok());
        assert!(decode::<BytesProbe>(&json!({"Payload": "hello"})).is_err());
        assert!(decode::<BytesProbe>(&json!({"Payload": [104, 105]})).is_ok());
        assert!(decode::<Events>(&json!({"Err": null})).is_ok());
        assert!(decode::<Events>(&json!({"Err": "boom"})).is_err());
        assert!(decode::<Events>(&json!({})).is_ok());
    }
}
