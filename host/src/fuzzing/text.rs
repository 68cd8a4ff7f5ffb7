//! Targets over text and bytes: `${...}` interpolation, the agent config, the loader's
//! inspection of a component's bytes.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::AgentConfig;
use crate::runtime::TaskEnv;
use crate::runtime::inspect;

/// Input: lines `node:KEY=VALUE` and `env:KEY=VALUE`, then a line `---`, then the text to
/// interpolate. Checks the result against a character-by-character model of Nomad's rule
/// (one pass; known keys replaced, node keys first; anything else kept as written), in a
/// string and inside a JSON value.
pub fn interpolate(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (head, s) = text.split_once("\n---\n").unwrap_or(("", &text));
    let mut env = BTreeMap::new();
    let mut node = BTreeMap::new();
    for line in head.lines() {
        let (map, kv) = if let Some(kv) = line.strip_prefix("node:") {
            (&mut node, kv)
        } else if let Some(kv) = line.strip_prefix("env:") {
            (&mut env, kv)
        } else {
            continue;
        };
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        map.insert(k.to_string(), v.to_string());
    }
    let te = TaskEnv {
        env,
        node: Arc::new(node),
        secrets: Default::default(),
    };
    let out = te.interpolate(s);
    assert_eq!(out, model(&te, s), "interpolating {s:?}");
    if !s.contains("${") {
        assert_eq!(out, s);
    }
    let v = serde_json::json!({"a": [s, 1, {"b": s}], "c": null});
    let want = serde_json::json!({"a": [out, 1, {"b": out}], "c": null});
    assert_eq!(te.interpolate_json(&v), want);
}

/// Interpolation, one character at a time.
fn model(te: &TaskEnv, s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '$' && chars.get(i + 1) == Some(&'{') {
            let close = chars[i + 2..].iter().position(|&c| c == '}');
            if let Some(n) = close {
                let key: String = chars[i + 2..i + 2 + n].iter().collect();
                let valid = n > 0
                    && key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
                if valid {
                    let found = if key.starts_with("secret.") {
                        te.secrets.get(&key)
                    } else {
                        te.node.get(&key).or_else(|| te.env.get(&key))
                    };
                    match found {
                        Some(v) => out.push_str(v),
                        None => out.extend(&chars[i..i + 3 + n]),
                    }
                    i += 3 + n;
                    continue;
                }
            }
            out.push_str("${");
            i += 2;
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// Input: an agent config file. Parses it and derives everything the agent derives from it
/// at start (component settings, auto-revert, start limits, the state cache, the alloc dir);
/// a size given in MB must come out as that many bytes or as an error.
pub fn agent_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(c) = AgentConfig::parse(text, "fuzz.hcl") else {
        return;
    };
    if let Ok(settings) = c.component_settings("fuzz.hcl") {
        for (name, s) in settings {
            let mb = c.plugin[&name].limits.memory_mb;
            if let (Some(mb), Some(bytes)) = (mb, s.memory_bytes) {
                assert_eq!(bytes as u128, (mb as u128) << 20, "memory_mb of {name}");
            }
        }
    }
    let _ = c.auto_revert("fuzz.hcl");
    let _ = c.client.start_limits();
    let cache = c.client.state_cache_bytes();
    if let Some(mb) = c.client.state_cache_mb {
        assert!(cache as u128 <= (mb as u128) << 20);
    }
    let _ = c
        .client
        .alloc_root(std::path::Path::new("/data"), "fuzz.hcl");
}

/// Input: the bytes of a would-be component. Inspection returns what the bytes are or why
/// they are refused; the structure-only pass agrees with the validating one whenever the
/// bytes are valid.
pub fn loader_inspect(data: &[u8]) {
    let full = inspect::inspect(data);
    let quick = inspect::inspect_with(data, false);
    if let Ok(i) = &full {
        assert_eq!(
            quick.as_ref().ok(),
            Some(i),
            "structure-only inspection disagrees"
        );
        let grants = inspect::grants_used(&i.imports);
        assert!(grants.len() <= 6);
    }
    let _ = crate::runtime::loader::valid_name(&String::from_utf8_lossy(data));
}
