//! The invariants, checked against the agent's API, /proc and the soak's record:
//!
//! - every acknowledged job is there, stopped exactly when a stop was acknowledged, and a
//!   purged one is gone;
//! - every allocation last seen live (desired `run`, not terminal) is still there;
//! - a service job has `Count` allocations running, no more; a stopped job's allocations
//!   all end;
//! - every raw_exec task the API shows running has exactly one process (none lost, none
//!   twice), and no soak process runs for an allocation that should not run;
//! - no allocation stays `pending` longer than the bound while the agent is up.
//!
//! A state that can be on its way (a restart, a stop in progress) is given `settle` to
//! get there: a check fails only on what still holds at the end of it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::agent::{SoakAgent, describe, soak_processes};
use super::model::{Ack, Kind, Model};

/// What one pass saw.
struct Pass {
    problems: Vec<String>,
    /// Per job: (alloc ids live, alloc ids all).
    allocs: BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)>,
}

fn terminal(a: &Value) -> bool {
    matches!(
        a["ClientStatus"].as_str(),
        Some("complete" | "failed" | "lost")
    )
}

/// One pass over every job: the problems seen now.
async fn pass(agent: &SoakAgent, model: &mut Model, token: &str, pending_bound: Duration) -> Pass {
    let mut problems = Vec::new();
    let mut seen = BTreeMap::new();
    // Allocation id -> whether its raw_exec task should have one process now (true), or
    // must have none (false); absent: either may hold (on its way).
    let mut want_proc: BTreeMap<String, bool> = BTreeMap::new();
    let mut known_allocs = BTreeSet::new();
    let now = Instant::now();
    for job in model.jobs.values_mut() {
        let path = format!("/v1/job/{}", job.id);
        let got = agent.call("check", reqwest::Method::GET, &path, None).await;
        let (status, body) = match got {
            Ok(x) => x,
            Err(e) => {
                problems.push(format!("{}: read failed: {e}", job.id));
                continue;
            }
        };
        if job.uncertain {
            // Take the agent's word for what an unanswered change did.
            job.ack = match (status, body["Stop"].as_bool()) {
                (404, _) => Ack::Purged,
                (200, Some(true)) => Ack::Stopped,
                (200, _) => Ack::Registered,
                _ => job.ack,
            };
            job.uncertain = status != 200 && status != 404;
        }
        match (job.ack, status) {
            (Ack::Purged, 404) => continue,
            // Purged: answered 200, or an unanswered purge the agent was later seen to do.
            (Ack::Purged, s) => problems.push(format!("{}: purged but reads {s}", job.id)),
            (_, 404) => {
                problems.push(format!(
                    "{}: acknowledged ({:?}) but missing",
                    job.id, job.ack
                ));
                continue;
            }
            (ack, 200) => {
                let stop = body["Stop"].as_bool().unwrap_or(false);
                if stop != (ack == Ack::Stopped) {
                    problems.push(format!(
                        "{}: acknowledged {ack:?} but Stop = {stop}",
                        job.id
                    ));
                }
            }
            (_, s) => problems.push(format!("{}: GET answered {s}: {body}", job.id)),
        }
        let allocs = match agent
            .get("check", &format!("/v1/job/{}/allocations", job.id))
            .await
        {
            Ok(Value::Array(a)) => a,
            other => {
                problems.push(format!("{}: allocations: {other:?}", job.id));
                continue;
            }
        };
        let ids: BTreeSet<String> = allocs
            .iter()
            .filter_map(|a| a["ID"].as_str().map(str::to_string))
            .collect();
        known_allocs.extend(ids.iter().cloned());
        for gone in job.live_allocs.difference(&ids) {
            problems.push(format!(
                "{}: allocation {gone} was live and is gone",
                job.id
            ));
        }
        let mut live = BTreeSet::new();
        let mut running = 0;
        for a in &allocs {
            let id = a["ID"].as_str().unwrap_or_default().to_string();
            let desired_run = a["DesiredStatus"] == "run";
            let task_state = a["TaskStates"]["t"]["State"].as_str().unwrap_or("");
            if a["ClientStatus"] == "pending" {
                let since = *model.pending_since.entry(id.clone()).or_insert(now);
                if now.duration_since(since) > pending_bound {
                    problems.push(format!(
                        "{}: allocation {id} pending for {:.0} s",
                        job.id,
                        now.duration_since(since).as_secs_f64()
                    ));
                }
            } else {
                model.pending_since.remove(&id);
            }
            if desired_run && !terminal(a) {
                live.insert(id.clone());
                if a["ClientStatus"] == "running" {
                    running += 1;
                }
            }
            if job.ack == Ack::Stopped && !terminal(a) {
                problems.push(format!(
                    "{}: stopped, but allocation {id} is {}",
                    job.id, a["ClientStatus"]
                ));
            }
            if job.kind == Kind::RawService {
                if desired_run && a["ClientStatus"] == "running" && task_state == "running" {
                    want_proc.insert(id.clone(), true);
                } else if terminal(a) || task_state == "dead" {
                    want_proc.insert(id.clone(), false);
                }
            }
        }
        if job.kind.is_service() && job.ack == Ack::Registered && running != job.count {
            problems.push(format!(
                "{}: {running} allocations running, Count is {}",
                job.id, job.count
            ));
        }
        seen.insert(job.id.clone(), (live, ids));
    }
    // The processes: one per running raw_exec task, none for anything else.
    let mut procs: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for (pid, alloc) in soak_processes(token) {
        procs.entry(alloc).or_default().push(pid);
    }
    for (alloc, want) in &want_proc {
        let n = procs.get(alloc).map_or(0, Vec::len);
        match (want, n) {
            (true, 0) => problems.push(format!(
                "allocation {alloc}: running, but no process (lost)"
            )),
            (true, n) if n > 1 => problems.push(format!(
                "allocation {alloc}: {n} processes: running twice: {}",
                procs[alloc]
                    .iter()
                    .map(|p| describe(*p))
                    .collect::<Vec<_>>()
                    .join("; ")
            )),
            (false, n) if n > 0 => problems.push(format!(
                "allocation {alloc}: ended, but {n} processes ({:?}) still run",
                procs[alloc]
            )),
            _ => {}
        }
    }
    for (alloc, pids) in &procs {
        if !known_allocs.contains(alloc) {
            problems.push(format!(
                "processes {pids:?} run for allocation {alloc:?}, which no job shows"
            ));
        }
    }
    Pass {
        problems,
        allocs: seen,
    }
}

/// Check every invariant, giving what is on its way `settle` to arrive. Returns the
/// problems that held to the end, and records the allocations seen live.
pub async fn check(
    agent: &SoakAgent,
    model: &mut Model,
    token: &str,
    settle: Duration,
    pending_bound: Duration,
) -> Vec<String> {
    let deadline = Instant::now() + settle;
    loop {
        let p = pass(agent, model, token, pending_bound).await;
        if p.problems.is_empty() || Instant::now() > deadline {
            for (id, (live, all)) in p.allocs {
                if let Some(j) = model.jobs.get_mut(&id) {
                    j.live_allocs = live;
                    j.seen_allocs.extend(all);
                }
            }
            return p.problems;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
