//! A plugin block's remote source: `source`, `sha256` (the pin), `verify`, `insecure`,
//! `ca_file`, `max_size`, `poll_interval`, `auto_approve`, read into a
//! [`RemoteSpec`](crate::remote::RemoteSpec) with every field checked and named when wrong.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::{AgentConfig, ConfigError, PluginBlock};
use crate::remote::{AutoApprove, DEFAULT_MAX_SIZE, RemoteSpec, Source};

/// A plugin's `verify` block.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VerifyBlock {
    /// A cosign public key (PEM), checked offline.
    pub key: Option<String>,
    /// Keyless (Fulcio certificate and Rekor bundle): refused with the reason.
    pub keyless: Option<KeylessBlock>,
}

/// `verify { keyless { … } }`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KeylessBlock {
    pub issuer: Option<String>,
    pub identity: Option<String>,
    pub trust_root: Option<String>,
}

impl AgentConfig {
    /// The plugin blocks that name a `source`, read and checked.
    pub fn remote_sources(&self, file: &str) -> Result<BTreeMap<String, RemoteSpec>, ConfigError> {
        let mut out = BTreeMap::new();
        for (name, block) in &self.plugin {
            let err = |message: String| ConfigError {
                file: file.to_string(),
                message: format!("plugin \"{name}\".{message}"),
            };
            if let Some(spec) = remote_spec(name, block).map_err(err)? {
                out.insert(name.clone(), spec);
            }
        }
        Ok(out)
    }
}

/// `block`'s remote source, if it names one; the error names the field.
fn remote_spec(name: &str, block: &PluginBlock) -> Result<Option<RemoteSpec>, String> {
    let Some(text) = &block.source else {
        for (set, field) in [
            (block.verify.is_some(), "verify"),
            (block.insecure.is_some(), "insecure"),
            (block.ca_file.is_some(), "ca_file"),
            (block.max_size.is_some(), "max_size"),
            (block.poll_interval.is_some(), "poll_interval"),
            (block.auto_approve.is_some(), "auto_approve"),
        ] {
            if set {
                return Err(format!(
                    "{field}: applies to a component pulled from a source; this block names no source"
                ));
            }
        }
        return Ok(None);
    };
    let source = Source::parse(text).map_err(|e| format!("source: {e}"))?;
    if block.file.is_some() {
        return Err(
            "file: a plugin block takes a file or a source, not both (the source's component is cached by the agent)"
                .into(),
        );
    }
    let pin = match &block.sha256 {
        None => None,
        Some(s) => Some(RemoteSpec::normalize_pin(s).map_err(|e| format!("sha256: {e}"))?),
    };
    if let (Some(p), Some(d)) = (&pin, source.digest())
        && *p != d
    {
        return Err(format!(
            "sha256: pins {p}, but the source names {d}: they must agree"
        ));
    }
    let key = match &block.verify {
        None => None,
        Some(v) => {
            if v.keyless.is_some() {
                return Err("verify.keyless: keyless verification (a Fulcio certificate and a Rekor bundle checked against a trust root) is not supported: sign with a key and write verify { key = \"cosign.pub\" }".into());
            }
            let Some(k) = &v.key else {
                return Err("verify: names no key (write verify { key = \"cosign.pub\" })".into());
            };
            let path = PathBuf::from(k);
            crate::remote::read_key(&path).map_err(|e| format!("verify.key: {e}"))?;
            Some(path)
        }
    };
    let ca_file = match &block.ca_file {
        None => None,
        Some(f) => {
            let path = PathBuf::from(f);
            crate::remote::read_ca(&path).map_err(|e| format!("ca_file: {e}"))?;
            Some(path)
        }
    };
    let max_size = match &block.max_size {
        None => DEFAULT_MAX_SIZE,
        Some(s) => s.bytes().map_err(|e| format!("max_size: {e}"))?,
    };
    if max_size == 0 {
        return Err("max_size: must be more than 0".into());
    }
    let poll_interval = match &block.poll_interval {
        None => None,
        Some(s) => {
            let d = crate::util::parse_duration(s)
                .ok_or_else(|| format!("poll_interval: invalid duration {s:?}"))?;
            if d < std::time::Duration::from_secs(1) {
                return Err(format!("poll_interval: {s:?} is under a second"));
            }
            Some(d)
        }
    };
    let auto_approve = match &block.auto_approve {
        None => AutoApprove::default(),
        Some(s) => AutoApprove::parse(s).ok_or_else(|| {
            format!("auto_approve: {s:?} is not one of \"never\", \"same-grants\", \"always\"")
        })?,
    };
    Ok(Some(RemoteSpec {
        name: name.to_string(),
        source,
        pin,
        key,
        insecure: block.insecure.unwrap_or(false),
        ca_file,
        max_size,
        poll_interval,
        auto_approve,
    }))
}

/// What a remote block sets that the agent does not act on.
pub(super) fn warnings(name: &str, block: &PluginBlock) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(text) = &block.source
        && let Ok(source) = Source::parse(text)
        && block.poll_interval.is_some()
        && (source.digest().is_some()
            || block.sha256.is_some()
            || !matches!(source, Source::Oci(_)))
    {
        out.push(format!(
            "plugin \"{name}\".poll_interval: not acted on: only an oci:// tag without a pin is polled ({text} is fixed or not a registry tag)"
        ));
    }
    if block.source.is_some() && block.verify.is_none() {
        out.push(format!(
            "plugin \"{name}\": the component from {} is not verified (no verify block): anyone who can push to it can run code in this agent within the plugin's grants",
            block.source.as_deref().unwrap_or_default()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> Result<BTreeMap<String, RemoteSpec>, ConfigError> {
        AgentConfig::parse(&format!("plugin \"drv\" {{\n{body}\n}}\n"), "a.hcl")
            .unwrap()
            .remote_sources("a.hcl")
    }

    #[test]
    fn a_remote_block_reads_into_a_spec() {
        let hex = "ab".repeat(32);
        let s = parse(&format!(
            "source = \"oci://127.0.0.1:5000/acme/drv:1\"\nsha256 = \"{hex}\"\nmax_size = \"2MiB\"\npoll_interval = \"30s\"\nauto_approve = \"never\"\ninsecure = true"
        ))
        .unwrap();
        let s = &s["drv"];
        assert_eq!(s.pin.as_deref(), Some(format!("sha256:{hex}").as_str()));
        assert_eq!(s.max_size, 2 << 20);
        assert_eq!(s.poll_interval, Some(std::time::Duration::from_secs(30)));
        assert_eq!(s.auto_approve, AutoApprove::Never);
        assert!(s.insecure);
    }

    #[test]
    fn each_wrong_field_is_named() {
        let other = "cd".repeat(32);
        for (body, field) in [
            ("source = \"ftp://x\"", "plugin \"drv\".source: "),
            (
                "source = \"oci://r.io/a:1\"\nfile = \"a.wasm\"",
                "plugin \"drv\".file: ",
            ),
            (
                "source = \"oci://r.io/a:1\"\nsha256 = \"xyz\"",
                "plugin \"drv\".sha256: ",
            ),
            (
                &format!(
                    "source = \"oci://r.io/a@sha256:{}\"\nsha256 = \"{other}\"",
                    "ab".repeat(32)
                ),
                "plugin \"drv\".sha256: ",
            ),
            (
                "source = \"oci://r.io/a:1\"\nverify {\n key = \"/nonexistent.pub\"\n}",
                "plugin \"drv\".verify.key: ",
            ),
            (
                "source = \"oci://r.io/a:1\"\nverify {\n keyless {\n issuer = \"x\"\n }\n}",
                "plugin \"drv\".verify.keyless: ",
            ),
            (
                "source = \"oci://r.io/a:1\"\nmax_size = \"lots\"",
                "plugin \"drv\".max_size: ",
            ),
            (
                "source = \"oci://r.io/a:1\"\npoll_interval = \"10ms\"",
                "plugin \"drv\".poll_interval: ",
            ),
            (
                "source = \"oci://r.io/a:1\"\nauto_approve = \"sometimes\"",
                "plugin \"drv\".auto_approve: ",
            ),
            ("poll_interval = \"1m\"", "plugin \"drv\".poll_interval: "),
        ] {
            let e = parse(body).unwrap_err();
            assert!(e.message.starts_with(field), "{body}: {}", e.message);
        }
    }
}
