//! Config blocks (JSON) read with serde, every wrong field reported at once.
//!
//! serde stops at the first error. To name every wrong field in one answer, [`parse`] reads
//! each field of the object on its own into the target type (which must be
//! `#[serde(default)]`, so the fields it is not given take their defaults), then the whole
//! object once every field passed. A field the type does not know is reported too when the
//! type says `#[serde(deny_unknown_fields)]`. Checks across fields, or of values serde
//! accepts (a range, a non-empty list), go in a [`Checks`] pass after parsing.
//!
//! The SDKs wrap these into their world's error (`invalid-config` with one `field-error`
//! per field).

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// One wrong field: its name (a dotted path) and what is wrong with it.
pub type WrongField = (String, String);

/// Reads `json` (an object; blank means `{}`) into `T`, reporting every wrong field.
pub fn parse<T: DeserializeOwned>(json: &str) -> Result<T, Vec<WrongField>> {
    let object: Map<String, Value> = if json.trim().is_empty() {
        Map::new()
    } else {
        match serde_json::from_str::<Value>(json) {
            Ok(Value::Object(o)) => o,
            Ok(other) => {
                return Err(vec![(
                    String::new(),
                    format!("must be an object, not {}", kind(&other)),
                )]);
            }
            Err(e) => return Err(vec![(String::new(), format!("not JSON: {}", tidy(&e)))]),
        }
    };
    let mut wrong = Vec::new();
    for (key, value) in &object {
        let one = Map::from_iter([(key.clone(), value.clone())]);
        if let Err(e) = serde_json::from_value::<T>(Value::Object(one)) {
            wrong.push((key.clone(), field_message(key, &e)));
        }
    }
    if !wrong.is_empty() {
        return Err(wrong);
    }
    serde_json::from_value(Value::Object(object)).map_err(|e| vec![(String::new(), tidy(&e))])
}

/// Checks on a parsed config, each naming its field: `checks.field("seconds", c.seconds > 0,
/// "must be > 0")`. [`Checks::finish`] gives every failed one.
#[derive(Debug, Default)]
pub struct Checks {
    wrong: Vec<WrongField>,
}

impl Checks {
    /// Records that `field` is wrong with `message` unless `ok`.
    pub fn field(&mut self, field: &str, ok: bool, message: impl Into<String>) -> &mut Self {
        if !ok {
            self.wrong.push((field.to_string(), message.into()));
        }
        self
    }

    /// Every failed check, or `Ok` when none failed.
    pub fn finish(self) -> Result<(), Vec<WrongField>> {
        if self.wrong.is_empty() {
            Ok(())
        } else {
            Err(self.wrong)
        }
    }
}

/// [`parse`], then `check` on the result: wrong fields from either, in one answer.
pub fn parse_checked<T: DeserializeOwned>(
    json: &str,
    check: impl FnOnce(&T, &mut Checks),
) -> Result<T, Vec<WrongField>> {
    let config = parse::<T>(json)?;
    let mut checks = Checks::default();
    check(&config, &mut checks);
    checks.finish().map(|()| config)
}

/// serde's message for one field, without the position (the field names the place) and
/// with "unknown field" kept short.
fn field_message(key: &str, e: &serde_json::Error) -> String {
    let text = tidy(e);
    if text.starts_with(&format!("unknown field `{key}`")) {
        "unknown field".to_string()
    } else {
        text
    }
}

fn tidy(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(default, deny_unknown_fields)]
    struct Config {
        seconds: u64,
        signal: String,
        args: Vec<String>,
    }

    #[test]
    fn every_wrong_field_is_named_in_one_answer() {
        let wrong = parse::<Config>(r#"{"seconds": -1, "signal": 9, "args": ["a"], "nope": 1}"#)
            .unwrap_err();
        let fields: Vec<&str> = wrong.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, ["nope", "seconds", "signal"]);
        let message = |f: &str| wrong.iter().find(|(n, _)| n == f).unwrap().1.clone();
        assert!(
            message("seconds").contains("invalid value: integer `-1`"),
            "{wrong:?}"
        );
        assert!(
            message("signal").contains("invalid type: integer `9`"),
            "{wrong:?}"
        );
        assert_eq!(message("nope"), "unknown field");
        assert!(
            !message("seconds").contains("line"),
            "no position: {wrong:?}"
        );
    }

    #[test]
    fn a_good_config_is_read_whole_and_blank_means_defaults() {
        let c = parse::<Config>(r#"{"seconds": 3, "args": ["x", "y"]}"#).unwrap();
        assert_eq!(
            c,
            Config {
                seconds: 3,
                signal: String::new(),
                args: vec!["x".into(), "y".into()]
            }
        );
        assert_eq!(parse::<Config>("  ").unwrap(), Config::default());
        assert_eq!(
            parse::<Config>("[1]").unwrap_err()[0].1,
            "must be an object, not an array"
        );
        assert!(
            parse::<Config>("{").unwrap_err()[0]
                .1
                .starts_with("not JSON")
        );
    }

    #[test]
    fn checks_run_after_parsing_and_add_their_fields() {
        let check = |c: &Config, k: &mut Checks| {
            k.field("seconds", c.seconds <= 60, "must be <= 60").field(
                "signal",
                c.signal.starts_with("SIG"),
                "must name a signal (SIGTERM)",
            );
        };
        let wrong =
            parse_checked::<Config>(r#"{"seconds": 61, "signal": "x"}"#, check).unwrap_err();
        assert_eq!(
            wrong,
            [
                ("seconds".to_string(), "must be <= 60".to_string()),
                (
                    "signal".to_string(),
                    "must name a signal (SIGTERM)".to_string()
                )
            ]
        );
        assert!(parse_checked::<Config>(r#"{"seconds": 1, "signal": "SIGINT"}"#, check).is_ok());
    }
}
