//! The planner on its own: a job, the version before and a client snapshot in, a plan out;
//! no agent, no runner, no lock.

use super::*;
use crate::devicemanager::NodeDevice;
use crate::devicemanager::NodeDeviceResource;
use crate::structs::{Amounts, Capacity, ClientStatus};
use crate::taskenv::NodeInfo;

/// A job from Nomad's JSON: one group `web` of `count` allocations, one `mock` task asking
/// `memory` MB, and `extra` merged into the group.
fn job(count: u32, memory: u64, extra: serde_json::Value) -> Job {
    let mut group = serde_json::json!({"Name": "web", "Count": count,
        "Tasks": [{"Name": "t", "Driver": "mock", "Config": {"run_for": "1h"},
                   "Resources": {"CPU": 100, "MemoryMB": memory}}],
        "EphemeralDisk": {"SizeMB": 10}});
    for (k, v) in extra.as_object().unwrap() {
        group[k] = v.clone();
    }
    let j = serde_json::json!({"ID": "j", "Type": "service", "TaskGroups": [group]});
    crate::jobspec::parse_job_json(j.to_string().as_bytes()).unwrap()
}

/// A node with the mock driver healthy, `memory` MB free for allocations, nothing held.
fn node(memory: u64) -> ClientSnapshot {
    ClientSnapshot {
        node: NodeInfo {
            id: "n1".into(),
            name: "n1".into(),
            datacenter: "dc1".into(),
            ..Default::default()
        },
        eligible: true,
        healthy_drivers: vec!["mock".into()],
        host_ip: "127.0.0.1".into(),
        max_live_allocs: 100,
        capacity: Capacity {
            total: Amounts {
                cpu: 4000,
                memory_mb: memory,
                disk_mb: 10_000,
            },
            cores: vec![0, 1],
            mhz_per_core: 2000,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// `snap` after `plan`'s placements run, as the client would report them: live, holding
/// what they were given (ids `a0`, `a1`, … in placement order).
fn running(plan: &Plan, mut snap: ClientSnapshot) -> ClientSnapshot {
    snap.live = plan
        .place
        .iter()
        .enumerate()
        .map(|(n, p)| LiveAlloc {
            id: format!("a{n}-0000000000"),
            group: p.group.clone(),
            index: p.index,
            resources: p.resources.clone(),
            job: std::sync::Arc::new(plan.job.clone()),
            deployment_id: plan
                .deployment
                .as_ref()
                .map(|d| d.id.clone())
                .unwrap_or_default(),
            canary: p.canary,
            healthy: None,
        })
        .collect();
    snap
}

/// `job` as registered: its previous version.
fn registered(mut job: Job) -> Job {
    job.state.version = 0;
    job.state.job_modify_index = 7;
    job
}

fn indexes(v: &[LiveAlloc]) -> Vec<u32> {
    v.iter().map(|a| a.index).collect()
}

#[test]
fn a_new_job_places_every_index_with_what_it_holds() {
    let p = plan(job(3, 64, serde_json::json!({})), None, &node(1024), false).unwrap();
    let placed: Vec<(String, u32)> = p.place.iter().map(|p| (p.group.clone(), p.index)).collect();
    assert_eq!(
        placed,
        [("web".into(), 0), ("web".into(), 1), ("web".into(), 2)]
    );
    assert_eq!(p.place[0].resources.tasks["t"].memory.memory_mb, 64);
    assert!(p.keep.is_empty() && p.stop.is_empty() && p.destructive.is_empty());
    assert!(p.blocked.is_empty());
    assert_eq!(p.desired_updates()["web"].place, 3);
    let shown = p.job_plan(false);
    assert_eq!(shown.job_modify_index, 0);
    assert_eq!(shown.desired_updates["web"].place, 3);
}

#[test]
fn the_same_job_again_keeps_what_runs_and_places_nothing() {
    let j = job(2, 64, serde_json::json!({}));
    let first = plan(j.clone(), None, &node(1024), false).unwrap();
    let snap = running(&first, node(1024));
    let again = plan(j.clone(), Some(registered(j)), &snap, false).unwrap();
    assert!(again.place.is_empty());
    assert_eq!(again.keep.len(), 2);
    assert!(again.keep.iter().all(|k| !k.in_place));
    assert!(!again.spec_changed());
    assert_eq!(again.desired_updates()["web"].ignore, 2);
    assert_eq!(again.job_plan(false).job_modify_index, 7);
}

#[test]
fn a_lower_count_stops_the_highest_indexes_and_moves_the_rest_in_place() {
    let first = plan(job(3, 64, serde_json::json!({})), None, &node(1024), false).unwrap();
    let snap = running(&first, node(1024));
    let old = registered(job(3, 64, serde_json::json!({})));
    let p = plan(job(1, 64, serde_json::json!({})), Some(old), &snap, false).unwrap();
    assert_eq!(indexes(&p.stop), [1, 2]);
    assert_eq!(p.keep.len(), 1);
    assert!(
        p.keep[0].in_place,
        "only the count changed: nothing a task sees"
    );
    assert!(p.place.is_empty() && p.destructive.is_empty());
    let u = &p.desired_updates()["web"];
    assert_eq!((u.stop, u.in_place_update, u.place), (2, 1, 0));
}

/// No deployment: a new version replaces every allocation at once.
fn at_once() -> serde_json::Value {
    serde_json::json!({"Update": {"MaxParallel": 0}})
}

#[test]
fn a_changed_task_replaces_each_allocation_at_its_index_counted_once() {
    let first = plan(job(2, 64, at_once()), None, &node(1024), false).unwrap();
    let snap = running(&first, node(1024));
    let old = registered(job(2, 64, at_once()));
    // More memory: the tasks see it, so the allocations are replaced, not updated.
    let p = plan(job(2, 128, at_once()), Some(old), &snap, false).unwrap();
    assert!(p.deployment.is_none(), "max_parallel 0: no deployment");
    assert_eq!(indexes(&p.destructive), [0, 1]);
    assert_eq!(p.place.iter().map(|p| p.index).collect::<Vec<_>>(), [0, 1]);
    let u = &p.desired_updates()["web"];
    assert_eq!((u.destructive_update, u.place), (2, 0));
    let diff = p.job_plan(true).diff.unwrap();
    let g = diff.task_groups.iter().find(|g| g.name == "web").unwrap();
    assert_eq!(g.updates.get("create/destroy update"), Some(&2));
}

#[test]
fn what_does_not_fit_waits_and_what_fits_is_placed() {
    // Room for two allocations of 300 MB, not three.
    let p = plan(job(3, 300, serde_json::json!({})), None, &node(700), false).unwrap();
    assert_eq!(p.place.len(), 2);
    assert_eq!(
        p.blocked["web"],
        Failed {
            count: 1,
            why: Unplaced::Exhausted("memory".into())
        }
    );
    assert_eq!(p.desired_updates()["web"].place, 3);
}

#[test]
fn what_the_kept_allocations_and_other_jobs_hold_is_not_given_twice() {
    let mut snap = node(1024);
    snap.capacity.used.memory_mb = 900;
    let p = plan(job(1, 200, serde_json::json!({})), None, &snap, false).unwrap();
    assert!(p.place.is_empty());
    assert_eq!(p.blocked["web"].why, Unplaced::Exhausted("memory".into()));
    // Its own kept allocation's memory counts too: raising the count by one does not fit
    // twice in 500 MB.
    let first = plan(job(1, 300, serde_json::json!({})), None, &node(500), false).unwrap();
    let snap = running(&first, node(500));
    let old = registered(job(1, 300, serde_json::json!({})));
    let p = plan(job(2, 300, serde_json::json!({})), Some(old), &snap, false).unwrap();
    assert_eq!(p.keep.len(), 1);
    assert!(p.place.is_empty());
    assert_eq!(p.blocked["web"].count, 1);
}

#[test]
fn a_static_port_another_job_holds_leaves_the_allocation_waiting_named() {
    let mut snap = node(1024);
    snap.ports
        .insert(8080, "allocation 12345678 of job other".into());
    let net =
        serde_json::json!({"Networks": [{"ReservedPorts": [{"Label": "http", "Value": 8080}]}]});
    let p = plan(job(1, 64, net.clone()), None, &snap, false).unwrap();
    assert!(p.place.is_empty());
    let Unplaced::Exhausted(why) = &p.blocked["web"].why else {
        panic!("{:?}", p.blocked)
    };
    assert!(why.starts_with("network:") && why.contains("8080"), "{why}");
    // Free, it is placed with the port; a second allocation cannot take it again.
    let p = plan(job(2, 64, net), None, &node(1024), false).unwrap();
    assert_eq!(p.place.len(), 1);
    assert_eq!(p.place[0].resources.shared.ports[0].value, 8080);
    assert_eq!(p.blocked["web"].count, 1);
}

#[test]
fn an_ineligible_node_or_a_missing_driver_places_nothing_and_says_why() {
    let mut snap = node(1024);
    snap.eligible = false;
    let p = plan(job(2, 64, serde_json::json!({})), None, &snap, false).unwrap();
    assert!(p.place.is_empty());
    assert_eq!(
        p.blocked["web"],
        Failed {
            count: 2,
            why: Unplaced::Ineligible
        }
    );
    let mut snap = node(1024);
    snap.healthy_drivers.clear();
    let p = plan(job(1, 64, serde_json::json!({})), None, &snap, false).unwrap();
    assert_eq!(
        p.blocked["web"].why,
        Unplaced::Filtered("missing drivers".into())
    );
}

#[test]
fn a_job_in_other_datacenters_places_nothing_and_names_them() {
    let snap = node(1024);
    let mut j = job(1, 64, serde_json::json!({}));
    j.datacenters = vec!["dc2".into(), "eu-*".into()];
    let p = plan(j.clone(), None, &snap, false).unwrap();
    assert!(p.place.is_empty());
    assert_eq!(
        p.blocked["web"].why,
        Unplaced::Datacenters(vec!["dc2".into(), "eu-*".into()])
    );
    let metric = crate::evals::failure_metric("dc1", &p.blocked["web"]);
    assert_eq!(metric["NodesEvaluated"], 0);
    assert_eq!(
        metric["NodesAvailable"],
        serde_json::json!({ "dc2": 0, "eu-*": 0 })
    );
    // A pattern that matches the node's datacenter places it.
    j.datacenters = vec!["dc*".into()];
    assert_eq!(plan(j, None, &snap, false).unwrap().place.len(), 1);
}

#[test]
fn devices_are_assigned_from_free_healthy_instances_and_a_shortage_is_named() {
    let mut snap = node(1024);
    snap.devices = vec![NodeDeviceResource {
        vendor: "nvidia".into(),
        device_type: "gpu".into(),
        name: "t4".into(),
        instances: ["g0", "g1"]
            .iter()
            .map(|id| NodeDevice {
                id: (*id).into(),
                healthy: true,
                health_description: String::new(),
                locality: None,
            })
            .collect(),
        attributes: Default::default(),
    }];
    snap.held_devices.insert(
        "nvidia/gpu/t4/g0".into(),
        "allocation 12345678 of job other".into(),
    );
    let mut j = job(2, 64, serde_json::json!({}));
    j.task_groups[0].tasks[0].resources.devices = vec![crate::jobspec::DeviceRequest {
        name: "gpu".into(),
        count: 1,
        constraints: Vec::new(),
        affinities: Vec::new(),
    }];
    let p = plan(j.clone(), None, &snap, false).unwrap();
    assert_eq!(p.place.len(), 1);
    assert_eq!(
        p.place[0].resources.tasks["t"].devices[0].device_ids,
        ["g1"]
    );
    let Unplaced::Exhausted(why) = &p.blocked["web"].why else {
        panic!("{:?}", p.blocked)
    };
    assert!(why.contains("g0 held by allocation 12345678"), "{why}");
    snap.devices.clear();
    let p = plan(j, None, &snap, false).unwrap();
    assert_eq!(
        p.blocked["web"].why,
        Unplaced::Filtered("missing devices".into())
    );
}

#[test]
fn a_stopped_job_stops_everything_and_places_nothing() {
    let first = plan(job(2, 64, serde_json::json!({})), None, &node(1024), false).unwrap();
    let snap = running(&first, node(1024));
    let mut stopped = job(2, 64, serde_json::json!({}));
    stopped.stop = true;
    let p = plan(
        stopped,
        Some(registered(job(2, 64, serde_json::json!({})))),
        &snap,
        false,
    )
    .unwrap();
    assert_eq!(indexes(&p.stop), [0, 1]);
    assert!(p.place.is_empty() && p.keep.is_empty());
}

fn ended(id: &str, index: u32, status: ClientStatus, fail_time: u64) -> EndedAlloc {
    EndedAlloc {
        id: id.into(),
        group: "web".into(),
        index,
        status,
        stopped: false,
        migrate: false,
        fail_time,
        tracker: None,
        followup_eval_id: String::new(),
        node_id: "node".into(),
        deployment_id: String::new(),
        healthy: None,
    }
}

const S: u64 = 1_000_000_000;

#[test]
fn evaluating_a_batch_job_again_places_only_what_has_not_completed() {
    let mut j = job(3, 64, serde_json::json!({}));
    j.job_type = crate::jobspec::JobType::Batch;
    let mut snap = node(1024);
    snap.ended = vec![
        ended("a0", 0, ClientStatus::Complete, 0),
        ended("a2", 2, ClientStatus::Complete, 0),
    ];
    let p = plan(j.clone(), Some(registered(j.clone())), &snap, true).unwrap();
    assert_eq!(p.place.iter().map(|p| p.index).collect::<Vec<_>>(), [1]);
    // Registered again unchanged, as evaluated again: never run twice.
    let p = plan(j.clone(), Some(registered(j.clone())), &snap, false).unwrap();
    assert_eq!(p.place.iter().map(|p| p.index).collect::<Vec<_>>(), [1]);
    // A service job runs forever: what completed is placed again.
    j.job_type = crate::jobspec::JobType::Service;
    let p = plan(j.clone(), Some(registered(j)), &snap, true).unwrap();
    assert_eq!(p.place.len(), 3);
}

#[test]
fn a_failed_service_allocation_is_replaced_after_its_delay_with_its_tracker() {
    let j = job(1, 64, serde_json::json!({}));
    let mut snap = node(1024);
    snap.now = 1_000 * S;
    // Failed 10 s ago: the service default waits 30 s, so a follow-up at fail + 30 s.
    snap.ended = vec![ended("f1", 0, ClientStatus::Failed, 990 * S)];
    let p = plan(j.clone(), Some(registered(j.clone())), &snap, true).unwrap();
    assert!(p.place.is_empty());
    assert_eq!(
        p.followups,
        [Followup {
            alloc_id: "f1".into(),
            group: "web".into(),
            wait_until: 1_020 * S
        }]
    );
    assert_eq!(p.desired_updates()["web"].reschedule_later, 1);
    // Its delay over: replaced now, the tracker naming it with the delay it waited.
    snap.now = 1_020 * S;
    let p = plan(j.clone(), Some(registered(j.clone())), &snap, true).unwrap();
    let r = p.place[0].replaces.clone().unwrap();
    assert_eq!(r.alloc_id, "f1");
    let t = r.tracker.unwrap();
    assert_eq!(t.events.len(), 1);
    assert_eq!(
        (t.events[0].prev_alloc_id.as_str(), t.events[0].delay),
        ("f1", 30 * S)
    );
    assert_eq!(p.desired_updates()["web"].reschedule_now, 1);
    // The replacement failed too: the next delay is twice the last.
    let mut again = ended("f2", 0, ClientStatus::Failed, 1_100 * S);
    again.tracker = Some(t);
    snap.ended = vec![again];
    let p = plan(j.clone(), Some(registered(j)), &snap, true).unwrap();
    assert_eq!(p.followups[0].wait_until, 1_160 * S);
}

#[test]
fn a_batch_allocation_out_of_attempts_is_left_and_one_stopped_to_move_is_replaced() {
    let mut j = job(2, 64, serde_json::json!({}));
    j.job_type = crate::jobspec::JobType::Batch;
    j.task_groups[0].reschedule_policy =
        crate::jobspec::ReschedulePolicy::default_for(crate::jobspec::JobType::Batch);
    let mut snap = node(1024);
    snap.now = 100_000 * S;
    let mut spent = ended("b0", 0, ClientStatus::Failed, 99_000 * S);
    spent.tracker = Some(crate::structs::RescheduleTracker {
        events: vec![crate::structs::RescheduleEvent {
            reschedule_time: 98_000 * S,
            prev_alloc_id: "b".into(),
            prev_node_id: "node".into(),
            delay: 5 * S,
        }],
        last_reschedule: "ok".into(),
    });
    let mut moved = ended("m1", 1, ClientStatus::Complete, 99_000 * S);
    (moved.stopped, moved.migrate) = (true, true);
    snap.ended = vec![spent, moved];
    let p = plan(j.clone(), Some(registered(j)), &snap, true).unwrap();
    assert_eq!(p.place.len(), 1, "{:?}", p.place);
    assert_eq!(p.place[0].index, 1);
    let r = p.place[0].replaces.clone().unwrap();
    assert_eq!((r.alloc_id.as_str(), r.tracker), ("m1", None));
    assert!(p.followups.is_empty());
}

#[test]
fn a_job_past_the_nodes_live_allocation_limit_is_an_error_naming_the_field() {
    let mut snap = node(100_000);
    snap.max_live_allocs = 10;
    snap.others_live = 8;
    let e = plan(job(3, 1, serde_json::json!({})), None, &snap, false).unwrap_err();
    assert_eq!(e.path, "Job.TaskGroups");
    assert!(plan(job(2, 1, serde_json::json!({})), None, &snap, false).is_ok());
}

/// `snap` with the live allocations' health in their deployment set to `healthy`.
fn judged(mut snap: ClientSnapshot, healthy: bool) -> ClientSnapshot {
    for a in &mut snap.live {
        a.healthy = Some(healthy);
    }
    snap
}

#[test]
fn a_first_version_is_placed_whole_under_a_new_deployment() {
    let p = plan(job(3, 64, serde_json::json!({})), None, &node(1024), false).unwrap();
    assert_eq!(
        p.place.len(),
        3,
        "max_parallel limits replacements, not placements"
    );
    let d = p
        .deployment
        .as_ref()
        .expect("a service job's first version deploys");
    assert!(p.new_deployment);
    let g = &d.task_groups["web"];
    assert_eq!((g.desired_total, g.desired_canaries), (3, 0));
    assert!(
        g.require_progress_by > 0,
        "the progress deadline counts from now"
    );
}

#[test]
fn a_new_version_rolls_max_parallel_at_a_time_as_the_new_ones_turn_healthy() {
    let update = serde_json::json!({"Update": {"MaxParallel": 2}});
    let first = plan(job(5, 64, update.clone()), None, &node(4096), false).unwrap();
    let snap = judged(running(&first, node(4096)), true);
    let old = registered(job(5, 64, update.clone()));
    let new = job(5, 128, update.clone());
    let p = plan(new.clone(), Some(old), &snap, false).unwrap();
    assert_eq!(indexes(&p.destructive), [0, 1]);
    assert_eq!(indexes(&p.waiting), [2, 3, 4]);
    assert_eq!(p.place.iter().map(|p| p.index).collect::<Vec<_>>(), [0, 1]);
    let u = &p.desired_updates()["web"];
    assert_eq!((u.destructive_update, u.ignore, u.place), (2, 3, 0));
    let d = p.deployment.clone().unwrap();
    assert!(p.new_deployment);

    // The next step, while the two new ones are not healthy yet: nothing more is replaced.
    let mut snap2 = running(&p, node(4096));
    for a in &mut snap2.live {
        a.deployment_id = d.id.clone();
    }
    let old_live: Vec<LiveAlloc> = snap.live.iter().filter(|a| a.index >= 2).cloned().collect();
    snap2.live.extend(old_live);
    snap2.deployment = Some(d.clone());
    let mut registered_new = new.clone();
    registered_new.state.version = 1;
    let mut dv = d.clone();
    dv.job_version = 1;
    snap2.deployment = Some(dv);
    let wait = plan(new.clone(), Some(registered_new.clone()), &snap2, true).unwrap();
    assert!(
        wait.destructive.is_empty() && wait.place.is_empty(),
        "two in flight"
    );
    assert_eq!(indexes(&wait.waiting), [2, 3, 4]);
    assert!(!wait.new_deployment);

    // One of them healthy: one more is replaced.
    snap2.live[0].healthy = Some(true);
    let next = plan(new.clone(), Some(registered_new.clone()), &snap2, true).unwrap();
    assert_eq!(indexes(&next.destructive), [2]);
    assert_eq!(indexes(&next.waiting), [3, 4]);

    // The other ended before it turned healthy: nothing more, whatever is in flight.
    let gone = snap2.live.remove(1);
    let mut e = ended(&gone.id, gone.index, ClientStatus::Failed, 1);
    e.deployment_id = d.id.clone();
    snap2.ended = vec![e];
    let stopped = plan(new, Some(registered_new), &snap2, true).unwrap();
    assert!(
        stopped.destructive.is_empty(),
        "the roll-out stops at a failure"
    );
    assert_eq!(indexes(&stopped.waiting), [2, 3, 4]);
}

#[test]
fn canaries_stand_beside_the_old_allocations_until_promoted() {
    let update = serde_json::json!({"Update": {"MaxParallel": 1, "Canary": 1}});
    let first = plan(job(2, 64, update.clone()), None, &node(4096), false).unwrap();
    let snap = judged(running(&first, node(4096)), true);
    let old = registered(job(2, 64, update.clone()));
    let new = job(2, 128, update);
    let p = plan(new.clone(), Some(old), &snap, false).unwrap();
    assert!(
        p.destructive.is_empty(),
        "nothing replaced before the promotion"
    );
    assert_eq!(indexes(&p.waiting), [0, 1]);
    let canaries: Vec<(u32, bool)> = p.place.iter().map(|c| (c.index, c.canary)).collect();
    assert_eq!(canaries, [(0, true)], "one canary, beside web[0]");
    assert_eq!(p.desired_updates()["web"].canary, 1);
    assert_eq!(p.desired_updates()["web"].place, 0);
    let mut d = p.deployment.clone().unwrap();
    assert_eq!(d.task_groups["web"].desired_canaries, 1);
    assert!(d.requires_promotion());

    // Promoted, the canary healthy: the old web[0] stops, web[1] is replaced.
    d.job_version = 1;
    d.task_groups.get_mut("web").unwrap().promoted = true;
    let mut snap2 = judged(running(&p, node(4096)), true);
    for a in &mut snap2.live {
        a.deployment_id = d.id.clone();
    }
    snap2.live.extend(snap.live.iter().cloned());
    snap2.deployment = Some(d.clone());
    let mut registered_new = new.clone();
    registered_new.state.version = 1;
    let next = plan(new.clone(), Some(registered_new.clone()), &snap2, true).unwrap();
    assert_eq!(indexes(&next.stop), [0], "the canary takes web[0]'s place");
    assert_eq!(indexes(&next.destructive), [1]);
    assert_eq!(
        next.place
            .iter()
            .map(|p| (p.index, p.canary))
            .collect::<Vec<_>>(),
        [(1, false)]
    );

    // Failed before the promotion: the canary stops, the old ones stay.
    d.task_groups.get_mut("web").unwrap().promoted = false;
    d.status = crate::structs::deployment::FAILED.into();
    snap2.deployment = Some(d);
    let failed = plan(new, Some(registered_new), &snap2, true).unwrap();
    assert_eq!(failed.stop.len(), 1);
    assert!(failed.stop[0].canary);
    assert_eq!(indexes(&failed.waiting), [0, 1]);
    assert!(failed.place.is_empty() && failed.destructive.is_empty());
}
