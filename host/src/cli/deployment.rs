//! `agent deployment list|status|promote|fail|pause|resume`, as `nomad deployment`.

use serde_json::{Value, json};

use super::{ApiArgs, s};

/// Deployment commands.
#[derive(Debug, clap::Subcommand)]
pub enum DeploymentCommand {
    /// List deployments.
    List {
        #[command(flatten)]
        api: ApiArgs,
        /// Namespace.
        #[arg(long, default_value = "default")]
        namespace: String,
        /// `-json`, or `-t TEMPLATE` (a Go template over the same data).
        #[command(flatten)]
        format: super::FormatArgs,
    },
    /// Show a deployment: its status and each group's progress.
    Status {
        #[command(flatten)]
        api: ApiArgs,
        #[arg(long, default_value = "default")]
        namespace: String,
        /// `-json`, or `-t TEMPLATE` (a Go template over the same data).
        #[command(flatten)]
        format: super::FormatArgs,
        /// Deployment id or prefix.
        id: String,
    },
    /// Promote a deployment's canaries (every group's, or those of `-group`).
    Promote {
        #[command(flatten)]
        api: ApiArgs,
        #[arg(long, default_value = "default")]
        namespace: String,
        /// A group to promote (repeatable); all groups when none is given.
        #[arg(long = "group")]
        groups: Vec<String>,
        id: String,
    },
    /// Mark a deployment failed (a group with `auto_revert` reverts the job).
    Fail {
        #[command(flatten)]
        api: ApiArgs,
        #[arg(long, default_value = "default")]
        namespace: String,
        id: String,
    },
    /// Pause a deployment: it replaces nothing more until resumed.
    Pause {
        #[command(flatten)]
        api: ApiArgs,
        #[arg(long, default_value = "default")]
        namespace: String,
        id: String,
    },
    /// Resume a paused deployment.
    Resume {
        #[command(flatten)]
        api: ApiArgs,
        #[arg(long, default_value = "default")]
        namespace: String,
        id: String,
    },
}

pub(super) async fn run(cmd: DeploymentCommand) -> anyhow::Result<i32> {
    match cmd {
        DeploymentCommand::List {
            api,
            namespace,
            format,
        } => {
            let list = api
                .get(&format!(
                    "/v1/deployments?namespace={}",
                    super::enc(&namespace)
                ))
                .await?;
            if format.wanted() {
                return Ok(format.print(&list));
            }
            print_list(&list);
            Ok(0)
        }
        DeploymentCommand::Status {
            api,
            namespace,
            format,
            id,
        } => {
            let d = find(&api, &namespace, &id).await?;
            if format.wanted() {
                return Ok(format.print(&d));
            }
            print_status(&d);
            Ok(0)
        }
        DeploymentCommand::Promote {
            api,
            namespace,
            groups,
            id,
        } => {
            let d = find(&api, &namespace, &id).await?;
            let id = s(&d["ID"]);
            let body = json!({"DeploymentID": id, "All": groups.is_empty(), "Groups": groups});
            let r = op(&api, &namespace, "promote", &id, &body).await?;
            println!("Deployment {:?} promoted", super::short_id(&id));
            print_eval(&r);
            Ok(0)
        }
        DeploymentCommand::Fail { api, namespace, id } => {
            let d = find(&api, &namespace, &id).await?;
            let id = s(&d["ID"]);
            let r = op(&api, &namespace, "fail", &id, &json!({"DeploymentID": id})).await?;
            match r["RevertedJobVersion"].as_u64() {
                Some(v) => println!(
                    "Deployment {:?} failed. Auto-reverted to job version {v}.",
                    super::short_id(&id)
                ),
                None => println!("Deployment {:?} failed", super::short_id(&id)),
            }
            print_eval(&r);
            Ok(0)
        }
        DeploymentCommand::Pause { api, namespace, id } => pause(&api, &namespace, &id, true).await,
        DeploymentCommand::Resume { api, namespace, id } => {
            pause(&api, &namespace, &id, false).await
        }
    }
}

async fn pause(api: &ApiArgs, namespace: &str, id: &str, pause: bool) -> anyhow::Result<i32> {
    let d = find(api, namespace, id).await?;
    let id = s(&d["ID"]);
    let body = json!({"DeploymentID": id, "Pause": pause});
    let r = op(api, namespace, "pause", &id, &body).await?;
    let done = if pause { "paused" } else { "resumed" };
    println!("Deployment {:?} {done}", super::short_id(&id));
    print_eval(&r);
    Ok(0)
}

/// The one deployment whose id starts with `prefix`.
async fn find(api: &ApiArgs, namespace: &str, prefix: &str) -> anyhow::Result<Value> {
    let list = api
        .get(&format!(
            "/v1/deployments?namespace={}&prefix={}",
            super::enc(namespace),
            super::enc(prefix)
        ))
        .await?;
    let list = list.as_array().cloned().unwrap_or_default();
    match list.as_slice() {
        [] => anyhow::bail!("No deployment(s) with prefix or id {prefix:?} found"),
        [one] => Ok(one.clone()),
        many => {
            let ids: Vec<String> = many.iter().map(|d| s(&d["ID"])).collect();
            anyhow::bail!("Prefix matched multiple deployments: {}", ids.join(", "))
        }
    }
}

async fn op(
    api: &ApiArgs,
    namespace: &str,
    name: &str,
    id: &str,
    body: &Value,
) -> anyhow::Result<Value> {
    api.call(
        reqwest::Method::POST,
        &format!(
            "/v1/deployment/{name}/{id}?namespace={}",
            super::enc(namespace)
        ),
        Some(body),
    )
    .await
}

fn print_eval(r: &Value) {
    let eval = s(&r["EvalID"]);
    if !eval.is_empty() {
        println!("Evaluation ID: {eval}");
    }
}

/// `nomad deployment list`'s table.
fn print_list(list: &Value) {
    println!(
        "{:<10} {:<20} {:<12} {:<12} Description",
        "ID", "Job ID", "Job Version", "Status"
    );
    for d in list.as_array().cloned().unwrap_or_default() {
        println!(
            "{:<10} {:<20} {:<12} {:<12} {}",
            super::short_id(&s(&d["ID"])),
            s(&d["JobID"]),
            d["JobVersion"],
            s(&d["Status"]),
            s(&d["StatusDescription"])
        );
    }
}

/// `nomad deployment status`: the deployment, then each group's progress.
pub(crate) fn print_status(d: &Value) {
    for (k, v) in [
        ("ID", super::short_id(&s(&d["ID"])).to_string()),
        ("Job ID", s(&d["JobID"])),
        ("Job Version", d["JobVersion"].to_string()),
        ("Status", s(&d["Status"])),
        ("Description", s(&d["StatusDescription"])),
    ] {
        println!("{k:<11} = {v}");
    }
    println!("\nDeployed");
    print_groups(d);
}

/// Each group's row, with Nomad's columns: `Auto Revert` when any group reverts,
/// `Promoted` and `Canaries` when any has canaries.
pub(crate) fn print_groups(d: &Value) {
    let groups = d["TaskGroups"].as_object().cloned().unwrap_or_default();
    let any = |k: &str| {
        groups.values().any(|g| match &g[k] {
            Value::Bool(b) => *b,
            Value::Number(n) => n.as_u64().unwrap_or(0) > 0,
            _ => false,
        })
    };
    let (revert, canaries) = (any("AutoRevert"), any("DesiredCanaries"));
    let mut head = vec!["Task Group"];
    if revert {
        head.push("Auto Revert");
    }
    if canaries {
        head.push("Promoted");
    }
    head.push("Desired");
    if canaries {
        head.push("Canaries");
    }
    head.extend(["Placed", "Healthy", "Unhealthy", "Progress Deadline"]);
    let mut rows = vec![head.iter().map(|h| h.to_string()).collect::<Vec<_>>()];
    for (name, g) in &groups {
        let mut row = vec![name.clone()];
        if revert {
            row.push(g["AutoRevert"].to_string());
        }
        if canaries {
            row.push(if g["DesiredCanaries"].as_u64().unwrap_or(0) > 0 {
                g["Promoted"].to_string()
            } else {
                "N/A".into()
            });
        }
        row.push(g["DesiredTotal"].to_string());
        if canaries {
            row.push(g["DesiredCanaries"].to_string());
        }
        row.push(g["PlacedAllocs"].to_string());
        row.push(g["HealthyAllocs"].to_string());
        row.push(g["UnhealthyAllocs"].to_string());
        row.push(match g["RequireProgressBy"].as_str() {
            Some(t) if !t.starts_with("0001-") => super::format_time(&g["RequireProgressBy"]),
            _ => "N/A".into(),
        });
        rows.push(row);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", line.join("  ").trim_end());
    }
}

/// Follow the deployment of the job version registered at `job_modify_index`: its table
/// each time it changes, until it ends or waits for a promotion. `None` when that version
/// has no deployment (another job type, `max_parallel = 0`, nothing to roll out). Exit
/// code: 0 successful or waiting for a promotion, 2 failed or cancelled.
pub(crate) async fn follow(
    api: &ApiArgs,
    namespace: &str,
    job_id: &str,
    job_modify_index: u64,
) -> anyhow::Result<Option<i32>> {
    let path = format!(
        "/v1/job/{}/deployment?namespace={}",
        super::enc(job_id),
        super::enc(namespace)
    );
    let mut index = 0u64;
    let mut shown = String::new();
    loop {
        let resp = api
            .client()?
            .get(api.url(&format!("{path}&index={index}&wait=10s")))
            .send()
            .await?;
        index = resp
            .headers()
            .get("X-Nomad-Index")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(index);
        let d: Value = resp.json().await?;
        if d.is_null() || d["JobSpecModifyIndex"].as_u64() != Some(job_modify_index) {
            return Ok(None);
        }
        let now = format!(
            "{}|{}|{}",
            d["Status"], d["StatusDescription"], d["TaskGroups"]
        );
        if now != shown {
            if shown.is_empty() {
                println!(
                    "==> Monitoring deployment {:?}",
                    super::short_id(&s(&d["ID"]))
                );
            }
            println!("    {} - {}", s(&d["Status"]), s(&d["StatusDescription"]));
            print_groups(&d);
            shown = now;
        }
        let status = s(&d["Status"]);
        let needs_promotion =
            s(&d["StatusDescription"]) == "Deployment is running but requires manual promotion";
        match status.as_str() {
            "successful" => {
                println!(
                    "==> Deployment {:?} successful",
                    super::short_id(&s(&d["ID"]))
                );
                return Ok(Some(0));
            }
            "failed" | "cancelled" => {
                println!(
                    "==> Deployment {:?} {status}: {}",
                    super::short_id(&s(&d["ID"])),
                    s(&d["StatusDescription"])
                );
                return Ok(Some(2));
            }
            _ if needs_promotion => {
                println!(
                    "==> Deployment {:?} waits for a promotion: agent deployment promote {}",
                    super::short_id(&s(&d["ID"])),
                    s(&d["ID"])
                );
                return Ok(Some(0));
            }
            _ => {}
        }
    }
}
