//! Events from C: an event service, notifiers that signal an event id, listeners that
//! wait for ids (sleeping) or hand out a readiness descriptor for the caller's own loop
//! or an `IoxWaitSet`.
//!
//! Notifiers and listeners are ports: used from the thread that created them (see
//! `handle`). A listener's ids are taken one per call, so none is lost to a short
//! buffer: wait with a timeout for the first, then with 0 until none is left.

use std::ffi::c_char;
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use iox_service::{EventBuilder, EventId, EventService, Listener, Notifier};

use crate::args::read_options;
use crate::attributes::{AttributeSettings, CAttributes};
use crate::handle::{drop_handle, hand_out, live, marker, non_null, put, timeout};
use crate::service::{by_mode, limit, named};
use crate::status::{IoxStatus, fail, guard};

/// The settings of an event service. Fill it with [`iox_event_options_init`], then set
/// what differs; zero means the default (on open: whatever the service has).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoxEventOptions {
    /// The root directory of the service's files; NULL: `IOX_ROOT`, else `/dev/shm`.
    pub root: *const c_char,
    /// Most notifiers (0: default).
    pub max_notifiers: u32,
    /// Most listeners (0: default).
    pub max_listeners: u32,
    /// The largest event id (0: default).
    pub event_id_max: u32,
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

/// The default options. Does nothing if `options` is NULL.
///
/// # Safety
/// `options` is NULL or points to writable memory for an `IoxEventOptions`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_event_options_init(options: *mut IoxEventOptions) {
    if options.is_null() {
        return;
    }
    let defaults = IoxEventOptions {
        root: std::ptr::null(),
        max_notifiers: 0,
        max_listeners: 0,
        event_id_max: 0,
        timeout_ms: 0,
        attributes: std::ptr::null(),
        attribute_count: 0,
        required_attributes: std::ptr::null(),
        required_attribute_count: 0,
    };
    // SAFETY: the caller's contract; not NULL (checked).
    unsafe { options.write(defaults) };
}

/// An open event service (opaque); any thread.
pub struct IoxEventService {
    service: EventService,
    /// Its attributes as C strings (see `attributes`).
    attributes: CAttributes,
}

/// A notifier (opaque): used from the thread that created it.
pub struct IoxNotifier {
    notifier: Notifier,
}

/// A listener (opaque): used from the thread that created it.
pub struct IoxListener {
    pub(crate) listener: Listener,
}

const EVENT_SERVICE: u64 = marker(b"iox-evs\0");
const NOTIFIER: u64 = marker(b"iox-ntf\0");
pub(crate) const LISTENER: u64 = marker(b"iox-lsn\0");

crate::service::opening!(EventBuilder => EventService);

/// Opens, creates, or opens-or-creates (`mode` as for `iox_pubsub_open`) the event
/// service `name`; on success `*out` is the service.
///
/// # Safety
/// `name` is a NUL-terminated string; `options` points to an `IoxEventOptions` whose
/// `root` is NULL or NUL-terminated; `out` points to writable memory for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_event_open(
    name: *const c_char,
    mode: u32,
    options: *const IoxEventOptions,
    out: *mut *mut IoxEventService,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract (readable options, NUL-terminated strings).
        let (o, service) = unsafe {
            let o = read_options(options)?;
            (o, named(name, o.root)?)
        };
        let mut b = service.event();
        if let Some(n) = limit(o.max_notifiers) {
            b = b.max_notifiers(n);
        }
        if let Some(n) = limit(o.max_listeners) {
            b = b.max_listeners(n);
        }
        if let Some(n) = limit(o.event_id_max) {
            b = b.event_id_max(n);
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
        // SAFETY: the caller's contract.
        unsafe {
            hand_out(out, EVENT_SERVICE, || {
                by_mode(b, mode).map(|service| IoxEventService {
                    attributes: CAttributes::of(service.attributes()),
                    service,
                })
            })
        }
    })
}

/// Closes this handle of the event service. Any thread.
///
/// # Safety
/// `service` is NULL or a pointer from [`iox_event_open`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_event_service_drop(service: *mut IoxEventService) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { drop_handle(service, EVENT_SERVICE, false) })
}

/// How many attributes the event service's creator recorded: `*count`.
///
/// # Safety
/// `service` is a pointer from [`iox_event_open`]; `count` points to writable memory for a
/// `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_event_attribute_count(
    service: *mut IoxEventService,
    count: *mut usize,
) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { live(service, EVENT_SERVICE, false)?.attributes.count(count) })
}

/// Attribute `index` (0 to count - 1, sorted by key) of the event service: `*key` and
/// `*value` (either out pointer may be NULL). The strings stay valid until the service
/// handle is dropped. An index out of range is `IOX_STATUS_INVALID_ARGUMENT`.
///
/// # Safety
/// `service` is a pointer from [`iox_event_open`]; `key` and `value` are NULL or point to
/// writable memory for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_event_attribute(
    service: *mut IoxEventService,
    index: usize,
    key: *mut *const c_char,
    value: *mut *const c_char,
) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe {
        live(service, EVENT_SERVICE, false)?
            .attributes
            .at(index, key, value)
    })
}

/// The value of the event service's attribute `key`: `*value`, or NULL if it has none.
/// The string stays valid until the service handle is dropped.
///
/// # Safety
/// `service` is a pointer from [`iox_event_open`]; `key` is a NUL-terminated string;
/// `value` points to writable memory for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_event_attribute_get(
    service: *mut IoxEventService,
    key: *const c_char,
    value: *mut *const c_char,
) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { live(service, EVENT_SERVICE, false)?.attributes.get(key, value) })
}

/// Creates a notifier of `service`; `*out` is the notifier.
///
/// # Safety
/// `service` is a pointer from [`iox_event_open`]; `out` points to writable memory for
/// a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_notifier_create(
    service: *mut IoxEventService,
    out: *mut *mut IoxNotifier,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let service = &unsafe { live(service, EVENT_SERVICE, false) }?.service;
        let make = || {
            let notifier = service
                .notifier_builder()
                .create()
                .map_err(|e| fail(IoxStatus::PortCreateFailed, e))?;
            Ok(IoxNotifier { notifier })
        };
        // SAFETY: the caller's contract.
        unsafe { hand_out(out, NOTIFIER, make) }
    })
}

/// Signals event `event_id` to every listener; `*listeners` (if not NULL) is how many
/// it reached.
///
/// # Safety
/// `notifier` is a pointer from [`iox_notifier_create`]; `listeners` is NULL or points
/// to writable memory for a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_notifier_notify(
    notifier: *mut IoxNotifier,
    event_id: u32,
    listeners: *mut u64,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let n = &unsafe { live(notifier, NOTIFIER, true) }?.notifier;
        let reached = n
            .notify_with_custom_event_id(EventId::new(event_id))
            .map_err(|e| fail(IoxStatus::NotifyFailed, e))?;
        // SAFETY: the caller's contract: NULL or writable.
        unsafe { put(listeners, reached as u64) };
        Ok(())
    })
}

/// Drops the notifier (from its own thread).
///
/// # Safety
/// `notifier` is NULL or a pointer from [`iox_notifier_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_notifier_drop(notifier: *mut IoxNotifier) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { drop_handle(notifier, NOTIFIER, true) })
}

/// Creates a listener of `service`; `*out` is the listener.
///
/// # Safety
/// `service` is a pointer from [`iox_event_open`]; `out` points to writable memory for
/// a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_listener_create(
    service: *mut IoxEventService,
    out: *mut *mut IoxListener,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let service = &unsafe { live(service, EVENT_SERVICE, false) }?.service;
        let make = || {
            let listener = service
                .listener_builder()
                .create()
                .map_err(|e| fail(IoxStatus::PortCreateFailed, e))?;
            Ok(IoxListener { listener })
        };
        // SAFETY: the caller's contract.
        unsafe { hand_out(out, LISTENER, make) }
    })
}

/// Takes one pending event id, waiting up to `timeout_ns` nanoseconds (0: do not wait)
/// without spinning. `*got` says whether `*event_id` was set.
///
/// # Safety
/// `listener` is a pointer from [`iox_listener_create`]; `event_id` and `got` point to
/// writable memory for a `uint32_t` and a `bool`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_listener_wait(
    listener: *mut IoxListener,
    timeout_ns: u64,
    event_id: *mut u32,
    got: *mut bool,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let l = &unsafe { live(listener, LISTENER, true) }?.listener;
        let (event_id, got) = (non_null(event_id, "event_id")?, non_null(got, "got")?);
        let taken = match timeout(timeout_ns) {
            None => l.try_wait_one(),
            Some(t) => l.timed_wait_one(t),
        }
        .map_err(|e| fail(IoxStatus::ListenFailed, e))?;
        // SAFETY: the caller's contract; neither is NULL (checked).
        unsafe {
            got.write(taken.is_some());
            if let Some(id) = taken {
                event_id.write(id.as_value());
            }
        }
        Ok(())
    })
}

/// The listener's readiness descriptor: readable while an event id is pending, for
/// `poll`/`epoll` or an `IoxWaitSet`. Owned by the listener (do not close it); valid
/// until the listener is dropped.
///
/// # Safety
/// `listener` is a pointer from [`iox_listener_create`]; `fd` points to writable memory
/// for an `int`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_listener_fd(listener: *mut IoxListener, fd: *mut i32) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let l = &unsafe { live(listener, LISTENER, true) }?.listener;
        let fd = non_null(fd, "fd")?;
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { fd.write(l.as_fd().as_raw_fd()) };
        Ok(())
    })
}

/// Drops the listener (from its own thread).
///
/// # Safety
/// `listener` is NULL or a pointer from [`iox_listener_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_listener_drop(listener: *mut IoxListener) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { drop_handle(listener, LISTENER, true) })
}
