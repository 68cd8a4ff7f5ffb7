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
}

impl World {
    /// The world's WIT name.
    pub fn as_str(self) -> &'static str {
        match self {
            World::Driver => "driver",
            World::Hook => "hook",
            World::DevicePlugin => "device-plugin",
        }
    }

    fn from_export(interface: &str) -> Option<Self> {
        match interface {
            "task-driver" => Some(World::Driver),
            "task-hook" => Some(World::Hook),
            "device" => Some(World::DevicePlugin),
            _ => None,
        }
    }
}

impl std::fmt::Display for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Contract versions this agent can host.
pub const SUPPORTED_VERSIONS: &[&str] = &[crate::bindings::v0_1_0::VERSION];

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
}

/// The grants a component importing `imports` can use: `env`, `devices`, `events`,
/// `process`, `variables`; `task_dir` for WASI filesystem access. Without them those calls are denied.
pub fn grants_used(imports: &[String]) -> Vec<&'static str> {
    let mut out = Vec::new();
    for (needle, grant) in [
        ("paddock:plugin/env@", "env"),
        ("paddock:plugin/devices@", "devices"),
        ("paddock:plugin/events@", "events"),
        ("paddock:plugin/process@", "process"),
        ("paddock:plugin/variables@", "variables"),
        ("wasi:filesystem/", "task_dir"),
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
    /// Exports no Paddock world.
    #[error("exports no Paddock world (driver, hook or device-plugin); its exports are [{}]", .0.join(", "))]
    UnknownWorld(Vec<String>),
    /// Built against a contract version this agent does not host.
    #[error("built against paddock:plugin@{found}, but this agent supports {}", SUPPORTED_VERSIONS.join(", "))]
    UnsupportedVersion {
        /// The version it was built against.
        found: String,
    },
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
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(|e| InspectError::Invalid(e.to_string()))? {
            Payload::Version { .. } => depth += 1,
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
    let mut found_other_version = None;
    for name in &exports {
        // e.g. "paddock:plugin/driver@0.1.0"
        let Some(rest) = name.strip_prefix("paddock:plugin/") else {
            continue;
        };
        let (iface, version) = rest.split_once('@').unwrap_or((rest, ""));
        let Some(world) = World::from_export(iface) else {
            continue;
        };
        if SUPPORTED_VERSIONS.contains(&version) {
            return Ok(Inspection {
                world,
                version: version.to_string(),
                imports,
            });
        }
        found_other_version = Some(version.to_string());
    }
    match found_other_version {
        Some(found) => Err(InspectError::UnsupportedVersion { found }),
        None => Err(InspectError::UnknownWorld(exports)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
