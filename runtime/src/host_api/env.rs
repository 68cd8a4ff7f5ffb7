//! `env`: the environment of the task a call is about, built by the embedder (the agent's
//! env builder) and served here with Nomad's `${...}` interpolation.

use wasmtime::component::{HasData, Linker};

use crate::bindings::v0_1::env::{self as wit, Host};
use crate::bindings::v0_1::types::HostError as WitHostError;
use crate::context::{ComponentContext, TaskContext};
use crate::types::HostError;

/// The `env` view: the calling component (for its grant) and the task, if any.
pub struct Env<'a> {
    component: &'a ComponentContext,
    task: Option<&'a TaskContext>,
}

impl<'a> Env<'a> {
    /// The environment of `task` as `component` sees it.
    pub fn new(component: &'a ComponentContext, task: Option<&'a TaskContext>) -> Self {
        Self { component, task }
    }

    fn check(&self, what: &str) -> Result<(), HostError> {
        if self.component.grants.env {
            Ok(())
        } else {
            Err(HostError::denied(&self.component.name, "env", what))
        }
    }
}

impl Host for Env<'_> {
    async fn all(&mut self) -> Result<Vec<(String, String)>, WitHostError> {
        self.check("env.all")?;
        Ok(self.task.map(|t| t.env.sorted_pairs()).unwrap_or_default())
    }

    async fn get(&mut self, key: String) -> Result<Option<String>, WitHostError> {
        self.check("env.get")?;
        Ok(self.task.and_then(|t| t.env.get(&key).map(str::to_string)))
    }

    async fn interpolate(&mut self, template: String) -> Result<String, WitHostError> {
        self.check("env.interpolate")?;
        Ok(match self.task {
            Some(t) => t.env.interpolate(&template),
            None => template,
        })
    }
}

struct HasEnv;

impl HasData for HasEnv {
    type Data<'a> = Env<'a>;
}

/// Add `env` to `linker`; `view` projects the interface's view out of the store data.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> Env<'_>,
) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, HasEnv>(linker, view)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_the_grant_every_call_is_denied() {
        let component = ComponentContext {
            name: "h".into(),
            grants: Default::default(),
            plugin_config: "{}".into(),
            limits: Default::default(),
        };
        let view = Env::new(&component, None);
        assert!(
            matches!(view.check("env.all"), Err(HostError::Denied(m)) if m.contains("`env` grant"))
        );
    }
}
