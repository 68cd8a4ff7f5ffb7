//! `agent component new`: a ready plugin project in `./NAME` for one world and language: a
//! minimal working implementation, the contract (the SDK vendored for Rust, the WIT for the
//! others), the build command, a short README and a test. Everything it writes comes from
//! this binary, so it works with no Paddock checkout; the files are written into a
//! temporary folder beside `./NAME` and moved there at the end, so a failure leaves nothing.

mod cargo;

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use guest_artifacts::sources::{SDK_FILES, WIT};

/// The world a new plugin exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum World {
    /// A task driver (`paddock:plugin/driver`).
    Driver,
    /// A task-runner hook (`paddock:plugin/hook`).
    Hook,
    /// A device plugin (`paddock:plugin/device-plugin`).
    DevicePlugin,
    /// A service check (`paddock:plugin/check`, contract 0.1.1; Rust only).
    Check,
    /// A secret provider (`paddock:plugin/secret-provider`, contract 0.1.2; Rust only).
    SecretProvider,
}

/// The language a new plugin is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// Rust with the Paddock SDK, built with cargo for `wasm32-wasip2`.
    Rust,
    /// Python, built with componentize-py.
    Python,
    /// JavaScript, built with jco and componentize-js.
    Js,
}

/// What differs between worlds in a project's text.
struct WorldText {
    /// The world's name in the WIT.
    wit: &'static str,
    /// What a reader calls it.
    text: &'static str,
    /// The Rust SDK's package.
    sdk: &'static str,
    /// How to run it in an agent.
    run: &'static str,
    /// Where its state lives, as the README says it.
    state: &'static str,
}

fn world_text(world: World) -> WorldText {
    match world {
        World::Driver => WorldText {
            wit: "driver",
            text: "task driver",
            sdk: "paddock-driver-sdk",
            run: "Run it: put the `.wasm` in a folder, start `agent run --dev --components \
                  FOLDER`, and give a job's task `driver = \"__NAME__\"` and\n\
                  `config { seconds = 5, exit_code = 0 }`.",
            state: "a task's state lives in the handle `start` returns",
        },
        World::Hook => WorldText {
            wit: "hook",
            text: "task-runner hook",
            sdk: "paddock-hook-sdk",
            run: "Run it: put the `.wasm` in a folder, start `agent run --dev --hooks FOLDER` \
                  with an agent\nconfig holding `hook \"__NAME__\" { all_tasks = true }`; \
                  every task then gets its env.",
            state: "what a hook must remember goes in its prestart answer's `state`",
        },
        World::DevicePlugin => WorldText {
            wit: "device-plugin",
            text: "device plugin",
            sdk: "paddock-device-sdk",
            run: "Run it: put the `.wasm` in a folder, start `agent run --dev --components \
                  FOLDER`, and give a\njob's task `resources { device \"example/__NAME__\" \
                  { count = 1 } }`.",
            state: "each call fingerprints the host again",
        },
        World::Check => WorldText {
            wit: "check",
            text: "service check",
            sdk: "paddock-check-sdk",
            run: "Run it: put the `.wasm` in a folder, start `agent run --dev --components \
                  FOLDER` with an agent\nconfig granting it `plugin \"__NAME__\" { grant { \
                  network { hosts = [\"127.0.0.1:*\"] } } }`, and give a job's\nservice \
                  `check { type = \"__NAME__\" interval = \"5s\" timeout = \"2s\" }`.",
            state: "each probe connects afresh",
        },
        World::SecretProvider => WorldText {
            wit: "secret-provider",
            text: "secret provider",
            sdk: "paddock-secret-sdk",
            run: "Run it: put the `.wasm` in a folder, start `agent run --dev --components \
                  FOLDER`, and give a job's\ntask `secret \"db\" { provider = \"__NAME__\", \
                  path = \"nomad/jobs/<job>\" }`; its items are `${secret.db.KEY}`.",
            state: "each fetch reads the store afresh",
        },
    }
}

/// Whether `name` can name a plugin, a cargo package and a folder: a lowercase letter, then
/// lowercase letters, digits, `-` or `_`, at most 64 in all.
pub fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !ok {
        bail!(
            "{name:?} is not a plugin name: use a lowercase letter, then lowercase letters, \
             digits, '-' or '_' (at most 64)"
        );
    }
    Ok(())
}

/// Writes the project for `world` in `lang` into `parent/name`; returns its folder.
pub fn create(world: World, lang: Lang, name: &str, parent: &Path) -> anyhow::Result<PathBuf> {
    check_name(name)?;
    let dest = parent.join(name);
    if dest.exists() {
        bail!(
            "{} already exists; choose another name or folder",
            dest.display()
        );
    }
    let files = match lang {
        Lang::Rust => rust_project(world, name)?,
        Lang::Python | Lang::Js => other_project(world, lang, name)?,
    };
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{name}-"))
        .tempdir_in(parent)
        .with_context(|| format!("cannot write in {}", parent.display()))?;
    for (path, text) in &files {
        let file = staging.path().join(path);
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&file, text).with_context(|| format!("write {}", file.display()))?;
        if path.ends_with(".sh") {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    let staged = staging.keep();
    std::fs::rename(&staged, &dest).inspect_err(|_| {
        let _ = std::fs::remove_dir_all(&staged);
    })?;
    Ok(dest)
}

/// `template` with the project's names put in.
fn fill(template: &str, world: World, name: &str) -> String {
    let w = world_text(world);
    template
        .replace("__RUN__", w.run)
        .replace("__STATE__", w.state)
        .replace("__WORLD_TEXT__", w.text)
        .replace("__WORLD__", w.wit)
        .replace("__SDK_VERSION__", &cargo::sdk_version())
        // `component check` of a check needs loopback to reach its test listener.
        .replace(
            "__CHECK_ARGS__",
            if world == World::Check {
                " --network '127.0.0.1:*'"
            } else {
                ""
            },
        )
        // The newest contract this agent serves, which the project's WIT copy is.
        .replace("__CONTRACT__", crate::runtime::contract::SERVED[0])
        .replace("__SDK__", w.sdk)
        .replace("__CRATE__", &name.replace('-', "_"))
        .replace("__ENV__", &name.replace('-', "_").to_uppercase())
        .replace("__NAME__", name)
}

/// A Rust project: the cargo package, the plugin, the vendored SDK and its lock.
fn rust_project(world: World, name: &str) -> anyhow::Result<Vec<(String, String)>> {
    let source = match world {
        World::Driver => include_str!("templates/rust_driver.rs.tmpl"),
        World::Hook => include_str!("templates/rust_hook.rs.tmpl"),
        World::DevicePlugin => include_str!("templates/rust_device.rs.tmpl"),
        World::Check => include_str!("templates/rust_check.rs.tmpl"),
        World::SecretProvider => include_str!("templates/rust_secret.rs.tmpl"),
    };
    let sdk = world_text(world).sdk;
    let vendored = ["paddock-guest-core", sdk];
    let mut files = vec![
        (
            "Cargo.toml".to_string(),
            fill(include_str!("templates/rust_Cargo.toml.tmpl"), world, name),
        ),
        ("src/lib.rs".to_string(), fill(source, world, name)),
        (
            "README.md".to_string(),
            fill(include_str!("templates/rust_README.md.tmpl"), world, name),
        ),
        (".gitignore".to_string(), "/target\n".to_string()),
        (
            "Cargo.lock".to_string(),
            cargo::lock(name, &[sdk, "serde"], &vendored)?,
        ),
    ];
    for package in vendored {
        for f in SDK_FILES.iter().filter(|f| f.package == package) {
            let text = if f.path == "Cargo.toml" {
                cargo::vendored_manifest(package)?
            } else {
                f.text.to_string()
            };
            files.push((format!("vendor/{package}/{}", f.path), text));
        }
    }
    Ok(files)
}

/// A Python or JavaScript project: the plugin, the contract's WIT, the build and test
/// scripts, the tool's pinned version.
fn other_project(world: World, lang: Lang, name: &str) -> anyhow::Result<Vec<(String, String)>> {
    if matches!(world, World::Check | World::SecretProvider) {
        let w = world_text(world);
        bail!(
            "a {} is templated in Rust only (--lang rust); its WIT is the world `{}` of \
             paddock:plugin@{}",
            w.text,
            w.wit,
            crate::runtime::contract::SERVED[0]
        );
    }
    let crate_name = name.replace('-', "_");
    let (source_path, source, setup, lang_text) = match lang {
        Lang::Python => (
            "app.py".to_string(),
            match world {
                World::Driver => include_str!("templates/py_driver.py.tmpl"),
                World::Hook => include_str!("templates/py_hook.py.tmpl"),
                World::DevicePlugin | World::Check | World::SecretProvider => {
                    include_str!("templates/py_device.py.tmpl")
                }
            },
            "pip install -r requirements.txt   # componentize-py",
            "Python",
        ),
        _ => (
            format!("{crate_name}.js"),
            match world {
                World::Driver => include_str!("templates/js_driver.js.tmpl"),
                World::Hook => include_str!("templates/js_hook.js.tmpl"),
                World::DevicePlugin | World::Check | World::SecretProvider => {
                    include_str!("templates/js_device.js.tmpl")
                }
            },
            "npm install    # componentize-js",
            "JavaScript",
        ),
    };
    let readme = include_str!("templates/other_README.md.tmpl")
        .replace("__LANG__", lang_text)
        .replace("__SOURCE__", &source_path)
        .replace("__SETUP__", setup);
    let mut files = vec![
        (source_path, fill(source, world, name)),
        ("README.md".to_string(), fill(&readme, world, name)),
        (
            "test.sh".to_string(),
            fill(include_str!("templates/test.sh.tmpl"), world, name),
        ),
        (
            ".gitignore".to_string(),
            "/target\n/node_modules\n__pycache__/\n".to_string(),
        ),
    ];
    match lang {
        Lang::Python => {
            files.push((
                "build.sh".into(),
                fill(include_str!("templates/py_build.sh.tmpl"), world, name),
            ));
            files.push((
                "requirements.txt".into(),
                include_str!("templates/py_requirements.txt.tmpl").into(),
            ));
        }
        _ => {
            files.push((
                "build.sh".into(),
                fill(include_str!("templates/js_build.sh.tmpl"), world, name),
            ));
            files.push((
                "package.json".into(),
                fill(include_str!("templates/js_package.json.tmpl"), world, name),
            ));
        }
    }
    for (file, text) in WIT {
        files.push((format!("wit/{file}"), text.to_string()));
    }
    Ok(files)
}
