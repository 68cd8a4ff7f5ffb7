//! One-time tokens (Nomad's `ACL.UpsertOneTimeToken` / `ExchangeOneTimeToken`): a caller
//! asks for a short-lived secret that stands for its own token, hands it to another
//! program (a browser, a CLI on another machine), which exchanges it once for the token.
//!
//! Unlike Nomad's, they are kept in memory only: the exchange must hand back the token's
//! SecretID, which this agent never writes to disk (it keeps a hash), so a one-time token
//! does not survive a restart of the agent. They live ten minutes, as Nomad's do; the
//! one-time secret itself is kept hashed too.

use std::collections::HashMap;
use std::sync::Mutex;

/// SHA-256 of a one-time secret, the key it is kept under.
fn sha256(s: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(s.as_bytes()).into()
}

/// How long a one-time token may be exchanged.
pub const TTL_NANOS: u64 = 10 * 60 * 1_000_000_000;

/// A one-time token as Nomad answers it.
#[derive(Debug, Clone)]
pub struct OneTimeToken {
    pub one_time_secret_id: String,
    pub accessor_id: String,
    /// ns since the epoch.
    pub expires_at: u64,
    pub index: u64,
}

struct Entry {
    /// The secret of the token it stands for.
    secret: String,
    accessor_id: String,
    expires_at: u64,
}

/// The one-time tokens not yet exchanged, by the hash of their one-time secret.
#[derive(Default)]
pub struct OneTimeTokens {
    live: Mutex<HashMap<[u8; 32], Entry>>,
}

impl OneTimeTokens {
    /// A new one-time token standing for the token `secret` (whose accessor is
    /// `accessor_id`), expiring [`TTL_NANOS`] from `now`.
    pub fn issue(&self, secret: &str, accessor_id: &str, now: u64, index: u64) -> OneTimeToken {
        let ott = uuid::Uuid::new_v4().to_string();
        let expires_at = now + TTL_NANOS;
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|_, e| e.expires_at > now);
        live.insert(
            sha256(&ott),
            Entry {
                secret: secret.to_string(),
                accessor_id: accessor_id.to_string(),
                expires_at,
            },
        );
        OneTimeToken {
            one_time_secret_id: ott,
            accessor_id: accessor_id.to_string(),
            expires_at,
            index,
        }
    }

    /// The secret `ott` stands for, once: every one-time token of the same accessor goes
    /// with it (as Nomad deletes them by accessor). `None` for an unknown or expired one.
    pub fn exchange(&self, ott: &str, now: u64) -> Option<String> {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let e = live.remove(&sha256(ott))?;
        live.retain(|_, o| o.accessor_id != e.accessor_id && o.expires_at > now);
        (e.expires_at > now).then_some(e.secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exchanged_once_within_ten_minutes() {
        let t = OneTimeTokens::default();
        let a = t.issue("s1", "acc", 1_000, 5);
        let b = t.issue("s1", "acc", 1_000, 6);
        let other = t.issue("s2", "acc2", 1_000, 7);
        assert_eq!(a.expires_at, 1_000 + TTL_NANOS);
        assert_eq!(
            t.exchange(&a.one_time_secret_id, 2_000).as_deref(),
            Some("s1")
        );
        assert_eq!(t.exchange(&a.one_time_secret_id, 2_000), None, "used twice");
        assert_eq!(
            t.exchange(&b.one_time_secret_id, 2_000),
            None,
            "the accessor's others go too"
        );
        assert_eq!(
            t.exchange(&other.one_time_secret_id, 1_000 + TTL_NANOS),
            None,
            "expired"
        );
        assert_eq!(t.exchange("nope", 0), None);
    }
}
