//! `log`: guest log lines into the agent's `tracing` log, tagged with the component.

use crate::runtime::bindings::v0_1_0::log::Host;
use crate::runtime::bindings::v0_1_0::types::LogLevel;
use crate::runtime::store::HostState;

/// Longest line kept; the rest is cut so a guest cannot flood the log with one call.
const MAX_LINE: usize = 4096;

impl Host for HostState {
    async fn write(&mut self, level: LogLevel, message: String) {
        let mut message = message;
        if message.len() > MAX_LINE {
            let mut cut = MAX_LINE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        let component = self.component.name.as_str();
        match level {
            LogLevel::Trace => tracing::trace!(target: "component", component, "{message}"),
            LogLevel::Debug => tracing::debug!(target: "component", component, "{message}"),
            LogLevel::Info => tracing::info!(target: "component", component, "{message}"),
            LogLevel::Warn => tracing::warn!(target: "component", component, "{message}"),
            LogLevel::Error => tracing::error!(target: "component", component, "{message}"),
        }
    }
}
