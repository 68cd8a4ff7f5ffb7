//! The soak: one real agent process driven for a fixed time by a seeded mix of job
//! registrations, stops and purges, allocation restarts and signals, SIGHUP to the agent,
//! a misbehaving mock driver, hot swaps of a hook, SIGTERM restarts, `kill -9` every few
//! minutes and lives with injected state DB commit failures
//! (`PADDOCK_TEST_STATE_WRITE_FAULTS`); the invariants ([`check`]) are checked after
//! every restart, at a fixed period and at the end.
//!
//! Shared by the bench (`cargo bench -p paddock-tests --bench soak`, the long run against
//! a release agent, with a report) and the integration test `soak::` (a short run against
//! the debug agent that fails on any broken invariant).

pub mod agent;
pub mod check;
pub mod model;
pub mod report;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use agent::SoakAgent;
use model::{Ack, JobRec, Kind, Model, Rng};
use report::Report;

/// How a soak runs.
pub struct Options {
    pub duration: Duration,
    pub seed: u64,
    pub agent_bin: PathBuf,
    /// A `kill -9` this often (± a quarter).
    pub kill_every: Duration,
    /// A full check this often, besides those after restarts.
    pub check_every: Duration,
    /// A live agent with injected faults fails about one commit in this many, as a failed
    /// fsync does (every other life has them; 0: none).
    pub fault_one_in: u64,
    /// Jobs not purged kept at most.
    pub max_jobs: usize,
    /// The `versioned` hook stamped with a build number (hot swaps put new builds).
    pub hook: fn(u32) -> Vec<u8>,
    /// Time given to what is on its way before a check fails.
    pub settle: Duration,
    /// How long an allocation may stay pending.
    pub pending_bound: Duration,
}

/// The operations of the mix and their weights.
const MIX: &[(&str, u64)] = &[
    ("register", 30),
    ("stop", 9),
    ("purge", 8),
    ("restart_alloc", 8),
    ("signal_alloc", 8),
    ("read", 20),
    ("agent_sighup", 2),
    ("hot_swap", 2),
];

/// Run a soak in `dir`. The report holds every broken invariant; a soak that could not go
/// on (the agent would not start) says so in it too.
pub async fn run(opts: Options, dir: &std::path::Path) -> Report {
    let token = format!("{}-{}", std::process::id(), opts.seed);
    let mut rng = Rng::new(opts.seed);
    let mut build = 1u32;
    let mut agent = SoakAgent::new(opts.agent_bin.clone(), dir, &(opts.hook)(build));
    let mut rep = Report {
        seed: opts.seed,
        hook_build: build,
        ..Default::default()
    };
    let mut model = Model::default();
    let began = Instant::now();

    // RSS of whichever life is running, each second.
    let samples = Arc::new(std::sync::Mutex::new(Vec::new()));
    let life = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sampler = {
        let (pid, samples, life) = (agent.pid.clone(), samples.clone(), life.clone());
        tokio::spawn(async move {
            loop {
                let p = pid.load(Ordering::SeqCst);
                if p != 0
                    && let Some(kib) = agent::rss_kib(p)
                {
                    samples.lock().unwrap().push((
                        began.elapsed().as_secs_f64(),
                        life.load(Ordering::SeqCst),
                        kib,
                        agent::wasm_slots_kib(p).unwrap_or(0).min(kib),
                    ));
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };

    if let Err(e) = start(&mut agent, &mut rep, &opts, &life).await {
        rep.violations.push(e);
    }
    let jitter = |rng: &mut Rng, d: Duration| {
        let q = d.as_millis() as u64 / 4;
        d - Duration::from_millis(q) + Duration::from_millis(rng.below(2 * q + 1))
    };
    let mut next_kill = Instant::now() + jitter(&mut rng, opts.kill_every);
    let mut next_check = Instant::now() + opts.check_every;
    let total: u64 = MIX.iter().map(|m| m.1).sum();
    let (mut last_hup, mut last_swap) = (Instant::now(), Instant::now());
    while began.elapsed() < opts.duration {
        let now = Instant::now();
        if now >= next_kill {
            // Two kill -9 for each SIGTERM restart.
            let graceful = (rep.kills + rep.graceful_restarts) % 3 == 2;
            let when = if graceful {
                if let Err(e) = agent.terminate() {
                    rep.violations.push(e);
                }
                rep.graceful_restarts += 1;
                "after SIGTERM"
            } else {
                agent.kill9();
                rep.kills += 1;
                "after kill -9"
            };
            restart_and_check(&mut agent, &mut rep, &opts, &mut model, &token, &life, when).await;
            next_kill = Instant::now() + jitter(&mut rng, opts.kill_every);
            next_check = Instant::now() + opts.check_every;
            continue;
        }
        if now >= next_check {
            full_check(&agent, &mut rep, &opts, &mut model, &token, "periodic").await;
            next_check = Instant::now() + opts.check_every;
            continue;
        }
        let mut roll = rng.below(total);
        let op = MIX
            .iter()
            .find(|(_, w)| {
                if roll < *w {
                    true
                } else {
                    roll -= w;
                    false
                }
            })
            .map(|m| m.0)
            .unwrap_or("read");
        match op {
            // At most one SIGHUP and one swap in each RARE_GAP.
            "agent_sighup" if last_hup.elapsed() >= RARE_GAP => {
                last_hup = Instant::now();
                agent.signal("HUP");
                rep.agent_sighups += 1;
            }
            "hot_swap" if last_swap.elapsed() >= RARE_GAP => {
                last_swap = Instant::now();
                build += 1;
                agent::put(&agent.hooks, "versioned.wasm", &(opts.hook)(build));
                rep.swaps += 1;
                rep.hook_build = build;
            }
            "agent_sighup" | "hot_swap" => {}
            op => {
                let ok = do_op(op, &agent, &mut model, &mut rng, &token, &opts, &mut rep).await;
                if let Some(ok) = ok {
                    let e = rep.ops.entry(op).or_default();
                    if ok {
                        e.0 += 1;
                    } else {
                        e.1 += 1;
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20 + rng.below(80))).await;
    }
    // The end: the agent as it is, then once more after a last kill -9.
    full_check(&agent, &mut rep, &opts, &mut model, &token, "at the end").await;
    agent.kill9();
    rep.kills += 1;
    restart_and_check(
        &mut agent,
        &mut rep,
        &opts,
        &mut model,
        &token,
        &life,
        "after the last kill -9",
    )
    .await;
    hook_check(&agent, &mut rep, build).await;

    sampler.abort();
    rep.minutes = began.elapsed().as_secs_f64() / 60.0;
    rep.rss = samples.lock().unwrap().clone();
    rep.latencies = std::mem::take(&mut agent.latencies.lock().unwrap().0);
    rep.start_times = agent.start_times.clone();
    rep.faults_injected = agent.log_count("injected fault") as u64;
    rep.allocs_seen = model
        .jobs
        .values()
        .map(|j| j.seen_allocs.len() as u64)
        .sum();
    // The agent's own memory stays flat: the last third's median RSS outside the wasm
    // memory slots within 1.5 times the first third's. The slots are left out: a slot keeps
    // the pages its guests touched (up to 16 MiB) once used, so their part follows how many
    // slots misbehaving guests ever filled in this life, not what the agent holds.
    let (first, last) = rep.rss_thirds();
    if last > first * RSS_GROWTH_BOUND {
        rep.violations.push(format!(
            "agent RSS outside wasm memory slots grew: median {first:.1} MiB in the first third, {last:.1} MiB in the last (bound {RSS_GROWTH_BOUND}x)"
        ));
    }
    rep
}

/// The least time between two SIGHUPs, and between two hot swaps.
const RARE_GAP: Duration = Duration::from_secs(15);

/// How much the median RSS outside wasm memory slots of the run's last third may exceed
/// its first third's.
pub const RSS_GROWTH_BOUND: f64 = 1.5;

async fn start(
    agent: &mut SoakAgent,
    rep: &mut Report,
    opts: &Options,
    life: &std::sync::atomic::AtomicU64,
) -> Result<(), String> {
    life.fetch_add(1, Ordering::SeqCst);
    rep.lives += 1;
    // Every other life has injected faults, the first one not.
    let faulty = opts.fault_one_in > 0 && rep.lives % 2 == 0;
    let faults = faulty.then_some((opts.fault_one_in, opts.seed.wrapping_add(rep.lives)));
    if faulty {
        rep.faulty_lives += 1;
    }
    agent
        .start(faults)
        .await
        .map_err(|e| format!("{e}\n{}", agent.log_tail(30)))
}

#[allow(clippy::too_many_arguments)]
async fn restart_and_check(
    agent: &mut SoakAgent,
    rep: &mut Report,
    opts: &Options,
    model: &mut Model,
    token: &str,
    life: &std::sync::atomic::AtomicU64,
    when: &str,
) {
    // A restart may leave allocations pending for a moment: the bound counts from here.
    model.pending_since.clear();
    if let Err(e) = start(agent, rep, opts, life).await {
        rep.violations.push(format!("{when}: {e}"));
        return;
    }
    full_check(agent, rep, opts, model, token, when).await;
}

async fn full_check(
    agent: &SoakAgent,
    rep: &mut Report,
    opts: &Options,
    model: &mut Model,
    token: &str,
    when: &str,
) {
    rep.checks += 1;
    let problems = check::check(agent, model, token, opts.settle, opts.pending_bound).await;
    let at = rep.checks;
    for p in problems {
        // A problem that holds on from an earlier check is told once.
        if rep.seen.insert(p.clone()) {
            rep.violations.push(format!("check {at} ({when}): {p}"));
        } else {
            rep.repeated += 1;
        }
    }
}

/// The last hook build put in place is the active one.
async fn hook_check(agent: &SoakAgent, rep: &mut Report, build: u32) {
    let want = format!("0.1.0+b{build}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let active = agent
            .get("read", "/v1/components")
            .await
            .ok()
            .and_then(|v| {
                v["Components"].as_array()?.iter().find_map(|c| {
                    (c["Name"] == "versioned" && c["State"] == "active")
                        .then(|| c["PluginVersion"].as_str().unwrap_or_default().to_string())
                })
            });
        if active.as_deref() == Some(want.as_str()) {
            return;
        }
        if Instant::now() > deadline {
            rep.violations.push(format!(
                "the hook's active version is {active:?}, the last one put was {want}"
            ));
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One operation of the mix: `Some(answered 200)`, `None` when there was nothing to do.
async fn do_op(
    op: &'static str,
    agent: &SoakAgent,
    model: &mut Model,
    rng: &mut Rng,
    token: &str,
    opts: &Options,
    rep: &mut Report,
) -> Option<bool> {
    use reqwest::Method;
    let pick_job = |model: &Model, rng: &mut Rng, want: &dyn Fn(&JobRec) -> bool| {
        let ids: Vec<String> = model
            .jobs
            .values()
            .filter(|j| !j.uncertain && want(j))
            .map(|j| j.id.clone())
            .collect();
        (!ids.is_empty()).then(|| rng.pick(&ids).clone())
    };
    match op {
        "register" => {
            if model.live().count() >= opts.max_jobs {
                return None;
            }
            let kind = *rng.pick(&[
                Kind::MockService,
                Kind::MockService,
                Kind::RawService,
                Kind::Batch,
                Kind::Batch,
                Kind::Misbehaving,
            ]);
            model.next_id += 1;
            let id = format!("{}-{}", kind.prefix(), model.next_id);
            let (job, count) = model::job_body(rng, &id, kind, token);
            let r = agent
                .call(
                    "register",
                    Method::POST,
                    "/v1/jobs",
                    Some(serde_json::json!({ "Job": job })),
                )
                .await;
            let ok = matches!(r, Ok((200, _)));
            if ok {
                rep.jobs_registered += 1;
            }
            model.jobs.insert(
                id.clone(),
                JobRec {
                    id,
                    kind,
                    count,
                    ack: Ack::Registered,
                    uncertain: !ok,
                    live_allocs: Default::default(),
                    seen_allocs: Default::default(),
                },
            );
            Some(ok)
        }
        "stop" | "purge" => {
            let purge = op == "purge";
            let id = pick_job(model, rng, &|j| {
                if purge {
                    j.ack == Ack::Stopped
                } else {
                    j.ack == Ack::Registered
                }
            })?;
            let path = format!("/v1/job/{id}{}", if purge { "?purge=true" } else { "" });
            let r = agent.call(op, Method::DELETE, &path, None).await;
            let ok = matches!(r, Ok((200, _)));
            let j = model.jobs.get_mut(&id).unwrap();
            if ok {
                j.ack = if purge { Ack::Purged } else { Ack::Stopped };
                if purge {
                    j.live_allocs.clear();
                }
            } else {
                j.uncertain = true;
            }
            Some(ok)
        }
        "restart_alloc" | "signal_alloc" => {
            let id = pick_job(model, rng, &|j| {
                j.ack == Ack::Registered && j.kind.is_service() && !j.live_allocs.is_empty()
            })?;
            let allocs: Vec<String> = model.jobs[&id].live_allocs.iter().cloned().collect();
            let alloc = rng.pick(&allocs).clone();
            let (path, body) = if op == "restart_alloc" {
                (
                    format!("/v1/client/allocation/{alloc}/restart"),
                    serde_json::json!({ "TaskName": "t" }),
                )
            } else {
                (
                    format!("/v1/client/allocation/{alloc}/signal"),
                    serde_json::json!({ "Task": "t", "Signal": "SIGHUP" }),
                )
            };
            let r = agent.call(op, Method::POST, &path, Some(body)).await;
            // A task between states (restarting) may refuse: not an acknowledged change.
            Some(matches!(r, Ok((200, _))))
        }
        _ => {
            let path = *rng.pick(&[
                "/v1/jobs",
                "/v1/allocations",
                "/v1/node/self",
                "/v1/metrics",
            ]);
            Some(agent.get("read", path).await.is_ok())
        }
    }
}
