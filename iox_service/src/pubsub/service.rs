//! A publish-subscribe service: its builder (settings, pool sizing, compatibility with
//! an existing service) and the open service that ports are built from.
//!
//! Decisions (what an iceoryx2 or Zenoh user would expect): by default subscribers see samples sent after
//! they connect; with [`PubSubBuilder::history`]`(n)` each publisher keeps its last `n`
//! samples and gives them to a subscriber that connects later, before live ones (at
//! the publisher's next send or `update_connections`; see
//! `pubsub::publisher::history`). History is behaviour, not capacity, so on open it
//! must match exactly (as the overflow policy), and it is at most the subscriber buffer
//! (a subscriber's fresh queue takes the whole history).
//!
//! Pool sizing. With default settings a publisher never sees `PoolExhausted` because a
//! subscriber is slow or stopped reading. The most chunks that can be out of the pool
//! at once, with every port at its limits, is
//! `W = publishers x (loans + 1 spare + subscribers x buffer + history) + subscribers x held`:
//! each publisher's loans and the spare it loans ahead after a send, each
//! publisher-subscriber queue full (a subscriber that stops reading keeps `buffer`
//! entries from each publisher; `DropOldest` replaces them, `Reject` refuses more),
//! each publisher's history full (its last `history` samples, which may all have left
//! every subscriber's queue), each subscriber holding its maximum. So:
//! - a typed service has one class holding `T` with `W` chunks;
//! - a slice service with `max_slice_len(len)` has one class of `len` elements with `W`
//!   chunks; with `chunk_sizes(&[bytes, ..])`, `W` chunks per class: the worst case for
//!   a class is when every sample is of that class;
//! - with `size_classes(&[(bytes, count), ..])` the user gives the counts, and each
//!   must be at least `W`: a smaller one makes `create` fail with
//!   [`InvalidConfig::PoolTooSmall`], which names `W`. `allow_pool_exhaustion(true)`
//!   takes the counts as given (a fixed memory budget, as a Zenoh shared-memory pool
//!   has): then a loan can fail with `PoolExhausted` while subscribers occupy the class,
//!   and the publisher decides what to do (retry, skip, send smaller).
//!
//! Why refuse rather than raise a count silently: `W` can be large (86 with the default
//! limits), and `(16 MiB, 4)` raised to `(16 MiB, 86)` is 1.4 GiB the user never asked
//! for (the pool's pages are committed as chunks are used, and pinned memory is
//! committed at once). The error says the number, so the user chooses: the memory, lower
//! limits (a smaller `W`), or exhaustion. Counts are checked only when creating; a
//! service's static config does not record the choice.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use iox_mempool::{Backing, MemoryType, PageSize, PoolInfo};

use crate::static_config::{InvalidConfig, Overflow, PubSubConfig};
use crate::user_header::{self, HeaderType, UserHeader};
use crate::{Payload, PayloadType, Schema, ZeroCopySafe};
use iox_core::service::{self, CreateError, OpenError, OpenOrCreateError, ServiceShared, Target};

/// Builds, opens or creates a publish-subscribe service. Settings other than the
/// payload type are applied when creating; when opening, those the caller set are
/// checked against the existing service.
///
/// `H` is the user header every sample carries beside the payload (see
/// [`user_header`](Self::user_header)); `()`, the default, is none.
#[derive(Debug)]
pub struct PubSubBuilder<P: ?Sized, H = ()> {
    pub(super) target: Target,
    pub(super) memory_type: Option<MemoryType>,
    pub(super) max_publishers: Option<u32>,
    pub(super) max_subscribers: Option<u32>,
    pub(super) subscriber_buffer: Option<u32>,
    pub(super) max_loans: Option<u32>,
    pub(super) max_held: Option<u32>,
    pub(super) overflow: Option<Overflow>,
    pub(super) history: Option<u32>,
    /// Whether samples carry tensor records (`tensors`).
    pub(super) tensors: Option<bool>,
    pub(super) permissions: Option<u32>,
    /// Slice services: `(bytes per chunk, count)`, `None` = derived from the limits.
    pub(super) size_classes: Option<Vec<(usize, Option<usize>)>>,
    pub(super) max_slice_len: Option<usize>,
    pub(super) allow_pool_exhaustion: bool,
    pub(super) backing: Option<Backing>,
    /// The pages of the pool's payload (`None`: base pages when creating, any when
    /// opening).
    pub(super) page_size: Option<PageSize>,
    /// The CUDA device ordinal whose memory a `CudaDevice` service's pool is made in.
    pub(super) cuda_device: i32,
    /// Recorded (when creating) and required (when opening) instead of
    /// `P::payload_type()`: set by `raw_payload_type` (language bindings) or
    /// `carry_payload_type` (bridges).
    pub(super) payload_override: Option<PayloadType>,
    /// `payload_override` came from `carry_payload_type`: its ports move bytes, so it
    /// must be valid for every bit pattern (checked by `create` and `open`).
    pub(super) carried: bool,
    /// The schema recorded with `payload_override` (`payload_schema`); unused without it.
    pub(super) schema_override: Option<Schema>,
    /// The user header recorded (and required) instead of `H`'s: set with a raw or
    /// carried payload type (`raw_user_header`), for bindings and bridges.
    pub(super) header_override: Option<HeaderType>,
    pub(super) _payload: crate::user_header::Marker<P, H>,
}

impl<P: ?Sized + Payload> PubSubBuilder<P> {
    pub(crate) fn new(target: Target) -> Self {
        Self {
            target,
            memory_type: None,
            max_publishers: None,
            max_subscribers: None,
            subscriber_buffer: None,
            max_loans: None,
            max_held: None,
            overflow: None,
            history: None,
            tensors: None,
            permissions: None,
            size_classes: None,
            max_slice_len: None,
            allow_pool_exhaustion: false,
            backing: None,
            page_size: None,
            cuda_device: 0,
            payload_override: None,
            carried: false,
            schema_override: None,
            header_override: None,
            _payload: PhantomData,
        }
    }

    /// Every sample of the service carries a header of type `H` in front of its
    /// payload, in the same chunk: written in place in the loan
    /// ([`SampleMutUninit::write_header`](crate::SampleMutUninit::write_header)), read
    /// in place from the sample ([`Sample::user_header`](crate::Sample::user_header)).
    /// `H`'s identity and field layout are recorded in the static config beside the
    /// payload's and checked on open under the same rules (a program that opens the
    /// service with another header, or none, is refused). Not for `CudaDevice`
    /// services. See [`crate::user_header`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use iox_service::{Service, ZeroCopySafe};
    ///
    /// #[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
    /// #[repr(C)]
    /// struct Frame { stamp_ns: u64, width: u32, height: u32 }
    ///
    /// let svc = Service::named("doc/frames")?.root(dir.path())
    ///     .publish_subscribe::<[u8]>()
    ///     .user_header::<Frame>()
    ///     .max_slice_len(4 * 3)
    ///     .create()?;
    /// let publisher = svc.publisher_builder().create()?;
    /// let subscriber = svc.subscriber_builder().create()?;
    /// let header = Frame { stamp_ns: 1, width: 4, height: 3 };
    /// publisher.loan_slice_uninit(12)?.write_header(header).write_from_fn(|i| i as u8).send()?;
    /// let frame = subscriber.receive()?.unwrap();
    /// assert_eq!(*frame.user_header(), header);
    /// assert_eq!(frame[11], 11);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn user_header<H: ZeroCopySafe>(self) -> PubSubBuilder<P, H> {
        PubSubBuilder {
            target: self.target,
            memory_type: self.memory_type,
            max_publishers: self.max_publishers,
            max_subscribers: self.max_subscribers,
            subscriber_buffer: self.subscriber_buffer,
            max_loans: self.max_loans,
            max_held: self.max_held,
            overflow: self.overflow,
            history: self.history,
            tensors: self.tensors,
            permissions: self.permissions,
            size_classes: self.size_classes,
            max_slice_len: self.max_slice_len,
            allow_pool_exhaustion: self.allow_pool_exhaustion,
            backing: self.backing,
            page_size: self.page_size,
            cuda_device: self.cuda_device,
            payload_override: self.payload_override,
            carried: self.carried,
            schema_override: self.schema_override,
            header_override: None,
            _payload: PhantomData,
        }
    }
}

impl<P: ?Sized + Payload, H: UserHeader> PubSubBuilder<P, H> {
    /// The user header recorded in (or checked against) the static config: `H`'s, or
    /// the one given to `raw_user_header`.
    pub(super) fn header_type(&self) -> Option<HeaderType> {
        match &self.header_override {
            Some(h) => Some(h.clone()),
            None => H::header_type(),
        }
    }

    /// A typed header (`user_header::<H>()`) on a builder whose payload is given at run
    /// time (`raw_payload_type`, `carry_payload_type`): refused, since its `[u8]` ports
    /// would place the payload by `u8`'s alignment and the service records the payload
    /// type's (a header known at run time is `raw_user_header`'s).
    pub(super) fn typed_header_on_bytes(&self) -> Option<InvalidConfig> {
        (self.payload_override.is_some() && H::header_type().is_some()).then(|| {
            InvalidConfig::UserHeader(
                "a typed header (user_header::<H>()) on a payload given at run time (raw_payload_type or carry_payload_type): declare the header with raw_user_header, or open the service with its payload type".into(),
            )
        })
    }

    /// Where the payload starts in a chunk (0 without a header; `usize::MAX` for a
    /// header given at run time whose size would overflow it, which no chunk holds).
    pub(super) fn payload_offset(&self) -> usize {
        self.header_type().map_or(0, |h| {
            user_header::checked_payload_offset(h.size(), self.payload_type().alignment())
                .unwrap_or(usize::MAX)
        })
    }

    /// The payload recorded in (or checked against) the static config: `P`'s, or the
    /// one given to `raw_payload_type` / `carry_payload_type`.
    pub(super) fn payload_type(&self) -> PayloadType {
        self.payload_override.clone().unwrap_or_else(P::payload_type)
    }

    /// The carried payload type, if bytes ports could break it (see
    /// `PubSubBuilder::<[u8]>::carry_payload_type`).
    pub(super) fn not_carriable(&self) -> Option<PayloadType> {
        let header = self.header_override.as_ref().map(|h| &h.identity);
        self.payload_override
            .iter()
            .chain(header)
            .find(|p| self.carried && !p.any_bit_pattern())
            .cloned()
    }

    /// The schema recorded in (or checked against) the static config: the element
    /// type's, when it knows its layout and passes the config's checks, or the one
    /// given to `payload_schema` with a raw or carried payload type.
    pub(super) fn schema(&self) -> Option<Schema> {
        if self.payload_override.is_some() {
            return self.schema_override.clone();
        }
        // A schema the config check would refuse (a non-ASCII name, too deep) is not
        // recorded: the service is created without one.
        let size = size_of::<P::Element>() as u64;
        Some(<P::Element as crate::ZeroCopySafe>::schema()).filter(|s| s.is_known() && s.check(size).is_ok())
    }
}

impl<P: ?Sized + Payload, H: UserHeader> PubSubBuilder<P, H> {
    /// Memory type of the pool (default `Cpu`). On open: must match if set.
    pub fn memory_type(mut self, t: MemoryType) -> Self {
        self.memory_type = Some(t);
        self
    }
    /// Most publishers at once (default 2). On open: the service must allow this many.
    pub fn max_publishers(mut self, n: u32) -> Self {
        self.max_publishers = Some(n);
        self
    }
    /// Most subscribers at once (default 8). On open: the service must allow this many.
    pub fn max_subscribers(mut self, n: u32) -> Self {
        self.max_subscribers = Some(n);
        self
    }
    /// Samples queued per publisher for each subscriber (default 4). On open: the
    /// service's buffer must be at least this.
    pub fn subscriber_buffer(mut self, n: u32) -> Self {
        self.subscriber_buffer = Some(n);
        self
    }
    /// Samples a publisher may loan at once (default 2). On open: checked as a minimum.
    pub fn max_loans(mut self, n: u32) -> Self {
        self.max_loans = Some(n);
        self
    }
    /// Samples a subscriber may hold at once (default 2). On open: checked as a minimum.
    pub fn max_held(mut self, n: u32) -> Self {
        self.max_held = Some(n);
        self
    }
    /// Full-buffer policy (default drop the oldest). On open: must match if set.
    pub fn overflow(mut self, o: Overflow) -> Self {
        self.overflow = Some(o);
        self
    }
    /// Samples each publisher keeps for subscribers that connect later (default 0):
    /// a subscriber that connects gets the publisher's last `n` samples first, oldest
    /// first, then live ones. It gets them at that publisher's next send, or at its
    /// [`Publisher::update_connections`](crate::Publisher::update_connections) call. At
    /// most [`subscriber_buffer`](Self::subscriber_buffer), else `create` fails with
    /// [`InvalidConfig::History`]; the pool grows by `max_publishers x n` chunks. On
    /// open: must match if set.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use iox_service::Service;
    /// let svc = Service::named("doc/history")?
    ///     .root(dir.path())
    ///     .publish_subscribe::<u64>()
    ///     .history(4)
    ///     .create()?;
    /// let publisher = svc.publisher_builder().create()?;
    /// for i in 0..10 {
    ///     publisher.loan_uninit()?.write_payload(i).send()?;
    /// }
    /// let subscriber = svc.subscriber_builder().create()?; // connects late
    /// publisher.update_connections()?; // or the next send
    /// let got: Vec<u64> = std::iter::from_fn(|| subscriber.receive().unwrap())
    ///     .map(|s| *s)
    ///     .collect();
    /// assert_eq!(got, [6, 7, 8, 9]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn history(mut self, n: u32) -> Self {
        self.history = Some(n);
        self
    }
    /// Whether each sample carries its tensor layout (element type, shape, strides;
    /// see [`crate::tensor`]) beside its bytes, for a slice of numbers (default: only
    /// `CudaDevice` services, which always do). Such a service is sent to by tensor
    /// publishers only ([`PubSubService::tensor_publisher_builder`], which record the
    /// layout with every sample); plain subscribers still read its bytes. An opener that
    /// sets it requires the service to have the same.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use iox_service::Service;
    /// use iox_service::tensor::{DType, TensorLayout};
    /// let svc = Service::named("doc/tensors")?.root(dir.path())
    ///     .publish_subscribe::<[f32]>()
    ///     .max_slice_len(64)
    ///     .tensors(true)
    ///     .create()?;
    /// let subscriber = svc.tensor_subscriber_builder().create()?;
    /// let publisher = svc.tensor_publisher_builder().create()?;
    /// let layout = TensorLayout::contiguous(DType::F32, &[2, 3])?;
    /// let loan = publisher.loan_tensor(&layout)?;
    /// let values: Vec<u8> = (0..6).flat_map(|v| (v as f32).to_ne_bytes()).collect();
    /// loan.send_bytes(&values)?;
    /// let sample = subscriber.receive()?.expect("sent above");
    /// assert_eq!(sample.tensor()?.shape(), [2, 3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tensors(mut self, on: bool) -> Self {
        self.tensors = Some(on);
        self
    }
    /// Unix permissions of the files (default 0o600; e.g. 0o660 for group access).
    pub fn permissions(mut self, mode: u32) -> Self {
        self.permissions = Some(mode);
        self
    }
    /// Who may publish and who may only subscribe ([`crate::access`]): recorded in the
    /// static config when this builder creates the service (this process's uid its
    /// creator, always a publisher); required of a service that exists when it opens
    /// one (otherwise [`OpenError::IncompatibleAccess`](crate::OpenError::IncompatibleAccess)).
    /// It restricts within the files' permissions, which must still admit every uid it
    /// names (e.g. `.permissions(0o666)`, or `0o660` with a shared group). A reader
    /// gets a read-only descriptor of the pool, so the kernel refuses it every write;
    /// its publishers are refused with
    /// [`PortCreateError::NotAPublisher`](crate::PortCreateError::NotAPublisher). A
    /// process the policy does not name is refused at open with
    /// [`OpenError::NotInAccessPolicy`](crate::OpenError::NotInAccessPolicy).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use iox_service::{AccessPolicy, Service};
    /// let camera = Service::named("doc/access")?.root(dir.path())
    ///     .publish_subscribe::<u64>()
    ///     .permissions(0o666)
    ///     .access(AccessPolicy::new().publish_uid(1001).read_gid(1002))
    ///     .create()?;
    /// let policy = camera.access_policy().expect("recorded");
    /// assert_eq!(policy.creator, rustix::process::geteuid().as_raw());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn access(mut self, policy: crate::AccessPolicy) -> Self {
        self.target.access = Some(policy);
        self
    }
    /// Where the pool's payload lives (default: [`Backing::Memfd`], for every
    /// permission mode: a newcomer gets it handed over by a process that holds it,
    /// after its credentials were checked against the permissions; [`Backing::File`]
    /// names a file under the root instead). On open: must match if set.
    pub fn backing(mut self, backing: Backing) -> Self {
        self.backing = Some(backing);
        self
    }
    /// The pages the pool's payload lives on (default [`PageSize::Base`]): reserved
    /// 2 MiB or 1 GiB huge pages ([`PageSize::Huge2MiB`], [`PageSize::Huge1GiB`]), or
    /// transparent huge pages, best effort ([`PageSize::Transparent`]); see
    /// [`iox_mempool::pages`]. The pool's length is rounded up to the page size (its
    /// chunks are not). Huge pages need the default memfd backing and a host memory
    /// type (`Cpu`, `Locked`, `CudaPinned`, a user's kind): [`InvalidConfig::PageSize`]
    /// otherwise. Creating fails with [`CreateError::HugePages`], saying how many pages
    /// are needed and how to reserve them, where the machine has too few. On open:
    /// must match if set; an opener maps the pool on the recorded pages or not at all.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use iox_service::{CreateError, PageSize, Service};
    /// let frames = Service::named("doc/frames")?.root(dir.path())
    ///     .publish_subscribe::<[u8]>()
    ///     .max_slice_len(3 << 20)
    ///     .page_size(PageSize::Huge2MiB)
    ///     .create();
    /// match frames {
    ///     Ok(svc) => assert_eq!(svc.pool_info().page_size, PageSize::Huge2MiB),
    ///     // No 2 MiB pages reserved here: the error says how many and how.
    ///     Err(CreateError::HugePages { advice, .. }) => assert!(advice.contains("nr_hugepages")),
    ///     Err(e) => return Err(e.into()),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn page_size(mut self, pages: PageSize) -> Self {
        self.page_size = Some(pages);
        self
    }
    /// The GPU (a CUDA device ordinal of this process, default 0) whose memory holds
    /// the pool of a service created with `.memory_type(MemoryType::CudaDevice)`. The
    /// static config records that GPU's UUID; openers find it among their own devices
    /// by UUID, whatever its ordinal there.
    pub fn cuda_device(mut self, ordinal: i32) -> Self {
        self.cuda_device = ordinal;
        self
    }
    /// How long open and open-or-create wait for a service another process is
    /// creating or removing (default 10 s).
    pub fn timeout(mut self, d: Duration) -> Self {
        self.target.timeout = d;
        self
    }

    crate::builder_attributes::attribute_methods!("publish_subscribe::<u64>()");

    /// Creates the service; fails if it exists.
    pub fn create(self) -> Result<PubSubService<P, H>, CreateError> {
        service::create(&self.target, &self).map(PubSubService::new)
    }

    /// Opens the service; fails if it does not exist.
    pub fn open(self) -> Result<PubSubService<P, H>, OpenError> {
        service::open(&self.target, &self).map(PubSubService::new)
    }

    /// Opens the service, or creates it if it does not exist. Any number of processes
    /// may race this: exactly one creates, the others open.
    pub fn open_or_create(self) -> Result<PubSubService<P, H>, OpenOrCreateError> {
        service::open_or_create(&self.target, &self).map(PubSubService::new)
    }

    pub(super) fn fail<T>(&self, source: InvalidConfig) -> Result<T, CreateError> {
        Err(CreateError::InvalidSetting {
            name: self.target.name.to_string(),
            source,
        })
    }
}

impl<T: crate::ZeroCopySafe, H: UserHeader> PubSubBuilder<[T], H> {
    /// The pool's size classes as `(bytes per chunk, chunk count)`; a sample uses the
    /// smallest class that holds it. On open: the largest must fit in the service's.
    ///
    /// Each count must be at least the worst case the limits allow (see the module
    /// docs): `create` fails with [`InvalidConfig::PoolTooSmall`], naming the count
    /// needed, unless [`allow_pool_exhaustion`](Self::allow_pool_exhaustion) is set.
    /// To have the counts derived, use [`chunk_sizes`](Self::chunk_sizes).
    pub fn size_classes(mut self, classes: &[(usize, usize)]) -> Self {
        self.size_classes = Some(classes.iter().map(|&(b, c)| (b, Some(c))).collect());
        self
    }

    /// The pool's size classes by bytes per chunk, each with as many chunks as the
    /// limits need (the worst case, see the module docs), so no publisher ever sees
    /// `PoolExhausted` because subscribers hold or queue chunks. On open: the largest
    /// must fit in the service's.
    pub fn chunk_sizes(mut self, bytes: &[usize]) -> Self {
        self.size_classes = Some(bytes.iter().map(|&b| (b, None)).collect());
        self
    }

    /// Accepts [`size_classes`](Self::size_classes) counts below the worst case
    /// (default `false`): the pool is smaller, and a publisher's loan fails with
    /// `PoolExhausted` while subscribers that stopped reading (or hold their maximum)
    /// occupy the class. Only applied when creating.
    pub fn allow_pool_exhaustion(mut self, allow: bool) -> Self {
        self.allow_pool_exhaustion = allow;
        self
    }

    /// One size class holding `len` elements, with as many chunks as the limits need.
    /// On open: the service's largest chunk must hold this many.
    pub fn max_slice_len(mut self, len: usize) -> Self {
        self.max_slice_len = Some(len);
        self
    }
}

/// An open publish-subscribe service carrying `P`. Clone it freely; ports keep it
/// alive. When the last handle of the last process goes, the service is removed.
#[derive(Debug)]
pub struct PubSubService<P: ?Sized, H = ()> {
    pub(crate) shared: Arc<ServiceShared>,
    _payload: crate::user_header::Marker<P, H>,
}

impl<P: ?Sized, H> Clone for PubSubService<P, H> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            _payload: PhantomData,
        }
    }
}

impl<P: ?Sized + Payload, H: UserHeader> PubSubService<P, H> {
    crate::handle_methods::handle_methods!("publishers and subscribers", "publish_subscribe::<u64>()");

    pub(crate) fn new(shared: ServiceShared) -> Self {
        Self {
            shared: Arc::new(shared),
            _payload: PhantomData,
        }
    }

    /// The publish-subscribe section of the static config (limits, overflow,
    /// history).
    pub fn pubsub_config(&self) -> &PubSubConfig {
        super::config::of(&self.shared.config)
    }

    /// The pool: address in this process, length, memory type, classes.
    pub fn pool_info(&self) -> PoolInfo {
        self.shared.pool.info()
    }

    /// A builder for a publisher.
    pub fn publisher_builder(&self) -> crate::PublisherBuilder<P, H> {
        crate::PublisherBuilder::new(self.shared.clone())
    }

    /// A builder for a subscriber.
    pub fn subscriber_builder(&self) -> crate::SubscriberBuilder<P, H> {
        crate::SubscriberBuilder::new(self.shared.clone())
    }

    /// Subscribers blocked in `receive_timeout` right now (a snapshot).
    pub fn waiting_subscribers(&self) -> usize {
        let d = self.shared.dynamic();
        (0..d.layout().receiving)
            .map(|s| (d.receiver(s).waiting.load(Ordering::Relaxed) & crate::doorbell::SLEEPERS) as usize)
            .sum()
    }
}
