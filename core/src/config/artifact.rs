//! `client { artifact { … } }`: Nomad's client options for artifact downloads, handed to the
//! `artifact` hook as its plugin config. The hook is a sandboxed component, so Nomad's
//! options about its own sandbox and other getters change nothing here; they are accepted
//! (a Nomad config loads as is) and each is named in a warning.

use serde::Deserialize;

/// The name of the built-in hook these options are for.
pub const HOOK: &str = "artifact";

/// A size: bytes as a number, or Nomad's text (`"100GB"`, `"512MiB"`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Size {
    Bytes(u64),
    Text(String),
}

impl Size {
    /// The size in bytes, or what is wrong with it.
    pub fn bytes(&self) -> Result<u64, String> {
        match self {
            Size::Bytes(n) => Ok(*n),
            Size::Text(t) => parse_size(t).ok_or_else(|| {
                format!("{t:?} is not a size (a number of bytes, or e.g. \"100GB\", \"512MiB\")")
            }),
        }
    }
}

/// `"100GB"` (powers of 1000) or `"512MiB"` (powers of 1024), or a plain number of bytes.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().ok()?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" | "k" => 1_000,
        "mb" | "m" => 1_000_000,
        "gb" | "g" => 1_000_000_000,
        "tb" | "t" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(scale)
}

/// The `artifact` block of `client`, Nomad's fields.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ArtifactConfig {
    /// Longest wait for the next bytes of a download (default "30m").
    pub http_read_timeout: Option<String>,
    /// Largest download (default "100GB").
    pub http_max_size: Option<Size>,
    /// Bytes an archive may unpack to (default "100GB").
    pub decompression_size_limit: Option<Size>,
    /// Entries an archive may hold (default 4096).
    pub decompression_file_count_limit: Option<u64>,
    /// Nomad's getters this hook does not have: accepted, and named in a warning.
    pub gcs_timeout: Option<String>,
    pub git_timeout: Option<String>,
    pub hg_timeout: Option<String>,
    pub s3_timeout: Option<String>,
    /// Nomad's landlock sandbox for go-getter: the hook is always sandboxed.
    pub disable_filesystem_isolation: Option<bool>,
    /// Host env vars go-getter's subprocess may see: the hook sees none.
    pub set_environment_variables: Option<String>,
}

impl ArtifactConfig {
    /// The hook's plugin config (JSON keys the `artifact` hook reads), and the deadline of
    /// its calls (the read timeout's, at least an hour: a download is one call).
    pub fn plugin_config(
        &self,
    ) -> Result<
        (
            serde_json::Map<String, serde_json::Value>,
            std::time::Duration,
        ),
        String,
    > {
        let mut out = serde_json::Map::new();
        let mut deadline = std::time::Duration::from_secs(3600);
        if let Some(t) = &self.http_read_timeout {
            let d = crate::util::parse_duration(t)
                .filter(|d| !d.is_zero())
                .ok_or_else(|| format!("http_read_timeout: {t:?} is not a duration"))?;
            out.insert("http_read_timeout_ns".into(), (d.as_nanos() as u64).into());
            deadline = deadline.max(d * 2);
        }
        for (key, v) in [
            ("http_max_size", &self.http_max_size),
            ("decompression_size_limit", &self.decompression_size_limit),
        ] {
            if let Some(v) = v {
                let n = v.bytes().map_err(|e| format!("{key}: {e}"))?;
                if n == 0 {
                    return Err(format!("{key}: must be more than 0"));
                }
                out.insert(key.into(), n.into());
            }
        }
        if let Some(n) = self.decompression_file_count_limit {
            if n == 0 {
                return Err("decompression_file_count_limit: must be more than 0".into());
            }
            out.insert("decompression_file_count_limit".into(), n.into());
        }
        Ok((out, deadline))
    }

    /// Each field set that changes nothing here, with why.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (key, set) in [
            ("gcs_timeout", self.gcs_timeout.is_some()),
            ("git_timeout", self.git_timeout.is_some()),
            ("hg_timeout", self.hg_timeout.is_some()),
            ("s3_timeout", self.s3_timeout.is_some()),
        ] {
            if set {
                out.push(format!(
                    "client.artifact.{key}: not acted on: the built-in artifact hook fetches http(s) only (other sources are third-party hooks')"
                ));
            }
        }
        if self.disable_filesystem_isolation.is_some() {
            out.push("client.artifact.disable_filesystem_isolation: not acted on: the artifact hook is a WebAssembly component, always sandboxed".into());
        }
        if self.set_environment_variables.is_some() {
            out.push("client.artifact.set_environment_variables: not acted on: the artifact hook sees no host environment".into());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_nomad_writes_them() {
        assert_eq!(parse_size("100GB"), Some(100_000_000_000));
        assert_eq!(parse_size("512MiB"), Some(512 << 20));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("1 kb"), Some(1000));
        assert_eq!(parse_size("ten"), None);
        assert_eq!(parse_size("99999999999TB"), None);
    }

    #[test]
    fn the_block_becomes_the_hook_s_config_and_names_what_it_ignores() {
        let c = ArtifactConfig {
            http_read_timeout: Some("45m".into()),
            decompression_size_limit: Some(Size::Text("1GiB".into())),
            decompression_file_count_limit: Some(10),
            git_timeout: Some("1m".into()),
            ..Default::default()
        };
        let (json, deadline) = c.plugin_config().unwrap();
        assert_eq!(json["decompression_size_limit"], 1u64 << 30);
        assert_eq!(json["decompression_file_count_limit"], 10);
        assert_eq!(json["http_read_timeout_ns"], 45u64 * 60 * 1_000_000_000);
        assert_eq!(deadline, std::time::Duration::from_secs(90 * 60));
        assert_eq!(c.warnings().len(), 1);
        assert!(c.warnings()[0].starts_with("client.artifact.git_timeout"));
        let bad = ArtifactConfig {
            http_max_size: Some(Size::Text("lots".into())),
            ..Default::default()
        };
        assert!(
            bad.plugin_config()
                .unwrap_err()
                .starts_with("http_max_size:")
        );
    }
}
