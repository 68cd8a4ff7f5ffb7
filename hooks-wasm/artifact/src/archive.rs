//! Archives, unpacked as go-getter does for Nomad: `tar`, `tar.gz`/`tgz`, `tar.bz2`/`tbz2`,
//! `tar.xz`/`txz`, `zip`, and a single `gz`, `bz2` or `xz` file, recognised by the source's
//! name. Within the client's limits (`decompression_size_limit`,
//! `decompression_file_count_limit`) and never outside the destination.
//!
//! An archive is read twice: first every entry is checked (its path, its kind, a link's
//! target, the file count and the sizes its headers declare), and only when all pass is
//! anything written, so a refused archive leaves nothing behind. While writing, the bytes
//! actually produced are counted again against the size limit (a header may lie).

use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

/// How the bytes are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Bzip2,
    Xz,
}

/// What an artifact's file is, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A tar archive, compressed or not.
    Tar(Compression),
    /// A zip archive.
    Zip,
    /// One compressed file.
    Single(Compression),
}

/// The archive kind of `name` (a file name), and the name without the archive's suffix.
/// Longest suffix first, as go-getter matches them.
pub fn detect(name: &str) -> Option<(Kind, &str)> {
    const SUFFIXES: &[(&str, Kind)] = &[
        (".tar.gz", Kind::Tar(Compression::Gzip)),
        (".tar.bz2", Kind::Tar(Compression::Bzip2)),
        (".tar.xz", Kind::Tar(Compression::Xz)),
        (".tgz", Kind::Tar(Compression::Gzip)),
        (".tbz2", Kind::Tar(Compression::Bzip2)),
        (".txz", Kind::Tar(Compression::Xz)),
        (".tar", Kind::Tar(Compression::None)),
        (".zip", Kind::Zip),
        (".gz", Kind::Single(Compression::Gzip)),
        (".bz2", Kind::Single(Compression::Bzip2)),
        (".xz", Kind::Single(Compression::Xz)),
    ];
    SUFFIXES
        .iter()
        .find(|(s, _)| name.len() > s.len() && name.ends_with(s))
        .map(|(s, k)| (*k, &name[..name.len() - s.len()]))
}

/// The archive kind an `archive` option names (go-getter's `archive=tar.gz`); `false`
/// (handled by the caller) turns unpacking off.
pub fn named(kind: &str) -> Option<Kind> {
    detect(&format!("x.{kind}")).map(|(k, _)| k)
}

/// The client's limits on what unpacking produces.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bytes of all files together.
    pub size: u64,
    /// Entries (files, folders, links).
    pub files: u64,
}

/// What unpacking made: each path with the mode the archive gave it.
pub type Modes = Vec<(PathBuf, u32)>;

/// Makes symbolic links (WASI's `symlink-at` in the sandbox, the OS's in native tests).
pub type MakeLink<'a> = &'a dyn Fn(&str, &Path) -> io::Result<()>;

/// `name` (an entry's path in an archive) as plain relative parts: no absolute path, no
/// `..`; `.` and empty parts dropped. An entry that is nothing but `.` is the root (empty).
fn entry_parts(name: &str) -> Result<Vec<&str>, String> {
    if name.starts_with('/') {
        return Err(format!("entry {name:?} is an absolute path"));
    }
    let mut parts = Vec::new();
    for p in name.split('/') {
        match p {
            "" | "." => {}
            ".." => return Err(format!("entry {name:?} climbs out with \"..\"")),
            p => parts.push(p),
        }
    }
    Ok(parts)
}

/// A link target from entry `parts`: relative, and staying inside the destination once
/// joined to the link's own folder.
fn link_target_ok(parts: &[&str], target: &str, name: &str) -> Result<(), String> {
    if target.starts_with('/') {
        return Err(format!(
            "entry {name:?} is a link to the absolute path {target:?}"
        ));
    }
    // Depth of the link's folder below the destination.
    let mut depth = parts.len().saturating_sub(1) as i64;
    for p in target.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return Err(format!(
                        "entry {name:?} is a link to {target:?}, outside the destination"
                    ));
                }
            }
            _ => depth += 1,
        }
    }
    Ok(())
}

/// Counts entries and bytes against the limits.
struct Budget {
    limits: Limits,
    files: u64,
    bytes: u64,
}

impl Budget {
    fn new(limits: Limits) -> Self {
        Self {
            limits,
            files: 0,
            bytes: 0,
        }
    }

    fn entry(&mut self, size: u64) -> Result<(), String> {
        self.files += 1;
        if self.files > self.limits.files {
            return Err(format!(
                "more than {} entries (decompression_file_count_limit)",
                self.limits.files
            ));
        }
        self.add(size)
    }

    fn add(&mut self, bytes: u64) -> Result<(), String> {
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes > self.limits.size {
            return Err(format!(
                "more than {} bytes unpacked (decompression_size_limit)",
                self.limits.size
            ));
        }
        Ok(())
    }
}

/// Copies `from` into `to`, counting the bytes against `budget`.
fn copy_counted(
    from: &mut dyn Read,
    to: &mut dyn Write,
    budget: &mut Budget,
) -> Result<(), String> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = from.read(&mut buf).map_err(|e| format!("reading: {e}"))?;
        if n == 0 {
            return Ok(());
        }
        budget.add(n as u64)?;
        to.write_all(&buf[..n])
            .map_err(|e| format!("writing: {e}"))?;
    }
}

/// A reader of `path` decompressing `c` (not xz: see [`unxz`]).
fn decompressing(path: &Path, c: Compression) -> Result<Box<dyn Read>, String> {
    let f = BufReader::new(File::open(path).map_err(|e| format!("opening the download: {e}"))?);
    Ok(match c {
        Compression::None => Box::new(f),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(f)),
        Compression::Bzip2 => Box::new(bzip2::read::MultiBzDecoder::new(f)),
        Compression::Xz => unreachable!("xz is decompressed into a file first"),
    })
}

/// Writes at most `left` bytes, then fails: xz's decoder writes rather than reads.
struct Capped<W> {
    inner: W,
    left: u64,
    limit: u64,
}

impl<W: Write> Write for Capped<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() as u64 > self.left {
            return Err(io::Error::other(format!(
                "more than {} bytes unpacked (decompression_size_limit)",
                self.limit
            )));
        }
        self.left -= buf.len() as u64;
        self.inner.write_all(buf)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Decompresses the xz file `from` into `to`, at most `limit` bytes.
fn unxz(from: &Path, to: &Path, limit: u64) -> Result<(), String> {
    let mut input =
        BufReader::new(File::open(from).map_err(|e| format!("opening the download: {e}"))?);
    let out = File::create(to).map_err(|e| format!("creating {}: {e}", to.display()))?;
    let mut capped = Capped {
        inner: io::BufWriter::new(out),
        left: limit,
        limit,
    };
    let r = lzma_rs::xz_decompress(&mut input, &mut capped)
        .map_err(|e| format!("xz: {e}"))
        .and_then(|()| capped.flush().map_err(|e| format!("writing: {e}")));
    if r.is_err() {
        let _ = std::fs::remove_file(to);
    }
    r
}

/// Unpack `archive` (of `kind`) into the folder `dest` (made if missing), or for a single
/// compressed file, into the file `dest`. Returns the modes the archive gave its entries.
pub fn unpack(
    archive: &Path,
    kind: Kind,
    dest: &Path,
    limits: Limits,
    link: MakeLink<'_>,
) -> Result<Modes, String> {
    match kind {
        Kind::Single(c) => {
            let mut budget = Budget::new(limits);
            budget.entry(0)?;
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("creating {}: {e}", parent.display()))?;
            }
            if c == Compression::Xz {
                unxz(archive, dest, limits.size)?;
            } else {
                let mut from = decompressing(archive, c)?;
                let mut out =
                    File::create(dest).map_err(|e| format!("creating {}: {e}", dest.display()))?;
                if let Err(e) = copy_counted(&mut from, &mut out, &mut budget) {
                    drop(out);
                    let _ = std::fs::remove_file(dest);
                    return Err(e);
                }
            }
            Ok(Vec::new())
        }
        Kind::Tar(Compression::Xz) => {
            let plain = archive.with_extension("untarred");
            unxz(archive, &plain, limits.size)?;
            let r = tar_pass(&plain, Compression::None, dest, limits, None)
                .and_then(|_| tar_pass(&plain, Compression::None, dest, limits, Some(link)));
            let _ = std::fs::remove_file(&plain);
            r
        }
        Kind::Tar(c) => {
            tar_pass(archive, c, dest, limits, None)?;
            tar_pass(archive, c, dest, limits, Some(link))
        }
        Kind::Zip => {
            zip_pass(archive, dest, limits, None)?;
            zip_pass(archive, dest, limits, Some(link))
        }
    }
}

/// One pass over a tar archive: checking only (`link` is `None`), or writing.
fn tar_pass(
    archive: &Path,
    c: Compression,
    dest: &Path,
    limits: Limits,
    link: Option<MakeLink<'_>>,
) -> Result<Modes, String> {
    use tar::EntryType;
    let mut budget = Budget::new(limits);
    let mut modes = Vec::new();
    let mut ar = tar::Archive::new(decompressing(archive, c)?);
    if link.is_some() {
        std::fs::create_dir_all(dest).map_err(|e| format!("creating {}: {e}", dest.display()))?;
    }
    let entries = ar
        .entries()
        .map_err(|e| format!("not a tar archive: {e}"))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| format!("reading the archive: {e}"))?;
        let kind = entry.header().entry_type();
        // Metadata of the entries around them (long names, PAX records): no file.
        if matches!(
            kind,
            EntryType::XGlobalHeader
                | EntryType::XHeader
                | EntryType::GNULongName
                | EntryType::GNULongLink
        ) {
            continue;
        }
        let raw = entry.path_bytes();
        let name = String::from_utf8_lossy(&raw).into_owned();
        let parts = entry_parts(&name)?;
        let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
        let size = if kind.is_file() { entry.size() } else { 0 };
        budget.entry(if link.is_none() { size } else { 0 })?;
        let target = entry
            .link_name_bytes()
            .map(|b| String::from_utf8_lossy(&b).into_owned());
        match kind {
            EntryType::Regular
            | EntryType::Continuous
            | EntryType::GNUSparse
            | EntryType::Directory => {}
            EntryType::Symlink => {
                let t = target.as_deref().unwrap_or("");
                link_target_ok(&parts, t, &name)?;
            }
            EntryType::Link => {
                let t = target.as_deref().unwrap_or("");
                entry_parts(t).map_err(|e| format!("entry {name:?} is a hard link: {e}"))?;
            }
            other => {
                return Err(format!(
                    "entry {name:?} is a {other:?}: only files, folders and links are unpacked"
                ));
            }
        }
        let Some(link) = link else { continue };
        let path = parts.iter().fold(dest.to_path_buf(), |p, s| p.join(s));
        if parts.is_empty() {
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("creating {}: {e}", parent.display()))?;
        }
        match kind {
            EntryType::Directory => {
                std::fs::create_dir_all(&path)
                    .map_err(|e| format!("creating {}: {e}", path.display()))?;
                modes.push((path, mode));
            }
            EntryType::Symlink => {
                let _ = std::fs::remove_file(&path);
                link(target.as_deref().unwrap_or(""), &path)
                    .map_err(|e| format!("linking {}: {e}", path.display()))?;
            }
            EntryType::Link => {
                let from = entry_parts(target.as_deref().unwrap_or(""))?
                    .iter()
                    .fold(dest.to_path_buf(), |p, s| p.join(s));
                // A copy: a hard link's target is another entry of this archive.
                let mut src =
                    File::open(&from).map_err(|e| format!("entry {name:?}: its target: {e}"))?;
                let mut out =
                    File::create(&path).map_err(|e| format!("creating {}: {e}", path.display()))?;
                copy_counted(&mut src, &mut out, &mut budget)?;
                modes.push((path, mode));
            }
            _ => {
                let _ = std::fs::remove_file(&path);
                let mut out =
                    File::create(&path).map_err(|e| format!("creating {}: {e}", path.display()))?;
                copy_counted(&mut entry, &mut out, &mut budget)?;
                modes.push((path, mode));
            }
        }
    }
    Ok(modes)
}

/// One pass over a zip archive: checking only (`link` is `None`), or writing.
fn zip_pass(
    archive: &Path,
    dest: &Path,
    limits: Limits,
    link: Option<MakeLink<'_>>,
) -> Result<Modes, String> {
    let f = File::open(archive).map_err(|e| format!("opening the download: {e}"))?;
    let mut zip =
        zip::ZipArchive::new(BufReader::new(f)).map_err(|e| format!("not a zip archive: {e}"))?;
    let mut budget = Budget::new(limits);
    let mut modes = Vec::new();
    if link.is_some() {
        std::fs::create_dir_all(dest).map_err(|e| format!("creating {}: {e}", dest.display()))?;
    }
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| format!("reading the archive: {e}"))?;
        let name = entry
            .name()
            .map_err(|e| format!("entry {i}: its name: {e}"))?
            .into_owned();
        let parts = entry_parts(&name)?;
        let dir = entry.is_dir();
        let symlink = entry.is_symlink();
        let mode = entry.unix_mode().map(|m| m & 0o777);
        budget.entry(if link.is_none() && !dir {
            entry.size()
        } else {
            0
        })?;
        let target = if symlink {
            let mut t = String::new();
            entry
                .by_ref()
                .take(4096)
                .read_to_string(&mut t)
                .map_err(|e| format!("entry {name:?}: {e}"))?;
            link_target_ok(&parts, &t, &name)?;
            Some(t)
        } else {
            None
        };
        let Some(link) = link else { continue };
        if parts.is_empty() {
            continue;
        }
        let path = parts.iter().fold(dest.to_path_buf(), |p, s| p.join(s));
        if dir {
            std::fs::create_dir_all(&path)
                .map_err(|e| format!("creating {}: {e}", path.display()))?;
        } else {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("creating {}: {e}", parent.display()))?;
            }
            let _ = std::fs::remove_file(&path);
            if let Some(t) = &target {
                link(t, &path).map_err(|e| format!("linking {}: {e}", path.display()))?;
                continue;
            }
            let mut out =
                File::create(&path).map_err(|e| format!("creating {}: {e}", path.display()))?;
            copy_counted(&mut entry, &mut out, &mut budget)?;
        }
        if let Some(m) = mode {
            modes.push((path, m));
        }
    }
    Ok(modes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("artifact-hook-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn os_link(target: &str, at: &Path) -> io::Result<()> {
        std::os::unix::fs::symlink(target, at)
    }

    const ROOMY: Limits = Limits {
        size: 1 << 20,
        files: 100,
    };

    /// A tar of `(path, kind, data or link target, mode)`, written with raw headers so
    /// that paths the `tar` builder refuses (`../x`) can be made.
    fn tar_of(entries: &[(&str, char, &str, u32)]) -> Vec<u8> {
        let mut out = Vec::new();
        for &(path, kind, data, mode) in entries {
            let mut h = tar::Header::new_old();
            let name = h.as_old_mut();
            name.name[..path.len()].copy_from_slice(path.as_bytes());
            h.set_mode(mode);
            match kind {
                'f' => {
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_size(data.len() as u64);
                }
                'd' => {
                    h.set_entry_type(tar::EntryType::Directory);
                    h.set_size(0);
                }
                'l' => {
                    h.set_entry_type(tar::EntryType::Symlink);
                    h.set_size(0);
                    h.as_old_mut().linkname[..data.len()].copy_from_slice(data.as_bytes());
                }
                _ => unreachable!(),
            }
            h.set_cksum();
            out.extend_from_slice(h.as_bytes());
            if kind == 'f' {
                out.extend_from_slice(data.as_bytes());
                out.resize(out.len().div_ceil(512) * 512, 0);
            }
        }
        out.resize(out.len() + 1024, 0);
        out
    }

    fn gz(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn suffixes_pick_the_unpacker_longest_first() {
        assert_eq!(
            detect("app.tar.gz"),
            Some((Kind::Tar(Compression::Gzip), "app"))
        );
        assert_eq!(
            detect("app.tgz"),
            Some((Kind::Tar(Compression::Gzip), "app"))
        );
        assert_eq!(
            detect("a.b.tar.xz"),
            Some((Kind::Tar(Compression::Xz), "a.b"))
        );
        assert_eq!(detect("x.zip"), Some((Kind::Zip, "x")));
        assert_eq!(detect("x.gz"), Some((Kind::Single(Compression::Gzip), "x")));
        assert_eq!(detect("app"), None);
        assert_eq!(detect(".gz"), None);
        assert_eq!(named("tar.bz2"), Some(Kind::Tar(Compression::Bzip2)));
        assert_eq!(named("rar"), None);
    }

    #[test]
    fn a_tar_gz_unpacks_with_its_modes_and_links_inside() {
        let d = scratch("ok");
        let ar = d.join("app.tar.gz");
        std::fs::write(
            &ar,
            gz(&tar_of(&[
                ("bin/", 'd', "", 0o755),
                ("bin/app", 'f', "#!/bin/sh\necho hi\n", 0o755),
                ("bin/current", 'l', "app", 0o777),
                ("./etc/conf", 'f', "x=1", 0o600),
            ])),
        )
        .unwrap();
        let out = d.join("out");
        let modes = unpack(&ar, Kind::Tar(Compression::Gzip), &out, ROOMY, &os_link).unwrap();
        assert_eq!(
            std::fs::read_to_string(out.join("bin/app")).unwrap(),
            "#!/bin/sh\necho hi\n"
        );
        assert_eq!(
            std::fs::read_link(out.join("bin/current")).unwrap(),
            Path::new("app")
        );
        assert_eq!(
            std::fs::read_to_string(out.join("etc/conf")).unwrap(),
            "x=1"
        );
        assert!(modes.contains(&(out.join("bin/app"), 0o755)), "{modes:?}");
        assert!(modes.contains(&(out.join("etc/conf"), 0o600)), "{modes:?}");
    }

    #[test]
    fn escaping_entries_are_refused_before_anything_is_written() {
        for (entries, says) in [
            (
                vec![("ok", 'f', "1", 0o644), ("../escape", 'f', "x", 0o644)],
                "\"../escape\" climbs out",
            ),
            (
                vec![("ok", 'f', "1", 0o644), ("/etc/x", 'f', "x", 0o644)],
                "absolute path",
            ),
            (
                vec![("ok", 'f', "1", 0o644), ("a/b", 'l', "../../x", 0o777)],
                "outside the destination",
            ),
            (
                vec![("ok", 'f', "1", 0o644), ("l", 'l', "/etc/shadow", 0o777)],
                "absolute path \"/etc/shadow\"",
            ),
        ] {
            let d = scratch("evil");
            let ar = d.join("evil.tar");
            std::fs::write(&ar, tar_of(&entries)).unwrap();
            let out = d.join("out");
            let e = unpack(&ar, Kind::Tar(Compression::None), &out, ROOMY, &os_link).unwrap_err();
            assert!(e.contains(says), "{e}");
            assert!(!out.exists(), "nothing was written for {entries:?}");
            assert!(!d.join("escape").exists());
        }
    }

    #[test]
    fn limits_on_count_and_size_are_kept_even_when_headers_lie() {
        let d = scratch("limits");
        let ar = d.join("many.tar");
        let names: Vec<String> = (0..5).map(|i| format!("f{i}")).collect();
        let entries: Vec<(&str, char, &str, u32)> = names
            .iter()
            .map(|n| (n.as_str(), 'f', "data", 0o644))
            .collect();
        std::fs::write(&ar, tar_of(&entries)).unwrap();
        let few = Limits {
            size: 1 << 20,
            files: 4,
        };
        let e = unpack(
            &ar,
            Kind::Tar(Compression::None),
            &d.join("o1"),
            few,
            &os_link,
        )
        .unwrap_err();
        assert!(e.contains("decompression_file_count_limit"), "{e}");
        let small = Limits {
            size: 19,
            files: 100,
        };
        let e = unpack(
            &ar,
            Kind::Tar(Compression::None),
            &d.join("o2"),
            small,
            &os_link,
        )
        .unwrap_err();
        assert!(e.contains("decompression_size_limit"), "{e}");

        // A gzip bomb in small: 1 MiB of zeros from a few KiB.
        let single = d.join("zeros.gz");
        std::fs::write(&single, gz(&vec![0u8; 1 << 20])).unwrap();
        let e = unpack(
            &single,
            Kind::Single(Compression::Gzip),
            &d.join("zeros"),
            Limits {
                size: 1000,
                files: 10,
            },
            &os_link,
        )
        .unwrap_err();
        assert!(e.contains("decompression_size_limit"), "{e}");
        assert!(!d.join("zeros").exists());
    }

    #[test]
    fn a_zip_unpacks_and_its_escapes_are_refused() {
        use zip::write::SimpleFileOptions;
        let d = scratch("zip");
        let ok = d.join("ok.zip");
        let mut w = zip::ZipWriter::new(File::create(&ok).unwrap());
        let opts = SimpleFileOptions::default().unix_permissions(0o750);
        w.start_file("dir/run.sh", opts).unwrap();
        w.write_all(b"#!/bin/sh\n").unwrap();
        w.finish().unwrap();
        let out = d.join("out");
        let modes = unpack(&ok, Kind::Zip, &out, ROOMY, &os_link).unwrap();
        assert_eq!(
            std::fs::read(out.join("dir/run.sh")).unwrap(),
            b"#!/bin/sh\n"
        );
        assert_eq!(modes, [(out.join("dir/run.sh"), 0o750)]);

        let evil = d.join("evil.zip");
        let mut w = zip::ZipWriter::new(File::create(&evil).unwrap());
        w.start_file("fine", SimpleFileOptions::default()).unwrap();
        w.start_file("../../escape", SimpleFileOptions::default())
            .unwrap();
        w.write_all(b"x").unwrap();
        w.finish().unwrap();
        let out = d.join("out2");
        let e = unpack(&evil, Kind::Zip, &out, ROOMY, &os_link).unwrap_err();
        assert!(e.contains("climbs out"), "{e}");
        assert!(!out.exists());
    }
}
