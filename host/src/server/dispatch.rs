//! Dispatching parameterized jobs (Nomad's `Job.Dispatch`): each dispatch registers a
//! child job, `<id>/dispatch-<unix seconds>-<8 hex>` (with an id prefix template,
//! `<id>/dispatch-<template>-<unix seconds>-<8 hex>`), with the parent's spec, the
//! parent's meta merged with the dispatch's, and the payload, which tasks with a
//! `dispatch_payload` block find in their `local/` dir. A dispatch with an idempotency
//! token that an earlier dispatch used, whose child has not finished, returns that child.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{RegisterError, Server};
use crate::jobspec::JobState;

/// Largest payload a dispatch may carry (Nomad's 16 KiB).
pub const MAX_PAYLOAD: usize = 16 * 1024;

/// A dispatch (Nomad's `JobDispatchRequest`).
#[derive(Debug, Clone, Default)]
pub struct DispatchRequest {
    /// Meta for the child job.
    pub meta: BTreeMap<String, String>,
    /// The payload.
    pub payload: Vec<u8>,
    /// A token naming this dispatch, so that a retry does not dispatch twice.
    pub idempotency_token: String,
    /// Put into the child's id.
    pub id_prefix_template: String,
}

/// What a dispatch made (Nomad's `JobDispatchResponse`).
#[derive(Debug, Clone)]
pub struct Dispatched {
    /// The child job's id.
    pub job_id: String,
    /// Its evaluation.
    pub eval_id: String,
    /// The change index.
    pub index: u64,
    /// The child's create index.
    pub job_create_index: u64,
}

/// Why a dispatch was refused.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// No such job.
    #[error("job not found")]
    NotFound,
    /// The job is not parameterized.
    #[error("Specified job \"{0}\" is not a parameterized job")]
    NotParameterized(String),
    /// The job is stopped.
    #[error("Specified job \"{0}\" is stopped")]
    Stopped(String),
    /// The payload, or its absence, breaks the job's `payload` rule or size limit.
    #[error("{0}")]
    Payload(String),
    /// The meta given breaks `meta_required` / `meta_optional`.
    #[error("{0}")]
    Meta(String),
    /// Registering the child failed.
    #[error(transparent)]
    Register(#[from] RegisterError),
}

impl Server {
    /// Dispatch parameterized job `(namespace, id)`.
    pub fn dispatch_job(
        self: &Arc<Self>,
        namespace: &str,
        id: &str,
        req: DispatchRequest,
    ) -> Result<Dispatched, DispatchError> {
        let parent = self.job(namespace, id).ok_or(DispatchError::NotFound)?;
        let Some(params) = parent
            .parameterized_job
            .clone()
            .filter(|_| !parent.dispatched)
        else {
            return Err(DispatchError::NotParameterized(id.to_string()));
        };
        if parent.stop {
            return Err(DispatchError::Stopped(id.to_string()));
        }
        check_request(&params, &req)?;
        if !req.idempotency_token.is_empty()
            && let Some(earlier) = self.job_children(namespace, id).into_iter().find(|c| {
                c.dispatch_idempotency_token == req.idempotency_token && c.state.status != "dead"
            })
        {
            tracing::info!(job = %id, child = %earlier.id, "dispatch with a known idempotency token: the earlier child is returned");
            return Ok(Dispatched {
                job_id: earlier.id,
                eval_id: String::new(),
                index: self.changes.index(),
                job_create_index: earlier.state.create_index,
            });
        }
        let suffix = format!(
            "{}-{}",
            jiff::Timestamp::now().as_second(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let mut child = parent.clone();
        child.id = if req.id_prefix_template.is_empty() {
            format!("{id}/dispatch-{suffix}")
        } else {
            format!("{id}/dispatch-{}-{suffix}", req.id_prefix_template)
        };
        child.name = child.id.clone();
        child.parent_id = id.to_string();
        child.dispatched = true;
        child.payload = req.payload;
        child.dispatch_idempotency_token = req.idempotency_token;
        child.meta.extend(req.meta);
        child.state = JobState::default();
        let r = self.register_job(child.clone())?;
        let job_create_index = self
            .job(namespace, &child.id)
            .map(|c| c.state.create_index)
            .unwrap_or(r.index);
        tracing::info!(job = %id, child = %child.id, "job dispatched");
        Ok(Dispatched {
            job_id: child.id,
            eval_id: r.eval_id,
            index: r.index,
            job_create_index,
        })
    }
}

/// Whether `req` gives what the parameterized job's `params` ask: its payload as allowed
/// and within [`MAX_PAYLOAD`], every required meta key, no meta key not named.
fn check_request(
    params: &crate::jobspec::ParameterizedJobConfig,
    req: &DispatchRequest,
) -> Result<(), DispatchError> {
    match params.payload.as_str() {
        "forbidden" if !req.payload.is_empty() => {
            return Err(DispatchError::Payload("Payload is not allowed".into()));
        }
        "required" if req.payload.is_empty() => {
            return Err(DispatchError::Payload("Payload is required".into()));
        }
        _ => {}
    }
    if req.payload.len() > MAX_PAYLOAD {
        return Err(DispatchError::Payload(format!(
            "Payload exceeds maximum size; {} > {MAX_PAYLOAD}",
            req.payload.len()
        )));
    }
    let missing: Vec<&String> = params
        .meta_required
        .iter()
        .filter(|k| !req.meta.contains_key(*k))
        .collect();
    if !missing.is_empty() {
        return Err(DispatchError::Meta(format!(
            "Dispatch did not provide required meta keys: {missing:?}"
        )));
    }
    let unpermitted: Vec<&String> = req
        .meta
        .keys()
        .filter(|k| !params.meta_required.contains(k) && !params.meta_optional.contains(k))
        .collect();
    if !unpermitted.is_empty() {
        return Err(DispatchError::Meta(format!(
            "Dispatch is not allowed to provide the following meta keys: {unpermitted:?}"
        )));
    }
    Ok(())
}
