//! Publish-subscribe services from C: the payload type described by name, size and
//! alignment (a value, or a slice of such elements), the service's settings, and the
//! three ways to open one.
//!
//! The service records that type in its static config exactly as a Rust program's
//! `#[derive(ZeroCopySafe)]` type with `#[iox(type_name = "...")]` records it, so a C or
//! C++ program and a Rust program with the same name, size, alignment and bit-pattern
//! validity share one service; any difference is refused when the second one opens
//! (the message names both types).
//!
//! Ports of such a service move the payload as bytes (`iox_service`'s raw ports): the C
//! side writes a value of the described type into a loan and reads it from a sample.
//!
//! A service may carry a per-sample user header beside the payload
//! (`IoxPubSubOptions::user_header`, described like a value payload): loans and samples
//! then also give the header's address and length (`header`, `header_len`), at the
//! chunk's start, with the payload after it where a Rust program's typed ports put it
//! (`iox_service::user_header`). Decision: C declares no field layout for a header, as
//! for payloads; a service a Rust program created with one opens from C all the same
//! (a side without a layout is not compared field by field).

use std::ffi::{CString, c_char, c_void};
use std::path::PathBuf;
use std::time::Duration;

use iox_service::{
    CreateError, HeaderType, MemoryType, OpenError, OpenOrCreateError, PayloadType, PubSubBuilder,
    PubSubService, Schema, Service,
};

use crate::access::IoxAccessPolicy;
pub(crate) use crate::args::{read_options, text};
use crate::attributes::{AttributeSettings, CAttributes, IoxAttribute};
use crate::fields::declared_schema;
pub use crate::fields::{IoxField, IoxType};
use crate::handle::{drop_handle, hand_out, live, marker, non_null, put};
use crate::pages::IoxPageSize;
use crate::status::{IoxStatus, fail, guard, refuse};

/// Open the service if it exists, else create it.
pub const IOX_OPEN_OR_CREATE: u32 = 0;
/// Open an existing service only.
pub const IOX_OPEN: u32 = 1;
/// Create the service; fails if it exists.
pub const IOX_CREATE: u32 = 2;

/// The payload type and settings of a publish-subscribe service. Fill it with
/// [`iox_pubsub_options_init`], then set the type and what else differs. Zero in a
/// limit means the service's default (on open: whatever the service has).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoxPubSubOptions {
    /// The root directory of the service's files; NULL: `IOX_ROOT`, else `/dev/shm`.
    pub root: *const c_char,
    /// The payload type.
    pub payload: IoxType,
    /// Memory type code (0 CPU, 1 page-locked, 2 CUDA-pinned, 3 CUDA device memory, >= 0x100
    /// users' own).
    pub memory_type: u32,
    /// Whether `memory_type` is set (on open: must match then).
    pub memory_type_set: bool,
    /// Most publishers (0: default).
    pub max_publishers: u32,
    /// Most subscribers (0: default).
    pub max_subscribers: u32,
    /// Samples each subscriber's queue holds (0: default).
    pub subscriber_buffer: u32,
    /// Samples a late subscriber gets on connecting (0: none).
    pub history: u32,
    /// Loans one publisher may hold at once (0: default).
    pub max_loans: u32,
    /// Samples one subscriber may hold at once (0: default).
    pub max_held: u32,
    /// How long to wait for a service another process is creating or removing, in
    /// milliseconds (0: default, 10 s).
    pub timeout_ms: u64,
    /// Attributes to record when this call creates the service (`attribute_count` of
    /// them; NULL with 0: none). Not compared with an existing service's on open.
    pub attributes: *const IoxAttribute,
    /// How many `attributes` there are.
    pub attribute_count: usize,
    /// Attributes an existing service must have when this call opens it
    /// (`required_attribute_count` of them; NULL with 0: none); an entry whose `value`
    /// is NULL requires only the key. A call that may create must record them too.
    pub required_attributes: *const IoxAttribute,
    /// How many `required_attributes` there are.
    pub required_attribute_count: usize,
    /// What a send does when a subscriber's queue is full: `IOX_OVERFLOW_DEFAULT` (0;
    /// when creating: drop that subscriber's oldest sample; when opening: whatever the
    /// service has), `IOX_OVERFLOW_DROP_OLDEST` or `IOX_OVERFLOW_REJECT` (that
    /// subscriber does not get the sample; the send says `IOX_STATUS_QUEUE_FULL`). An
    /// opener that sets it requires the service to have it.
    pub overflow: u32,
    /// The per-sample user header (a camera frame's stamp and size in front of its
    /// pixels): `name` NULL (the default) for none; else one value (`slice` false)
    /// whose name, size, alignment and `any_bit_pattern` must equal what every other
    /// program of the service declares (a Rust program's `.user_header::<H>()`), or
    /// the open fails naming both headers.
    pub user_header: IoxType,
    /// A host tensor service: the payload is a slice of numbers and every sample carries
    /// its tensor (element type, shape, strides; see `iox_tensor_publisher_create`).
    /// Recorded when creating; an opener that sets it requires it.
    pub tensors: bool,
    /// Unix permissions of the service's files when this call creates it (0: the
    /// default, 0600, its creator's uid only; e.g. 0660 for its group, 0666 for
    /// everyone, within which `access` then decides; bits of 0777 including 0600). Not
    /// compared on open.
    pub permissions: u32,
    /// Who may publish and who may only subscribe (NULL, the default: no policy, every
    /// process the permissions admit may publish). Recorded when this call creates the
    /// service, this process's uid its creator; an opener that sets it requires the
    /// service to have the same rules. A reader's publisher is refused with
    /// `IOX_STATUS_NOT_A_PUBLISHER`, a process the policy does not name is refused at
    /// open with `IOX_STATUS_NOT_IN_ACCESS_POLICY`. See `IoxAccessPolicy`.
    pub access: *const IoxAccessPolicy,
    /// The pages the pool lives on, an `IoxPageSize` (a plain integer here, so that any
    /// value C writes is defined; one that is none is `IOX_STATUS_INVALID_ARGUMENT`):
    /// `IOX_PAGE_SIZE_BASE` (4 KiB, the default), `IOX_PAGE_SIZE_HUGE_2MIB` or
    /// `IOX_PAGE_SIZE_HUGE_1GIB` (reserved huge pages; creating on too few is
    /// `IOX_STATUS_NO_HUGE_PAGES`, its message saying how to reserve them), or
    /// `IOX_PAGE_SIZE_TRANSPARENT` (best effort). Used only where `page_size_set` is true.
    pub page_size: u32,
    /// Whether `page_size` is set (on open: the service must have it then).
    pub page_size_set: bool,
}

/// `IoxPubSubOptions::overflow`: the service's policy (the default when creating).
pub const IOX_OVERFLOW_DEFAULT: u32 = 0;
/// `IoxPubSubOptions::overflow`: a full queue drops that subscriber's oldest sample.
pub const IOX_OVERFLOW_DROP_OLDEST: u32 = 1;
/// `IoxPubSubOptions::overflow`: a full queue keeps its samples; that subscriber does
/// not get the new one, and the send says `IOX_STATUS_QUEUE_FULL`.
pub const IOX_OVERFLOW_REJECT: u32 = 2;

/// A port's view of its service's pool: where it is mapped in this process, how long,
/// its memory type, and its chunks (for a caller's own registrations: RDMA, Vulkan,
/// ...).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoxPoolInfo {
    /// The payload mapping's first byte in this process.
    pub base: *mut c_void,
    /// The mapping's length in bytes (whole pages).
    pub len: u64,
    /// The memory type's code (0 CPU, 1 page-locked, 2 CUDA-pinned, 3 CUDA device memory,
    /// >= 0x100 users').
    pub memory_type: u32,
    /// How many size classes the pool has.
    pub classes: u32,
    /// Chunks over all classes.
    pub total_chunks: u64,
    /// Chunks not in use now (a snapshot).
    pub free_chunks: u64,
    /// The pages the pool lives on (see `IoxPubSubOptions::page_size`).
    pub page_size: IoxPageSize,
    /// Their size in bytes (4096, 2 MiB, 1 GiB; 2 MiB for transparent huge pages): `len`
    /// is a multiple of it.
    pub page_bytes: u64,
}

impl IoxPoolInfo {
    pub(crate) fn of(info: &iox_service::PoolInfo) -> Self {
        Self {
            base: info.base as *mut c_void,
            len: info.len as u64,
            memory_type: u32::from(info.memory_type.code()),
            classes: info.classes.len() as u32,
            total_chunks: info.total_chunks(),
            free_chunks: info.free_chunks(),
            page_size: crate::pages::of(info.page_size),
            page_bytes: info.page_size.bytes() as u64,
        }
    }
}

/// No type yet (`name` NULL).
pub(crate) const NO_TYPE: IoxType = IoxType {
    name: std::ptr::null(),
    size: 0,
    alignment: 0,
    any_bit_pattern: false,
    slice: false,
    max_slice_len: 0,
    fields: std::ptr::null(),
    field_count: 0,
};

/// The default options: no type yet (`payload.name` NULL), everything else the service's
/// defaults. Does nothing if `options` is NULL.
///
/// # Safety
/// `options` is NULL or points to writable memory for an `IoxPubSubOptions`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_pubsub_options_init(options: *mut IoxPubSubOptions) {
    if options.is_null() {
        return;
    }
    let defaults = IoxPubSubOptions {
        root: std::ptr::null(),
        payload: NO_TYPE,
        memory_type: 0,
        memory_type_set: false,
        max_publishers: 0,
        max_subscribers: 0,
        subscriber_buffer: 0,
        history: 0,
        max_loans: 0,
        max_held: 0,
        timeout_ms: 0,
        attributes: std::ptr::null(),
        attribute_count: 0,
        required_attributes: std::ptr::null(),
        required_attribute_count: 0,
        overflow: IOX_OVERFLOW_DEFAULT,
        user_header: NO_TYPE,
        tensors: false,
        permissions: 0,
        access: std::ptr::null(),
        page_size: IoxPageSize::Base as u32,
        page_size_set: false,
    };
    // SAFETY: the caller's contract; not NULL (checked).
    unsafe { options.write(defaults) };
}

/// An open publish-subscribe service (opaque). Drop it with
/// [`iox_pubsub_service_drop`]; its ports keep the service open on their own.
pub struct IoxPubSubService {
    pub(crate) service: PubSubService<[u8]>,
    /// Its attributes as C strings (see `attributes`).
    attributes: CAttributes,
    /// Its access policy as text (see `access`), `None` without one.
    pub(crate) access: Option<CString>,
}

pub(crate) const SERVICE: u64 = marker(b"iox-svc\0");

/// The payload type `t` describes (`what` names it in messages).
///
/// # Safety
/// `t.name` is NULL or a NUL-terminated string.
pub(crate) unsafe fn payload_type(t: &IoxType, what: &str) -> Result<PayloadType, IoxStatus> {
    // SAFETY: the caller's contract.
    let name = unsafe { text(t.name, &format!("{what}.name")) }?.to_string();
    if t.size == 0 && !t.slice {
        return refuse(
            IoxStatus::InvalidArgument,
            format!("{what}.size is 0: a value type has a size"),
        );
    }
    if !t.alignment.is_power_of_two() {
        return refuse(
            IoxStatus::InvalidArgument,
            format!("{what}.alignment {} is not a power of two", t.alignment),
        );
    }
    let (size, alignment, invalid_bit_patterns) = (t.size, t.alignment, !t.any_bit_pattern);
    Ok(if t.slice {
        PayloadType::Slice {
            element: name,
            size,
            alignment,
            invalid_bit_patterns,
        }
    } else {
        PayloadType::Typed {
            type_name: name,
            size,
            alignment,
            invalid_bit_patterns,
        }
    })
}

/// The user header `t` describes (`what` names it in messages), with its declared
/// fields' layout: `None` if its name is NULL; refused if it claims to be a slice.
///
/// # Safety
/// `t.name` is NULL or a NUL-terminated string; `t.fields` as
/// [`declared_schema`] requires.
pub(crate) unsafe fn header_type(t: &IoxType, what: &str) -> Result<Option<HeaderType>, IoxStatus> {
    if t.name.is_null() {
        return Ok(None);
    }
    if t.slice {
        return refuse(
            IoxStatus::InvalidArgument,
            format!(
                "{what}.slice is set: a user header is one value (set slice false and size to its sizeof)"
            ),
        );
    }
    // SAFETY: the caller's contract.
    let identity = unsafe { payload_type(t, what) }?;
    // SAFETY: the caller's contract.
    let schema = unsafe { declared_schema(t, what) }?;
    Ok(Some(HeaderType { identity, schema }))
}

/// The schema of a payload whose element is one of Rust's numbers by name and size
/// (`"f32"`, 4 bytes): what a Rust program of `[f32]` or `f32` records, so tools read
/// it and a device service of it is a tensor service (`iox_service::tensor`). Other
/// types record none (C has no field layout to give).
fn number_schema(payload: &PayloadType) -> Option<Schema> {
    let (name, size) = match payload {
        PayloadType::Typed { type_name, size, .. } => (type_name, *size),
        PayloadType::Slice { element, size, .. } => (element, *size),
    };
    [
        Schema::Bool,
        Schema::U8,
        Schema::U16,
        Schema::U32,
        Schema::U64,
        Schema::I8,
        Schema::I16,
        Schema::I32,
        Schema::I64,
        Schema::F16,
        Schema::BF16,
        Schema::F32,
        Schema::F64,
    ]
    .into_iter()
    .find(|s| s.to_string() == *name && s.size() == Some(size))
}

/// The service `name` under `root` (NULL: `IOX_ROOT`, else `/dev/shm`), its name
/// checked.
///
/// # Safety
/// `name` and `root` are NULL or NUL-terminated strings.
pub(crate) unsafe fn named(name: *const c_char, root: *const c_char) -> Result<Service, IoxStatus> {
    // SAFETY: the caller's contract.
    let name = unsafe { text(name, "name") }?;
    let service = Service::named(name).map_err(|e| fail(IoxStatus::InvalidArgument, e))?;
    if root.is_null() {
        return Ok(service);
    }
    // SAFETY: the caller's contract.
    let root = unsafe { text(root, "options.root") }?;
    Ok(service.root(PathBuf::from(root)))
}

/// A service builder's three ways to open, with the library's errors (`by_mode` turns
/// them into statuses and messages for C).
pub(crate) trait Opening: Sized {
    type Service;
    fn open_or_create(self) -> Result<Self::Service, OpenOrCreateError>;
    fn open(self) -> Result<Self::Service, OpenError>;
    fn create(self) -> Result<Self::Service, CreateError>;
}

/// An open error for C: `IOX_STATUS_NOT_IN_ACCESS_POLICY` when the service's access
/// policy does not name this process, else `IOX_STATUS_OPEN_FAILED`; the message
/// recorded, with where C and C++ declare what differs when the library's message names
/// Rust's and Python's ways (a user header, an access policy).
fn open_failed(e: &OpenError) -> IoxStatus {
    const ACCESS: &str = "from C: IoxPubSubOptions.access; from C++: iox::Options::access";
    match e {
        OpenError::IncompatibleUserHeader(_) => fail(
            IoxStatus::OpenFailed,
            format!("{e} (from C: IoxPubSubOptions.user_header; from C++: iox::PubSub<T, Header>)"),
        ),
        OpenError::NotInAccessPolicy { .. } => fail(IoxStatus::NotInAccessPolicy, format!("{e} ({ACCESS})")),
        OpenError::IncompatibleAccess { .. } => fail(IoxStatus::OpenFailed, format!("{e} ({ACCESS})")),
        e => fail(IoxStatus::OpenFailed, e),
    }
}

/// A create error for C: `IOX_STATUS_NO_HUGE_PAGES` when the machine has too few huge
/// pages free for the pool (the message says how many are needed and how to reserve
/// them), else `IOX_STATUS_OPEN_FAILED`; the message recorded.
fn create_failed(e: CreateError) -> IoxStatus {
    let status = match e {
        CreateError::HugePages { .. } => IoxStatus::NoHugePages,
        _ => IoxStatus::OpenFailed,
    };
    fail(status, e)
}

/// Opens with the one of `builder`'s ways that `mode` names; its error as
/// `IOX_STATUS_OPEN_FAILED` (or a more precise status, see `open_failed` and
/// `create_failed`) with the message.
pub(crate) fn by_mode<B: Opening>(builder: B, mode: u32) -> Result<B::Service, IoxStatus> {
    match mode {
        IOX_OPEN_OR_CREATE => builder.open_or_create().map_err(|e| match e {
            OpenOrCreateError::Open(o) => open_failed(&o),
            OpenOrCreateError::Create(c) => create_failed(c),
            e => fail(IoxStatus::OpenFailed, e),
        }),
        IOX_OPEN => builder.open().map_err(|e| open_failed(&e)),
        IOX_CREATE => builder.create().map_err(create_failed),
        other => refuse(
            IoxStatus::InvalidArgument,
            format!("open mode {other} is none of IOX_OPEN_OR_CREATE (0), IOX_OPEN (1), IOX_CREATE (2)"),
        ),
    }
}

/// The builders' own three ways, for `by_mode`.
macro_rules! opening {
    ($($builder:ty => $service:ty),* $(,)?) => {$(
        impl crate::service::Opening for $builder {
            type Service = $service;
            fn open_or_create(self) -> Result<$service, iox_service::OpenOrCreateError> {
                <$builder>::open_or_create(self)
            }
            fn open(self) -> Result<$service, iox_service::OpenError> {
                <$builder>::open(self)
            }
            fn create(self) -> Result<$service, iox_service::CreateError> {
                <$builder>::create(self)
            }
        }
    )*};
}
pub(crate) use opening;

opening!(PubSubBuilder<[u8]> => PubSubService<[u8]>);

/// A limit from C: 0 is the default (`None`).
pub(crate) fn limit(n: u32) -> Option<u32> {
    (n != 0).then_some(n)
}

/// Opens, creates, or opens-or-creates (`mode`: `IOX_OPEN_OR_CREATE`, `IOX_OPEN`,
/// `IOX_CREATE`) the publish-subscribe service `name` with `options`; on success
/// `*out` is the service. On failure `*out` is untouched and [`crate::status::iox_last_error`]
/// says why (e.g. that an existing service records another type, naming both).
///
/// # Safety
/// `name` is a NUL-terminated string; `options` points to an `IoxPubSubOptions` whose
/// strings are NULL or NUL-terminated, whose types' `fields` are NULL or
/// `field_count` readable `IoxField`s (strings NUL-terminated, `nested` NULL or
/// readable types of the same kind), whose attribute arrays hold their counts, and
/// whose `access` is NULL or a readable `IoxAccessPolicy` whose arrays hold their
/// counts; `out` points to writable memory for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_pubsub_open(
    name: *const c_char,
    mode: u32,
    options: *const IoxPubSubOptions,
    out: *mut *mut IoxPubSubService,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract (a readable options struct whose strings are
        // NULL or NUL-terminated, a NUL-terminated name).
        let (o, service, payload, header) = unsafe {
            let o = read_options(options)?;
            (
                o,
                named(name, o.root)?,
                payload_type(&o.payload, "options.payload")?,
                header_type(&o.user_header, "options.user_header")?,
            )
        };
        // SAFETY: the caller's contract (the type's fields readable, as documented).
        let schema = match unsafe { declared_schema(&o.payload, "options.payload") }? {
            Some(declared) => Some(declared),
            None => number_schema(&payload),
        };
        // SAFETY: the ports of this service (publisher.rs, subscriber.rs, held.rs) loan
        // only with `loan_raw`, receive only with `receive_raw`/`receive_timeout_raw`,
        // and hand C the payload's and the header's addresses only (`as_ptr`,
        // `header_ptr`), as `raw_payload_type` and `raw_user_header` require; the device
        // ports (device.rs) hand out device addresses only.
        let mut b = unsafe { service.publish_subscribe::<[u8]>().raw_payload_type(payload) };
        if let Some(schema) = schema {
            b = b.payload_schema(schema);
        }
        if let Some(h) = header {
            // SAFETY: as above: the header is moved only through `header_ptr`.
            b = unsafe { b.raw_user_header(h) };
        }
        if o.memory_type_set {
            let t = u16::try_from(o.memory_type)
                .map_err(|_| format!("memory type {} is not a 16-bit code", o.memory_type))
                .and_then(|code| MemoryType::from_code(code).map_err(|e| e.to_string()))
                .map_err(|e| fail(IoxStatus::InvalidArgument, e))?;
            b = b.memory_type(t);
        }
        macro_rules! limits {
            ($($field:ident),*) => {$(
                if let Some(n) = limit(o.$field) {
                    b = b.$field(n);
                }
            )*};
        }
        limits!(
            max_publishers,
            max_subscribers,
            subscriber_buffer,
            history,
            max_loans,
            max_held
        );
        if o.payload.slice && o.payload.max_slice_len != 0 {
            b = b.max_slice_len(o.payload.max_slice_len as usize);
        }
        match o.overflow {
            IOX_OVERFLOW_DEFAULT => {}
            IOX_OVERFLOW_DROP_OLDEST => b = b.overflow(iox_service::Overflow::DropOldest),
            IOX_OVERFLOW_REJECT => b = b.overflow(iox_service::Overflow::Reject),
            other => {
                return refuse(
                    IoxStatus::InvalidArgument,
                    format!(
                        "options.overflow is {other}: IOX_OVERFLOW_DEFAULT (0), IOX_OVERFLOW_DROP_OLDEST (1) or IOX_OVERFLOW_REJECT (2)"
                    ),
                );
            }
        }
        if o.timeout_ms != 0 {
            b = b.timeout(Duration::from_millis(o.timeout_ms));
        }
        if o.tensors {
            b = b.tensors(true);
        }
        if o.permissions != 0 {
            b = b.permissions(o.permissions);
        }
        // SAFETY: the caller's contract (NULL or a readable policy whose arrays hold
        // their counts).
        if let Some(policy) = unsafe { crate::access::read(o.access) }? {
            b = b.access(policy);
        }
        if o.page_size_set {
            b = b.page_size(crate::pages::read(o.page_size, "options.page_size")?);
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
            hand_out(out, SERVICE, || {
                by_mode(b, mode).map(|service| IoxPubSubService {
                    attributes: CAttributes::of(service.attributes()),
                    access: crate::access::describe(service.access_policy()),
                    service,
                })
            })
        }
    })
}

/// Closes this handle of the service (the service's files go when its last handle and
/// port anywhere are gone). Any thread.
///
/// # Safety
/// `service` is NULL or a pointer from [`iox_pubsub_open`] (checked as far as the crate
/// docs say).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_pubsub_service_drop(service: *mut IoxPubSubService) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { drop_handle(service, SERVICE, false) })
}

/// How many publishers and subscribers the service has now, in any process (a
/// snapshot): what a program polls, bounded in time, to wait for the other side.
/// Either out pointer may be NULL.
///
/// # Safety
/// `service` is a pointer from [`iox_pubsub_open`]; `publishers` and `subscribers` are
/// NULL or point to writable memory for a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_pubsub_port_counts(
    service: *mut IoxPubSubService,
    publishers: *mut u64,
    subscribers: *mut u64,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let (p, s) = unsafe { live(service, SERVICE, false) }?.service.port_counts();
        // SAFETY: the caller's contract: NULL or writable.
        unsafe {
            put(publishers, p as u64);
            put(subscribers, s as u64);
        }
        Ok(())
    })
}

/// How many attributes the publish-subscribe service's creator recorded: `*count`.
///
/// # Safety
/// `service` is a pointer from [`iox_pubsub_open`]; `count` points to writable memory for a
/// `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_pubsub_attribute_count(
    service: *mut IoxPubSubService,
    count: *mut usize,
) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { live(service, SERVICE, false)?.attributes.count(count) })
}

/// Attribute `index` (0 to count - 1, sorted by key) of the publish-subscribe service: `*key` and
/// `*value` (either out pointer may be NULL). The strings stay valid until the service
/// handle is dropped. An index out of range is `IOX_STATUS_INVALID_ARGUMENT`.
///
/// # Safety
/// `service` is a pointer from [`iox_pubsub_open`]; `key` and `value` are NULL or point to
/// writable memory for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_pubsub_attribute(
    service: *mut IoxPubSubService,
    index: usize,
    key: *mut *const c_char,
    value: *mut *const c_char,
) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { live(service, SERVICE, false)?.attributes.at(index, key, value) })
}

/// The value of the publish-subscribe service's attribute `key`: `*value`, or NULL if it has none.
/// The string stays valid until the service handle is dropped.
///
/// # Safety
/// `service` is a pointer from [`iox_pubsub_open`]; `key` is a NUL-terminated string;
/// `value` points to writable memory for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_pubsub_attribute_get(
    service: *mut IoxPubSubService,
    key: *const c_char,
    value: *mut *const c_char,
) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { live(service, SERVICE, false)?.attributes.get(key, value) })
}

/// The publish-subscribe service's access policy as text: `*policy` is NULL for a service
/// without one, else e.g. `"publish: uid 1000 (creator), uid 1001; read: uid 1002, gid
/// 50"`. The string stays valid until the service handle is dropped.
///
/// # Safety
/// `service` is a pointer from `iox_pubsub_open`; `policy` points to writable memory for
/// a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_pubsub_access_policy(
    service: *mut IoxPubSubService,
    policy: *mut *const c_char,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let service = unsafe { live(service, SERVICE, false) }?;
        let out = non_null(policy, "policy")?;
        let text = service.access.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { out.write(text) };
        Ok(())
    })
}
