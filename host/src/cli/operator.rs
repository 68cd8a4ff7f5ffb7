//! `agent operator api|metrics|raft list-peers|scheduler get-config`, as
//! `nomad operator …`: a raw API call with the CLI's address and token, the agent's
//! metrics, the (one) raft peer, and the scheduler's configuration.

use super::{ApiArgs, columns, key_values, s};

/// Operator commands.
#[derive(Debug, clap::Subcommand)]
pub enum OperatorCommand {
    /// Call an API path with the CLI's address and token; print the answer.
    Api {
        #[command(flatten)]
        api: ApiArgs,
        /// HTTP method (default GET, or POST with `-d`).
        #[arg(short = 'X')]
        method: Option<String>,
        /// A request body (`@FILE` reads it from a file).
        #[arg(short = 'd')]
        data: Option<String>,
        /// The path, e.g. `/v1/jobs?filter=…`.
        path: String,
    },
    /// The scheduler's configuration.
    #[command(subcommand)]
    Scheduler(SchedulerCommand),
    /// The raft peers: this agent alone, the leader and only voter.
    #[command(subcommand)]
    Raft(RaftCommand),
    /// The agent's metrics: go-metrics JSON, or Prometheus text with `-format prometheus`.
    Metrics {
        #[command(flatten)]
        api: ApiArgs,
        /// Indent the JSON.
        #[arg(long)]
        pretty: bool,
        /// `prometheus` for Prometheus' text format.
        #[arg(long)]
        format: Option<String>,
        /// `-json`, or `-t TEMPLATE` over the metrics summary.
        #[command(flatten)]
        out: super::FormatArgs,
    },
}

/// `agent operator raft …`.
#[derive(Debug, clap::Subcommand)]
pub enum RaftCommand {
    /// The raft peers, as `nomad operator raft list-peers` prints them.
    ListPeers {
        #[command(flatten)]
        api: ApiArgs,
        /// Accepted as Nomad's (every read here is current).
        #[arg(long)]
        stale: bool,
    },
}

/// `agent operator scheduler …`.
#[derive(Debug, clap::Subcommand)]
pub enum SchedulerCommand {
    /// Print the scheduler's configuration.
    GetConfig {
        #[command(flatten)]
        api: ApiArgs,
        /// `-json`, or `-t TEMPLATE` (a Go template over the same data).
        #[command(flatten)]
        format: super::FormatArgs,
    },
}

pub(super) async fn run(cmd: OperatorCommand) -> anyhow::Result<i32> {
    match cmd {
        OperatorCommand::Api {
            api,
            method,
            data,
            path,
        } => raw(&api, method, data, &path).await,
        OperatorCommand::Raft(RaftCommand::ListPeers { api, stale: _ }) => {
            let v = api.get("/v1/operator/raft/configuration").await?;
            let mut servers = v["Servers"].as_array().cloned().unwrap_or_default();
            servers.sort_by_key(|p| s(&p["Node"]));
            let mut rows = vec![
                ["Node", "ID", "Address", "State", "Voter", "RaftProtocol"]
                    .map(String::from)
                    .to_vec(),
            ];
            for p in &servers {
                let state = if p["Leader"] == true {
                    "leader"
                } else {
                    "follower"
                };
                rows.push(vec![
                    s(&p["Node"]),
                    s(&p["ID"]),
                    s(&p["Address"]),
                    state.into(),
                    p["Voter"].as_bool().unwrap_or(false).to_string(),
                    s(&p["RaftProtocol"]),
                ]);
            }
            print!("{}", columns(&rows));
            Ok(0)
        }
        OperatorCommand::Metrics {
            api,
            pretty,
            format,
            out,
        } => {
            if out.wanted() {
                return Ok(out.print(&api.get("/v1/metrics").await?));
            }
            let mut q = Vec::new();
            if pretty {
                q.push("pretty=1".to_string());
            }
            if let Some(f) = format {
                q.push(format!("format={}", super::enc(&f)));
            }
            let path = if q.is_empty() {
                "/v1/metrics".to_string()
            } else {
                format!("/v1/metrics?{}", q.join("&"))
            };
            raw(&api, None, None, &path).await
        }
        OperatorCommand::Scheduler(SchedulerCommand::GetConfig { api, format }) => {
            let v = api.get("/v1/operator/scheduler/configuration").await?;
            if format.wanted() {
                return Ok(format.print(&v));
            }
            let c = &v["SchedulerConfig"];
            let flag = |k: &str| c[k].to_string();
            print!(
                "{}",
                key_values(&[
                    (
                        "Scheduler Algorithm",
                        c["SchedulerAlgorithm"].as_str().unwrap_or("").into()
                    ),
                    (
                        "Memory Oversubscription",
                        c["MemoryOversubscriptionEnabled"].to_string()
                    ),
                    ("Reject Job Registration", flag("RejectJobRegistration")),
                    ("Pause Eval Broker", flag("PauseEvalBroker")),
                    (
                        "Preemption System Scheduler",
                        c["PreemptionConfig"]["SystemSchedulerEnabled"].to_string()
                    ),
                    (
                        "Preemption Service Scheduler",
                        c["PreemptionConfig"]["ServiceSchedulerEnabled"].to_string()
                    ),
                    (
                        "Preemption Batch Scheduler",
                        c["PreemptionConfig"]["BatchSchedulerEnabled"].to_string()
                    ),
                ])
            );
            Ok(0)
        }
    }
}

/// `operator api`: the answer's body as the agent sent it; exit 1 on an error status.
async fn raw(
    api: &ApiArgs,
    method: Option<String>,
    data: Option<String>,
    path: &str,
) -> anyhow::Result<i32> {
    let body = match data.as_deref() {
        Some(d) => Some(match d.strip_prefix('@') {
            Some(file) => {
                std::fs::read(file).map_err(|e| anyhow::anyhow!("reading {file}: {e}"))?
            }
            None => d.as_bytes().to_vec(),
        }),
        None => None,
    };
    let method = method.unwrap_or_else(|| if body.is_some() { "POST" } else { "GET" }.into());
    let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes())
        .map_err(|_| anyhow::anyhow!("-X {method:?}: not an HTTP method"))?;
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    let mut req = api.client()?.request(method, api.url(&path));
    if let Some(b) = body {
        req = req.body(b);
    }
    let resp = req
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("contacting the agent at {}: {e}", api.address))?;
    let status = resp.status();
    let text = resp.text().await?;
    if status.is_success() {
        println!("{text}");
        Ok(0)
    } else {
        eprintln!("{} {}", status.as_u16(), text.trim());
        Ok(1)
    }
}
