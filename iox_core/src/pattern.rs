//! What the core asks of a messaging pattern, and the one place it asks it.
//!
//! The core (slots, pair queues, the claim protocol, owner bits, liveness, waking,
//! recovery's lock and its journaled-send and claim steps, inspection's port list)
//! is the same code for every pattern. What differs is behind [`PatternParts`],
//! implemented by each pattern's layout in its own folder (`pubsub/layout.rs`,
//! `event/layout.rs`, `reqres/layout.rs`, `blackboard/layout.rs`):
//! - its regions of the dynamic segment after the core's, and whether it has pair
//!   queues (the layout's constructor);
//! - the one limit of its own that the dynamic header records and an opener checks;
//! - how its dead ports are recovered;
//! - what its ports have waiting, and what its own regions hold, for tools.
//!
//! [`PatternLayout`] is the pattern's part of a [`crate::dynamic::DynamicLayout`];
//! [`PatternLayout::new`] and [`PatternLayout::parts`] are the only `match`es on the
//! pattern outside the patterns' folders, and a pattern reaches its own regions
//! through its own accessor (e.g. `Dynamic::pending`), which refuses a layout of
//! another pattern. Adding a pattern is a folder, a variant here, and its tests.

use iox_mempool::Bookkeeping;

use crate::blackboard::layout::BlackboardLayout;
use crate::dynamic::Dynamic;
use crate::event::layout::EventLayout;
pub use crate::port::Side;
use crate::pubsub::layout::PubSubLayout;
use crate::recovery::{CleanupReport, Liveness};
use crate::reqres::layout::ReqResLayout;
use crate::static_config::{PatternConfig, StaticConfig};

/// What a port has waiting for it or in flight, for tools.
#[derive(Debug, Default)]
pub struct Backlog {
    /// Samples queued for it, ids pending, or requests in flight.
    pub pending: u64,
    /// Event ids pending (listeners only).
    pub pending_ids: Vec<u32>,
    /// Samples its senders could not deliver to it (subscribers only).
    pub missed: u64,
}

/// What the core asks of a pattern (see the module docs).
pub trait PatternParts {
    /// What the pattern's sending and receiving ports are called.
    fn port_names(&self) -> (&'static str, &'static str);
    /// The limit of its own that the dynamic header records (its name in errors, and
    /// its value).
    fn header_limit(&self) -> (&'static str, u32);
    /// Where its regions end: the segment's length.
    fn end(&self) -> usize;
    /// Recovers the dead port slots of `d` (under the service's recovery lock; every
    /// step safe to repeat). `stem` reaches the receivers' doorbells.
    fn recover_ports(
        &self,
        d: Dynamic<'_>,
        stem: &str,
        pool: &Bookkeeping,
        live: &mut Liveness,
        report: &mut CleanupReport,
    );
    /// What port slot `slot` on `side` has waiting.
    fn backlog(&self, d: Dynamic<'_>, side: Side, slot: usize) -> Backlog;
    /// The state of the pattern's own regions that tools show (a blackboard's keys);
    /// nothing by default.
    fn keys(&self, _d: Dynamic<'_>, _config: &StaticConfig) -> Vec<crate::blackboard::KeyInfo> {
        Vec::new()
    }
}

/// The pattern's part of a dynamic layout.
#[derive(Debug, Clone, Copy)]
pub enum PatternLayout {
    /// A segment opened but not attached to its static config (header and users
    /// table only).
    Unattached,
    PublishSubscribe(PubSubLayout),
    Event(EventLayout),
    RequestResponse(ReqResLayout),
    Blackboard(BlackboardLayout),
}

impl PatternLayout {
    /// The layout of `c`'s pattern. `place_pairs(has_pairs)` is the core placing the
    /// pair queues (or none) and answering where they end, which is where the
    /// pattern's regions begin.
    pub fn new(c: &StaticConfig, place_pairs: impl FnOnce(bool) -> usize) -> Self {
        match &c.pattern {
            PatternConfig::PublishSubscribe(p) => {
                let device_chunks = if c.memory_type == iox_mempool::MemoryType::CudaDevice {
                    c.layout.classes().iter().map(|class| class.count as usize).sum()
                } else {
                    0
                };
                Self::PublishSubscribe(PubSubLayout::new(p, device_chunks, place_pairs))
            }
            PatternConfig::Event(e) => Self::Event(EventLayout::new(e, place_pairs)),
            PatternConfig::RequestResponse(r) => Self::RequestResponse(ReqResLayout::new(r, place_pairs)),
            PatternConfig::Blackboard(b) => Self::Blackboard(BlackboardLayout::new(b, place_pairs)),
        }
    }

    /// The pattern's answers to the core.
    pub fn parts(&self) -> &dyn PatternParts {
        match self {
            Self::Unattached => &Unattached,
            Self::PublishSubscribe(p) => p,
            Self::Event(e) => e,
            Self::RequestResponse(r) => r,
            Self::Blackboard(b) => b,
        }
    }
}

/// A pattern's part of a layout, as [`Dynamic::regions`] finds it.
pub trait Regions: std::fmt::Debug {
    /// Its part of `p`, if `p` is of its pattern.
    fn of(p: &PatternLayout) -> Option<&Self>;
}

impl<'a> Dynamic<'a> {
    /// The part of the layout of the pattern whose regions are `R` (panics on another
    /// pattern's segment: a caller of the wrong pattern).
    #[inline]
    pub fn regions<R: Regions>(&self) -> &'a R {
        let p = &self.layout().pattern;
        match R::of(p) {
            Some(r) => r,
            None => wrong_pattern(std::any::type_name::<R>(), p),
        }
    }
}

#[cold]
#[inline(never)]
fn wrong_pattern(asked: &str, p: &PatternLayout) -> ! {
    panic!("{asked} asked of {p:?}")
}

/// The parts of a segment not attached to a static config: no ports, nothing of a
/// pattern (recovery and inspection run on attached segments only).
struct Unattached;

impl PatternParts for Unattached {
    fn port_names(&self) -> (&'static str, &'static str) {
        ("port", "port")
    }
    fn header_limit(&self) -> (&'static str, u32) {
        ("none", 0)
    }
    fn end(&self) -> usize {
        crate::dynamic::DynamicLayout::header_only().len
    }
    fn recover_ports(
        &self,
        _: Dynamic<'_>,
        _: &str,
        _: &Bookkeeping,
        _: &mut Liveness,
        _: &mut CleanupReport,
    ) {
    }
    fn backlog(&self, _: Dynamic<'_>, _: Side, _: usize) -> Backlog {
        Backlog::default()
    }
}
