//! `devices`: reserves the device instances assigned to the task through the plugins that
//! own them (Nomad's `device_hook`). The reservations' env joins the task's environment
//! after its own env and before any hook's; their device nodes and mounts go to the driver
//! in the task config and through the runtime's `devices` interface.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::devicemanager::DeviceManager;
use crate::taskrunner::interfaces::{
    HookFailure, HookResult, Invocation, PrestartRequest, PrestartResponse, TaskHook,
};

/// Reserves the task's devices.
pub struct DevicesHook {
    devices: Arc<DeviceManager>,
}

impl DevicesHook {
    /// The hook.
    pub fn new(devices: Arc<DeviceManager>) -> Self {
        Self { devices }
    }
}

impl TaskHook for DevicesHook {
    fn name(&self) -> &str {
        "devices"
    }

    fn prestart<'a>(
        &'a self,
        req: &'a PrestartRequest<'a>,
        inv: &'a mut Invocation,
    ) -> BoxFuture<'a, HookResult<PrestartResponse>> {
        Box::pin(async move {
            let Some(assigned) = req
                .view
                .alloc
                .allocated_resources
                .tasks
                .get(&req.view.task.name)
                .filter(|t| !t.devices.is_empty())
            else {
                return Ok(PrestartResponse::default());
            };
            let reservations =
                self.devices.reserve(&assigned.devices).await.map_err(|e| {
                    HookFailure::setup(format!("failed to reserve devices: {e}"), true)
                })?;
            let ungranted: Vec<&String> = reservations.iter().flat_map(|r| &r.ungranted).collect();
            if !ungranted.is_empty() {
                (req.emit)(crate::structs::TaskEvent::new(
                    crate::structs::TaskEventType::HookMessage,
                    format!(
                        "device nodes and mounts outside their plugin's read_paths grant are not made in the task: {ungranted:?}"
                    ),
                ));
            }
            inv.env.set_device_env(
                reservations
                    .iter()
                    .flat_map(|r| r.env.iter().cloned())
                    .collect(),
            );
            inv.reservations = reservations;
            Ok(PrestartResponse::default())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::taskrunner::interfaces::TaskView;
    use crate::taskrunner::tests::{allocation, invocation, plugins};

    #[tokio::test]
    async fn a_task_without_devices_reserves_nothing_and_one_whose_plugin_is_gone_fails_retryably()
    {
        let plugins = plugins().await;
        let dir = tempfile::tempdir().unwrap();
        let mut a = allocation(serde_json::json!({"Name": "t", "Driver": "mock"}));
        let alloc_dir = crate::allocdir::AllocDir::new(dir.path(), &a.id);
        let hook = DevicesHook::new(plugins.devices.clone());
        let node = Default::default();
        let mut inv = invocation(&plugins, &alloc_dir, &a);
        {
            let group = a.group().unwrap();
            let req = PrestartRequest {
                view: TaskView {
                    alloc: &a,
                    group,
                    task: &group.tasks[0],
                    node: &node,
                },
                previous: &Default::default(),
                emit: &|_| {},
            };
            hook.prestart(&req, &mut inv).await.unwrap();
            assert!(inv.reservations.is_empty());
        }
        // Assigned at placement, but no loaded plugin reports the group any more.
        a.allocated_resources.tasks.insert(
            "t".into(),
            crate::structs::AllocatedTaskResources {
                devices: vec![crate::structs::AllocatedDeviceResource {
                    vendor: "acme".into(),
                    device_type: "gpu".into(),
                    name: "a100".into(),
                    device_ids: vec!["g0".into()],
                }],
                ..Default::default()
            },
        );
        let group = a.group().unwrap();
        let req = PrestartRequest {
            view: TaskView {
                alloc: &a,
                group,
                task: &group.tasks[0],
                node: &node,
            },
            previous: &Default::default(),
            emit: &|_| {},
        };
        let f = hook.prestart(&req, &mut inv).await.unwrap_err();
        assert!(f.recoverable);
        assert!(
            f.message.contains("no device plugin reports acme/gpu/a100"),
            "{}",
            f.message
        );
    }
}
