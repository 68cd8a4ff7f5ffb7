//! `agent eval list|status`, `agent namespace list|status|apply|delete` and
//! `agent system gc`, as `nomad eval …`, `nomad namespace …` and `nomad system gc`.

use serde_json::json;

use super::job::Namespace;
use super::{ApiArgs, columns, enc, format_time, key_values, s, short_id};

/// Evaluation commands.
#[derive(Debug, clap::Subcommand)]
pub enum EvalCommand {
    /// Evaluations, oldest first (`-job`, `-status` narrow the list).
    List {
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        ns: Namespace,
        /// Only this job's.
        #[arg(long)]
        job: Option<String>,
        /// Only those with this status.
        #[arg(long)]
        status: Option<String>,
        /// `-json`, or `-t TEMPLATE` (a Go template over the same data).
        #[command(flatten)]
        format: super::FormatArgs,
    },
    /// One evaluation, with its placement failures.
    Status {
        #[command(flatten)]
        api: ApiArgs,
        /// `-json`, or `-t TEMPLATE` (a Go template over the same data).
        #[command(flatten)]
        format: super::FormatArgs,
        /// Evaluation id.
        id: String,
    },
}

/// Namespace commands.
#[derive(Debug, clap::Subcommand)]
pub enum NamespaceCommand {
    /// Every namespace the token may see.
    List {
        #[command(flatten)]
        api: ApiArgs,
        /// `-json`, or `-t TEMPLATE` (a Go template over the same data).
        #[command(flatten)]
        format: super::FormatArgs,
    },
    /// One namespace.
    Status {
        #[command(flatten)]
        api: ApiArgs,
        /// Namespace name.
        name: String,
    },
    /// Create or update a namespace (a management token's work).
    Apply {
        #[command(flatten)]
        api: ApiArgs,
        /// Its description.
        #[arg(long)]
        description: Option<String>,
        /// Namespace name.
        name: String,
    },
    /// Delete a namespace with nothing left in it.
    Delete {
        #[command(flatten)]
        api: ApiArgs,
        /// Namespace name.
        name: String,
    },
}

/// `agent system …`.
#[derive(Debug, clap::Subcommand)]
pub enum SystemCommand {
    /// Collect what has ended: dead jobs, old evaluations, ended deployments, and the
    /// client's ended allocations.
    Gc {
        #[command(flatten)]
        api: ApiArgs,
    },
}

pub(super) async fn run_eval(cmd: EvalCommand) -> anyhow::Result<i32> {
    match cmd {
        EvalCommand::List {
            api,
            ns,
            job,
            status,
            format,
        } => list_evals(&api, &ns.namespace, job, status, &format).await,
        EvalCommand::Status { api, format, id } => eval_status(&api, &format, &id).await,
    }
}

/// `eval list`.
async fn list_evals(
    api: &ApiArgs,
    namespace: &str,
    job: Option<String>,
    status: Option<String>,
    format: &super::FormatArgs,
) -> anyhow::Result<i32> {
    let mut url = format!("/v1/evaluations?namespace={}", enc(namespace));
    if let Some(j) = job {
        url.push_str(&format!("&job={}", enc(&j)));
    }
    if let Some(st) = status {
        url.push_str(&format!("&status={}", enc(&st)));
    }
    let list = api.get(&url).await?;
    if format.wanted() {
        return Ok(format.print(&list));
    }
    let mut rows = vec![
        [
            "ID",
            "Priority",
            "Triggered By",
            "Job ID",
            "Namespace",
            "Node ID",
            "Status",
            "Placement Failures",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for e in list.as_array().into_iter().flatten() {
        let failures = e["FailedTGAllocs"]
            .as_object()
            .is_some_and(|m| !m.is_empty());
        rows.push(vec![
            short_id(&s(&e["ID"])).into(),
            e["Priority"].to_string(),
            s(&e["TriggeredBy"]),
            s(&e["JobID"]),
            s(&e["Namespace"]),
            short_id(&s(&e["NodeID"])).into(),
            s(&e["Status"]),
            failures.to_string(),
        ]);
    }
    if rows.len() == 1 {
        println!("No evaluations found");
    } else {
        print!("{}", columns(&rows));
    }
    Ok(0)
}

/// `eval status ID`.
async fn eval_status(api: &ApiArgs, format: &super::FormatArgs, id: &str) -> anyhow::Result<i32> {
    let e = api.get(&format!("/v1/evaluation/{}", enc(id))).await?;
    if format.wanted() {
        return Ok(format.print(&e));
    }
    let failures = e["FailedTGAllocs"]
        .as_object()
        .is_some_and(|m| !m.is_empty());
    print!(
        "{}",
        key_values(&[
            ("ID", s(&e["ID"])),
            ("Create Time", format_time(&e["CreateTime"])),
            ("Modify Time", format_time(&e["ModifyTime"])),
            ("Status", s(&e["Status"])),
            ("Status Description", s(&e["StatusDescription"])),
            ("Type", s(&e["Type"])),
            ("TriggeredBy", s(&e["TriggeredBy"])),
            ("Job ID", s(&e["JobID"])),
            ("Namespace", s(&e["Namespace"])),
            ("Priority", e["Priority"].to_string()),
            ("Placement Failures", failures.to_string()),
        ])
    );
    if let Some(text) = super::placement::placement_failure(&e) {
        print!("\n{text}");
    }
    Ok(0)
}

pub(super) async fn run_namespace(cmd: NamespaceCommand) -> anyhow::Result<i32> {
    match cmd {
        NamespaceCommand::List { api, format } => {
            let list = api.get("/v1/namespaces").await?;
            if format.wanted() {
                return Ok(format.print(&list));
            }
            let mut rows = vec![["Name", "Description"].map(String::from).to_vec()];
            for n in list.as_array().into_iter().flatten() {
                rows.push(vec![s(&n["Name"]), s(&n["Description"])]);
            }
            print!("{}", columns(&rows));
            Ok(0)
        }
        NamespaceCommand::Status { api, name } => {
            let n = api.get(&format!("/v1/namespace/{}", enc(&name))).await?;
            let quota = Some(s(&n["Quota"])).filter(|q| !q.is_empty());
            print!(
                "{}",
                key_values(&[
                    ("Name", s(&n["Name"])),
                    ("Description", s(&n["Description"])),
                    ("Quota", quota.unwrap_or_else(|| "<none>".into())),
                ])
            );
            if let Some(meta) = n["Meta"].as_object().filter(|m| !m.is_empty()) {
                println!("\nMetadata");
                let pairs: Vec<(&str, String)> =
                    meta.iter().map(|(k, v)| (k.as_str(), s(v))).collect();
                print!("{}", key_values(&pairs));
            }
            Ok(0)
        }
        NamespaceCommand::Apply {
            api,
            description,
            name,
        } => {
            // As Nomad's: an existing namespace keeps what the flags do not change.
            let url = format!("/v1/namespace/{}", enc(&name));
            let mut body = api
                .get(&url)
                .await
                .unwrap_or_else(|_| json!({ "Name": name }));
            if let Some(d) = description {
                body["Description"] = d.into();
            }
            api.call(reqwest::Method::PUT, &url, Some(&body)).await?;
            println!("Successfully applied namespace {name:?}!");
            Ok(0)
        }
        NamespaceCommand::Delete { api, name } => {
            api.call(
                reqwest::Method::DELETE,
                &format!("/v1/namespace/{}", enc(&name)),
                None,
            )
            .await?;
            println!("Successfully deleted namespace {name:?}!");
            Ok(0)
        }
    }
}

pub(super) async fn run_system(cmd: SystemCommand) -> anyhow::Result<i32> {
    match cmd {
        SystemCommand::Gc { api } => {
            api.call(reqwest::Method::PUT, "/v1/system/gc", None)
                .await?;
            Ok(0)
        }
    }
}
