//! `agent component pull|approve|push|sign|keygen`: components from OCI registries, for
//! operators (pull a plugin block's source now, let a held version in) and for authors
//! (push a built component in the wasm artifact layout, sign it as `cosign sign --key`
//! does, make a key pair).

use std::path::{Path, PathBuf};

use super::ApiArgs;
use crate::remote::cosign::SigningKey;

/// `component pull NAME` / `component approve NAME`: ask the agent, print what it did.
pub(super) async fn ask(api: &ApiArgs, route: &str, name: &str) -> anyhow::Result<i32> {
    let v = api
        .call(
            reqwest::Method::POST,
            route,
            Some(&serde_json::json!({ "Name": name })),
        )
        .await?;
    let outcome = v["Outcome"].as_str().unwrap_or_default();
    let detail = v["Detail"].as_str().unwrap_or_default();
    println!(
        "{name}: {outcome}{}",
        if detail.is_empty() {
            String::new()
        } else {
            format!(" ({detail})")
        }
    );
    Ok(if outcome == "refused" { 1 } else { 0 })
}

/// What follows `oci://` in a target, or an error saying how to write one.
fn target(t: &str) -> anyhow::Result<&str> {
    t.strip_prefix("oci://")
        .ok_or_else(|| anyhow::anyhow!("{t:?}: write the target as oci://REGISTRY/REPOSITORY:TAG"))
}

/// `component push FILE oci://…`: check that the file is a component this agent can host,
/// then push it; print the digest to pin.
pub(super) async fn push(
    file: &Path,
    to: &str,
    insecure: bool,
    ca_file: Option<&Path>,
) -> anyhow::Result<i32> {
    let bytes = std::fs::read(file).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    let inspection = crate::runtime::inspect::inspect(&bytes)
        .map_err(|e| anyhow::anyhow!("{}: not pushed: {e}", file.display()))?;
    let digest = crate::remote::oci::push(target(to)?, &bytes, insecure, ca_file)
        .await
        .map_err(|e| anyhow::anyhow!("pushing to {to}: {e}"))?;
    println!(
        "pushed {} ({} world, {} bytes)",
        file.display(),
        inspection.world,
        bytes.len()
    );
    if let Some(g) = &inspection.declared_grants {
        println!("declares: {}", g.extra());
    }
    println!("digest: {digest}");
    let r = crate::remote::oci::reference(target(to)?).map_err(|e| anyhow::anyhow!("{e}"))?;
    println!(
        "pin it:  source = \"oci://{}/{}@{digest}\"",
        r.registry(),
        r.repository()
    );
    Ok(0)
}

/// `component sign --key KEY oci://…`: sign the manifest the reference names.
pub(super) async fn sign(
    key: &Path,
    to: &str,
    insecure: bool,
    ca_file: Option<&Path>,
) -> anyhow::Result<i32> {
    let text =
        std::fs::read_to_string(key).map_err(|e| anyhow::anyhow!("{}: {e}", key.display()))?;
    let k = SigningKey::from_pem(&text).map_err(|e| anyhow::anyhow!("{}: {e}", key.display()))?;
    let (digest, tag) = crate::remote::oci::sign(target(to)?, &k, insecure, ca_file)
        .await
        .map_err(|e| anyhow::anyhow!("signing {to}: {e}"))?;
    println!("signed {digest} as {tag}");
    println!("verified by the key {}", k.public().fingerprint());
    Ok(0)
}

/// `component keygen NAME`: write `NAME.key` (PKCS#8, mode 0600) and `NAME.pub`.
pub(super) fn keygen(name: &Path) -> anyhow::Result<i32> {
    let key_path = PathBuf::from(format!("{}.key", name.display()));
    let pub_path = PathBuf::from(format!("{}.pub", name.display()));
    for p in [&key_path, &pub_path] {
        if p.exists() {
            anyhow::bail!("{} exists: not overwritten", p.display());
        }
    }
    let (pem, key) = SigningKey::generate().map_err(|e| anyhow::anyhow!("{e}"))?;
    {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&key_path)?;
        f.write_all(pem.as_bytes())?;
    }
    std::fs::write(&pub_path, key.public().to_pem())?;
    println!(
        "wrote {} (keep it secret) and {}",
        key_path.display(),
        pub_path.display()
    );
    println!("key {}", key.public().fingerprint());
    Ok(0)
}

/// `component declare FILE JSON [-o OUT]`: add the grants declaration (a grant block's
/// JSON) to a built component as its top-level `paddock:grants` custom section, for
/// components built without a Rust SDK.
pub(super) fn declare(file: &Path, json: &str, out: Option<&Path>) -> anyhow::Result<i32> {
    let grants: crate::runtime::Grants = serde_json::from_str(json)
        .map_err(|e| anyhow::anyhow!("the declaration is not a grant block's JSON: {e}"))?;
    grants
        .validate()
        .map_err(|e| anyhow::anyhow!("the declaration: {e}"))?;
    let bytes = std::fs::read(file).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    let inspection = crate::runtime::inspect::inspect(&bytes)
        .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    if let Some(g) = inspection.declared_grants {
        anyhow::bail!(
            "{} already declares {}: declare once, where it is built",
            file.display(),
            serde_json::to_string(&g)?
        );
    }
    let canonical = serde_json::to_vec(&serde_json::from_str::<serde_json::Value>(json)?)?;
    let mut payload = Vec::new();
    leb128(crate::runtime::inspect::GRANTS_SECTION.len(), &mut payload);
    payload.extend_from_slice(crate::runtime::inspect::GRANTS_SECTION.as_bytes());
    payload.extend_from_slice(&canonical);
    let mut out_bytes = bytes;
    out_bytes.push(0); // a custom section
    leb128(payload.len(), &mut out_bytes);
    out_bytes.extend(payload);
    // Read back: what was written is what an agent reads.
    let back = crate::runtime::inspect::inspect(&out_bytes)
        .map_err(|e| anyhow::anyhow!("the declared component does not read back: {e}"))?;
    anyhow::ensure!(
        back.declared_grants.as_ref() == Some(&grants),
        "the declaration does not read back"
    );
    let dest = out.unwrap_or(file);
    let tmp = dest.with_extension("wasm.part");
    std::fs::write(&tmp, &out_bytes)?;
    std::fs::rename(&tmp, dest)?;
    println!(
        "{} declares {}",
        dest.display(),
        grants.summary().join(", ")
    );
    Ok(0)
}

fn leb128(mut n: usize, out: &mut Vec<u8>) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}
