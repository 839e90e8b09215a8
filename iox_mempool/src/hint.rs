//! Cache hints for the hot path: ask for a line of shared memory before the step that
//! needs it, so that lines a message needs from the other process's core travel at
//! once instead of one after the other. On x86-64 an atomic read-modify-write waits
//! for every earlier load and store, so a line first asked for after one starts
//! travelling only when it is done; a hint issued before it overlaps the two.
//!
//! Invariants: a hint changes no memory the program sees, never faults (any address,
//! mapped or not, is allowed) and leaves the flags alone; on other machines it is
//! nothing. Ports call it only on addresses of their own service's mappings.

/// Asks for the line at `p` for reading (x86-64 `prefetcht0`).
#[inline(always)]
pub fn prefetch_read(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` only hints the cache: it reads nothing the program sees
    // and never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Asks for the line at `p` for writing (x86-64 `prefetchw`, which cores without it
/// run as a no-op): the line arrives owned, so the store that follows needs no second
/// trip.
#[inline(always)]
pub fn prefetch_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetchw` reads and writes nothing the program sees, never faults,
    // whatever the address, touches no stack and leaves the flags alone.
    unsafe {
        std::arch::asm!(
            "prefetchw [{0}]",
            in(reg) p,
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
