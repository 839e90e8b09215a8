//! Request-response from C: a service with a request and a response type, clients that
//! loan and send requests and read each one's stream of responses, servers that take
//! requests, loan and send responses, and end each stream.
//!
//! Everything a port lends is an id kept by the port (see `handle`): a client keeps
//! its request loans, its pending responses (one per request sent) and the responses
//! received; a server keeps its active requests and their response loans. Finishing a
//! request (`iox_server_finish`) discards its unsent response loans and ends the
//! client's stream; dropping a pending response abandons the request.
//!
//! Invariant: a response loan borrows its active request, which is boxed (its address
//! does not move) and dropped only after every loan of it (the loans are removed first
//! in `iox_server_finish`, and the port's loans field drops before its requests).

use std::cell::RefCell;
use std::ffi::{c_char, c_void};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use iox_service::{
    Client, PendingResponse, RawActiveRequest, RawRequest, RawResponse, RawResponseLoan,
    RequestResponseService, Server,
};

use crate::handle::{Marked, Slots, marker};
use crate::publisher::IoxLoan;
use crate::service::{IoxType, NO_TYPE, by_mode, named, payload_type};
use crate::status::{IoxStatus, fail, guard};
use crate::subscriber::IoxSample;

/// The types and settings of a request-response service. Fill it with
/// [`iox_request_response_options_init`], then set the types and what else differs;
/// zero means the default (on open: whatever the service has).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoxRequestResponseOptions {
    /// The root directory of the service's files; NULL: `IOX_ROOT`, else `/dev/shm`.
    pub root: *const c_char,
    /// The request type.
    pub request: IoxType,
    /// The response type.
    pub response: IoxType,
    /// Most clients (0: default).
    pub max_clients: u32,
    /// Most servers (0: default).
    pub max_servers: u32,
    /// Requests one client may have active at once (0: default).
    pub max_active_requests_per_client: u32,
    /// Responses of one request that may wait for the client (0: default).
    pub max_response_buffer: u32,
    /// How long to wait for a service another process is creating or removing, in
    /// milliseconds (0: default, 10 s).
    pub timeout_ms: u64,
}

/// The default options (no types yet). Does nothing if `options` is NULL.
///
/// # Safety
/// `options` is NULL or points to writable memory for an `IoxRequestResponseOptions`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_request_response_options_init(options: *mut IoxRequestResponseOptions) {
    if options.is_null() {
        return;
    }
    let defaults = IoxRequestResponseOptions {
        root: std::ptr::null(),
        request: NO_TYPE,
        response: NO_TYPE,
        max_clients: 0,
        max_servers: 0,
        max_active_requests_per_client: 0,
        max_response_buffer: 0,
        timeout_ms: 0,
    };
    // SAFETY: the caller's contract; not NULL (checked).
    unsafe { options.write(defaults) };
}

/// An open request-response service (opaque); any thread.
pub struct IoxRequestResponseService {
    service: RequestResponseService<[u8], [u8]>,
}

/// A client (opaque): used from the thread that created it.
pub struct IoxClient {
    // Field order: what borrows nothing first; all of it before the client port.
    loans: RefCell<Slots<RawRequest>>,
    responses: RefCell<Slots<RawResponse>>,
    pending: RefCell<Slots<PendingResponse<[u8], [u8]>>>,
    client: Client<[u8], [u8]>,
}

/// A server (opaque): used from the thread that created it.
pub struct IoxServer {
    // Dropped before `requests`, whose boxed requests the loans borrow.
    loans: RefCell<Slots<(u64, RawResponseLoan<'static>)>>,
    requests: RefCell<Slots<Box<RawActiveRequest>>>,
    server: Server<[u8], [u8]>,
}

const RR_SERVICE: u64 = marker(b"iox-rrs\0");
const CLIENT: u64 = marker(b"iox-cli\0");
const SERVER: u64 = marker(b"iox-srv\0");

/// Opens, creates, or opens-or-creates (`mode` as for `iox_pubsub_open`) the
/// request-response service `name`; on success `*out` is the service.
///
/// # Safety
/// `name` is a NUL-terminated string; `options` points to an
/// `IoxRequestResponseOptions` whose strings are NULL or NUL-terminated; `out` points to
/// writable memory for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_request_response_open(
    name: *const c_char,
    mode: u32,
    options: *const IoxRequestResponseOptions,
    out: *mut *mut IoxRequestResponseService,
) -> IoxStatus {
    guard(|| {
        if options.is_null() || out.is_null() {
            return fail(IoxStatus::NullPointer, "options and out must not be NULL");
        }
        // SAFETY: the caller's contract; not NULL (checked).
        let o = unsafe { &*options };
        // SAFETY: the caller's contract (NUL-terminated strings or NULL).
        let (service, request, response) = match unsafe {
            (
                named(name, o.root),
                payload_type(&o.request, "options.request"),
                payload_type(&o.response, "options.response"),
            )
        } {
            (Ok(s), Ok(q), Ok(r)) => (s, q, r),
            (Err(s), _, _) | (_, Err(s), _) | (_, _, Err(s)) => return s,
        };
        // SAFETY: the ports of this service (below) loan only with `loan_raw`, receive
        // only with the `_raw` receives, and hand C the payloads' addresses only, as
        // `raw_payload_types` requires.
        let mut b = unsafe {
            service
                .request_response::<[u8], [u8]>()
                .raw_payload_types(request, response)
        };
        if o.request.slice && o.request.max_slice_len != 0 {
            b = b.request_slice_len(o.request.max_slice_len as usize);
        }
        if o.response.slice && o.response.max_slice_len != 0 {
            b = b.response_slice_len(o.response.max_slice_len as usize);
        }
        if o.max_clients != 0 {
            b = b.max_clients(o.max_clients);
        }
        if o.max_servers != 0 {
            b = b.max_servers(o.max_servers);
        }
        if o.max_active_requests_per_client != 0 {
            b = b.max_active_requests_per_client(o.max_active_requests_per_client);
        }
        if o.max_response_buffer != 0 {
            b = b.max_response_buffer(o.max_response_buffer);
        }
        if o.timeout_ms != 0 {
            b = b.timeout(Duration::from_millis(o.timeout_ms));
        }
        let opened = by_mode(
            b,
            mode,
            |b| b.open_or_create().map_err(|e| e.to_string()),
            |b| b.open().map_err(|e| e.to_string()),
            |b| b.create().map_err(|e| e.to_string()),
        );
        match opened {
            Ok(service) => {
                let p = Marked::into_raw(RR_SERVICE, IoxRequestResponseService { service });
                // SAFETY: the caller's contract; not NULL (checked).
                unsafe { out.write(p.cast()) };
                IoxStatus::Ok
            }
            Err(status) => status,
        }
    })
}

/// Closes this handle of the service. Any thread.
///
/// # Safety
/// `service` is NULL or a pointer from [`iox_request_response_open`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_request_response_service_drop(
    service: *mut IoxRequestResponseService,
) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { Marked::<IoxRequestResponseService>::drop_raw(service.cast(), RR_SERVICE, false) })
}

/// # Safety
/// `service` is a pointer from [`iox_request_response_open`].
unsafe fn rr_service<'a>(
    service: *mut IoxRequestResponseService,
) -> Result<&'a RequestResponseService<[u8], [u8]>, IoxStatus> {
    // SAFETY: the caller's contract.
    unsafe { Marked::<IoxRequestResponseService>::get(service.cast(), RR_SERVICE, false) }
        .map(|m| &m.inner.service)
}

/// Writes `value` through `out` if it is not NULL.
///
/// # Safety
/// `out` is NULL or points to writable memory for a `T`.
unsafe fn put<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { out.write(value) };
    }
}

const NO_LOAN: &str = "no such loan: it was sent or discarded already, or belongs to another port";

// ---------------------------------------------------------------------------- client

/// Creates a client of `service`; `*out` is the client.
///
/// # Safety
/// `service` is a pointer from [`iox_request_response_open`]; `out` points to writable
/// memory for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_client_create(
    service: *mut IoxRequestResponseService,
    pin_memory: bool,
    out: *mut *mut IoxClient,
) -> IoxStatus {
    guard(|| {
        if out.is_null() {
            return fail(IoxStatus::NullPointer, "out must not be NULL");
        }
        // SAFETY: the caller's contract.
        let service = match unsafe { rr_service(service) } {
            Ok(s) => s,
            Err(status) => return status,
        };
        match service.client_builder().pin_memory(pin_memory).create() {
            Ok(client) => {
                let p = Marked::into_raw(
                    CLIENT,
                    IoxClient {
                        loans: RefCell::new(Slots::new()),
                        responses: RefCell::new(Slots::new()),
                        pending: RefCell::new(Slots::new()),
                        client,
                    },
                );
                // SAFETY: the caller's contract; not NULL (checked).
                unsafe { out.write(p.cast()) };
                IoxStatus::Ok
            }
            Err(e) => fail(IoxStatus::PortCreateFailed, e),
        }
    })
}

/// # Safety
/// `client` is a pointer from [`iox_client_create`].
unsafe fn client<'a>(client: *mut IoxClient) -> Result<&'a IoxClient, IoxStatus> {
    // SAFETY: the caller's contract.
    unsafe { Marked::<IoxClient>::get(client.cast(), CLIENT, true) }.map(|m| &m.inner)
}

/// Loans a request of `len_bytes` bytes (the request type's size, or a whole number of
/// its elements for a slice); `*loan` is filled. Write all of it before sending.
///
/// # Safety
/// `client` is a pointer from [`iox_client_create`]; `loan` points to writable memory
/// for an `IoxLoan`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_client_loan(
    client: *mut IoxClient,
    len_bytes: u64,
    loan: *mut IoxLoan,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { self::client(client) } {
            Ok(c) => c,
            Err(status) => return status,
        };
        if loan.is_null() {
            return fail(IoxStatus::NullPointer, "loan must not be NULL");
        }
        let Ok(bytes) = usize::try_from(len_bytes) else {
            return fail(
                IoxStatus::InvalidArgument,
                "len_bytes does not fit this machine's addresses",
            );
        };
        match c.client.loan_raw(bytes) {
            Ok(mut raw) => {
                let (data, len) = (raw.as_mut_ptr().cast::<c_void>(), raw.len_bytes() as u64);
                let id = c.loans.borrow_mut().insert(raw);
                // SAFETY: the caller's contract; not NULL (checked).
                unsafe {
                    loan.write(IoxLoan {
                        data,
                        len_bytes: len,
                        id,
                    })
                };
                IoxStatus::Ok
            }
            Err(e) => fail(IoxStatus::LoanFailed, e),
        }
    })
}

/// Sends the request loan `id` to one server; `*pending` names its stream of
/// responses (receive them with [`iox_client_receive`]; drop it with
/// [`iox_client_drop_pending`]). The loan id is stale afterwards.
///
/// # Safety
/// `client` is a pointer from [`iox_client_create`]; the loan's bytes were all written
/// with a valid value of the request type; `pending` points to writable memory for a
/// `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_client_send(client: *mut IoxClient, id: u64, pending: *mut u64) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { self::client(client) } {
            Ok(c) => c,
            Err(status) => return status,
        };
        if pending.is_null() {
            return fail(IoxStatus::NullPointer, "pending must not be NULL");
        }
        let Some(raw) = c.loans.borrow_mut().remove(id) else {
            return fail(IoxStatus::StaleHandle, NO_LOAN);
        };
        // SAFETY: the caller's contract: every byte was written with a valid value.
        match unsafe { raw.send() } {
            Ok(p) => {
                let pid = c.pending.borrow_mut().insert(p);
                // SAFETY: the caller's contract; not NULL (checked).
                unsafe { pending.write(pid) };
                IoxStatus::Ok
            }
            Err(e) => fail(IoxStatus::SendFailed, e),
        }
    })
}

/// Gives the request loan `id` back unsent.
///
/// # Safety
/// `client` is a pointer from [`iox_client_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_client_discard(client: *mut IoxClient, id: u64) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { self::client(client) } {
            Ok(c) => c,
            Err(status) => return status,
        };
        match c.loans.borrow_mut().remove(id) {
            Some(raw) => {
                drop(raw);
                IoxStatus::Ok
            }
            None => fail(IoxStatus::StaleHandle, NO_LOAN),
        }
    })
}

/// Receives the next response of the request `pending`, waiting up to `timeout_ns`
/// (0: do not wait) without spinning. `*got` says whether `*response` was filled
/// (release it with [`iox_client_release`]); `*finished` (if not NULL) whether the
/// stream has ended (the server finished the request, or is gone): then no response
/// will come any more.
///
/// # Safety
/// `client` is a pointer from [`iox_client_create`]; `response` and `got` point to
/// writable memory for an `IoxSample` and a `bool`; `finished` is NULL or points to
/// writable memory for a `bool`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_client_receive(
    client: *mut IoxClient,
    pending: u64,
    timeout_ns: u64,
    response: *mut IoxSample,
    got: *mut bool,
    finished: *mut bool,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { self::client(client) } {
            Ok(c) => c,
            Err(status) => return status,
        };
        if response.is_null() || got.is_null() {
            return fail(IoxStatus::NullPointer, "response and got must not be NULL");
        }
        let table = c.pending.borrow();
        let Some(p) = table.iter().find_map(|(id, p)| (id == pending).then_some(p)) else {
            return fail(
                IoxStatus::StaleHandle,
                "no such pending response: dropped already, or of another client",
            );
        };
        let taken = if timeout_ns == 0 {
            p.receive_raw()
        } else {
            p.receive_timeout_raw(Duration::from_nanos(timeout_ns))
        };
        let ended = p.is_finished() || p.is_server_gone();
        match taken {
            Ok(r) => {
                // SAFETY: the caller's contract; `response` and `got` are not NULL
                // (checked), `finished` may be.
                unsafe {
                    got.write(r.is_some());
                    if let Some(r) = r {
                        let (data, len_bytes, len) =
                            (r.as_ptr().cast(), r.len_bytes() as u64, r.len() as u64);
                        let id = c.responses.borrow_mut().insert(r);
                        response.write(IoxSample {
                            data,
                            len_bytes,
                            len,
                            id,
                        });
                    }
                    put(finished, ended);
                }
                IoxStatus::Ok
            }
            Err(e) => fail(IoxStatus::ReceiveFailed, e),
        }
    })
}

/// Releases the response `id`.
///
/// # Safety
/// `client` is a pointer from [`iox_client_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_client_release(client: *mut IoxClient, id: u64) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { self::client(client) } {
            Ok(c) => c,
            Err(status) => return status,
        };
        match c.responses.borrow_mut().remove(id) {
            Some(r) => {
                drop(r);
                IoxStatus::Ok
            }
            None => fail(
                IoxStatus::StaleHandle,
                "no such response: released already, or of another client",
            ),
        }
    })
}

/// Drops the pending response `pending`: its request is abandoned (responses still
/// coming are released) and its request slot freed for another request.
///
/// # Safety
/// `client` is a pointer from [`iox_client_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_client_drop_pending(client: *mut IoxClient, pending: u64) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { self::client(client) } {
            Ok(c) => c,
            Err(status) => return status,
        };
        match c.pending.borrow_mut().remove(pending) {
            Some(p) => {
                drop(p);
                IoxStatus::Ok
            }
            None => fail(
                IoxStatus::StaleHandle,
                "no such pending response: dropped already, or of another client",
            ),
        }
    })
}

/// The client's readiness descriptor: readable when a response (or the end of a
/// stream) may have arrived. Owned by the client; valid until it is dropped.
///
/// # Safety
/// `client` is a pointer from [`iox_client_create`]; `fd` points to writable memory
/// for an `int`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_client_fd(client: *mut IoxClient, fd: *mut i32) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { self::client(client) } {
            Ok(c) => c,
            Err(status) => return status,
        };
        if fd.is_null() {
            return fail(IoxStatus::NullPointer, "fd must not be NULL");
        }
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { fd.write(c.client.as_fd().as_raw_fd()) };
        IoxStatus::Ok
    })
}

/// Drops the client with its loans, pending responses and responses.
///
/// # Safety
/// `client` is NULL or a pointer from [`iox_client_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_client_drop(client: *mut IoxClient) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { Marked::<IoxClient>::drop_raw(client.cast(), CLIENT, true) })
}

// ---------------------------------------------------------------------------- server

/// Creates a server of `service`; `*out` is the server.
///
/// # Safety
/// `service` is a pointer from [`iox_request_response_open`]; `out` points to writable
/// memory for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_server_create(
    service: *mut IoxRequestResponseService,
    pin_memory: bool,
    out: *mut *mut IoxServer,
) -> IoxStatus {
    guard(|| {
        if out.is_null() {
            return fail(IoxStatus::NullPointer, "out must not be NULL");
        }
        // SAFETY: the caller's contract.
        let service = match unsafe { rr_service(service) } {
            Ok(s) => s,
            Err(status) => return status,
        };
        match service.server_builder().pin_memory(pin_memory).create() {
            Ok(server) => {
                let p = Marked::into_raw(
                    SERVER,
                    IoxServer {
                        loans: RefCell::new(Slots::new()),
                        requests: RefCell::new(Slots::new()),
                        server,
                    },
                );
                // SAFETY: the caller's contract; not NULL (checked).
                unsafe { out.write(p.cast()) };
                IoxStatus::Ok
            }
            Err(e) => fail(IoxStatus::PortCreateFailed, e),
        }
    })
}

/// # Safety
/// `server` is a pointer from [`iox_server_create`].
unsafe fn server<'a>(server: *mut IoxServer) -> Result<&'a IoxServer, IoxStatus> {
    // SAFETY: the caller's contract.
    unsafe { Marked::<IoxServer>::get(server.cast(), SERVER, true) }.map(|m| &m.inner)
}

/// Takes the next request, waiting up to `timeout_ns` (0: do not wait) without
/// spinning. `*got` says whether `*request` was filled; its `id` names the active
/// request: respond with [`iox_server_loan`] / [`iox_server_send`], end the stream
/// with [`iox_server_finish`].
///
/// # Safety
/// `server` is a pointer from [`iox_server_create`]; `request` and `got` point to
/// writable memory for an `IoxSample` and a `bool`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_server_receive(
    server: *mut IoxServer,
    timeout_ns: u64,
    request: *mut IoxSample,
    got: *mut bool,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = match unsafe { self::server(server) } {
            Ok(s) => s,
            Err(status) => return status,
        };
        if request.is_null() || got.is_null() {
            return fail(IoxStatus::NullPointer, "request and got must not be NULL");
        }
        let taken = if timeout_ns == 0 {
            s.server.receive_raw()
        } else {
            s.server.receive_timeout_raw(Duration::from_nanos(timeout_ns))
        };
        match taken {
            Ok(r) => {
                // SAFETY: the caller's contract; neither is NULL (checked).
                unsafe {
                    got.write(r.is_some());
                    if let Some(r) = r {
                        let (data, len_bytes, len) =
                            (r.as_ptr().cast(), r.len_bytes() as u64, r.len() as u64);
                        let id = s.requests.borrow_mut().insert(Box::new(r));
                        request.write(IoxSample {
                            data,
                            len_bytes,
                            len,
                            id,
                        });
                    }
                }
                IoxStatus::Ok
            }
            Err(e) => fail(IoxStatus::ReceiveFailed, e),
        }
    })
}

/// Loans a response of `len_bytes` bytes to the active request `request`; `*loan` is
/// filled. Write all of it before sending.
///
/// # Safety
/// `server` is a pointer from [`iox_server_create`]; `loan` points to writable memory
/// for an `IoxLoan`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_server_loan(
    server: *mut IoxServer,
    request: u64,
    len_bytes: u64,
    loan: *mut IoxLoan,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = match unsafe { self::server(server) } {
            Ok(s) => s,
            Err(status) => return status,
        };
        if loan.is_null() {
            return fail(IoxStatus::NullPointer, "loan must not be NULL");
        }
        let Ok(bytes) = usize::try_from(len_bytes) else {
            return fail(
                IoxStatus::InvalidArgument,
                "len_bytes does not fit this machine's addresses",
            );
        };
        let requests = s.requests.borrow();
        let Some(active) = requests.iter().find_map(|(id, r)| (id == request).then_some(r)) else {
            return fail(
                IoxStatus::StaleHandle,
                "no such active request: finished already, or of another server",
            );
        };
        let active: &RawActiveRequest = active;
        // SAFETY: only the lifetime changes: the request is boxed (its address does not
        // move when the table grows) and is dropped only after this loan (see the module
        // docs), so the loan never outlives what it borrows.
        let active: &'static RawActiveRequest = unsafe { &*std::ptr::from_ref(active) };
        match active.loan_raw(bytes) {
            Ok(mut raw) => {
                let (data, len) = (raw.as_mut_ptr().cast::<c_void>(), raw.len_bytes() as u64);
                let id = s.loans.borrow_mut().insert((request, raw));
                // SAFETY: the caller's contract; not NULL (checked).
                unsafe {
                    loan.write(IoxLoan {
                        data,
                        len_bytes: len,
                        id,
                    })
                };
                IoxStatus::Ok
            }
            Err(e) => fail(IoxStatus::LoanFailed, e),
        }
    })
}

/// Sends the response loan `id` to the client of its request. The loan id is stale
/// afterwards.
///
/// # Safety
/// `server` is a pointer from [`iox_server_create`]; the loan's bytes were all written
/// with a valid value of the response type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_server_send(server: *mut IoxServer, id: u64) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = match unsafe { self::server(server) } {
            Ok(s) => s,
            Err(status) => return status,
        };
        let Some((_, raw)) = s.loans.borrow_mut().remove(id) else {
            return fail(IoxStatus::StaleHandle, NO_LOAN);
        };
        // SAFETY: the caller's contract: every byte was written with a valid value.
        match unsafe { raw.send() } {
            Ok(()) => IoxStatus::Ok,
            Err(e) => fail(IoxStatus::SendFailed, e),
        }
    })
}

/// Gives the response loan `id` back unsent.
///
/// # Safety
/// `server` is a pointer from [`iox_server_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_server_discard(server: *mut IoxServer, id: u64) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = match unsafe { self::server(server) } {
            Ok(s) => s,
            Err(status) => return status,
        };
        match s.loans.borrow_mut().remove(id) {
            Some(loan) => {
                drop(loan);
                IoxStatus::Ok
            }
            None => fail(IoxStatus::StaleHandle, NO_LOAN),
        }
    })
}

/// Ends the active request `request`: its unsent response loans are discarded, and
/// the client's stream ends after the responses sent.
///
/// # Safety
/// `server` is a pointer from [`iox_server_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_server_finish(server: *mut IoxServer, request: u64) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = match unsafe { self::server(server) } {
            Ok(s) => s,
            Err(status) => return status,
        };
        // Its loans first: they borrow the request.
        let mut loans = s.loans.borrow_mut();
        let ids: Vec<u64> = loans
            .iter()
            .filter(|(_, (r, _))| *r == request)
            .map(|(id, _)| id)
            .collect();
        for id in ids {
            drop(loans.remove(id));
        }
        drop(loans);
        match s.requests.borrow_mut().remove(request) {
            Some(r) => {
                drop(r);
                IoxStatus::Ok
            }
            None => fail(
                IoxStatus::StaleHandle,
                "no such active request: finished already, or of another server",
            ),
        }
    })
}

/// The server's readiness descriptor: readable when a request waits. Owned by the
/// server; valid until it is dropped.
///
/// # Safety
/// `server` is a pointer from [`iox_server_create`]; `fd` points to writable memory
/// for an `int`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_server_fd(server: *mut IoxServer, fd: *mut i32) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = match unsafe { self::server(server) } {
            Ok(s) => s,
            Err(status) => return status,
        };
        if fd.is_null() {
            return fail(IoxStatus::NullPointer, "fd must not be NULL");
        }
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { fd.write(s.server.as_fd().as_raw_fd()) };
        IoxStatus::Ok
    })
}

/// Drops the server, finishing its active requests and discarding its loans.
///
/// # Safety
/// `server` is NULL or a pointer from [`iox_server_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_server_drop(server: *mut IoxServer) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { Marked::<IoxServer>::drop_raw(server.cast(), SERVER, true) })
}
