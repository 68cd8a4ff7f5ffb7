//! `dispatch_payload`: a dispatched job's payload, written to the file the task's
//! `dispatch_payload` block names under its `local/` dir, before each start (Nomad's
//! `dispatch_hook`).

use futures::future::BoxFuture;

use crate::taskrunner::interfaces::{
    HookFailure, HookResult, Invocation, PrestartRequest, PrestartResponse, TaskHook,
};

/// Writes the dispatch payload.
pub struct DispatchPayloadHook;

impl TaskHook for DispatchPayloadHook {
    fn name(&self) -> &str {
        "dispatch_payload"
    }

    fn prestart<'a>(
        &'a self,
        req: &'a PrestartRequest<'a>,
        inv: &'a mut Invocation,
    ) -> BoxFuture<'a, HookResult<PrestartResponse>> {
        Box::pin(async move {
            let job = &req.view.alloc.job;
            let Some(target) = &req.view.task.dispatch_payload else {
                return Ok(PrestartResponse::default());
            };
            if job.payload.is_empty() {
                return Ok(PrestartResponse::default());
            }
            // The jobspec refuses absolute paths and `..`; the file stays in `local/`.
            let path = std::path::Path::new(&inv.dirs.local_dir).join(&target.file);
            let write = || -> std::io::Result<()> {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                std::fs::write(&path, &job.payload)
            };
            write().map_err(|e| {
                HookFailure::setup(
                    format!(
                        "failed to write the dispatch payload to {}: {e}",
                        path.display()
                    ),
                    false,
                )
            })?;
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
    async fn the_payload_lands_in_the_named_file_under_local() {
        let plugins = plugins().await;
        let dir = tempfile::tempdir().unwrap();
        let mut a = allocation(serde_json::json!({
            "Name": "t", "Driver": "mock", "DispatchPayload": {"File": "input/data.json"}
        }));
        std::sync::Arc::make_mut(&mut a.job).payload = b"{\"n\": 3}".to_vec();
        let alloc_dir = crate::allocdir::AllocDir::new(dir.path(), &a.id);
        alloc_dir.build_task("t").unwrap();
        let mut inv = invocation(&plugins, &alloc_dir, &a);
        let group = a.group().unwrap();
        let node = Default::default();
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
        DispatchPayloadHook.prestart(&req, &mut inv).await.unwrap();
        let written =
            std::fs::read(std::path::Path::new(&inv.dirs.local_dir).join("input/data.json"))
                .unwrap();
        assert_eq!(written, b"{\"n\": 3}");
    }
}
