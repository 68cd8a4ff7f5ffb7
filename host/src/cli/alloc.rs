//! `agent alloc status|logs|restart|signal|stop|fs` (`exec` in `alloc_exec.rs`), as `nomad alloc ...`: an allocation is
//! named by its id or any unique prefix of it.

use reqwest::Method;
use serde_json::{Value, json};

use super::{ApiArgs, format_time, short_id};

/// Allocation commands.
#[derive(Debug, clap::Subcommand)]
pub enum AllocCommand {
    /// Run a command in a running task: `-i` passes stdin (default), `-t` gives it a
    /// terminal (default when stdin is one); everything after the allocation is the command.
    Exec(super::alloc_exec::ExecArgs),
    /// Show an allocation: status, tasks and their recent events.
    Status {
        /// API address and token.
        #[command(flatten)]
        api: ApiArgs,
        /// `-json`, or `-t TEMPLATE` (a Go template over the same data).
        #[command(flatten)]
        format: super::FormatArgs,
        /// Allocation id or prefix.
        id: String,
    },
    /// Print a task's logs: stdout, or stderr with `-stderr`; `-f` alone follows both
    /// (each to the same stream here).
    Logs {
        /// API address and token.
        #[command(flatten)]
        api: ApiArgs,
        /// Keep printing as the task writes.
        #[arg(short = 'f')]
        follow: bool,
        /// Only stdout.
        #[arg(long, conflicts_with = "stderr")]
        stdout: bool,
        /// Only stderr.
        #[arg(long)]
        stderr: bool,
        /// Only the end of the log (the last `-n` lines, or `-c` bytes).
        #[arg(long)]
        tail: bool,
        /// Lines to show with `-tail`.
        #[arg(short = 'n', default_value_t = 10)]
        lines: usize,
        /// Bytes to show with `-tail` (instead of lines).
        #[arg(short = 'c')]
        bytes: Option<u64>,
        /// Allocation id or prefix.
        id: String,
        /// Task; may be left out when the allocation has one task.
        task: Option<String>,
    },
    /// Restart an allocation's tasks, or one task.
    Restart {
        /// API address and token.
        #[command(flatten)]
        api: ApiArgs,
        /// Allocation id or prefix.
        id: String,
        /// Task (default: all).
        task: Option<String>,
    },
    /// Send a signal to an allocation's tasks, or one task.
    Signal {
        /// API address and token.
        #[command(flatten)]
        api: ApiArgs,
        /// Signal to send.
        #[arg(short = 's', default_value = "SIGKILL")]
        signal: String,
        /// Allocation id or prefix.
        id: String,
        /// Task (default: all).
        task: Option<String>,
    },
    /// Stop an allocation.
    Stop {
        /// API address and token.
        #[command(flatten)]
        api: ApiArgs,
        /// Allocation id or prefix.
        id: String,
    },
    /// An allocation's files: a folder's listing, a file's content, or (`-stat`) what
    /// a path is.
    Fs {
        /// API address and token.
        #[command(flatten)]
        api: ApiArgs,
        /// Show the path's details instead of its content.
        #[arg(long)]
        stat: bool,
        /// Allocation id or prefix.
        id: String,
        /// Path within the allocation dir (default: its root).
        path: Option<String>,
    },
}

pub(super) async fn run(cmd: AllocCommand) -> anyhow::Result<i32> {
    match cmd {
        AllocCommand::Exec(a) => {
            let id = if a.job {
                super::alloc_exec::job_alloc(&a.api, &a.id).await?
            } else {
                resolve(&a.api, &a.id).await?
            };
            let task = one_task(&a.api, &id, a.task.clone()).await?;
            super::alloc_exec::run(a, id, task).await
        }
        AllocCommand::Status { api, format, id } => {
            let a = api
                .get(&format!("/v1/allocation/{}", resolve(&api, &id).await?))
                .await?;
            if format.wanted() {
                return Ok(format.print(&a));
            }
            print_status(&a);
            // The Nomad-native service checks, as `nomad alloc status` adds them.
            let id = a["ID"].as_str().unwrap_or_default();
            if let Ok(checks) = api
                .get(&format!("/v1/client/allocation/{}/checks", super::enc(id)))
                .await
            {
                print!("{}", checks_table(&checks));
            }
            Ok(0)
        }
        AllocCommand::Logs {
            api,
            follow,
            stdout,
            stderr,
            tail,
            lines,
            bytes,
            id,
            task,
        } => {
            let id = resolve(&api, &id).await?;
            let task = one_task(&api, &id, task).await?;
            let tail = tail.then_some((lines, bytes));
            if follow && !stdout && !stderr {
                // Both streams, each to the same stream here.
                let (a, b) = tokio::join!(
                    logs(&api, &id, &task, false, true, tail, false),
                    logs(&api, &id, &task, true, true, tail, true)
                );
                a.and(b)
            } else {
                logs(&api, &id, &task, stderr, follow, tail, false).await
            }
        }
        AllocCommand::Restart { api, id, task } => restart(&api, &id, task).await,
        AllocCommand::Signal {
            api,
            signal,
            id,
            task,
        } => {
            let id = resolve(&api, &id).await?;
            api.call(
                Method::POST,
                &format!("/v1/client/allocation/{id}/signal"),
                Some(&json!({ "Signal": signal, "Task": task.unwrap_or_default() })),
            )
            .await?;
            println!("==> Sent {signal} to allocation {}", short_id(&id));
            Ok(0)
        }
        AllocCommand::Stop { api, id } => stop(&api, &id).await,
        AllocCommand::Fs {
            api,
            stat,
            id,
            path,
        } => fs(&api, &id, path.as_deref().unwrap_or("/"), stat).await,
    }
}

/// `alloc fs [-stat] ID [PATH]`, as `nomad alloc fs`.
async fn fs(api: &ApiArgs, id: &str, path: &str, stat: bool) -> anyhow::Result<i32> {
    let id = resolve(api, id).await?;
    let q = format!("path={}", super::enc(path));
    let info = api.get(&format!("/v1/client/fs/stat/{id}?{q}")).await?;
    let row = |f: &Value| {
        vec![
            f["FileMode"].as_str().unwrap_or("").to_string(),
            f["Size"].to_string(),
            format_time(&f["ModTime"]),
            f["Name"].as_str().unwrap_or("").to_string(),
        ]
    };
    let header = || {
        ["Mode", "Size", "Modified Time", "Name"]
            .map(String::from)
            .to_vec()
    };
    if stat {
        print!("{}", super::columns(&[header(), row(&info)]));
        return Ok(0);
    }
    if info["IsDir"] == true {
        let list = api.get(&format!("/v1/client/fs/ls/{id}?{q}")).await?;
        let mut rows = vec![header()];
        rows.extend(list.as_array().into_iter().flatten().map(row));
        print!("{}", super::columns(&rows));
        return Ok(0);
    }
    let bytes = api
        .client()?
        .get(api.url(&format!("/v1/client/fs/cat/{id}?{q}")))
        .send()
        .await?
        .error_for_status()?
        .bytes()
        .await?;
    use std::io::Write;
    std::io::stdout().write_all(&bytes)?;
    Ok(0)
}

/// `alloc restart ID [TASK]`.
async fn restart(api: &ApiArgs, id: &str, task: Option<String>) -> anyhow::Result<i32> {
    let id = resolve(api, id).await?;
    api.call(
        Method::POST,
        &format!("/v1/client/allocation/{id}/restart"),
        Some(&json!({ "TaskName": task.clone().unwrap_or_default() })),
    )
    .await?;
    match task {
        Some(t) => println!("==> Task {t:?} of allocation {} restarted", short_id(&id)),
        None => println!("==> Allocation {} restarted", short_id(&id)),
    }
    Ok(0)
}

/// `alloc stop ID`.
async fn stop(api: &ApiArgs, id: &str) -> anyhow::Result<i32> {
    let id = resolve(api, id).await?;
    let v = api
        .call(Method::POST, &format!("/v1/allocation/{id}/stop"), None)
        .await?;
    println!(
        "==> Allocation {} stopping (evaluation {})",
        short_id(&id),
        v["EvalID"].as_str().unwrap_or("")
    );
    Ok(0)
}

/// The full id of the one allocation whose id starts with `prefix`.
async fn resolve(api: &ApiArgs, prefix: &str) -> anyhow::Result<String> {
    if prefix.is_empty() {
        anyhow::bail!("an allocation id or prefix is required");
    }
    let list = api
        .get(&format!("/v1/allocations?prefix={prefix}&namespace=*"))
        .await?;
    let ids: Vec<&str> = list
        .as_array()
        .map(|l| l.iter().filter_map(|a| a["ID"].as_str()).collect())
        .unwrap_or_default();
    match ids.as_slice() {
        [] => anyhow::bail!("No allocation(s) with prefix or id {prefix:?} found"),
        [one] => Ok(one.to_string()),
        many => anyhow::bail!(
            "Prefix {prefix:?} matched {} allocations: {}",
            many.len(),
            many.iter()
                .map(|i| short_id(i))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The task to read: the one named, or the allocation's only task.
async fn one_task(api: &ApiArgs, id: &str, task: Option<String>) -> anyhow::Result<String> {
    let a = api.get(&format!("/v1/allocation/{id}")).await?;
    let group = a["TaskGroup"].as_str().unwrap_or_default();
    let tasks: Vec<String> = a["Job"]["TaskGroups"]
        .as_array()
        .and_then(|gs| gs.iter().find(|g| g["Name"] == group))
        .and_then(|g| g["Tasks"].as_array())
        .map(|ts| {
            ts.iter()
                .filter_map(|t| t["Name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    match task {
        Some(t) if tasks.contains(&t) => Ok(t),
        Some(t) => anyhow::bail!(
            "allocation {} has no task {t:?} (tasks: {})",
            short_id(id),
            tasks.join(", ")
        ),
        None if tasks.len() == 1 => Ok(tasks[0].clone()),
        None => anyhow::bail!(
            "allocation {} has {} tasks; name one: {}",
            short_id(id),
            tasks.len(),
            tasks.join(", ")
        ),
    }
}

/// Print a log, or its tail, then follow it if asked, to stdout (or to stderr with
/// `to_stderr`, when both streams are followed). Reads go through the plain-text
/// logs endpoint; following resumes at the byte after what was printed.
async fn logs(
    api: &ApiArgs,
    id: &str,
    task: &str,
    stderr: bool,
    follow: bool,
    tail: Option<(usize, Option<u64>)>,
    to_stderr: bool,
) -> anyhow::Result<i32> {
    use std::io::Write;
    let kind = if stderr { "stderr" } else { "stdout" };
    let base = format!("/v1/client/fs/logs/{id}?task={task}&type={kind}&plain=true");
    let client = api.client()?;
    let fetch = |query: String| {
        let url = api.url(&format!("{base}{query}"));
        let client = client.clone();
        async move {
            let resp = client
                .get(url)
                .send()
                .await
                .map_err(|e| anyhow::anyhow!("contacting the agent at {}: {e}", api.address))?;
            let status = resp.status();
            if !status.is_success() {
                let text = resp.text().await.unwrap_or_default();
                anyhow::bail!("reading {kind} of {task:?}: {} ({})", text.trim(), status);
            }
            Ok::<_, anyhow::Error>(resp)
        }
    };
    let whole = fetch(String::new()).await?.bytes().await?;
    let printed = whole.len();
    let shown: &[u8] = match tail {
        None => &whole,
        Some((_, Some(c))) => &whole[whole.len().saturating_sub(c as usize)..],
        Some((n, None)) => tail_lines(&whole, n),
    };
    let write = |bytes: &[u8]| -> std::io::Result<()> {
        if to_stderr {
            let mut out = std::io::stderr().lock();
            out.write_all(bytes)?;
            out.flush()
        } else {
            let mut out = std::io::stdout().lock();
            out.write_all(bytes)?;
            out.flush()
        }
    };
    write(shown)?;
    if !follow {
        return Ok(0);
    }
    let mut resp = fetch(format!("&follow=true&origin=start&offset={printed}")).await?;
    while let Some(chunk) = resp.chunk().await? {
        write(&chunk)?;
    }
    Ok(0)
}

/// The last `n` lines of `text` (a final newline does not start another line).
fn tail_lines(text: &[u8], n: usize) -> &[u8] {
    if n == 0 {
        return &[];
    }
    let body = text.strip_suffix(b"\n").unwrap_or(text);
    let mut seen = 0;
    for (i, b) in body.iter().enumerate().rev() {
        if *b == b'\n' {
            seen += 1;
            if seen == n {
                return &text[i + 1..];
            }
        }
    }
    text
}

/// `Allocation Addresses`, as `nomad alloc status` prints them: each port's label
/// (`*` when dynamic), whether it is dynamic, and its host address (`-> to` when mapped).
fn print_addresses(a: &Value) {
    let ports = a["AllocatedResources"]["Shared"]["Ports"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if ports.is_empty() {
        return;
    }
    let group = a["Job"]["TaskGroups"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|g| g["Name"] == a["TaskGroup"]);
    let dynamic = |label: &str| {
        group.is_some_and(|g| {
            g["Networks"].as_array().into_iter().flatten().any(|n| {
                n["DynamicPorts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| p["Label"] == label)
            })
        })
    };
    let mut rows = vec![["Label", "Dynamic", "Address"].map(String::from).to_vec()];
    for p in &ports {
        let label = p["Label"].as_str().unwrap_or("");
        let d = dynamic(label);
        let to = p["To"]
            .as_u64()
            .filter(|t| *t > 0)
            .map(|t| format!(" -> {t}"))
            .unwrap_or_default();
        rows.push(vec![
            format!("{}{label}", if d { "*" } else { "" }),
            if d { "yes" } else { "no" }.into(),
            format!("{}:{}{to}", p["HostIP"].as_str().unwrap_or(""), p["Value"]),
        ]);
    }
    print!("\nAllocation Addresses:\n{}", super::columns(&rows));
}

/// `Nomad Service Checks:` with a row per check, sorted (nothing when there are none).
fn checks_table(checks: &Value) -> String {
    let Some(m) = checks.as_object().filter(|m| !m.is_empty()) else {
        return String::new();
    };
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let mut rows: Vec<Vec<String>> = m
        .values()
        .map(|c| {
            let task = match s(&c["Task"]) {
                t if t.is_empty() => "(group)".to_string(),
                t => t,
            };
            vec![
                s(&c["Service"]),
                task,
                s(&c["Check"]),
                s(&c["Mode"]),
                s(&c["Status"]),
            ]
        })
        .collect();
    rows.sort();
    rows.insert(
        0,
        ["Service", "Task", "Name", "Mode", "Status"]
            .map(String::from)
            .to_vec(),
    );
    format!("\nNomad Service Checks:\n{}", super::columns(&rows))
}

fn print_status(a: &Value) {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let rows = [
        ("ID", s(&a["ID"])),
        ("Eval ID", short_id(&s(&a["EvalID"])).to_string()),
        ("Name", s(&a["Name"])),
        ("Node ID", short_id(&s(&a["NodeID"])).to_string()),
        ("Node Name", s(&a["NodeName"])),
        ("Job ID", s(&a["JobID"])),
        ("Client Status", s(&a["ClientStatus"])),
        ("Client Description", s(&a["ClientDescription"])),
        ("Desired Status", s(&a["DesiredStatus"])),
        ("Desired Description", s(&a["DesiredDescription"])),
        ("Created", format_time(&a["CreateTime"])),
        ("Modified", format_time(&a["ModifyTime"])),
    ];
    for (k, v) in rows {
        println!("{k:<19} = {v}");
    }
    print_addresses(a);
    let Some(states) = a["TaskStates"].as_object() else {
        return;
    };
    for (task, st) in states {
        println!(
            "\nTask {task:?} is {:?}\nRestarts = {}",
            st["State"].as_str().unwrap_or(""),
            st["Restarts"]
        );
        println!(
            "\nRecent Events:\n{:<22}  {:<22}  Description",
            "Time", "Type"
        );
        let events = st["Events"].as_array().cloned().unwrap_or_default();
        for ev in events.iter().rev() {
            println!(
                "{:<22}  {:<22}  {}",
                format_time(&ev["Time"]),
                ev["Type"].as_str().unwrap_or(""),
                ev["DisplayMessage"].as_str().unwrap_or("")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tail_lines;

    #[test]
    fn tail_counts_lines_from_the_end() {
        assert_eq!(tail_lines(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(tail_lines(b"a\nb\nc", 2), b"b\nc");
        assert_eq!(tail_lines(b"a\nb\n", 5), b"a\nb\n");
        assert_eq!(tail_lines(b"a\nb\n", 0), b"");
        assert_eq!(tail_lines(b"", 3), b"");
    }
}
