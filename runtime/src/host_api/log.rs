//! `log`: guest log lines into the agent's `tracing` log, tagged with the component.

use wasmtime::component::{HasData, Linker};

use crate::bindings::v0_1::log::{self as wit, Host};
use crate::bindings::v0_1::types::LogLevel;

/// Longest line kept; the rest is cut so a guest cannot flood the log with one call.
const MAX_LINE: usize = 4096;

/// Lines one call may log; the rest of that call's are dropped, with one warning naming the
/// component (a guest logging in a loop would otherwise fill the agent's log until its
/// deadline).
pub const MAX_LOG_LINES_PER_CALL: u32 = 1000;

/// The `log` view: who is writing, and how many lines the current call has written.
pub struct Log<'a> {
    component: &'a str,
    written: &'a mut u32,
}

impl<'a> Log<'a> {
    /// Log lines of `component`; `written` counts this call's.
    pub fn new(component: &'a str, written: &'a mut u32) -> Self {
        Self { component, written }
    }
}

impl Host for Log<'_> {
    async fn write(&mut self, level: LogLevel, message: String) {
        *self.written = self.written.saturating_add(1);
        if *self.written > MAX_LOG_LINES_PER_CALL {
            if *self.written == MAX_LOG_LINES_PER_CALL + 1 {
                tracing::warn!(target: "component", component = self.component, "component logged more than {MAX_LOG_LINES_PER_CALL} lines in one call: the rest of this call's are dropped");
            }
            return;
        }
        let mut message = message;
        if message.len() > MAX_LINE {
            let mut cut = MAX_LINE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        // A guest's newline or escape sequence must not read as a line of the agent's.
        let message = crate::bounds::log_line(&message);
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
