//! The cargo side of a Rust project `component new` writes: the SDK crates vendored with
//! manifests of their own (what they inherit from the guest workspace written out), and a
//! lock with the exact versions the SDKs are built and tested with, so the project builds
//! offline from the crates cargo already holds.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use anyhow::{Context, bail};
use guest_artifacts::sources::{GUEST_LOCK, GUEST_WORKSPACE_MANIFEST, SDK_FILES};
use toml::{Table, Value};

/// The guest workspace manifest's `[workspace]` table.
fn workspace() -> anyhow::Result<Table> {
    let root: Table = GUEST_WORKSPACE_MANIFEST
        .parse()
        .context("guest workspace manifest")?;
    match root.get("workspace") {
        Some(Value::Table(t)) => Ok(t.clone()),
        _ => bail!("the guest workspace manifest has no [workspace]"),
    }
}

fn inherits(v: &Value) -> bool {
    v.as_table()
        .and_then(|t| t.get("workspace"))
        .and_then(Value::as_bool)
        == Some(true)
}

/// `package`'s manifest as a crate of its own under `vendor/`: inherited package keys and
/// dependencies written out, path dependencies pointing at their `vendor/` siblings, and the
/// workspace's lints left out.
pub fn vendored_manifest(package: &str) -> anyhow::Result<String> {
    let text = SDK_FILES
        .iter()
        .find(|f| f.package == package && f.path == "Cargo.toml")
        .with_context(|| format!("no manifest for {package}"))?
        .text;
    let mut manifest: Table = text
        .parse()
        .with_context(|| format!("{package}'s manifest"))?;
    let ws = workspace()?;
    let ws_package = ws
        .get("package")
        .and_then(Value::as_table)
        .cloned()
        .unwrap_or_default();
    let ws_deps = ws
        .get("dependencies")
        .and_then(Value::as_table)
        .cloned()
        .unwrap_or_default();
    if let Some(Value::Table(pkg)) = manifest.get_mut("package") {
        // Where the guest workspace's root is (the hook SDK names it): not in a project.
        pkg.remove("workspace");
        for (key, value) in pkg.iter_mut() {
            if inherits(value) {
                *value = ws_package
                    .get(key)
                    .with_context(|| format!("workspace.package.{key}"))?
                    .clone();
            }
        }
    }
    if let Some(Value::Table(deps)) = manifest.get_mut("dependencies") {
        for (name, value) in deps.iter_mut() {
            if !inherits(value) {
                continue;
            }
            let mut dep = match ws_deps.get(name) {
                Some(Value::String(version)) => {
                    Table::from_iter([("version".to_string(), Value::String(version.clone()))])
                }
                Some(Value::Table(t)) => t.clone(),
                _ => bail!("workspace.dependencies.{name} is missing"),
            };
            if dep.contains_key("path") {
                dep.insert("path".into(), Value::String(format!("../{name}")));
            }
            // Features the member adds to the workspace's.
            if let Some(Value::Array(extra)) = value.as_table().and_then(|t| t.get("features")) {
                let features = dep.entry("features").or_insert(Value::Array(vec![]));
                if let Value::Array(list) = features {
                    list.extend(extra.iter().cloned());
                }
            }
            *value = Value::Table(dep);
        }
    }
    manifest.remove("lints");
    Ok(toml::to_string(&manifest)?)
}

/// A package of a lock file: name, version, and its lock entry.
struct Locked {
    name: String,
    entry: Table,
}

/// The lock of a project `root` (version 0.1.0) depending on `root_deps`, with `vendored`
/// path packages: the guest workspace lock's entries those reach, the vendored ones as the
/// guest workspace locks them.
pub fn lock(root: &str, root_deps: &[&str], vendored: &[&str]) -> anyhow::Result<String> {
    let parsed: Table = GUEST_LOCK.parse().context("guest workspace lock")?;
    let packages: Vec<Locked> = parsed
        .get("package")
        .and_then(Value::as_array)
        .context("lock without packages")?
        .iter()
        .filter_map(|p| p.as_table())
        .map(|t| Locked {
            name: t
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            entry: t.clone(),
        })
        .collect();
    fn version_of(p: &Locked) -> &str {
        p.entry.get("version").and_then(Value::as_str).unwrap_or("")
    }
    // A dependency is written `name` or `name version` (or with its source after that).
    let find = |dep: &str| -> Option<usize> {
        let mut words = dep.split(' ');
        let name = words.next()?;
        let version = words.next();
        packages
            .iter()
            .position(|p| p.name == name && version.is_none_or(|v| version_of(p) == v))
    };
    let mut keep = BTreeSet::new();
    let mut queue: VecDeque<String> = root_deps.iter().map(|s| s.to_string()).collect();
    queue.extend(vendored.iter().map(|s| s.to_string()));
    while let Some(dep) = queue.pop_front() {
        let i = find(&dep).with_context(|| format!("{dep} is not in the guest lock"))?;
        if !keep.insert(i) {
            continue;
        }
        let is_path = !packages[i].entry.contains_key("source");
        if is_path && !vendored.contains(&packages[i].name.as_str()) {
            bail!(
                "{} is a path package that is not vendored",
                packages[i].name
            );
        }
        if let Some(Value::Array(deps)) = packages[i].entry.get("dependencies") {
            queue.extend(deps.iter().filter_map(Value::as_str).map(str::to_string));
        }
    }
    let mut out: BTreeMap<(String, String), Table> = keep
        .into_iter()
        .map(|i| {
            (
                (
                    packages[i].name.clone(),
                    version_of(&packages[i]).to_string(),
                ),
                packages[i].entry.clone(),
            )
        })
        .collect();
    let mut root_entry = Table::new();
    root_entry.insert("name".into(), Value::String(root.into()));
    root_entry.insert("version".into(), Value::String("0.1.0".into()));
    let mut deps: Vec<&str> = root_deps.to_vec();
    deps.sort();
    let deps = deps.into_iter().map(|d| Value::String(d.into())).collect();
    root_entry.insert("dependencies".into(), Value::Array(deps));
    out.insert((root.into(), "0.1.0".into()), root_entry);
    // Written as cargo writes it, so a build leaves the file as it is.
    let mut text = format!(
        "# This file is automatically @generated by Cargo.\n# It is not intended for manual editing.\nversion = {}\n",
        parsed
            .get("version")
            .and_then(Value::as_integer)
            .unwrap_or(4)
    );
    // Cargo names a dependency `name` when the lock holds one package of that name, and
    // adds the version only to tell several apart: the guest workspace may hold two (a
    // fixture's), the project one.
    let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, _) in out.keys() {
        *by_name.entry(name.as_str()).or_default() += 1;
    }
    let written = |dep: &str| -> String {
        let name = dep.split(' ').next().unwrap_or(dep);
        if by_name.get(name).copied() == Some(1) {
            name.to_string()
        } else {
            dep.to_string()
        }
    };
    for entry in out.values() {
        text.push_str("\n[[package]]\n");
        for key in ["name", "version", "source", "checksum"] {
            if let Some(v) = entry.get(key).and_then(Value::as_str) {
                text.push_str(&format!("{key} = {v:?}\n"));
            }
        }
        if let Some(Value::Array(deps)) = entry.get("dependencies") {
            text.push_str("dependencies = [\n");
            for dep in deps.iter().filter_map(Value::as_str) {
                text.push_str(&format!(" {:?},\n", written(dep)));
            }
            text.push_str("]\n");
        }
    }
    Ok(text)
}

/// The SDKs' version (the guest workspace's `package.version`).
pub fn sdk_version() -> String {
    workspace()
        .ok()
        .and_then(|ws| {
            ws.get("package")?
                .get("version")?
                .as_str()
                .map(str::to_string)
        })
        .unwrap_or_else(|| "0.1.0".into())
}
