//! `agent component list|status|reload|inspect|validate|call` (and `pull|approve|push|sign|keygen`
//! in `component_oci.rs`).

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
    /// One loaded component: every version of it (active, draining), where it came from,
    /// the version it replaced, its calls and errors, and the tasks each version serves.
    Status {
        /// API address and token.
        #[command(flatten)]
        api: ApiArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// The component's name.
        name: String,
    },
    /// Pull a plugin block's source now (a tag is resolved again) and apply what it brings:
    /// verified, it is swapped in (or held for approval); refused, the running version
    /// stays. Exit code 1 when refused.
    Pull {
        #[command(flatten)]
        api: ApiArgs,
        /// The plugin block's name.
        name: String,
    },
    /// Let in the version of a pulled component held for approval (it declares more
    /// grants than the running version: `component status NAME` shows the difference).
    Approve {
        #[command(flatten)]
        api: ApiArgs,
        /// The plugin block's name.
        name: String,
    },
    /// Push a built component to an OCI registry in the wasm artifact layout
    /// (`application/vnd.wasm.config.v0+json` config, one `application/wasm` layer) and print
    /// its digest. A registry on the loopback is reached over plain HTTP; credentials come
    /// from the docker credentials file.
    Push {
        /// The `.wasm` file.
        file: PathBuf,
        /// Where: oci://REGISTRY/REPOSITORY:TAG.
        target: String,
        /// Plain HTTP to a registry off the loopback.
        #[arg(long)]
        insecure: bool,
        /// More CA certificates (PEM) to trust.
        #[arg(long)]
        ca_file: Option<PathBuf>,
    },
    /// Sign a pushed component with a key, as `cosign sign --key` does (the signature goes
    /// to the tag sha256-<digest>.sig of the same repository).
    Sign {
        /// The signing key: unencrypted PKCS#8 PEM (`component keygen`, or openssl).
        #[arg(long)]
        key: PathBuf,
        /// What to sign: oci://REGISTRY/REPOSITORY:TAG or …@sha256:….
        target: String,
        /// Plain HTTP to a registry off the loopback.
        #[arg(long)]
        insecure: bool,
        /// More CA certificates (PEM) to trust.
        #[arg(long)]
        ca_file: Option<PathBuf>,
    },
    /// Declare the grants a built component needs (a grant block's JSON, e.g.
    /// '{"network": {"hosts": ["api.example.com:443"]}}') in its `paddock:grants` section:
    /// an agent holds a new version that declares more than the running one for approval.
    /// It grants nothing. Rust plugins declare with the SDK's `declare_grants!` instead.
    Declare {
        /// The `.wasm` file (rewritten unless --output is given).
        file: PathBuf,
        /// The declaration.
        json: String,
        /// Write the declared component here instead.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Make an ECDSA P-256 key pair for signing: NAME.key (secret) and NAME.pub (for a plugin
    /// block's verify { key = "NAME.pub" }).
    Keygen {
        /// The files' name, without extension.
        name: PathBuf,
    },
    /// Look at the components folders now and apply what changed (for setups where file
    /// events are not delivered).
    Reload {
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
    /// Write a ready plugin project in `./NAME`: a minimal working plugin of the world, in
    /// the language, with the contract (the SDK vendored for Rust, the WIT otherwise), its
    /// build command, a README and a test. It needs no Paddock checkout to build.
    New {
        /// The world the plugin exports.
        #[arg(long, value_enum)]
        world: super::component_new::World,
        /// The language.
        #[arg(long, value_enum, default_value = "rust")]
        lang: super::component_new::Lang,
        /// The plugin's name, also the project's folder.
        name: String,
    },
    /// Check that a file is a component this agent can host, and say exactly what is wrong if not.
    Validate {
        /// The `.wasm` file.
        file: PathBuf,
    },
    /// Call one export of a built component by hand and print its answer as JSON: `info`
    /// for any world; for a driver `capabilities`, `fingerprint`, `validate-config`,
    /// `start`, `wait`, `inspect`, `stats`, `recover`, `stop`, `signal`, `destroy` (a
    /// handle that `start` printed goes back in `--json`). Exit code 1 when the component
    /// refuses or fails the call.
    Call {
        /// The `.wasm` file.
        file: PathBuf,
        /// The operation.
        op: String,
        /// Its argument, as JSON.
        #[arg(long, default_value = "")]
        json: String,
        #[command(flatten)]
        grants: GrantArgs,
    },
    /// Take a built component through its whole contract in a throwaway runtime and report
    /// each check (pass, warn, FAIL) with what the contract says: for a driver every op, a
    /// damaged handle, two tasks at once, stop and destroy; for a hook each phase; for a
    /// device plugin fingerprint, reserve and stats. Exit code 1 when any check fails.
    Check {
        /// The `.wasm` file.
        file: PathBuf,
        /// A task `config` (JSON) the driver accepts and that runs for a while.
        #[arg(long, default_value = "{}")]
        task_config: String,
        /// The component's `plugin "<name>" { config }` block, as JSON.
        #[arg(long, default_value = "{}")]
        config: String,
        #[command(flatten)]
        grants: GrantArgs,
    },
}

/// The grants `call` and `check` give the component.
#[derive(clap::Args, Debug)]
pub struct GrantArgs {
    /// Grants, comma-separated: env, devices, events, task_dir, variables, services,
    /// isolation.
    #[arg(long, value_delimiter = ',')]
    grant: Vec<String>,
    /// Commands the component may start (the `process` grant), repeatable.
    #[arg(long)]
    process: Vec<String>,
    /// Host folders the component may read (the `read_paths` grant), repeatable.
    #[arg(long = "read")]
    read: Vec<String>,
    /// Where the component may connect (the `network` grant's `hosts`, `HOST:PORT`),
    /// repeatable.
    #[arg(long)]
    network: Vec<String>,
}

impl GrantArgs {
    fn grants(self) -> anyhow::Result<crate::runtime::Grants> {
        let mut grants = crate::runtime::Grants {
            process: self.process,
            read_paths: self.read,
            network: (!self.network.is_empty()).then_some(crate::runtime::network::NetworkGrant {
                hosts: self.network,
                max_response_bytes: None,
            }),
            ..Default::default()
        };
        grants
            .validate()
            .map_err(|e| anyhow::anyhow!("--network: {e}"))?;
        for g in &self.grant {
            match g.as_str() {
                "env" => grants.env = true,
                "devices" => grants.devices = true,
                "events" => grants.events = true,
                "task_dir" => grants.task_dir = true,
                "variables" => grants.variables = true,
                "services" => grants.services = true,
                "isolation" => grants.isolation = true,
                other => anyhow::bail!(
                    "--grant {other:?}: one of env, devices, events, task_dir, variables, services, isolation"
                ),
            }
        }
        Ok(grants)
    }
}

pub(super) async fn run(cmd: ComponentCommand) -> anyhow::Result<i32> {
    match cmd {
        ComponentCommand::List { api } => list(&api).await,
        ComponentCommand::Status { api, json, name } => status(&api, json, &name).await,
        ComponentCommand::Reload { api } => reload(&api).await,
        ComponentCommand::Inspect { api, json, target } => inspect(&api, json, &target).await,
        ComponentCommand::Call {
            file,
            op,
            json,
            grants,
        } => {
            super::init_logging("warn", false);
            super::component_call::run(&file, &op, &json, grants.grants()?).await
        }
        ComponentCommand::Check {
            file,
            task_config,
            config,
            grants,
        } => check(&file, &task_config, &config, grants).await,
        ComponentCommand::New { world, lang, name } => {
            let cwd = std::env::current_dir()?;
            let dir = super::component_new::create(world, lang, &name, &cwd)?;
            println!("wrote {}", dir.display());
            Ok(0)
        }
        ComponentCommand::Validate { file } => validate(&file).await,
        ComponentCommand::Pull { api, name } => {
            super::component_oci::ask(&api, "/v1/components/pull", &name).await
        }
        ComponentCommand::Approve { api, name } => {
            super::component_oci::ask(&api, "/v1/components/approve", &name).await
        }
        ComponentCommand::Push {
            file,
            target,
            insecure,
            ca_file,
        } => super::component_oci::push(&file, &target, insecure, ca_file.as_deref()).await,
        ComponentCommand::Sign {
            key,
            target,
            insecure,
            ca_file,
        } => super::component_oci::sign(&key, &target, insecure, ca_file.as_deref()).await,
        ComponentCommand::Keygen { name } => super::component_oci::keygen(&name),
        ComponentCommand::Declare { file, json, output } => {
            super::component_oci::declare(&file, &json, output.as_deref())
        }
    }
}

/// `component list`: every version with its state, calls, errors and tasks.
async fn list(api: &ApiArgs) -> anyhow::Result<i32> {
    let v = api.get("/v1/components").await?;
    println!(
        "{:<16} {:<14} {:<9} {:<9} {:<14} {:>7} {:>6} {:>5}  Source",
        "Name", "World", "Contract", "State", "SHA256", "Calls", "Errors", "Tasks"
    );
    for c in v["Components"].as_array().cloned().unwrap_or_default() {
        let sha = c["SHA256"].as_str().unwrap_or("");
        let state = c["State"].as_str().unwrap_or("");
        let source = if state == "refused" {
            format!(
                "{} ({})",
                c["Source"].as_str().unwrap_or(""),
                c["Reason"].as_str().unwrap_or("")
            )
        } else {
            c["Source"].as_str().unwrap_or("").to_string()
        };
        println!(
            "{:<16} {:<14} {:<9} {:<9} {:<14} {:>7} {:>6} {:>5}  {}",
            c["Name"].as_str().unwrap_or("-"),
            c["World"].as_str().unwrap_or(""),
            c["ContractVersion"].as_str().unwrap_or(""),
            state,
            &sha[..12.min(sha.len())],
            c["Calls"].as_u64().unwrap_or(0),
            c["Errors"].as_u64().unwrap_or(0),
            c["Tasks"].as_array().map(|t| t.len()).unwrap_or(0),
            source
        );
    }
    Ok(0)
}

/// `component status NAME`: each version of one component.
async fn status(api: &ApiArgs, json: bool, name: &str) -> anyhow::Result<i32> {
    let v = api.get("/v1/components").await?;
    let versions: Vec<serde_json::Value> = v["Components"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c["Name"] == name)
        .collect();
    if versions.is_empty() {
        anyhow::bail!("no component {name:?} is loaded, pending or refused (see `component list`)");
    }
    if json {
        super::print_json(&serde_json::json!(versions));
        return Ok(0);
    }
    for c in &versions {
        let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
        println!("{} {} ({})", s("Name"), s("State"), s("World"));
        for (label, key) in [
            ("SHA256", "SHA256"),
            ("Previous", "PreviousSHA256"),
            ("Version", "PluginVersion"),
            ("Contract", "ContractVersion"),
            ("Source", "Source"),
            ("Reference", "Reference"),
            ("Digest", "Digest"),
            ("Signer", "Signer"),
            ("Reason", "Reason"),
        ] {
            if !s(key).is_empty() || !matches!(key, "Reference" | "Digest" | "Signer" | "Reason") {
                println!("  {label:<10} = {}", s(key));
            }
        }
        if let Some(g) = c["DeclaredGrants"].as_object() {
            println!(
                "  {:<10} = {}",
                "Declares",
                serde_json::Value::Object(g.clone())
            );
        }
        for d in c["GrantsDiff"].as_array().cloned().unwrap_or_default() {
            println!("  {:<10} {}", "", d.as_str().unwrap_or_default());
        }
        println!(
            "  {:<10} = {} ({} errors)",
            "Calls",
            c["Calls"].as_u64().unwrap_or(0),
            c["Errors"].as_u64().unwrap_or(0)
        );
        let tasks: Vec<String> = c["Tasks"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        println!("  {:<10} = {}", "Tasks", tasks.len());
        for t in tasks {
            println!("    {t}");
        }
    }
    Ok(0)
}

/// `component reload`: rescan the folders, print what changed.
async fn reload(api: &ApiArgs) -> anyhow::Result<i32> {
    let v: serde_json::Value = api
        .client()?
        .post(api.url("/v1/components/reload"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let changes = v["Changes"].as_array().cloned().unwrap_or_default();
    if changes.is_empty() {
        println!("no change");
    }
    for c in changes {
        println!(
            "{}: {} {}",
            c["Target"].as_str().unwrap_or_default(),
            c["Outcome"].as_str().unwrap_or_default(),
            c["Detail"].as_str().unwrap_or_default()
        );
    }
    Ok(0)
}

/// `component check FILE`: the whole contract in a throwaway host.
async fn check(
    file: &std::path::Path,
    task_config: &str,
    config: &str,
    grants: GrantArgs,
) -> anyhow::Result<i32> {
    super::init_logging("error", false);
    let json = |flag: &str, text: &str| -> anyhow::Result<serde_json::Value> {
        serde_json::from_str(text).map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
    };
    let args = super::component_check::CheckArgs {
        grants: grants.grants()?,
        plugin_config: json("config", config)?,
        task_config: json("task-config", task_config)?,
    };
    super::component_check::run(file, args).await
}

/// `component validate FILE`: loads it in a throwaway runtime.
async fn validate(file: &std::path::Path) -> anyhow::Result<i32> {
    super::init_logging("warn", false);
    let bytes =
        std::fs::read(file).map_err(|e| anyhow::anyhow!("reading {}: {e}", file.display()))?;
    let runtime = Runtime::new(RuntimeOptions::default())?;
    let progress = super::Progress::start(super::component_check::compiling(file));
    let prepared = runtime
        .prepare(ComponentSource::File(file.to_path_buf()), Arc::from(bytes))
        .await;
    progress.done();
    match prepared {
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

async fn inspect(api: &ApiArgs, json: bool, target: &str) -> anyhow::Result<i32> {
    let path = std::path::Path::new(target);
    let v = if path.is_file() {
        super::init_logging("warn", false);
        let bytes =
            std::fs::read(path).map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        let runtime = Runtime::new(RuntimeOptions::default())?;
        let progress = super::Progress::start(super::component_check::compiling(path));
        let prepared = runtime
            .prepare(ComponentSource::File(path.to_path_buf()), Arc::from(bytes))
            .await;
        progress.done();
        let c = match prepared {
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
            "DeclaredGrants": c.declared_grants,
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
    match serde_json::from_value::<Option<crate::runtime::Grants>>(v["DeclaredGrants"].clone()) {
        Ok(Some(g)) => println!("{:<12} = {}", "Declares", g.extra()),
        _ => println!("{:<12} = (no paddock:grants section)", "Declares"),
    }
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
