//! The C side of ROS 2's client library as this crate calls it: the structures it
//! passes (`repr(C)`, laid out as the installed headers lay them out) and the functions
//! it loads from `librcl`, `librmw` and `librcutils` at run time.
//!
//! Layout: every structure here has the size and field offsets of its C declaration in
//! ROS 2 Kilted (`rcl` 10, `rmw` 7); `tests/layout.rs` compiles the installed headers
//! and compares, so an install whose structures differ fails that test instead of
//! corrupting memory. Option structures the gateway only passes through
//! (`rcl_node_options_t`, `rcl_publisher_options_t`, `rcl_subscription_options_t`) are
//! [`Opaque`] buffers larger than the C type, filled by rcl's own `*_get_default_options`;
//! only the fields at the offsets below are written here.

use std::ffi::{c_char, c_int, c_void};

use libloading::Library;

/// `rcl_ret_t`.
pub type Ret = i32;
/// `RCL_RET_OK`.
pub const RET_OK: Ret = 0;
/// `RCL_RET_TIMEOUT`.
pub const RET_TIMEOUT: Ret = 2;
/// `RCL_RET_SUBSCRIPTION_TAKE_FAILED`: nothing to take.
pub const RET_SUBSCRIPTION_TAKE_FAILED: Ret = 401;
/// `RCL_RET_CLIENT_TAKE_FAILED`: no response to take.
pub const RET_CLIENT_TAKE_FAILED: Ret = 501;
/// `RCL_RET_SERVICE_TAKE_FAILED`: no request to take.
pub const RET_SERVICE_TAKE_FAILED: Ret = 601;

/// `rcutils_allocator_t` (its function pointers are only passed back to rcl).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Allocator {
    allocate: *mut c_void,
    deallocate: *mut c_void,
    reallocate: *mut c_void,
    zero_allocate: *mut c_void,
    state: *mut c_void,
}

/// `rmw_time_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RmwTime {
    /// Seconds.
    pub sec: u64,
    /// Nanoseconds.
    pub nsec: u64,
}

/// `rmw_qos_profile_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QosProfile {
    /// `RMW_QOS_POLICY_HISTORY_*`.
    pub history: u32,
    /// Queue depth.
    pub depth: usize,
    /// `RMW_QOS_POLICY_RELIABILITY_*`.
    pub reliability: u32,
    /// `RMW_QOS_POLICY_DURABILITY_*`.
    pub durability: u32,
    /// Deadline.
    pub deadline: RmwTime,
    /// Lifespan.
    pub lifespan: RmwTime,
    /// `RMW_QOS_POLICY_LIVELINESS_*`.
    pub liveliness: u32,
    /// Liveliness lease.
    pub liveliness_lease_duration: RmwTime,
    /// Whether ROS's `rt/` prefix is left off.
    pub avoid_ros_namespace_conventions: bool,
}

/// A C option structure filled by rcl (module docs): 512 bytes, 8-aligned.
#[repr(C, align(8))]
pub struct Opaque(pub [u8; 512]);

/// Where a subscription's `rmw_subscription_options.ignore_local_publications` is in
/// `rcl_subscription_options_t`.
pub const SUBSCRIPTION_IGNORE_LOCAL_OFFSET: usize = 136;

/// `rcutils_uint8_array_t` (`rcl_serialized_message_t`).
#[repr(C)]
pub struct Uint8Array {
    /// The bytes.
    pub buffer: *mut u8,
    /// How many are the message.
    pub buffer_length: usize,
    /// How many are allocated.
    pub buffer_capacity: usize,
    /// Who allocated them.
    pub allocator: Allocator,
}

/// `rcutils_string_array_t`.
#[repr(C)]
pub struct StringArray {
    /// Count.
    pub size: usize,
    /// The strings.
    pub data: *mut *mut c_char,
    allocator: Allocator,
}

/// `rcl_names_and_types_t`.
#[repr(C)]
pub struct NamesAndTypes {
    /// The names.
    pub names: StringArray,
    /// Per name, its types.
    pub types: *mut StringArray,
}

/// `rmw_topic_endpoint_info_t`.
#[repr(C)]
pub struct EndpointInfo {
    /// The endpoint's node.
    pub node_name: *const c_char,
    /// Its namespace.
    pub node_namespace: *const c_char,
    /// Its type (`sensor_msgs/msg/Image`).
    pub topic_type: *const c_char,
    type_hash_version: u8,
    type_hash: [u8; 32],
    endpoint_type: u32,
    /// Its gid.
    pub endpoint_gid: [u8; 16],
    /// Its QoS.
    pub qos_profile: QosProfile,
}

/// `rmw_topic_endpoint_info_array_t`.
#[repr(C)]
pub struct EndpointInfoArray {
    /// Count.
    pub size: usize,
    /// The endpoints.
    pub info_array: *mut EndpointInfo,
}

/// `rcl_context_t`.
#[repr(C)]
pub struct Context {
    global_arguments: *mut c_void,
    impl_: *mut c_void,
    instance_id: u64,
}

/// `rcl_node_t`.
#[repr(C)]
pub struct Node {
    context: *mut c_void,
    impl_: *mut c_void,
}

/// `rcl_init_options_t`, `rcl_publisher_t`, `rcl_subscription_t`: one pointer.
#[repr(C)]
pub struct Handle {
    impl_: *mut c_void,
}

/// `rcl_wait_set_t`: after `rcl_wait`, the entries of the ready entities are non-null.
#[repr(C)]
pub struct WaitSet {
    /// Subscriptions.
    pub subscriptions: *const *const Handle,
    /// Their count.
    pub size_of_subscriptions: usize,
    guard_conditions: *const *const c_void,
    size_of_guard_conditions: usize,
    timers: *const *const c_void,
    size_of_timers: usize,
    /// Service clients.
    pub clients: *const *const Handle,
    /// Their count.
    pub size_of_clients: usize,
    /// Service servers.
    pub services: *const *const Handle,
    /// Their count.
    pub size_of_services: usize,
    events: *const *const c_void,
    size_of_events: usize,
    impl_: *mut c_void,
}

/// `rmw_request_id_t`: which request a response answers.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct RequestId {
    writer_guid: [u8; 16],
    /// The client's sequence number.
    pub sequence_number: i64,
}

/// `rcutils_error_string_t`.
#[repr(C)]
pub struct ErrorString(pub [c_char; 1024]);

/// Sizes and offsets of the structures above, for `tests/layout.rs`: (C expression, Rust value).
#[doc(hidden)]
pub fn layout_facts() -> Vec<(&'static str, usize)> {
    use std::mem::{offset_of, size_of};
    vec![
        ("sizeof(rcutils_allocator_t)", size_of::<Allocator>()),
        ("sizeof(rmw_qos_profile_t)", size_of::<QosProfile>()),
        (
            "offsetof(rmw_qos_profile_t, depth)",
            offset_of!(QosProfile, depth),
        ),
        (
            "offsetof(rmw_qos_profile_t, reliability)",
            offset_of!(QosProfile, reliability),
        ),
        (
            "offsetof(rmw_qos_profile_t, durability)",
            offset_of!(QosProfile, durability),
        ),
        (
            "offsetof(rmw_qos_profile_t, lifespan)",
            offset_of!(QosProfile, lifespan),
        ),
        (
            "offsetof(rmw_qos_profile_t, liveliness)",
            offset_of!(QosProfile, liveliness),
        ),
        (
            "offsetof(rmw_qos_profile_t, avoid_ros_namespace_conventions)",
            offset_of!(QosProfile, avoid_ros_namespace_conventions),
        ),
        ("offsetof(rcl_publisher_options_t, qos)", 0),
        ("offsetof(rcl_subscription_options_t, qos)", 0),
        (
            "offsetof(rcl_subscription_options_t, rmw_subscription_options.ignore_local_publications)",
            SUBSCRIPTION_IGNORE_LOCAL_OFFSET,
        ),
        ("sizeof(rcl_node_options_t) <= 512", 1),
        ("sizeof(rcl_publisher_options_t) <= 512", 1),
        ("sizeof(rcl_subscription_options_t) <= 512", 1),
        // Returned by value through a hidden pointer (bigger than two registers), at
        // most 8-aligned: what a function returning `Opaque` expects.
        (
            "sizeof(rcl_node_options_t) > 16 && _Alignof(rcl_node_options_t) <= 8",
            1,
        ),
        (
            "sizeof(rcl_publisher_options_t) > 16 && _Alignof(rcl_publisher_options_t) <= 8",
            1,
        ),
        (
            "sizeof(rcl_subscription_options_t) > 16 && _Alignof(rcl_subscription_options_t) <= 8",
            1,
        ),
        (
            "sizeof(rcl_service_options_t) > 16 && _Alignof(rcl_service_options_t) <= 8",
            1,
        ),
        (
            "sizeof(rcl_client_options_t) > 16 && _Alignof(rcl_client_options_t) <= 8",
            1,
        ),
        ("_Alignof(rmw_message_info_t) <= 8", 1),
        (
            "offsetof(rcutils_uint8_array_t, buffer)",
            offset_of!(Uint8Array, buffer),
        ),
        (
            "offsetof(rcutils_uint8_array_t, buffer_length)",
            offset_of!(Uint8Array, buffer_length),
        ),
        (
            "offsetof(rcutils_uint8_array_t, buffer_capacity)",
            offset_of!(Uint8Array, buffer_capacity),
        ),
        (
            "offsetof(rcutils_string_array_t, data)",
            offset_of!(StringArray, data),
        ),
        (
            "offsetof(rmw_topic_endpoint_info_t, node_namespace)",
            offset_of!(EndpointInfo, node_namespace),
        ),
        (
            "offsetof(rcl_wait_set_t, subscriptions)",
            offset_of!(WaitSet, subscriptions),
        ),
        ("sizeof(rcl_serialized_message_t)", size_of::<Uint8Array>()),
        ("sizeof(rcutils_string_array_t)", size_of::<StringArray>()),
        ("sizeof(rcl_names_and_types_t)", size_of::<NamesAndTypes>()),
        (
            "offsetof(rcl_names_and_types_t, types)",
            offset_of!(NamesAndTypes, types),
        ),
        ("sizeof(rmw_topic_endpoint_info_t)", size_of::<EndpointInfo>()),
        (
            "offsetof(rmw_topic_endpoint_info_t, topic_type)",
            offset_of!(EndpointInfo, topic_type),
        ),
        (
            "offsetof(rmw_topic_endpoint_info_t, endpoint_type)",
            offset_of!(EndpointInfo, endpoint_type),
        ),
        (
            "offsetof(rmw_topic_endpoint_info_t, endpoint_gid)",
            offset_of!(EndpointInfo, endpoint_gid),
        ),
        (
            "offsetof(rmw_topic_endpoint_info_t, qos_profile)",
            offset_of!(EndpointInfo, qos_profile),
        ),
        (
            "sizeof(rmw_topic_endpoint_info_array_t)",
            size_of::<EndpointInfoArray>(),
        ),
        ("sizeof(rcl_context_t)", size_of::<Context>()),
        ("sizeof(rcl_node_t)", size_of::<Node>()),
        ("sizeof(rcl_init_options_t)", size_of::<Handle>()),
        ("sizeof(rcl_publisher_t)", size_of::<Handle>()),
        ("sizeof(rcl_subscription_t)", size_of::<Handle>()),
        ("sizeof(rcl_wait_set_t)", size_of::<WaitSet>()),
        (
            "offsetof(rcl_wait_set_t, size_of_subscriptions)",
            offset_of!(WaitSet, size_of_subscriptions),
        ),
        ("offsetof(rcl_wait_set_t, clients)", offset_of!(WaitSet, clients)),
        (
            "offsetof(rcl_wait_set_t, services)",
            offset_of!(WaitSet, services),
        ),
        (
            "offsetof(rcl_wait_set_t, size_of_services)",
            offset_of!(WaitSet, size_of_services),
        ),
        ("sizeof(rmw_request_id_t)", size_of::<RequestId>()),
        (
            "offsetof(rmw_request_id_t, sequence_number)",
            offset_of!(RequestId, sequence_number),
        ),
        ("offsetof(rcl_service_options_t, qos)", 0),
        ("offsetof(rcl_client_options_t, qos)", 0),
        ("sizeof(rcl_service_options_t) <= 512", 1),
        ("sizeof(rcl_client_options_t) <= 512", 1),
        ("sizeof(rcl_service_t)", size_of::<Handle>()),
        ("sizeof(rcl_client_t)", size_of::<Handle>()),
        ("RCL_RET_SERVICE_TAKE_FAILED", RET_SERVICE_TAKE_FAILED as usize),
        ("RCL_RET_CLIENT_TAKE_FAILED", RET_CLIENT_TAKE_FAILED as usize),
        ("sizeof(rmw_message_info_t) <= 512", 1),
        ("sizeof(rcutils_error_string_t)", size_of::<ErrorString>()),
        ("RCL_RET_TIMEOUT", RET_TIMEOUT as usize),
        (
            "RCL_RET_SUBSCRIPTION_TAKE_FAILED",
            RET_SUBSCRIPTION_TAKE_FAILED as usize,
        ),
        (
            "RMW_QOS_POLICY_HISTORY_KEEP_LAST",
            super::HISTORY_KEEP_LAST as usize,
        ),
        (
            "RMW_QOS_POLICY_HISTORY_KEEP_ALL",
            super::HISTORY_KEEP_ALL as usize,
        ),
        ("RMW_QOS_POLICY_RELIABILITY_RELIABLE", super::RELIABLE as usize),
        (
            "RMW_QOS_POLICY_RELIABILITY_BEST_EFFORT",
            super::BEST_EFFORT as usize,
        ),
        (
            "RMW_QOS_POLICY_DURABILITY_TRANSIENT_LOCAL",
            super::TRANSIENT_LOCAL as usize,
        ),
        ("RMW_QOS_POLICY_DURABILITY_VOLATILE", super::VOLATILE as usize),
    ]
}

macro_rules! api {
    ($($lib:ident { $($name:ident = $sym:literal: fn($($arg:ty),*) $(-> $ret:ty)?;)* })*) => {
        /// The functions the gateway calls, loaded from the ROS install.
        pub struct Api {
            $($(pub $name: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*)*
            _libs: Vec<Library>,
        }

        impl Api {
            /// Loads `librcutils`, `librmw` and `librcl` with `open` and takes every
            /// function from them.
            pub fn load(open: &dyn Fn(&str) -> Result<Library, String>) -> Result<Self, String> {
                $(
                    let $lib = open(concat!("lib", stringify!($lib), ".so"))?;
                )*
                // SAFETY: each symbol is declared above with its C signature as the
                // installed headers declare it (compared by hand; tests/layout.rs checks
                // the structures they pass and that the option structures returned by
                // value come back through a hidden pointer, as `Opaque` does), and the
                // libraries are kept loaded in `_libs` for as long as the pointers are
                // held.
                let api = unsafe {
                    Self {
                        $($($name: *$lib
                            .get::<unsafe extern "C" fn($($arg),*) $(-> $ret)?>(concat!($sym, "\0").as_bytes())
                            .map_err(|e| format!("{} has no {}: {e}", concat!("lib", stringify!($lib), ".so"), $sym))?,)*)*
                        _libs: vec![$($lib),*],
                    }
                };
                Ok(api)
            }
        }
    };
}

api! {
    rcutils {
        get_default_allocator = "rcutils_get_default_allocator": fn() -> Allocator;
        get_error_string = "rcutils_get_error_string": fn() -> ErrorString;
        reset_error = "rcutils_reset_error": fn();
        uint8_array_init = "rcutils_uint8_array_init": fn(*mut Uint8Array, usize, *const Allocator) -> Ret;
        uint8_array_fini = "rcutils_uint8_array_fini": fn(*mut Uint8Array) -> Ret;
    }
    rmw {
        endpoint_info_array_fini = "rmw_topic_endpoint_info_array_fini": fn(*mut EndpointInfoArray, *mut Allocator) -> Ret;
    }
    rcl {
        init_options_init = "rcl_init_options_init": fn(*mut Handle, Allocator) -> Ret;
        init_options_fini = "rcl_init_options_fini": fn(*mut Handle) -> Ret;
        init = "rcl_init": fn(c_int, *const *const c_char, *const Handle, *mut Context) -> Ret;
        shutdown = "rcl_shutdown": fn(*mut Context) -> Ret;
        context_fini = "rcl_context_fini": fn(*mut Context) -> Ret;
        node_get_default_options = "rcl_node_get_default_options": fn() -> Opaque;
        node_options_fini = "rcl_node_options_fini": fn(*mut Opaque) -> Ret;
        node_init = "rcl_node_init": fn(*mut Node, *const c_char, *const c_char, *mut Context, *const Opaque) -> Ret;
        node_fini = "rcl_node_fini": fn(*mut Node) -> Ret;
        node_get_name = "rcl_node_get_name": fn(*const Node) -> *const c_char;
        publisher_get_default_options = "rcl_publisher_get_default_options": fn() -> Opaque;
        publisher_init = "rcl_publisher_init": fn(*mut Handle, *const Node, *const c_void, *const c_char, *const Opaque) -> Ret;
        publisher_fini = "rcl_publisher_fini": fn(*mut Handle, *mut Node) -> Ret;
        publish_serialized = "rcl_publish_serialized_message": fn(*const Handle, *const Uint8Array, *mut c_void) -> Ret;
        subscription_get_default_options = "rcl_subscription_get_default_options": fn() -> Opaque;
        subscription_init = "rcl_subscription_init": fn(*mut Handle, *const Node, *const c_void, *const c_char, *const Opaque) -> Ret;
        subscription_fini = "rcl_subscription_fini": fn(*mut Handle, *mut Node) -> Ret;
        take_serialized = "rcl_take_serialized_message": fn(*const Handle, *mut Uint8Array, *mut Opaque, *mut c_void) -> Ret;
        wait_set_init = "rcl_wait_set_init": fn(*mut WaitSet, usize, usize, usize, usize, usize, usize, *mut Context, Allocator) -> Ret;
        wait_set_fini = "rcl_wait_set_fini": fn(*mut WaitSet) -> Ret;
        wait_set_clear = "rcl_wait_set_clear": fn(*mut WaitSet) -> Ret;
        wait_set_add_subscription = "rcl_wait_set_add_subscription": fn(*mut WaitSet, *const Handle, *mut usize) -> Ret;
        wait = "rcl_wait": fn(*mut WaitSet, i64) -> Ret;
        topic_names_and_types = "rcl_get_topic_names_and_types": fn(*const Node, *mut Allocator, bool, *mut NamesAndTypes) -> Ret;
        names_and_types_fini = "rcl_names_and_types_fini": fn(*mut NamesAndTypes) -> Ret;
        publishers_info = "rcl_get_publishers_info_by_topic": fn(*const Node, *mut Allocator, *const c_char, bool, *mut EndpointInfoArray) -> Ret;
        subscriptions_info = "rcl_get_subscriptions_info_by_topic": fn(*const Node, *mut Allocator, *const c_char, bool, *mut EndpointInfoArray) -> Ret;
        service_names_and_types = "rcl_get_service_names_and_types": fn(*const Node, *mut Allocator, *mut NamesAndTypes) -> Ret;
        service_names_and_types_by_node = "rcl_get_service_names_and_types_by_node": fn(*const Node, *mut Allocator, *const c_char, *const c_char, *mut NamesAndTypes) -> Ret;
        service_get_default_options = "rcl_service_get_default_options": fn() -> Opaque;
        service_init = "rcl_service_init": fn(*mut Handle, *const Node, *const c_void, *const c_char, *const Opaque) -> Ret;
        service_fini = "rcl_service_fini": fn(*mut Handle, *mut Node) -> Ret;
        take_request = "rcl_take_request": fn(*const Handle, *mut RequestId, *mut c_void) -> Ret;
        send_response = "rcl_send_response": fn(*const Handle, *mut RequestId, *mut c_void) -> Ret;
        client_get_default_options = "rcl_client_get_default_options": fn() -> Opaque;
        client_init = "rcl_client_init": fn(*mut Handle, *const Node, *const c_void, *const c_char, *const Opaque) -> Ret;
        client_fini = "rcl_client_fini": fn(*mut Handle, *mut Node) -> Ret;
        send_request = "rcl_send_request": fn(*const Handle, *const c_void, *mut i64) -> Ret;
        take_response = "rcl_take_response": fn(*const Handle, *mut RequestId, *mut c_void) -> Ret;
        server_is_available = "rcl_service_server_is_available": fn(*const Node, *const Handle, *mut bool) -> Ret;
        wait_set_add_service = "rcl_wait_set_add_service": fn(*mut WaitSet, *const Handle, *mut usize) -> Ret;
        wait_set_add_client = "rcl_wait_set_add_client": fn(*mut WaitSet, *const Handle, *mut usize) -> Ret;
        // The middleware's (de)serialisation, found through rcl's own dependencies
        // (rmw_implementation, or the rmw rcl was linked with).
        serialize = "rmw_serialize": fn(*const c_void, *const c_void, *mut Uint8Array) -> Ret;
        deserialize = "rmw_deserialize": fn(*const Uint8Array, *const c_void, *mut c_void) -> Ret;
    }
}
