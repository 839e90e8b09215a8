//! Creating a port: the one way every port kind takes its slot ([`SlotClaim`]). It
//! runs recovery of dead participants first (so a dead port's slot is free again),
//! which is why it sits above recovery, while the primitives a port uses once it has
//! its slot ([`crate::port`]) sit below it.

use std::sync::atomic::Ordering;

use iox_mempool::{Owner, PoolPin};

use crate::doorbell::{self, Doorbell};
use crate::dynamic::{self, PortHeader};
use crate::port::{
    PortCreateError, Side, announce, check_own_process, free, pin, publisher_owner, subscriber_owner,
};
use crate::shared::ServiceShared;

/// A port slot being set up: the one way every port kind is created. [`SlotClaim::new`]
/// checks the handle is this process's, recovers dead participants (best effort: an
/// unreadable file only means no slot is freed now; when another live process is
/// recovering and no slot is free, it waits for that recoverer, bounded, and looks
/// again, so a dead port's slot being freed is not reported as `TooManyPorts`), and
/// claims a free slot of the side; the steps that can fail (a writable payload, the readiness
/// socket, pinning) come through it; [`SlotClaim::activate`] makes the port visible.
/// Dropped before that (any failure, a panic), the claim frees the slot again, so a
/// failed creation leaves nothing behind. A process SIGKILLed while it holds one
/// leaves a claimed, not active slot of its node, which recovery frees like any dead
/// port's.
pub struct SlotClaim<'a> {
    service: &'a ServiceShared,
    side: Side,
    slot: usize,
    generation: u64,
    /// Activated: the slot is the port's now, not the claim's.
    done: bool,
}

impl<'a> SlotClaim<'a> {
    /// Claims a free slot of `side` for a port of `kind` ("publisher", "listener"...).
    pub fn new(service: &'a ServiceShared, side: Side, kind: &'static str) -> Result<Self, PortCreateError> {
        check_own_process(service)?;
        let recovered = crate::recovery::recover(service);
        let d = service.dynamic();
        let l = d.layout();
        let claim_one = || match side {
            Side::Sending => claim(service, (0..l.sending).map(|p| d.sender(p)), kind, l.sending),
            Side::Receiving => claim(
                service,
                (0..l.receiving).map(|s| d.receiver(s)),
                kind,
                l.receiving,
            ),
        };
        let (slot, generation) = match claim_one() {
            // Every slot taken while another process was recovering the service: some
            // may be dead ports it is freeing right now. Wait for it (bounded, as an
            // open does), then look once more.
            Err(PortCreateError::TooManyPorts { .. }) if recovered.is_err() => {
                crate::testing::stall_point(crate::testing::Stall::ClaimBehindRecoverer);
                let _ = crate::recovery::recover_waiting(service);
                claim_one()?
            }
            other => other?,
        };
        Ok(Self {
            service,
            side,
            slot,
            generation,
            done: false,
        })
    }

    /// The slot claimed.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// The owner bit of the port in this slot.
    pub fn owner(&self) -> Owner {
        match self.side {
            Side::Sending => publisher_owner(self.slot),
            Side::Receiving => subscriber_owner(self.service.dynamic().layout().sending, self.slot),
        }
    }

    fn header(&self) -> &'a PortHeader {
        let d = self.service.dynamic();
        match self.side {
            Side::Sending => d.sender(self.slot),
            Side::Receiving => d.receiver(self.slot),
        }
    }

    /// This process writes payloads: its mapping of the pool becomes writable (only
    /// once a slot is ours, so a refused port leaves a reading process read-only).
    pub fn make_writable(&self) -> Result<(), PortCreateError> {
        self.may_publish()?;
        self.service
            .pool
            .make_payload_writable()
            .map_err(|source| PortCreateError::MapWritable {
                service: self.service.name.to_string(),
                source,
            })
    }

    /// Whether this process may write the pool under the service's access policy
    /// (see `crate::access`): a reader is refused here, with its role and the policy,
    /// before the kernel would refuse the `mprotect` (its descriptor is read-only).
    fn may_publish(&self) -> Result<(), PortCreateError> {
        use crate::access::{Identity, Role};
        let s = self.service;
        let Some(policy) = &s.config.access else {
            return Ok(());
        };
        let me = Identity::of_this_process();
        let why = match policy.role(&me) {
            Some(Role::Publisher) if s.pool.payload_writable_file() => return Ok(()),
            Some(Role::Publisher) => concat!(
                "it is a publisher in the access policy, but only holders that may read were alive ",
                "when it opened the service, and they hand out read-only descriptors; open the ",
                "service again once a publisher (or its creator) holds it"
            )
            .to_string(),
            Some(Role::Reader) => format!("{me} is a reader in its access policy ({policy})"),
            None => policy.refusal(&me),
        };
        Err(PortCreateError::NotAPublisher {
            service: s.name.to_string(),
            why,
        })
    }

    /// Binds the port's readiness socket as doorbell slot `doorbell_slot` (see
    /// [`crate::doorbell`]; receivers use their slot, request-response clients theirs
    /// after the servers').
    pub fn doorbell(&self, doorbell_slot: usize) -> Result<Doorbell, PortCreateError> {
        let s = self.service;
        Doorbell::bind(
            &s.root,
            &s.stem,
            (doorbell_slot, self.generation, s.node_id()),
            &self.header().doorbell,
            s.config.permissions,
        )
        .map_err(|source| PortCreateError::Doorbell {
            service: s.name.to_string(),
            source,
        })
    }

    /// Pins the service's pool if asked to (see [`pin`]).
    pub fn pin(&self, requested: bool) -> Result<Option<PoolPin>, PortCreateError> {
        pin(self.service, requested)
    }

    /// Marks the slot active (recording whether the port pinned) and tells waiters;
    /// from here on the port owns the slot and frees it when it goes. Returns the
    /// slot and its generation. Build the port right after: nothing between may fail.
    pub fn activate(self, pin: Option<&PoolPin>) -> (usize, u64) {
        self.activate_then(pin, || {})
    }

    /// [`SlotClaim::activate`], running `then` between the activation and the news to
    /// waiters (a subscriber joins the connected set there, so a publisher woken by
    /// the news delivers to it).
    pub fn activate_then(mut self, pin: Option<&PoolPin>, then: impl FnOnce()) -> (usize, u64) {
        activate(self.header(), self.generation, pin);
        then();
        announce(self.service.dynamic());
        self.done = true;
        (self.slot, self.generation)
    }
}

impl Drop for SlotClaim<'_> {
    fn drop(&mut self) {
        if !self.done {
            free(self.header(), self.generation);
        }
    }
}

/// Claims a free slot among `slots`, returning its index and generation.
fn claim<'a>(
    service: &ServiceShared,
    slots: impl Iterator<Item = &'a PortHeader>,
    kind: &'static str,
    max: usize,
) -> Result<(usize, u64), PortCreateError> {
    if service.is_removed() {
        return Err(PortCreateError::ServiceRemoved {
            service: service.name.to_string(),
        });
    }
    let me = service.node_id();
    for (i, header) in slots.enumerate() {
        if header.node.load(Ordering::Relaxed) != 0
            || header
                .node
                .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            continue;
        }
        let (generation, _) = dynamic::split_state(header.state.load(Ordering::Relaxed));
        let generation = (generation + 1) & (u64::MAX >> 8);
        header.state.store(
            dynamic::state_word(generation, dynamic::CLAIMING),
            Ordering::Relaxed,
        );
        header.pid.store(std::process::id(), Ordering::Relaxed);
        doorbell::reset_arming(&header.waiting);
        header.journal.store(0, Ordering::Relaxed);
        header.sent.store(0, Ordering::Relaxed);
        header.missed.store(0, Ordering::Relaxed);
        header.flags.store(0, Ordering::Relaxed);
        header.doorbell.store(0, Ordering::Relaxed);
        return Ok((i, generation));
    }
    Err(PortCreateError::TooManyPorts {
        service: service.name.to_string(),
        kind,
        max,
    })
}

/// Marks a claimed slot active; publishers see it from now on. Records whether the
/// port pinned the pool, for tools.
fn activate(header: &PortHeader, generation: u64, pin: Option<&PoolPin>) {
    if pin.is_some_and(PoolPin::is_pinned) {
        header.flags.store(dynamic::PINNED, Ordering::Relaxed);
    }
    header
        .state
        .store(dynamic::state_word(generation, dynamic::ACTIVE), Ordering::SeqCst);
}
