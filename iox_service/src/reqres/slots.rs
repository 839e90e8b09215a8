//! Queue entries of requests and responses, port slot states, and waiting. The
//! request-slot word itself is [`super::request_word`].

use std::sync::atomic::{Ordering, fence};
use std::time::{Duration, Instant};

use crate::dynamic::{self, PortHeader};

/// The request-slot index a `seq` names.
pub(crate) fn slot_of(seq: u32) -> usize {
    (seq & 0xff) as usize
}

/// The `seq` of queue entry `entry`.
pub(crate) fn seq_of(entry: u64) -> u32 {
    (entry >> 32) as u32
}

/// The `seq` for request number `rid` in slot `k`.
pub(crate) fn seq(rid: u32, k: usize) -> u32 {
    ((rid & 0x7f_ffff) << 8) | k as u32
}

/// The (generation, phase) of a port slot, Acquire (pairs with `port::close`'s SeqCst
/// store and `port::free`'s Release of the node word).
pub(crate) fn slot_state(h: &PortHeader) -> (u64, u64) {
    dynamic::split_state(h.state.load(Ordering::Acquire))
}

/// Whether the port in slot `h` is still the one seen in `generation`, and active.
pub(crate) fn same_port(h: &PortHeader, generation: u64) -> bool {
    slot_state(h) == (generation, dynamic::ACTIVE)
}

/// How often a port looks at a peer's node lock (a few system calls) while it waits
/// on it or sends to it.
pub(crate) const LIVENESS_PERIOD: Duration = Duration::from_millis(10);

/// What one look for work found.
pub(crate) enum Step<T> {
    /// Something to return.
    Got(T),
    /// Nothing, and nothing will come (end of stream).
    Done,
    /// Nothing yet.
    Nothing,
}

/// Blocks on `header`'s futex word until `look` finds something or the timeout
/// passes (then `Ok(None)`); with `watch_peer`, `look` runs at least every
/// [`LIVENESS_PERIOD`] so that it can notice a dead peer (a pending response waiting
/// on its server); without, the sleep lasts until a wake or the timeout. The waiter
/// protocol of `Subscriber::receive_timeout`.
pub(crate) fn wait<T, E>(
    header: &PortHeader,
    timeout: Duration,
    watch_peer: bool,
    mut look: impl FnMut() -> Result<Step<T>, E>,
    wait_error: impl Fn(std::io::Error) -> E,
) -> Result<Option<T>, E> {
    let deadline = Instant::now().checked_add(timeout);
    loop {
        match look()? {
            Step::Got(t) => return Ok(Some(t)),
            Step::Done => return Ok(None),
            Step::Nothing => {}
        }
        let seen = header.wake.load(Ordering::Acquire);
        header.waiting.fetch_add(1, Ordering::SeqCst);
        // Pairs with the sender's fence after its push (store-buffering pattern).
        fence(Ordering::SeqCst);
        let again = look();
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let result = match &again {
            Ok(Step::Nothing) if left != Some(Duration::ZERO) => {
                let slice = match (left, watch_peer) {
                    (Some(l), true) => Some(l.min(LIVENESS_PERIOD)),
                    (None, true) => Some(LIVENESS_PERIOD),
                    (left, false) => left,
                };
                crate::port::futex_sleep(&header.wake, seen, slice)
            }
            _ => Ok(()),
        };
        header.waiting.fetch_sub(1, Ordering::Relaxed);
        match again? {
            Step::Got(t) => return Ok(Some(t)),
            Step::Done => return Ok(None),
            Step::Nothing => {}
        }
        match result {
            Ok(()) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(wait_error(e.into())),
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return match look()? {
                Step::Got(t) => Ok(Some(t)),
                _ => Ok(None),
            };
        }
    }
}

/// Rate limit for looking at a peer's liveness, on the kernel's coarse monotonic
/// clock: read from the vDSO without a timer read (cheap enough for every response
/// a server sends), a few milliseconds' resolution, which a 10 ms period does not
/// notice. Nanoseconds of the last look; 0 before the first.
#[derive(Debug, Default)]
pub(crate) struct LivenessClock(std::cell::Cell<u64>);

impl LivenessClock {
    /// Whether it is time to look again (and if so, the clock restarts).
    pub(crate) fn due(&self) -> bool {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
        let now = (t.tv_sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(t.tv_nsec as u64);
        let last = self.0.get();
        if last != 0 && now.wrapping_sub(last) < LIVENESS_PERIOD.as_nanos() as u64 {
            return false;
        }
        self.0.set(now.max(1));
        true
    }
}
