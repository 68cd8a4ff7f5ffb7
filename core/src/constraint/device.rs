//! A device request's `constraint` and `affinity` operands over typed attributes (Nomad's
//! `checkAttributeConstraint`), and which targets a device rule may name.

use super::attribute::{self, DeviceAttribute, compare};

/// Whether a target is one a device rule can name: a literal or a `${device.*}` one.
pub fn known_target(target: &str) -> bool {
    match target.strip_prefix("${").and_then(|t| t.strip_suffix('}')) {
        None => !target.starts_with("${"),
        Some(t) => {
            matches!(
                t,
                "device.ids" | "device.model" | "device.vendor" | "device.type"
            ) || t
                .strip_prefix("device.attr.")
                .is_some_and(|a| !a.is_empty())
        }
    }
}

/// Nomad's `checkAttributeConstraint`: whether `l operand r` holds; absent values hold
/// only for `!=` (against a present one) and `is_not_set`.
pub fn check(operand: &str, l: Option<&DeviceAttribute>, r: Option<&DeviceAttribute>) -> bool {
    use std::cmp::Ordering::*;
    match operand {
        "!=" | "not" => match (l, r) {
            (None, None) => false,
            (Some(_), None) | (None, Some(_)) => true,
            (Some(l), Some(r)) => compare(l, r).is_some_and(|o| o != Equal),
        },
        "=" | "==" | "is" | "<" | "<=" | ">" | ">=" => {
            let (Some(l), Some(r)) = (l, r) else {
                return false;
            };
            let Some(o) = compare(l, r) else {
                return false;
            };
            match operand {
                "<" => o == Less,
                "<=" => o != Greater,
                ">" => o == Greater,
                ">=" => o != Less,
                _ => o == Equal,
            }
        }
        "version" | "semver" => {
            let (Some(l), Some(r)) = (l, r) else {
                return false;
            };
            let version = l.string.clone().or_else(|| l.int.map(|i| i.to_string()));
            match (version, attribute::text(r)) {
                (Some(v), Some(req)) => super::version::version_matches(&v, &req),
                _ => false,
            }
        }
        "regexp" => match (l.and_then(attribute::text), r.and_then(attribute::text)) {
            (Some(l), Some(r)) => regex::Regex::new(&r).is_ok_and(|re| re.is_match(&l)),
            _ => false,
        },
        "set_contains" | "set_contains_all" | "set_contains_any" => {
            let (Some(l), Some(r)) = (l.and_then(attribute::text), r.and_then(attribute::text))
            else {
                return false;
            };
            let have: Vec<&str> = l.split(',').map(str::trim).collect();
            let mut want = r.split(',').map(str::trim);
            if operand == "set_contains_any" {
                want.any(|x| have.contains(&x))
            } else {
                want.all(|x| have.contains(&x))
            }
        }
        "is_set" => l.is_some(),
        "is_not_set" => l.is_none(),
        _ => false,
    }
}
