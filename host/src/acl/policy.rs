//! Nomad's ACL policy language: HCL rules such as
//!
//! ```hcl
//! namespace "default" {
//!   policy       = "read"
//!   capabilities = ["read-logs"]
//!   variables {
//!     path "app/*" { capabilities = ["read", "list"] }
//!   }
//! }
//! namespace "prod-*" { policy = "deny" }
//! node     { policy = "read" }
//! agent    { policy = "write" }
//! operator { policy = "read" }
//! ```
//!
//! parsed and checked as Nomad's `acl.Parse` does, with the `policy` shorthands expanded
//! into the capabilities they stand for. Empty rules are a valid policy that grants
//! nothing (as in Nomad).

use std::collections::{BTreeMap, BTreeSet};

use hcl::{Block, Body, Expression, Structure};

/// Why rules are not a valid policy: the message names the block and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PolicyError(pub String);

fn err<T>(m: impl Into<String>) -> Result<T, PolicyError> {
    Err(PolicyError(m.into()))
}

/// A coarse level as `node`, `agent`, `operator`, `quota`, `plugin` and `node_pool` take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Nothing is allowed.
    Deny,
    /// `list` (plugin only): listing, no detail.
    List,
    Read,
    Write,
}

impl Level {
    fn parse(s: &str, what: &str, allowed: &[&str]) -> Result<Level, PolicyError> {
        if !allowed.contains(&s) {
            return err(format!(
                "Invalid {what} policy: {s:?} (one of {})",
                allowed.join(", ")
            ));
        }
        Ok(match s {
            "deny" => Level::Deny,
            "list" => Level::List,
            "read" => Level::Read,
            _ => Level::Write,
        })
    }
}

/// Namespace capabilities Nomad knows.
pub const NAMESPACE_CAPABILITIES: &[&str] = &[
    "deny",
    "list-jobs",
    "parse-job",
    "read-job",
    "submit-job",
    "dispatch-job",
    "read-logs",
    "read-fs",
    "alloc-exec",
    "alloc-node-exec",
    "alloc-lifecycle",
    "sentinel-override",
    "csi-register-plugin",
    "csi-write-volume",
    "csi-read-volume",
    "csi-list-volume",
    "csi-mount-volume",
    "list-scaling-policies",
    "read-scaling-policy",
    "read-job-scaling",
    "scale-job",
    "submit-recommendation",
    "host-volume-create",
    "host-volume-register",
    "host-volume-read",
    "host-volume-write",
    "host-volume-delete",
    // Fine-grained parts of `submit-job`: an endpoint that takes `submit-job` also takes
    // its own one of these (no `policy` shorthand grants them).
    "register-job",
    "revert-job",
    "deregister-job",
    "purge-job",
    "evaluate-job",
    "plan-job",
    "tag-job-version",
    "stable-job",
    "fail-deployment",
    "pause-deployment",
    "promote-deployment",
    "unblock-deployment",
    "cancel-deployment",
    "set-alloc-health-deployment",
    "gc-allocation",
    "pause-allocation",
    "force-periodic-job",
    "delete-service-registration",
];

/// What `policy = "read"` grants in a namespace.
const READ: &[&str] = &[
    "list-jobs",
    "parse-job",
    "read-job",
    "csi-list-volume",
    "csi-read-volume",
    "read-job-scaling",
    "list-scaling-policies",
    "read-scaling-policy",
    "host-volume-read",
];

/// What `policy = "write"` grants beyond [`READ`].
const WRITE_EXTRA: &[&str] = &[
    "scale-job",
    "submit-job",
    "dispatch-job",
    "read-logs",
    "read-fs",
    "alloc-exec",
    "alloc-lifecycle",
    "csi-mount-volume",
    "csi-write-volume",
    "submit-recommendation",
    "host-volume-create",
];

/// What `policy = "scale"` grants: an autoscaler's needs, reading the job it scales and
/// submitting recommendations included (as current Nomad's acl/policy.go expands it;
/// older releases gave only the first four).
const SCALE: &[&str] = &[
    "list-scaling-policies",
    "read-scaling-policy",
    "read-job-scaling",
    "scale-job",
    "read-job",
    "submit-recommendation",
];

/// Capabilities of a `variables { path "..." { ... } }` rule.
const VARIABLE_CAPABILITIES: &[&str] = &["deny", "list", "read", "write", "destroy"];

/// The capabilities a namespace `policy` shorthand stands for.
pub fn expand_namespace_policy(policy: &str) -> Option<Vec<&'static str>> {
    Some(match policy {
        "deny" => vec!["deny"],
        "read" => READ.to_vec(),
        "write" => READ.iter().chain(WRITE_EXTRA).copied().collect(),
        "scale" => SCALE.to_vec(),
        _ => return None,
    })
}

/// A variable path rule's capabilities as Nomad expands them: `deny` alone stands for
/// nothing else, and `read` brings `list`.
fn expand_variable_capabilities(mut caps: Vec<String>) -> Vec<String> {
    if caps.iter().any(|c| c == "deny") {
        return vec!["deny".into()];
    }
    if caps.iter().any(|c| c == "read") && !caps.iter().any(|c| c == "list") {
        caps.push("list".into());
    }
    caps
}

/// One `namespace "<name>"` rule, expanded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceRule {
    /// The name, possibly a glob with `*`.
    pub name: String,
    pub capabilities: BTreeSet<String>,
    /// Variable capabilities by path (a path may end in or hold `*`).
    pub variables: BTreeMap<String, BTreeSet<String>>,
}

/// A parsed policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    pub namespaces: Vec<NamespaceRule>,
    pub node: Option<Level>,
    pub agent: Option<Level>,
    pub operator: Option<Level>,
    pub quota: Option<Level>,
    pub plugin: Option<Level>,
    /// `host_volume "<name>"` rules: name to capabilities (accepted; no endpoint here
    /// checks them).
    pub host_volumes: BTreeMap<String, BTreeSet<String>>,
    /// `node_pool "<name>"` rules (accepted, as Nomad's).
    pub node_pools: BTreeMap<String, Level>,
}

/// Names of namespaces, host volumes and node pools: letters, digits, `-` and `*` globs.
fn valid_name(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '*' || c == '_')
}

/// Parse and check policy rules.
pub fn parse(rules: &str) -> Result<Policy, PolicyError> {
    let mut p = Policy::default();
    if rules.trim().is_empty() {
        return Ok(p);
    }
    let body: Body =
        hcl::parse(rules).map_err(|e| PolicyError(format!("Failed to parse ACL Policy: {e}")))?;
    for s in body.into_inner() {
        let block = match s {
            Structure::Block(b) => b,
            Structure::Attribute(a) => {
                return err(format!(
                    "Failed to parse ACL Policy: unexpected attribute {:?} at the top level (rules are blocks: namespace, node, agent, operator, quota, plugin, host_volume, node_pool)",
                    a.key.as_str()
                ));
            }
        };
        let kind = block.identifier.as_str().to_string();
        match kind.as_str() {
            "namespace" => p.namespaces.push(namespace_rule(&block)?),
            "node" | "agent" | "operator" | "quota" | "plugin" => {
                no_labels(&block)?;
                let allowed: &[&str] = if kind == "plugin" {
                    &["deny", "list", "read"]
                } else {
                    &["deny", "read", "write"]
                };
                let attrs = attributes(&block, &["policy"])?;
                let policy = attrs
                    .get("policy")
                    .ok_or_else(|| PolicyError(format!("Invalid {kind} policy: no policy set")))?;
                let level = Level::parse(&string(policy, &kind, "policy")?, &kind, allowed)?;
                let slot = match kind.as_str() {
                    "node" => &mut p.node,
                    "agent" => &mut p.agent,
                    "operator" => &mut p.operator,
                    "quota" => &mut p.quota,
                    _ => &mut p.plugin,
                };
                *slot = Some(level);
            }
            "host_volume" => {
                let name = one_label(&block)?;
                let attrs = attributes(&block, &["policy", "capabilities"])?;
                let mut caps = BTreeSet::new();
                if let Some(pol) = attrs.get("policy") {
                    match string(pol, "host_volume", "policy")?.as_str() {
                        "deny" | "read" => caps.insert("deny".to_string()),
                        "write" => caps.insert("mount-readwrite".to_string()),
                        other => return err(format!("Invalid host volume policy: {other:?}")),
                    };
                }
                for c in strings(
                    attrs.get("capabilities").copied(),
                    "host_volume",
                    "capabilities",
                )? {
                    if !["deny", "mount-readonly", "mount-readwrite"].contains(&c.as_str()) {
                        return err(format!("Invalid host volume capability '{c}'"));
                    }
                    caps.insert(c);
                }
                p.host_volumes.insert(name, caps);
            }
            "node_pool" => {
                let name = one_label(&block)?;
                let attrs = attributes(&block, &["policy", "capabilities"])?;
                let level = match attrs.get("policy") {
                    Some(pol) => Level::parse(
                        &string(pol, "node_pool", "policy")?,
                        "node_pool",
                        &["deny", "read", "write"],
                    )?,
                    None => Level::Deny,
                };
                p.node_pools.insert(name, level);
            }
            other => {
                return err(format!(
                    "Failed to parse ACL Policy: unknown block {other:?} (namespace, node, agent, operator, quota, plugin, host_volume, node_pool)"
                ));
            }
        }
    }
    Ok(p)
}

fn namespace_rule(block: &Block) -> Result<NamespaceRule, PolicyError> {
    let name = one_label(block)?;
    let mut rule = NamespaceRule {
        name: name.clone(),
        ..Default::default()
    };
    for s in block.body.iter() {
        match s {
            Structure::Attribute(a) => match a.key.as_str() {
                "policy" => {
                    let v = string(&a.expr, "namespace", "policy")?;
                    let caps = expand_namespace_policy(&v).ok_or_else(|| {
                        PolicyError(format!(
                            "Invalid namespace policy: {v:?} in namespace {name:?} (one of deny, read, write, scale)"
                        ))
                    })?;
                    rule.capabilities.extend(caps.iter().map(|c| c.to_string()));
                }
                "capabilities" => {
                    for c in strings(Some(&a.expr), "namespace", "capabilities")? {
                        if !NAMESPACE_CAPABILITIES.contains(&c.as_str()) {
                            return err(format!(
                                "Invalid namespace capability '{c}' in namespace {name:?}"
                            ));
                        }
                        rule.capabilities.insert(c);
                    }
                }
                other => {
                    return err(format!(
                        "Invalid namespace rule {name:?}: unknown key {other:?} (policy, capabilities, variables)"
                    ));
                }
            },
            Structure::Block(b) if b.identifier.as_str() == "variables" => {
                no_labels(b)?;
                for s in b.body.iter() {
                    let Structure::Block(pb) = s else {
                        return err(format!(
                            "Invalid variables rule in namespace {name:?}: only path blocks"
                        ));
                    };
                    if pb.identifier.as_str() != "path" {
                        return err(format!(
                            "Invalid variables rule in namespace {name:?}: unknown block {:?}",
                            pb.identifier.as_str()
                        ));
                    }
                    let path = one_label(pb)?;
                    let attrs = attributes(pb, &["capabilities"])?;
                    let caps = strings(attrs.get("capabilities").copied(), "path", "capabilities")?;
                    for c in &caps {
                        if !VARIABLE_CAPABILITIES.contains(&c.as_str()) {
                            return err(format!(
                                "Invalid variable capability '{c}' on path {path:?} in namespace {name:?}"
                            ));
                        }
                    }
                    rule.variables
                        .entry(path)
                        .or_default()
                        .extend(expand_variable_capabilities(caps));
                }
            }
            Structure::Block(b) => {
                return err(format!(
                    "Invalid namespace rule {name:?}: unknown block {:?}",
                    b.identifier.as_str()
                ));
            }
        }
    }
    if !valid_name(&name) {
        return err(format!("Invalid namespace name: {name:?}"));
    }
    Ok(rule)
}

fn no_labels(b: &Block) -> Result<(), PolicyError> {
    if b.labels.is_empty() {
        Ok(())
    } else {
        err(format!(
            "Invalid {} block: it takes no label",
            b.identifier.as_str()
        ))
    }
}

fn one_label(b: &Block) -> Result<String, PolicyError> {
    match b.labels.as_slice() {
        [l] => {
            let name = l.as_str().to_string();
            if b.identifier.as_str() != "path" && !valid_name(&name) {
                return err(format!(
                    "Invalid {} name: {name:?}",
                    b.identifier.as_str().replace('_', " ")
                ));
            }
            Ok(name)
        }
        _ => err(format!(
            "Invalid {} block: it takes one name label",
            b.identifier.as_str()
        )),
    }
}

/// A block's attributes, refusing keys not in `known` and nested blocks.
fn attributes<'a>(
    b: &'a Block,
    known: &[&str],
) -> Result<BTreeMap<String, &'a Expression>, PolicyError> {
    let what = b.identifier.as_str();
    let mut out = BTreeMap::new();
    for s in b.body.iter() {
        match s {
            Structure::Attribute(a) if known.contains(&a.key.as_str()) => {
                out.insert(a.key.as_str().to_string(), &a.expr);
            }
            Structure::Attribute(a) => {
                return err(format!(
                    "Invalid {what} rule: unknown key {:?} ({})",
                    a.key.as_str(),
                    known.join(", ")
                ));
            }
            Structure::Block(inner) => {
                return err(format!(
                    "Invalid {what} rule: unexpected block {:?}",
                    inner.identifier.as_str()
                ));
            }
        }
    }
    Ok(out)
}

fn string(e: &Expression, what: &str, key: &str) -> Result<String, PolicyError> {
    match e {
        Expression::String(s) => Ok(s.clone()),
        other => err(format!(
            "Invalid {what} rule: {key} must be a string, not {other}"
        )),
    }
}

fn strings(e: Option<&Expression>, what: &str, key: &str) -> Result<Vec<String>, PolicyError> {
    match e {
        None => Ok(Vec::new()),
        Some(Expression::Array(items)) => items.iter().map(|i| string(i, what, key)).collect(),
        Some(other) => err(format!(
            "Invalid {what} rule: {key} must be a list of strings, not {other}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorthands_expand_and_capabilities_add() {
        let p = parse(
            r#"namespace "default" {
                 policy = "read"
                 capabilities = ["read-logs"]
               }
               namespace "prod-*" { policy = "scale" }
               node { policy = "write" }
               plugin { policy = "list" }"#,
        )
        .unwrap();
        let d = &p.namespaces[0];
        assert!(d.capabilities.contains("read-job") && d.capabilities.contains("read-logs"));
        assert!(!d.capabilities.contains("submit-job"));
        // A namespace policy grants no variables (Nomad's acl/policy.go).
        assert!(d.variables.is_empty());
        assert!(p.namespaces[1].capabilities.contains("scale-job"));
        assert_eq!(p.node, Some(Level::Write));
        assert_eq!(p.plugin, Some(Level::List));
        let w = expand_namespace_policy("write").unwrap();
        assert!(w.contains(&"alloc-lifecycle") && w.contains(&"read-job"));
    }

    /// Each shorthand stands for exactly the capabilities Nomad's `expandNamespacePolicy`
    /// lists for it.
    #[test]
    fn shorthands_expand_as_nomads() {
        let set = |p: &str| -> BTreeSet<&str> {
            expand_namespace_policy(p).unwrap().into_iter().collect()
        };
        // Nomad's `expandNamespacePolicy`, list by list.
        let read = "list-jobs parse-job read-job csi-list-volume csi-read-volume \
                    read-job-scaling list-scaling-policies read-scaling-policy host-volume-read";
        let write = format!(
            "{read} scale-job submit-job dispatch-job read-logs read-fs alloc-exec \
             alloc-lifecycle csi-mount-volume csi-write-volume submit-recommendation \
             host-volume-create"
        );
        let scale = "list-scaling-policies read-scaling-policy read-job-scaling scale-job \
                     read-job submit-recommendation";
        for (p, want) in [
            ("deny", "deny"),
            ("read", read),
            ("write", &write),
            ("scale", scale),
        ] {
            assert_eq!(set(p), want.split_whitespace().collect(), "{p}");
        }
        assert_eq!(expand_namespace_policy("list"), None);
        // Every capability a shorthand grants is one a policy may name.
        for p in ["deny", "read", "write", "scale"] {
            for c in set(p) {
                assert!(NAMESPACE_CAPABILITIES.contains(&c), "{p}: {c}");
            }
        }
        // A scale token may read the job it scales, not submit it.
        let p = parse(r#"namespace "default" { policy = "scale" }"#).unwrap();
        let caps = &p.namespaces[0].capabilities;
        assert!(caps.contains("read-job") && caps.contains("submit-recommendation"));
        assert!(!caps.contains("submit-job") && !caps.contains("list-jobs"));
    }

    /// The fine-grained job, deployment, allocation, periodic and service capabilities of
    /// current Nomad's acl/policy.go parse; none comes with a shorthand, and a name Nomad
    /// does not know (`run-deployment`) is still refused.
    #[test]
    fn fine_grained_capabilities_parse() {
        let fine = "register-job revert-job deregister-job purge-job evaluate-job plan-job \
                    tag-job-version stable-job fail-deployment pause-deployment \
                    promote-deployment unblock-deployment cancel-deployment \
                    set-alloc-health-deployment gc-allocation pause-allocation \
                    force-periodic-job delete-service-registration";
        for c in fine.split_whitespace() {
            let p = parse(&format!(
                "namespace \"default\" {{ capabilities = [\"{c}\"] }}"
            ))
            .unwrap_or_else(|e| panic!("{c}: {e}"));
            assert!(p.namespaces[0].capabilities.contains(c), "{c}");
            for shorthand in ["read", "write", "scale"] {
                let caps = expand_namespace_policy(shorthand).unwrap();
                assert!(!caps.contains(&c), "{shorthand} grants {c}");
            }
        }
        assert!(parse(r#"namespace "default" { capabilities = ["run-deployment"] }"#).is_err());
    }

    #[test]
    fn bad_rules_name_what_is_wrong() {
        for (rules, want) in [
            (
                r#"namespace "x" { policy = "own" }"#,
                "Invalid namespace policy",
            ),
            (
                r#"namespace "x" { capabilities = ["fly"] }"#,
                "Invalid namespace capability 'fly'",
            ),
            (r#"node { policy = "scale" }"#, "Invalid node policy"),
            (
                r#"namespace "a/b" { policy = "read" }"#,
                "Invalid namespace name",
            ),
            (r#"bogus { policy = "read" }"#, "unknown block \"bogus\""),
            ("namespace {", "Failed to parse ACL Policy"),
            (
                "agent {\n  policy = \"read\"\n  extra = 1\n}",
                "unknown key \"extra\"",
            ),
        ] {
            let e = parse(rules).unwrap_err().0;
            assert!(e.contains(want), "{rules}: {e}");
        }
        assert_eq!(parse("").unwrap(), Policy::default());
    }
}
