//! Which allocation, evaluation and job the collection takes, at which time.

use super::*;

const H: u64 = 3600 * 1_000_000_000;
const NOW: u64 = 1000 * H;

fn config() -> ServerGcConfig {
    ServerGcConfig::default()
}

/// A job of `job_type` with one group `g`, `status` as derived, submitted `age` ago.
fn job(id: &str, job_type: &str, status: &str, age: u64) -> Job {
    let j = serde_json::json!({"ID": id, "Type": job_type, "TaskGroups": [{"Name": "g",
        "Tasks": [{"Name": "t", "Driver": "mock", "Config": {}}]}]});
    let mut j = crate::jobspec::parse_job_json(j.to_string().as_bytes()).unwrap();
    j.state.status = status.into();
    j.state.submit_time = (NOW - age) as i64;
    j.state.job_modify_index = 10;
    j.state.modify_index = 10;
    j
}

/// An allocation of `job` placed at index 20 by evaluation `e-<job>`, last changed `age` ago.
fn alloc(id: &str, job: &Job, status: ClientStatus, age: u64) -> AllocFacts {
    AllocFacts {
        id: id.into(),
        eval_id: format!("e-{}", job.id),
        namespace: job.namespace.clone(),
        job_id: job.id.clone(),
        group: "g".into(),
        batch: job.job_type == JobType::Batch,
        client_status: status,
        desired_status: DesiredStatus::Run,
        create_index: 20,
        modify_time: NOW - age,
    }
}

fn eval(id: &str, job: &Job, status: &str, age: u64) -> Evaluation {
    Evaluation {
        id: id.into(),
        namespace: job.namespace.clone(),
        priority: 50,
        eval_type: job.job_type.as_str().into(),
        triggered_by: "job-register".into(),
        job_id: job.id.clone(),
        job_modify_index: 10,
        node_id: String::new(),
        status: status.into(),
        status_description: String::new(),
        failed_tg_allocs: None,
        queued_allocations: Default::default(),
        blocked_eval: String::new(),
        previous_eval: String::new(),
        next_eval: String::new(),
        wait_until: 0,
        deployment_id: String::new(),
        related_evals: (),
        create_index: 10,
        modify_index: 10,
        create_time: NOW - age,
        modify_time: NOW - age,
    }
}

fn run(jobs: &[Job], allocs: &[AllocFacts], evals: &[Evaluation]) -> Pass {
    plan(NOW, &config(), jobs, allocs, evals)
}

fn ids(p: &Pass) -> (Vec<&str>, Vec<&str>, Vec<&str>) {
    (
        p.allocs.iter().map(String::as_str).collect(),
        p.evals.iter().map(String::as_str).collect(),
        p.jobs.iter().map(|j| j.1.as_str()).collect(),
    )
}

#[test]
fn a_service_allocation_goes_an_hour_after_it_ended_and_never_while_it_runs() {
    let j = job("web", "service", "running", 10 * H);
    let allocs = [
        alloc("old", &j, ClientStatus::Complete, 2 * H),
        alloc("recent", &j, ClientStatus::Complete, H / 2),
        alloc("running", &j, ClientStatus::Running, 10 * H),
        alloc("pending", &j, ClientStatus::Pending, 10 * H),
    ];
    let p = run(
        std::slice::from_ref(&j),
        &allocs,
        &[eval("e-web", &j, "complete", 10 * H)],
    );
    assert_eq!(ids(&p), (vec!["old"], vec![], vec![]));
}

#[test]
fn a_failed_allocation_a_reschedule_policy_would_replace_stays_while_the_job_lives() {
    let mut j = job("web", "service", "running", 10 * H);
    let mut stopped = alloc("stopped", &j, ClientStatus::Failed, 2 * H);
    stopped.desired_status = DesiredStatus::Stop;
    let allocs = [alloc("failed", &j, ClientStatus::Failed, 2 * H), stopped];
    assert_eq!(
        ids(&run(std::slice::from_ref(&j), &allocs, &[])).0,
        vec!["stopped"]
    );
    // No rescheduling, or a dead job: nothing waits for it.
    let policy = j.task_groups[0].reschedule_policy.as_mut().unwrap();
    (policy.attempts, policy.unlimited) = (0, false);
    assert_eq!(ids(&run(std::slice::from_ref(&j), &allocs, &[])).0.len(), 2);
    let dead = job("web", "service", "dead", 10 * H);
    assert_eq!(ids(&run(&[dead], &allocs, &[])).0.len(), 2);
}

#[test]
fn a_live_batch_job_keeps_its_current_allocations_but_not_older_versions_past_a_day() {
    let mut j = job("b", "batch", "running", 100 * H);
    let mut older = alloc("v0", &j, ClientStatus::Complete, 30 * H);
    older.create_index = 5;
    let mut older_recent = alloc("v0-recent", &j, ClientStatus::Complete, 2 * H);
    older_recent.create_index = 5;
    let allocs = [
        alloc("current", &j, ClientStatus::Complete, 30 * H),
        older,
        older_recent,
    ];
    assert_eq!(
        ids(&run(std::slice::from_ref(&j), &allocs, &[])).0,
        vec!["v0"]
    );
    // Dead but not stopped: the same, until the job's own collection (below).
    j.state.status = "dead".into();
    let p = plan(
        NOW,
        &ServerGcConfig {
            job_threshold: Duration::from_secs(1000 * 3600),
            ..config()
        },
        &[j],
        &allocs,
        &[],
    );
    assert_eq!(ids(&p).0, vec!["v0"]);
}

#[test]
fn a_batch_allocation_whose_job_is_gone_or_stopped_goes_after_the_batch_threshold() {
    let gone = job("gone", "batch", "dead", 100 * H);
    let mut stopped = job("stopped", "batch", "dead", 100 * H);
    stopped.stop = true;
    let allocs = [
        alloc("a-gone", &gone, ClientStatus::Complete, 30 * H),
        alloc("a-gone-recent", &gone, ClientStatus::Failed, 2 * H),
        alloc("a-stopped", &stopped, ClientStatus::Complete, 30 * H),
    ];
    // The stopped job is young: only the evaluation collection applies to it.
    let mut young = stopped.clone();
    young.state.submit_time = (NOW - H) as i64;
    let p = run(&[young], &allocs, &[]);
    assert_eq!(ids(&p).0, vec!["a-gone", "a-stopped"]);
}

#[test]
fn a_dead_batch_job_goes_with_its_allocations_and_evaluations_after_four_hours() {
    let j = job("b", "batch", "dead", 6 * H);
    let allocs = [alloc("a", &j, ClientStatus::Complete, 5 * H)];
    let evals = [eval("e-b", &j, "complete", 5 * H)];
    assert_eq!(
        ids(&run(std::slice::from_ref(&j), &allocs, &evals)),
        (vec!["a"], vec!["e-b"], vec!["b"])
    );
    // An allocation, an evaluation or the job itself younger than that keeps it all.
    let recent = [alloc("a", &j, ClientStatus::Complete, 3 * H)];
    assert_eq!(
        run(std::slice::from_ref(&j), &recent, &evals),
        Pass::default()
    );
    let blocked = [eval("e-b", &j, "blocked", 5 * H)];
    assert_eq!(
        run(std::slice::from_ref(&j), &allocs, &blocked),
        Pass::default()
    );
    let young = job("b", "batch", "dead", 3 * H);
    assert_eq!(ids(&run(&[young], &allocs, &evals)).2, Vec::<&str>::new());
}

#[test]
fn a_dead_service_job_goes_only_once_stopped() {
    let j = job("web", "service", "dead", 6 * H);
    let allocs = [alloc("a", &j, ClientStatus::Failed, 5 * H)];
    let evals = [eval("e-web", &j, "complete", 5 * H)];
    // Its allocation and evaluation go after an hour; the job stays.
    assert_eq!(
        ids(&run(std::slice::from_ref(&j), &allocs, &evals)),
        (vec!["a"], vec!["e-web"], vec![])
    );
    let mut stopped = j.clone();
    stopped.stop = true;
    assert_eq!(ids(&run(&[stopped], &allocs, &evals)).2, vec!["web"]);
    // A tagged version is kept.
    let mut tagged = j;
    tagged.stop = true;
    tagged
        .kept
        .insert("VersionTag".into(), serde_json::json!({"Name": "v1"}));
    assert!(run(&[tagged], &allocs, &evals).jobs.is_empty());
}

#[test]
fn parents_go_only_when_stopped_and_without_a_live_child() {
    let mut parent = job("p", "batch", "dead", 6 * H);
    parent.parameterized_job = Some(crate::jobspec::ParameterizedJobConfig {
        payload: "optional".into(),
        meta_required: Vec::new(),
        meta_optional: Vec::new(),
    });
    let mut child = job("p/dispatch-1", "batch", "running", 6 * H);
    child.parent_id = "p".into();
    assert!(
        run(&[parent.clone(), child.clone()], &[], &[])
            .jobs
            .is_empty()
    );
    parent.stop = true;
    assert!(
        run(&[parent.clone(), child.clone()], &[], &[])
            .jobs
            .is_empty()
    );
    child.state.status = "dead".into();
    let p = run(&[parent, child], &[], &[]);
    assert_eq!(ids(&p).2, vec!["p", "p/dispatch-1"]);
}

#[test]
fn an_evaluation_goes_once_terminal_old_and_without_allocations() {
    let j = job("web", "service", "running", 10 * H);
    let b = job("b", "batch", "running", 10 * H);
    let evals = [
        eval("old", &j, "complete", 2 * H),
        eval("recent", &j, "complete", H / 2),
        eval("blocked", &j, "blocked", 2 * H),
        eval("e-web", &j, "complete", 2 * H),
        eval("batch", &b, "complete", 2 * H),
        eval("batch-old", &b, "canceled", 25 * H),
    ];
    let allocs = [alloc("running", &j, ClientStatus::Running, 2 * H)];
    assert_eq!(
        ids(&run(&[j, b], &allocs, &evals)).1,
        vec!["batch-old", "old"]
    );
}
