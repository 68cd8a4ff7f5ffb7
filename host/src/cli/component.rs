//! `agent component list|inspect|validate`.

use std::path::PathBuf;
use std::sync::Arc;

use super::ApiArgs;
use crate::runtime::{ComponentSource, Runtime, RuntimeOptions};

/// Component commands.
#[derive(Debug, clap::Subcommand)]
pub enum ComponentCommand {
    /// List the components a running agent has loaded.
    List {
        /// API address and token.
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Show one component: a `.wasm` file (what it is, what it imports, which grants it
    /// can use), or a component a running agent has loaded, by name.
    Inspect {
        /// API address and token (for a loaded component).
        #[command(flatten)]
        api: ApiArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// A `.wasm` file, or the name of a loaded component.
        target: String,
    },
    /// Check that a file is a component this agent can host, and say exactly what is wrong if not.
    Validate {
        /// The `.wasm` file.
        file: PathBuf,
    },
}

pub(super) async fn run(cmd: ComponentCommand) -> anyhow::Result<i32> {
    match cmd {
        ComponentCommand::List { api } => {
            let v: serde_json::Value = api
                .client()?
                .get(api.url("/v1/components"))
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            println!(
                "{:<16} {:<14} {:<9} {:<14} Source",
                "Name", "World", "Contract", "SHA256"
            );
            for c in v["Components"].as_array().cloned().unwrap_or_default() {
                let sha = c["SHA256"].as_str().unwrap_or("");
                println!(
                    "{:<16} {:<14} {:<9} {:<14} {}",
                    c["Name"].as_str().unwrap_or(""),
                    c["World"].as_str().unwrap_or(""),
                    c["ContractVersion"].as_str().unwrap_or(""),
                    &sha[..12.min(sha.len())],
                    c["Source"].as_str().unwrap_or("")
                );
            }
            for r in v["Refused"].as_array().cloned().unwrap_or_default() {
                println!("refused: {}", r.as_str().unwrap_or(""));
            }
            Ok(0)
        }
        ComponentCommand::Inspect { api, json, target } => inspect(&api, json, &target).await,
        ComponentCommand::Validate { file } => {
            super::init_logging("warn", false);
            let bytes = std::fs::read(&file)
                .map_err(|e| anyhow::anyhow!("reading {}: {e}", file.display()))?;
            let runtime = Runtime::new(RuntimeOptions::default())?;
            match runtime
                .prepare(ComponentSource::File(file.clone()), Arc::from(bytes))
                .await
            {
                Ok(c) => {
                    println!(
                        "{}: ok: {} component {:?} version {:?}, built against paddock:plugin@{}, sha256 {}",
                        file.display(),
                        c.world,
                        c.name,
                        c.plugin_version,
                        c.contract_version,
                        c.sha256
                    );
                    Ok(0)
                }
                Err(r) => {
                    println!("{r}");
                    Ok(1)
                }
            }
        }
    }
}

async fn inspect(api: &ApiArgs, json: bool, target: &str) -> anyhow::Result<i32> {
    let path = std::path::Path::new(target);
    let v = if path.is_file() {
        super::init_logging("warn", false);
        let bytes =
            std::fs::read(path).map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        let runtime = Runtime::new(RuntimeOptions::default())?;
        let c = match runtime
            .prepare(ComponentSource::File(path.to_path_buf()), Arc::from(bytes))
            .await
        {
            Ok(c) => c,
            Err(r) => {
                eprintln!("{r}");
                return Ok(1);
            }
        };
        serde_json::json!({
            "Name": c.name, "World": c.world, "ContractVersion": c.contract_version,
            "PluginVersion": c.plugin_version, "SHA256": c.sha256, "Source": c.source.to_string(),
            "Imports": c.imports, "GrantsUsed": crate::runtime::inspect::grants_used(&c.imports),
        })
    } else {
        let list = api.get("/v1/components").await?;
        match list["Components"]
            .as_array()
            .and_then(|l| l.iter().find(|c| c["Name"] == target))
        {
            Some(c) => c.clone(),
            None => anyhow::bail!(
                "{target:?} is neither a file nor a component the agent has loaded (see `component list`)"
            ),
        }
    };
    if json {
        super::print_json(&v);
        return Ok(0);
    }
    let s = |k: &str| match &v[k] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    };
    for (label, key) in [
        ("Name", "Name"),
        ("World", "World"),
        ("Contract", "ContractVersion"),
        ("Version", "PluginVersion"),
        ("SHA256", "SHA256"),
        ("Source", "Source"),
    ] {
        println!("{label:<12} = {}", s(key));
    }
    let list = |k: &str| -> String {
        v[k].as_array()
            .map(|a| {
                a.iter()
                    .map(|x| x.as_str().unwrap_or_default().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    println!("{:<12} = {}", "Grants used", list("GrantsUsed"));
    if v.get("Grants").is_some() {
        println!("{:<12} = {}", "Granted", list("Grants"));
        println!("{:<12} = {} MiB", "Memory cap", s("MemoryMB"));
        println!("{:<12} = {} ms", "Deadline", s("CallTimeoutMillis"));
    }
    println!("\nImports");
    for i in v["Imports"].as_array().cloned().unwrap_or_default() {
        println!("  {}", i.as_str().unwrap_or_default());
    }
    Ok(0)
}
