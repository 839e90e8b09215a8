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
    RequestResponseBuilder, RequestResponseService, Server,
};

use crate::args::read_options;
use crate::attributes::{AttributeSettings, CAttributes};
use crate::handle::{
    Slots, bytes, drop_handle, hand_out, lend, live, marker, non_null, put, show, take, timeout,
};
use crate::publisher::{IoxLoan, NO_LOAN};
use crate::service::{IoxType, NO_TYPE, by_mode, limit, named, payload_type};
use crate::status::{IoxStatus, fail, guard, refuse};
use crate::subscriber::IoxSample;

/// Requests and responses carry no user header: their loans' `header` is NULL.
const NO_LOAN_HEADER: (*mut c_void, u64) = (std::ptr::null_mut(), 0);
/// ... and so is their samples'.
const NO_SAMPLE_HEADER: (*const c_void, u64) = (std::ptr::null(), 0);

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
    /// Attributes to record when this call creates the service (`attribute_count` of
    /// them; NULL with 0: none). Not compared with an existing service's on open.
    pub attributes: *const crate::IoxAttribute,
    /// How many `attributes` there are.
    pub attribute_count: usize,
    /// Attributes an existing service must have when this call opens it
    /// (`required_attribute_count` of them; NULL with 0: none); an entry whose `value`
    /// is NULL requires only the key. A call that may create must record them too.
    pub required_attributes: *const crate::IoxAttribute,
    /// How many `required_attributes` there are.
    pub required_attribute_count: usize,
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
        attributes: std::ptr::null(),
        attribute_count: 0,
        required_attributes: std::ptr::null(),
        required_attribute_count: 0,
    };
    // SAFETY: the caller's contract; not NULL (checked).
    unsafe { options.write(defaults) };
}

/// An open request-response service (opaque); any thread.
pub struct IoxRequestResponseService {
    service: RequestResponseService<[u8], [u8]>,
    /// Its attributes as C strings (see `attributes`).
    attributes: CAttributes,
}

/// A client (opaque): used from the thread that created it.
pub struct IoxClient {
    // Field order: what it lends first; all of it before the client port.
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

const NO_PENDING: &str = "no such pending response: dropped already, or of another client";
const NO_RESPONSE: &str = "no such response: released already, or of another client";
const NO_REQUEST: &str = "no such active request: finished already, or of another server";

crate::service::opening!(RequestResponseBuilder<[u8], [u8]> => RequestResponseService<[u8], [u8]>);

/// Opens, creates, or opens-or-creates (`mode` as for `iox_pubsub_open`) the
/// request-response service `name`; on success `*out` is the service.
///
/// # Safety
/// `name` is a NUL-terminated string; `options` points to an
/// `IoxRequestResponseOptions` whose strings are NULL or NUL-terminated and whose types'
/// `fields` are as `iox_pubsub_open` requires; `out` points to writable memory for a
/// pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_request_response_open(
    name: *const c_char,
    mode: u32,
    options: *const IoxRequestResponseOptions,
    out: *mut *mut IoxRequestResponseService,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract (readable options, NUL-terminated strings, the
        // types' fields readable as `IoxType::fields` documents).
        let (o, service, request, response) = unsafe {
            let o = read_options(options)?;
            // Request-response services record no field layout (their types are
            // compared by name, size and alignment): declared fields are checked, so a
            // wrong table is still an error, and not recorded.
            crate::fields::declared_schema(&o.request, "options.request")?;
            crate::fields::declared_schema(&o.response, "options.response")?;
            (
                o,
                named(name, o.root)?,
                payload_type(&o.request, "options.request")?,
                payload_type(&o.response, "options.response")?,
            )
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
        if let Some(n) = limit(o.max_clients) {
            b = b.max_clients(n);
        }
        if let Some(n) = limit(o.max_servers) {
            b = b.max_servers(n);
        }
        if let Some(n) = limit(o.max_active_requests_per_client) {
            b = b.max_active_requests_per_client(n);
        }
        if let Some(n) = limit(o.max_response_buffer) {
            b = b.max_response_buffer(n);
        }
        if o.timeout_ms != 0 {
            b = b.timeout(Duration::from_millis(o.timeout_ms));
        }
        // SAFETY: the caller's contract (arrays of their counts, NUL-terminated strings).
        let settings = unsafe {
            AttributeSettings::read(
                o.attributes,
                o.attribute_count,
                o.required_attributes,
                o.required_attribute_count,
            )
        }?;
        let b = settings.apply(b);
        let make = || {
            by_mode(b, mode).map(|service| IoxRequestResponseService {
                attributes: CAttributes::of(service.attributes()),
                service,
            })
        };
        // SAFETY: the caller's contract.
        unsafe { hand_out(out, RR_SERVICE, make) }
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
    guard(|| unsafe { drop_handle(service, RR_SERVICE, false) })
}

/// How many attributes the request-response service's creator recorded: `*count`.
///
/// # Safety
/// `service` is a pointer from [`iox_request_response_open`]; `count` points to writable memory for a
/// `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_request_response_attribute_count(
    service: *mut IoxRequestResponseService,
    count: *mut usize,
) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { live(service, RR_SERVICE, false)?.attributes.count(count) })
}

/// Attribute `index` (0 to count - 1, sorted by key) of the request-response service: `*key` and
/// `*value` (either out pointer may be NULL). The strings stay valid until the service
/// handle is dropped. An index out of range is `IOX_STATUS_INVALID_ARGUMENT`.
///
/// # Safety
/// `service` is a pointer from [`iox_request_response_open`]; `key` and `value` are NULL or point to
/// writable memory for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_request_response_attribute(
    service: *mut IoxRequestResponseService,
    index: usize,
    key: *mut *const c_char,
    value: *mut *const c_char,
) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { live(service, RR_SERVICE, false)?.attributes.at(index, key, value) })
}

/// The value of the request-response service's attribute `key`: `*value`, or NULL if it has none.
/// The string stays valid until the service handle is dropped.
///
/// # Safety
/// `service` is a pointer from [`iox_request_response_open`]; `key` is a NUL-terminated string;
/// `value` points to writable memory for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_request_response_attribute_get(
    service: *mut IoxRequestResponseService,
    key: *const c_char,
    value: *mut *const c_char,
) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { live(service, RR_SERVICE, false)?.attributes.get(key, value) })
}

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
        // SAFETY: the caller's contract.
        let service = &unsafe { live(service, RR_SERVICE, false) }?.service;
        let make = || {
            let client = service
                .client_builder()
                .pin_memory(pin_memory)
                .create()
                .map_err(|e| fail(IoxStatus::PortCreateFailed, e))?;
            Ok(IoxClient {
                loans: RefCell::new(Slots::new()),
                responses: RefCell::new(Slots::new()),
                pending: RefCell::new(Slots::new()),
                client,
            })
        };
        // SAFETY: the caller's contract.
        unsafe { hand_out(out, CLIENT, make) }
    })
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
        let c = unsafe { live(client, CLIENT, true) }?;
        let loan = non_null(loan, "loan")?;
        let mut raw = c
            .client
            .loan_raw(bytes(len_bytes)?)
            .map_err(|e| fail(IoxStatus::LoanFailed, e))?;
        let (data, len) = (raw.as_mut_ptr().cast(), raw.len_bytes());
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { lend(&c.loans, raw, data, len, NO_LOAN_HEADER, loan) }
    })
}

/// Sends the request loan `id` to one server; `*pending` names its stream of
/// responses: receive them with [`iox_client_receive`], and drop it with
/// [`iox_client_drop_pending`] once done (its request slot stays taken until then; a
/// client has `max_active_requests_per_client` of them). The loan id is stale
/// afterwards, whether the send succeeded or not.
///
/// # Safety
/// `client` is a pointer from [`iox_client_create`]; the loan's bytes were all written
/// with a valid value of the request type; `pending` points to writable memory for a
/// `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_client_send(client: *mut IoxClient, id: u64, pending: *mut u64) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { live(client, CLIENT, true) }?;
        let pending = non_null(pending, "pending")?;
        let raw = take(&c.loans, id, NO_LOAN)?;
        // SAFETY: the caller's contract: every byte was written with a valid value.
        let p = unsafe { raw.send() }.map_err(|e| fail(IoxStatus::SendFailed, e))?;
        let pid = c.pending.borrow_mut().insert(p)?;
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { pending.write(pid) };
        Ok(())
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
        let c = unsafe { live(client, CLIENT, true) }?;
        drop(take(&c.loans, id, NO_LOAN)?);
        Ok(())
    })
}

/// Receives the next response of the request `pending`, waiting up to `timeout_ns`
/// (0: do not wait) without spinning. `*got` says whether `*response` was filled
/// (release it with [`iox_client_release`]); `*finished` (if not NULL) whether the
/// stream has ended (the server finished the request, or is gone; written also when
/// the call fails because the server is gone): then no response will come any more.
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
        let c = unsafe { live(client, CLIENT, true) }?;
        let (response, got) = (non_null(response, "response")?, non_null(got, "got")?);
        let table = c.pending.borrow();
        let Some(p) = table.get(pending) else {
            return refuse(IoxStatus::StaleHandle, NO_PENDING);
        };
        let taken = match timeout(timeout_ns) {
            None => p.receive_raw(),
            Some(t) => p.receive_timeout_raw(t),
        };
        // SAFETY: the caller's contract: NULL or writable.
        unsafe { put(finished, p.is_finished() || p.is_server_gone()) };
        let taken = taken.map_err(|e| fail(IoxStatus::ReceiveFailed, e))?;
        let got_one = taken.is_some();
        // SAFETY: the caller's contract; `response` and `got` are not NULL (checked).
        unsafe {
            if let Some(r) = taken {
                let (data, len_bytes, len) = (r.as_ptr().cast(), r.len_bytes(), r.len());
                show(&c.responses, r, data, len_bytes, len, NO_SAMPLE_HEADER, response)?;
            }
            got.write(got_one);
        }
        Ok(())
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
        let c = unsafe { live(client, CLIENT, true) }?;
        drop(take(&c.responses, id, NO_RESPONSE)?);
        Ok(())
    })
}

/// Drops the pending response `pending`: its request is abandoned if its stream has
/// not ended (responses still coming are released), and its request slot is free for
/// another request.
///
/// # Safety
/// `client` is a pointer from [`iox_client_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_client_drop_pending(client: *mut IoxClient, pending: u64) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { live(client, CLIENT, true) }?;
        drop(take(&c.pending, pending, NO_PENDING)?);
        Ok(())
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
        let c = unsafe { live(client, CLIENT, true) }?;
        let fd = non_null(fd, "fd")?;
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { fd.write(c.client.as_fd().as_raw_fd()) };
        Ok(())
    })
}

/// Drops the client with its loans, pending responses and responses.
///
/// # Safety
/// `client` is NULL or a pointer from [`iox_client_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_client_drop(client: *mut IoxClient) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { drop_handle(client, CLIENT, true) })
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
        // SAFETY: the caller's contract.
        let service = &unsafe { live(service, RR_SERVICE, false) }?.service;
        let make = || {
            let server = service
                .server_builder()
                .pin_memory(pin_memory)
                .create()
                .map_err(|e| fail(IoxStatus::PortCreateFailed, e))?;
            Ok(IoxServer {
                loans: RefCell::new(Slots::new()),
                requests: RefCell::new(Slots::new()),
                server,
            })
        };
        // SAFETY: the caller's contract.
        unsafe { hand_out(out, SERVER, make) }
    })
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
        let s = unsafe { live(server, SERVER, true) }?;
        let (request, got) = (non_null(request, "request")?, non_null(got, "got")?);
        let taken = match timeout(timeout_ns) {
            None => s.server.receive_raw(),
            Some(t) => s.server.receive_timeout_raw(t),
        }
        .map_err(|e| fail(IoxStatus::ReceiveFailed, e))?;
        let got_one = taken.is_some();
        // SAFETY: the caller's contract; neither is NULL (checked).
        unsafe {
            if let Some(r) = taken {
                let (data, len_bytes, len) = (r.as_ptr().cast(), r.len_bytes(), r.len());
                show(
                    &s.requests,
                    Box::new(r),
                    data,
                    len_bytes,
                    len,
                    NO_SAMPLE_HEADER,
                    request,
                )?;
            }
            got.write(got_one);
        }
        Ok(())
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
        let s = unsafe { live(server, SERVER, true) }?;
        let loan = non_null(loan, "loan")?;
        let bytes = bytes(len_bytes)?;
        let requests = s.requests.borrow();
        let Some(active) = requests.get(request) else {
            return refuse(IoxStatus::StaleHandle, NO_REQUEST);
        };
        let active: &RawActiveRequest = active;
        // SAFETY: only the lifetime changes: the request is boxed (its address does not
        // move when the table grows) and is dropped only after this loan (see the module
        // docs), so the loan never outlives what it borrows.
        let active: &'static RawActiveRequest = unsafe { &*std::ptr::from_ref(active) };
        let mut raw = active
            .loan_raw(bytes)
            .map_err(|e| fail(IoxStatus::LoanFailed, e))?;
        let (data, len) = (raw.as_mut_ptr().cast(), raw.len_bytes());
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { lend(&s.loans, (request, raw), data, len, NO_LOAN_HEADER, loan) }
    })
}

/// Sends the response loan `id` to the client of its request. While the client's
/// response buffer (`max_response_buffer`) is full, this waits for the client to take
/// responses (sleeping in steps, watching that the client lives): a program that is
/// its own client must receive before it sends more than that. The loan id is stale
/// afterwards, whether the send succeeded or not.
///
/// # Safety
/// `server` is a pointer from [`iox_server_create`]; the loan's bytes were all written
/// with a valid value of the response type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_server_send(server: *mut IoxServer, id: u64) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = unsafe { live(server, SERVER, true) }?;
        let (_, raw) = take(&s.loans, id, NO_LOAN)?;
        // SAFETY: the caller's contract: every byte was written with a valid value.
        unsafe { raw.send() }.map_err(|e| fail(IoxStatus::SendFailed, e))
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
        let s = unsafe { live(server, SERVER, true) }?;
        drop(take(&s.loans, id, NO_LOAN)?);
        Ok(())
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
        let s = unsafe { live(server, SERVER, true) }?;
        if s.requests.borrow().get(request).is_none() {
            return refuse(IoxStatus::StaleHandle, NO_REQUEST);
        }
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
        drop(take(&s.requests, request, NO_REQUEST)?);
        Ok(())
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
        let s = unsafe { live(server, SERVER, true) }?;
        let fd = non_null(fd, "fd")?;
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { fd.write(s.server.as_fd().as_raw_fd()) };
        Ok(())
    })
}

/// Drops the server, finishing its active requests and discarding its loans.
///
/// # Safety
/// `server` is NULL or a pointer from [`iox_server_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_server_drop(server: *mut IoxServer) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { drop_handle(server, SERVER, true) })
}
