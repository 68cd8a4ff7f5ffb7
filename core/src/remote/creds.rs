//! Registry credentials from the docker credentials file (`$DOCKER_CONFIG/config.json`, else
//! `~/.docker/config.json`), as `docker login` and `oras login` write it: `auths` by
//! registry, each an `auth` (base64 of `user:password`) or `username` and `password`, or an
//! `identitytoken`. Credential helpers (`credsStore`, `credHelpers`) are programs this agent
//! does not run: a registry they cover is named in a warning and reached anonymously.

use std::collections::BTreeMap;
use std::path::PathBuf;

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, Entry>,
    #[serde(default, rename = "credsStore")]
    creds_store: Option<String>,
    #[serde(default, rename = "credHelpers")]
    cred_helpers: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
struct Entry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
}

/// The credentials file's path.
pub fn config_path() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d).join("config.json"));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".docker").join("config.json"))
}

/// `registry` as the credentials file may key it: `https://host/v1/`, `host`.
fn key_host(key: &str) -> &str {
    let k = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    k.split('/').next().unwrap_or(k)
}

/// The credentials for `registry` (`host[:port]`); anonymous when there are none.
pub fn auth_for(registry: &str) -> RegistryAuth {
    let Some(path) = config_path() else {
        return RegistryAuth::Anonymous;
    };
    let Ok(text) = std::fs::read_to_string(&path) else {
        return RegistryAuth::Anonymous;
    };
    match serde_json::from_str::<DockerConfig>(&text) {
        Ok(c) => auth_in(&c, registry, &path),
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "the docker credentials file does not parse; pulling anonymously");
            RegistryAuth::Anonymous
        }
    }
}

fn auth_in(c: &DockerConfig, registry: &str, path: &std::path::Path) -> RegistryAuth {
    let docker_hub =
        |r: &str| matches!(r, "docker.io" | "index.docker.io" | "registry-1.docker.io");
    let entry = c.auths.iter().find(|(k, _)| {
        let h = key_host(k);
        h.eq_ignore_ascii_case(registry) || (docker_hub(h) && docker_hub(registry))
    });
    if let Some((_, e)) = entry {
        if let Some(t) = &e.identitytoken
            && !t.is_empty()
        {
            return RegistryAuth::Bearer(t.clone());
        }
        if let (Some(u), Some(p)) = (&e.username, &e.password) {
            return RegistryAuth::Basic(u.clone(), p.clone());
        }
        if let Some(a) = &e.auth
            && let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(a.trim())
            && let Ok(text) = String::from_utf8(raw)
            && let Some((u, p)) = text.split_once(':')
        {
            return RegistryAuth::Basic(u.to_string(), p.to_string());
        }
    }
    if let Some(helper) = c.cred_helpers.get(registry).or(c.creds_store.as_ref()) {
        tracing::warn!(file = %path.display(), registry, helper = %helper, "the docker credentials file names a credential helper for this registry, which the agent does not run; pulling anonymously (put the credentials in `auths`)");
    }
    RegistryAuth::Anonymous
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_found_by_registry_in_each_spelling() {
        let c: DockerConfig = serde_json::from_str(
            r#"{"auths": {
                "127.0.0.1:5000": {"auth": "YWxpY2U6czNjcjN0"},
                "https://index.docker.io/v1/": {"username": "bob", "password": "pw"},
                "ghcr.io": {"identitytoken": "tok"}
            }}"#,
        )
        .unwrap();
        let p = std::path::Path::new("config.json");
        assert_eq!(
            auth_in(&c, "127.0.0.1:5000", p),
            RegistryAuth::Basic("alice".into(), "s3cr3t".into())
        );
        assert_eq!(
            auth_in(&c, "docker.io", p),
            RegistryAuth::Basic("bob".into(), "pw".into())
        );
        assert_eq!(
            auth_in(&c, "ghcr.io", p),
            RegistryAuth::Bearer("tok".into())
        );
        assert_eq!(auth_in(&c, "quay.io", p), RegistryAuth::Anonymous);
    }
}
