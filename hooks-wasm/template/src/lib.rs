//! The `template` hook: renders a task's `template` blocks into its task dir before each
//! start, as Nomad's template hook does, inside the sandbox.
//!
//! ```hcl
//! task "web" {
//!   template {
//!     data        = "port={{ env \"NOMAD_PORT_http\" }}\n"
//!     destination = "local/app.conf"
//!   }
//!   template {
//!     data        = "GREETING=hello from {{ env \"NOMAD_TASK_NAME\" }}"
//!     destination = "secrets/app.env"
//!     env         = true            # also added to the task's environment
//!   }
//! }
//! ```
//!
//! Nomad Variables are read as in Nomad, within what the task's workload identity may read
//! (its job's `nomad/jobs/<job>[/<group>[/<task>]]` and `nomad/jobs`):
//!
//! ```hcl
//! template {
//!   data        = <<EOT
//! {{ with nomadVar "nomad/jobs/web" }}password={{ .password }}{{ else }}no password yet{{ end }}
//! {{ range $k, $v := nomadVar "nomad/jobs/web/g" }}{{ $k }}={{ $v }}
//! {{ end }}{{ range nomadVarList "nomad/jobs" }}{{ .Path }} {{ end }}
//! EOT
//!   destination = "secrets/app.conf"
//! }
//! ```
//!
//! The language is in [`render`] (parsed by [`parse`]). Values come from the task's
//! environment through the host `env` interface and from the host `variables` interface; a
//! variable the task may not read fails the task with the host's answer, which names the
//! path. Files are written through WASI into the task dir (`/task`) or the allocation's
//! shared dir (`/alloc`), which the host preopens only when the operator grants them:
//!
//! ```hcl
//! plugin "template" {
//!   grant {
//!     env       = true
//!     task_dir  = true
//!     variables = true
//!     services  = true
//!   }
//! }
//! ```
//!
//! A destination or source is relative to the task dir, or an absolute path (for example
//! `${NOMAD_ALLOC_DIR}/x`) inside the task or shared dir; `..` is refused. Files are written
//! to a temporary name and renamed, so a task never reads half a file. WASI cannot set a
//! file's mode or owner: the host applies `perms`, `uid` and `gid` once the hook has
//! written. On `update` the templates are rendered again in place (the host calls it when
//! services or variables of the task's namespace change, and applies each changed
//! template's `change_mode`).
//!
//! Besides `with`, `range` and `if`/`else if`/`else`, and `env`, `nomadVar`,
//! `nomadVarList`, `nomadService`, `nomadServices` and `index`, a template calls `eq`, `ne`,
//! `lt`, `le`, `gt`, `ge`, `not`, `and`, `or`, `contains`, `hasPrefix`, `hasSuffix`, `toJSON`, `toJSONPretty`,
//! `split`, `join`, `replaceAll`, `toUpper`, `toLower`, `trimSpace`, `trimPrefix`,
//! `trimSuffix`, `base64Encode`, `base64Decode`, `file` (a file of the task or shared dir,
//! 1 MiB at most), `timestamp` and `printf` (`%s %v %d %q`), with pipelines (`{{ .x |
//! replaceAll "." "_" | toUpper }}`) and parenthesized calls; an unknown function is an
//! error naming it.
//!
//! Nomad-native services come from the host `services` interface (contract 0.1.1, the
//! `services` grant): `{{ range nomadService "web" }}{{ .Address }}:{{ .Port }}{{ end }}`,
//! `nomadService "tag.web"`, `nomadService 2 "key" "web"`, `{{ range nomadServices }}{{ .Name
//! }}{{ end }}`.

mod parse;
mod render;

use std::collections::BTreeMap;

use paddock_hook_sdk::host::{env, log, services, variables};
use paddock_hook_sdk::{
    Hook, HookError, PluginInfo, PrestartRequest, PrestartResponse, TaskInfo, Template,
};

use paddock_hook_sdk::paths::TASK_ROOT;

/// The file inside the sandbox for a job's `path` ([`paddock_hook_sdk::paths::sandbox_path`]),
/// which must name a file, not a folder.
pub fn sandbox_path(path: &str, task_dir: &str, alloc_dir: &str) -> Result<String, String> {
    let inside = paddock_hook_sdk::paths::sandbox_path(path, task_dir, alloc_dir)?;
    if path.ends_with('/') || inside == TASK_ROOT || inside == paddock_hook_sdk::paths::ALLOC_ROOT {
        return Err(format!("{path:?} names a directory, not a file"));
    }
    Ok(inside)
}

/// One template rendered: its sandbox destination, text, and env when it is an env file.
struct Rendered {
    dest: String,
    text: String,
    env: Vec<(String, String)>,
}

fn render_one(
    i: usize,
    t: &Template,
    task_dir: &str,
    alloc_dir: &str,
) -> Result<Rendered, HookError> {
    let name = format!("template[{i}] ({})", t.dest_path);
    let refuse = |m: String| HookError::Refused(format!("{name}: {m}"));
    let interpolate =
        |p: &str| env::interpolate(p).map_err(|e| HookError::Failed(format!("{name}: env: {e:?}")));
    let dest = sandbox_path(&interpolate(&t.dest_path)?, task_dir, alloc_dir).map_err(&refuse)?;
    let source = if t.source_path.is_empty() {
        t.embedded_tmpl.clone()
    } else {
        let src =
            sandbox_path(&interpolate(&t.source_path)?, task_dir, alloc_dir).map_err(&refuse)?;
        std::fs::read_to_string(&src).map_err(|e| {
            HookError::Failed(format!("{name}: reading source {:?}: {e}", t.source_path))
        })?
    };
    let text = render::render(
        &source,
        &t.left_delim,
        &t.right_delim,
        t.err_missing_key,
        &Host {
            task_dir,
            alloc_dir,
        },
    )
    .map_err(|e| refuse(e.to_string()))?;
    let env = if t.envvars {
        render::parse_env(&text).map_err(|e| refuse(format!("env file: {e}")))?
    } else {
        Vec::new()
    };
    Ok(Rendered { dest, text, env })
}

/// Template values from the host: the task's environment, the variables and services it may
/// read, and the files of its task dir and shared dir.
struct Host<'a> {
    task_dir: &'a str,
    alloc_dir: &'a str,
}

/// The most a template may read with `file`.
const MAX_FILE: u64 = 1 << 20;

impl render::Source for Host<'_> {
    fn file(&self, path: &str) -> Result<String, String> {
        use std::io::Read;
        let inside = sandbox_path(path, self.task_dir, self.alloc_dir)?;
        let mut text = String::new();
        std::fs::File::open(&inside)
            .map_err(|e| e.to_string())?
            .take(MAX_FILE + 1)
            .read_to_string(&mut text)
            .map_err(|e| e.to_string())?;
        if text.len() as u64 > MAX_FILE {
            return Err(format!("larger than {} KiB", MAX_FILE >> 10));
        }
        Ok(text)
    }

    fn now_ns(&self) -> i64 {
        paddock_hook_sdk::host::timer::now() as i64
    }

    fn env(&self, name: &str) -> Option<String> {
        env::get(name).ok().flatten()
    }

    fn var(&self, path: &str) -> Result<Option<BTreeMap<String, String>>, String> {
        variables::get(path)
            .map(|items| items.map(|i| i.into_iter().collect()))
            .map_err(host_error)
    }

    fn var_list(&self, prefix: &str) -> Result<Vec<render::VarMeta>, String> {
        Ok(variables::list(prefix)
            .map_err(host_error)?
            .into_iter()
            .map(|m| render::VarMeta {
                namespace: m.namespace,
                path: m.path,
                create_index: m.create_index,
                modify_index: m.modify_index,
                create_time: m.create_time,
                modify_time: m.modify_time,
            })
            .collect())
    }

    fn service(
        &self,
        name: &str,
        tag: Option<&str>,
        choose: Option<&(u32, String)>,
    ) -> Result<Vec<render::Service>, String> {
        let choice = choose.map(|(count, key)| services::Choice {
            count: *count,
            key: key.clone(),
        });
        Ok(services::get(name, tag, choice.as_ref())
            .map_err(host_error)?
            .into_iter()
            .map(|r| render::Service {
                id: r.id,
                service_name: r.service_name,
                namespace: r.namespace,
                node_id: r.node_id,
                datacenter: r.datacenter,
                job_id: r.job_id,
                alloc_id: r.alloc_id,
                tags: r.tags,
                address: r.address,
                port: r.port,
            })
            .collect())
    }

    fn services(&self) -> Result<Vec<render::ServiceStub>, String> {
        Ok(services::list()
            .map_err(host_error)?
            .into_iter()
            .map(|s| render::ServiceStub {
                name: s.name,
                namespace: s.namespace,
                tags: s.tags,
            })
            .collect())
    }
}

/// A host error as a template error's text.
fn host_error(e: paddock_hook_sdk::HostError) -> String {
    use paddock_hook_sdk::HostError as E;
    match e {
        E::Denied(m) => format!("denied: {m}"),
        E::NotFound(m) => format!("not found: {m}"),
        E::Invalid(m) => format!("invalid: {m}"),
        E::Failed(m) => format!("failed: {m}"),
    }
}

/// Write `text` to `dest` atomically; returns whether the content changed.
fn write(dest: &str, text: &str) -> std::io::Result<bool> {
    if std::fs::read_to_string(dest).is_ok_and(|old| old == text) {
        return Ok(false);
    }
    if let Some(parent) = std::path::Path::new(dest).parent() {
        std::fs::create_dir_all(parent)?;
    }
    let tmp = format!("{dest}.paddock-tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, dest)?;
    Ok(true)
}

/// What rendering a task's templates did.
#[derive(Default)]
struct Outcome {
    /// Env of the env templates, in order.
    env: Vec<(String, String)>,
    /// Each destination, and whether its content changed.
    written: Vec<(String, bool)>,
}

/// Render and write every template of `task`.
fn render_all(task: &TaskInfo) -> Result<Outcome, HookError> {
    if task.templates.is_empty() {
        return Ok(Outcome::default());
    }
    if std::fs::metadata(TASK_ROOT).is_err() {
        return Err(HookError::Failed(
            "the task dir is not available to this hook: grant it with `plugin \"template\" { grant { task_dir = true } }`".into(),
        ));
    }
    let alloc_dir = env::get("NOMAD_ALLOC_DIR")
        .ok()
        .flatten()
        .unwrap_or_default();
    let mut env_out = Vec::new();
    let mut written = Vec::new();
    for (i, t) in task.templates.iter().enumerate() {
        let r = render_one(i, t, &task.task_dir, &alloc_dir)?;
        let changed = write(&r.dest, &r.text).map_err(|e| {
            HookError::Failed(format!(
                "template[{i}] ({}): writing {}: {e}",
                t.dest_path, r.dest
            ))
        })?;
        env_out.extend(r.env);
        written.push((r.dest, changed));
    }
    Ok(Outcome {
        env: env_out,
        written,
    })
}

/// The template hook.
pub struct TemplateHook;

impl Hook for TemplateHook {
    fn info() -> PluginInfo {
        PluginInfo::new("template", env!("CARGO_PKG_VERSION"))
    }

    fn prestart(req: PrestartRequest) -> Result<PrestartResponse, HookError> {
        let out = render_all(&req.task)?;
        Ok(PrestartResponse {
            env: out.env,
            state: vec![(
                "rendered".to_string(),
                out.written
                    .into_iter()
                    .map(|(d, _)| d)
                    .collect::<Vec<_>>()
                    .join(","),
            )],
            ..PrestartResponse::default()
        })
    }

    fn update(task: TaskInfo) -> Result<(), HookError> {
        for (dest, changed) in render_all(&task)?.written {
            if changed {
                log::info(&format!("{}: {dest} re-rendered", task.task_name));
            }
        }
        Ok(())
    }
}

paddock_hook_sdk::export_hook!(TemplateHook);

#[cfg(test)]
mod tests {
    use super::sandbox_path;

    #[test]
    fn paths_map_into_the_sandbox() {
        let (t, a) = ("/data/alloc/1/web", "/data/alloc/1/alloc");
        assert_eq!(
            sandbox_path("local/app.conf", t, a).unwrap(),
            "/task/local/app.conf"
        );
        assert_eq!(sandbox_path("./local//x", t, a).unwrap(), "/task/local/x");
        assert_eq!(
            sandbox_path("/data/alloc/1/web/secrets/s", t, a).unwrap(),
            "/task/secrets/s"
        );
        assert_eq!(
            sandbox_path("/data/alloc/1/alloc/data/x", t, a).unwrap(),
            "/alloc/data/x"
        );
    }

    #[test]
    fn escapes_are_refused() {
        let (t, a) = ("/data/alloc/1/web", "/data/alloc/1/alloc");
        assert!(sandbox_path("../other/x", t, a).unwrap_err().contains(".."));
        assert!(sandbox_path("local/../../x", t, a).is_err());
        assert!(
            sandbox_path("/etc/passwd", t, a)
                .unwrap_err()
                .contains("outside")
        );
        assert!(sandbox_path("/data/alloc/1/webx/y", t, a).is_err());
        assert!(sandbox_path("local/", t, a).is_err());
    }
}
