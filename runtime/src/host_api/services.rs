//! `services` (contract 0.1.1): the Nomad-native service registrations in the current task's
//! namespace, served from the embedder's [`ServiceHost`] (the agent's service registry). This
//! view checks the component's `services` grant and that the call is about a task with a
//! workload identity (whose namespace is the only one it reads); the registry answers.

use wasmtime::component::{HasData, Linker};

use crate::bindings::v0_1::services::{self as wit, Host};
use crate::bindings::v0_1::types::HostError as WitHostError;
use crate::context::{ComponentContext, TaskContext};
use crate::types::{HostError, ServiceChoice, ServiceRegistration, ServiceStub};

/// Where service registrations come from. Called on a guest's call path, from any thread: it
/// must answer from memory and never block on I/O.
pub trait ServiceHost: Send + Sync {
    /// The registrations of `name` in `namespace`, in create order; only those tagged `tag`
    /// when given; only those `choose` picks when given.
    fn get(
        &self,
        namespace: &str,
        name: &str,
        tag: Option<&str>,
        choose: Option<&ServiceChoice>,
    ) -> Result<Vec<ServiceRegistration>, HostError>;
    /// Every service in `namespace`, sorted by name, with the union of its tags.
    fn list(&self, namespace: &str) -> Result<Vec<ServiceStub>, HostError>;
}

/// The `services` view: the calling component (for its grant), the task, and the host.
pub struct Services<'a> {
    component: &'a ComponentContext,
    task: Option<&'a TaskContext>,
    host: Option<&'a dyn ServiceHost>,
}

impl<'a> Services<'a> {
    /// Services as `component` sees them in a call about `task`, served by `host`.
    pub fn new(
        component: &'a ComponentContext,
        task: Option<&'a TaskContext>,
        host: Option<&'a dyn ServiceHost>,
    ) -> Self {
        Self {
            component,
            task,
            host,
        }
    }

    /// The host and the namespace to ask it about, once the grant and the task are checked.
    fn checked(&self, what: &str) -> Result<(&'a dyn ServiceHost, &'a str), HostError> {
        if !self.component.grants.services {
            return Err(HostError::denied(&self.component.name, "services", what));
        }
        let host = self.host.ok_or_else(|| HostError::unavailable(what))?;
        let who = self.task.and_then(|t| t.workload.as_ref()).ok_or_else(|| {
            HostError::Denied(format!(
                "{what}: services are read on behalf of a task, and this call is about none"
            ))
        })?;
        Ok((host, &who.namespace))
    }
}

impl Host for Services<'_> {
    async fn get(
        &mut self,
        name: String,
        tag: Option<String>,
        choose: Option<wit::Choice>,
    ) -> Result<Vec<wit::ServiceRegistration>, WitHostError> {
        let (host, namespace) = self.checked(&format!("services.get({name:?})"))?;
        let choose = choose.map(|c| ServiceChoice {
            count: c.count,
            key: c.key,
        });
        Ok(host
            .get(namespace, &name, tag.as_deref(), choose.as_ref())?
            .into_iter()
            .map(Into::into)
            .collect())
    }

    async fn list(&mut self) -> Result<Vec<wit::ServiceStub>, WitHostError> {
        let (host, namespace) = self.checked("services.list()")?;
        Ok(host.list(namespace)?.into_iter().map(Into::into).collect())
    }
}

struct HasServices;

impl HasData for HasServices {
    type Data<'a> = Services<'a>;
}

/// Add `services` to `linker`; `view` projects the interface's view out of the store data.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> Services<'_>,
) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, HasServices>(linker, view)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::WorkloadIdentity;
    use std::sync::Mutex;

    /// Answers one registration and remembers the namespace it was asked about, so only the
    /// view's own checks can refuse.
    #[derive(Default)]
    struct Book(Mutex<Vec<String>>);

    impl ServiceHost for Book {
        fn get(
            &self,
            namespace: &str,
            name: &str,
            _: Option<&str>,
            _: Option<&ServiceChoice>,
        ) -> Result<Vec<ServiceRegistration>, HostError> {
            self.0.lock().unwrap().push(namespace.to_string());
            Ok(vec![ServiceRegistration {
                service_name: name.into(),
                namespace: namespace.into(),
                port: 8080,
                ..Default::default()
            }])
        }
        fn list(&self, namespace: &str) -> Result<Vec<ServiceStub>, HostError> {
            self.0.lock().unwrap().push(namespace.to_string());
            Ok(Vec::new())
        }
    }

    fn component(services: bool) -> ComponentContext {
        ComponentContext {
            name: "template".into(),
            grants: crate::Grants {
                services,
                ..Default::default()
            },
            plugin_config: "{}".into(),
            limits: Default::default(),
        }
    }

    #[tokio::test]
    async fn the_grant_and_a_task_are_required_and_only_its_namespace_is_read() {
        let task = TaskContext {
            workload: Some(WorkloadIdentity {
                namespace: "prod".into(),
                job_id: "web".into(),
                group: "g".into(),
                task: "t".into(),
            }),
            ..Default::default()
        };
        let book = Book::default();
        let ungranted = component(false);
        let e = Services::new(&ungranted, Some(&task), Some(&book))
            .get("db".into(), None, None)
            .await
            .unwrap_err();
        assert!(
            matches!(&e, WitHostError::Denied(m) if m.contains("`services` grant") && m.contains("\"db\"")),
            "{e:?}"
        );
        let granted = component(true);
        let e = Services::new(&granted, None, Some(&book))
            .list()
            .await
            .unwrap_err();
        assert!(
            matches!(&e, WitHostError::Denied(m) if m.contains("about none")),
            "{e:?}"
        );
        let e = Services::new(&granted, Some(&task), None)
            .list()
            .await
            .unwrap_err();
        assert!(
            matches!(&e, WitHostError::Failed(m) if m.contains("not available")),
            "{e:?}"
        );
        assert!(book.0.lock().unwrap().is_empty(), "refused before the host");
        let found = Services::new(&granted, Some(&task), Some(&book))
            .get("db".into(), None, None)
            .await
            .unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(
            (found[0].service_name.as_str(), found[0].port),
            ("db", 8080)
        );
        assert_eq!(*book.0.lock().unwrap(), ["prod"]);
    }
}
