//! What was pulled and verified, kept on disk so a restart needs no network: the
//! component's bytes under `blobs/sha256/<hex>` (named by their own digest) and, per plugin
//! name, `refs/<name>.json`: the source, the digest it resolved to, the signer, and the
//! evidence (the manifest's bytes, the signature payload and signature) to verify it again.
//!
//! Every file is written whole to `tmp/`, synced, then renamed into place, the blob before
//! the ref that names it; `tmp/` is emptied when the cache is opened. A `kill -9` at any
//! point leaves either the old ref or the new one, each naming a whole blob. What is read
//! is checked again anyway (the blob's digest, the manifest's digest, the layer it names,
//! the signature under the key configured now): a cached version that no longer qualifies
//! is not used, and the log says why.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::{Evidence, Pulled, RemoteSpec, Source, cosign, oci};

/// The pull cache.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

/// One name's ref.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Ref {
    source: String,
    reference: String,
    digest: String,
    /// `sha256:<hex>` of the component's bytes.
    blob: String,
    #[serde(default)]
    signer: Option<String>,
    #[serde(default)]
    evidence: Evidence,
    pulled_at: u64,
}

impl Cache {
    /// Open (and make) the cache at `dir`, clearing what an interrupted write left.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        for sub in ["blobs/sha256", "refs", "tmp"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        for e in std::fs::read_dir(dir.join("tmp"))?.flatten() {
            let _ = std::fs::remove_file(e.path());
        }
        Ok(Self {
            dir: dir.to_path_buf(),
        })
    }

    /// Its folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn ref_path(&self, name: &str) -> PathBuf {
        let safe = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && name.len() <= 128;
        let file = if safe {
            format!("{name}.json")
        } else {
            format!(
                "{}.json",
                crate::runtime::cache::sha256_hex(name.as_bytes())
            )
        };
        self.dir.join("refs").join(file)
    }

    fn blob_path(&self, digest: &str) -> Option<PathBuf> {
        let hex = digest.strip_prefix("sha256:")?;
        (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| self.dir.join("blobs/sha256").join(hex.to_ascii_lowercase()))
    }

    /// Write `bytes` to `to` through `tmp/`: whole or not at all.
    fn write_atomic(&self, to: &Path, bytes: &[u8]) -> std::io::Result<()> {
        let mut tmp = tempfile::NamedTempFile::new_in(self.dir.join("tmp"))?;
        tmp.write_all(bytes)?;
        tmp.as_file().sync_all()?;
        tmp.persist(to).map_err(|e| e.error)?;
        if let Some(parent) = to.parent()
            && let Ok(d) = std::fs::File::open(parent)
        {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// Keep what `spec` pulled, as the version its name runs.
    pub fn store(&self, spec: &RemoteSpec, p: &Pulled) -> std::io::Result<()> {
        if p.from_cache {
            return Ok(());
        }
        let blob = format!("sha256:{}", crate::runtime::cache::sha256_hex(&p.bytes));
        let path = self
            .blob_path(&blob)
            .ok_or_else(|| std::io::Error::other("bad digest"))?;
        let whole = std::fs::read(&path)
            .is_ok_and(|b| crate::runtime::cache::sha256_hex(&b) == blob["sha256:".len()..]);
        if !whole {
            self.write_atomic(&path, &p.bytes)?;
        }
        let r = Ref {
            source: spec.source.to_string(),
            reference: p.reference.clone(),
            digest: p.digest.clone(),
            blob,
            signer: p.signer.clone(),
            evidence: p.evidence.clone(),
            pulled_at: crate::util::now_nanos(),
        };
        let json = serde_json::to_vec_pretty(&r).map_err(std::io::Error::other)?;
        self.write_atomic(&self.ref_path(&spec.name), &json)?;
        self.collect();
        Ok(())
    }

    /// Delete blobs no ref names.
    fn collect(&self) {
        let mut named = std::collections::BTreeSet::new();
        if let Ok(refs) = std::fs::read_dir(self.dir.join("refs")) {
            for e in refs.flatten() {
                if let Ok(text) = std::fs::read(e.path())
                    && let Ok(r) = serde_json::from_slice::<Ref>(&text)
                {
                    named.insert(r.blob.trim_start_matches("sha256:").to_string());
                }
            }
        }
        if let Ok(blobs) = std::fs::read_dir(self.dir.join("blobs/sha256")) {
            for e in blobs.flatten() {
                if !named.contains(&*e.file_name().to_string_lossy()) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }

    /// The version cached for `spec`'s name, when it is from the same source, meets the pin
    /// and verifies (again) under the key configured now.
    pub fn load(&self, spec: &RemoteSpec) -> Option<Pulled> {
        let path = self.ref_path(&spec.name);
        let text = std::fs::read(&path).ok()?;
        let skip = |why: String| {
            tracing::warn!(component = %spec.name, cache = %path.display(), "the cached version is not used: {why}");
            None
        };
        let r: Ref = match serde_json::from_slice(&text) {
            Ok(r) => r,
            Err(e) => return skip(format!("its record does not parse: {e}")),
        };
        if r.source != spec.source.to_string() {
            return None;
        }
        if let Some(d) = spec.fixed_digest()
            && !d.eq_ignore_ascii_case(&r.digest)
        {
            return None;
        }
        let bytes = std::fs::read(self.blob_path(&r.blob)?).ok()?;
        if format!("sha256:{}", crate::runtime::cache::sha256_hex(&bytes)) != r.blob {
            return skip("its bytes do not match their digest".into());
        }
        if bytes.len() as u64 > spec.max_size {
            return skip(format!("it is over max_size ({} bytes)", bytes.len()));
        }
        let b64 = base64::engine::general_purpose::STANDARD;
        if let Source::Oci(_) = spec.source {
            let Ok(manifest) = b64.decode(&r.evidence.manifest) else {
                return skip("its manifest is not kept".into());
            };
            if format!("sha256:{}", crate::runtime::cache::sha256_hex(&manifest)) != r.digest {
                return skip("its manifest does not match the digest".into());
            }
            match oci::component_layer(&manifest, spec.max_size) {
                Ok(l) if l.digest.eq_ignore_ascii_case(&r.blob) => {}
                Ok(_) => return skip("its manifest names other bytes".into()),
                Err(e) => return skip(e.to_string()),
            }
        } else if r.digest != r.blob {
            return skip("its digest is not its bytes'".into());
        }
        let signer = match &spec.key {
            None => None,
            Some(key_path) => {
                let key = match super::read_key(key_path) {
                    Ok(k) => k,
                    Err(e) => return skip(e.to_string()),
                };
                let verified = match spec.source {
                    Source::Oci(_) => b64
                        .decode(&r.evidence.payload)
                        .map_err(|_| cosign::SignatureError::Base64)
                        .and_then(|payload| {
                            cosign::verify_payload(
                                &key,
                                &r.digest,
                                &payload,
                                Some(&r.evidence.signature),
                            )
                            .map(|_| ())
                        }),
                    _ => cosign::verify_blob(&key, &bytes, &r.evidence.signature),
                };
                if let Err(e) = verified {
                    return skip(format!(
                        "it is not signed under {}: {e}",
                        key_path.display()
                    ));
                }
                Some(super::signer_name(key_path, &key))
            }
        };
        Some(Pulled {
            bytes,
            reference: r.reference,
            digest: r.digest,
            signer,
            from_cache: true,
            evidence: r.evidence,
        })
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::*;
    use crate::remote::cosign::SigningKey;
    use crate::remote::{AutoApprove, DEFAULT_MAX_SIZE};

    /// A signed `file://` source in `dir`, its key's public half written beside it.
    fn signed_source(dir: &Path, bytes: &[u8], key: &SigningKey, name: &str) -> RemoteSpec {
        let file = dir.join(format!("{name}.wasm"));
        std::fs::write(&file, bytes).unwrap();
        let sig = base64::engine::general_purpose::STANDARD.encode(key.sign(bytes).unwrap());
        std::fs::write(dir.join(format!("{name}.wasm.sig")), sig).unwrap();
        let public = dir.join(format!("{name}.pub"));
        std::fs::write(&public, key.public().to_pem()).unwrap();
        RemoteSpec {
            name: name.into(),
            source: Source::File(file),
            pin: None,
            key: Some(public),
            insecure: false,
            ca_file: None,
            max_size: DEFAULT_MAX_SIZE,
            poll_interval: None,
            auto_approve: AutoApprove::default(),
        }
    }

    #[tokio::test]
    async fn what_is_read_back_is_verified_again_and_a_torn_write_is_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (_, key) = SigningKey::generate().unwrap();
        let spec = signed_source(d, b"\0asm component bytes", &key, "drv");
        let pulled = crate::remote::fetch(&spec, &Cache::open(&d.join("c")).unwrap())
            .await
            .unwrap();
        assert!(pulled.signer.is_some() && !pulled.from_cache);
        // A write cut short before its rename: only `tmp/` holds it, and opening clears it.
        std::fs::write(d.join("c/tmp/.tmpHALF"), b"half").unwrap();
        let cache = Cache::open(&d.join("c")).unwrap();
        assert_eq!(std::fs::read_dir(d.join("c/tmp")).unwrap().count(), 0);
        assert!(cache.load(&spec).is_none(), "nothing let in yet");
        cache.store(&spec, &pulled).unwrap();
        let back = cache.load(&spec).unwrap();
        assert!(back.from_cache);
        assert_eq!(
            (back.digest.as_str(), &back.bytes),
            (pulled.digest.as_str(), &pulled.bytes)
        );

        // Another key configured now: the cached version is not signed by it.
        let (_, other) = SigningKey::generate().unwrap();
        std::fs::write(spec.key.as_ref().unwrap(), other.public().to_pem()).unwrap();
        assert!(cache.load(&spec).is_none());
        std::fs::write(spec.key.as_ref().unwrap(), key.public().to_pem()).unwrap();
        // A pin to other bytes, or another source: not this version.
        let pinned = RemoteSpec {
            pin: Some(format!("sha256:{}", "ab".repeat(32))),
            ..spec.clone()
        };
        assert!(cache.load(&pinned).is_none());
        let moved = RemoteSpec {
            source: Source::File(d.join("elsewhere.wasm")),
            ..spec.clone()
        };
        assert!(cache.load(&moved).is_none());
        // The blob changed on disk.
        let blob = cache.blob_path(&pulled.digest).unwrap();
        std::fs::write(&blob, b"\0asm component bytez").unwrap();
        assert!(cache.load(&spec).is_none());
    }
}
