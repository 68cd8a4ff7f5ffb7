//! On-disk cache of compiled components, keyed by the `.wasm`'s sha256 plus the engine's
//! compatibility hash, so an agent restart loads in microseconds instead of recompiling.
//!
//! Entries are written to a temporary name and renamed: a reader never sees half a file,
//! and a file is never rewritten in place (deserialized entries are mmapped). The cache
//! lives in the agent's own data dir: `Component::deserialize_file` trusts its input, so
//! nothing but this module may write there.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Whether a load was served from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum CacheOutcome {
    /// Deserialized from a cached compilation.
    Hit,
    /// Compiled (and stored for next time, when a cache dir is set).
    Miss,
}

/// The compile cache. `dir = None` compiles every time.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: Option<PathBuf>,
    engine_key: String,
}

/// Hex sha256 of a component's bytes: its version identity everywhere in Paddock.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl CompileCache {
    /// A cache in `dir` (created if missing) for `engine`.
    pub fn new(engine: &Engine, dir: Option<PathBuf>) -> std::io::Result<Self> {
        if let Some(d) = &dir {
            std::os::unix::fs::DirBuilderExt::mode(
                std::fs::DirBuilder::new().recursive(true),
                0o700,
            )
            .create(d)?;
            owned_by_us(d)?;
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        Ok(Self {
            dir,
            engine_key: format!("{:016x}", h.finish()),
        })
    }

    /// Whether a compilation of the bytes with this hash is cached.
    pub fn contains(&self, sha: &str) -> bool {
        self.entry_path(sha).is_some_and(|p| p.exists())
    }

    fn entry_path(&self, sha: &str) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{sha}-{}.cwasm", self.engine_key)))
    }

    /// Compile `bytes` (whose hash is `sha`), or load the cached compilation.
    pub fn load(
        &self,
        engine: &Engine,
        sha: &str,
        bytes: &[u8],
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        if let Some(path) = self.entry_path(sha)
            && path.exists()
        {
            // SAFETY: the file was written by `store` below from our own compilation,
            // in a directory only the agent writes; the name binds it to this engine.
            match unsafe { Component::deserialize_file(engine, &path) } {
                Ok(c) => return Ok((c, CacheOutcome::Hit)),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "discarding unusable compile-cache entry");
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        let component = Component::new(engine, bytes)?;
        if let Some(path) = self.entry_path(sha)
            && let Err(e) = store(&path, &component)
        {
            tracing::warn!(path = %path.display(), error = %e, "could not write compile-cache entry");
        }
        Ok((component, CacheOutcome::Miss))
    }
}

/// A cache entry is loaded without validation: the folder must be this process's own,
/// a real folder (not a link) owned by its user that no other user can write.
fn owned_by_us(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(dir)?;
    let euid = rustix::process::geteuid().as_raw();
    let refuse = |why: String| {
        Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "compile cache {}: {why}; compiled code is loaded from it without validation, \
                 so it must be a folder of the agent's own user that no one else can write",
                dir.display()
            ),
        ))
    };
    if !meta.is_dir() {
        return refuse("not a folder (a link is not followed)".into());
    }
    if meta.uid() != euid {
        return refuse(format!("owned by uid {}, not {euid}", meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return refuse(format!(
            "writable by its group or others (mode {:o})",
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

fn store(path: &Path, component: &Component) -> std::io::Result<()> {
    let bytes = component
        .serialize()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let dir = path.parent().expect("cache entries live in a dir");
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, &bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_cache_folder_others_can_write_or_a_link_is_refused() {
        let engine = Engine::default();
        let root = tempfile::tempdir().unwrap();
        let ours = root.path().join("ours");
        assert!(CompileCache::new(&engine, Some(ours.clone())).is_ok());

        let open = root.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = CompileCache::new(&engine, Some(open)).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(err.to_string().contains("mode 777"), "{err}");

        let link = root.path().join("link");
        std::os::unix::fs::symlink(&ours, &link).unwrap();
        let err = CompileCache::new(&engine, Some(link)).unwrap_err();
        assert!(err.to_string().contains("not a folder"), "{err}");
    }
}
