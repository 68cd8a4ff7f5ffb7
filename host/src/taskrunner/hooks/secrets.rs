//! `secrets`: fetches the task's `secret` blocks through their provider components before
//! it starts (Nomad 1.11's secrets hook), on the task's behalf: the provider's `variables`
//! reads are the task's workload identity's. The items become `${secret.NAME.KEY}` for the
//! task's interpolation; they are kept in the invocation's env builder only (never stored,
//! never the environment unless the job's `env` names them), and task events show
//! `<redacted>` where one would appear ([`crate::taskrunner::TaskRunner`]'s events).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::secretproviders::SecretProviders;
use crate::taskrunner::interfaces::{
    HookFailure, HookResult, Invocation, PrestartRequest, PrestartResponse, TaskHook,
};

/// Fetches the task's secrets.
pub struct SecretsHook {
    providers: Arc<SecretProviders>,
}

impl SecretsHook {
    /// The hook.
    pub fn new(providers: Arc<SecretProviders>) -> Self {
        Self { providers }
    }
}

impl TaskHook for SecretsHook {
    fn name(&self) -> &str {
        "secrets"
    }

    fn prestart<'a>(
        &'a self,
        req: &'a PrestartRequest<'a>,
        inv: &'a mut Invocation,
    ) -> BoxFuture<'a, HookResult<PrestartResponse>> {
        Box::pin(async move {
            let task = req.view.task;
            if task.secrets.is_empty() {
                return Ok(PrestartResponse::default());
            }
            let ctx = super::wasm::context(req.view, Some(inv))
                .expect("a prestart call has its invocation");
            let env = inv.env.build();
            let mut all = BTreeMap::new();
            for s in &task.secrets {
                let path = env.interpolate(&s.path);
                let config = s
                    .config_text()
                    .into_iter()
                    .map(|(k, v)| (k, env.interpolate(&v)))
                    .collect();
                let items = self
                    .providers
                    .fetch(&s.provider, &s.name, &path, &config, ctx.clone())
                    .await
                    .map_err(|e| {
                        HookFailure::setup(format!("failed to fetch secrets: {e}"), e.recoverable())
                    })?;
                for (k, v) in items {
                    all.insert(format!("secret.{}.{k}", s.name), v);
                }
            }
            inv.env.set_secrets(all);
            Ok(PrestartResponse::default())
        })
    }
}
