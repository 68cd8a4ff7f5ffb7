//! The `artifact` hook: fetches a task's `artifact` blocks into its task dir before it
//! starts, as Nomad's artifact hook does with go-getter, inside the sandbox: the only
//! network it reaches is what its `network` grant names, checked by the host on every
//! request, and the only files it writes are the task's (`task_dir` grant).
//!
//! ```hcl
//! task "web" {
//!   artifact {
//!     source      = "https://releases.example.com/web-1.2.tar.gz"
//!     destination = "local/web"
//!     options { checksum = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" }
//!     headers { Authorization = "Bearer ${NOMAD_META_token}" }
//!   }
//! }
//! ```
//!
//! - `source`: `http://` or `https://` (S3, GCS, git and the rest are third-party hooks':
//!   this one says so). go-getter's query options (`?checksum=…`, `?archive=false`) are
//!   taken out of the URL as options. Redirects are followed (ten at most); headers go to
//!   the first host only.
//! - `options { checksum = "md5|sha1|sha256|sha512:<hex>" }`: the download is hashed as it
//!   arrives; a mismatch deletes it and fails the task naming both digests.
//! - Archives, by the file's name or `options { archive = "tar.gz" }` (`"false"` turns
//!   unpacking off): tar, tar.gz/tgz, tar.bz2/tbz2, tar.xz/txz, zip, and a single gz, bz2 or
//!   xz file, within `decompression_size_limit` and `decompression_file_count_limit`.
//!   Every entry is checked before anything is written: an absolute path, `..`, a link
//!   leading out of the destination, a device node or a FIFO refuses the whole archive.
//!   Entries keep their permission bits (set by the host: WASI cannot).
//! - `mode`: `any` (an archive unpacks into `destination`, a file lands in it under its
//!   name), `dir` (the same), `file` (`destination` is the file; a compressed single file
//!   is decompressed into it).
//!
//! Prestart answers `done` once every artifact is in place, so a restart fetches nothing
//! again. The plugin config (the agent's `client { artifact { … } }`):
//! `decompression_size_limit` and `http_max_size` (bytes), `decompression_file_count_limit`,
//! `http_read_timeout_ns`.

mod archive;
mod checksum;
mod fetch;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use paddock_hook_sdk::host::{artifacts, config, log};
use paddock_hook_sdk::paths::sandbox_path;
use paddock_hook_sdk::{
    Hook, HookError, HostError, LogLevel, PluginInfo, PrestartRequest, PrestartResponse,
};

/// The operator's settings, with Nomad's client defaults.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Config {
    /// Bytes all of an archive's files may take, unpacked (Nomad: 100 GB).
    decompression_size_limit: u64,
    /// Entries an archive may hold (Nomad: 4096).
    decompression_file_count_limit: u64,
    /// Bytes a download may take (Nomad: 100 GB).
    http_max_size: u64,
    /// Longest wait for the next bytes of a response, ns (Nomad: 30 minutes).
    http_read_timeout_ns: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            decompression_size_limit: 100_000_000_000,
            decompression_file_count_limit: 4096,
            http_max_size: 100_000_000_000,
            http_read_timeout_ns: 30 * 60 * 1_000_000_000,
        }
    }
}

/// Options this hook reads; others (an S3 getter's keys, say) are logged as unused.
const KNOWN_OPTIONS: &[&str] = &["checksum", "archive", "filename"];

struct ArtifactHook;

fn host_error(e: HostError) -> String {
    match e {
        HostError::Denied(m) => format!("denied by the host: {m}"),
        HostError::NotFound(m) | HostError::Invalid(m) | HostError::Failed(m) => m,
    }
}

impl Hook for ArtifactHook {
    fn info() -> PluginInfo {
        PluginInfo::new("artifact", env!("CARGO_PKG_VERSION"))
    }

    fn prestart(req: PrestartRequest) -> Result<PrestartResponse, HookError> {
        let list = artifacts::list().map_err(|e| HookError::Failed(host_error(e)))?;
        if list.is_empty() {
            return Ok(PrestartResponse {
                done: true,
                ..Default::default()
            });
        }
        let config: Config =
            paddock_hook_sdk::config::parse_checked(&config::raw(), |c: &Config, k| {
                k.field(
                    "decompression_size_limit",
                    c.decompression_size_limit > 0,
                    "must be > 0",
                );
                k.field(
                    "decompression_file_count_limit",
                    c.decompression_file_count_limit > 0,
                    "must be > 0",
                );
                k.field("http_max_size", c.http_max_size > 0, "must be > 0");
            })?;
        let task_dir = req.task.task_dir.clone();
        // Nomad's layout: the shared dir `alloc` beside the task's own.
        let alloc_dir = Path::new(&task_dir)
            .parent()
            .map(|p| p.join("alloc").display().to_string())
            .unwrap_or_default();
        for (i, a) in list.iter().enumerate() {
            let spec = Spec {
                index: i,
                source: &a.source,
                destination: &a.destination,
                mode: &a.mode,
                options: a.options.iter().cloned().collect(),
                headers: a.headers.iter().cloned().collect(),
            };
            fetch_one(&spec, &config, &task_dir, &alloc_dir, &SandboxFs)
                .map_err(|e| HookError::Failed(format!("artifact[{i}] ({}): {e}", a.source)))?;
        }
        Ok(PrestartResponse {
            done: true,
            ..Default::default()
        })
    }
}

/// One artifact block, its maps as maps.
struct Spec<'a> {
    index: usize,
    source: &'a str,
    destination: &'a str,
    mode: &'a str,
    options: BTreeMap<String, String>,
    headers: BTreeMap<String, String>,
}

/// What the hook asks of the host besides plain file I/O (a trait, so the native tests can
/// stand in for it).
trait Fs {
    /// Download `url` into `sink`.
    fn get(
        &self,
        url: &fetch::Url,
        req: &fetch::Request<'_>,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), String>;
    /// Set the permission bits of `path`.
    fn set_mode(&self, path: &Path, mode: u32) -> Result<(), String>;
    /// Make a symbolic link at `at` to `target`.
    fn symlink(&self, target: &str, at: &Path) -> std::io::Result<()>;
}

/// The real host: `wasi:http`, the `artifacts` interface and `wasi:filesystem`.
struct SandboxFs;

impl Fs for SandboxFs {
    fn get(
        &self,
        url: &fetch::Url,
        req: &fetch::Request<'_>,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        fetch::get(url, req, sink)
    }

    fn set_mode(&self, path: &Path, mode: u32) -> Result<(), String> {
        artifacts::set_mode(&path.display().to_string(), mode).map_err(host_error)
    }

    #[cfg(target_arch = "wasm32")]
    fn symlink(&self, target: &str, at: &Path) -> std::io::Result<()> {
        let at = at.display().to_string();
        for (dir, name) in wasi::filesystem::preopens::get_directories() {
            if let Some(rest) = at.strip_prefix(&name).and_then(|r| r.strip_prefix('/')) {
                return dir
                    .symlink_at(target, rest)
                    .map_err(|e| std::io::Error::other(format!("{e:?}")));
            }
        }
        Err(std::io::Error::other(format!(
            "{at}: not in the task's folders"
        )))
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn symlink(&self, target: &str, at: &Path) -> std::io::Result<()> {
        std::os::unix::fs::symlink(target, at)
    }
}

/// Fetch one artifact into place.
fn fetch_one(
    a: &Spec<'_>,
    config: &Config,
    task_dir: &str,
    alloc_dir: &str,
    fs: &dyn Fs,
) -> Result<(), String> {
    let dest = PathBuf::from(
        sandbox_path(a.destination, task_dir, alloc_dir)
            .map_err(|e| format!("destination: {e}"))?,
    );
    place(a, config, dest, fs)
}

/// Fetch one artifact to `dest` (its destination inside the sandbox).
fn place(a: &Spec<'_>, config: &Config, dest: PathBuf, fs: &dyn Fs) -> Result<(), String> {
    let mut options = a.options.clone();
    let url = fetch::parse(a.source, &mut options)?;
    for k in options
        .keys()
        .filter(|k| !KNOWN_OPTIONS.contains(&k.as_str()))
    {
        log::write(
            LogLevel::Warn,
            &format!(
                "artifact[{}] ({}): option {k:?} means nothing to an http(s) source; not used",
                a.index, a.source
            ),
        );
    }
    let expected = options
        .get("checksum")
        .map(|c| checksum::Expected::parse(c))
        .transpose()?;
    let name = options
        .get("filename")
        .cloned()
        .unwrap_or_else(|| url.file_name().to_string());
    let archive = match options.get("archive").map(String::as_str) {
        Some("false") => None,
        None | Some("") | Some("true") => archive::detect(&name).map(|(k, _)| k),
        Some(kind) => Some(archive::named(kind).ok_or_else(|| {
            format!("options.archive {kind:?}: not an archive type this hook unpacks (tar, tar.gz, tgz, tar.bz2, tar.xz, zip, gz, bz2, xz, or false)")
        })?),
    };
    // Where the bytes go: the file itself, or a folder the archive unpacks into. The
    // download waits beside the destination (in its parent folder; in the destination
    // itself when that is the top of the task or shared dir), so that a refused archive
    // leaves not even an empty folder.
    let file_mode = a.mode == "file";
    let single = matches!(archive, Some(archive::Kind::Single(_)));
    let beside = |p: &Path| match p.parent() {
        Some(parent) if parent != Path::new("/") => parent.to_path_buf(),
        _ => p.to_path_buf(),
    };
    let final_file = if file_mode {
        Some(dest.clone())
    } else if archive.is_none() || single {
        let plain = match archive::detect(&name) {
            Some((archive::Kind::Single(_), stem)) if single => stem.to_string(),
            _ => name.clone(),
        };
        if plain.is_empty() || plain == "." || plain == ".." {
            return Err(format!(
                "the URL names no file to save; give options {{ filename = \"…\" }} or mode = \"file\""
            ));
        }
        Some(dest.join(plain))
    } else {
        None
    };
    let folder = beside(final_file.as_deref().unwrap_or(&dest));
    if file_mode && matches!(archive, Some(archive::Kind::Tar(_) | archive::Kind::Zip)) {
        return Err(format!(
            "mode \"file\" cannot hold the archive {name:?}; use mode \"any\" or \"dir\", or options {{ archive = \"false\" }}"
        ));
    }
    std::fs::create_dir_all(&folder).map_err(|e| format!("creating {}: {e}", folder.display()))?;
    let download = folder.join(format!(".paddock-artifact-{}.part", a.index));
    let result = download_to(&url, a, config, &download, expected.as_ref(), fs).and_then(|()| {
        let limits = archive::Limits {
            size: config.decompression_size_limit,
            files: config.decompression_file_count_limit,
        };
        let link = |t: &str, at: &Path| fs.symlink(t, at);
        match (archive, &final_file) {
            (Some(kind), target) => {
                let into = target.clone().unwrap_or_else(|| dest.clone());
                let modes = archive::unpack(&download, kind, &into, limits, &link)?;
                for (path, mode) in modes {
                    fs.set_mode(&path, mode)?;
                }
                Ok(())
            }
            (None, Some(file)) => {
                if let Some(parent) = file.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| format!("creating {}: {e}", parent.display()))?;
                }
                std::fs::rename(&download, file)
                    .map_err(|e| format!("moving the download to {}: {e}", file.display()))
            }
            (None, None) => unreachable!("a file without an archive always has a name"),
        }
    });
    let _ = std::fs::remove_file(&download);
    result
}

/// GET `url` into the file `to`, hashing as it arrives; a checksum mismatch, a failed
/// download or a failed write deletes the file.
fn download_to(
    url: &fetch::Url,
    a: &Spec<'_>,
    config: &Config,
    to: &Path,
    expected: Option<&checksum::Expected>,
    fs: &dyn Fs,
) -> Result<(), String> {
    let mut file =
        std::fs::File::create(to).map_err(|e| format!("creating {}: {e}", to.display()))?;
    let mut hasher = expected.map(|e| e.hasher());
    let req = fetch::Request {
        headers: &a.headers,
        read_timeout_ns: config.http_read_timeout_ns,
        max_size: config.http_max_size,
    };
    let r = fs.get(url, &req, &mut |chunk| {
        if let Some(h) = hasher.as_mut() {
            h.update(chunk);
        }
        file.write_all(chunk)
            .map_err(|e| format!("writing {}: {e}", to.display()))
    });
    let r = r.and_then(|()| file.flush().map_err(|e| format!("writing: {e}")));
    drop(file);
    let r = r.and_then(|()| match (expected, hasher) {
        (Some(e), Some(h)) => {
            let got = h.finish();
            if got == e.hex {
                Ok(())
            } else {
                Err(format!(
                    "checksum mismatch: expected {e}, got {}:{got}; the download was deleted",
                    e.kind
                ))
            }
        }
        _ => Ok(()),
    });
    if r.is_err() {
        let _ = std::fs::remove_file(to);
    }
    r
}

paddock_hook_sdk::export_hook!(ArtifactHook);

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Serves fixed bytes for any URL and records modes; the files are real (a scratch dir
    /// stands for `/task`).
    struct FakeFs {
        body: Vec<u8>,
        modes: RefCell<Vec<(PathBuf, u32)>>,
    }

    impl Fs for FakeFs {
        fn get(
            &self,
            _: &fetch::Url,
            _: &fetch::Request<'_>,
            sink: &mut dyn FnMut(&[u8]) -> Result<(), String>,
        ) -> Result<(), String> {
            for c in self.body.chunks(7) {
                sink(c)?;
            }
            Ok(())
        }
        fn set_mode(&self, path: &Path, mode: u32) -> Result<(), String> {
            self.modes.borrow_mut().push((path.to_path_buf(), mode));
            Ok(())
        }
        fn symlink(&self, target: &str, at: &Path) -> std::io::Result<()> {
            std::os::unix::fs::symlink(target, at)
        }
    }

    fn scratch(name: &str) -> String {
        let d = std::env::temp_dir().join(format!("artifact-lib-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d.display().to_string()
    }

    fn spec<'a>(
        source: &'a str,
        destination: &'a str,
        mode: &'a str,
        checksum: Option<&str>,
    ) -> Spec<'a> {
        Spec {
            index: 0,
            source,
            destination,
            mode,
            options: checksum
                .map(|c| [("checksum".to_string(), c.to_string())].into())
                .unwrap_or_default(),
            headers: BTreeMap::new(),
        }
    }

    #[test]
    fn a_plain_file_lands_under_its_name_and_a_bad_checksum_leaves_nothing() {
        // A scratch dir stands for the sandbox's destination.
        let dir = scratch("plain");
        let fs = FakeFs {
            body: b"abc".to_vec(),
            modes: RefCell::default(),
        };
        let sha = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        let ok = format!("sha256:{sha}");
        let dest = format!("{dir}/local");
        place(
            &spec("http://h/files/app.txt", "local/", "any", Some(&ok)),
            &Config::default(),
            dest.clone().into(),
            &fs,
        )
        .unwrap();
        assert_eq!(
            std::fs::read(format!("{dir}/local/app.txt")).unwrap(),
            b"abc"
        );

        let bad = format!("sha256:{}", "0".repeat(64));
        let e = place(
            &spec("http://h/files/other.txt", "local/", "any", Some(&bad)),
            &Config::default(),
            dest.into(),
            &fs,
        )
        .unwrap_err();
        assert!(e.contains(&bad) && e.contains(sha), "{e}");
        let left: Vec<_> = std::fs::read_dir(format!("{dir}/local"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left, ["app.txt"], "no part file and no other.txt");
    }

    #[test]
    fn file_mode_decompresses_a_single_gz_and_refuses_a_tarball() {
        let dir = scratch("file");
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(b"config=1\n").unwrap();
        let fs = FakeFs {
            body: e.finish().unwrap(),
            modes: RefCell::default(),
        };
        let dest = format!("{dir}/local/app.conf");
        let conf = spec("https://h/app.conf.gz", "local/app.conf", "file", None);
        place(&conf, &Config::default(), dest.clone().into(), &fs).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"config=1\n");
        let tgz = spec("https://h/app.tar.gz", "local/app.conf", "file", None);
        let e = place(&tgz, &Config::default(), dest.into(), &fs).unwrap_err();
        assert!(e.contains("mode \"file\""), "{e}");
    }
}
