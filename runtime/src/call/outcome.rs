//! How a finished call's outcome becomes what the caller sees: the value, or a
//! [`CallError`] naming the component, the operation and the kind of failure (trap, memory
//! cap, deadline), with the guest's last output lines as the explanation. A failed call's
//! store is dropped here; a clean one goes back to the warm pool.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::Serialize;

use super::{Call, INSTANTIATING};
use crate::component::LoadedComponent;
use crate::context::ComponentContext;
use crate::store::CallWitness;

/// How a call into a component failed. Distinct from a WIT error the guest returned, which
/// is a successful call carrying an `Err` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CallFailure {
    /// The guest trapped (panic, unreachable, stack overflow, ...).
    Trap,
    /// The guest hit its memory cap.
    OutOfMemory,
    /// The guest did not answer before its deadline.
    Deadline,
    /// The component is of another world than the call.
    WrongWorld,
    /// The agent is shutting down.
    Closed,
    /// The component's exports do not have the types of this agent's contract.
    ContractMismatch,
    /// The agent's guest memory budget was in use by other calls: the agent's load, not
    /// the component's fault (recoverable, not counted against its health).
    Busy,
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CallFailure::Trap => "trapped",
            CallFailure::OutOfMemory => "exceeded its memory cap",
            CallFailure::Deadline => "missed its deadline",
            CallFailure::WrongWorld => "wrong world",
            CallFailure::Closed => "runtime closed",
            CallFailure::ContractMismatch => "does not match the contract",
            CallFailure::Busy => "found the agent's guest memory in use",
        })
    }
}

/// A failed call.
#[derive(Debug, Clone, thiserror::Error)]
#[error("component {component:?} {kind} in {op}: {detail}")]
pub struct CallError {
    /// Component name.
    pub component: String,
    /// Operation, e.g. "start".
    pub op: &'static str,
    /// What kind of failure.
    pub kind: CallFailure,
    /// Details: the trap and what the guest printed.
    pub detail: String,
}

impl Call {
    pub(crate) fn finish<R>(
        self,
        comp: &LoadedComponent,
        op: &'static str,
        result: Result<wasmtime::Result<R>, tokio::time::error::Elapsed>,
    ) -> Result<R, CallError> {
        let elapsed = self.started.elapsed();
        comp.stats.record_memory(self.store.data().peak_memory());
        let metrics = self.metrics.clone();
        let warm = self.warm;
        let r = self.outcome(comp, op, result);
        let failure = r.as_ref().err().map(|e| e.kind);
        metrics.record(elapsed, warm, failure);
        comp.stats.record(matches!(
            failure,
            Some(CallFailure::Trap | CallFailure::OutOfMemory | CallFailure::Deadline)
        ));
        r
    }

    fn outcome<R>(
        mut self,
        comp: &LoadedComponent,
        op: &'static str,
        result: Result<wasmtime::Result<R>, tokio::time::error::Elapsed>,
    ) -> Result<R, CallError> {
        match result {
            Ok(Ok(r)) => {
                // A clean call may hand its store to the next one, until the store has
                // served its quota; anything unusual retires it.
                self.served += 1;
                if self.reusable
                    && self.instance.is_some()
                    && self.served < comp.ctx.limits.instance_reuse
                    && self.witness.clean()
                {
                    comp.warm.put(self);
                }
                Ok(r)
            }
            // A trapped or interrupted instance cannot be entered again: the store is
            // dropped here, and the next call gets a fresh one.
            Ok(Err(e)) => {
                let Call {
                    store,
                    witness,
                    timeout,
                    ..
                } = self;
                drop(store);
                Err(classify(&comp.ctx, op, e, &witness, timeout))
            }
            Err(_) => Err(CallError {
                component: comp.ctx.name.clone(),
                op,
                kind: CallFailure::Deadline,
                detail: format!("no answer within {:?}", self.timeout),
            }),
        }
    }
}

pub(crate) fn wrong_world(comp: &LoadedComponent, op: &'static str) -> CallError {
    CallError {
        component: comp.ctx.name.clone(),
        op,
        kind: CallFailure::WrongWorld,
        detail: format!("it is a {} component", comp.world),
    }
}

/// What a failed call's error and witness say happened: a memory cap or CPU deadline hit
/// first (they surface as traps), then a trap, then an instantiation that did not typecheck.
fn classify(
    comp: &ComponentContext,
    op: &'static str,
    e: wasmtime::Error,
    w: &CallWitness,
    timeout: Duration,
) -> CallError {
    let (kind, mut detail) = if w.budget_hit.load(Ordering::Relaxed) {
        (CallFailure::Busy, e.root_cause().to_string())
    } else if w.memory_hit.load(Ordering::Relaxed) {
        (
            CallFailure::OutOfMemory,
            format!(
                "memory cap of {} MiB reached",
                comp.limits.memory_bytes >> 20
            ),
        )
    } else if w.deadline_hit.load(Ordering::Relaxed) {
        (
            CallFailure::Deadline,
            format!("still running after {timeout:?}"),
        )
    } else if let Some(trap) = e.downcast_ref::<wasmtime::Trap>() {
        (CallFailure::Trap, trap.to_string())
    } else if e.to_string() == INSTANTIATING {
        // Instantiation failed without a trap: the exports' types differ from this agent's
        // contract (bindgen typechecks exports when instantiating, not when linking).
        (CallFailure::ContractMismatch, e.root_cause().to_string())
    } else {
        (CallFailure::Trap, e.root_cause().to_string())
    };
    let out = w.output_text();
    if !out.is_empty() {
        let tail: String = out
            .lines()
            .rev()
            .take(4)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join(" | ");
        detail.push_str(&format!("; guest output: {}", truncate(&tail, 600)));
    }
    CallError {
        component: comp.name.clone(),
        op,
        kind,
        detail,
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_string();
    }
    let mut cut = n;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &s[..cut])
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    use wasmtime_wasi::p2::pipe::MemoryOutputPipe;

    use super::*;

    fn ctx() -> ComponentContext {
        ComponentContext {
            name: "mock".into(),
            grants: Default::default(),
            plugin_config: "{}".into(),
            limits: crate::context::CallLimits {
                memory_bytes: 8 << 20,
                ..Default::default()
            },
        }
    }

    fn witness(memory: bool, deadline: bool, output: &str) -> CallWitness {
        let pipe = MemoryOutputPipe::new(4096);
        if !output.is_empty() {
            use tokio::io::AsyncWriteExt;
            let mut w = pipe.clone();
            futures::executor::block_on(w.write_all(output.as_bytes())).unwrap();
        }
        CallWitness {
            output: pipe,
            memory_hit: Arc::new(AtomicBool::new(memory)),
            deadline_hit: Arc::new(AtomicBool::new(deadline)),
            budget_hit: Arc::new(AtomicBool::new(false)),
        }
    }

    fn trap() -> wasmtime::Error {
        wasmtime::Error::from(wasmtime::Trap::UnreachableCodeReached)
    }

    #[test]
    fn caps_and_deadlines_are_told_apart_from_traps() {
        let t = Duration::from_secs(2);
        let e = classify(&ctx(), "start", trap(), &witness(true, false, ""), t);
        assert_eq!(e.kind, CallFailure::OutOfMemory);
        assert_eq!(e.detail, "memory cap of 8 MiB reached");
        let e = classify(&ctx(), "start", trap(), &witness(false, true, ""), t);
        assert_eq!(e.kind, CallFailure::Deadline);
        assert_eq!(e.detail, "still running after 2s");
        let e = classify(&ctx(), "start", trap(), &witness(false, false, ""), t);
        assert_eq!(e.kind, CallFailure::Trap);
        assert_eq!(
            e.to_string(),
            format!(
                "component \"mock\" trapped in start: {}",
                wasmtime::Trap::UnreachableCodeReached
            )
        );
    }

    #[test]
    fn an_instantiation_that_does_not_typecheck_is_a_contract_mismatch() {
        let e = wasmtime::Error::msg("type mismatch in export `info`").context(INSTANTIATING);
        let e = classify(
            &ctx(),
            "info",
            e,
            &witness(false, false, ""),
            Duration::from_secs(1),
        );
        assert_eq!(e.kind, CallFailure::ContractMismatch);
        assert_eq!(e.detail, "type mismatch in export `info`");
    }

    #[test]
    fn the_guest_s_last_lines_explain_the_failure() {
        let out: String = (1..=6).map(|i| format!("line {i}\n")).collect();
        let e = classify(
            &ctx(),
            "wait",
            trap(),
            &witness(false, false, &out),
            Duration::from_secs(1),
        );
        assert!(
            e.detail
                .ends_with("; guest output: line 3 | line 4 | line 5 | line 6"),
            "{}",
            e.detail
        );
        assert_eq!(truncate("ééé", 3), "é…");
    }
}
