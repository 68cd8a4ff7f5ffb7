//! A job's, group's or task's `constraint` on a node (Nomad's `scheduler/feasible.go`
//! `checkConstraint` over the node's attributes, meta and identity as strings).

use std::collections::BTreeMap;

use super::version::version_matches;

/// One `constraint` (Nomad's `Constraint`: `LTarget`, `Operand`, `RTarget`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    pub ltarget: String,
    pub operand: String,
    pub rtarget: String,
}

impl Constraint {
    /// How Nomad names it in `ConstraintFiltered`.
    pub fn describe(&self) -> String {
        format!("{} {} {}", self.ltarget, self.operand, self.rtarget)
    }

    /// Whether it holds on `node` (keys as the node's `NodeInfo::keys` gives them: `attr.*`, `meta.*`, `node.*`).
    pub fn holds(&self, keys: &BTreeMap<String, String>) -> bool {
        let l = resolve(&self.ltarget, keys);
        let r = resolve(&self.rtarget, keys);
        match self.operand.as_str() {
            "" | "=" | "==" | "is" => l.is_some() && l == r,
            "!=" | "not" => l != r,
            "is_set" => l.is_some(),
            "is_not_set" => l.is_none(),
            "regexp" => match (l, r) {
                (Some(l), Some(r)) => regex::Regex::new(&r).is_ok_and(|re| re.is_match(&l)),
                _ => false,
            },
            "version" | "semver" => match (l, r) {
                (Some(l), Some(r)) => version_matches(&l, &r),
                _ => false,
            },
            op @ ("<" | "<=" | ">" | ">=") => match (l, r) {
                (Some(l), Some(r)) => {
                    let ord = match (l.parse::<f64>(), r.parse::<f64>()) {
                        (Ok(a), Ok(b)) => a.partial_cmp(&b),
                        _ => Some(l.cmp(&r)),
                    };
                    ord.is_some_and(|o| match op {
                        "<" => o.is_lt(),
                        "<=" => o.is_le(),
                        ">" => o.is_gt(),
                        _ => o.is_ge(),
                    })
                }
                _ => false,
            },
            "set_contains" | "set_contains_all" => match (l, r) {
                (Some(l), Some(r)) => {
                    let have: Vec<&str> = l.split(',').map(str::trim).collect();
                    r.split(',').map(str::trim).all(|x| have.contains(&x))
                }
                _ => false,
            },
            "set_contains_any" => match (l, r) {
                (Some(l), Some(r)) => {
                    let have: Vec<&str> = l.split(',').map(str::trim).collect();
                    r.split(',').map(str::trim).any(|x| have.contains(&x))
                }
                _ => false,
            },
            // `distinct_hosts`, `distinct_property`: one node holds them trivially.
            "distinct_hosts" | "distinct_property" => true,
            _ => false,
        }
    }
}

/// A target's value: `${key}` looked up on the node (absent: `None`), anything else
/// literal.
fn resolve(target: &str, keys: &BTreeMap<String, String>) -> Option<String> {
    match target
        .trim()
        .strip_prefix("${")
        .and_then(|t| t.strip_suffix('}'))
    {
        Some(key) => keys.get(key).cloned(),
        None => Some(target.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("attr.kernel.name".to_string(), "linux".to_string()),
            (
                "attr.kernel.version".to_string(),
                "5.10.0-28-amd64".to_string(),
            ),
            ("attr.cpu.numcores".to_string(), "2".to_string()),
            ("node.class".to_string(), "batch".to_string()),
            ("meta.rack".to_string(), "r1".to_string()),
            ("meta.tags".to_string(), "a,b,c".to_string()),
        ])
    }

    fn c(l: &str, op: &str, r: &str) -> bool {
        Constraint {
            ltarget: l.into(),
            operand: op.into(),
            rtarget: r.into(),
        }
        .holds(&keys())
    }

    #[test]
    fn constraints_hold_as_nomads_operators_say() {
        assert!(c("${attr.kernel.name}", "=", "linux"));
        assert!(!c("${attr.kernel.name}", "=", "windows"));
        assert!(c("${attr.kernel.name}", "!=", "windows"));
        assert!(c("${node.class}", "", "batch"));
        assert!(c("${meta.rack}", "regexp", "^r[0-9]$"));
        assert!(!c("${meta.rack}", "regexp", "^x"));
        assert!(c("${meta.rack}", "is_set", ""));
        assert!(!c("${meta.nope}", "is_set", ""));
        assert!(c("${meta.nope}", "is_not_set", ""));
        assert!(
            !c("${meta.nope}", "=", "${meta.nope2}"),
            "unset is never equal"
        );
        assert!(c("${attr.kernel.version}", "version", ">= 5.4, < 6"));
        assert!(!c("${attr.kernel.version}", "version", ">= 6.1"));
        assert!(c("${attr.kernel.version}", "version", "~> 5.10"));
        assert!(c("${attr.cpu.numcores}", ">=", "2"));
        assert!(!c("${attr.cpu.numcores}", ">", "2"));
        assert!(c("${meta.tags}", "set_contains", "a,c"));
        assert!(!c("${meta.tags}", "set_contains", "a,d"));
        assert!(c("${meta.tags}", "set_contains_any", "d,b"));
        assert!(!c("${meta.rack}", "unknown-op", "r1"));
    }
}
