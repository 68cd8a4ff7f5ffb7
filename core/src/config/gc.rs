//! The garbage collections' keys, typed once when the config is loaded: the client's
//! (`client { gc_* }`, Nomad's `client/gc.go` pressure thresholds) and the server's
//! (`server { job_gc_* eval_gc_* }`), with Nomad's defaults; a bad value is an error
//! naming its key.

use std::time::Duration;

use super::{ClientConfig, ConfigError, ServerConfig};

/// The `client { gc_* }` keys, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientGcConfig {
    pub interval: Duration,
    pub disk_usage_threshold: f64,
    pub inode_usage_threshold: f64,
    pub max_allocs: usize,
    pub parallel_destroys: usize,
}

impl Default for ClientGcConfig {
    /// Nomad's defaults.
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(60),
            disk_usage_threshold: 80.0,
            inode_usage_threshold: 70.0,
            max_allocs: 50,
            parallel_destroys: 2,
        }
    }
}

impl ClientGcConfig {
    /// The keys of a `client` block, or an error naming the bad one.
    pub fn from_client(c: &ClientConfig, file: &str) -> Result<Self, ConfigError> {
        let err = |key: &str, message: String| ConfigError {
            file: file.to_string(),
            message: format!("client.{key}: {message}"),
        };
        let d = Self::default();
        let interval = match &c.gc_interval {
            None => d.interval,
            Some(s) => crate::util::parse_duration(s)
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    err(
                        "gc_interval",
                        format!("{s:?} is not a duration above zero, like \"1m\""),
                    )
                })?,
        };
        let percent = |key: &str, v: Option<f64>, default: f64| match v {
            None => Ok(default),
            Some(p) if (0.0..=100.0).contains(&p) => Ok(p),
            Some(p) => Err(err(key, format!("{p} is not a percentage (0 to 100)"))),
        };
        let parallel_destroys = match c.gc_parallel_destroys {
            None => d.parallel_destroys,
            Some(0) => {
                return Err(err(
                    "gc_parallel_destroys",
                    "must be at least 1".to_string(),
                ));
            }
            Some(n) => n,
        };
        Ok(Self {
            interval,
            disk_usage_threshold: percent(
                "gc_disk_usage_threshold",
                c.gc_disk_usage_threshold,
                d.disk_usage_threshold,
            )?,
            inode_usage_threshold: percent(
                "gc_inode_usage_threshold",
                c.gc_inode_usage_threshold,
                d.inode_usage_threshold,
            )?,
            max_allocs: c.gc_max_allocs.unwrap_or(d.max_allocs),
            parallel_destroys,
        })
    }
}

/// The `server { job_gc_* eval_gc_* }` keys, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerGcConfig {
    /// How often a pass runs.
    pub interval: Duration,
    /// How long a dead job is kept.
    pub job_threshold: Duration,
    /// How long an ended allocation or a terminal evaluation is kept.
    pub eval_threshold: Duration,
    /// The same, for a batch job's.
    pub batch_eval_threshold: Duration,
}

impl Default for ServerGcConfig {
    /// Nomad's defaults.
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(5 * 60),
            job_threshold: Duration::from_secs(4 * 3600),
            eval_threshold: Duration::from_secs(3600),
            batch_eval_threshold: Duration::from_secs(24 * 3600),
        }
    }
}

impl ServerGcConfig {
    /// The keys of a `server` block, or an error naming the bad one.
    pub fn from_server(s: &ServerConfig, file: &str) -> Result<Self, ConfigError> {
        let d = Self::default();
        let key = |name: &str, value: &Option<String>, default: Duration, zero_ok: bool| {
            let Some(v) = value else { return Ok(default) };
            crate::util::parse_duration(v)
                .filter(|d| zero_ok || !d.is_zero())
                .ok_or_else(|| ConfigError {
                    file: file.to_string(),
                    message: format!(
                        "server.{name}: {v:?} is not a duration{}, like \"5m\"",
                        if zero_ok { "" } else { " above zero" }
                    ),
                })
        };
        Ok(Self {
            interval: key("job_gc_interval", &s.job_gc_interval, d.interval, false)?,
            job_threshold: key(
                "job_gc_threshold",
                &s.job_gc_threshold,
                d.job_threshold,
                true,
            )?,
            eval_threshold: key(
                "eval_gc_threshold",
                &s.eval_gc_threshold,
                d.eval_threshold,
                true,
            )?,
            batch_eval_threshold: key(
                "batch_eval_gc_threshold",
                &s.batch_eval_gc_threshold,
                d.batch_eval_threshold,
                true,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_keys_default_to_nomads_and_bad_ones_are_named() {
        let c = ClientConfig::default();
        assert_eq!(
            ClientGcConfig::from_client(&c, "f").unwrap(),
            ClientGcConfig::default()
        );
        let parse = |text: &str| {
            let c = crate::config::AgentConfig::parse(text, "a.hcl").unwrap();
            ClientGcConfig::from_client(&c.client, "a.hcl")
        };
        let ok = parse(
            "client {\n gc_interval = \"5s\"\n gc_disk_usage_threshold = 90\n gc_inode_usage_threshold = 75.5\n gc_max_allocs = 3\n gc_parallel_destroys = 4\n}",
        )
        .unwrap();
        assert_eq!(ok.interval, Duration::from_secs(5));
        assert_eq!(ok.disk_usage_threshold, 90.0);
        assert_eq!(ok.inode_usage_threshold, 75.5);
        assert_eq!((ok.max_allocs, ok.parallel_destroys), (3, 4));
        for (text, key) in [
            ("client { gc_interval = \"soon\" }", "client.gc_interval"),
            ("client { gc_interval = \"0s\" }", "client.gc_interval"),
            (
                "client { gc_disk_usage_threshold = 101 }",
                "client.gc_disk_usage_threshold",
            ),
            (
                "client { gc_inode_usage_threshold = -1 }",
                "client.gc_inode_usage_threshold",
            ),
            (
                "client { gc_parallel_destroys = 0 }",
                "client.gc_parallel_destroys",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(key), "{text}: {e}");
        }
    }

    #[test]
    fn the_server_keys_parse_with_nomads_defaults_and_a_bad_one_is_named() {
        let c = crate::config::AgentConfig::parse("", "t.hcl").unwrap();
        assert_eq!(
            ServerGcConfig::from_server(&c.server, "t.hcl").unwrap(),
            ServerGcConfig::default()
        );
        let c = crate::config::AgentConfig::parse(
            "server {\n  job_gc_interval = \"1s\"\n  job_gc_threshold = \"2s\"\n  eval_gc_threshold = \"0s\"\n  batch_eval_gc_threshold = \"90m\"\n}\n",
            "t.hcl",
        )
        .unwrap();
        let g = ServerGcConfig::from_server(&c.server, "t.hcl").unwrap();
        assert_eq!(g.interval, Duration::from_secs(1));
        assert_eq!(g.job_threshold, Duration::from_secs(2));
        assert_eq!(g.eval_threshold, Duration::ZERO);
        assert_eq!(g.batch_eval_threshold, Duration::from_secs(5400));
        for (text, key) in [
            ("job_gc_interval = \"0s\"", "server.job_gc_interval"),
            ("eval_gc_threshold = \"soon\"", "server.eval_gc_threshold"),
        ] {
            let c =
                crate::config::AgentConfig::parse(&format!("server {{\n  {text}\n}}\n"), "t.hcl")
                    .unwrap();
            let e = ServerGcConfig::from_server(&c.server, "t.hcl").unwrap_err();
            assert!(e.to_string().contains(key), "{e}");
        }
    }
}
