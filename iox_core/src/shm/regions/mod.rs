//! Every pattern's regions of the dynamic segment, and the one place the segment asks a
//! pattern anything.
//!
//! The core (slots, pair queues, the claim protocol, owner bits, liveness, waking) is
//! the same for every pattern. What the segment needs of a pattern is behind
//! [`PatternParts`], implemented by each pattern's layout here (`pubsub.rs`,
//! `event.rs`, `reqres.rs`, `blackboard.rs`): its regions after the core's and whether
//! it has pair queues (the layout's constructor), the one limit of its own that the
//! dynamic header records and an opener checks, and where its regions end.
//!
//! [`PatternLayout`] is the pattern's part of a [`crate::dynamic::DynamicLayout`], a
//! closed enum as the static config's pattern section is. The `match`es on it are
//! [`PatternLayout::new`] and [`PatternLayout::parts`] here, recovery's dispatch of a
//! dead port to its pattern (`crate::recovery`) and inspection's of what a port has
//! waiting (`crate::inspect`). A pattern reaches its own regions through its own
//! accessor (e.g. `Dynamic::pending`), which refuses a layout of another pattern.
//! Adding a pattern is a variant here and in the static config, its layout, its
//! recovery, its ports above the core, and its tests.

pub mod blackboard;
pub mod event;
pub mod pubsub;
pub mod reqres;

use crate::dynamic::Dynamic;
use crate::static_config::{PatternConfig, StaticConfig};
use blackboard::BlackboardLayout;
use event::EventLayout;
use pubsub::PubSubLayout;
use reqres::ReqResLayout;

/// Which slots of a service a port takes: the sending side's (publishers, notifiers,
/// clients; owner bit = slot) or the receiving side's (subscribers, listeners,
/// servers; owner bit = `sending + slot`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The publisher slots.
    Sending,
    /// The subscriber slots.
    Receiving,
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
                let chunks: usize = c.layout.classes().iter().map(|class| class.count as usize).sum();
                let device = c.memory_type == iox_mempool::MemoryType::CudaDevice;
                let device_chunks = if device { chunks } else { 0 };
                let tensor_chunks = if device || p.tensors { chunks } else { 0 };
                Self::PublishSubscribe(PubSubLayout::new(p, device_chunks, tensor_chunks, place_pairs))
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
}
