//! `config`: the component's own `config` block from the agent config, as JSON.

use wasmtime::component::{HasData, Linker};

use crate::bindings::v0_1::config::{self as wit, Host};

/// The `config` view: the component's config block.
pub struct Config<'a> {
    json: &'a str,
}

impl<'a> Config<'a> {
    /// Serve `json` (a JSON object) as the config block.
    pub fn new(json: &'a str) -> Self {
        Self { json }
    }
}

impl Host for Config<'_> {
    async fn get(&mut self) -> String {
        self.json.to_string()
    }
}

struct HasConfig;

impl HasData for HasConfig {
    type Data<'a> = Config<'a>;
}

/// Add `config` to `linker`; `view` projects the interface's view out of the store data.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> Config<'_>,
) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, HasConfig>(linker, view)
}
