//! The dynamic segment `iox_<H>.dynamic`: everything participants write at run time.
//!
//! Layout (all offsets computed from the static config by [`DynamicLayout`], every
//! structure `repr(C)`, atomics only, no pointers):
//! - header (128 bytes): magic, the hash of the static config text this segment
//!   belongs to, the lifecycle word, the recovery lock (a 16-byte robust mutex, see
//!   [`crate::robust_mutex`]), the format version (always at offset 40), the
//!   limits it was sized for, the creator's node id, the ports-changed counter
//!   that waits for ports sleep on, and the connected-subscriber set (one bit per
//!   subscriber slot publishers deliver to, see [`crate::shm::connected`]), the
//!   may-wait set (one bit per subscriber slot whose
//!   `waiting` word a publisher must read, see [`crate::shm::may_wait`]) and the
//!   publishers-seen set (one bit per publisher slot ever taken, see
//!   [`crate::shm::publishers_seen`]);
//! - the users table: [`USER_SLOTS`] words, each the node id of one open service
//!   handle (0 = empty), then as many 32-bit holder words: non-zero if that handle's
//!   process offers the service's descriptors (a memfd payload, a device export), the
//!   random part of its hand-over socket's name (see `crate::handover`; written by the
//!   registrant after it claims the entry, cleared before an entry is released;
//!   readers only ask entries of live nodes, and verify what they get);
//! - one 64-byte port header per publisher slot, then one per subscriber slot (a
//!   subscriber's header counts the samples its publishers could not deliver to it
//!   because its queue was full, `missed`);
//! - for patterns with pair queues (pub-sub, request-response), one [`crate::queue`]
//!   per (sending slot, receiving slot) pair, row-major by sending slot: the read word
//!   on its own line, then the write index followed by the slots;
//! - then the pattern's own regions, laid out by the pattern
//!   ([`crate::shm::regions`]: `pubsub.rs` history queues, `event.rs`
//!   pending sets, `reqres.rs` request-slot words and response queues), which
//!   reaches them through its own accessors on [`Dynamic`].
//!
//! Lifecycle word: `node << 2 | phase`, phase one of [`CREATING`] (by `node`),
//! [`ALIVE`] (node 0) or [`DESTROYING`] (by `node`). The dynamic segment is the
//! anchor of a service incarnation: it appears (renamed into place, header complete)
//! before anything else of the incarnation and is unlinked after everything else, so a
//! process that holds its lifecycle word in `CREATING`/`DESTROYING` may act on the
//! other files by path. Node ids fit in 62 bits (pid < 2^22 in the high half).
//!
//! Port slots: a slot is claimed by a CAS of its `node` word from 0 to the claimer's
//! node id, and freed by storing 0 there last. Its `state` word is
//! `generation << 8 | phase` (phase [`CLAIMING`], [`ACTIVE`], [`CLOSING`], [`FREE`]);
//! publishers deliver only to `ACTIVE` subscribers, which they find in the
//! connected-subscriber set of the header rather than by reading every state word. A publisher's `journal` names the
//! queue entry it is sending (0 = none), so recovery can finish a send its process
//! died in (see [`crate::recovery`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use iox_mempool::segment::{Access, CreateSegmentError, OpenSegmentError, Segment};
use thiserror::Error;

use crate::queue::{PaddedIndex, Queue};
use crate::robust_mutex::RawRobustMutex;
use crate::shm::connected::Connected;
use crate::shm::files;
pub use crate::shm::layout::DynamicLayout;
use crate::shm::may_wait::MayWait;
use crate::shm::publishers_seen::PublishersSeen;
use crate::static_config::StaticConfig;

/// Magic of a dynamic segment.
pub const DYNAMIC_MAGIC: u64 = u64::from_le_bytes(*b"IOXDYN\x00\x04");
/// Version of the dynamic segment format.
pub const DYNAMIC_VERSION: u32 = 14;
pub const HEADER_LEN: usize = 128;
/// Open service handles (one per process and `open`) a service can have at once.
pub const USER_SLOTS: usize = 128;

/// Lifecycle phase: the service is being created by the node in the word.
pub const CREATING: u64 = 1;
/// Lifecycle phase: the service is usable.
pub const ALIVE: u64 = 2;
/// Lifecycle phase: the service is being removed by the node in the word.
pub const DESTROYING: u64 = 3;

/// Port slot is free.
pub const FREE: u64 = 0;
/// Port slot is being set up.
pub const CLAIMING: u64 = 1;
/// Port slot is in use.
pub const ACTIVE: u64 = 2;
/// Port slot is being torn down.
pub const CLOSING: u64 = 3;

#[repr(C)]
pub struct Header {
    pub magic: AtomicU64,
    pub config_hash: AtomicU64,
    pub lifecycle: AtomicU64,
    /// The recovery lock: held by the process recovering dead participants right now
    /// (16 bytes, all zero = free; see [`crate::recovery`]).
    pub recovery: RawRobustMutex,
    /// At offset 40 in every format version, so any iox can tell which one it is.
    pub version: AtomicU32,
    /// The [`crate::static_config::PortLimits`] the segment was sized for.
    pub sending: AtomicU32,
    pub receiving: AtomicU32,
    pub queue_depth: AtomicU32,
    pub max_loans: AtomicU32,
    pub max_held: AtomicU32,
    pub user_slots: AtomicU32,
    pub creator_node: AtomicU64,
    /// Bumped (and futex-woken) whenever a port becomes active, closes or is freed:
    /// what `wait_for_subscribers` and `wait_for_publishers` sleep on.
    pub ports_changed: AtomicU32,
    /// The limit of the pattern's own that its regions were sized for
    /// (`PatternParts::header_limit`: pub-sub's history, an event service's ids, a
    /// request-response service's response depth).
    pub pattern_limit: AtomicU32,
    /// Publish-subscribe: one bit per subscriber slot that publishers deliver to (see
    /// [`crate::shm::connected`]). On the header's second line, which is written only
    /// when ports come and go.
    pub subscribers_connected: AtomicU64,
    /// Publish-subscribe: one bit per subscriber slot whose subscriber may sleep or
    /// arm its descriptor (see [`crate::shm::may_wait`]). Same line: written once per
    /// subscriber that ever waits.
    pub subscribers_may_wait: AtomicU64,
    /// Publish-subscribe: one bit per publisher slot some publisher ever had (see
    /// [`crate::shm::publishers_seen`]). Same line: written once per slot.
    pub publishers_seen: AtomicU64,
}
const _: () = assert!(size_of::<Header>() <= HEADER_LEN);
// The header's slot sets hold one bit per slot in one word (connected, may-wait,
// publishers-seen; and readers index `s % 64`): the slot limits must fit, or two slots
// would share a bit (a `reset` could then clear a live waiter's).
const _: () =
    assert!(crate::static_config::MAX_RECEIVING_PORTS <= 64 && crate::static_config::MAX_SENDING_PORTS <= 64);
const _: () = assert!(std::mem::offset_of!(Header, version) == 40);
const _: () = assert!(std::mem::offset_of!(Header, sending) == 44);
// Where tests/bad_files.rs corrupts it.
const _: () = assert!(std::mem::offset_of!(Header, pattern_limit) == 84);
const _: () = assert!(std::mem::offset_of!(Header, subscribers_connected) >= 64);

/// The fixed part of a port slot, on its own cache line.
#[repr(C, align(64))]
pub struct PortHeader {
    /// Node id of the owner (0 = free); the claim word.
    pub node: AtomicU64,
    pub state: AtomicU64,
    /// Publishers: the queue entry being sent (0 = none).
    pub journal: AtomicU64,
    /// Publishers: samples sent since the port was created (for tools).
    pub sent: AtomicU64,
    pub pid: AtomicU32,
    /// Subscribers: how many threads are blocked in `receive_timeout`, plus
    /// [`crate::shm::arming::ARMED`] while the port waits on its readiness descriptor.
    pub waiting: AtomicU32,
    /// Subscribers: the futex word publishers bump to wake them.
    pub wake: AtomicU32,
    /// [`PINNED`] if the port pinned the pool (for tools).
    pub flags: AtomicU32,
    /// Subscribers: samples publishers could not deliver to this port because its
    /// queue from them was full (the oldest dropped, the new one rejected, or the
    /// port caught mid-take), since the port was created. Publishers add to it only
    /// on that path, so a send that fits never touches it.
    pub missed: AtomicU64,
    /// Receiving ports: the random part of the name of the port's readiness socket
    /// (see [`crate::doorbell`]), written while the slot is claimed, before it is
    /// active (0 = none).
    pub doorbell: AtomicU64,
}

/// Port flag: the port pinned the service's pool in its process.
pub const PINNED: u32 = 1;
const _: () = assert!(size_of::<PortHeader>() == 64);

/// What is wrong with the files of a service (carried by the `Corrupt` variants of
/// the open, create and cleanup errors, with the file's path).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Corruption {
    /// The dynamic segment does not start with iox's magic.
    #[error("wrong magic {0:#018x}")]
    Magic(u64),
    /// The dynamic segment has another format version.
    #[error("format version {0}, this iox reads {DYNAMIC_VERSION}")]
    Version(u32),
    /// The dynamic segment's length is not the one its static config implies.
    #[error("{found} bytes long, the static config says exactly {expected}")]
    Length {
        /// Its length.
        found: usize,
        /// The length the static config implies.
        expected: usize,
    },
    /// The dynamic segment was sized for other limits than its static config's.
    #[error("its header says {what} {found}, the static config gives {expected}")]
    Limit {
        /// Which limit.
        what: &'static str,
        /// The header's value.
        found: u32,
        /// The static config's value.
        expected: u32,
    },
    /// The lifecycle word is no state iox writes.
    #[error("invalid lifecycle word {0:#x}")]
    Lifecycle(u64),
    /// A static config without its dynamic segment (debris of a crash of an older
    /// iox, or deleted by hand).
    #[error(
        "has no dynamic segment beside it (left by a crash of an older iox, or deleted by hand); remove the service"
    )]
    NoDynamicSegment,
    /// A dynamic segment in use whose static config is missing.
    #[error("in use, but its static config is missing")]
    NoStaticConfig,
    /// The dynamic segment belongs to another static config than the one beside it.
    #[error(
        "belongs to another static config than the one beside it (one of the two was replaced, by hand or by another user); remove the service and create it again"
    )]
    OtherIncarnation,
    /// The file could not be read as a dynamic segment.
    #[error("unreadable: {0}")]
    Unreadable(String),
}

/// Checks a header's magic and format version (what any reader checks first).
fn check_header(h: &Header) -> Result<(), Corruption> {
    let magic = h.magic.load(Ordering::Acquire);
    if magic != DYNAMIC_MAGIC {
        return Err(Corruption::Magic(magic));
    }
    let version = h.version.load(Ordering::Relaxed);
    if version != DYNAMIC_VERSION {
        return Err(Corruption::Version(version));
    }
    Ok(())
}

/// Checks that the limits a header says it was sized for are those of `layout` (the
/// static config's).
fn check_limits(h: &Header, layout: &DynamicLayout) -> Result<(), Corruption> {
    for (what, field, expected) in limits(h, layout) {
        let found = field.load(Ordering::Relaxed);
        if found != expected {
            return Err(Corruption::Limit {
                what,
                found,
                expected,
            });
        }
    }
    Ok(())
}

/// The header's limit fields, each with its name and the value `layout` gives it.
fn limits<'h>(h: &'h Header, layout: &DynamicLayout) -> [(&'static str, &'h AtomicU32, u32); 7] {
    let (pattern_limit, value) = layout.pattern.parts().header_limit();
    [
        ("sending port slots", &h.sending, layout.sending as u32),
        ("receiving port slots", &h.receiving, layout.receiving as u32),
        ("pair queue depth", &h.queue_depth, layout.buffer as u32),
        ("max_loans", &h.max_loans, layout.max_loans),
        ("max_held", &h.max_held, layout.max_held),
        ("user_slots", &h.user_slots, USER_SLOTS as u32),
        (pattern_limit, &h.pattern_limit, value),
    ]
}

/// Builds a lifecycle word.
pub fn lifecycle_word(node: u64, phase: u64) -> u64 {
    (node << 2) | phase
}

/// Splits a lifecycle word into (node, phase).
pub fn split_lifecycle(word: u64) -> (u64, u64) {
    (word >> 2, word & 3)
}

/// Why a dynamic segment could not be used.
#[derive(Debug)]
pub enum DynamicError {
    /// There is no such file.
    NotFound,
    /// It could not be opened or mapped.
    Segment(OpenSegmentError),
    /// It belongs to another static config (another incarnation of the service, being
    /// removed or re-created right now, or tampering).
    OtherIncarnation,
    /// Its contents are invalid.
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: Corruption,
    },
}

/// An open dynamic segment, checked once, that views borrow from. Opened with
/// [`DynamicSegment::open`] it covers the header and users table (checked: magic and
/// version); [`DynamicSegment::attach`] then checks it against its static config and
/// extends the views to the ports and queues.
#[derive(Debug)]
pub struct DynamicSegment {
    segment: Segment,
    layout: DynamicLayout,
}

impl DynamicSegment {
    /// The segment's file (its owner, group and mode are the service's).
    pub fn file(&self) -> &std::fs::File {
        self.segment.file()
    }

    /// Opens `root/iox_<H>.dynamic` and checks its header.
    pub fn open(root: &Path, stem: &str, access: Access) -> Result<Self, DynamicError> {
        let this = Self::open_unverified(root, stem, access)?;
        this.verify()?;
        Ok(this)
    }

    /// Opens `root/iox_<H>.dynamic`, at least a header and users table long, without
    /// looking at it (for removal, which deletes files that are no segment of ours too).
    pub fn open_unverified(root: &Path, stem: &str, access: Access) -> Result<Self, DynamicError> {
        let layout = DynamicLayout::header_only();
        match Segment::open(root, &files::dynamic_name(stem), access, layout.len as u64) {
            Ok(segment) => Ok(Self { segment, layout }),
            Err(OpenSegmentError::NotFound { .. }) => Err(DynamicError::NotFound),
            Err(e) => Err(DynamicError::Segment(e)),
        }
    }

    /// Checks the header's magic and format version.
    pub fn verify(&self) -> Result<(), DynamicError> {
        check_header(self.view().header()).map_err(|c| self.corrupt(c))
    }

    /// Checks that the segment belongs to `config` (whose text hashes to `hash`) and
    /// has its exact length and limits; from then on views cover ports and queues.
    pub fn attach(&mut self, config: &StaticConfig, hash: u64) -> Result<(), DynamicError> {
        let header = self.view().header();
        if header.config_hash.load(Ordering::Relaxed) != hash {
            return Err(DynamicError::OtherIncarnation);
        }
        let layout = DynamicLayout::new(config);
        if self.segment.len() != layout.len {
            return Err(self.corrupt(Corruption::Length {
                found: self.segment.len(),
                expected: layout.len,
            }));
        }
        check_limits(header, &layout).map_err(|c| self.corrupt(c))?;
        self.layout = layout;
        Ok(())
    }

    /// Creates `root/name` (a temporary name: the caller renames it into place) sized
    /// for `layout`, zero-filled, with its header filled in for the incarnation whose
    /// static config hashes to `hash`, lifecycle `phase` by `me`, magic last.
    pub fn create(
        root: &Path,
        name: &str,
        layout: DynamicLayout,
        mode: u32,
        hash: u64,
        me: u64,
        phase: u64,
    ) -> Result<Self, CreateSegmentError> {
        let segment = Segment::create(root, name, layout.len, mode)?;
        let this = Self { segment, layout };
        let h = this.view().header();
        h.config_hash.store(hash, Ordering::Relaxed);
        h.lifecycle.store(lifecycle_word(me, phase), Ordering::Relaxed);
        h.creator_node.store(me, Ordering::Relaxed);
        h.version.store(DYNAMIC_VERSION, Ordering::Relaxed);
        for (_, field, value) in limits(h, &layout) {
            field.store(value, Ordering::Relaxed);
        }
        Ok(this)
    }

    /// Publishes the header: stores the magic last, so a reader that sees it sees the
    /// rest of what `create` and the caller wrote before.
    pub fn seal_header(&self) {
        self.view().header().magic.store(DYNAMIC_MAGIC, Ordering::Release);
    }

    /// A view of the mapping, as far as it was checked.
    pub fn view(&self) -> Dynamic<'_> {
        Dynamic {
            base: self.segment.as_ptr(),
            layout: &self.layout,
        }
    }

    /// The mapped file.
    pub fn segment(&self) -> &Segment {
        &self.segment
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.segment.path()
    }

    /// A corruption error naming this file.
    pub fn corrupt(&self, problem: Corruption) -> DynamicError {
        DynamicError::Corrupt {
            path: self.path().to_owned(),
            problem,
        }
    }
}

/// A view of a mapped dynamic segment, borrowed from the [`DynamicSegment`] that
/// checked the mapping is at least `layout.len` bytes long (page-aligned).
#[derive(Clone, Copy)]
pub struct Dynamic<'a> {
    base: *mut u8,
    layout: &'a DynamicLayout,
}

impl<'a> Dynamic<'a> {
    /// The `T` at byte `offset`, computed by the layout for an index the caller
    /// bounds-checked (the core's accessors here; patterns use the checked
    /// [`words`](Self::words) and [`queue_region`](Self::queue_region)).
    fn at<T>(&self, offset: usize) -> &'a T {
        debug_assert!(offset + size_of::<T>() <= self.layout.len);
        // SAFETY: every caller passes an offset computed by DynamicLayout (or the
        // pattern's part of it) for an index it bounds-checked, or kept from such a
        // computation for this same service (`PortHeaderOffset`, `QueueRowOffset`,
        // `QueueColumnOffset`, made only by their checked constructors here, and kept
        // by a port beside its service), so the T lies inside the mapping, which the DynamicSegment
        // this view borrows from checked is at least layout.len long and keeps mapped; offsets
        // are multiples of T's alignment on a page-aligned mapping; T is made of
        // atomics only, valid for any bytes and shareable between processes.
        unsafe { &*self.base.add(offset).cast::<T>() }
    }

    /// The `len` words at byte `offset` (as [`at`](Self::at)).
    fn table(&self, offset: usize, len: usize) -> &'a [AtomicU64] {
        debug_assert!(offset + len * 8 <= self.layout.len);
        // SAFETY: as in `at`; the table lies inside the layout.
        unsafe { std::slice::from_raw_parts(self.base.add(offset).cast::<AtomicU64>(), len) }
    }

    pub fn header(&self) -> &'a Header {
        self.at(0)
    }

    /// The connected-subscriber set (see [`crate::shm::connected`]).
    #[inline]
    pub fn connected(&self) -> Connected<'a> {
        Connected::with_mask(&self.header().subscribers_connected, self.layout.subscriber_mask)
    }

    /// The may-wait set (see [`crate::shm::may_wait`]).
    #[inline]
    pub fn may_wait(&self) -> MayWait<'a> {
        MayWait::new(&self.header().subscribers_may_wait)
    }

    /// The publishers-seen set (see [`crate::shm::publishers_seen`]).
    #[inline]
    pub fn publishers_seen(&self) -> PublishersSeen<'a> {
        PublishersSeen::new(&self.header().publishers_seen)
    }

    /// The users table: one node id per open service handle.
    pub fn users(&self) -> &'a [AtomicU64] {
        self.table(self.layout.users, USER_SLOTS)
    }

    /// Per users-table entry: 1 if that user holds the service's descriptors and
    /// offers them (`crate::handover`), 0 if not.
    pub fn user_holders(&self) -> &'a [AtomicU32] {
        debug_assert!(self.layout.user_holders + USER_SLOTS * 4 <= self.layout.len);
        // SAFETY: as in `at`: the table lies inside the layout (header_only and new
        // both place it before the port slots), 4-aligned, atomics only.
        unsafe {
            std::slice::from_raw_parts(
                self.base.add(self.layout.user_holders).cast::<AtomicU32>(),
                USER_SLOTS,
            )
        }
    }

    /// The header of sending port slot `p` (a publisher, notifier, client or writer).
    #[inline]
    pub fn sender(&self, p: usize) -> &'a PortHeader {
        self.header_at(self.sender_offset(p))
    }

    /// Where sending slot `p`'s header is, checked: what a publisher works out
    /// once, at creation, and hands to [`Dynamic::header_at`] on every send.
    #[inline]
    pub fn sender_offset(&self, p: usize) -> PortHeaderOffset {
        assert!(p < self.layout.sending);
        PortHeaderOffset(self.layout.publishers + p * 64)
    }

    /// The port header at `at`, which [`Dynamic::sender_offset`] gave for a view
    /// of this service (the same layout: a port keeps the offset beside its service).
    #[inline]
    pub fn header_at(&self, at: PortHeaderOffset) -> &'a PortHeader {
        self.at(at.0)
    }

    /// The header of receiving port slot `s` (a subscriber, listener, server or reader).
    #[inline]
    pub fn receiver(&self, s: usize) -> &'a PortHeader {
        assert!(s < self.layout.receiving);
        self.at(self.layout.subscribers + s * 64)
    }

    /// The queue from publisher slot `p` to subscriber slot `s`.
    #[inline]
    pub fn queue(&self, p: usize, s: usize) -> Queue<'a> {
        let l = self.layout;
        debug_assert!(p < l.sending && s < l.receiving);
        // One check keeps the queue inside the mapping (an event service has no
        // queues: its `pairs` is 0); callers pass slot indices in range.
        let pair = p.wrapping_mul(l.receiving).wrapping_add(s);
        assert!(pair < l.pairs, "queue ({p}, {s}) out of range");
        self.queue_at(l.queues + pair * l.queue_stride)
    }

    /// Where the queues from every publisher slot to subscriber slot `s` (what a
    /// receive looks at) start, checked: what a subscriber works out once, at
    /// creation, and hands to [`Dynamic::queue_to`] on every receive.
    pub fn queue_column_offset(&self, s: usize) -> QueueColumnOffset {
        let l = self.layout;
        assert!(
            s < l.receiving && l.pairs != 0,
            "subscriber slot {s} has no queues"
        );
        QueueColumnOffset(l.queues + s * l.queue_stride)
    }

    /// The queue from publisher slot `p` in the column at `column`, which
    /// [`Dynamic::queue_column_offset`] gave for a view of this service (the same
    /// layout: a port keeps the offset beside its service).
    #[inline]
    pub fn queue_to(&self, column: QueueColumnOffset, p: usize) -> Queue<'a> {
        let l = self.layout;
        assert!(p < l.sending, "publisher slot {p} out of range");
        self.queue_at(column.0 + p * l.queue_row_stride)
    }

    /// Where the queues from publisher slot `p` to every subscriber slot (what a send
    /// walks) start, checked: what a publisher works out once, at creation, and hands
    /// to [`Dynamic::queue_row_at`] on every send.
    pub fn queue_row_offset(&self, p: usize) -> QueueRowOffset {
        let l = self.layout;
        assert!(p < l.sending && l.pairs != 0, "publisher slot {p} has no queues");
        QueueRowOffset(l.queues + p * l.queue_row_stride)
    }

    /// The queues at `row`, which [`Dynamic::queue_row_offset`] gave for a view of
    /// this service (the same layout: a port keeps the offset beside its service).
    #[inline]
    pub fn queue_row_at(&self, row: QueueRowOffset) -> QueueRow<'a> {
        debug_assert!(row.0 + self.layout.queue_row_stride <= self.layout.len);
        QueueRow {
            d: *self,
            offset: row.0,
        }
    }

    /// The pair queue at byte offset `off` (computed from the layout for a pair in
    /// range).
    #[inline]
    fn queue_at(&self, off: usize) -> Queue<'a> {
        let l = self.layout;
        let read: &PaddedIndex = self.at(off);
        Queue::with_mask(
            self.at(off + QUEUE_WRITE),
            &read.value,
            self.table(off + QUEUE_WRITE + 8, l.buffer),
            l.buffer_mask,
        )
    }

    /// The `len` words at byte `offset`, for a pattern's own regions.
    ///
    /// # Safety
    /// `offset` and `len` come from the pattern's part of this view's layout, for
    /// slot indices the caller checked against its limits, so the words lie inside
    /// the layout (checked in debug builds).
    #[inline]
    pub unsafe fn words(&self, offset: usize, len: usize) -> &'a [AtomicU64] {
        self.table(offset, len)
    }

    /// The address of byte `offset`, for a pattern's own regions of plain bytes (a
    /// blackboard's values), which the pattern's protocol gives one writer at a time.
    ///
    /// # Safety
    /// As for [`words`](Self::words): `offset` comes from the pattern's part of this
    /// view's layout and lies inside it.
    #[inline]
    pub unsafe fn bytes_at(&self, offset: usize) -> *mut u8 {
        debug_assert!(offset <= self.layout.len);
        // SAFETY: the caller's contract: inside the mapping, which this view keeps.
        unsafe { self.base.add(offset) }
    }

    /// A queue region of `depth` slots at byte `off` (read index alone on its line,
    /// then the write index and the slots; `shm::layout::queue_bytes`): what the
    /// patterns' own queues are made of.
    ///
    /// # Safety
    /// As for [`words`](Self::words): `off` and `depth` come from the layout, for
    /// indices the caller checked, so the region lies inside it.
    #[inline]
    pub unsafe fn queue_region(&self, off: usize, depth: usize) -> Queue<'a> {
        debug_assert!(off + QUEUE_WRITE + 8 + depth * 8 <= self.layout.len);
        let read: &PaddedIndex = self.at(off);
        Queue::new(
            self.at(off + QUEUE_WRITE),
            &read.value,
            self.table(off + QUEUE_WRITE + 8, depth),
        )
    }

    pub fn layout(&self) -> &'a DynamicLayout {
        self.layout
    }
}

/// Where one port slot's header is in the dynamic segment, checked against the
/// layout when it was made ([`Dynamic::sender_offset`]).
#[derive(Debug, Clone, Copy)]
pub struct PortHeaderOffset(usize);

/// Where the pair queues to one subscriber slot start in the dynamic segment, checked
/// against the layout when it was made ([`Dynamic::queue_column_offset`]).
#[derive(Debug, Clone, Copy)]
pub struct QueueColumnOffset(usize);

/// Where the pair queues of one publisher slot start in the dynamic segment, checked
/// against the layout when it was made ([`Dynamic::queue_row_offset`]).
#[derive(Debug, Clone, Copy)]
pub struct QueueRowOffset(usize);

/// The pair queues of one publisher slot, from [`Dynamic::queue_row_at`].
#[derive(Clone, Copy)]
pub struct QueueRow<'a> {
    d: Dynamic<'a>,
    offset: usize,
}

/// Where a queue's write index lies from the queue's start: behind the read index's
/// line, the slots right after it (see [`crate::shm::queue`]).
const QUEUE_WRITE: usize = 64;

impl<'a> QueueRow<'a> {
    /// Asks for the line the next push to subscriber slot `s` stores to (the write
    /// index and the first slots, see [`crate::shm::queue`]) for writing, without
    /// waiting ([`iox_mempool::hint`]): a send asks for its queues' lines before its
    /// first atomic step, so they travel while that step waits. Any `s` is harmless
    /// (the address is only a hint); callers pass slots of the connected set.
    #[inline(always)]
    pub fn prefetch_push(&self, s: usize) {
        let off = self
            .offset
            .wrapping_add(s.wrapping_mul(self.d.layout.queue_stride))
            .wrapping_add(QUEUE_WRITE);
        iox_mempool::hint::prefetch_write(self.d.base.wrapping_add(off));
    }

    /// The queue to subscriber slot `s`.
    #[inline]
    pub fn to(&self, s: usize) -> Queue<'a> {
        let l = self.d.layout;
        assert!(s < l.receiving, "subscriber slot {s} out of range");
        self.d.queue_at(self.offset + s * l.queue_stride)
    }
}

/// Splits a state word into (generation, phase).
pub fn split_state(word: u64) -> (u64, u64) {
    (word >> 8, word & 0xff)
}

/// Builds a state word.
pub fn state_word(generation: u64, phase: u64) -> u64 {
    (generation << 8) | phase
}

/// How many of `slots` are active.
pub fn active_count<'a>(slots: impl Iterator<Item = &'a PortHeader>) -> usize {
    slots
        .filter(|h| split_state(h.state.load(Ordering::Acquire)).1 == ACTIVE)
        .count()
}

const _: () = assert!(crate::static_config::MAX_OPEN_HANDLES == USER_SLOTS);
