//! The agent's one wasmtime `Engine` and the epoch ticker that bounds guest CPU time.

use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How the engine is built. Defaults suit a node running many short calls.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Use the pooling allocator (falls back to on-demand when address space is short).
    pub pooling: bool,
    /// Component instances alive at once (bounded by the pool and by a semaphore).
    pub max_instances: u32,
    /// Largest linear memory any guest may have, bytes (per-component caps sit below it).
    pub max_memory_bytes: usize,
    /// Epoch tick; guest CPU deadlines are checked at this granularity.
    pub epoch_tick: Duration,
    /// Linear memory of all live instances together, bytes: the agent's guest memory
    /// budget ([`crate::store::MemoryBudget`]).
    pub memory_budget_bytes: usize,
}

/// The agent's guest memory budget unless its `limits { guest_memory_mb }` says otherwise.
pub const DEFAULT_MEMORY_BUDGET: usize = 1 << 30;

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            pooling: true,
            max_instances: 500,
            max_memory_bytes: 512 << 20,
            epoch_tick: Duration::from_millis(10),
            memory_budget_bytes: DEFAULT_MEMORY_BUDGET,
        }
    }
}

/// Which instance allocator the engine ended up with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Allocator {
    /// The pooling allocator with copy-on-write memory images.
    Pooling,
    /// Plain mmap per instance (used when the pool cannot reserve its address space).
    OnDemand,
}

fn base_config() -> Config {
    let mut c = Config::new();
    c.wasm_component_model(true)
        // Cranelift, never Winch, for untrusted code (Winch had sandbox escapes in 2026).
        .strategy(wasmtime::Strategy::Cranelift)
        .epoch_interruption(true)
        .memory_init_cow(true)
        .max_wasm_stack(1 << 20);
    c
}

/// Build the engine: pooling when asked for and possible, on-demand otherwise.
pub fn build(cfg: &EngineConfig) -> wasmtime::Result<(Engine, Allocator)> {
    if cfg.pooling {
        let mut pool = PoolingAllocationConfig::default();
        let n = cfg.max_instances;
        pool.total_component_instances(n)
            .total_core_instances(8 * n)
            .total_memories(2 * n)
            .total_tables(8 * n)
            .total_stacks(n)
            .max_memory_size(cfg.max_memory_bytes)
            .max_core_instances_per_component(50)
            .max_memories_per_component(8)
            .max_tables_per_component(16)
            .max_component_instance_size(1 << 20)
            .max_core_instance_size(1 << 20)
            // Reset a returning slot by scanning which pages the call touched (PAGEMAP_SCAN,
            // Linux 6.7+) and restoring just those with memset: no madvise, and no page
            // faults on the next call. Older kernels fall back to madvise.
            .pagemap_scan(wasmtime::Enabled::Auto)
            .linear_memory_keep_resident(16 << 20)
            .table_keep_resident(1 << 20);
        let mut c = base_config();
        c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        match Engine::new(&c) {
            Ok(engine) => return Ok((engine, Allocator::Pooling)),
            Err(e) => {
                tracing::warn!(error = %e, "pooling allocator unavailable, using on-demand allocation")
            }
        }
    }
    Ok((Engine::new(&base_config())?, Allocator::OnDemand))
}

/// Ticks the engine's epoch on a dedicated thread. Holds only a weak engine reference and
/// stops when the engine is dropped or the ticker is.
pub struct EpochTicker {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl EpochTicker {
    /// Start ticking every `tick`.
    pub fn start(engine: &Engine, tick: Duration) -> Self {
        let weak = engine.weak();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("paddock-epoch".into())
            .spawn(move || {
                while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .expect("spawning the epoch ticker thread");
        Self { stop }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_by_default_and_on_demand_when_the_pool_cannot_reserve() {
        let (_, alloc) = build(&EngineConfig::default()).unwrap();
        assert_eq!(alloc, Allocator::Pooling);
        // 40,000 memories of ~4 GiB reservation each need more address space than a
        // 47-bit user space has: the pool cannot be reserved and the engine falls back.
        let (_, alloc) = build(&EngineConfig {
            max_instances: 20_000,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(alloc, Allocator::OnDemand);
    }
}
