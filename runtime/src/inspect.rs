//! Reads a component file before anything is instantiated: is it wasm, a component, which
//! Paddock world does it export, built against which contract version. Everything here
//! runs on the bytes alone (wasmparser), so a hostile file never reaches wasmtime's
//! compiler unvalidated.

use wasmparser::{Parser, Payload, Validator, WasmFeatures};

/// The world a component implements.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum World {
    /// A task driver.
    Driver,
    /// A task-runner hook.
    Hook,
    /// A device plugin.
    DevicePlugin,
    /// A custom service check (contract 0.1.1).
    Check,
    /// A secret provider (contract 0.1.2).
    SecretProvider,
}

impl World {
    /// The world's WIT name.
    pub fn as_str(self) -> &'static str {
        match self {
            World::Driver => "driver",
            World::Hook => "hook",
            World::DevicePlugin => "device-plugin",
            World::Check => "check",
            World::SecretProvider => "secret-provider",
        }
    }

    fn from_export(interface: &str) -> Option<Self> {
        match interface {
            "task-driver" => Some(World::Driver),
            "task-hook" => Some(World::Hook),
            "device" => Some(World::DevicePlugin),
            "service-check" => Some(World::Check),
            "secret-source" => Some(World::SecretProvider),
            _ => None,
        }
    }
}

impl std::fmt::Display for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Contract versions this agent serves, the newest of each track ([`crate::contract`]).
pub const SUPPORTED_VERSIONS: &[&str] = crate::contract::SERVED;

/// What the bytes say about a component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    /// The world it exports.
    pub world: World,
    /// Contract version it was built against, e.g. "0.1.0".
    pub version: String,
    /// What it imports (interfaces it uses; unused ones are left out when it is built),
    /// e.g. `paddock:plugin/process@0.1.0`, `wasi:cli/stdout@0.2.6`.
    pub imports: Vec<String>,
    /// The grants it declares it needs (its [`GRANTS_SECTION`] custom section), if any.
    pub declared_grants: Option<crate::grants::Grants>,
}

/// The custom section in which a component declares the grants it needs: the JSON of a
/// grant block (`{"network": {"hosts": ["api.example.com:443"]}, "task_dir": true}`), at
/// the component's top level or in one of its core modules (where a guest's
/// `#[link_section]` puts it). A declaration never grants anything: the operator's grants
/// bound what runs; it is what a new version is compared with before it replaces one.
pub const GRANTS_SECTION: &str = "paddock:grants";

/// The grants a component importing `imports` can use: `env`, `devices`, `events`,
/// `process`, `variables`, `services`; `task_dir` for WASI filesystem access and `artifacts`;
/// `network` for WASI sockets and HTTP. Without them those calls are denied.
pub fn grants_used(imports: &[String]) -> Vec<&'static str> {
    let mut out = Vec::new();
    for (needle, grant) in [
        ("paddock:plugin/env@", "env"),
        ("paddock:plugin/devices@", "devices"),
        ("paddock:plugin/events@", "events"),
        ("paddock:plugin/process@", "process"),
        ("paddock:plugin/variables@", "variables"),
        ("paddock:plugin/services@", "services"),
        ("paddock:plugin/artifacts@", "task_dir"),
        ("wasi:filesystem/", "task_dir"),
        ("wasi:sockets/", "network"),
        ("wasi:http/", "network"),
    ] {
        if imports.iter().any(|i| i.starts_with(needle)) && !out.contains(&grant) {
            out.push(grant);
        }
    }
    out
}

/// Why a file is not a component Paddock can host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InspectError {
    /// Not WebAssembly at all.
    #[error("not a WebAssembly file (bad magic number)")]
    NotWasm,
    /// A core module, not a component.
    #[error(
        "a core WebAssembly module, not a component (build for wasm32-wasip2, or run `wasm-tools component new`)"
    )]
    CoreModule,
    /// Fails validation.
    #[error("invalid component: {0}")]
    Invalid(String),
    /// Its grants declaration does not read.
    #[error("its {GRANTS_SECTION} custom section is not a grant block's JSON: {0}")]
    Declaration(String),
    /// Exports no Paddock world.
    #[error("exports no Paddock world (driver, hook or device-plugin); its exports are [{}]", .0.join(", "))]
    UnknownWorld(Vec<String>),
    /// Built against a contract version this agent does not host.
    #[error("built against paddock:plugin@{found}, but this agent supports {}", SUPPORTED_VERSIONS.join(", "))]
    UnsupportedVersion {
        /// The version it was built against.
        found: String,
    },
    /// Built against a newer minor version of a contract track this agent serves: it may
    /// use what this agent does not have.
    #[error(
        "needs paddock:plugin@{needed} (it uses {item}), but this agent serves paddock:plugin up to {served}: upgrade the agent, or build the component against {served}"
    )]
    NewerThanServed {
        /// The newest contract version the component uses.
        needed: String,
        /// One import or export of that version.
        item: String,
        /// The newest version of that track this agent serves.
        served: String,
    },
}

/// `paddock:plugin/<name>@<version>` → `(name, version)`.
fn paddock_item(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix("paddock:plugin/")?;
    Some(rest.split_once('@').unwrap_or((rest, "")))
}

/// Inspect `bytes`: validate them and find the Paddock world and contract version.
pub fn inspect(bytes: &[u8]) -> Result<Inspection, InspectError> {
    inspect_with(bytes, true)
}

/// Inspect `bytes`; with `validate` false only the structure is parsed. The runtime skips
/// full validation for bytes whose compilation it already holds: they passed it before.
pub fn inspect_with(bytes: &[u8], validate: bool) -> Result<Inspection, InspectError> {
    if !bytes.starts_with(b"\0asm") {
        return Err(InspectError::NotWasm);
    }
    if Parser::is_core_wasm(bytes) {
        return Err(InspectError::CoreModule);
    }
    if !Parser::is_component(bytes) {
        return Err(InspectError::Invalid(
            "unknown WebAssembly encoding version".into(),
        ));
    }
    if validate {
        Validator::new_with_features(WasmFeatures::default())
            .validate_all(bytes)
            .map_err(|e| InspectError::Invalid(e.to_string()))?;
    }

    let mut exports = Vec::new();
    let mut imports = Vec::new();
    let mut depth = 0usize;
    let mut declared = None;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(|e| InspectError::Invalid(e.to_string()))? {
            Payload::Version { .. } => depth += 1,
            Payload::CustomSection(c) if c.name() == GRANTS_SECTION => {
                if declared.is_some() {
                    return Err(InspectError::Declaration("it holds more than one".into()));
                }
                let g: crate::grants::Grants = serde_json::from_slice(c.data())
                    .map_err(|e| InspectError::Declaration(e.to_string()))?;
                declared = Some(g);
            }
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 1 => {
                for import in reader {
                    let import = import.map_err(|e| InspectError::Invalid(e.to_string()))?;
                    imports.push(import.name.name.to_string());
                }
            }
            Payload::ComponentExportSection(reader) if depth == 1 => {
                for export in reader {
                    let export = export.map_err(|e| InspectError::Invalid(e.to_string()))?;
                    exports.push(export.name.name.to_string());
                }
            }
            _ => {}
        }
    }
    // The world, and the version it says it was built against, come from its export (a
    // served one first, should it export the world at two versions).
    let worlds: Vec<(World, &str)> = exports
        .iter()
        .filter_map(|name| paddock_item(name))
        .filter_map(|(iface, version)| Some((World::from_export(iface)?, version)))
        .collect();
    let Some(&(world, version)) = worlds
        .iter()
        .find(|(_, v)| crate::contract::served(v).is_ok())
        .or(worlds.first())
    else {
        return Err(InspectError::UnknownWorld(exports));
    };
    if crate::contract::served(version) == Err(crate::contract::Unserved::OtherTrack) {
        return Err(InspectError::UnsupportedVersion {
            found: version.to_string(),
        });
    }
    // Every contract item it uses must be served: a guest built against a newer minor than
    // this agent's would otherwise fail to link, or link and miss what it needs.
    let mut newest: Option<(crate::contract::Version, &String, String)> = None;
    for name in exports.iter().chain(&imports) {
        let Some((_, v)) = paddock_item(name) else {
            continue;
        };
        match crate::contract::served(v) {
            Ok(()) => {}
            Err(crate::contract::Unserved::OtherTrack) => {
                return Err(InspectError::UnsupportedVersion {
                    found: v.to_string(),
                });
            }
            Err(crate::contract::Unserved::Newer { served }) => {
                let parsed = crate::contract::Version::parse(v).expect("served parsed it");
                if newest.as_ref().is_none_or(|(n, _, _)| parsed > *n) {
                    newest = Some((parsed, name, served));
                }
            }
        }
    }
    if let Some((needed, item, served)) = newest {
        return Err(InspectError::NewerThanServed {
            needed: needed.to_string(),
            item: item.clone(),
            served,
        });
    }
    Ok(Inspection {
        world,
        version: version.to_string(),
        imports,
        declared_grants: declared,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A component that imports each of `imports` as an empty instance and exports the
    /// first import again under each of `exports`: enough for inspection to read its names.
    fn component(imports: &[&str], exports: &[&str]) -> Vec<u8> {
        use wasm_encoder::{ComponentBuilder, ComponentExportKind, ComponentTypeRef, InstanceType};
        let mut b = ComponentBuilder::default();
        let ty = b.type_instance(None, &InstanceType::new());
        let indices: Vec<u32> = imports
            .iter()
            .map(|name| b.import(*name, ComponentTypeRef::Instance(ty)))
            .collect();
        let first = indices[0];
        for name in exports {
            b.export(*name, ComponentExportKind::Instance, first, None);
        }
        b.finish()
    }

    #[test]
    fn a_component_of_a_served_version_is_read() {
        let bytes = component(
            &["paddock:plugin/log@0.1.0"],
            &["paddock:plugin/task-driver@0.1.0"],
        );
        let found = inspect(&bytes).unwrap();
        assert_eq!(found.world, World::Driver);
        assert_eq!(found.version, "0.1.0");
        assert_eq!(found.imports, ["paddock:plugin/log@0.1.0"]);
    }

    #[test]
    fn a_newer_minor_is_refused_naming_both_versions_and_what_needs_it() {
        // Built against a newer minor throughout.
        let bytes = component(
            &["paddock:plugin/log@0.1.4"],
            &["paddock:plugin/task-hook@0.1.4"],
        );
        let err = inspect(&bytes).unwrap_err();
        assert_eq!(
            err,
            InspectError::NewerThanServed {
                needed: "0.1.4".into(),
                item: "paddock:plugin/task-hook@0.1.4".into(),
                served: "0.1.3".into(),
            }
        );
        assert_eq!(
            err.to_string(),
            "needs paddock:plugin@0.1.4 (it uses paddock:plugin/task-hook@0.1.4), but this \
             agent serves paddock:plugin up to 0.1.3: upgrade the agent, or build the \
             component against 0.1.3"
        );
        // A world of a served version importing one interface of a newer minor: the newest
        // of what it uses is named.
        let bytes = component(
            &[
                "paddock:plugin/log@0.1.0",
                "paddock:plugin/process@0.1.2",
                "paddock:plugin/events@0.1.7",
                "wasi:cli/stdout@0.2.6",
            ],
            &["paddock:plugin/task-driver@0.1.0"],
        );
        assert_eq!(
            inspect(&bytes).unwrap_err(),
            InspectError::NewerThanServed {
                needed: "0.1.7".into(),
                item: "paddock:plugin/events@0.1.7".into(),
                served: "0.1.3".into(),
            }
        );
    }

    #[test]
    fn another_track_is_refused_as_unsupported() {
        for (imports, exports, found) in [
            (
                &["paddock:plugin/log@0.2.0"][..],
                &["paddock:plugin/device@0.2.0"][..],
                "0.2.0",
            ),
            (
                &["paddock:plugin/log@9.0.0"],
                &["paddock:plugin/task-driver@9.0.0"],
                "9.0.0",
            ),
            (
                &["paddock:plugin/log@1.0.0"],
                &["paddock:plugin/task-driver@0.1.0"],
                "1.0.0",
            ),
            (&["paddock:plugin/log"], &["paddock:plugin/task-driver"], ""),
        ] {
            assert_eq!(
                inspect(&component(imports, exports)),
                Err(InspectError::UnsupportedVersion {
                    found: found.into()
                }),
                "{imports:?} {exports:?}"
            );
        }
        assert!(matches!(
            inspect(&component(
                &["paddock:plugin/log@0.1.0"],
                &["other:x/y@1.0.0"]
            )),
            Err(InspectError::UnknownWorld(_))
        ));
    }

    #[test]
    fn refuses_non_components() {
        assert_eq!(inspect(b"hello world"), Err(InspectError::NotWasm));
        assert_eq!(inspect(b"\0asm\x01\0\0\0"), Err(InspectError::CoreModule));
        assert!(matches!(
            inspect(b"\0asm\x0d\0\x01\0\xff\xff"),
            Err(InspectError::Invalid(_))
        ));
    }
}
