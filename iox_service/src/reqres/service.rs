//! A request-response service: its builder (limits, payload sizes, pool sizing,
//! compatibility with an existing service) and the open service that clients and
//! servers are built from.
//!
//! Pool sizing: the most chunks out of the pool at once with every port at its
//! limits is `W = clients x (active + loans) + servers x loans + servers x clients x
//! active x buffer + clients x active x buffer`: each client's active requests (queued
//! or held by a server) and loans, each server's response loans, every response queue
//! full, and each client holding a buffer's worth per request (taken from the queue
//! for another pending response of the same client, or held by the user). Each class
//! (one for the request size, one for the response size if it differs) gets `W`
//! chunks. A client holding more responses than that can make a server's loan fail
//! with `PoolExhausted`.

use super::Types;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use iox_mempool::segment;
use iox_mempool::{Backing, MemfdIdentity, MemoryType, PoolInfo, PoolLayout};

use super::{ClientBuilder, ServerBuilder};
use crate::static_config::{
    self, InvalidConfig, MessagingPattern, PatternConfig, PayloadBacking, RequestResponseConfig, StaticConfig,
};
use crate::{Payload, PayloadType};
use iox_core::service::{self, CreateError, OpenError, OpenOrCreateError, Pattern, ServiceShared, Target};

pub(crate) use iox_core::static_config::reqres::MAX_LOANS;

/// Builds, opens or creates a request-response service carrying requests of `Req`
/// and responses of `Resp` (each a `T: ZeroCopySafe` or a slice `[T]`). Settings are
/// applied when creating; when opening, those the caller set are checked against the
/// existing service (a mismatch is [`OpenError::IncompatibleLimit`] naming it).
///
/// ```
/// use iox_service::Service;
/// let dir = tempfile::tempdir().unwrap();
/// let svc = Service::named("planner/plan").unwrap()
///     .root(dir.path())
///     .request_response::<u64, u64>()
///     .max_clients(8)
///     .max_servers(2)
///     .max_active_requests_per_client(4)
///     .max_response_buffer(16)
///     .open_or_create()
///     .unwrap();
/// let server = svc.server_builder().create().unwrap();
/// let client = svc.client_builder().create().unwrap();
/// let pending = client.loan_uninit().unwrap().write_payload(20).send().unwrap();
/// let active = server.receive().unwrap().unwrap();
/// for i in 0..*active {
///     active.loan_uninit().unwrap().write_payload(i * 2).send().unwrap();
/// }
/// drop(active); // ends the stream
/// let mut got = Vec::new();
/// while let Some(r) = pending.receive().unwrap() {
///     got.push(*r);
/// }
/// assert!(pending.is_finished());
/// assert_eq!(got, (0..20).map(|i| i * 2).collect::<Vec<u64>>());
/// ```
#[derive(Debug)]
pub struct RequestResponseBuilder<Req: ?Sized, Resp: ?Sized> {
    target: Target,
    memory_type: Option<MemoryType>,
    max_clients: Option<u32>,
    max_servers: Option<u32>,
    max_active: Option<u32>,
    max_response_buffer: Option<u32>,
    request_slice_len: Option<usize>,
    response_slice_len: Option<usize>,
    permissions: Option<u32>,
    backing: Option<Backing>,
    /// Set by `raw_payload_types` (see `reqres::raw`): what is recorded instead of
    /// `Req`'s and `Resp`'s.
    raw_types: Option<(PayloadType, PayloadType)>,
    _payload: PhantomData<Types<Req, Resp>>,
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> RequestResponseBuilder<Req, Resp> {
    pub(crate) fn new(target: Target) -> Self {
        Self {
            target,
            memory_type: None,
            max_clients: None,
            max_servers: None,
            max_active: None,
            max_response_buffer: None,
            request_slice_len: None,
            response_slice_len: None,
            permissions: None,
            backing: None,
            raw_types: None,
            _payload: PhantomData,
        }
    }

    /// Records (and requires) `request` and `response` instead of `Req`'s and `Resp`'s
    /// (see `reqres::raw`, whose `unsafe` entry point is the only caller).
    pub(crate) fn with_raw_types(mut self, request: PayloadType, response: PayloadType) -> Self {
        self.raw_types = Some((request, response));
        self
    }

    /// The request payload recorded in (or checked against) the static config.
    fn request_type(&self) -> PayloadType {
        self.raw_types
            .as_ref()
            .map_or_else(Req::payload_type, |(r, _)| r.clone())
    }

    /// The response payload recorded in (or checked against) the static config.
    fn response_type(&self) -> PayloadType {
        self.raw_types
            .as_ref()
            .map_or_else(Resp::payload_type, |(_, r)| r.clone())
    }

    /// Memory type of the pool (default `Cpu`). On open: must match if set.
    pub fn memory_type(mut self, t: MemoryType) -> Self {
        self.memory_type = Some(t);
        self
    }
    /// Most clients at once (default 8; clients + servers <= 47). On open: the service
    /// must allow this many.
    pub fn max_clients(mut self, n: u32) -> Self {
        self.max_clients = Some(n);
        self
    }
    /// Most servers at once (default 2). On open: the service must allow this many.
    pub fn max_servers(mut self, n: u32) -> Self {
        self.max_servers = Some(n);
        self
    }
    /// Requests one client may have active at once (sent, stream not ended, pending
    /// response not dropped; default 4, at most [`super::MAX_ACTIVE_REQUESTS`]). On
    /// open: the service must allow this many.
    pub fn max_active_requests_per_client(mut self, n: u32) -> Self {
        self.max_active = Some(n);
        self
    }
    /// Responses queued per request before the server's `send` waits for the client
    /// to take one (default 16). On open: the service's must be at least this.
    pub fn max_response_buffer(mut self, n: u32) -> Self {
        self.max_response_buffer = Some(n);
        self
    }
    /// Slice requests (`[T]`): the most elements a request holds (required then).
    pub fn request_slice_len(mut self, n: usize) -> Self {
        self.request_slice_len = Some(n);
        self
    }
    /// Slice responses (`[T]`): the most elements a response holds (required then).
    pub fn response_slice_len(mut self, n: usize) -> Self {
        self.response_slice_len = Some(n);
        self
    }
    /// Unix permissions of the files and sockets (default 0o600).
    pub fn permissions(mut self, mode: u32) -> Self {
        self.permissions = Some(mode);
        self
    }
    /// Where the pool's payload lives (default as for pub-sub). On open: must match.
    pub fn backing(mut self, backing: Backing) -> Self {
        self.backing = Some(backing);
        self
    }
    /// How long open and open-or-create wait for a service another process is
    /// creating or removing (default 10 s).
    pub fn timeout(mut self, d: Duration) -> Self {
        self.target.timeout = d;
        self
    }

    crate::builder_attributes::attribute_methods!("request_response::<u64, u64>()");

    /// Creates the service; fails if it exists.
    pub fn create(self) -> Result<RequestResponseService<Req, Resp>, CreateError> {
        service::create(&self.target, &self).map(RequestResponseService::new)
    }

    /// Opens the service; fails if it does not exist.
    pub fn open(self) -> Result<RequestResponseService<Req, Resp>, OpenError> {
        service::open(&self.target, &self).map(RequestResponseService::new)
    }

    /// Opens the service, or creates it if it does not exist.
    pub fn open_or_create(self) -> Result<RequestResponseService<Req, Resp>, OpenOrCreateError> {
        service::open_or_create(&self.target, &self).map(RequestResponseService::new)
    }

    fn fail<T>(&self, source: InvalidConfig) -> Result<T, CreateError> {
        Err(CreateError::InvalidSetting {
            name: self.target.name.to_string(),
            source,
        })
    }

    /// Bytes of one `payload`: the type, or `slice_len` elements.
    fn bytes(
        &self,
        payload: &PayloadType,
        slice_len: Option<usize>,
        what: &'static str,
    ) -> Result<usize, CreateError> {
        let size = payload.element_size();
        if !matches!(payload, PayloadType::Slice { .. }) {
            return Ok(size.max(1));
        }
        let Some(len) = slice_len else {
            let setting = if what == "request" {
                ".request_slice_len(n) (its requests are slices)"
            } else {
                ".response_slice_len(n) (its responses are slices)"
            };
            return Err(CreateError::MissingSliceSize(
                self.target.name.to_string(),
                setting,
            ));
        };
        match len.checked_mul(size) {
            Some(b) => Ok(b.max(1)),
            None => self.fail(InvalidConfig::Overflow {
                what: if what == "request" {
                    "request_slice_len"
                } else {
                    "response_slice_len"
                },
                value: len,
            }),
        }
    }
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> Pattern for RequestResponseBuilder<Req, Resp> {
    const PATTERN: MessagingPattern = MessagingPattern::RequestResponse;
    type Section = RequestResponseConfig;

    fn section(c: &StaticConfig) -> Option<&RequestResponseConfig> {
        c.request_response()
    }

    fn new_config(&self, target: &Target) -> Result<StaticConfig, CreateError> {
        let permissions = self.permissions.unwrap_or(segment::DEFAULT_MODE);
        let section = RequestResponseConfig {
            max_clients: self.max_clients.unwrap_or(8),
            max_servers: self.max_servers.unwrap_or(2),
            max_active_requests_per_client: self.max_active.unwrap_or(4),
            response: self.response_type(),
            max_response_buffer: self.max_response_buffer.unwrap_or(16),
        };
        let (c, s) = (u64::from(section.max_clients), u64::from(section.max_servers));
        let a = u64::from(section.max_active_requests_per_client);
        let r = u64::from(section.max_response_buffer);
        let mut config = StaticConfig {
            version: static_config::CONFIG_VERSION,
            name: target.name.to_string(),
            pattern: PatternConfig::RequestResponse(section),
            payload: self.request_type(),
            memory_type: self.memory_type.unwrap_or_default(),
            layout: PoolLayout::new(&[(64, 1)]).expect("constant layout"),
            permissions,
            backing: PayloadBacking::File,
            created_unix_ns: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            schema: None,
            user_header: None,
            // Set by the protocol for every pattern (`service::create`).
            attributes: Default::default(),
            access: None,
        };
        if let Err(e) = config.check()
            && !e.is_payload()
        {
            return self.fail(e);
        }
        let l = u64::from(MAX_LOANS);
        let w = c * (a + l) + s * l + s * c * a * r + c * a * r;
        let align = self
            .request_type()
            .alignment()
            .max(self.response_type().alignment())
            .max(iox_mempool::layout::DEFAULT_ALIGNMENT);
        // One class per distinct chunk size (sizes round up to the alignment).
        let round = |b: usize| b.checked_next_multiple_of(align).unwrap_or(b);
        let req = round(self.bytes(&self.request_type(), self.request_slice_len, "request")?);
        let resp = round(self.bytes(&self.response_type(), self.response_slice_len, "response")?);
        let mut classes = vec![(req, w as usize)];
        if resp != req {
            classes.push((resp, w as usize));
        }
        classes.sort_unstable();
        config.layout =
            PoolLayout::with_alignment(align, &classes).map_err(|source| CreateError::Layout {
                name: target.name.to_string(),
                source,
            })?;
        let memfd = self.backing.is_none_or(|b| b == Backing::Memfd);
        if memfd {
            config.backing = PayloadBacking::Memfd(MemfdIdentity {
                len: config.layout.payload_len() as u64,
                dev: 0,
                ino: 0,
                nonce: 0,
            });
        }
        config.check().or_else(|e| self.fail(e))?;
        Ok(config)
    }

    fn check_compatible(
        &self,
        target: &Target,
        c: &StaticConfig,
        rr: &RequestResponseConfig,
    ) -> Result<(), OpenError> {
        let name = || target.name.to_string();
        let incompatible = |what, requested: String, found: String| {
            Err(OpenError::IncompatibleLimit {
                name: name(),
                what,
                requested,
                found,
            })
        };
        let (request, response) = (self.request_type(), self.response_type());
        if c.payload != request {
            return Err(OpenError::IncompatiblePayload {
                name: name(),
                requested: request,
                found: c.payload.clone(),
            });
        }
        if rr.response != response {
            return Err(OpenError::IncompatiblePayload {
                name: name(),
                requested: response,
                found: rr.response.clone(),
            });
        }
        if let Some(t) = self.memory_type
            && t != c.memory_type
        {
            return incompatible("memory_type", t.to_string(), c.memory_type.to_string());
        }
        if let Some(b) = self.backing
            && b != c.backing.kind()
        {
            return incompatible("backing", format!("{b:?}"), format!("{:?}", c.backing.kind()));
        }
        let limits = [
            ("max_clients", self.max_clients, rr.max_clients),
            ("max_servers", self.max_servers, rr.max_servers),
            (
                "max_active_requests_per_client",
                self.max_active,
                rr.max_active_requests_per_client,
            ),
            (
                "max_response_buffer",
                self.max_response_buffer,
                rr.max_response_buffer,
            ),
        ];
        for (what, requested, found) in limits {
            if let Some(r) = requested
                && r > found
            {
                return incompatible(what, r.to_string(), found.to_string());
            }
        }
        Ok(())
    }
}

/// An open request-response service. Clone it freely; ports keep it alive.
#[derive(Debug)]
pub struct RequestResponseService<Req: ?Sized, Resp: ?Sized> {
    pub(crate) shared: Arc<ServiceShared>,
    _payload: PhantomData<Types<Req, Resp>>,
}

impl<Req: ?Sized, Resp: ?Sized> Clone for RequestResponseService<Req, Resp> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            _payload: PhantomData,
        }
    }
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> RequestResponseService<Req, Resp> {
    crate::handle_methods::handle_methods!("clients and servers", "request_response::<u64, u64>()");

    pub(crate) fn new(shared: ServiceShared) -> Self {
        Self {
            shared: Arc::new(shared),
            _payload: PhantomData,
        }
    }

    /// The request-response section of the static config (limits, response payload).
    pub fn request_response_config(&self) -> &RequestResponseConfig {
        self.shared
            .config
            .request_response()
            .expect("a request-response service has its section (checked on open)")
    }

    /// The pool: address in this process, length, memory type, classes.
    pub fn pool_info(&self) -> PoolInfo {
        self.shared.pool.info()
    }

    /// A builder for a client.
    pub fn client_builder(&self) -> ClientBuilder<Req, Resp> {
        ClientBuilder::new(Arc::clone(&self.shared))
    }

    /// A builder for a server.
    pub fn server_builder(&self) -> ServerBuilder<Req, Resp> {
        ServerBuilder::new(Arc::clone(&self.shared))
    }

    /// Requests in flight right now: sent and neither ended nor released (a snapshot).
    pub fn requests_in_flight(&self) -> usize {
        super::recovery::requests_in_flight(self.shared.dynamic())
    }
}
