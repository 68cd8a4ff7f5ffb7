//! Nomad's ACL system: policies in Nomad's HCL policy language ([`policy`]), tokens of
//! type `management` or `client` kept in the state DB ([`store`]), and what each API
//! endpoint asks of a token ([`check`]).
//!
//! With `acl { enabled = true }` (or `agent run --acl-enabled`) every request is made as a
//! token: the one in `X-Nomad-Token` (or `Authorization: Bearer`), else the anonymous
//! token, whose policy is the one named `anonymous` if there is one. A management token
//! may do everything; a client token may do what the union of its policies allows, a
//! `deny` winning over every grant. The `acl { token = ... }` of older configs is a
//! management token.

pub mod check;
pub mod one_time;
pub mod policy;
pub mod routes;
pub mod store;

use std::collections::{BTreeMap, BTreeSet};

pub use policy::{Level, Policy, PolicyError};
pub use store::{AclStore, StoreError};

/// What a token may do: the merge of its policies.
#[derive(Debug, Clone, Default)]
pub struct Acl {
    management: bool,
    /// Namespace rules by exact name.
    namespaces: BTreeMap<String, NsCaps>,
    /// Namespace rules whose names are globs.
    globs: BTreeMap<String, NsCaps>,
    /// Variable rules by namespace and path, as Nomad keeps them: apart from the
    /// namespace's capabilities (a namespace `deny` does not take them away).
    variables: BTreeMap<(String, String), BTreeSet<String>>,
    node: Option<Level>,
    agent: Option<Level>,
    operator: Option<Level>,
}

#[derive(Debug, Clone, Default)]
struct NsCaps {
    caps: BTreeSet<String>,
}

/// Merge two coarse levels: deny wins, else the higher.
fn merge_level(a: Option<Level>, b: Option<Level>) -> Option<Level> {
    match (a, b) {
        (Some(Level::Deny), _) | (_, Some(Level::Deny)) => Some(Level::Deny),
        (x, y) => x.max(y),
    }
}

/// `*` globs as Nomad matches namespace names and variable paths.
pub(crate) fn glob_match(pattern: &str, s: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == s;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !s.starts_with(first) || s.len() < first.len() + last.len() || !s.ends_with(last) {
        return false;
    }
    let mut rest = &s[first.len()..s.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

impl Acl {
    /// The ACL of a management token.
    pub fn management() -> Self {
        Acl {
            management: true,
            ..Default::default()
        }
    }

    /// The ACL of a client token with these policies.
    pub fn from_policies<'a>(policies: impl IntoIterator<Item = &'a Policy>) -> Self {
        let mut acl = Acl::default();
        for p in policies {
            for ns in &p.namespaces {
                let map = if ns.name.contains('*') {
                    &mut acl.globs
                } else {
                    &mut acl.namespaces
                };
                let e = map.entry(ns.name.clone()).or_default();
                e.caps.extend(ns.capabilities.iter().cloned());
                for (path, caps) in &ns.variables {
                    acl.variables
                        .entry((ns.name.clone(), path.clone()))
                        .or_default()
                        .extend(caps.iter().cloned());
                }
            }
            acl.node = merge_level(acl.node, p.node);
            acl.agent = merge_level(acl.agent, p.agent);
            acl.operator = merge_level(acl.operator, p.operator);
        }
        acl
    }

    pub fn is_management(&self) -> bool {
        self.management
    }

    /// The rule for `ns`: its exact rule, else the closest matching glob (the one
    /// matching with the fewest characters left to the `*`s, as Nomad picks).
    fn ns_rule(&self, ns: &str) -> Option<&NsCaps> {
        if let Some(r) = self.namespaces.get(ns) {
            return Some(r);
        }
        self.globs
            .iter()
            .filter(|(g, _)| glob_match(g, ns))
            .min_by_key(|(g, _)| ns.len() as isize - g.replace('*', "").len() as isize)
            .map(|(_, r)| r)
    }

    /// Whether the token holds `cap` in namespace `ns` (a `deny` there wins).
    pub fn allow_ns(&self, ns: &str, cap: &str) -> bool {
        if self.management {
            return true;
        }
        self.ns_rule(ns)
            .is_some_and(|r| !r.caps.contains("deny") && r.caps.contains(cap))
    }

    /// Whether the token holds any capability at all in `ns`.
    pub fn allow_ns_any(&self, ns: &str) -> bool {
        self.management
            || self
                .ns_rule(ns)
                .is_some_and(|r| !r.caps.contains("deny") && !r.caps.is_empty())
    }

    /// Whether a namespace capability spec holds in `ns`: `a+b` needs both `a` and `b`.
    pub fn allow_ns_spec(&self, ns: &str, spec: &str) -> bool {
        spec.split('+').all(|c| self.allow_ns(ns, c))
    }

    /// Whether some namespace the token has a rule for grants `spec` (Nomad's
    /// `AllowNsOp("*", op)`, which lets a list across namespaces through to be filtered).
    pub fn allow_spec_somewhere(&self, spec: &str) -> bool {
        self.management
            || self
                .namespaces
                .keys()
                .chain(self.globs.keys())
                .any(|ns| self.allow_ns_spec(ns, spec))
    }

    /// Whether the token may do `op` (`list`, `read`, `write`, `destroy`) on variable
    /// `path` of namespace `ns`, as Nomad's `AllowVariableOperation`: the rule for exactly
    /// that namespace and path, else the closest glob over both (namespace and path
    /// joined). A namespace's `policy` grants no variables; only `variables` blocks do.
    pub fn allow_variable(&self, ns: &str, path: &str, op: &str) -> bool {
        if self.management {
            return true;
        }
        let key = format!("{ns}\0{path}");
        let caps = self
            .variables
            .get(&(ns.to_string(), path.to_string()))
            .filter(|_| !ns.contains('*') && !path.contains('*'))
            .or_else(|| {
                self.variables
                    .iter()
                    .filter(|((n, p), _)| n.contains('*') || p.contains('*'))
                    .map(|((n, p), c)| (format!("{n}\0{p}"), c))
                    .filter(|(g, _)| glob_match(g, &key))
                    .min_by_key(|(g, _)| key.len() as isize - g.replace('*', "").len() as isize)
                    .map(|(_, c)| c)
            });
        caps.is_some_and(|c| c.contains(op))
    }

    fn level(&self, l: Option<Level>, want: Level) -> bool {
        self.management || l.is_some_and(|l| l != Level::Deny && l >= want)
    }

    pub fn allow_node(&self, want: Level) -> bool {
        self.level(self.node, want)
    }

    pub fn allow_agent(&self, want: Level) -> bool {
        self.level(self.agent, want)
    }

    pub fn allow_operator(&self, want: Level) -> bool {
        self.level(self.operator, want)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_and_the_closest_wins_and_deny_wins() {
        assert!(glob_match("*", "anything"));
        assert!(glob_match("prod-*", "prod-web"));
        assert!(!glob_match("prod-*", "dev-web"));
        assert!(glob_match("a*c*e", "abcde"));
        let p = policy::parse(
            r#"namespace "*" { policy = "read" }
               namespace "prod-*" { policy = "deny" }
               namespace "dev" { policy = "write" }
               node { policy = "read" }"#,
        )
        .unwrap();
        let acl = Acl::from_policies([&p]);
        assert!(acl.allow_ns("default", "read-job"));
        assert!(!acl.allow_ns("default", "submit-job"));
        assert!(!acl.allow_ns("prod-web", "read-job"));
        assert!(acl.allow_ns("dev", "alloc-lifecycle"));
        assert!(acl.allow_node(Level::Read) && !acl.allow_node(Level::Write));
        assert!(!acl.allow_agent(Level::Read));
        // A namespace policy grants no variables (as in Nomad): only `variables` blocks.
        assert!(!acl.allow_variable("dev", "a/b", "write"));
        assert!(
            acl.allow_spec_somewhere("submit-job")
                && !acl.allow_spec_somewhere("sentinel-override")
        );
        assert!(acl.allow_ns_spec("dev", "list-jobs+read-job"));
        assert!(!acl.allow_ns_spec("default", "read-job+submit-job"));
        let deny = policy::parse(r#"namespace "dev" { capabilities = ["deny"] }"#).unwrap();
        let both = Acl::from_policies([&p, &deny]);
        assert!(!both.allow_ns("dev", "read-job"));
        assert!(Acl::management().allow_ns("x", "alloc-exec"));
    }

    #[test]
    fn variables_match_namespace_and_path_together_as_nomad_does() {
        let p = policy::parse(
            r#"namespace "default" {
                 policy = "deny"
                 variables {
                   path "app/*" { capabilities = ["read"] }
                   path "app/secret" { capabilities = ["deny"] }
                 }
               }
               namespace "*" {
                 variables {
                   path "shared/*" { capabilities = ["write", "list"] }
                 }
               }"#,
        )
        .unwrap();
        let acl = Acl::from_policies([&p]);
        // `read` implies `list`; a namespace deny does not reach the variables.
        assert!(acl.allow_variable("default", "app/one", "read"));
        assert!(acl.allow_variable("default", "app/one", "list"));
        assert!(!acl.allow_variable("default", "app/one", "write"));
        // The exact path wins over the glob; `deny` grants nothing.
        assert!(!acl.allow_variable("default", "app/secret", "read"));
        // A namespace glob covers every namespace's paths under it.
        assert!(acl.allow_variable("prod", "shared/x", "write"));
        assert!(!acl.allow_variable("prod", "app/one", "read"));
        assert!(!acl.allow_ns("default", "read-job"));
    }
}
