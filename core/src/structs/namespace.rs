//! Nomad's namespaces as objects: a name jobs live in, with a description, metadata and
//! the task drivers and network modes its jobs may use.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The namespace every agent has, which cannot be deleted.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Longest description Nomad accepts.
pub const MAX_DESCRIPTION_LEN: usize = 256;

/// Nomad's `Namespace`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct Namespace {
    pub name: String,
    pub description: String,
    /// A quota specification (Nomad Enterprise): kept, not acted on.
    pub quota: String,
    pub capabilities: Option<NamespaceCapabilities>,
    /// Node pools per namespace: `Default` is applied to jobs that name none; `Allowed` and
    /// `Denied` are checked at registration.
    pub node_pool_configuration: Option<NodePoolConfiguration>,
    /// Vault per namespace: kept, not acted on (this agent has no Vault).
    pub vault_configuration: Option<serde_json::Value>,
    /// Consul per namespace: kept, not acted on (this agent has no Consul).
    pub consul_configuration: Option<serde_json::Value>,
    pub meta: Option<BTreeMap<String, String>>,
    /// Workload identity claims (Nomad 1.10): kept, not acted on.
    pub required_extra_claims: Option<BTreeMap<String, String>>,
    pub optional_extra_claims: Option<BTreeMap<String, String>>,
    /// A digest of the fields above, base64 on the wire as Nomad's `[]byte`.
    #[serde(with = "hash_b64")]
    pub hash: Vec<u8>,
    pub create_index: u64,
    pub modify_index: u64,
}

/// Nomad's `NamespaceCapabilities`: what jobs in the namespace may use, checked when a job
/// is registered. An empty `Enabled…` list allows all but the `Disabled…` ones.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct NamespaceCapabilities {
    pub enabled_task_drivers: Option<Vec<String>>,
    pub disabled_task_drivers: Option<Vec<String>>,
    pub enabled_network_modes: Option<Vec<String>>,
    pub disabled_network_modes: Option<Vec<String>>,
}

/// Nomad's `NamespaceNodePoolConfiguration`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct NodePoolConfiguration {
    pub default: String,
    pub allowed: Option<Vec<String>>,
    pub denied: Option<Vec<String>>,
}

fn allowed_by(enabled: &Option<Vec<String>>, disabled: &Option<Vec<String>>, what: &str) -> bool {
    let enabled = enabled.as_deref().unwrap_or_default();
    let disabled = disabled.as_deref().unwrap_or_default();
    (enabled.is_empty() || enabled.iter().any(|e| e == what)) && !disabled.iter().any(|d| d == what)
}

impl Namespace {
    /// The namespace an agent starts with.
    pub fn default_namespace() -> Self {
        let mut ns = Self {
            name: DEFAULT_NAMESPACE.into(),
            description: "Default shared namespace".into(),
            ..Default::default()
        };
        ns.set_hash();
        ns
    }

    /// Nomad's checks of a namespace being written, each problem named.
    pub fn validate(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        let name_ok = (1..=128).contains(&self.name.len())
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !name_ok {
            problems.push(format!(
                "invalid name {:?}. Must match regex ^[a-zA-Z0-9-]{{1,128}}$",
                self.name
            ));
        }
        if self.description.len() > MAX_DESCRIPTION_LEN {
            problems.push(format!("description longer than {MAX_DESCRIPTION_LEN}"));
        }
        if let Some(np) = &self.node_pool_configuration
            && np.allowed.is_some()
            && np.denied.is_some()
        {
            problems.push(
                "invalid node pool configuration: allowed and denied cannot be used together"
                    .into(),
            );
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    /// Whether jobs here may use task driver `driver`.
    pub fn allows_driver(&self, driver: &str) -> bool {
        self.capabilities
            .as_ref()
            .is_none_or(|c| allowed_by(&c.enabled_task_drivers, &c.disabled_task_drivers, driver))
    }

    /// Whether jobs here may use group network mode `mode` (`""` is `host`).
    pub fn allows_network_mode(&self, mode: &str) -> bool {
        let mode = if mode.is_empty() { "host" } else { mode };
        self.capabilities
            .as_ref()
            .is_none_or(|c| allowed_by(&c.enabled_network_modes, &c.disabled_network_modes, mode))
    }

    /// Whether jobs here may use node pool `pool` (the namespace's default always may).
    pub fn allows_node_pool(&self, pool: &str) -> bool {
        let Some(np) = &self.node_pool_configuration else {
            return true;
        };
        if !np.default.is_empty() && np.default == pool {
            return true;
        }
        if let Some(allowed) = &np.allowed {
            return allowed.iter().any(|p| crate::util::glob_match(p, pool));
        }
        !np.denied
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|p| crate::util::glob_match(p, pool))
    }

    /// The node pool of a job here that names none.
    pub fn default_node_pool(&self) -> &str {
        self.node_pool_configuration
            .as_ref()
            .map(|np| np.default.as_str())
            .filter(|d| !d.is_empty())
            .unwrap_or("default")
    }

    /// The fields this agent keeps but does not act on, by their wire names.
    pub fn unacted_fields(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if !self.quota.is_empty() {
            out.push("Quota");
        }
        if self
            .vault_configuration
            .as_ref()
            .is_some_and(|v| !v.is_null())
        {
            out.push("VaultConfiguration");
        }
        if self
            .consul_configuration
            .as_ref()
            .is_some_and(|v| !v.is_null())
        {
            out.push("ConsulConfiguration");
        }
        if self
            .required_extra_claims
            .as_ref()
            .is_some_and(|m| !m.is_empty())
        {
            out.push("RequiredExtraClaims");
        }
        if self
            .optional_extra_claims
            .as_ref()
            .is_some_and(|m| !m.is_empty())
        {
            out.push("OptionalExtraClaims");
        }
        out
    }

    /// Set `Hash` from the namespace's content (indexes and the hash itself left out).
    pub fn set_hash(&mut self) {
        use sha2::Digest;
        let mut bare = self.clone();
        bare.hash.clear();
        bare.create_index = 0;
        bare.modify_index = 0;
        let bytes = serde_json::to_vec(&bare).expect("namespaces serialize");
        self.hash = sha2::Sha256::digest(&bytes).to_vec();
    }
}

mod hash_b64 {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        if v.is_empty() {
            s.serialize_none()
        } else {
            s.serialize_str(&STANDARD.encode(v))
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        // A client's hash is not trusted (it is recomputed); one that is not base64 is
        // dropped rather than refused, as it never mattered.
        let s: Option<String> = Option::deserialize(d)?;
        Ok(s.and_then(|s| STANDARD.decode(s).ok()).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(json: serde_json::Value) -> Namespace {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn nomads_json_reads_and_round_trips() {
        let n = ns(serde_json::json!({
            "Name": "prod", "Description": "d", "Meta": {"team": "a"},
            "Capabilities": {"EnabledTaskDrivers": ["exec"], "DisabledNetworkModes": ["bridge"]},
            "Hash": "AAEC", "CreateIndex": 3, "ModifyIndex": 4,
        }));
        assert_eq!(n.hash, vec![0, 1, 2]);
        let back = serde_json::to_value(&n).unwrap();
        assert_eq!(back["Hash"], "AAEC");
        assert_eq!(back["Meta"]["team"], "a");
        assert_eq!(back["Capabilities"]["EnabledTaskDrivers"][0], "exec");
        assert!(back["Capabilities"]["DisabledTaskDrivers"].is_null());
    }

    #[test]
    fn names_and_descriptions_are_checked() {
        assert!(ns(serde_json::json!({"Name": "a-B-9"})).validate().is_ok());
        let e = ns(serde_json::json!({"Name": "a b", "Description": "x".repeat(257)}))
            .validate()
            .unwrap_err();
        assert!(e.contains("invalid name \"a b\""), "{e}");
        assert!(e.contains("description longer than 256"), "{e}");
        assert!(ns(serde_json::json!({"Name": ""})).validate().is_err());
        assert!(
            ns(serde_json::json!({"Name": "x".repeat(129)}))
                .validate()
                .is_err()
        );
    }

    #[test]
    fn capabilities_allow_and_deny_drivers_and_modes() {
        let open = ns(serde_json::json!({"Name": "a"}));
        assert!(open.allows_driver("raw_exec") && open.allows_network_mode(""));
        let n = ns(serde_json::json!({"Name": "a", "Capabilities": {
            "EnabledTaskDrivers": ["exec", "raw_exec"], "DisabledTaskDrivers": ["raw_exec"],
            "DisabledNetworkModes": ["host"],
        }}));
        assert!(n.allows_driver("exec"));
        assert!(!n.allows_driver("raw_exec"));
        assert!(!n.allows_driver("mock"));
        assert!(!n.allows_network_mode(""));
        assert!(n.allows_network_mode("bridge"));
    }

    #[test]
    fn node_pools_by_glob() {
        let n = ns(serde_json::json!({"Name": "a", "NodePoolConfiguration": {
            "Default": "gpu", "Allowed": ["prod-*"],
        }}));
        assert_eq!(n.default_node_pool(), "gpu");
        assert!(n.allows_node_pool("gpu") && n.allows_node_pool("prod-east"));
        assert!(!n.allows_node_pool("default"));
        let d =
            ns(serde_json::json!({"Name": "a", "NodePoolConfiguration": {"Denied": ["*-dev"]}}));
        assert!(d.allows_node_pool("default") && !d.allows_node_pool("x-dev"));
        assert_eq!(d.default_node_pool(), "default");
        assert!(
            crate::util::glob_match("a*b*c", "axxbyyc") && !crate::util::glob_match("a*b", "axxc")
        );
    }

    #[test]
    fn the_hash_follows_content_not_indexes() {
        let mut a = ns(serde_json::json!({"Name": "a", "Description": "one"}));
        a.set_hash();
        let mut b = a.clone();
        b.modify_index = 9;
        b.set_hash();
        assert_eq!(a.hash, b.hash);
        b.description = "two".into();
        b.set_hash();
        assert_ne!(a.hash, b.hash);
        assert_eq!(a.hash.len(), 32);
    }
}
