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

use iox_service::{EventId, EventService, Listener, Notifier};

use crate::handle::{Marked, marker};
use crate::service::{by_mode, named};
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
    };
    // SAFETY: the caller's contract; not NULL (checked).
    unsafe { options.write(defaults) };
}

/// An open event service (opaque); any thread.
pub struct IoxEventService {
    service: EventService,
}

/// A notifier (opaque): used from the thread that created it.
pub struct IoxNotifier {
    notifier: Notifier,
}

/// A listener (opaque): used from the thread that created it.
pub struct IoxListener {
    listener: Listener,
}

const EVENT_SERVICE: u64 = marker(b"iox-evs\0");
const NOTIFIER: u64 = marker(b"iox-ntf\0");
const LISTENER: u64 = marker(b"iox-lsn\0");

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
        if options.is_null() || out.is_null() {
            return fail(IoxStatus::NullPointer, "options and out must not be NULL");
        }
        // SAFETY: the caller's contract; not NULL (checked).
        let o = unsafe { &*options };
        // SAFETY: the caller's contract.
        let service = match unsafe { named(name, o.root) } {
            Ok(s) => s,
            Err(status) => return status,
        };
        let mut b = service.event();
        if o.max_notifiers != 0 {
            b = b.max_notifiers(o.max_notifiers);
        }
        if o.max_listeners != 0 {
            b = b.max_listeners(o.max_listeners);
        }
        if o.event_id_max != 0 {
            b = b.event_id_max(o.event_id_max);
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
                let p = Marked::into_raw(EVENT_SERVICE, IoxEventService { service });
                // SAFETY: the caller's contract; not NULL (checked).
                unsafe { out.write(p.cast()) };
                IoxStatus::Ok
            }
            Err(status) => status,
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
    guard(|| unsafe { Marked::<IoxEventService>::drop_raw(service.cast(), EVENT_SERVICE, false) })
}

/// # Safety
/// `service` is a pointer from [`iox_event_open`] (checked as far as the crate docs say).
unsafe fn event_service<'a>(service: *mut IoxEventService) -> Result<&'a EventService, IoxStatus> {
    // SAFETY: the caller's contract.
    unsafe { Marked::<IoxEventService>::get(service.cast(), EVENT_SERVICE, false) }.map(|m| &m.inner.service)
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
        if out.is_null() {
            return fail(IoxStatus::NullPointer, "out must not be NULL");
        }
        // SAFETY: the caller's contract.
        let service = match unsafe { event_service(service) } {
            Ok(s) => s,
            Err(status) => return status,
        };
        match service.notifier_builder().create() {
            Ok(notifier) => {
                let p = Marked::into_raw(NOTIFIER, IoxNotifier { notifier });
                // SAFETY: the caller's contract; not NULL (checked).
                unsafe { out.write(p.cast()) };
                IoxStatus::Ok
            }
            Err(e) => fail(IoxStatus::PortCreateFailed, e),
        }
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
        let n = match unsafe { Marked::<IoxNotifier>::get(notifier.cast(), NOTIFIER, true) } {
            Ok(m) => &m.inner.notifier,
            Err(status) => return status,
        };
        match n.notify_with_custom_event_id(EventId::new(event_id)) {
            Ok(reached) => {
                if !listeners.is_null() {
                    // SAFETY: the caller's contract; not NULL (checked).
                    unsafe { listeners.write(reached as u64) };
                }
                IoxStatus::Ok
            }
            Err(e) => fail(IoxStatus::NotifyFailed, e),
        }
    })
}

/// Drops the notifier (from its own thread).
///
/// # Safety
/// `notifier` is NULL or a pointer from [`iox_notifier_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_notifier_drop(notifier: *mut IoxNotifier) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { Marked::<IoxNotifier>::drop_raw(notifier.cast(), NOTIFIER, true) })
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
        if out.is_null() {
            return fail(IoxStatus::NullPointer, "out must not be NULL");
        }
        // SAFETY: the caller's contract.
        let service = match unsafe { event_service(service) } {
            Ok(s) => s,
            Err(status) => return status,
        };
        match service.listener_builder().create() {
            Ok(listener) => {
                let p = Marked::into_raw(LISTENER, IoxListener { listener });
                // SAFETY: the caller's contract; not NULL (checked).
                unsafe { out.write(p.cast()) };
                IoxStatus::Ok
            }
            Err(e) => fail(IoxStatus::PortCreateFailed, e),
        }
    })
}

/// # Safety
/// `listener` is a pointer from [`iox_listener_create`].
unsafe fn listener<'a>(listener: *mut IoxListener) -> Result<&'a Listener, IoxStatus> {
    // SAFETY: the caller's contract.
    unsafe { Marked::<IoxListener>::get(listener.cast(), LISTENER, true) }.map(|m| &m.inner.listener)
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
        let l = match unsafe { self::listener(listener) } {
            Ok(l) => l,
            Err(status) => return status,
        };
        if event_id.is_null() || got.is_null() {
            return fail(IoxStatus::NullPointer, "event_id and got must not be NULL");
        }
        let taken = if timeout_ns == 0 {
            l.try_wait_one()
        } else {
            l.timed_wait_one(Duration::from_nanos(timeout_ns))
        };
        match taken {
            Ok(id) => {
                // SAFETY: the caller's contract; neither is NULL (checked).
                unsafe {
                    got.write(id.is_some());
                    if let Some(id) = id {
                        event_id.write(id.as_value());
                    }
                }
                IoxStatus::Ok
            }
            Err(e) => fail(IoxStatus::ListenFailed, e),
        }
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
        let l = match unsafe { self::listener(listener) } {
            Ok(l) => l,
            Err(status) => return status,
        };
        if fd.is_null() {
            return fail(IoxStatus::NullPointer, "fd must not be NULL");
        }
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { fd.write(l.as_fd().as_raw_fd()) };
        IoxStatus::Ok
    })
}

/// Drops the listener (from its own thread).
///
/// # Safety
/// `listener` is NULL or a pointer from [`iox_listener_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_listener_drop(listener: *mut IoxListener) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { Marked::<IoxListener>::drop_raw(listener.cast(), LISTENER, true) })
}
