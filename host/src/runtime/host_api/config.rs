//! `config`: the component's own `config` block from the agent config, as JSON.

use crate::runtime::bindings::v0_1_0::config::Host;
use crate::runtime::store::HostState;

impl Host for HostState {
    async fn get(&mut self) -> String {
        self.component.plugin_config.clone()
    }
}
