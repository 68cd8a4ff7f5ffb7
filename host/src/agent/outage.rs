//! After a state DB outage (a full or failing disk, see [`crate::state`]): placements that
//! failed because their allocations could not be stored are made again once the state DB
//! writes again. Their jobs were stored with a mark that their placement was on its way,
//! which only a stored placement clears, so they are the ones a restart would place again
//! ([`Agent::place_interrupted`]); this does it without the restart.

use std::sync::Arc;
use std::time::Duration;

use super::Agent;

/// How often the watch looks at the state DB.
const TICK: Duration = Duration::from_millis(50);

impl Agent {
    /// Watch for the end of state DB outages, and place what they cut short.
    pub(super) fn spawn_outage_watch(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut was_down = false;
            loop {
                tokio::time::sleep(TICK).await;
                let Some(a) = weak.upgrade() else { return };
                let down = a.db.unwritable().is_some();
                if was_down && !down {
                    tracing::info!("the state DB writes again: placing what its outage cut short");
                    let agent = a.clone();
                    let _ = tokio::task::spawn_blocking(move || agent.place_interrupted()).await;
                }
                was_down = down;
            }
        });
    }
}
