//! `agent component list|validate`.

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
