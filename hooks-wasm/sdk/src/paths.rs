//! A job's paths as a hook with the `task_dir` grant sees them: the task dir is preopened
//! at `/task` and the allocation's shared dir at `/alloc`.

/// Where the host preopens the task dir.
pub const TASK_ROOT: &str = "/task";
/// Where the host preopens the allocation's shared dir.
pub const ALLOC_ROOT: &str = "/alloc";

/// The path inside the sandbox for a job's `path`: relative to the task dir (`task_dir` is
/// its host path), or absolute under the task dir or the shared dir (`alloc_dir`), as
/// `${NOMAD_TASK_DIR}/x` and `${NOMAD_ALLOC_DIR}/x` interpolate. `..` is refused; `.` and
/// empty parts are dropped, so `local/` is the folder `/task/local` (and `""` the task dir).
pub fn sandbox_path(path: &str, task_dir: &str, alloc_dir: &str) -> Result<String, String> {
    let (root, rest) = if let Some(r) = under(path, task_dir) {
        (TASK_ROOT, r)
    } else if let Some(r) = under(path, alloc_dir) {
        (ALLOC_ROOT, r)
    } else if path.starts_with('/') {
        return Err(format!(
            "{path:?} is outside the task dir and the allocation dir"
        ));
    } else {
        (TASK_ROOT, path)
    };
    let mut parts = Vec::new();
    for p in rest.split('/') {
        match p {
            "" | "." => {}
            ".." => return Err(format!("{path:?} climbs out with \"..\"")),
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Ok(root.to_string());
    }
    Ok(format!("{root}/{}", parts.join("/")))
}

/// `path` below `dir` (both host paths), without the leading `/`; `dir` itself is `""`.
fn under<'a>(path: &'a str, dir: &str) -> Option<&'a str> {
    if dir.is_empty() {
        return None;
    }
    let rest = path.strip_prefix(dir.trim_end_matches('/'))?;
    if rest.is_empty() {
        return Some(rest);
    }
    rest.strip_prefix('/')
}

#[cfg(test)]
mod tests {
    use super::sandbox_path;

    #[test]
    fn job_paths_map_into_the_preopens_and_never_out() {
        let (t, a) = ("/data/alloc/1/web", "/data/alloc/1/alloc");
        assert_eq!(
            sandbox_path("local/app.conf", t, a).unwrap(),
            "/task/local/app.conf"
        );
        assert_eq!(sandbox_path("./local//x", t, a).unwrap(), "/task/local/x");
        assert_eq!(sandbox_path("local/", t, a).unwrap(), "/task/local");
        assert_eq!(sandbox_path("/data/alloc/1/web", t, a).unwrap(), "/task");
        assert_eq!(
            sandbox_path("/data/alloc/1/alloc/data/x", t, a).unwrap(),
            "/alloc/data/x"
        );
        assert!(sandbox_path("/data/alloc/1/webx/y", t, a).is_err());
        assert!(sandbox_path("/etc/passwd", t, a).is_err());
        assert!(
            sandbox_path("local/../../x", t, a)
                .unwrap_err()
                .contains("..")
        );
    }
}
