//! Device attribute values as Nomad compares them (`plugins/shared/structs/attribute.go`
//! and `units.go`): a literal in a constraint is read as an integer, a float, a boolean or
//! a string, a number possibly followed by a unit (`4 GiB`, `1.5GHz`); numbers with units
//! of the same kind compare after conversion to the base unit (bytes, bytes/s, Hz, W), so
//! `4 GiB` is below an attribute of 8192 MiB.
//!
//! The device-plugin contract's `attribute` has no unit, so the host derives one from the
//! attribute's name: a number named `memory_mib` carries `MiB` (see [`unit_from_name`]).

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

/// A typed attribute as Nomad's API shows it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DeviceAttribute {
    /// Float value.
    #[serde(rename = "Float", skip_serializing_if = "Option::is_none", default)]
    pub float: Option<f64>,
    /// Integer value.
    #[serde(rename = "Int", skip_serializing_if = "Option::is_none", default)]
    pub int: Option<i64>,
    /// String value.
    #[serde(rename = "String", skip_serializing_if = "Option::is_none", default)]
    pub string: Option<String>,
    /// Boolean value.
    #[serde(rename = "Bool", skip_serializing_if = "Option::is_none", default)]
    pub boolean: Option<bool>,
    #[serde(rename = "Unit", default)]
    pub unit: String,
}

impl From<crate::runtime::types::Attribute> for DeviceAttribute {
    fn from(a: crate::runtime::types::Attribute) -> Self {
        use crate::runtime::types::Attribute;
        let mut v = DeviceAttribute::default();
        match a {
            Attribute::Str(s) => v.string = Some(s),
            Attribute::Int(i) => v.int = Some(i),
            Attribute::Float(f) => v.float = Some(f),
            Attribute::Boolean(b) => v.boolean = Some(b),
        }
        v
    }
}

/// What a unit measures: only units of one kind compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Base {
    Byte,
    ByteRate,
    Hertz,
    Watt,
}

/// A unit: its name, kind and size in the base unit (`num / den`).
struct Unit {
    name: &'static str,
    base: Base,
    num: i128,
    den: i128,
}

const fn unit(name: &'static str, base: Base, num: i128) -> Unit {
    Unit {
        name,
        base,
        num,
        den: 1,
    }
}

const K: i128 = 1000;

/// Nomad's units. Nomad gives `MHz` a multiplier of 1000 (and `GHz` 10^9); here a MHz is
/// 10^6 Hz, so `1 GHz` equals `1000 MHz`.
const UNITS: &[Unit] = &[
    unit("KiB", Base::Byte, 1 << 10),
    unit("MiB", Base::Byte, 1 << 20),
    unit("GiB", Base::Byte, 1 << 30),
    unit("TiB", Base::Byte, 1 << 40),
    unit("PiB", Base::Byte, 1 << 50),
    unit("EiB", Base::Byte, 1 << 60),
    unit("kB", Base::Byte, K),
    unit("KB", Base::Byte, K),
    unit("MB", Base::Byte, K * K),
    unit("GB", Base::Byte, K * K * K),
    unit("TB", Base::Byte, K * K * K * K),
    unit("PB", Base::Byte, K * K * K * K * K),
    unit("EB", Base::Byte, K * K * K * K * K * K),
    unit("KiB/s", Base::ByteRate, 1 << 10),
    unit("MiB/s", Base::ByteRate, 1 << 20),
    unit("GiB/s", Base::ByteRate, 1 << 30),
    unit("TiB/s", Base::ByteRate, 1 << 40),
    unit("PiB/s", Base::ByteRate, 1 << 50),
    unit("EiB/s", Base::ByteRate, 1 << 60),
    unit("kB/s", Base::ByteRate, K),
    unit("KB/s", Base::ByteRate, K),
    unit("MB/s", Base::ByteRate, K * K),
    unit("GB/s", Base::ByteRate, K * K * K),
    unit("TB/s", Base::ByteRate, K * K * K * K),
    unit("PB/s", Base::ByteRate, K * K * K * K * K),
    unit("EB/s", Base::ByteRate, K * K * K * K * K * K),
    unit("MHz", Base::Hertz, K * K),
    unit("GHz", Base::Hertz, K * K * K),
    Unit {
        name: "mW",
        base: Base::Watt,
        num: 1,
        den: K,
    },
    unit("W", Base::Watt, 1),
    unit("kW", Base::Watt, K),
    unit("MW", Base::Watt, K * K),
    unit("GW", Base::Watt, K * K * K),
];

fn unit_named(name: &str) -> Option<&'static Unit> {
    UNITS.iter().find(|u| u.name == name)
}

/// Whether `name` is a unit Nomad knows (`MiB`, `GB/s`, `MHz`, `W`, ...).
pub fn is_unit(name: &str) -> bool {
    unit_named(name).is_some()
}

/// Attribute-name suffixes that give a plugin's number its unit, since the contract's
/// `attribute` carries none: `memory_mib = 1024` is 1024 MiB.
const NAME_SUFFIXES: &[(&str, &str)] = &[
    ("_kib", "KiB"),
    ("_mib", "MiB"),
    ("_gib", "GiB"),
    ("_tib", "TiB"),
    ("_kb", "kB"),
    ("_mb", "MB"),
    ("_gb", "GB"),
    ("_tb", "TB"),
    ("_mhz", "MHz"),
    ("_ghz", "GHz"),
    ("_kw", "kW"),
    ("_w", "W"),
];

/// The unit an attribute's name implies (`memory_mib` → `MiB`), if any.
pub fn unit_from_name(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    NAME_SUFFIXES
        .iter()
        .find(|(suffix, _)| lower.len() > suffix.len() && lower.ends_with(suffix))
        .map(|(_, unit)| *unit)
}

/// The name without its unit suffix (`memory_mib` → `memory`), if it has one.
pub fn name_without_unit(name: &str) -> Option<&str> {
    let lower = name.to_ascii_lowercase();
    NAME_SUFFIXES
        .iter()
        .find(|(suffix, _)| lower.len() > suffix.len() && lower.ends_with(suffix))
        .map(|(suffix, _)| &name[..name.len() - suffix.len()])
}

/// A plugin's attribute with the unit its name implies, when it is a number without one.
pub fn with_unit_from_name(name: &str, mut a: DeviceAttribute) -> DeviceAttribute {
    if a.unit.is_empty()
        && (a.int.is_some() || a.float.is_some())
        && let Some(u) = unit_from_name(name)
    {
        a.unit = u.to_string();
    }
    a
}

/// A string attribute.
pub fn string(s: impl Into<String>) -> DeviceAttribute {
    DeviceAttribute {
        string: Some(s.into()),
        ..Default::default()
    }
}

/// A constraint's literal as an attribute (Nomad's `ParseAttribute`): an integer, then a
/// float, each with an optional known unit as suffix, then a boolean, else a string.
pub fn parse(input: &str) -> DeviceAttribute {
    let mut numeric = input;
    let mut unit = "";
    if input.chars().last().is_some_and(char::is_alphabetic) {
        // The longest unit that ends the input.
        if let Some(u) = UNITS
            .iter()
            .filter(|u| input.ends_with(u.name))
            .max_by_key(|u| u.name.len())
        {
            unit = u.name;
            numeric = input[..input.len() - u.name.len()].trim();
        }
    }
    if let Ok(i) = numeric.parse::<i64>() {
        return DeviceAttribute {
            int: Some(i),
            unit: unit.into(),
            ..Default::default()
        };
    }
    if let Ok(f) = numeric.parse::<f64>() {
        return DeviceAttribute {
            float: Some(f),
            unit: unit.into(),
            ..Default::default()
        };
    }
    if let Some(b) = go_bool(input) {
        return DeviceAttribute {
            boolean: Some(b),
            ..Default::default()
        };
    }
    string(input)
}

/// Go's `strconv.ParseBool`.
fn go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// A literal that starts like a number but ends in something that is not a unit
/// (`4 GiBs`, `8 gb`): the unit it names, for an error. Nomad would read it as a string
/// that no number ever equals.
pub fn unknown_unit(input: &str) -> Option<String> {
    let t = input.trim();
    let digits = t.trim_start_matches(['-', '+']);
    if !digits.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    parse(t).string.as_ref()?;
    let end = digits
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(digits.len());
    let rest = digits[end..].trim();
    (!rest.is_empty() && rest.chars().all(|c| c.is_alphabetic() || c == '/'))
        .then(|| rest.to_string())
}

/// The names of the known units, for an error message.
pub fn unit_names() -> String {
    UNITS.iter().map(|u| u.name).collect::<Vec<_>>().join(", ")
}

/// `a` against `b` as Nomad's `Attribute.Compare`: `None` when they do not compare
/// (different kinds, units of different kinds, a unit against none). Booleans are only
/// equal or not (`Greater`).
pub fn compare(a: &DeviceAttribute, b: &DeviceAttribute) -> Option<Ordering> {
    let (ua, ub) = (unit_named(&a.unit), unit_named(&b.unit));
    match (ua, ub) {
        (Some(x), Some(y)) if x.base != y.base => return None,
        (Some(_), None) | (None, Some(_)) => return None,
        _ => {}
    }
    if let Some(s) = &a.string {
        return Some(s.as_str().cmp(b.string.as_deref()?));
    }
    if let Some(x) = a.boolean {
        let y = b.boolean?;
        return Some(if x == y {
            Ordering::Equal
        } else {
            Ordering::Greater
        });
    }
    let scale = |u: Option<&Unit>| u.map_or((1, 1), |u| (u.num, u.den));
    let ((an, ad), (bn, bd)) = (scale(ua), scale(ub));
    if let (Some(x), Some(y)) = (a.int, b.int) {
        // x·an/ad against y·bn/bd, exactly when it fits in i128.
        let l = i128::from(x)
            .checked_mul(an)
            .and_then(|v| v.checked_mul(bd));
        let r = i128::from(y)
            .checked_mul(bn)
            .and_then(|v| v.checked_mul(ad));
        if let (Some(l), Some(r)) = (l, r) {
            return Some(l.cmp(&r));
        }
    }
    let number = |v: &DeviceAttribute| v.int.map(|i| i as f64).or(v.float);
    let x = number(a)? * an as f64 / ad as f64;
    let y = number(b)? * bn as f64 / bd as f64;
    x.partial_cmp(&y)
}

/// The attribute as text, for `regexp`, `set_contains*` and `version`: a string as it
/// is; Nomad reads only strings there (and integers for `version`).
pub fn text(a: &DeviceAttribute) -> Option<String> {
    a.string.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(i: i64, unit: &str) -> DeviceAttribute {
        DeviceAttribute {
            int: Some(i),
            unit: unit.into(),
            ..Default::default()
        }
    }

    #[test]
    fn literals_parse_as_nomads_parse_attribute() {
        assert_eq!(parse("4 GiB"), int(4, "GiB"));
        assert_eq!(parse("4GiB"), int(4, "GiB"));
        assert_eq!(parse("12"), int(12, ""));
        assert_eq!(parse("1.5 GHz").float, Some(1.5));
        assert_eq!(parse("1.5 GHz").unit, "GHz");
        assert_eq!(parse("10 MB/s"), int(10, "MB/s"));
        assert_eq!(parse("true").boolean, Some(true));
        assert_eq!(parse("a100").string.as_deref(), Some("a100"));
        assert_eq!(parse("4 GiBs").string.as_deref(), Some("4 GiBs"));
        assert_eq!(parse("").string.as_deref(), Some(""));
    }

    #[test]
    fn numbers_compare_after_unit_conversion() {
        use Ordering::*;
        let mem = int(8192, "MiB");
        assert_eq!(compare(&mem, &parse("4 GiB")), Some(Greater));
        assert_eq!(compare(&mem, &parse("8 GiB")), Some(Equal));
        assert_eq!(compare(&mem, &parse("9 GB")), Some(Less));
        assert_eq!(compare(&mem, &parse("8.5 GiB")), Some(Less));
        assert_eq!(compare(&parse("1 GHz"), &parse("1000 MHz")), Some(Equal));
        assert_eq!(compare(&parse("500 mW"), &parse("1 W")), Some(Less));
        // Units of different kinds, or a unit against none, do not compare.
        assert_eq!(compare(&mem, &parse("4 GHz")), None);
        assert_eq!(compare(&mem, &parse("4")), None);
        assert_eq!(compare(&int(3, ""), &parse("2.5")), Some(Greater));
        assert_eq!(compare(&string("a100"), &parse("a100")), Some(Equal));
        assert_eq!(compare(&string("a100"), &parse("12")), None);
        assert_eq!(compare(&int(12, ""), &string("x")), None);
        assert_eq!(compare(&parse("true"), &parse("false")), Some(Greater));
        // Exact for large integers.
        assert_eq!(
            compare(&int(i64::MAX, "EiB"), &int(i64::MAX - 1, "EiB")),
            Some(Greater)
        );
    }

    #[test]
    fn units_come_from_attribute_names_when_the_contract_has_none() {
        assert_eq!(unit_from_name("memory_mib"), Some("MiB"));
        assert_eq!(unit_from_name("clock_MHz"), Some("MHz"));
        assert_eq!(unit_from_name("power_w"), Some("W"));
        assert_eq!(unit_from_name("model"), None);
        assert_eq!(unit_from_name("_mib"), None);
        assert_eq!(name_without_unit("memory_mib"), Some("memory"));
        assert_eq!(with_unit_from_name("memory_mib", int(1024, "")).unit, "MiB");
        assert_eq!(with_unit_from_name("memory_mib", string("x")).unit, "");
        assert_eq!(with_unit_from_name("cores", int(4, "")).unit, "");
    }

    #[test]
    fn number_with_an_unknown_unit_is_named() {
        assert_eq!(unknown_unit("4 GiBs").as_deref(), Some("GiBs"));
        assert_eq!(unknown_unit("8gb").as_deref(), Some("gb"));
        assert_eq!(unknown_unit("4 GiB"), None);
        assert_eq!(unknown_unit("a100"), None);
        assert_eq!(unknown_unit("12"), None);
        assert_eq!(unknown_unit(">= 1.2"), None);
        assert!(is_unit("MiB") && !is_unit("mib"));
    }
}
