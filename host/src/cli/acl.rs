//! `agent acl ...`, as `nomad acl ...`: bootstrap the ACL system, apply and read policies,
//! create and inspect tokens. The token to act with comes from `NOMAD_TOKEN` or `-token`.

use std::path::PathBuf;

use reqwest::Method;
use serde_json::{Value, json};

use super::{ApiArgs, s};

/// ACL commands.
#[derive(Debug, clap::Subcommand)]
pub enum AclCommand {
    /// Bootstrap the ACL system: the first management token (once).
    Bootstrap {
        #[command(flatten)]
        api: ApiArgs,
        /// `-json`, or `-t TEMPLATE` (a Go template over the same data).
        #[command(flatten)]
        format: super::FormatArgs,
    },
    /// ACL policies.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// ACL tokens.
    #[command(subcommand)]
    Token(TokenCommand),
}

/// `agent acl policy ...`.
#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Create or replace the policy NAME with the rules in FILE (`-` for stdin).
    Apply {
        #[command(flatten)]
        api: ApiArgs,
        /// What the policy is for.
        #[arg(long, default_value = "")]
        description: String,
        name: String,
        file: PathBuf,
    },
    /// Show a policy and its rules.
    Info {
        #[command(flatten)]
        api: ApiArgs,
        name: String,
    },
    /// List policies.
    List {
        #[command(flatten)]
        api: ApiArgs,
        /// `-json`, or `-t TEMPLATE` (a Go template over the same data).
        #[command(flatten)]
        format: super::FormatArgs,
    },
    /// Delete a policy.
    Delete {
        #[command(flatten)]
        api: ApiArgs,
        name: String,
    },
}

/// `agent acl token ...`.
#[derive(Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Create a token.
    Create {
        #[command(flatten)]
        api: ApiArgs,
        /// The token's name.
        #[arg(long, default_value = "")]
        name: String,
        /// `client` or `management`.
        #[arg(long = "type", default_value = "client")]
        kind: String,
        /// A policy of the token (repeatable).
        #[arg(long = "policy")]
        policies: Vec<String>,
        /// Time to live, e.g. `8h` (none: the token lasts until deleted).
        #[arg(long)]
        ttl: Option<String>,
        /// `-json`, or `-t TEMPLATE` (a Go template over the same data).
        #[command(flatten)]
        format: super::FormatArgs,
    },
    /// Show the token in use.
    #[command(name = "self")]
    Myself {
        #[command(flatten)]
        api: ApiArgs,
        /// `-json`, or `-t TEMPLATE` (a Go template over the same data).
        #[command(flatten)]
        format: super::FormatArgs,
    },
    /// Show a token by accessor ID.
    Info {
        #[command(flatten)]
        api: ApiArgs,
        accessor: String,
        /// `-json`, or `-t TEMPLATE` (a Go template over the same data).
        #[command(flatten)]
        format: super::FormatArgs,
    },
    /// List tokens.
    List {
        #[command(flatten)]
        api: ApiArgs,
        /// `-json`, or `-t TEMPLATE` (a Go template over the same data).
        #[command(flatten)]
        format: super::FormatArgs,
    },
    /// Delete a token by accessor ID.
    Delete {
        #[command(flatten)]
        api: ApiArgs,
        accessor: String,
    },
}

pub(super) async fn run(cmd: AclCommand) -> anyhow::Result<i32> {
    match cmd {
        AclCommand::Bootstrap { api, format } => {
            let t = api.call(Method::POST, "/v1/acl/bootstrap", None).await?;
            Ok(show_token(&t, &format))
        }
        AclCommand::Policy(p) => policy(p).await,
        AclCommand::Token(t) => token(t).await,
    }
}

async fn policy(cmd: PolicyCommand) -> anyhow::Result<i32> {
    match cmd {
        PolicyCommand::Apply {
            api,
            description,
            name,
            file,
        } => {
            let rules = if file.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())?
            } else {
                std::fs::read_to_string(&file)
                    .map_err(|e| anyhow::anyhow!("reading {}: {e}", file.display()))?
            };
            let body = json!({ "Name": name, "Description": description, "Rules": rules });
            api.call(Method::POST, &format!("/v1/acl/policy/{name}"), Some(&body))
                .await?;
            println!("Successfully wrote {name:?} ACL policy!");
        }
        PolicyCommand::Info { api, name } => {
            let p = api.get(&format!("/v1/acl/policy/{name}")).await?;
            println!("Name        = {}", s(&p["Name"]));
            println!("Description = {}", s(&p["Description"]));
            println!("CreateIndex = {}", p["CreateIndex"]);
            println!("ModifyIndex = {}", p["ModifyIndex"]);
            println!("\nRules\n\n{}", s(&p["Rules"]));
        }
        PolicyCommand::List { api, format } => {
            let list = api.get("/v1/acl/policies").await?;
            if format.wanted() {
                return Ok(format.print(&list));
            } else {
                println!("{:<24} Description", "Name");
                for p in list.as_array().cloned().unwrap_or_default() {
                    println!("{:<24} {}", s(&p["Name"]), s(&p["Description"]));
                }
            }
        }
        PolicyCommand::Delete { api, name } => {
            api.call(Method::DELETE, &format!("/v1/acl/policy/{name}"), None)
                .await?;
            println!("Successfully deleted {name:?} ACL policy!");
        }
    }
    Ok(0)
}

async fn token(cmd: TokenCommand) -> anyhow::Result<i32> {
    match cmd {
        TokenCommand::Create {
            api,
            name,
            kind,
            policies,
            ttl,
            format,
        } => {
            let mut body = json!({ "Name": name, "Type": kind, "Policies": policies });
            if let Some(ttl) = ttl {
                body["ExpirationTTL"] = json!(ttl);
            }
            let t = api.call(Method::POST, "/v1/acl/token", Some(&body)).await?;
            return Ok(show_token(&t, &format));
        }
        TokenCommand::Myself { api, format } => {
            return Ok(show_token(&api.get("/v1/acl/token/self").await?, &format));
        }
        TokenCommand::Info {
            api,
            accessor,
            format,
        } => {
            let t = api.get(&format!("/v1/acl/token/{accessor}")).await?;
            return Ok(show_token(&t, &format));
        }
        TokenCommand::List { api, format } => {
            let list = api.get("/v1/acl/tokens").await?;
            if format.wanted() {
                return Ok(format.print(&list));
            } else {
                println!(
                    "{:<24} {:<11} {:<36} Expired",
                    "Name", "Type", "Accessor ID"
                );
                for t in list.as_array().cloned().unwrap_or_default() {
                    println!(
                        "{:<24} {:<11} {:<36} false",
                        s(&t["Name"]),
                        s(&t["Type"]),
                        s(&t["AccessorID"])
                    );
                }
            }
        }
        TokenCommand::Delete { api, accessor } => {
            api.call(Method::DELETE, &format!("/v1/acl/token/{accessor}"), None)
                .await?;
            println!("Token {accessor} successfully deleted");
        }
    }
    Ok(0)
}

/// A token as `nomad acl token info` prints it.
fn show_token(t: &Value, format: &super::FormatArgs) -> i32 {
    if format.wanted() {
        return format.print(t);
    }
    let policies = t["Policies"]
        .as_array()
        .filter(|p| !p.is_empty())
        .map(|p| p.iter().map(s).collect::<Vec<_>>().join(", "))
        .unwrap_or_else(|| "n/a".into());
    let expiry = match &t["ExpirationTime"] {
        Value::String(e) => e.clone(),
        _ => "<none>".into(),
    };
    for (k, v) in [
        ("Accessor ID", s(&t["AccessorID"])),
        ("Secret ID", s(&t["SecretID"])),
        ("Name", s(&t["Name"])),
        ("Type", s(&t["Type"])),
        ("Global", t["Global"].to_string()),
        ("Create Time", s(&t["CreateTime"])),
        ("Expiry Time", expiry),
        ("Create Index", t["CreateIndex"].to_string()),
        ("Modify Index", t["ModifyIndex"].to_string()),
        ("Policies", policies),
    ] {
        println!("{k:<12} = {v}");
    }
    0
}
