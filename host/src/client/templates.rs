//! Which running tasks render their templates again, and when: the client listens to the
//! change events, and a burst of `Service` registrations or `Variables` writes in a
//! namespace (gathered for [`GATHER`]) re-renders, once, each running task of that namespace
//! whose templates read them (`nomadService`/`nomadServices`, `nomadVar`/`nomadVarList`; a
//! template read from a file (`source`) may read either). The task runner renders and
//! applies `change_mode` ([`crate::taskrunner::templates`]). Events the listener missed (it
//! lagged behind the broker) re-render every task with templates.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;

use super::Client;
use crate::jobspec::Template;

/// How long a burst of changes is gathered before tasks render again.
pub const GATHER: Duration = Duration::from_millis(100);

/// What changed in a burst.
#[derive(Debug, Default)]
struct Changed {
    /// Namespaces whose service registrations changed.
    services: BTreeSet<String>,
    /// Namespaces whose variables changed.
    variables: BTreeSet<String>,
    /// Events were missed: every task renders again.
    all: bool,
}

impl Changed {
    fn note(&mut self, ev: &crate::events::Event) {
        match ev.topic {
            "Service" => {
                self.services.insert(ev.namespace.clone());
            }
            "Variables" => {
                self.variables.insert(ev.namespace.clone());
            }
            _ => {}
        }
    }

    fn is_empty(&self) -> bool {
        !self.all && self.services.is_empty() && self.variables.is_empty()
    }

    /// Whether a template of a task in `namespace` reads something that changed.
    fn touches(&self, namespace: &str, t: &Template) -> bool {
        let reads = |what: &str| t.embedded_tmpl.contains(what) || !t.source_path.is_empty();
        self.all
            || (self.services.contains(namespace) && reads("nomadService"))
            || (self.variables.contains(namespace) && reads("nomadVar"))
    }
}

impl Client {
    /// Start the listener that keeps running tasks' templates live.
    pub fn spawn_template_watch(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        let mut rx = self.changes.events.subscribe();
        self.work.spawn(async move {
            loop {
                let mut changed = Changed::default();
                match rx.recv().await {
                    Ok(ev) => changed.note(&ev),
                    Err(RecvError::Lagged(_)) => changed.all = true,
                    Err(RecvError::Closed) => return,
                }
                if changed.is_empty() {
                    continue;
                }
                let gathered = tokio::time::sleep(GATHER);
                tokio::pin!(gathered);
                loop {
                    tokio::select! {
                        _ = &mut gathered => break,
                        ev = rx.recv() => match ev {
                            Ok(ev) => changed.note(&ev),
                            Err(RecvError::Lagged(_)) => changed.all = true,
                            Err(RecvError::Closed) => return,
                        },
                    }
                }
                let Some(client) = weak.upgrade() else { return };
                client.rerender(&changed);
            }
        });
    }

    /// Render again the templates `changed` touches, of every running task (each task on
    /// its own, one render at a time).
    fn rerender(&self, changed: &Changed) {
        let mut asked = 0usize;
        for runner in self.runners() {
            let namespace = runner
                .shared()
                .peek(|a| (!a.is_terminal()).then(|| a.namespace.clone()));
            let Some(namespace) = namespace else { continue };
            for t in runner.tasks() {
                if t.has_live_templates()
                    && t.task()
                        .templates
                        .iter()
                        .any(|tm| changed.touches(&namespace, tm))
                {
                    t.rerender_soon();
                    asked += 1;
                }
            }
        }
        if asked > 0 {
            tracing::debug!(tasks = asked, "rendering templates again");
        }
    }
}
