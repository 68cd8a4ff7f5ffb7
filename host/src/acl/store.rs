//! ACL tokens and policies, kept in the state DB so they survive a restart.
//!
//! A token's SecretID is never stored: only its SHA-256, which is what a request's secret
//! is looked up by (and then compared with in constant time). The SecretID is shown when
//! a token is made (bootstrap, create) and to its own bearer (`/v1/acl/token/self`); other
//! reads show it empty.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::Acl;
use super::policy::{self, Policy};
use crate::state::StateDb;

/// State DB "managers" the records are kept under.
const TOKENS: &str = "acl-token";
const POLICIES: &str = "acl-policy";
const META: &str = "acl-meta";

/// Errors of the token and policy store, each with the HTTP status Nomad answers.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("ACL bootstrap already done (reset index: {0})")]
    AlreadyBootstrapped(u64),
    #[error("{0}")]
    Invalid(String),
    #[error("ACL token not found")]
    TokenNotFound,
    #[error("ACL policy not found")]
    PolicyNotFound,
    #[error("state DB: {0}")]
    State(#[from] crate::state::StateError),
}

/// A token as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredToken {
    pub accessor_id: String,
    /// Hex SHA-256 of the SecretID.
    pub secret_sha256: String,
    pub name: String,
    /// `management` or `client`.
    pub kind: String,
    pub policies: Vec<String>,
    pub global: bool,
    /// Nanoseconds since the epoch.
    pub create_time: u64,
    /// When the token stops working, ns since the epoch; 0 never.
    #[serde(default)]
    pub expiration_time: u64,
    #[serde(default)]
    pub expiration_ttl_ns: u64,
    pub create_index: u64,
    pub modify_index: u64,
}

/// A policy as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredPolicy {
    pub name: String,
    pub description: String,
    pub rules: String,
    pub create_index: u64,
    pub modify_index: u64,
}

/// What a client asks a token to be (create or update).
#[derive(Debug, Clone, Default)]
pub struct TokenSpec {
    pub name: String,
    pub kind: String,
    pub policies: Vec<String>,
    pub global: bool,
    /// TTL from now, ns (0: none).
    pub ttl_ns: u64,
    /// Absolute expiry, ns since the epoch (0: none).
    pub expiration_time: u64,
}

#[derive(Default)]
struct Inner {
    tokens: BTreeMap<String, StoredToken>,
    /// Secret hash to accessor.
    by_secret: HashMap<String, String>,
    policies: BTreeMap<String, StoredPolicy>,
    /// The index of the bootstrap, once done.
    bootstrapped: Option<u64>,
    index: u64,
}

/// The token and policy store.
pub struct AclStore {
    enabled: bool,
    /// SHA-256 of the config's `acl { token }`, a management token.
    legacy: Option<[u8; 32]>,
    db: Arc<dyn StateDb>,
    inner: Mutex<Inner>,
    /// One-time tokens not yet exchanged (in memory only: see [`super::one_time`]).
    one_time: super::one_time::OneTimeTokens,
}

/// Who a request is made as.
#[derive(Debug, Clone)]
pub enum Caller {
    /// No token given.
    Anonymous,
    /// The config's `acl { token }`.
    Configured,
    /// A stored token.
    Token(StoredToken),
}

pub(crate) fn sha256(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

/// Constant-time equality of two digests.
fn ct_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A fresh UUID, as Nomad's accessor and secret IDs are.
fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Nomad's policy names: letters, digits and `-`, at most 128.
fn valid_policy_name(s: &str) -> bool {
    (1..=128).contains(&s.len()) && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

impl AclStore {
    /// The store, loaded from `db`. `enabled` is `acl { enabled }`; `configured` is the
    /// config's `acl { token }`.
    pub fn open(db: Arc<dyn StateDb>, enabled: bool, configured: Option<&str>) -> Self {
        let mut inner = Inner::default();
        let tokens: BTreeMap<String, StoredToken> = crate::state::load_plugin_states(&*db, TOKENS);
        for t in tokens.into_values() {
            inner.index = inner.index.max(t.modify_index);
            inner
                .by_secret
                .insert(t.secret_sha256.clone(), t.accessor_id.clone());
            inner.tokens.insert(t.accessor_id.clone(), t);
        }
        let policies: BTreeMap<String, StoredPolicy> =
            crate::state::load_plugin_states(&*db, POLICIES);
        for p in policies.into_values() {
            inner.index = inner.index.max(p.modify_index);
            inner.policies.insert(p.name.clone(), p);
        }
        let meta: BTreeMap<String, u64> = crate::state::load_plugin_states(&*db, META);
        inner.bootstrapped = meta.get("bootstrap").copied();
        inner.index = inner.index.max(inner.bootstrapped.unwrap_or(0));
        AclStore {
            enabled,
            legacy: configured.filter(|t| !t.is_empty()).map(sha256),
            db,
            inner: Mutex::new(inner),
            one_time: Default::default(),
        }
    }

    /// Whether the ACL system is on (`acl { enabled = true }`).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Who `secret` is: `None` for a secret no live token has (Nomad's "ACL token not
    /// found"; an expired token is not found either).
    pub fn resolve(&self, secret: Option<&str>) -> Option<Caller> {
        let Some(secret) = secret.filter(|s| !s.is_empty()) else {
            return Some(Caller::Anonymous);
        };
        let h = sha256(secret);
        if let Some(l) = &self.legacy
            && ct_eq(l, &h)
        {
            return Some(Caller::Configured);
        }
        let inner = self.lock();
        let hex = hex::encode(h);
        let t = inner
            .by_secret
            .get(&hex)
            .and_then(|a| inner.tokens.get(a))?;
        let mut stored = [0u8; 32];
        hex::decode_to_slice(&t.secret_sha256, &mut stored).ok()?;
        if !ct_eq(&stored, &h) {
            return None;
        }
        if t.expiration_time != 0 && t.expiration_time <= crate::util::now_nanos() {
            return None;
        }
        Some(Caller::Token(t.clone()))
    }

    /// Whether `secret` is a stored token's whose time has passed (Nomad then answers
    /// "ACL token expired" rather than "not found").
    pub fn expired(&self, secret: &str) -> bool {
        let inner = self.lock();
        let hex = hex::encode(sha256(secret));
        inner
            .by_secret
            .get(&hex)
            .and_then(|a| inner.tokens.get(a))
            .is_some_and(|t| {
                t.expiration_time != 0 && t.expiration_time <= crate::util::now_nanos()
            })
    }

    /// What `caller` may do.
    pub fn acl_of(&self, caller: &Caller) -> Acl {
        let names: Vec<String> = match caller {
            Caller::Configured => return Acl::management(),
            Caller::Token(t) if t.kind == "management" => return Acl::management(),
            Caller::Token(t) => t.policies.clone(),
            Caller::Anonymous => vec!["anonymous".into()],
        };
        let inner = self.lock();
        let parsed: Vec<Policy> = names
            .iter()
            .filter_map(|n| inner.policies.get(n))
            .filter_map(|p| policy::parse(&p.rules).ok())
            .collect();
        Acl::from_policies(parsed.iter())
    }

    fn next_index(inner: &mut Inner) -> u64 {
        inner.index += 1;
        inner.index
    }

    /// `POST /v1/acl/bootstrap`: the first management token, once. `secret` is an
    /// operator-chosen SecretID (Nomad's `BootstrapSecret`), else one is made.
    pub fn bootstrap(&self, secret: Option<String>) -> Result<(StoredToken, String), StoreError> {
        let mut inner = self.lock();
        if let Some(i) = inner.bootstrapped {
            return Err(StoreError::AlreadyBootstrapped(i));
        }
        let secret = match secret.filter(|s| !s.is_empty()) {
            Some(s) if uuid::Uuid::parse_str(&s).is_err() => {
                return Err(StoreError::Invalid(
                    "invalid acl token: BootstrapSecret must be a UUID".into(),
                ));
            }
            Some(s) => s,
            None => uuid(),
        };
        let index = Self::next_index(&mut inner);
        let token = StoredToken {
            accessor_id: uuid(),
            secret_sha256: hex::encode(sha256(&secret)),
            name: "Bootstrap Token".into(),
            kind: "management".into(),
            policies: Vec::new(),
            global: true,
            create_time: crate::util::now_nanos(),
            expiration_time: 0,
            expiration_ttl_ns: 0,
            create_index: index,
            modify_index: index,
        };
        self.db
            .put_plugin_state(META, "bootstrap", &serde_json::json!(index))?;
        self.put_token(&mut inner, token.clone())?;
        inner.bootstrapped = Some(index);
        Ok((token, secret))
    }

    fn put_token(&self, inner: &mut Inner, t: StoredToken) -> Result<(), StoreError> {
        let v = serde_json::to_value(&t).expect("tokens serialize");
        self.db.put_plugin_state(TOKENS, &t.accessor_id, &v)?;
        inner
            .by_secret
            .insert(t.secret_sha256.clone(), t.accessor_id.clone());
        inner.tokens.insert(t.accessor_id.clone(), t);
        Ok(())
    }

    fn check_spec(spec: &TokenSpec) -> Result<(), StoreError> {
        match spec.kind.as_str() {
            "client" if spec.policies.is_empty() => {
                Err(StoreError::Invalid("client token missing policies".into()))
            }
            "management" if !spec.policies.is_empty() => Err(StoreError::Invalid(
                "management token cannot be associated with policies".into(),
            )),
            "client" | "management" => Ok(()),
            other => Err(StoreError::Invalid(format!(
                "token type must be client or management, not {other:?}"
            ))),
        }
    }

    /// `POST /v1/acl/token`: a new token and its SecretID.
    pub fn create_token(&self, spec: TokenSpec) -> Result<(StoredToken, String), StoreError> {
        Self::check_spec(&spec)?;
        let mut inner = self.lock();
        let secret = uuid();
        let index = Self::next_index(&mut inner);
        let now = crate::util::now_nanos();
        let expiration_time = match (spec.ttl_ns, spec.expiration_time) {
            (0, t) => t,
            (ttl, _) => now + ttl,
        };
        let token = StoredToken {
            accessor_id: uuid(),
            secret_sha256: hex::encode(sha256(&secret)),
            name: spec.name,
            kind: spec.kind,
            policies: spec.policies,
            global: spec.global,
            create_time: now,
            expiration_time,
            expiration_ttl_ns: spec.ttl_ns,
            create_index: index,
            modify_index: index,
        };
        self.put_token(&mut inner, token.clone())?;
        Ok((token, secret))
    }

    /// `POST /v1/acl/token/{accessor}`: change a token's name, type and policies.
    pub fn update_token(&self, accessor: &str, spec: TokenSpec) -> Result<StoredToken, StoreError> {
        Self::check_spec(&spec)?;
        let mut inner = self.lock();
        let mut t = inner
            .tokens
            .get(accessor)
            .cloned()
            .ok_or(StoreError::TokenNotFound)?;
        t.name = spec.name;
        t.kind = spec.kind;
        t.policies = spec.policies;
        t.modify_index = Self::next_index(&mut inner);
        self.put_token(&mut inner, t.clone())?;
        Ok(t)
    }

    pub fn delete_token(&self, accessor: &str) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let t = inner
            .tokens
            .remove(accessor)
            .ok_or(StoreError::TokenNotFound)?;
        inner.by_secret.remove(&t.secret_sha256);
        Self::next_index(&mut inner);
        self.db.delete_plugin_state(TOKENS, accessor)?;
        Ok(())
    }

    pub fn token(&self, accessor: &str) -> Option<StoredToken> {
        self.lock().tokens.get(accessor).cloned()
    }

    /// Every token, oldest first.
    pub fn tokens(&self) -> Vec<StoredToken> {
        let mut v: Vec<_> = self.lock().tokens.values().cloned().collect();
        v.sort_by_key(|t| t.create_index);
        v
    }

    /// `POST /v1/acl/policy/{name}`: create or replace a policy; its rules must parse.
    pub fn upsert_policy(
        &self,
        name: &str,
        description: String,
        rules: String,
    ) -> Result<(), StoreError> {
        if !valid_policy_name(name) {
            return Err(StoreError::Invalid(format!(
                "invalid name '{name}': letters, digits and '-', at most 128"
            )));
        }
        policy::parse(&rules).map_err(|e| StoreError::Invalid(format!("policy {name:?}: {e}")))?;
        let mut inner = self.lock();
        let index = Self::next_index(&mut inner);
        let create_index = inner
            .policies
            .get(name)
            .map(|p| p.create_index)
            .unwrap_or(index);
        let p = StoredPolicy {
            name: name.into(),
            description,
            rules,
            create_index,
            modify_index: index,
        };
        let v = serde_json::to_value(&p).expect("policies serialize");
        self.db.put_plugin_state(POLICIES, name, &v)?;
        inner.policies.insert(name.into(), p);
        Ok(())
    }

    pub fn delete_policy(&self, name: &str) -> Result<(), StoreError> {
        let mut inner = self.lock();
        inner
            .policies
            .remove(name)
            .ok_or(StoreError::PolicyNotFound)?;
        Self::next_index(&mut inner);
        self.db.delete_plugin_state(POLICIES, name)?;
        Ok(())
    }

    pub fn policy(&self, name: &str) -> Option<StoredPolicy> {
        self.lock().policies.get(name).cloned()
    }

    pub fn policies(&self) -> Vec<StoredPolicy> {
        self.lock().policies.values().cloned().collect()
    }

    /// A one-time token standing for the token whose secret is `secret`.
    pub fn issue_one_time(&self, secret: &str, accessor_id: &str) -> super::one_time::OneTimeToken {
        let index = Self::next_index(&mut self.lock());
        self.one_time
            .issue(secret, accessor_id, crate::util::now_nanos(), index)
    }

    /// Exchange a one-time token, once, for who it stands for (with that token's secret),
    /// and the change's index; `None` for an unknown, used or expired one, or one whose
    /// token is gone since.
    pub fn exchange_one_time(&self, ott: &str) -> Option<(Caller, String, u64)> {
        let secret = self.one_time.exchange(ott, crate::util::now_nanos())?;
        let caller = self.resolve(Some(&secret))?;
        let index = Self::next_index(&mut self.lock());
        Some((caller, secret, index))
    }

    /// The store's latest change index (`X-Nomad-Index` of its reads).
    pub fn index(&self) -> u64 {
        self.lock().index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_kept_hashed_and_survive_a_reopen() {
        let db: Arc<dyn StateDb> = Arc::new(crate::state::MemState::new());
        let s = AclStore::open(db.clone(), true, Some("legacy"));
        let (boot, secret) = s.bootstrap(None).unwrap();
        assert!(matches!(
            s.bootstrap(None),
            Err(StoreError::AlreadyBootstrapped(_))
        ));
        let stored = serde_json::to_string(&db.plugin_states(TOKENS).unwrap()).unwrap();
        assert!(!stored.contains(&secret), "the secret is stored");
        let again = AclStore::open(db, true, None);
        assert!(
            matches!(again.resolve(Some(&secret)), Some(Caller::Token(t)) if t.accessor_id == boot.accessor_id)
        );
        assert!(again.resolve(Some("nope")).is_none());
        assert!(matches!(
            again.bootstrap(None),
            Err(StoreError::AlreadyBootstrapped(_))
        ));
        assert!(matches!(
            s.resolve(Some("legacy")),
            Some(Caller::Configured)
        ));
        let (_, short) = s
            .create_token(TokenSpec {
                name: "t".into(),
                kind: "management".into(),
                expiration_time: 1,
                ..Default::default()
            })
            .unwrap();
        assert!(
            s.resolve(Some(&short)).is_none(),
            "an expired token resolves"
        );
        assert!(s.expired(&short) && !s.expired("nope"));
    }
}
