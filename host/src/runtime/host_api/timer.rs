//! `timer`: short sleeps inside a call (bounded by the call's deadline) and wall-clock time.

use std::time::Duration;

use crate::runtime::bindings::v0_1_0::timer::Host;
use crate::runtime::store::HostState;

impl Host for HostState {
    async fn sleep(&mut self, duration_ns: u64) {
        // The call's own timeout cancels this future; clamping keeps tokio's timer sane.
        let d = Duration::from_nanos(duration_ns).min(Duration::from_secs(86_400));
        tokio::time::sleep(d).await;
    }

    async fn now(&mut self) -> u64 {
        crate::util::now_nanos()
    }
}
