//! `agent job plan|dispatch|periodic force|history|revert|scale|allocs|eval`, with
//! `nomad job …`'s names, output and exit codes.

use std::path::PathBuf;

use base64::Engine;
use serde_json::{Value, json};

use super::{ApiArgs, columns, enc, format_time, key_values, s, short_id};

/// `?namespace=` for a job path.
fn ns_query(namespace: &str) -> String {
    format!("namespace={}", enc(namespace))
}

/// `nomad job plan`: the diff, what the scheduler would do, and the modify index to run
/// it with. Exit 0 when no allocation would be created or destroyed, 1 when some would,
/// 255 on an error (as Nomad's).
pub(super) async fn plan(
    api: &ApiArgs,
    file: &PathBuf,
    vars: &[String],
    var_files: &[PathBuf],
) -> anyhow::Result<i32> {
    let job = match super::read_job_file(file, vars, var_files) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("Error: {e:#}");
            return Ok(255);
        }
    };
    let path = format!("/v1/job/{}/plan?{}", enc(&job.id), ns_query(&job.namespace));
    let body = json!({ "Job": job, "Diff": true });
    let p = match api.call(reqwest::Method::POST, &path, Some(&body)).await {
        Ok(p) => p,
        Err(e) => {
            eprintln!("Error during plan: {e:#}");
            return Ok(255);
        }
    };
    if let Some(d) = p["Diff"].as_object() {
        print!("{}", diff_text(d));
    }
    println!("\nScheduler dry-run:");
    let failed = p["FailedTGAllocs"].as_object().filter(|f| !f.is_empty());
    match failed {
        None => println!("- All tasks successfully allocated."),
        Some(_) => {
            println!("- WARNING: Failed to place all allocations.");
            let eval = json!({ "FailedTGAllocs": p["FailedTGAllocs"] });
            if let Some(text) = super::placement::placement_failure(&eval) {
                print!("{text}");
            }
        }
    }
    if let Some(w) = p["Warnings"].as_str().filter(|w| !w.is_empty()) {
        println!("\nJob Warnings:\n{w}");
    }
    let index = p["JobModifyIndex"].as_u64().unwrap_or(0);
    println!(
        "\nJob Modify Index: {index}\nTo submit the job with version verification run:\n\nagent job run -check-index {index} {}\n",
        file.display()
    );
    let changes = p["Annotations"]["DesiredTGUpdates"]
        .as_object()
        .is_some_and(|g| {
            g.values().any(|u| {
                ["Place", "Stop", "DestructiveUpdate", "Migrate", "Canary"]
                    .iter()
                    .any(|k| u[*k].as_u64().unwrap_or(0) > 0)
            })
        });
    Ok(if changes { 1 } else { 0 })
}

/// A plan's diff as `nomad job plan` prints it: `+/-/~ Job: "id"`, then each group with
/// what the scheduler would do to it.
fn diff_text(d: &serde_json::Map<String, Value>) -> String {
    let mark = |t: &str| match t {
        "Added" => "+",
        "Deleted" => "-",
        "Edited" => "+/-",
        _ => "",
    };
    let ty = d.get("Type").and_then(Value::as_str).unwrap_or("None");
    let mut out = format!(
        "{} Job: {:?}\n",
        mark(ty),
        d.get("ID").and_then(Value::as_str).unwrap_or("")
    );
    for f in d
        .get("Fields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        out.push_str(&format!(
            "{} {}: {:?} => {:?}\n",
            mark(f["Type"].as_str().unwrap_or("")),
            f["Name"].as_str().unwrap_or(""),
            f["Old"].as_str().unwrap_or(""),
            f["New"].as_str().unwrap_or("")
        ));
    }
    for g in d
        .get("TaskGroups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let updates = g["Updates"]
            .as_object()
            .map(|u| {
                u.iter()
                    .map(|(k, v)| format!("{v} {k}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        out.push_str(&format!(
            "{} Task Group: {:?} ({updates})\n",
            mark(g["Type"].as_str().unwrap_or("")),
            g["Name"].as_str().unwrap_or("")
        ));
        for t in g["Tasks"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "  {} Task: {:?}\n",
                mark(t["Type"].as_str().unwrap_or("")),
                t["Name"].as_str().unwrap_or("")
            ));
        }
    }
    out
}

/// `nomad job dispatch`: a child of a parameterized job, with `-meta` and an input file
/// (or `-` for stdin) as its payload.
pub(super) async fn dispatch(
    api: &ApiArgs,
    namespace: &str,
    id: &str,
    meta: &[String],
    id_prefix_template: Option<&str>,
    input: Option<&PathBuf>,
) -> anyhow::Result<i32> {
    let mut m = serde_json::Map::new();
    for kv in meta {
        let Some((k, v)) = kv.split_once('=') else {
            anyhow::bail!("-meta {kv:?}: expected key=value");
        };
        m.insert(k.into(), v.into());
    }
    let payload = match input {
        None => Vec::new(),
        Some(p) if p.as_os_str() == "-" => {
            use std::io::Read;
            let mut buf = Vec::new();
            std::io::stdin().read_to_end(&mut buf)?;
            buf
        }
        Some(p) => std::fs::read(p).map_err(|e| anyhow::anyhow!("reading {}: {e}", p.display()))?,
    };
    let body = json!({
        "Payload": base64::engine::general_purpose::STANDARD.encode(payload),
        "Meta": m, "IdPrefixTemplate": id_prefix_template.unwrap_or(""),
    });
    let path = format!("/v1/job/{}/dispatch?{}", enc(id), ns_query(namespace));
    let r = api.call(reqwest::Method::POST, &path, Some(&body)).await?;
    print!(
        "{}",
        key_values(&[
            ("Dispatched Job ID", s(&r["DispatchedJobID"])),
            ("Evaluation ID", s(&r["EvalID"])),
        ])
    );
    Ok(0)
}

/// `nomad job periodic force`: launch a periodic job's child now.
pub(super) async fn periodic_force(
    api: &ApiArgs,
    namespace: &str,
    id: &str,
) -> anyhow::Result<i32> {
    let path = format!("/v1/job/{}/periodic/force?{}", enc(id), ns_query(namespace));
    let r = api
        .call(reqwest::Method::POST, &path, Some(&json!({})))
        .await?;
    println!("Evaluation ID: {}", s(&r["EvalID"]));
    Ok(0)
}

/// `nomad job history`: each version kept, newest first (`-p`: with its diff).
pub(super) async fn history(
    api: &ApiArgs,
    namespace: &str,
    id: &str,
    diffs: bool,
    format: &super::FormatArgs,
) -> anyhow::Result<i32> {
    let path = format!(
        "/v1/job/{}/versions?diffs={diffs}&{}",
        enc(id),
        ns_query(namespace)
    );
    let r = api.get(&path).await?;
    if format.wanted() {
        return Ok(format.print(&r["Versions"]));
    }
    let versions = r["Versions"].as_array().cloned().unwrap_or_default();
    let diff_list = r["Diffs"].as_array().cloned().unwrap_or_default();
    for (i, v) in versions.iter().enumerate() {
        if i > 0 {
            println!();
        }
        print!(
            "{}",
            key_values(&[
                ("Version", v["Version"].to_string()),
                ("Stable", v["Stable"].to_string()),
                ("Submit Date", format_time(&v["SubmitTime"])),
            ])
        );
        if diffs && let Some(d) = diff_list.get(i).and_then(Value::as_object) {
            print!("Diff =\n{}", diff_text(d));
        }
    }
    Ok(0)
}

/// `nomad job revert JOB VERSION`: register that version again.
pub(super) async fn revert(
    api: &ApiArgs,
    namespace: &str,
    id: &str,
    version: u64,
) -> anyhow::Result<i32> {
    let path = format!("/v1/job/{}/revert?{}", enc(id), ns_query(namespace));
    let body = json!({ "JobID": id, "JobVersion": version });
    let r = api.call(reqwest::Method::POST, &path, Some(&body)).await?;
    println!(
        "==> Job {id:?} reverted to version {version} (evaluation {})",
        s(&r["EvalID"])
    );
    Ok(0)
}

/// `nomad job scale JOB [GROUP] COUNT`: the group may be left out when the job has one.
pub(super) async fn scale(
    api: &ApiArgs,
    namespace: &str,
    id: &str,
    args: &[String],
) -> anyhow::Result<i32> {
    let (group, count) = match args {
        [count] => {
            let job = api
                .get(&format!("/v1/job/{}?{}", enc(id), ns_query(namespace)))
                .await?;
            let groups = job["TaskGroups"].as_array().cloned().unwrap_or_default();
            if groups.len() != 1 {
                anyhow::bail!(
                    "job {id:?} has {} task groups: name the one to scale",
                    groups.len()
                );
            }
            (s(&groups[0]["Name"]), count)
        }
        [group, count] => (group.clone(), count),
        _ => anyhow::bail!("usage: agent job scale JOB [GROUP] COUNT"),
    };
    let count: i64 = count
        .parse()
        .map_err(|_| anyhow::anyhow!("COUNT {count:?} is not a number"))?;
    let body = json!({ "Count": count, "Target": { "Group": group, "Job": id, "Namespace": namespace },
        "Message": "submitted using the agent CLI" });
    let path = format!("/v1/job/{}/scale?{}", enc(id), ns_query(namespace));
    let r = api.call(reqwest::Method::POST, &path, Some(&body)).await?;
    println!("Job scale successful\nEvaluation ID: {}", s(&r["EvalID"]));
    Ok(0)
}

/// `nomad job allocs JOB`: the job's allocations (`-all` every version's).
pub(super) async fn allocs(
    api: &ApiArgs,
    namespace: &str,
    id: &str,
    all: bool,
    format: &super::FormatArgs,
) -> anyhow::Result<i32> {
    let path = format!(
        "/v1/job/{}/allocations?all={all}&{}",
        enc(id),
        ns_query(namespace)
    );
    let list = api.get(&path).await?;
    if format.wanted() {
        return Ok(format.print(&list));
    }
    let mut rows = vec![
        [
            "ID",
            "Node ID",
            "Task Group",
            "Version",
            "Desired",
            "Status",
            "Created",
            "Modified",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for a in list.as_array().into_iter().flatten() {
        rows.push(vec![
            short_id(&s(&a["ID"])).to_string(),
            short_id(&s(&a["NodeID"])).to_string(),
            s(&a["TaskGroup"]),
            a["JobVersion"].to_string(),
            s(&a["DesiredStatus"]),
            s(&a["ClientStatus"]),
            format_time(&a["CreateTime"]),
            format_time(&a["ModifyTime"]),
        ]);
    }
    print!("{}", columns(&rows));
    Ok(0)
}

/// `nomad job eval JOB`: a new evaluation of the job (`-force-reschedule` as Nomad's).
pub(super) async fn eval(
    api: &ApiArgs,
    namespace: &str,
    id: &str,
    force_reschedule: bool,
) -> anyhow::Result<i32> {
    let path = format!("/v1/job/{}/evaluate?{}", enc(id), ns_query(namespace));
    let body = json!({ "JobID": id, "EvalOptions": { "ForceReschedule": force_reschedule } });
    let r = api.call(reqwest::Method::POST, &path, Some(&body)).await?;
    println!("Created eval ID: {:?}", short_id(&s(&r["EvalID"])));
    Ok(0)
}
