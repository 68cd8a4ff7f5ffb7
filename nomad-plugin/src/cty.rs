//! Config as Nomad sends it: a cty value encoded as msgpack (`SetConfigRequest.msgpack_config`,
//! `TaskConfig.msgpack_driver_config`). An object is a map with every attribute of the
//! schema present, nil when unset, keys sorted; a number is an int when it is one, else a
//! float64, else (too big for either) a decimal string; a dynamic value is wrapped as
//! `[type-json, value]`. Paddock's components take JSON, so the value becomes JSON with the
//! unset (nil) attributes left out.

use rmpv::Value as Mp;
use serde_json::Value;

/// Config that is not cty msgpack Paddock can read.
#[derive(Debug, thiserror::Error)]
pub enum CtyError {
    #[error("not msgpack: {0}")]
    Decode(String),
    #[error("{path}: {message}")]
    Value { path: String, message: String },
}

/// Decode cty msgpack bytes to JSON. Empty bytes are an empty object (no config).
pub fn to_json(bytes: &[u8]) -> Result<Value, CtyError> {
    if bytes.is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    let mut rd = bytes;
    let v = rmpv::decode::read_value(&mut rd).map_err(|e| CtyError::Decode(e.to_string()))?;
    if !rd.is_empty() {
        return Err(CtyError::Decode(format!(
            "{} bytes after the value",
            rd.len()
        )));
    }
    match convert(&v, "config")? {
        // A config block that is absent altogether.
        Value::Null => Ok(Value::Object(Default::default())),
        v => Ok(v),
    }
}

fn convert(v: &Mp, path: &str) -> Result<Value, CtyError> {
    let bad = |message: String| CtyError::Value {
        path: path.to_string(),
        message,
    };
    Ok(match v {
        Mp::Nil => Value::Null,
        Mp::Boolean(b) => Value::Bool(*b),
        Mp::Integer(i) => match (i.as_i64(), i.as_u64()) {
            (Some(n), _) => Value::from(n),
            (None, Some(n)) => Value::from(n),
            _ => return Err(bad(format!("integer out of range: {i}"))),
        },
        Mp::F32(f) => float(f64::from(*f)).ok_or_else(|| bad(format!("{f} has no JSON form")))?,
        Mp::F64(f) => float(*f).ok_or_else(|| bad(format!("{f} has no JSON form")))?,
        Mp::String(s) => Value::String(
            s.as_str()
                .ok_or_else(|| bad("a string that is not UTF-8".into()))?
                .to_string(),
        ),
        // A dynamic value: its type as JSON (bytes), then the value.
        Mp::Array(items) if items.len() == 2 && matches!(items[0], Mp::Binary(_)) => {
            convert(&items[1], path)?
        }
        Mp::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, x)| convert(x, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Mp::Map(entries) => {
            let mut out = serde_json::Map::new();
            for (k, x) in entries {
                let k = k
                    .as_str()
                    .ok_or_else(|| bad(format!("a map key that is not a string: {k}")))?;
                let x = convert(x, &format!("{path}.{k}"))?;
                // Unset attributes come as nil: absent, for the component.
                if !x.is_null() {
                    out.insert(k.to_string(), x);
                }
            }
            Value::Object(out)
        }
        Mp::Binary(_) => return Err(bad("bytes where a value was expected".into())),
        Mp::Ext(..) => return Err(bad("an unknown value (not known until apply)".into())),
    })
}

fn float(f: f64) -> Option<Value> {
    serde_json::Number::from_f64(f).map(Value::Number)
}

/// Encode JSON as Nomad encodes a cty value of the matching type: objects as maps with
/// sorted keys, integral numbers as compact ints, others as float64. `attributes` lists an
/// object schema's attributes: those missing from `v` are sent as nil, as Nomad sends them.
/// What Paddock's tests and benches send when they play Nomad's part.
pub fn from_json(v: &Value, attributes: &[&str]) -> Vec<u8> {
    let mut value = mp(v);
    if let Mp::Map(entries) = &mut value {
        for a in attributes {
            if !entries.iter().any(|(k, _)| k.as_str() == Some(a)) {
                entries.push((Mp::from(*a), Mp::Nil));
            }
        }
        entries.sort_by(|a, b| a.0.as_str().cmp(&b.0.as_str()));
    }
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, &value).expect("writing to a Vec");
    out
}

fn mp(v: &Value) -> Mp {
    match v {
        Value::Null => Mp::Nil,
        Value::Bool(b) => Mp::Boolean(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Mp::from(i),
            (None, Some(u)) => Mp::from(u),
            _ => Mp::F64(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => Mp::from(s.as_str()),
        Value::Array(a) => Mp::Array(a.iter().map(mp).collect()),
        Value::Object(o) => {
            let mut entries: Vec<(Mp, Mp)> = o
                .iter()
                .map(|(k, x)| (Mp::from(k.as_str()), mp(x)))
                .collect();
            entries.sort_by(|a, b| a.0.as_str().cmp(&b.0.as_str()));
            Mp::Map(entries)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trip_drops_unset_attributes() {
        let bytes = from_json(
            &json!({"driver": "mock", "n": 3, "f": 1.5}),
            &["components"],
        );
        assert_eq!(
            to_json(&bytes).unwrap(),
            json!({"driver": "mock", "n": 3, "f": 1.5})
        );
    }

    #[test]
    fn nomads_encodings_decode() {
        // {"a": nil, "b": "x", "c": 5, "d": 2.5, "e": "123456789012345678901234567890"}
        let mut raw = vec![0x85];
        raw.extend([0xa1, b'a', 0xc0]);
        raw.extend([0xa1, b'b', 0xa1, b'x']);
        raw.extend([0xa1, b'c', 0x05]);
        raw.extend([0xa1, b'd', 0xcb]);
        raw.extend(2.5f64.to_be_bytes());
        raw.extend([0xa1, b'e', 0xbe]);
        raw.extend(b"123456789012345678901234567890");
        let v = to_json(&raw).unwrap();
        assert_eq!(
            v,
            json!({"b": "x", "c": 5, "d": 2.5, "e": "123456789012345678901234567890"})
        );
    }

    #[test]
    fn a_dynamic_value_is_unwrapped_and_an_unknown_one_refused() {
        let mut raw = vec![0x81, 0xa1, b'x', 0x92, 0xc4, 0x08];
        raw.extend(b"\"string\"");
        raw.extend([0xa2, b'h', b'i']);
        assert_eq!(to_json(&raw).unwrap(), json!({"x": "hi"}));
        let unknown = [0x81, 0xa1, b'x', 0xd4, 0x00, 0x00];
        let e = to_json(&unknown).unwrap_err().to_string();
        assert!(e.contains("config.x"), "{e}");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(to_json(&[0xa5, b'a']).is_err());
        assert!(to_json(&[0x81, 0xa1]).is_err());
        assert_eq!(to_json(&[]).unwrap(), json!({}));
        assert_eq!(to_json(&[0xc0]).unwrap(), json!({}));
    }
}
