//! `variables`: the Nomad Variables a task may read, served from the embedder's
//! [`VariableHost`] (the agent's variable store, which applies Nomad's workload-identity
//! rule). This view checks the component's `variables` grant and that the call is about a
//! task with a workload identity; what the identity may read is the host's decision.

use wasmtime::component::{HasData, Linker};

use crate::bindings::v0_1::types::HostError as WitHostError;
use crate::bindings::v0_1::variables::{self as wit, Host, VariableMetadata as WitMetadata};
use crate::context::{ComponentContext, TaskContext};
use crate::types::{HostError, VariableMetadata, WorkloadIdentity};

/// Where variables come from. Called on a guest's call path, from any thread: it must
/// answer from memory and never block on I/O.
pub trait VariableHost: Send + Sync {
    /// The items of the variable at `path` in `who`'s namespace, sorted by key; `None` when
    /// there is none. A path `who` may not read is `denied`, naming the path, whether or not
    /// it exists.
    fn get(
        &self,
        who: &WorkloadIdentity,
        path: &str,
    ) -> Result<Option<Vec<(String, String)>>, HostError>;
    /// The variables `who` may read whose path starts with `prefix`, sorted by path.
    fn list(
        &self,
        who: &WorkloadIdentity,
        prefix: &str,
    ) -> Result<Vec<VariableMetadata>, HostError>;
}

/// The `variables` view: the calling component (for its grant), the task, and the host.
pub struct Variables<'a> {
    component: &'a ComponentContext,
    task: Option<&'a TaskContext>,
    host: Option<&'a dyn VariableHost>,
}

impl<'a> Variables<'a> {
    /// Variables as `component` sees them in a call about `task`, served by `host`.
    pub fn new(
        component: &'a ComponentContext,
        task: Option<&'a TaskContext>,
        host: Option<&'a dyn VariableHost>,
    ) -> Self {
        Self {
            component,
            task,
            host,
        }
    }

    /// The host and the identity to ask it for, once the grant and the task are checked.
    fn checked(
        &self,
        what: &str,
    ) -> Result<(&'a dyn VariableHost, &'a WorkloadIdentity), HostError> {
        if !self.component.grants.variables {
            return Err(HostError::denied(&self.component.name, "variables", what));
        }
        let host = self.host.ok_or_else(|| HostError::unavailable(what))?;
        let who = self.task.and_then(|t| t.workload.as_ref()).ok_or_else(|| {
            HostError::Denied(format!(
                "{what}: variables are read on behalf of a task, and this call is about none"
            ))
        })?;
        Ok((host, who))
    }
}

impl Host for Variables<'_> {
    async fn get(&mut self, path: String) -> Result<Option<Vec<(String, String)>>, WitHostError> {
        let (host, who) = self.checked(&format!("variables.get({path:?})"))?;
        Ok(host.get(who, &path)?)
    }

    async fn list(&mut self, prefix: String) -> Result<Vec<WitMetadata>, WitHostError> {
        let (host, who) = self.checked(&format!("variables.list({prefix:?})"))?;
        Ok(host
            .list(who, &prefix)?
            .into_iter()
            .map(Into::into)
            .collect())
    }
}

struct HasVariables;

impl HasData for HasVariables {
    type Data<'a> = Variables<'a>;
}

/// Add `variables` to `linker`; `view` projects the interface's view out of the store data.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> Variables<'_>,
) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, HasVariables>(linker, view)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers every path with one item, so only the view's own checks can refuse.
    struct Open;

    impl VariableHost for Open {
        fn get(
            &self,
            _: &WorkloadIdentity,
            _: &str,
        ) -> Result<Option<Vec<(String, String)>>, HostError> {
            Ok(Some(vec![("k".into(), "v".into())]))
        }
        fn list(&self, _: &WorkloadIdentity, _: &str) -> Result<Vec<VariableMetadata>, HostError> {
            Ok(Vec::new())
        }
    }

    fn component(variables: bool) -> ComponentContext {
        ComponentContext {
            name: "template".into(),
            grants: crate::Grants {
                variables,
                ..Default::default()
            },
            plugin_config: "{}".into(),
            limits: Default::default(),
        }
    }

    #[tokio::test]
    async fn the_grant_and_a_task_with_an_identity_are_required() {
        let task = TaskContext {
            workload: Some(WorkloadIdentity {
                namespace: "default".into(),
                job_id: "web".into(),
                group: "g".into(),
                task: "t".into(),
            }),
            ..Default::default()
        };
        let ungranted = component(false);
        let e = Variables::new(&ungranted, Some(&task), Some(&Open))
            .get("nomad/jobs/web".into())
            .await
            .unwrap_err();
        assert!(
            matches!(&e, WitHostError::Denied(m) if m.contains("`variables` grant") && m.contains("nomad/jobs/web")),
            "{e:?}"
        );
        let granted = component(true);
        let e = Variables::new(&granted, None, Some(&Open))
            .list("nomad".into())
            .await
            .unwrap_err();
        assert!(
            matches!(&e, WitHostError::Denied(m) if m.contains("about none")),
            "{e:?}"
        );
        let e = Variables::new(&granted, Some(&task), None)
            .get("p".into())
            .await
            .unwrap_err();
        assert!(
            matches!(&e, WitHostError::Failed(m) if m.contains("not available")),
            "{e:?}"
        );
        let items = Variables::new(&granted, Some(&task), Some(&Open))
            .get("nomad/jobs/web".into())
            .await
            .unwrap();
        assert_eq!(items, Some(vec![("k".into(), "v".into())]));
    }
}
