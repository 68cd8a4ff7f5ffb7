//! `/v1/client/fs/*`: an allocation's files and task logs, as Nomad's client serves them.
//!
//! Paths are relative to the allocation dir (`/` is its root, so `alloc/logs` and
//! `/web/local` both work). A path with `..`, or one that resolves (through symlinks) to
//! anywhere outside the allocation dir, is refused with 400 before anything is opened.
//!
//! Logs read the task's rotated files (`alloc/logs/<task>.<type>.<n>`) as one stream, from
//! `offset` bytes after the start (`origin=start`) or before the end (`origin=end`); as
//! plain text (`plain=true`) or as Nomad's framed JSON (`{"Offset", "Data" (base64),
//! "File"}` objects back to back); with `follow=true` the stream stays open, sending new
//! output as it is written, until the task is dead and everything was sent.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::Deserialize;
use serde_json::json;

use super::routes::Routes;
use super::{ApiError, AppState, with_index};
use crate::acl::check::{Need, NsFrom};
use crate::acl::routes::NeedFn;

pub(super) fn routes() -> Routes {
    // `client/fs_endpoint.go`: logs need `read-logs | read-fs`, the rest `read-fs`, in the
    // allocation's namespace.
    let read_fs: NeedFn = |a| Need::Ns(&["read-fs"], NsFrom::Alloc(a.param("alloc")));
    Routes::new()
        .on("GET", "/v1/client/fs/logs/{alloc}", logs, |a| {
            Need::Ns(&["read-logs", "read-fs"], NsFrom::Alloc(a.param("alloc")))
        })
        .on("GET", "/v1/client/fs/ls/{alloc}", ls, read_fs)
        .on("GET", "/v1/client/fs/stat/{alloc}", stat, read_fs)
        .on("GET", "/v1/client/fs/cat/{alloc}", cat, read_fs)
        .on("GET", "/v1/client/fs/readat/{alloc}", readat, read_fs)
}

/// Largest chunk read or framed at once.
const CHUNK: usize = 64 * 1024;

#[derive(Debug, Deserialize)]
struct PathQuery {
    path: Option<String>,
    offset: Option<u64>,
    limit: Option<u64>,
}

/// The allocation's dir (404 for an unknown allocation; a unique id prefix works too).
pub(super) fn alloc_root(
    agent: &AppState,
    id: &str,
) -> Result<(PathBuf, crate::structs::Allocation), ApiError> {
    let alloc = agent
        .allocation(id)
        .or_else(|| {
            let matches = agent.visit_allocations(|a| a.id.starts_with(id).then(|| a.clone()));
            (matches.len() == 1 && !id.is_empty()).then(|| matches.into_iter().next().unwrap())
        })
        .ok_or_else(|| ApiError::not_found(format!("alloc {id:?} not found")))?;
    let root = agent.alloc_root().join(&alloc.id);
    if alloc.is_terminal() && !root.exists() {
        // Ended and collected by the client's garbage collection: its record stays, its
        // files are gone (Nomad's client no longer knows the allocation either).
        return Err(ApiError::not_found(format!(
            "Unknown allocation {:?}",
            alloc.id
        )));
    }
    Ok((root, alloc))
}

/// [`alloc_root`], waiting (10 s at most) for the dir of an allocation that is placed but
/// whose runner has not built its dir yet (its start is queued behind others): the answer
/// is about to exist, so it is not a 404.
pub(super) async fn built_alloc_root(
    agent: &AppState,
    id: &str,
) -> Result<(PathBuf, crate::structs::Allocation), ApiError> {
    let (root, alloc) = alloc_root(agent, id)?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !root.exists()
        && !alloc.is_terminal()
        && std::time::Instant::now() < deadline
        && agent
            .allocation(&alloc.id)
            .is_some_and(|a| !a.is_terminal())
    {
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    Ok((root, alloc))
}

/// Open the file at `canonical` (a path [`resolve`] gave, holding no link) without
/// following a link on any step: one swapped in since the check is an error, not a way out.
pub(super) fn open_resolved(canonical: &Path) -> std::io::Result<std::fs::File> {
    crate::safefs::Beneath::open(Path::new("/"))?.open_file(
        canonical,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NONBLOCK,
        0,
    )
}

/// `path` inside `root`, refusing anything that leaves it.
pub(super) fn resolve(root: &Path, path: &str) -> Result<PathBuf, ApiError> {
    let rel = Path::new(path.trim_start_matches('/'));
    for c in rel.components() {
        if matches!(
            c,
            Component::ParentDir | Component::Prefix(_) | Component::RootDir
        ) {
            return Err(ApiError::bad_request(format!(
                "path {path:?} escapes the allocation directory"
            )));
        }
    }
    let full = root.join(rel);
    let canon_root = root
        .canonicalize()
        .map_err(|e| ApiError::not_found(format!("allocation directory: {e}")))?;
    let canon = full.canonicalize().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            ApiError::not_found(format!("{path:?}: no such file or directory"))
        }
        _ => ApiError::internal(format!("{path:?}: {e}")),
    })?;
    if !canon.starts_with(&canon_root) {
        return Err(ApiError::bad_request(format!(
            "path {path:?} escapes the allocation directory"
        )));
    }
    Ok(canon)
}

fn file_info(name: String, meta: &std::fs::Metadata) -> serde_json::Value {
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode();
    let mut s = String::with_capacity(10);
    s.push(if meta.is_dir() {
        'd'
    } else if meta.file_type().is_symlink() {
        'L'
    } else {
        '-'
    });
    for shift in [6, 3, 0] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    json!({
        "Name": name,
        "IsDir": meta.is_dir(),
        "Size": meta.len(),
        "FileMode": s,
        "ModTime": meta.modified().map(crate::util::rfc3339).unwrap_or_default(),
    })
}

/// A folder of allocation `id`'s dir as the file browser of the UI shows it: each
/// entry's `file_info`, by name; the same checks as `/v1/client/fs/ls`.
pub(crate) async fn list_for_ui(
    agent: &AppState,
    id: &str,
    path: &str,
) -> Result<Vec<serde_json::Value>, ApiError> {
    let (root, _) = built_alloc_root(agent, id).await?;
    let dir = resolve(&root, path)?;
    let rd = std::fs::read_dir(&dir)
        .map_err(|e| ApiError::bad_request(format!("cannot list {path:?}: {e}")))?;
    let mut out: Vec<serde_json::Value> = rd
        .flatten()
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            Some(file_info(
                e.file_name().to_string_lossy().into_owned(),
                &meta,
            ))
        })
        .collect();
    out.sort_by(|a, b| a["Name"].as_str().cmp(&b["Name"].as_str()));
    Ok(out)
}

/// What a path of allocation `id`'s dir is (its `file_info` with `ContentType`) and, for
/// a file, its first `limit` bytes, read without following a link: for the UI.
pub(crate) async fn head_for_ui(
    agent: &AppState,
    id: &str,
    path: &str,
    limit: u64,
) -> Result<(serde_json::Value, Vec<u8>), ApiError> {
    let (root, _) = built_alloc_root(agent, id).await?;
    let full = resolve(&root, path)?;
    let meta = std::fs::symlink_metadata(&full)
        .map_err(|e| ApiError::not_found(format!("{path:?}: {e}")))?;
    let name = full
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let head = if meta.is_file() {
        let mut buf = Vec::new();
        open_resolved(&full)
            .and_then(|f| f.take(limit).read_to_end(&mut buf))
            .map_err(|e| ApiError::bad_request(format!("cannot read {path:?}: {e}")))?;
        buf
    } else {
        Vec::new()
    };
    let mut info = file_info(name, &meta);
    let sniff = meta.is_file().then(|| &head[..head.len().min(512)]);
    info["ContentType"] = json!(super::content_type::detect(path, sniff));
    Ok((info, head))
}

async fn ls(
    State(agent): State<AppState>,
    UrlPath(id): UrlPath<String>,
    Query(q): Query<PathQuery>,
) -> Result<Response, ApiError> {
    let (root, _) = built_alloc_root(&agent, &id).await?;
    let dir = resolve(&root, q.path.as_deref().unwrap_or("/"))?;
    let rd = std::fs::read_dir(&dir).map_err(|e| {
        ApiError::bad_request(format!(
            "cannot list {:?}: {e}",
            q.path.as_deref().unwrap_or("/")
        ))
    })?;
    let mut out = Vec::new();
    for e in rd.flatten() {
        if let Ok(meta) = e.metadata() {
            out.push(file_info(
                e.file_name().to_string_lossy().into_owned(),
                &meta,
            ));
        }
    }
    out.sort_by(|a, b| a["Name"].as_str().cmp(&b["Name"].as_str()));
    Ok(with_index(agent.index(), &out))
}

async fn stat(
    State(agent): State<AppState>,
    UrlPath(id): UrlPath<String>,
    Query(q): Query<PathQuery>,
) -> Result<Response, ApiError> {
    let (root, _) = built_alloc_root(&agent, &id).await?;
    let path = q.path.as_deref().unwrap_or("/");
    let full = resolve(&root, path)?;
    let meta = std::fs::symlink_metadata(&full)
        .map_err(|e| ApiError::internal(format!("{path:?}: {e}")))?;
    let name = full
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The first 512 bytes, read through the same no-link open as a read (a link is not
    // followed, so its content type is not sniffed).
    let head = meta.is_file().then(|| {
        let mut buf = Vec::with_capacity(512);
        open_resolved(&full)
            .and_then(|f| f.take(512).read_to_end(&mut buf))
            .map(|_| buf)
            .unwrap_or_default()
    });
    let mut info = file_info(name, &meta);
    info["ContentType"] = json!(super::content_type::detect(path, head.as_deref()));
    Ok(with_index(agent.index(), &info))
}

fn read_range(
    full: &Path,
    path: &str,
    offset: u64,
    limit: Option<u64>,
) -> Result<Vec<u8>, ApiError> {
    let mut f = open_resolved(full)
        .map_err(|e| ApiError::bad_request(format!("cannot read {path:?}: {e}")))?;
    if f.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(ApiError::bad_request(format!("{path:?} is a directory")));
    }
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| ApiError::bad_request(format!("{path:?}: {e}")))?;
    let mut buf = Vec::new();
    match limit {
        Some(n) => f.take(n).read_to_end(&mut buf),
        None => f.read_to_end(&mut buf),
    }
    .map_err(|e| ApiError::internal(format!("{path:?}: {e}")))?;
    Ok(buf)
}

/// `cat` is `readat` of the whole file, as text.
async fn cat(
    State(agent): State<AppState>,
    UrlPath(id): UrlPath<String>,
    Query(q): Query<PathQuery>,
) -> Result<Response, ApiError> {
    let data = read_requested(&agent, &id, &q, 0, None)?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], data).into_response())
}

async fn readat(
    State(agent): State<AppState>,
    UrlPath(id): UrlPath<String>,
    Query(q): Query<PathQuery>,
) -> Result<Response, ApiError> {
    let data = read_requested(&agent, &id, &q, q.offset.unwrap_or(0), q.limit)?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], data).into_response())
}

/// The bytes of the file `?path=` names (required) in allocation `id`, from `offset`.
fn read_requested(
    agent: &AppState,
    id: &str,
    q: &PathQuery,
    offset: u64,
    limit: Option<u64>,
) -> Result<Vec<u8>, ApiError> {
    let (root, _) = alloc_root(agent, id)?;
    let path = q
        .path
        .as_deref()
        .ok_or_else(|| ApiError::bad_request("path: missing required parameter"))?;
    read_range(&resolve(&root, path)?, path, offset, limit)
}

#[derive(Debug, Deserialize)]
struct LogsQuery {
    task: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default, deserialize_with = "super::go_bool")]
    follow: bool,
    #[serde(default, deserialize_with = "super::go_bool")]
    plain: bool,
    offset: Option<i64>,
    origin: Option<String>,
}

/// The allocation's log folder, opened beneath its dir without following a link (a task
/// owns `alloc/logs` and may leave links there).
fn logs_dir(root: &Path) -> Option<std::os::fd::OwnedFd> {
    crate::safefs::Beneath::open(root)
        .and_then(|b| b.dir(Path::new("alloc/logs")))
        .ok()
}

/// The task's log files of one type, oldest first: (index, file name, size). Only regular
/// files count: a link named like a log file is not the task's log.
fn log_files(root: &Path, task: &str, kind: &str) -> Vec<(u32, String, u64)> {
    let prefix = format!("{task}.{kind}.");
    let Some(dir) = logs_dir(root) else {
        return Vec::new();
    };
    let mut files: Vec<(u32, String, u64)> = crate::safefs::files(&dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(name, size)| {
            let name = name.into_string().ok()?;
            let n = name.strip_prefix(&prefix)?.parse::<u32>().ok()?;
            Some((n, name, size))
        })
        .collect();
    files.sort_by_key(|f| f.0);
    files
}

/// Open log file `name` for reading, in the log folder, never through a link.
fn open_log(root: &Path, name: &str) -> Option<std::fs::File> {
    let dir = logs_dir(root)?;
    crate::safefs::open_in(
        &dir,
        std::ffi::OsStr::new(name),
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NONBLOCK,
        rustix::fs::Mode::empty(),
    )
    .ok()
    .map(Into::into)
}

/// Where the log stream is: the file index and the offset in it.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    index: u32,
    offset: u64,
}

/// Read what is there past `cur`; moves `cur`. Returns (file name, data, end offset) chunks.
fn read_new(root: &Path, task: &str, kind: &str, cur: &mut Cursor) -> Vec<(String, Vec<u8>, u64)> {
    let mut out = Vec::new();
    let files = log_files(root, task, kind);
    // Rotated away while we were behind: go on from the oldest kept file.
    if let Some(first) = files.first()
        && first.0 > cur.index
    {
        *cur = Cursor {
            index: first.0,
            offset: 0,
        };
    }
    let from = cur.index;
    for (n, path, size) in files.iter().filter(|f| f.0 >= from) {
        if *n > cur.index {
            *cur = Cursor {
                index: *n,
                offset: 0,
            };
        }
        if *size <= cur.offset {
            continue;
        }
        let Some(mut f) = open_log(root, path) else {
            continue;
        };
        if f.seek(SeekFrom::Start(cur.offset)).is_err() {
            continue;
        }
        loop {
            let mut buf = vec![0u8; CHUNK];
            let got = match f.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(g) => g,
            };
            buf.truncate(got);
            cur.offset += got as u64;
            let name = format!("alloc/logs/{path}");
            out.push((name, buf, cur.offset));
        }
    }
    out
}

/// The cursor `offset` bytes after the start or before the end of all files.
fn start_cursor(root: &Path, task: &str, kind: &str, origin: &str, offset: i64) -> Cursor {
    let files = log_files(root, task, kind);
    let total: u64 = files.iter().map(|f| f.2).sum();
    let want = match origin {
        "end" => total.saturating_sub(offset.max(0) as u64),
        _ => (offset.max(0) as u64).min(total),
    };
    let mut acc = 0;
    for (n, _, size) in &files {
        if want < acc + size {
            return Cursor {
                index: *n,
                offset: want - acc,
            };
        }
        acc += size;
    }
    match files.last() {
        Some((n, _, size)) => Cursor {
            index: *n,
            offset: *size,
        },
        None => Cursor {
            index: 0,
            offset: 0,
        },
    }
}

pub(super) fn frame(file: &str, data: &[u8], offset: u64) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "Offset": offset,
        "Data": base64::engine::general_purpose::STANDARD.encode(data),
        "File": file,
    }))
    .expect("frames serialize")
}

async fn logs(
    State(agent): State<AppState>,
    UrlPath(id): UrlPath<String>,
    Query(q): Query<LogsQuery>,
) -> Result<Response, ApiError> {
    let (root, alloc) = alloc_root(&agent, &id)?;
    let (task, kind, origin) = logs_target(&q, &alloc)?;
    let mut cur = start_cursor(&root, &task, &kind, &origin, q.offset.unwrap_or(0));
    let content_type = if q.plain {
        "text/plain; charset=utf-8"
    } else {
        "application/json"
    };
    let plain = q.plain;
    let encode = move |chunks: Vec<(String, Vec<u8>, u64)>| -> Vec<u8> {
        let mut out = Vec::new();
        for (file, data, end) in chunks {
            if plain {
                out.extend_from_slice(&data);
            } else {
                out.extend_from_slice(&frame(&file, &data, end));
            }
        }
        out
    };
    if !q.follow {
        let body = encode(read_new(&root, &task, &kind, &mut cur));
        return Ok(([(header::CONTENT_TYPE, content_type)], body).into_response());
    }
    // Follow: poll for new output until the task is dead and drained.
    let stream = futures::stream::unfold(
        (agent, root, task, kind, cur, alloc.id, false),
        move |(agent, root, task, kind, mut cur, alloc_id, done)| {
            let encode = encode;
            async move {
                if done {
                    return None;
                }
                loop {
                    let dead = agent
                        .allocation(&alloc_id)
                        .and_then(|a| {
                            a.task_states
                                .get(&task)
                                .map(|s| s.state == crate::structs::TaskRunState::Dead)
                        })
                        .unwrap_or(true);
                    let chunks = read_new(&root, &task, &kind, &mut cur);
                    if !chunks.is_empty() {
                        let bytes = encode(chunks);
                        return Some((
                            Ok::<_, std::io::Error>(bytes),
                            (agent, root, task, kind, cur, alloc_id, false),
                        ));
                    }
                    if dead {
                        return None;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        },
    );
    Ok((
        [(header::CONTENT_TYPE, content_type)],
        Body::from_stream(stream),
    )
        .into_response())
}

/// The task, stream (`stdout`, `stderr`) and origin (`start`, `end`) a logs request names,
/// each checked: a task the allocation does not have is a 404, a missing or unknown
/// parameter a 400 naming it.
fn logs_target(
    q: &LogsQuery,
    alloc: &crate::structs::Allocation,
) -> Result<(String, String, String), ApiError> {
    let task = q
        .task
        .clone()
        .ok_or_else(|| ApiError::bad_request("task: missing required parameter"))?;
    if alloc
        .job
        .group(&alloc.task_group)
        .is_none_or(|g| !g.tasks.iter().any(|t| t.name == task))
    {
        return Err(ApiError::not_found(format!(
            "task {task:?} is not in allocation {}",
            alloc.id
        )));
    }
    let kind = q.kind.clone().unwrap_or_default();
    if kind != "stdout" && kind != "stderr" {
        return Err(ApiError::bad_request(format!(
            "type: expected stdout or stderr, found {kind:?}"
        )));
    }
    let origin = q.origin.clone().unwrap_or_else(|| "start".into());
    if origin != "start" && origin != "end" {
        return Err(ApiError::bad_request(format!(
            "origin: expected start or end, found {origin:?}"
        )));
    }
    Ok((task, kind, origin))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_allocation_dir() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("a1");
        std::fs::create_dir_all(root.join("alloc/logs")).unwrap();
        std::fs::write(root.join("alloc/logs/t.stdout.0"), "x").unwrap();
        std::fs::write(dir.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), root.join("alloc/link")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("alloc/etc")).unwrap();
        assert!(resolve(&root, "/alloc/logs/t.stdout.0").is_ok());
        assert!(resolve(&root, "alloc/logs").is_ok());
        for bad in [
            "../secret",
            "alloc/../../secret",
            "alloc/link",
            "alloc/etc/passwd",
        ] {
            let e = resolve(&root, bad).unwrap_err();
            assert_eq!(e.0, axum::http::StatusCode::BAD_REQUEST, "{bad}: {e:?}");
            assert!(e.1.contains("escapes"), "{bad}: {}", e.1);
        }
        assert_eq!(
            resolve(&root, "nope").unwrap_err().0,
            axum::http::StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn the_log_stream_spans_rotated_files_from_either_end() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("alloc/logs")).unwrap();
        std::fs::write(root.join("alloc/logs/t.stdout.1"), "abcde").unwrap();
        std::fs::write(root.join("alloc/logs/t.stdout.2"), "fgh").unwrap();
        let all = |mut c: Cursor| -> String {
            read_new(root, "t", "stdout", &mut c)
                .into_iter()
                .map(|(_, d, _)| String::from_utf8(d).unwrap())
                .collect()
        };
        assert_eq!(
            all(start_cursor(root, "t", "stdout", "start", 0)),
            "abcdefgh"
        );
        assert_eq!(all(start_cursor(root, "t", "stdout", "start", 3)), "defgh");
        assert_eq!(all(start_cursor(root, "t", "stdout", "end", 4)), "efgh");
        assert_eq!(
            all(start_cursor(root, "t", "stdout", "end", 100)),
            "abcdefgh"
        );
        assert_eq!(all(start_cursor(root, "t", "stdout", "end", 0)), "");
    }
}
