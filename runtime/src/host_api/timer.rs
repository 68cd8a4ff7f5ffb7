//! `timer`: short sleeps inside a call (bounded by the call's deadline) and wall-clock time.

use std::time::Duration;

use wasmtime::component::{HasData, Linker};

use crate::bindings::v0_1::timer::{self as wit, Host};

/// The `timer` view; it needs nothing of the call.
pub struct Timer;

impl Host for Timer {
    async fn sleep(&mut self, duration_ns: u64) {
        // The call's own timeout cancels this future; clamping keeps tokio's timer sane.
        let d = Duration::from_nanos(duration_ns).min(Duration::from_secs(86_400));
        tokio::time::sleep(d).await;
    }

    async fn now(&mut self) -> u64 {
        crate::now_nanos()
    }
}

struct HasTimer;

impl HasData for HasTimer {
    type Data<'a> = Timer;
}

/// Add `timer` to `linker`.
pub fn add_to_linker<T: Send + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, HasTimer>(linker, |_| Timer)
}
