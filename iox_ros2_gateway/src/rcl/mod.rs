//! ROS 2 through its C client library (`rcl`), loaded at run time from the install the
//! gateway finds (see [`crate::install`]): one context and one node per gateway, and
//! publishers and subscriptions of serialized (CDR) messages of any installed type,
//! found by name in the type's `rosidl_typesupport_c` library. Nothing is generated or
//! linked per message type, and the gateway builds without ROS installed.
//!
//! Threads: rcl lets different threads publish on different publishers and take from
//! different subscriptions at once; what it does not allow concurrently on one node
//! (creating and destroying entities, graph queries) is serialised here
//! (`entities`). Handles are boxed so the addresses a wait set holds stay put.
//!
//! Invariants: a [`Ros`] outlives every publisher, subscription and wait set made from
//! it (they hold an `Arc` of it), and finalises its node and context last.

mod ffi;
mod service;
mod wait;

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use libloading::Library;

pub use ffi::QosProfile;
#[doc(hidden)]
pub use ffi::layout_facts;
use ffi::{Api, Handle, Opaque, RET_OK};
pub use service::{ServiceClient, ServiceServer};
pub use wait::{Ready, WaitSet};

/// `RMW_QOS_POLICY_HISTORY_KEEP_LAST`.
pub const HISTORY_KEEP_LAST: u32 = 1;
/// `RMW_QOS_POLICY_HISTORY_KEEP_ALL`.
pub const HISTORY_KEEP_ALL: u32 = 2;
/// `RMW_QOS_POLICY_RELIABILITY_RELIABLE`.
pub const RELIABLE: u32 = 1;
/// `RMW_QOS_POLICY_RELIABILITY_BEST_EFFORT`.
pub const BEST_EFFORT: u32 = 2;
/// `RMW_QOS_POLICY_DURABILITY_TRANSIENT_LOCAL`.
pub const TRANSIENT_LOCAL: u32 = 1;
/// `RMW_QOS_POLICY_DURABILITY_VOLATILE`.
pub const VOLATILE: u32 = 2;

/// A failed call into ROS 2.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RosError {
    /// The libraries could not be loaded.
    #[error(
        "cannot load ROS 2 ({0}); source the ROS environment (setup.bash) or give --ros-prefix with the install's prefix"
    )]
    Load(String),
    /// A type's support library or function is missing.
    #[error("ROS type {name} cannot be used: {why}")]
    Type {
        /// The type.
        name: String,
        /// What is missing.
        why: String,
    },
    /// An rcl call failed.
    #[error("{call} failed (rcl error {code}): {message}")]
    Call {
        /// The function.
        call: &'static str,
        /// Its return code.
        code: i32,
        /// rcl's message.
        message: String,
    },
    /// A name with a NUL byte.
    #[error("{0:?} contains a NUL byte")]
    Nul(String),
}

/// One endpoint of a topic, as the ROS graph reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Its node's name.
    pub node: String,
    /// Its node's namespace.
    pub namespace: String,
    /// Its type (`sensor_msgs/msg/Image`).
    pub type_name: String,
    /// Its QoS.
    pub qos: QosProfile,
}

/// A ROS 2 participant: the loaded libraries, a context and a node (module docs).
pub struct Ros {
    api: Api,
    _preloaded: Vec<libloading::os::unix::Library>,
    dirs: Vec<PathBuf>,
    context: Box<ffi::Context>,
    node: Box<ffi::Node>,
    node_name: String,
    entities: Mutex<()>,
    types: Mutex<HashMap<String, (usize, Arc<Library>)>>,
}

// SAFETY: the context and node are passed concurrently only to rcl functions its
// headers call thread-safe for distinct entities (publish on distinct publishers, take
// on distinct subscriptions); everything rcl marks "Thread-Safe: No" on the node
// (entity creation and destruction, graph queries) is serialised by `entities`; the
// type support pointers are immutable static data of libraries kept loaded.
unsafe impl Send for Ros {}
// SAFETY: as above.
unsafe impl Sync for Ros {}

fn cstring(s: &str) -> Result<CString, RosError> {
    CString::new(s).map_err(|_| RosError::Nul(s.to_owned()))
}

/// Opens library `name` from the first of `dirs` holding it, else by the loader's path.
fn open_in(dirs: &[PathBuf], name: &str) -> Result<Library, String> {
    let path = dirs
        .iter()
        .map(|d| d.join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(name));
    // SAFETY: loading a ROS 2 library runs its initialisers, which only register
    // type support and logging; nothing else in the process depends on their absence.
    unsafe { Library::new(&path) }.map_err(|e| format!("{}: {e}", path.display()))
}

impl Ros {
    /// Loads ROS 2 from the libraries in `dirs` (or the loader's path), after the
    /// libraries `preload` with their symbols global (see `crate::install`),
    /// initialises a context with the ROS arguments `ros_args` (`--ros-args -r ...`,
    /// parsed by rcl itself: remappings, `__node`, `__ns`, parameters, log levels) and
    /// creates the node `node_name` (namespace `/`), which those arguments may rename.
    pub fn start(
        dirs: &[PathBuf],
        preload: &[PathBuf],
        node_name: &str,
        ros_args: &[String],
    ) -> Result<Arc<Ros>, RosError> {
        let mut preloaded = Vec::new();
        for path in preload {
            use libloading::os::unix::{Library as UnixLibrary, RTLD_GLOBAL, RTLD_NOW};
            // SAFETY: a shared runtime library (libpython) whose initialisers only
            // set up its own state; nothing calls into it but the libraries that
            // need its symbols.
            let lib = unsafe { UnixLibrary::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }
                .map_err(|e| RosError::Load(format!("{}: {e}", path.display())))?;
            preloaded.push(lib);
        }
        let api = Api::load(&|name| open_in(dirs, name)).map_err(RosError::Load)?;
        // SAFETY: all-zero is the zero-initialised state of these rcl structures
        // (`rcl_get_zero_initialized_*`), which their init functions expect.
        let (mut options, mut context, mut node): (Handle, Box<ffi::Context>, Box<ffi::Node>) = unsafe {
            (
                std::mem::zeroed(),
                Box::new(std::mem::zeroed()),
                Box::new(std::mem::zeroed()),
            )
        };
        let name = cstring(node_name)?;
        // argv as rcl_init reads it: the program, then the ROS arguments.
        let argv: Vec<CString> = std::iter::once("iox-ros2")
            .chain(ros_args.iter().map(String::as_str))
            .map(cstring)
            .collect::<Result<_, _>>()?;
        let argv_ptrs: Vec<*const c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        // SAFETY: the calls follow rcl's init sequence with the structures above, each
        // initialised by the call before it; failures return before the next.
        unsafe {
            let allocator = (api.get_default_allocator)();
            let fail = |api: &Api, call, code| Err(call_error(api, call, code));
            let rc = (api.init_options_init)(&mut options, allocator);
            if rc != RET_OK {
                return fail(&api, "rcl_init_options_init", rc);
            }
            let rc = (api.init)(
                argv_ptrs.len() as c_int,
                argv_ptrs.as_ptr(),
                &options,
                &mut *context,
            );
            (api.init_options_fini)(&mut options);
            if rc != RET_OK {
                return fail(&api, "rcl_init", rc);
            }
            let mut node_options = (api.node_get_default_options)();
            let rc = (api.node_init)(
                &mut *node,
                name.as_ptr(),
                c"/".as_ptr(),
                &mut *context,
                &node_options,
            );
            (api.node_options_fini)(&mut node_options);
            if rc != RET_OK {
                let e = call_error(&api, "rcl_node_init", rc);
                (api.shutdown)(&mut *context);
                (api.context_fini)(&mut *context);
                return Err(e);
            }
        }
        // The name the node has (`-r __node:=...` renames it): the gateway knows its own
        // endpoints by it.
        // SAFETY: the node was initialised above; rcl returns its name, a NUL-terminated
        // string it owns for the node's life, or null.
        let actual = unsafe { (api.node_get_name)(&*node) };
        let node_name = if actual.is_null() {
            node_name.to_owned()
        } else {
            // SAFETY: non-null, NUL-terminated, alive while the node is (copied now).
            unsafe { std::ffi::CStr::from_ptr(actual) }
                .to_string_lossy()
                .into_owned()
        };
        Ok(Arc::new(Ros {
            api,
            _preloaded: preloaded,
            dirs: dirs.to_vec(),
            context,
            node,
            node_name,
            entities: Mutex::new(()),
            types: Mutex::new(HashMap::new()),
        }))
    }

    /// The node's name.
    pub fn node_name(&self) -> &str {
        &self.node_name
    }

    fn error(&self, call: &'static str, code: i32) -> RosError {
        call_error(&self.api, call, code)
    }

    fn lock_entities(&self) -> std::sync::MutexGuard<'_, ()> {
        self.entities
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The type support of message type `name` (`pkg/msg/Type`), loaded once.
    fn type_support(&self, name: &str) -> Result<*const c_void, RosError> {
        let mut types = self
            .types
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((ts, _)) = types.get(name) {
            return Ok(*ts as *const c_void);
        }
        let err = |why: String| RosError::Type {
            name: name.to_owned(),
            why,
        };
        let parts: Vec<&str> = name.split('/').collect();
        let [pkg, kind, ty] = parts[..] else {
            return Err(err("not a type name of the form pkg/msg/Type".into()));
        };
        let lib = open_in(&self.dirs, &format!("lib{pkg}__rosidl_typesupport_c.so")).map_err(|e| {
            err(format!(
                "its package's type support is not installed ({e}; looked in {})",
                show_dirs(&self.dirs)
            ))
        })?;
        let what = match kind {
            "msg" => "message",
            "srv" => "service",
            _ => {
                return Err(err(
                    "not a message (pkg/msg/Type) or service (pkg/srv/Type)".into()
                ));
            }
        };
        let symbol = format!("rosidl_typesupport_c__get_{what}_type_support_handle__{pkg}__{kind}__{ty}\0");
        // SAFETY: rosidl's generated getter for a message type takes nothing and
        // returns a pointer to static data of its library, which `types` keeps loaded.
        let ts = unsafe {
            let get = lib
                .get::<unsafe extern "C" fn() -> *const c_void>(symbol.as_bytes())
                .map_err(|_| err(format!("{pkg}'s type support has no {ty}")))?;
            get()
        };
        if ts.is_null() {
            return Err(err("its type support returned nothing".into()));
        }
        types.insert(name.to_owned(), (ts as usize, Arc::new(lib)));
        Ok(ts)
    }

    /// Every topic with its types, as the graph knows it now.
    pub fn topics(&self) -> Result<Vec<(String, Vec<String>)>, RosError> {
        // SAFETY: the call fills the names-and-types it is given.
        unsafe {
            self.names_and_types("rcl_get_topic_names_and_types", |nat, allocator| {
                (self.api.topic_names_and_types)(&*self.node, allocator, false, nat)
            })
        }
    }

    /// Names and their types from a graph query `query`, which fills the (zeroed)
    /// names-and-types it is given.
    ///
    /// # Safety
    /// `query` fills the structure as rcl's graph queries do, or fails.
    unsafe fn names_and_types(
        &self,
        call: &'static str,
        query: impl FnOnce(*mut ffi::NamesAndTypes, *mut ffi::Allocator) -> ffi::Ret,
    ) -> Result<Vec<(String, Vec<String>)>, RosError> {
        let _guard = self.lock_entities();
        // SAFETY: a zeroed names-and-types is rcl's zero-initialised one; the query
        // fills it and `names_and_types_fini` frees it; the strings are read before.
        unsafe {
            let mut nat: ffi::NamesAndTypes = std::mem::zeroed();
            let mut allocator = (self.api.get_default_allocator)();
            let rc = query(&mut nat, &mut allocator);
            if rc != RET_OK {
                return Err(self.error(call, rc));
            }
            let mut out = Vec::with_capacity(nat.names.size);
            for i in 0..nat.names.size {
                let name = text(*nat.names.data.add(i));
                let types = &*nat.types.add(i);
                let types = (0..types.size).map(|j| text(*types.data.add(j))).collect();
                out.push((name, types));
            }
            (self.api.names_and_types_fini)(&mut nat);
            Ok(out)
        }
    }

    /// The publishers (or subscriptions) of `topic`.
    pub fn endpoints(&self, topic: &str, publishers: bool) -> Result<Vec<Endpoint>, RosError> {
        let topic_c = cstring(topic)?;
        let _guard = self.lock_entities();
        // SAFETY: as in `topics`: rcl fills a zeroed array, read before its fini.
        unsafe {
            let mut info: ffi::EndpointInfoArray = std::mem::zeroed();
            let mut allocator = (self.api.get_default_allocator)();
            let (f, call) = if publishers {
                (self.api.publishers_info, "rcl_get_publishers_info_by_topic")
            } else {
                (self.api.subscriptions_info, "rcl_get_subscriptions_info_by_topic")
            };
            let rc = f(&*self.node, &mut allocator, topic_c.as_ptr(), false, &mut info);
            if rc != RET_OK {
                return Err(self.error(call, rc));
            }
            let mut out = Vec::with_capacity(info.size);
            for i in 0..info.size {
                let e = &*info.info_array.add(i);
                out.push(Endpoint {
                    node: text(e.node_name),
                    namespace: text(e.node_namespace),
                    type_name: text(e.topic_type),
                    qos: e.qos_profile,
                });
            }
            (self.api.endpoint_info_array_fini)(&mut info, &mut allocator);
            Ok(out)
        }
    }

    /// A publisher of serialized `type_name` messages on `topic`.
    pub fn publisher(
        self: &Arc<Self>,
        topic: &str,
        type_name: &str,
        qos: &QosProfile,
    ) -> Result<Publisher, RosError> {
        let ts = self.type_support(type_name)?;
        let topic_c = cstring(topic)?;
        let _guard = self.lock_entities();
        // SAFETY: rcl's default options, their QoS (at offset 0, checked by
        // tests/layout.rs) replaced; a zeroed publisher is the zero-initialised one.
        unsafe {
            let mut options = (self.api.publisher_get_default_options)();
            std::ptr::write(options.0.as_mut_ptr().cast::<QosProfile>(), *qos);
            let mut handle: Box<Handle> = Box::new(std::mem::zeroed());
            let rc = (self.api.publisher_init)(&mut *handle, &*self.node, ts, topic_c.as_ptr(), &options);
            if rc != RET_OK {
                return Err(self.error("rcl_publisher_init", rc));
            }
            Ok(Publisher {
                ros: self.clone(),
                handle,
            })
        }
    }

    /// A subscription of serialized `type_name` messages on `topic` that never receives
    /// what this node's own publishers send.
    pub fn subscription(
        self: &Arc<Self>,
        topic: &str,
        type_name: &str,
        qos: &QosProfile,
    ) -> Result<Subscription, RosError> {
        let ts = self.type_support(type_name)?;
        let topic_c = cstring(topic)?;
        let _guard = self.lock_entities();
        // SAFETY: as in `publisher`; the ignore-local flag is a C `bool` at the offset
        // tests/layout.rs checks. The message buffer starts as rcutils' empty array.
        unsafe {
            let mut options = (self.api.subscription_get_default_options)();
            std::ptr::write(options.0.as_mut_ptr().cast::<QosProfile>(), *qos);
            options.0[ffi::SUBSCRIPTION_IGNORE_LOCAL_OFFSET] = 1;
            let mut handle: Box<Handle> = Box::new(std::mem::zeroed());
            let rc = (self.api.subscription_init)(&mut *handle, &*self.node, ts, topic_c.as_ptr(), &options);
            if rc != RET_OK {
                return Err(self.error("rcl_subscription_init", rc));
            }
            let mut buffer: ffi::Uint8Array = std::mem::zeroed();
            let allocator = (self.api.get_default_allocator)();
            let rc = (self.api.uint8_array_init)(&mut buffer, 0, &allocator);
            let subscription = Subscription {
                ros: self.clone(),
                handle,
                buffer,
                info: Box::new(Opaque([0; 512])),
            };
            if rc != RET_OK {
                return Err(self.error("rcutils_uint8_array_init", rc));
            }
            Ok(subscription)
        }
    }
}

impl Drop for Ros {
    fn drop(&mut self) {
        // SAFETY: every entity holds an Arc of this, so none is left; the node and
        // context were initialised by `start`.
        unsafe {
            (self.api.node_fini)(&mut *self.node);
            (self.api.shutdown)(&mut *self.context);
            (self.api.context_fini)(&mut *self.context);
        }
    }
}

/// rcl's error message for the failed `call`, reset afterwards.
fn call_error(api: &Api, call: &'static str, code: i32) -> RosError {
    // SAFETY: rcutils' error state is thread-local; the string is NUL-terminated.
    let message = unsafe {
        let s = (api.get_error_string)();
        let m = CStr::from_ptr(s.0.as_ptr()).to_string_lossy().into_owned();
        (api.reset_error)();
        m
    };
    RosError::Call { call, code, message }
}

/// The bytes of an rcutils array rcl or rmw filled (empty when it holds none).
///
/// # Safety
/// `a.buffer` holds `a.buffer_length` initialised bytes (or is null with length 0),
/// and is not changed while the slice lives.
unsafe fn bytes_of(a: &ffi::Uint8Array) -> &[u8] {
    if a.buffer.is_null() || a.buffer_length == 0 {
        return &[];
    }
    // SAFETY: the caller's promise; not null.
    unsafe { std::slice::from_raw_parts(a.buffer, a.buffer_length) }
}

/// After a `*_fini` in a `Drop`: a failure cannot be returned, so it is reported and
/// rcl's error state cleared (a later error then reads its own message).
fn fini_result(api: &Api, call: &'static str, rc: ffi::Ret) {
    if rc != RET_OK {
        eprintln!("iox-ros2: {}", call_error(api, call, rc));
    }
}

/// A C string rcl returned, as text (empty for null).
///
/// # Safety
/// `p` is null or a NUL-terminated string.
unsafe fn text(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the caller's promise.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn show_dirs(dirs: &[PathBuf]) -> String {
    if dirs.is_empty() {
        return "the loader's path".into();
    }
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A publisher of serialized messages.
pub struct Publisher {
    ros: Arc<Ros>,
    handle: Box<Handle>,
}

// SAFETY: an rcl publisher may be used from any thread; it is moved to the thread
// that publishes on it (not shared: no `Sync`).
unsafe impl Send for Publisher {}

impl Publisher {
    /// Publishes one CDR message (its encapsulation header first), as it is.
    pub fn publish(&self, cdr: &[u8]) -> Result<(), RosError> {
        // SAFETY: rcl only reads the message's bytes during the call; the allocator is
        // never used on a buffer it did not allocate because rcl does not free it.
        unsafe {
            let msg = ffi::Uint8Array {
                buffer: cdr.as_ptr().cast_mut(),
                buffer_length: cdr.len(),
                buffer_capacity: cdr.len(),
                allocator: (self.ros.api.get_default_allocator)(),
            };
            let rc = (self.ros.api.publish_serialized)(&*self.handle, &msg, std::ptr::null_mut());
            if rc != RET_OK {
                return Err(self.ros.error("rcl_publish_serialized_message", rc));
            }
        }
        Ok(())
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        let _guard = self.ros.lock_entities();
        let node = (&*self.ros.node as *const ffi::Node).cast_mut();
        // SAFETY: initialised by `Ros::publisher` on this node; rcl reads the node.
        let rc = unsafe { (self.ros.api.publisher_fini)(&mut *self.handle, node) };
        fini_result(&self.ros.api, "rcl_publisher_fini", rc);
    }
}

/// A subscription of serialized messages.
pub struct Subscription {
    ros: Arc<Ros>,
    handle: Box<Handle>,
    buffer: ffi::Uint8Array,
    info: Box<Opaque>,
}

// SAFETY: an rcl subscription may be used from any thread, one call at a time
// (`take` has `&mut self`).
unsafe impl Send for Subscription {}

impl Subscription {
    /// The next message (CDR, its encapsulation header first), if one is waiting.
    pub fn take(&mut self) -> Result<Option<&[u8]>, RosError> {
        // SAFETY: rcl grows `buffer` with its own allocator as needed and writes the
        // message's length; the slice borrows it until the next take.
        unsafe {
            let rc = (self.ros.api.take_serialized)(
                &*self.handle,
                &mut self.buffer,
                &mut *self.info,
                std::ptr::null_mut(),
            );
            match rc {
                RET_OK => Ok(Some(bytes_of(&self.buffer))),
                ffi::RET_SUBSCRIPTION_TAKE_FAILED => Ok(None),
                rc => Err(self.ros.error("rcl_take_serialized_message", rc)),
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let _guard = self.ros.lock_entities();
        let node = (&*self.ros.node as *const ffi::Node).cast_mut();
        // SAFETY: initialised by `Ros::subscription` on this node; the buffer by
        // rcutils (possibly grown by rcl with the same allocator).
        let (rc, _) = unsafe {
            (
                (self.ros.api.subscription_fini)(&mut *self.handle, node),
                (self.ros.api.uint8_array_fini)(&mut self.buffer),
            )
        };
        fini_result(&self.ros.api, "rcl_subscription_fini", rc);
    }
}

/// Whether `path` is a directory holding `librcl.so`.
pub fn has_rcl(path: &Path) -> bool {
    path.join("librcl.so").exists()
}
