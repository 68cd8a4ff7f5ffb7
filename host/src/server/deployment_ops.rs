//! What operators do to a deployment (Nomad's `Deployment.*` endpoints): promote its
//! canaries, fail it, pause and resume it, and set allocations' health when the group says
//! `health_check = "manual"`. Each refuses a terminal deployment in Nomad's words, and
//! hands what follows to the watcher's machinery ([`super::deployments`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Server;
use super::deployments::{DeploymentUpdate, Next};
use crate::structs::Deployment;
use crate::structs::deployment::{self, desc};

/// Why an operation on a deployment was refused.
#[derive(Debug, thiserror::Error)]
pub enum DeploymentError {
    /// No deployment (or allocation of it) by that id.
    #[error("{0}")]
    NotFound(String),
    /// The deployment ended; Nomad's words (`can't promote terminal deployment`).
    #[error("{0}")]
    Terminal(&'static str),
    /// The request cannot be carried out as asked (a canary not healthy yet, ...).
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Register(#[from] super::RegisterError),
}

impl Server {
    /// A running deployment by id, or Nomad's refusal (`terminal` for an ended one).
    fn active_deployment(
        &self,
        id: &str,
        terminal: &'static str,
    ) -> Result<Deployment, DeploymentError> {
        let d = self
            .deployment(id)
            .ok_or_else(|| DeploymentError::NotFound(format!("deployment not found: {id}")))?;
        if !d.active() {
            return Err(DeploymentError::Terminal(terminal));
        }
        Ok(d)
    }

    /// Promote a deployment's canaries (`groups`, or all): each group's canaries must be
    /// healthy; the rest of the old version then rolls.
    pub fn promote_deployment(
        self: &Arc<Self>,
        id: &str,
        groups: Option<&[String]>,
    ) -> Result<DeploymentUpdate, DeploymentError> {
        let mut d = self.active_deployment(id, "can't promote terminal deployment")?;
        if d.status == deployment::PAUSED {
            return Err(DeploymentError::Invalid(
                "can't promote deployment while paused".into(),
            ));
        }
        self.recount(&mut d);
        let chosen = |name: &str| groups.is_none_or(|g| g.iter().any(|x| x == name));
        if let Some(g) = groups
            .unwrap_or_default()
            .iter()
            .find(|g| !d.task_groups.contains_key(*g))
        {
            return Err(DeploymentError::Invalid(format!(
                "deployment has no task group {g:?}"
            )));
        }
        if !d
            .task_groups
            .iter()
            .any(|(n, g)| chosen(n) && g.desired_canaries > 0 && !g.promoted)
        {
            return Err(DeploymentError::Invalid("no canaries to promote".into()));
        }
        let mut only: BTreeMap<String, _> = d.task_groups.clone();
        only.retain(|n, _| chosen(n));
        Deployment {
            task_groups: only,
            ..Default::default()
        }
        .canaries_healthy()
        .map_err(DeploymentError::Invalid)?;
        for (n, g) in d.task_groups.iter_mut() {
            if chosen(n) && g.desired_canaries > 0 {
                g.promoted = true;
            }
        }
        d.status_description = d.running_description().into();
        d.modify_time = crate::util::now_nanos();
        tracing::info!(deployment = %d.id, job = %d.job_id, "deployment promoted");
        let (namespace, job_id) = (d.namespace.clone(), d.job_id.clone());
        self.put_deployment(d, "DeploymentPromotion");
        Ok(self.carry_out(&namespace, &job_id, Next::Evaluate))
    }

    /// Fail a deployment as an operator asks; with `auto_revert`, the stable version is
    /// registered again.
    pub fn fail_deployment(
        self: &Arc<Self>,
        id: &str,
    ) -> Result<DeploymentUpdate, DeploymentError> {
        let mut d = self.active_deployment(id, "can't fail terminal deployment")?;
        let next = self.failing(&mut d, desc::FAILED_BY_USER);
        d.modify_time = crate::util::now_nanos();
        let (namespace, job_id) = (d.namespace.clone(), d.job_id.clone());
        let index = d.modify_index;
        self.put_deployment(d, "DeploymentStatusUpdate");
        let mut out = self.carry_out(&namespace, &job_id, next);
        if out.eval_id.is_empty() {
            // The job is evaluated, so a failed deployment's canaries stop.
            out = self.carry_out(&namespace, &job_id, Next::Evaluate);
        }
        out.index = out.index.max(index);
        Ok(out)
    }

    /// Pause (or resume) a deployment: paused, it replaces nothing more.
    pub fn pause_deployment(
        self: &Arc<Self>,
        id: &str,
        pause: bool,
    ) -> Result<DeploymentUpdate, DeploymentError> {
        let terminal = if pause {
            "can't pause terminal deployment"
        } else {
            "can't resume terminal deployment"
        };
        let mut d = self.active_deployment(id, terminal)?;
        if pause {
            d.status = deployment::PAUSED.into();
            d.status_description = desc::PAUSED.into();
        } else {
            d.status = deployment::RUNNING.into();
            d.status_description = d.running_description().into();
        }
        d.modify_time = crate::util::now_nanos();
        let index = d.modify_index;
        let (namespace, job_id) = (d.namespace.clone(), d.job_id.clone());
        self.put_deployment(d, "DeploymentStatusUpdate");
        if pause {
            return Ok(DeploymentUpdate {
                index,
                ..Default::default()
            });
        }
        self.arm_progress_deadline(id);
        Ok(self.carry_out(&namespace, &job_id, Next::Evaluate))
    }

    /// Set allocations' health by hand (Nomad's `allocation-health`, what `manual` health
    /// checks wait for); each must belong to the deployment.
    pub fn set_deployment_alloc_health(
        self: &Arc<Self>,
        id: &str,
        healthy: &[String],
        unhealthy: &[String],
    ) -> Result<DeploymentUpdate, DeploymentError> {
        let d = self.active_deployment(
            id,
            "can't set health of allocations for a terminal deployment",
        )?;
        if healthy.is_empty() && unhealthy.is_empty() {
            return Err(DeploymentError::Invalid(
                "must specify at least one healthy/unhealthy allocation ID".into(),
            ));
        }
        let mine: Vec<String> = self
            .deployment_allocations(&d)
            .into_iter()
            .map(|a| a.id)
            .collect();
        for a in healthy.iter().chain(unhealthy) {
            if !mine.contains(a) {
                return Err(DeploymentError::NotFound(format!(
                    "Deployment {:?} does not contain allocation {a:?}",
                    d.id
                )));
            }
        }
        for a in healthy {
            self.client.set_deployment_health(a, true);
        }
        for a in unhealthy {
            self.client.set_deployment_health(a, false);
        }
        // The watcher moves it on; answered with the deployment as it is now.
        Ok(DeploymentUpdate {
            index: self.changes.index(),
            ..Default::default()
        })
    }
}
