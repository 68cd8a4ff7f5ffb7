//! `log`: guest log lines into the agent's `tracing` log, tagged with the component.

use wasmtime::component::{HasData, Linker};

use crate::bindings::v0_1_0::log::{self as wit, Host};
use crate::bindings::v0_1_0::types::LogLevel;

/// Longest line kept; the rest is cut so a guest cannot flood the log with one call.
const MAX_LINE: usize = 4096;

/// The `log` view: who is writing.
pub struct Log<'a> {
    component: &'a str,
}

impl<'a> Log<'a> {
    /// Log lines of `component`.
    pub fn new(component: &'a str) -> Self {
        Self { component }
    }
}

impl Host for Log<'_> {
    async fn write(&mut self, level: LogLevel, message: String) {
        let mut message = message;
        if message.len() > MAX_LINE {
            let mut cut = MAX_LINE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        let component = self.component;
        match level {
            LogLevel::Trace => tracing::trace!(target: "component", component, "{message}"),
            LogLevel::Debug => tracing::debug!(target: "component", component, "{message}"),
            LogLevel::Info => tracing::info!(target: "component", component, "{message}"),
            LogLevel::Warn => tracing::warn!(target: "component", component, "{message}"),
            LogLevel::Error => tracing::error!(target: "component", component, "{message}"),
        }
    }
}

struct HasLog;

impl HasData for HasLog {
    type Data<'a> = Log<'a>;
}

/// Add `log` to `linker`; `view` projects the interface's view out of the store data.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> Log<'_>,
) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, HasLog>(linker, view)
}
