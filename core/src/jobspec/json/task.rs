//! A task and its `template` and `artifact` blocks.

use serde_json::{Map, Value};

use super::R;
use super::obj::{Obj, kind};
use crate::jobspec::*;

/// A task's blocks nothing here acts on, kept as given (see the job's).
const KEPT_TASK: &[&str] = &[
    "Constraints",
    "Affinities",
    "Services",
    "Vault",
    "Consul",
    "CSIPluginConfig",
    "Identity",
    "Identities",
    "Actions",
    "ScalingPolicies",
    "Kind",
    "Schedule",
];

pub(super) fn task_from_value(path: &str, v: &Value, group_restart: &RestartPolicy) -> R<Task> {
    let mut o = Obj::new(path.into(), v)?;
    let name = o.required_string("Name")?;
    if let Err(m) = names::task_name(&name) {
        return Err(JobspecError::new(format!("{path}.Name"), m));
    }
    let driver = o.required_string("Driver")?;
    let user = o.string("User")?.unwrap_or_default();
    let config = match o.get("Config") {
        None => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Err(JobspecError::new(
                format!("{path}.Config"),
                format!("expected an object, found {}", kind(other)),
            ));
        }
    };
    let env = o.string_map("Env")?;
    let meta = o.string_map("Meta")?;
    let resources = resources_from(o.object("Resources")?)?;
    let restart_policy = restart_from(o.object("RestartPolicy")?, group_restart)?;
    let kill_timeout = o.uint("KillTimeout", u64::MAX)?.unwrap_or(5_000_000_000);
    let kill_signal = o.string("KillSignal")?.unwrap_or_default();
    if !kill_signal.is_empty() && crate::util::signal_number(&kill_signal).is_none() {
        return Err(JobspecError::new(
            format!("{path}.KillSignal"),
            format!("unknown signal {kill_signal:?}"),
        ));
    }
    let log_config = log_config_from(o.object("LogConfig")?)?;
    let lifecycle = lifecycle_from(o.object("Lifecycle")?)?;
    let leader = o.boolean("Leader")?.unwrap_or(false);
    let shutdown_delay = o.uint("ShutdownDelay", u64::MAX)?.unwrap_or(0);
    let templates = templates_from(&mut o, path)?;
    let artifacts = artifacts_from(&mut o, path)?;
    let volume_mounts = volume_mounts_from(&mut o, path)?;
    let secrets = secrets_from(&mut o, path)?;
    let dispatch_payload = dispatch_payload_from(o.object("DispatchPayload")?)?;
    let kept = o.kept(KEPT_TASK);
    o.finish(&[])?;
    Ok(Task {
        name,
        driver,
        user,
        config,
        env,
        meta,
        resources,
        restart_policy,
        kill_timeout,
        kill_signal,
        log_config,
        lifecycle,
        leader,
        shutdown_delay,
        templates,
        artifacts,
        volume_mounts,
        secrets,
        dispatch_payload,
        kept,
    })
}

/// A task's `Resources`, with Nomad's defaults (100 MHz, 300 MB).
fn resources_from(o: Option<Obj<'_>>) -> R<Resources> {
    Ok(match o {
        None => Resources {
            cpu: 100,
            memory_mb: 300,
            memory_max_mb: 0,
            disk_mb: 0,
            cores: 0,
            devices: Vec::new(),
            kept: Kept::new(),
        },
        Some(mut r) => {
            let rpath = r.path.clone();
            let cores = r.u32("Cores")?.unwrap_or(0);
            // Nomad's defaults: 100 MHz unless whole cores are asked for instead.
            let cpu = r.u32("CPU")?.unwrap_or(if cores > 0 { 0 } else { 100 });
            if cores > 0 && cpu > 0 {
                return Err(JobspecError::new(
                    format!("{rpath}.Cores"),
                    "a task asks for either CPU or Cores, not both",
                ));
            }
            let memory_mb = r.u32("MemoryMB")?.unwrap_or(300);
            let memory_max_mb = r.u32("MemoryMaxMB")?.unwrap_or(0);
            let disk_mb = r.u32("DiskMB")?.unwrap_or(0);
            if memory_max_mb != 0 && memory_max_mb < memory_mb {
                return Err(JobspecError::new(
                    format!("{rpath}.MemoryMaxMB"),
                    "must not be below MemoryMB",
                ));
            }
            let mut devices = Vec::new();
            for (i, d) in r.array("Devices")?.into_iter().enumerate() {
                devices.push(super::device::request_from(
                    format!("{rpath}.Devices[{i}]"),
                    d,
                )?);
            }
            let kept = r.kept(&["IOPS", "Networks", "NUMA", "SecretsMB"]);
            r.finish(&[])?;
            Resources {
                cpu,
                cores,
                memory_mb,
                memory_max_mb,
                disk_mb,
                devices,
                kept,
            }
        }
    })
}

/// A task's `LogConfig` (at least one file of at least 1 MB).
fn log_config_from(o: Option<Obj<'_>>) -> R<LogConfig> {
    Ok(match o {
        None => LogConfig::default(),
        Some(mut l) => {
            let c = LogConfig {
                max_files: l.u32("MaxFiles")?.unwrap_or(10).max(1),
                max_file_size_mb: l.u32("MaxFileSizeMB")?.unwrap_or(10).max(1),
                kept: l.kept(&["Disabled"]),
            };
            // `Enabled` is the older name of `!Disabled`: logs are kept, as asked.
            l.finish(&["Enabled"])?;
            c
        }
    })
}

/// A task's `Lifecycle`: a prestart, poststart or poststop hook, maybe a sidecar.
fn lifecycle_from(o: Option<Obj<'_>>) -> R<Option<Lifecycle>> {
    Ok(match o {
        None => None,
        Some(mut l) => {
            let lpath = l.path.clone();
            let hook = l.required_string("Hook")?;
            if !matches!(hook.as_str(), "prestart" | "poststart" | "poststop") {
                return Err(JobspecError::new(
                    format!("{lpath}.Hook"),
                    format!("expected prestart, poststart or poststop, found {hook:?}"),
                ));
            }
            let sidecar = l.boolean("Sidecar")?.unwrap_or(false);
            l.finish(&[])?;
            Some(Lifecycle { hook, sidecar })
        }
    })
}

/// Where a dispatched job's payload is written: a path inside the task's `local/`.
fn dispatch_payload_from(o: Option<Obj<'_>>) -> R<Option<DispatchPayloadConfig>> {
    Ok(match o {
        None => None,
        Some(mut d) => {
            let dpath = d.path.clone();
            let file = d.string("File")?.unwrap_or_default();
            d.finish(&[])?;
            if file.contains("..") || file.starts_with('/') {
                return Err(JobspecError::new(
                    format!("{dpath}.File"),
                    "must be a path inside the task's local/ dir",
                ));
            }
            (!file.is_empty()).then_some(DispatchPayloadConfig { file })
        }
    })
}

/// A task's `Templates`, with Nomad's defaults and checks.
fn templates_from(o: &mut Obj<'_>, path: &str) -> R<Vec<Template>> {
    let mut out = Vec::new();
    for (i, v) in o.array("Templates")?.into_iter().enumerate() {
        let tpath = format!("{path}.Templates[{i}]");
        let mut t = Obj::new(tpath.clone(), v)?;
        let source_path = t.string("SourcePath")?.unwrap_or_default();
        let embedded_tmpl = t.string("EmbeddedTmpl")?.unwrap_or_default();
        let dest_path = t.required_string("DestPath")?;
        if source_path.is_empty() == embedded_tmpl.is_empty() {
            return Err(JobspecError::new(
                format!("{tpath}.EmbeddedTmpl"),
                "a template needs exactly one of `data` (EmbeddedTmpl) and `source` (SourcePath)",
            ));
        }
        let change_mode = t.string("ChangeMode")?.unwrap_or_else(|| "restart".into());
        if !matches!(
            change_mode.as_str(),
            "restart" | "signal" | "noop" | "script"
        ) {
            return Err(JobspecError::new(
                format!("{tpath}.ChangeMode"),
                format!("expected restart, signal, noop or script, found {change_mode:?}"),
            ));
        }
        let change_signal = t.string("ChangeSignal")?.unwrap_or_default();
        if change_mode == "signal" && crate::util::signal_number(&change_signal).is_none() {
            return Err(JobspecError::new(
                format!("{tpath}.ChangeSignal"),
                format!("change_mode \"signal\" needs a known signal, found {change_signal:?}"),
            ));
        }
        let perms = t.string("Perms")?.unwrap_or_else(|| "0644".into());
        if u32::from_str_radix(&perms, 8).map_or(true, |m| m > 0o7777) {
            return Err(JobspecError::new(
                format!("{tpath}.Perms"),
                format!("expected an octal file mode such as \"0644\", found {perms:?}"),
            ));
        }
        let left_delim = t
            .string("LeftDelim")?
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| "{{".into());
        let right_delim = t
            .string("RightDelim")?
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| "}}".into());
        let envvars = t.boolean("Envvars")?.unwrap_or(false);
        let err_missing_key = t.boolean("ErrMissingKey")?.unwrap_or(false);
        let kept = t.kept(&[
            "Splay",
            "Wait",
            "Uid",
            "Gid",
            "Once",
            "VaultGrace",
            "ChangeScript",
        ]);
        t.finish(&[])?;
        out.push(Template {
            source_path,
            dest_path,
            embedded_tmpl,
            change_mode,
            change_signal,
            perms,
            left_delim,
            right_delim,
            envvars,
            err_missing_key,
            kept,
        });
    }
    Ok(out)
}

/// A task's `Artifacts`, with Nomad's defaults (`any`, `local/`) and its checks: a source,
/// a known mode, a destination that stays in the allocation, a checksum of a known type
/// and length.
fn artifacts_from(o: &mut Obj<'_>, path: &str) -> R<Vec<TaskArtifact>> {
    let mut out = Vec::new();
    for (i, v) in o.array("Artifacts")?.into_iter().enumerate() {
        let apath = format!("{path}.Artifacts[{i}]");
        let mut a = Obj::new(apath.clone(), v)?;
        let getter_source = a.required_string("GetterSource")?;
        if getter_source.trim().is_empty() {
            return Err(JobspecError::new(
                format!("{apath}.GetterSource"),
                "an artifact needs a source",
            ));
        }
        let getter_options = a.string_map("GetterOptions")?;
        let getter_headers = a.string_map("GetterHeaders")?;
        let getter_mode = a
            .string("GetterMode")?
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| "any".into());
        if !matches!(getter_mode.as_str(), "any" | "file" | "dir") {
            return Err(JobspecError::new(
                format!("{apath}.GetterMode"),
                format!("expected any, file or dir, found {getter_mode:?}"),
            ));
        }
        let relative_dest = a
            .string("RelativeDest")?
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| "local/".into());
        if let Err(m) = artifact_destination(&relative_dest) {
            return Err(JobspecError::new(format!("{apath}.RelativeDest"), m));
        }
        if let Some(c) = getter_options.get("checksum")
            && let Err(m) = artifact_checksum(c)
        {
            return Err(JobspecError::new(
                format!("{apath}.GetterOptions.checksum"),
                m,
            ));
        }
        let kept = a.kept(&["GetterInsecure", "Chown"]);
        a.finish(&[])?;
        out.push(TaskArtifact {
            getter_source,
            getter_options,
            getter_headers,
            getter_mode,
            relative_dest,
            kept,
        });
    }
    Ok(out)
}

/// A task's `VolumeMounts`: each names a group volume (checked with the group) and a
/// destination without `..`.
fn volume_mounts_from(o: &mut Obj<'_>, path: &str) -> R<Vec<VolumeMount>> {
    let mut out = Vec::new();
    for (i, v) in o.array("VolumeMounts")?.into_iter().enumerate() {
        let mpath = format!("{path}.VolumeMounts[{i}]");
        let mut m = Obj::new(mpath.clone(), v)?;
        let volume = m.required_string("Volume")?;
        let destination = m.required_string("Destination")?;
        if destination.is_empty() || destination.split('/').any(|p| p == "..") {
            return Err(JobspecError::new(
                format!("{mpath}.Destination"),
                format!("expected a path inside the task without \"..\", found {destination:?}"),
            ));
        }
        let read_only = m.boolean("ReadOnly")?.unwrap_or(false);
        let propagation_mode = m
            .string("PropagationMode")?
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "private".into());
        if !matches!(
            propagation_mode.as_str(),
            "private" | "host-to-task" | "bidirectional"
        ) {
            return Err(JobspecError::new(
                format!("{mpath}.PropagationMode"),
                format!(
                    "expected private, host-to-task or bidirectional, found {propagation_mode:?}"
                ),
            ));
        }
        let kept = m.kept(&["SELinuxLabel"]);
        m.finish(&[])?;
        out.push(VolumeMount {
            volume,
            destination,
            read_only,
            propagation_mode,
            kept,
        });
    }
    Ok(out)
}

/// A task's `Secrets`: a name fit for `${secret.NAME.KEY}` (letters, digits, `_`, `-`),
/// once each, a provider and a path.
fn secrets_from(o: &mut Obj<'_>, path: &str) -> R<Vec<TaskSecret>> {
    let mut out: Vec<TaskSecret> = Vec::new();
    for (i, v) in o.array("Secrets")?.into_iter().enumerate() {
        let spath = format!("{path}.Secrets[{i}]");
        let mut s = Obj::new(spath.clone(), v)?;
        let name = s.required_string("Name")?;
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(JobspecError::new(
                format!("{spath}.Name"),
                format!(
                    "expected letters, digits, \"_\" or \"-\" (it is read as ${{secret.NAME.KEY}}), found {name:?}"
                ),
            ));
        }
        if out.iter().any(|o| o.name == name) {
            return Err(JobspecError::new(
                format!("{spath}.Name"),
                format!("a second secret named {name:?}"),
            ));
        }
        let provider = s.required_string("Provider")?;
        let spath_path = s.required_string("Path")?;
        if provider.is_empty() || spath_path.is_empty() {
            return Err(JobspecError::new(
                format!(
                    "{spath}.{}",
                    if provider.is_empty() {
                        "Provider"
                    } else {
                        "Path"
                    }
                ),
                "a secret needs a provider and a path",
            ));
        }
        let config = match s.get("Config") {
            None => serde_json::Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(other) => {
                return Err(JobspecError::new(
                    format!("{spath}.Config"),
                    format!("expected an object, found {}", kind(other)),
                ));
            }
        };
        let kept = s.kept(&["Env"]);
        s.finish(&[])?;
        out.push(TaskSecret {
            name,
            provider,
            path: spath_path,
            config,
            kept,
        });
    }
    Ok(out)
}

/// An artifact's destination: relative to the task dir (or under `${NOMAD_ALLOC_DIR}` or
/// `${NOMAD_TASK_DIR}`, which interpolate into it), never climbing out with `..`.
fn artifact_destination(dest: &str) -> Result<(), String> {
    let rest = ["${NOMAD_TASK_DIR}", "${NOMAD_ALLOC_DIR}"]
        .iter()
        .find_map(|p| dest.strip_prefix(p))
        .unwrap_or(dest);
    if rest.starts_with('/') && rest.len() == dest.len() {
        return Err(format!(
            "{dest:?} is an absolute path: a destination is relative to the task dir"
        ));
    }
    if rest.split('/').any(|p| p == "..") {
        return Err(format!("{dest:?} climbs out of the task dir with \"..\""));
    }
    Ok(())
}

/// A `checksum` option: `type:hex` with a type Nomad's getter knows and its digest's length.
pub(crate) fn artifact_checksum(c: &str) -> Result<(), String> {
    let Some((kind, hex)) = c.split_once(':') else {
        return Err(format!("expected \"<type>:<hex digest>\", found {c:?}"));
    };
    let len = match kind {
        "md5" => 32,
        "sha1" => 40,
        "sha256" => 64,
        "sha512" => 128,
        other => {
            return Err(format!(
                "unknown checksum type {other:?} (md5, sha1, sha256 or sha512)"
            ));
        }
    };
    // `${…}` is interpolated at the client; only a literal digest is checked here.
    if !hex.contains("${") && (hex.len() != len || !hex.bytes().all(|b| b.is_ascii_hexdigit())) {
        return Err(format!(
            "a {kind} checksum is {len} hex digits, found {hex:?}"
        ));
    }
    Ok(())
}

/// A `RestartPolicy` object over `base` (the group's policy for a task, the job type's
/// default for a group).
pub(super) fn restart_from(o: Option<Obj<'_>>, base: &RestartPolicy) -> R<RestartPolicy> {
    let Some(mut o) = o else {
        return Ok(base.clone());
    };
    let path = o.path.clone();
    let mut p = base.clone();
    if let Some(v) = o.u32("Attempts")? {
        p.attempts = v;
    }
    if let Some(v) = o.uint("Interval", u64::MAX)? {
        p.interval = v;
    }
    if let Some(v) = o.uint("Delay", u64::MAX)? {
        p.delay = v;
    }
    match o.string("Mode")?.as_deref() {
        None => {}
        Some("fail") => p.mode = RestartMode::Fail,
        Some("delay") => p.mode = RestartMode::Delay,
        Some(m) => {
            return Err(JobspecError::new(
                format!("{path}.Mode"),
                format!("expected \"fail\" or \"delay\", found {m:?}"),
            ));
        }
    }
    p.kept.extend(o.kept(&["RenderTemplates"]));
    o.finish(&[])?;
    Ok(p)
}
