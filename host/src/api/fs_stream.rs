//! `GET /v1/client/fs/stream/{alloc}?path=&offset=&origin=&follow=&plain=`: one file of an
//! allocation as Nomad's `StreamFrame`s (`{"Offset", "Data" (base64), "File"}`), from
//! `offset` bytes after the start (`origin=start`, the default) or before the end
//! (`origin=end`). With `follow` (the default, as in Nomad) the stream stays open and sends
//! what is appended, an empty frame `{}` as a heartbeat while nothing is, a frame with
//! `"FileEvent": "file truncated"` when the file shrinks (then reads it again from its
//! start) and one with `"FileEvent": "file deleted"` when it is removed (which ends the
//! stream). A missing file or a directory is a 400, as Nomad answers.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::fs::{alloc_root, frame, resolve};
use super::routes::Routes;
use super::{ApiError, AppState};
use crate::acl::check::{Need, NsFrom};

/// How often a followed file is looked at.
const POLL: Duration = Duration::from_millis(250);

/// Heartbeat period while nothing is appended (Nomad's stream heartbeat).
const HEARTBEAT: Duration = Duration::from_secs(10);

/// Largest frame of data.
const CHUNK: usize = 64 * 1024;

pub(super) fn routes() -> Routes {
    Routes::new().on("GET", "/v1/client/fs/stream/{alloc}", stream, |a| {
        Need::Ns(&["read-fs"], NsFrom::Alloc(a.param("alloc")))
    })
}

#[derive(Debug, Deserialize)]
struct StreamQuery {
    path: Option<String>,
    #[serde(default)]
    offset: i64,
    origin: Option<String>,
    #[serde(default = "yes", deserialize_with = "super::go_bool")]
    follow: bool,
    #[serde(default, deserialize_with = "super::go_bool")]
    plain: bool,
}

fn yes() -> bool {
    true
}

/// Where a followed file's reading stands.
struct Cursor {
    path: PathBuf,
    name: String,
    pos: u64,
    plain: bool,
    idle: Duration,
    ended: bool,
}

impl Cursor {
    /// The next chunk of the stream, or `None` at its end.
    async fn next(&mut self, follow: bool) -> Option<Vec<u8>> {
        if self.ended {
            return None;
        }
        loop {
            let len = match std::fs::symlink_metadata(&self.path) {
                Ok(m) => m.len(),
                Err(_) => {
                    self.ended = true;
                    return (!self.plain).then(|| self.event("file deleted"));
                }
            };
            if len < self.pos {
                self.pos = 0;
                if !self.plain {
                    return Some(self.event("file truncated"));
                }
            }
            if len > self.pos {
                let data = self.read(len);
                if !data.is_empty() {
                    self.idle = Duration::ZERO;
                    self.pos += data.len() as u64;
                    return Some(if self.plain {
                        data
                    } else {
                        frame(&self.name, &data, self.pos)
                    });
                }
            }
            if !follow {
                self.ended = true;
                return None;
            }
            tokio::time::sleep(POLL).await;
            self.idle += POLL;
            if self.idle >= HEARTBEAT {
                self.idle = Duration::ZERO;
                if !self.plain {
                    return Some(b"{}".to_vec());
                }
            }
        }
    }

    fn read(&self, len: u64) -> Vec<u8> {
        let want = (len - self.pos).min(CHUNK as u64) as usize;
        let mut buf = vec![0; want];
        let n = super::fs::open_resolved(&self.path)
            .and_then(|mut f| {
                f.seek(SeekFrom::Start(self.pos))?;
                f.read(&mut buf)
            })
            .unwrap_or(0);
        buf.truncate(n);
        buf
    }

    fn event(&self, what: &str) -> Vec<u8> {
        serde_json::to_vec(&json!({ "Offset": self.pos, "File": self.name, "FileEvent": what }))
            .expect("frames serialize")
    }
}

async fn stream(
    State(agent): State<AppState>,
    UrlPath(id): UrlPath<String>,
    Query(q): Query<StreamQuery>,
) -> Result<Response, ApiError> {
    let (root, _) = alloc_root(&agent, &id)?;
    let name = q
        .path
        .clone()
        .filter(|p| !p.is_empty())
        .ok_or_else(|| ApiError::bad_request("path: missing required parameter"))?;
    let path = resolve(&root, &name).map_err(|e| match e.0 {
        axum::http::StatusCode::NOT_FOUND => {
            ApiError::bad_request(format!("path {name:?}: no such file in the allocation"))
        }
        _ => e,
    })?;
    let meta = std::fs::symlink_metadata(&path)
        .map_err(|e| ApiError::bad_request(format!("path {name:?}: {e}")))?;
    if meta.is_dir() {
        return Err(ApiError::bad_request(format!(
            "path {name:?} is a directory, not a file"
        )));
    }
    let origin = q.origin.as_deref().unwrap_or("start");
    let pos = match origin {
        "start" => q.offset.max(0) as u64,
        "end" => meta.len().saturating_sub(q.offset.max(0) as u64),
        other => {
            return Err(ApiError::bad_request(format!(
                "origin: expected start or end, found {other:?}"
            )));
        }
    }
    .min(meta.len());
    let cursor = Cursor {
        path,
        name,
        pos,
        plain: q.plain,
        idle: Duration::ZERO,
        ended: false,
    };
    let follow = q.follow;
    let body = futures::stream::unfold(cursor, move |mut c| async move {
        c.next(follow)
            .await
            .map(|chunk| (Ok::<_, std::io::Error>(chunk), c))
    });
    let content_type = if q.plain {
        "text/plain; charset=utf-8"
    } else {
        "application/json"
    };
    Ok((
        [(header::CONTENT_TYPE, content_type)],
        Body::from_stream(body),
    )
        .into_response())
}
