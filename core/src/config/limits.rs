//! The agent's `limits` block: what the API's clients and the components together may take
//! (Nomad's `http_max_conns_per_client`, with the keys a single node adds).

use serde::Deserialize;

use super::ConfigError;

/// The agent's `limits` block (Nomad's, with the keys a single node adds).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentLimits {
    /// Connections one client address may hold open to the HTTP API (Nomad's default
    /// 100; 0: no limit). Past it, a new connection gets Nomad's 429 and is closed.
    pub http_max_conns_per_client: Option<u32>,
    /// How long a client may take to send a request's headers (default "10s"; "0s": no
    /// limit). A connection that sends none in time is closed.
    pub http_read_header_timeout: Option<String>,
    /// Linear memory of every component instance together, MiB (default 1024).
    pub guest_memory_mb: Option<u64>,
}

/// The HTTP API's limits, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Connections one client address may hold open; 0: no limit.
    pub max_conns_per_client: u32,
    /// The longest a request's headers may take to arrive; `None`: no limit.
    pub read_header_timeout: Option<std::time::Duration>,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            max_conns_per_client: 100,
            read_header_timeout: Some(std::time::Duration::from_secs(10)),
        }
    }
}

impl AgentLimits {
    /// The HTTP API's limits, a bad value named (`limits.http_read_header_timeout: …`).
    pub fn http(&self, file: &str) -> Result<HttpLimits, ConfigError> {
        let d = HttpLimits::default();
        let read_header_timeout = match &self.http_read_header_timeout {
            None => d.read_header_timeout,
            Some(s) => match crate::util::parse_duration(s) {
                Some(t) if t.is_zero() => None,
                Some(t) => Some(t),
                None => {
                    return Err(ConfigError {
                        file: file.to_string(),
                        message: format!("limits.http_read_header_timeout: invalid duration {s:?}"),
                    });
                }
            },
        };
        Ok(HttpLimits {
            max_conns_per_client: self
                .http_max_conns_per_client
                .unwrap_or(d.max_conns_per_client),
            read_header_timeout,
        })
    }

    /// The guest memory budget, bytes.
    pub fn guest_memory_bytes(&self, file: &str) -> Result<usize, ConfigError> {
        match self.guest_memory_mb {
            None => Ok(crate::runtime::engine::DEFAULT_MEMORY_BUDGET),
            Some(0) => Err(ConfigError {
                file: file.to_string(),
                message: "limits.guest_memory_mb: must be at least 1".into(),
            }),
            Some(mb) => usize::try_from(mb)
                .ok()
                .and_then(|m| m.checked_mul(1 << 20))
                .ok_or_else(|| ConfigError {
                    file: file.to_string(),
                    message: format!("limits.guest_memory_mb: {mb} MiB is too large"),
                }),
        }
    }
}
