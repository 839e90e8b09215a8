//! What the loom models of this crate (`tests/loom_*.rs`) share: how a model runs, and
//! the atomics the protocol words see (`sync`).

pub mod sync;

/// Runs `f` under loom, every interleaving up to a preemption bound of 3 unless
/// `LOOM_MAX_PREEMPTIONS` sets another.
pub fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}
