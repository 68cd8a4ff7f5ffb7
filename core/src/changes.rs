//! The agent-wide change index (what `X-Nomad-Index` reports and blocking queries wait on)
//! and the event stream of what changed. Every state change of a job, an evaluation or an
//! allocation bumps the index.

/// Agent-wide change counter: every state change bumps it, which is what `X-Nomad-Index`
/// reports and what blocking queries wait on; and the event stream of what changed.
#[derive(Debug)]
pub struct Changes {
    tx: tokio::sync::watch::Sender<u64>,
    /// What changed, for `/v1/event/stream`.
    pub events: crate::events::EventBroker,
}

impl Default for Changes {
    fn default() -> Self {
        Self::new(crate::events::DEFAULT_BUFFER_SIZE)
    }
}

impl Changes {
    /// Changes whose event stream keeps the newest `event_buffer_size` events for replay.
    pub fn new(event_buffer_size: usize) -> Self {
        Self {
            tx: tokio::sync::watch::channel(1).0,
            events: crate::events::EventBroker::new(event_buffer_size),
        }
    }

    /// Record a change; returns the new index.
    pub fn bump(&self) -> u64 {
        let mut next = 0;
        self.tx.send_modify(|i| {
            *i += 1;
            next = *i;
        });
        next
    }

    /// Make the index at least `index` (without a change to report): at start, so that
    /// what the state DB kept with its indexes is never behind the index new writes get.
    pub fn raise_to(&self, index: u64) {
        self.tx.send_if_modified(|i| {
            let raise = *i < index;
            if raise {
                *i = index;
            }
            raise
        });
    }

    /// Current index.
    pub fn index(&self) -> u64 {
        *self.tx.borrow()
    }

    /// A receiver that sees every change.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.tx.subscribe()
    }
}
