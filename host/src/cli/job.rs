//! `agent job run|status|stop|validate|inspect`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;

use super::ApiArgs;

/// The namespace a command acts in (`-namespace`, `NOMAD_NAMESPACE`, default `default`).
#[derive(Debug, Clone, clap::Args)]
pub struct Namespace {
    /// Namespace.
    #[arg(long = "namespace", env = "NOMAD_NAMESPACE", default_value = "default")]
    pub namespace: String,
}

/// HCL variable values of a job file (`-var`, `-var-file`), as `nomad job run|plan|validate`
/// take them.
#[derive(Debug, Clone, clap::Args)]
pub struct VarArgs {
    /// A value for an HCL `variable` block: `-var name=value` (repeatable; wins over
    /// `-var-file`).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
    /// An HCL file of `name = value` variable values (repeatable; a later file wins).
    #[arg(long = "var-file", value_name = "FILE")]
    pub var_files: Vec<PathBuf>,
}

/// `agent job periodic …`.
#[derive(Debug, clap::Subcommand)]
pub enum PeriodicCommand {
    /// Launch a periodic job's child now.
    Force {
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        ns: Namespace,
        /// Periodic job id.
        id: String,
    },
}

/// Job commands.
#[derive(Debug, clap::Subcommand)]
pub enum JobCommand {
    /// Submit a job file (HCL or Nomad JSON, sent with its source as Nomad's CLI does) and
    /// follow it until it settles.
    Run {
        /// API address and token.
        #[command(flatten)]
        api: ApiArgs,
        /// Return after submitting, without following.
        #[arg(long)]
        detach: bool,
        /// Print the JSON that would be submitted (`{"Job": …}`), and submit nothing.
        #[arg(long)]
        output: bool,
        /// Register only if the job's modify index is this one (0: only a new job), as
        /// `job plan` prints it.
        #[arg(long = "check-index", value_name = "INDEX")]
        check_index: Option<u64>,
        #[command(flatten)]
        vars: VarArgs,
        /// The job file.
        file: PathBuf,
    },
    /// Show jobs, or one job and its allocations.
    Status {
        /// API address and token.
        #[command(flatten)]
        api: ApiArgs,
        /// `-json`, or `-t TEMPLATE` (a Go template over the same data).
        #[command(flatten)]
        format: super::FormatArgs,
        /// Job id.
        id: Option<String>,
    },
    /// Check a job file: its syntax here, then the agent's checks (drivers loaded, driver
    /// config valid). Exits 1 naming every problem.
    Validate {
        /// API address and token.
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        vars: VarArgs,
        /// The job file.
        file: PathBuf,
    },
    /// Print a registered job as JSON (`{"Job": ...}`, what `job run` takes back).
    Inspect {
        /// API address and token.
        #[command(flatten)]
        api: ApiArgs,
        /// `-json`, or `-t TEMPLATE` (a Go template over the same data).
        #[command(flatten)]
        format: super::FormatArgs,
        /// Job id.
        id: String,
    },
    /// Show what running a job file would change, without changing anything. Exit 0: no
    /// allocation created or destroyed; 1: some would be; 255: an error.
    Plan {
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        vars: VarArgs,
        /// The job file.
        file: PathBuf,
    },
    /// Dispatch a parameterized job: a child with `-meta` and the input file (`-` for
    /// stdin) as its payload.
    Dispatch {
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        ns: Namespace,
        /// Metadata `key=value` (repeatable).
        #[arg(long = "meta", value_name = "KEY=VALUE")]
        meta: Vec<String>,
        /// The child's id suffix template.
        #[arg(long = "id-prefix-template")]
        id_prefix_template: Option<String>,
        /// Parameterized job id.
        id: String,
        /// Input file (`-`: stdin).
        input: Option<PathBuf>,
    },
    /// Periodic jobs: `force` launches one now.
    #[command(subcommand)]
    Periodic(PeriodicCommand),
    /// A job's versions, newest first.
    History {
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        ns: Namespace,
        /// Show each version's diff.
        #[arg(short = 'p')]
        diffs: bool,
        /// `-json`, or `-t TEMPLATE` over the versions.
        #[command(flatten)]
        format: super::FormatArgs,
        /// Job id.
        id: String,
    },
    /// Register an earlier version of a job again.
    Revert {
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        ns: Namespace,
        /// Job id.
        id: String,
        /// The version to go back to.
        version: u64,
    },
    /// Change a group's count: `JOB [GROUP] COUNT`.
    Scale {
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        ns: Namespace,
        /// Job id.
        id: String,
        /// `[GROUP] COUNT`.
        #[arg(num_args = 1..=2, required = true)]
        args: Vec<String>,
    },
    /// A job's allocations.
    Allocs {
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        ns: Namespace,
        /// Every version's allocations, not only the current one's.
        #[arg(long)]
        all: bool,
        /// `-json`, or `-t TEMPLATE` over the allocations.
        #[command(flatten)]
        format: super::FormatArgs,
        /// Job id.
        id: String,
    },
    /// Evaluate a job again.
    Eval {
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        ns: Namespace,
        /// Replace failed allocations now, whatever their reschedule policy.
        #[arg(long = "force-reschedule")]
        force_reschedule: bool,
        /// Job id.
        id: String,
    },
    /// Stop a job.
    Stop {
        /// API address and token.
        #[command(flatten)]
        api: ApiArgs,
        /// Also forget the job.
        #[arg(long)]
        purge: bool,
        /// Job id.
        id: String,
    },
}

pub(super) async fn run(cmd: JobCommand) -> anyhow::Result<i32> {
    match cmd {
        JobCommand::Run {
            api,
            detach,
            output,
            check_index,
            vars,
            file,
        } => {
            if output {
                return match super::read_job_file(&file, &vars.vars, &vars.var_files) {
                    Ok(job) => {
                        super::print_json(&serde_json::json!({ "Job": job }));
                        Ok(0)
                    }
                    Err(e) => {
                        eprintln!("Error: {e:#}");
                        Ok(1)
                    }
                };
            }
            let opts = RunOptions {
                detach,
                check_index,
            };
            run_job(&api, &file, &vars.vars, &vars.var_files, opts).await
        }
        JobCommand::Status { api, format, id } => job_status(&api, id.as_deref(), &format).await,
        JobCommand::Plan { api, vars, file } => {
            super::job_more::plan(&api, &file, &vars.vars, &vars.var_files).await
        }
        JobCommand::Dispatch {
            api,
            ns,
            meta,
            id_prefix_template,
            id,
            input,
        } => {
            super::job_more::dispatch(
                &api,
                &ns.namespace,
                &id,
                &meta,
                id_prefix_template.as_deref(),
                input.as_ref(),
            )
            .await
        }
        JobCommand::Periodic(PeriodicCommand::Force { api, ns, id }) => {
            super::job_more::periodic_force(&api, &ns.namespace, &id).await
        }
        JobCommand::History {
            api,
            ns,
            diffs,
            format,
            id,
        } => super::job_more::history(&api, &ns.namespace, &id, diffs, &format).await,
        JobCommand::Revert {
            api,
            ns,
            id,
            version,
        } => super::job_more::revert(&api, &ns.namespace, &id, version).await,
        JobCommand::Scale { api, ns, id, args } => {
            super::job_more::scale(&api, &ns.namespace, &id, &args).await
        }
        JobCommand::Allocs {
            api,
            ns,
            all,
            format,
            id,
        } => super::job_more::allocs(&api, &ns.namespace, &id, all, &format).await,
        JobCommand::Eval {
            api,
            ns,
            force_reschedule,
            id,
        } => super::job_more::eval(&api, &ns.namespace, &id, force_reschedule).await,
        JobCommand::Validate { api, vars, file } => {
            validate(&api, &file, &vars.vars, &vars.var_files).await
        }
        JobCommand::Inspect { api, format, id } => {
            let job = api.get(&format!("/v1/job/{}", super::enc(&id))).await?;
            // As Nomad's: `-json` and `-t` see the job itself, the plain output wraps it
            // as `job run` takes it back.
            if format.wanted() {
                return Ok(format.print(&job));
            }
            super::print_json(&serde_json::json!({ "Job": job }));
            Ok(0)
        }
        JobCommand::Stop { api, purge, id } => stop(&api, purge, &id).await,
    }
}

/// `job validate FILE`: its syntax here, then the agent's checks; exit 1 naming each
/// problem.
async fn validate(
    api: &ApiArgs,
    file: &std::path::Path,
    vars: &[String],
    var_files: &[PathBuf],
) -> anyhow::Result<i32> {
    let job = super::read_job_file(&file.to_path_buf(), vars, var_files)?;
    let v = api
        .call(
            reqwest::Method::POST,
            "/v1/validate/job",
            Some(&serde_json::json!({ "Job": job })),
        )
        .await?;
    let errors: Vec<String> = v["ValidationErrors"]
        .as_array()
        .map(|e| {
            e.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if let Some(w) = v["Warnings"].as_str().filter(|w| !w.is_empty()) {
        println!("Job Warnings:\n{w}\n");
    }
    if errors.is_empty() {
        println!("Job validation successful");
        return Ok(0);
    }
    eprintln!("Job validation errors:");
    for e in &errors {
        eprintln!("  * {e}");
    }
    Ok(1)
}

/// `job stop [-purge] ID`.
async fn stop(api: &ApiArgs, purge: bool, id: &str) -> anyhow::Result<i32> {
    let resp = api
        .client()?
        .delete(api.url(&format!("/v1/job/{}?purge={purge}", super::enc(id))))
        .send()
        .await?;
    let status = resp.status();
    let text = resp.text().await?;
    if !status.is_success() {
        anyhow::bail!("stopping job {id:?}: {status}: {text}");
    }
    let v: Value = serde_json::from_str(&text)?;
    println!(
        "==> Job {id:?} stopped (evaluation {})",
        v["EvalID"].as_str().unwrap_or("")
    );
    Ok(0)
}

/// Submit `file`, then print task events as they happen until every allocation settles.
/// Exit code: 0 when every allocation is running or complete, 2 when one failed.
pub async fn job_run(
    api: &ApiArgs,
    file: &PathBuf,
    vars: &[String],
    detach: bool,
) -> anyhow::Result<i32> {
    job_run_with_var_files(api, file, vars, &[], detach).await
}

/// How `job run` submits and follows.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// Return after submitting.
    pub detach: bool,
    /// `-check-index`: register only over this modify index.
    pub check_index: Option<u64>,
}

/// [`job_run`] with `-var-file` files, whose values `vars` override.
pub async fn job_run_with_var_files(
    api: &ApiArgs,
    file: &PathBuf,
    vars: &[String],
    var_files: &[PathBuf],
    detach: bool,
) -> anyhow::Result<i32> {
    let opts = RunOptions {
        detach,
        ..Default::default()
    };
    run_job(api, file, vars, var_files, opts).await
}

async fn run_job(
    api: &ApiArgs,
    file: &PathBuf,
    vars: &[String],
    var_files: &[PathBuf],
    opts: RunOptions,
) -> anyhow::Result<i32> {
    let detach = opts.detach;
    let (job, submission) = super::read_job_source(file, vars, var_files)?;
    let client = api.client()?;
    let (eval_id, job_modify_index) =
        submit(api, &client, file, &job, submission, opts.check_index).await?;
    if job.is_periodic() || job.is_parameterized() {
        // As `nomad job run`: such a job is registered, not run; its children are.
        println!("Job registration successful");
        if let Some(line) = job
            .periodic
            .as_ref()
            .filter(|_| !job.is_parameterized())
            .and_then(next_launch)
        {
            println!("{line}");
        }
        return Ok(0);
    }
    println!("==> Job {:?} submitted (evaluation {eval_id})", job.id);
    if detach {
        return Ok(0);
    }
    let placement_failed = match report_eval(api, &client, &job, &eval_id).await? {
        Placement::NoneFits => return Ok(2),
        Placement::Partial => true,
        Placement::Whole => false,
    };
    // The evaluation is over, so what it placed is in the job's allocations: an unchanged
    // job placed nothing, and there is nothing to wait for but a deployment still rolling.
    let path = format!(
        "/v1/job/{}/allocations?namespace={}",
        super::enc(&job.id),
        super::enc(&job.namespace)
    );
    let placed_any = api
        .get(&path)
        .await?
        .as_array()
        .is_some_and(|a| a.iter().any(|a| a["EvalID"] == eval_id.as_str()));
    if !placed_any && !placement_failed {
        println!("==> No allocation placed or changed: the job is as registered before");
        let deployed =
            super::deployment::follow(api, &job.namespace, &job.id, job_modify_index).await?;
        return Ok(deployed.unwrap_or(0));
    }
    follow_placed(
        api,
        client,
        &job,
        &eval_id,
        placement_failed,
        job_modify_index,
    )
    .await
}

/// `Approximate next launch time: … (… from now)`, as `nomad job run` prints it for an
/// enabled periodic job; `None` when it will not launch.
fn next_launch(p: &crate::jobspec::PeriodicConfig) -> Option<String> {
    if !p.enabled {
        return None;
    }
    let schedule = crate::cron::Schedule::parse(&p.specs, &p.time_zone).ok()?;
    let now = jiff::Timestamp::now();
    let next = schedule.next_after(now)?;
    let secs = next.as_second() - now.as_second();
    Some(format!(
        "Approximate next launch time: {} ({} from now)",
        next.strftime("%Y-%m-%dT%H:%M:%SZ"),
        go_duration(secs.max(0) as u64)
    ))
}

/// Whole seconds as Go's `time.Duration` prints them: `4m12s`, `1h0m5s`, `0s`.
fn go_duration(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

/// Follow the allocations evaluation `eval_id` placed, printing their task events, until
/// each has settled; then, for a new version of a service job, its deployment. Exit code:
/// 2 when one failed or part could not be placed, else the deployment's (0 without one).
async fn follow_placed(
    api: &ApiArgs,
    client: reqwest::Client,
    job: &crate::jobspec::Job,
    eval_id: &str,
    placement_failed: bool,
    job_modify_index: u64,
) -> anyhow::Result<i32> {
    // Per task, the time of the newest event printed: events are a ring of the newest 10,
    // so position is no guide to what is new.
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    let mut placed = false;
    let mut index = 0u64;
    loop {
        let url = api.url(&format!(
            "/v1/job/{}/allocations?namespace={}&index={index}&wait=10s",
            super::enc(&job.id),
            super::enc(&job.namespace)
        ));
        let resp = client.get(url).send().await?;
        index = nomad_index(&resp).unwrap_or(index);
        let allocs: Vec<Value> = resp.json().await?;
        let ours: Vec<&Value> = allocs.iter().filter(|a| a["EvalID"] == eval_id).collect();
        if !placed && !ours.is_empty() {
            println!("==> {} allocation(s) placed", ours.len());
            placed = true;
        }
        print_new_events(&ours, &mut seen);
        if placed && ours.iter().all(|a| settled(a, job.job_type)) {
            let failed: Vec<_> = ours
                .iter()
                .filter(|a| a["ClientStatus"] == "failed" || a["ClientStatus"] == "lost")
                .collect();
            for a in &ours {
                println!(
                    "==> Allocation {} {}",
                    a["ID"].as_str().unwrap_or(""),
                    a["ClientStatus"].as_str().unwrap_or("")
                );
            }
            if !failed.is_empty() || placement_failed {
                return Ok(2);
            }
            // A new version of a service job rolls out as a deployment: follow it, as
            // `nomad job run` does, to its end or until it waits for a promotion (not when
            // part of it could not be placed: it would wait for its progress deadline).
            let deployed =
                super::deployment::follow(api, &job.namespace, &job.id, job_modify_index).await?;
            return Ok(deployed.unwrap_or(0));
        }
        if !placed {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Send the job with its source (Nomad's `api.JobSubmission`: the fields a client sets);
/// prints the register answer's warnings; the evaluation id and the job's modify index.
async fn submit(
    api: &ApiArgs,
    client: &reqwest::Client,
    file: &std::path::Path,
    job: &crate::jobspec::Job,
    submission: crate::structs::JobSubmission,
    check_index: Option<u64>,
) -> anyhow::Result<(String, u64)> {
    // Nomad's `api.JobSubmission`: the fields a client sets.
    let submission = serde_json::json!({
        "Source": submission.source, "Format": submission.format,
        "VariableFlags": submission.variable_flags, "Variables": submission.variables,
    });
    let mut body = serde_json::json!({ "Job": job, "Submission": submission });
    if let Some(i) = check_index {
        body["EnforceIndex"] = true.into();
        body["JobModifyIndex"] = i.into();
    }
    let resp = client
        .post(api.url("/v1/jobs"))
        .json(&body)
        .send()
        .await
        .with_context(|| format!("contacting the agent at {}", api.address))?;
    let status = resp.status();
    let text = resp.text().await?;
    if !status.is_success() {
        anyhow::bail!("submitting {}: {status}: {text}", file.display());
    }
    let reg: Value = serde_json::from_str(&text)?;
    let eval_id = reg["EvalID"].as_str().unwrap_or_default().to_string();
    if let Some(w) = reg["Warnings"].as_str().filter(|w| !w.is_empty()) {
        println!("==> Job Warnings:\n{w}");
    }
    Ok((eval_id, reg["JobModifyIndex"].as_u64().unwrap_or(0)))
}

/// How much of a job its evaluation placed.
enum Placement {
    Whole,
    Partial,
    NoneFits,
}

/// Follow the evaluation to its end and print it, with Nomad's placement failure text.
async fn report_eval(
    api: &ApiArgs,
    client: &reqwest::Client,
    job: &crate::jobspec::Job,
    eval_id: &str,
) -> anyhow::Result<Placement> {
    if let Some(eval) = follow_eval(api, client, eval_id).await? {
        println!(
            "==> Evaluation triggered by {} finished with status {:?}",
            eval["TriggeredBy"].as_str().unwrap_or(""),
            eval["Status"].as_str().unwrap_or("")
        );
        if let Some(text) = super::placement::placement_failure(&eval) {
            println!(
                "==> Evaluation {:?} finished with status {:?} but failed to place all allocations:",
                eval["ID"].as_str().unwrap_or(""),
                eval["Status"].as_str().unwrap_or("")
            );
            print!("{text}");
            if let Some(b) = eval["BlockedEval"].as_str().filter(|b| !b.is_empty()) {
                println!("==> Evaluation {b:?} waiting for additional capacity to place remainder");
            }
            let wanted: u64 = job
                .task_groups
                .iter()
                .map(|g| u64::from(job.placed_count(g)))
                .sum();
            let failed: u64 = eval["QueuedAllocations"]
                .as_object()
                .map(|m| m.values().filter_map(Value::as_u64).sum())
                .unwrap_or(0);
            return Ok(if failed >= wanted {
                Placement::NoneFits
            } else {
                Placement::Partial
            });
        }
    }
    Ok(Placement::Whole)
}

/// Each task event not printed before, as `job run` shows them.
fn print_new_events(ours: &[&Value], seen: &mut BTreeMap<String, u64>) {
    for a in ours {
        let id = a["ID"].as_str().unwrap_or_default();
        let Some(states) = a["TaskStates"].as_object() else {
            continue;
        };
        for (task, st) in states {
            let events = st["Events"].as_array().cloned().unwrap_or_default();
            let key = format!("{id}/{task}");
            let last = seen.entry(key).or_insert(0);
            for ev in events
                .iter()
                .filter(|e| e["Time"].as_u64().unwrap_or(0) > *last)
            {
                println!(
                    "    {} {}[{}] {}: {}",
                    super::short_id(id),
                    a["TaskGroup"].as_str().unwrap_or(""),
                    task,
                    ev["Type"].as_str().unwrap_or(""),
                    ev["DisplayMessage"].as_str().unwrap_or("")
                );
            }
            *last = events
                .iter()
                .filter_map(|e| e["Time"].as_u64())
                .max()
                .unwrap_or(*last)
                .max(*last);
        }
    }
}

/// The `X-Nomad-Index` of an answer, for the next blocking query.
fn nomad_index(resp: &reqwest::Response) -> Option<u64> {
    resp.headers()
        .get("X-Nomad-Index")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// Wait until the evaluation `id` is no longer `pending` (the agent places after it
/// answers a registration), with blocking queries; `None` when there is none to follow.
async fn follow_eval(
    api: &ApiArgs,
    client: &reqwest::Client,
    id: &str,
) -> anyhow::Result<Option<Value>> {
    if id.is_empty() {
        return Ok(None);
    }
    let mut index = 0u64;
    loop {
        let url = api.url(&format!("/v1/evaluation/{id}?index={index}&wait=5s"));
        let resp = client.get(url).send().await?;
        if !resp.status().is_success() {
            return Ok(None);
        }
        index = nomad_index(&resp).unwrap_or(index);
        let eval: Value = resp.json().await?;
        if eval["Status"] != "pending" {
            return Ok(Some(eval));
        }
    }
}

/// Settled: every task is dead (the allocation finished), or, for a service job, every task
/// has started. A batch job is followed to its end, so the exit code tells how it ended.
fn settled(a: &Value, job_type: crate::jobspec::JobType) -> bool {
    let states: Vec<&Value> = a["TaskStates"]
        .as_object()
        .map(|m| m.values().collect())
        .unwrap_or_default();
    if states.is_empty() {
        return a["ClientStatus"] == "lost";
    }
    let all_dead = states.iter().all(|s| s["State"] == "dead");
    if job_type.runs_to_completion() {
        all_dead
    } else {
        all_dead || states.iter().all(|s| s["State"] != "pending")
    }
}

async fn job_status(
    api: &ApiArgs,
    id: Option<&str>,
    format: &super::FormatArgs,
) -> anyhow::Result<i32> {
    let client = api.client()?;
    if format.wanted() {
        let keys = match id {
            None => api
                .get("/v1/jobs")
                .await?
                .as_array()
                .into_iter()
                .flatten()
                .map(|j| (super::s(&j["Namespace"]), super::s(&j["ID"])))
                .collect(),
            Some(id) => {
                let j = api.get(&format!("/v1/job/{}", super::enc(id))).await?;
                vec![(super::s(&j["Namespace"]), super::s(&j["ID"]))]
            }
        };
        return Ok(format.print(&jobs_json(api, &keys).await?));
    }
    match id {
        None => job_list(api).await,
        Some(id) => one_job_status(api, &client, id).await,
    }
}

/// What `job status -json` and `-t` see, as Nomad's `JobJson`: each job's summary,
/// allocations, latest deployment (null when none) and evaluations.
async fn jobs_json(api: &ApiArgs, keys: &[(String, String)]) -> anyhow::Result<Value> {
    let mut out = Vec::new();
    for (ns, id) in keys {
        let path = |what: &str| {
            format!(
                "/v1/job/{}{what}?namespace={}",
                super::enc(id),
                super::enc(ns)
            )
        };
        out.push(serde_json::json!({
            "Summary": api.get(&path("/summary")).await?,
            "Allocations": api.get(&path("/allocations")).await?,
            "LatestDeployment": api.get(&path("/deployment")).await?,
            "Evaluations": api.get(&path("/evaluations")).await?,
        }));
    }
    Ok(Value::Array(out))
}

/// `job status` without an id: every job, a line each.
async fn job_list(api: &ApiArgs) -> anyhow::Result<i32> {
    let jobs = api.get("/v1/jobs").await?;
    println!(
        "{:<24} {:<8} {:<9} {:<10}",
        "ID", "Type", "Priority", "Status"
    );
    for j in jobs.as_array().cloned().unwrap_or_default() {
        println!(
            "{:<24} {:<8} {:<9} {:<10}",
            j["ID"].as_str().unwrap_or(""),
            j["Type"].as_str().unwrap_or(""),
            j["Priority"].to_string(),
            j["Status"].as_str().unwrap_or("")
        );
    }
    Ok(0)
}

/// `job status`'s first block: the job's identity and state, as Nomad prints it.
fn print_job_header(job: &Value) {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let datacenters = job["Datacenters"]
        .as_array()
        .filter(|d| !d.is_empty())
        .map(|d| d.iter().map(s).collect::<Vec<_>>().join(","))
        .unwrap_or_else(|| "*".into());
    print!(
        "{}",
        super::key_values(&[
            ("ID", s(&job["ID"])),
            ("Name", s(&job["Name"])),
            ("Submit Date", super::format_time(&job["SubmitTime"])),
            ("Type", s(&job["Type"])),
            ("Priority", job["Priority"].to_string()),
            ("Datacenters", datacenters),
            ("Namespace", s(&job["Namespace"])),
            ("Node Pool", s(&job["NodePool"])),
            ("Status", s(&job["Status"])),
            ("Periodic", (!job["Periodic"].is_null()).to_string()),
            (
                "Parameterized",
                (!job["ParameterizedJob"].is_null()).to_string()
            ),
        ])
    );
}

/// `Summary`: each group's allocations by client status, as `nomad job status` shows it.
async fn print_summary(api: &ApiArgs, id: &str) {
    let Ok(summary) = api
        .get(&format!("/v1/job/{}/summary", super::enc(id)))
        .await
    else {
        return;
    };
    let keys = [
        "Queued", "Starting", "Running", "Failed", "Complete", "Lost", "Unknown",
    ];
    let mut rows = vec![
        std::iter::once("Task Group")
            .chain(keys)
            .map(String::from)
            .collect::<Vec<_>>(),
    ];
    for (group, counts) in summary["Summary"].as_object().into_iter().flatten() {
        let mut row = vec![group.clone()];
        row.extend(
            keys.iter()
                .map(|k| counts[*k].as_u64().unwrap_or(0).to_string()),
        );
        rows.push(row);
    }
    print!("\nSummary\n{}", super::columns(&rows));
}

/// `job status ID`: the job, its newest placement failure, its allocations.
async fn one_job_status(api: &ApiArgs, client: &reqwest::Client, id: &str) -> anyhow::Result<i32> {
    let resp = client
        .get(api.url(&format!("/v1/job/{}", super::enc(id))))
        .send()
        .await?;
    if resp.status() == reqwest::StatusCode::NOT_FOUND {
        eprintln!("No job with id {id:?} found");
        return Ok(1);
    }
    let job: Value = resp.error_for_status()?.json().await?;
    print_job_header(&job);
    print_summary(api, id).await;
    // As `nomad job status`: the newest evaluation's placement failures, if any.
    if let Ok(evals) = api
        .get(&format!("/v1/job/{}/evaluations", super::enc(id)))
        .await
        && let Some(text) = evals
            .as_array()
            .and_then(|e| e.iter().find(|e| e["Status"] != "blocked"))
            .and_then(super::placement::placement_failure)
    {
        print!("\n{text}");
    }
    // As `nomad job status`: the latest deployment, with each group's progress.
    if let Ok(d) = api
        .get(&format!("/v1/job/{}/deployment", super::enc(id)))
        .await
        && !d.is_null()
    {
        println!(
            "\nLatest Deployment\nID          = {}\nStatus      = {}\nDescription = {}\n\nDeployed",
            super::short_id(d["ID"].as_str().unwrap_or("")),
            d["Status"].as_str().unwrap_or(""),
            d["StatusDescription"].as_str().unwrap_or("")
        );
        super::deployment::print_groups(&d);
    }
    let allocs = api
        .get(&format!("/v1/job/{}/allocations", super::enc(id)))
        .await?;
    println!(
        "\nAllocations\n{:<10} {:<10} {:<12} {:<8} {:<8}",
        "ID", "Task Group", "Desired", "Status", "Tasks"
    );
    let list = allocs.as_array().cloned().unwrap_or_default();
    for a in &list {
        let id = a["ID"].as_str().unwrap_or("");
        let tasks = a["TaskStates"].as_object().map(|m| m.len()).unwrap_or(0);
        println!(
            "{:<10} {:<10} {:<12} {:<8} {:<8}",
            super::short_id(id),
            a["TaskGroup"].as_str().unwrap_or(""),
            a["DesiredStatus"].as_str().unwrap_or(""),
            a["ClientStatus"].as_str().unwrap_or(""),
            tasks
        );
    }
    print_reschedules(api, &list).await;
    Ok(0)
}

/// Each allocation that replaced failed ones, with its attempts, and each failed one
/// waiting for its replacement, with when (its follow-up evaluation's `WaitUntil`).
async fn print_reschedules(api: &ApiArgs, allocs: &[Value]) {
    let mut lines = Vec::new();
    for a in allocs {
        let id = super::short_id(a["ID"].as_str().unwrap_or("")).to_string();
        let attempts = a["RescheduleTracker"]["Events"]
            .as_array()
            .map_or(0, Vec::len);
        if attempts > 0 {
            lines.push(format!("{id:<10} replaced {attempts} failed allocation(s)"));
        }
        let followup = a["FollowupEvalID"].as_str().unwrap_or("");
        if a["NextAllocation"] == "" && !followup.is_empty() {
            let when = match api.get(&format!("/v1/evaluation/{followup}")).await {
                Ok(e) if e["Status"] == "pending" => super::format_time(&e["WaitUntil"]),
                _ => continue,
            };
            lines.push(format!("{id:<10} failed: rescheduled at {when}"));
        }
    }
    if !lines.is_empty() {
        println!("\nReschedules");
        for l in lines {
            println!("{l}");
        }
    }
}
