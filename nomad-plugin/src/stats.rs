//! A task's resource usage as Nomad's `TaskStats`: the aggregate only (Nomad dereferences
//! it), with the fields Paddock measures listed as measured. Nomad's `SystemMode` and
//! `UserMode` are shares of the interval, which a component's cumulative CPU times do not
//! give; the CPU share is `Percent`.

use paddock_core::runtime::types::ResourceUsage;
use std::time::{Duration, UNIX_EPOCH};

use crate::proto::drivers as pb;

/// The stats message for one sample.
pub fn response(task_id: &str, u: &ResourceUsage) -> pb::TaskStatsResponse {
    use pb::cpu_usage::Fields as C;
    use pb::memory_usage::Fields as M;
    let at = if u.timestamp == 0 {
        std::time::SystemTime::now()
    } else {
        UNIX_EPOCH + Duration::from_nanos(u.timestamp)
    };
    pb::TaskStatsResponse {
        stats: Some(pb::TaskStats {
            id: task_id.to_string(),
            timestamp: Some(prost_types::Timestamp::from(at)),
            agg_resource_usage: Some(pb::TaskResourceUsage {
                cpu: Some(pb::CpuUsage {
                    percent: u.cpu_percent,
                    measured_fields: vec![C::Percent as i32],
                    ..Default::default()
                }),
                memory: Some(pb::MemoryUsage {
                    rss: u.rss_bytes,
                    measured_fields: vec![M::Rss as i32],
                    ..Default::default()
                }),
            }),
            resource_usage_by_pid: Default::default(),
        }),
    }
}
