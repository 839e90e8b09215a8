//! ROS 2 services as CDR: a server that hands each request over as CDR bytes and
//! answers with CDR bytes, and a client that sends CDR and gets CDR back.
//!
//! rcl takes and sends requests and responses as C structures of the service's type.
//! The gateway has no such type at compile time: it makes the structures with the
//! functions `rosidl_generator_c` generated into the type's package
//! (`pkg__srv__Type_Request__create` / `__destroy`, in `libpkg__rosidl_generator_c.so`)
//! and converts them to and from CDR with the middleware's `rmw_serialize` /
//! `rmw_deserialize`, by the message type support of the request and the response.
//! Nothing is generated for the gateway.
//!
//! Invariants: each server and client owns one request and one response structure,
//! made once and destroyed on drop; a structure is only passed to rcl and rmw
//! functions of its own type.

use std::ffi::c_void;
use std::sync::Arc;

use libloading::Library;

use super::ffi::{self, Handle, RET_OK, RequestId, Uint8Array};
use super::{Ros, RosError, bytes_of, cstring, fini_result, open_in, show_dirs};

type Create = unsafe extern "C" fn() -> *mut c_void;
type Destroy = unsafe extern "C" fn(*mut c_void);

/// One C message structure of a type known at run time, with its CDR buffer.
struct Message {
    ptr: *mut c_void,
    destroy: Destroy,
    type_support: *const c_void,
    cdr: Uint8Array,
}

/// What a service type needs, loaded once per server or client.
struct ServiceType {
    service: *const c_void,
    request: Message,
    response: Message,
    _libs: [Arc<Library>; 2],
}

impl Ros {
    /// Loads service type `name` (`pkg/srv/Type`): its type supports and one
    /// request and one response structure.
    fn service_type(&self, name: &str) -> Result<ServiceType, RosError> {
        let err = |why: String| RosError::Type {
            name: name.to_owned(),
            why,
        };
        let parts: Vec<&str> = name.split('/').collect();
        let [pkg, "srv", ty] = parts[..] else {
            return Err(err("not a service type name of the form pkg/srv/Type".into()));
        };
        let open = |suffix: &str| {
            open_in(&self.dirs, &format!("lib{pkg}__{suffix}.so"))
                .map(Arc::new)
                .map_err(|e| err(format!("{e} (looked in {})", show_dirs(&self.dirs))))
        };
        let (support, generated) = (open("rosidl_typesupport_c")?, open("rosidl_generator_c")?);
        // SAFETY: rosidl's generated functions, declared with their C signatures: the
        // type support getters take nothing and return static data of `support`; the
        // create functions return a new initialised structure (null when out of
        // memory) that the matching destroy function frees. Both libraries stay
        // loaded in the `ServiceType`.
        unsafe {
            let getter = |symbol: String| -> Result<*const c_void, RosError> {
                let f = support
                    .get::<unsafe extern "C" fn() -> *const c_void>(format!("{symbol}\0").as_bytes())
                    .map_err(|_| err(format!("{pkg}'s type support has no {symbol}")))?;
                Ok(f())
            };
            let service = getter(format!(
                "rosidl_typesupport_c__get_service_type_support_handle__{pkg}__srv__{ty}"
            ))?;
            let message = |part: &str| -> Result<Message, RosError> {
                let ts = getter(format!(
                    "rosidl_typesupport_c__get_message_type_support_handle__{pkg}__srv__{ty}_{part}"
                ))?;
                let base = format!("{pkg}__srv__{ty}_{part}");
                let create = *generated
                    .get::<Create>(format!("{base}__create\0").as_bytes())
                    .map_err(|_| err(format!("{pkg}'s generated C library has no {base}__create")))?;
                let destroy = *generated
                    .get::<Destroy>(format!("{base}__destroy\0").as_bytes())
                    .map_err(|_| err(format!("{pkg}'s generated C library has no {base}__destroy")))?;
                if ts.is_null() {
                    return Err(err(format!("{pkg}'s type support returned nothing for {base}")));
                }
                let mut cdr: Uint8Array = std::mem::zeroed();
                let allocator = (self.api.get_default_allocator)();
                let rc = (self.api.uint8_array_init)(&mut cdr, 0, &allocator);
                if rc != RET_OK {
                    return Err(self.error("rcutils_uint8_array_init", rc));
                }
                let ptr = create();
                if ptr.is_null() {
                    (self.api.uint8_array_fini)(&mut cdr);
                    return Err(err(format!("cannot make a {base} (out of memory)")));
                }
                Ok(Message {
                    ptr,
                    destroy,
                    type_support: ts,
                    cdr,
                })
            };
            let mut request = message("Request")?;
            let response = match message("Response") {
                Ok(m) => m,
                Err(e) => {
                    self.drop_message(&mut request);
                    return Err(e);
                }
            };
            Ok(ServiceType {
                service,
                request,
                response,
                _libs: [support.clone(), generated.clone()],
            })
        }
    }

    fn write_cdr(&self, m: &mut Message) -> Result<(), RosError> {
        // SAFETY: `m.ptr` is a structure of `m.type_support`'s type; rmw grows the
        // buffer with its own allocator.
        let rc = unsafe { (self.api.serialize)(m.ptr, m.type_support, &mut m.cdr) };
        if rc != RET_OK {
            return Err(self.error("rmw_serialize", rc));
        }
        Ok(())
    }

    fn read_cdr(&self, m: &mut Message, cdr: &[u8]) -> Result<(), RosError> {
        // SAFETY: rmw only reads the bytes; the structure is of the type support's
        // type, and rmw replaces its contents (freeing what they held).
        unsafe {
            let bytes = Uint8Array {
                buffer: cdr.as_ptr().cast_mut(),
                buffer_length: cdr.len(),
                buffer_capacity: cdr.len(),
                allocator: (self.api.get_default_allocator)(),
            };
            let rc = (self.api.deserialize)(&bytes, m.type_support, m.ptr);
            if rc != RET_OK {
                return Err(self.error("rmw_deserialize", rc));
            }
        }
        Ok(())
    }

    fn drop_message(&self, m: &mut Message) {
        // SAFETY: made by the type's create function, destroyed once; the buffer
        // was initialised by rcutils.
        unsafe {
            (m.destroy)(m.ptr);
            (self.api.uint8_array_fini)(&mut m.cdr);
        }
    }

    /// A server of service type `type_name` on `name`.
    pub fn service_server(self: &Arc<Self>, name: &str, type_name: &str) -> Result<ServiceServer, RosError> {
        let name_c = cstring(name)?;
        let ty = self.service_type(type_name)?;
        let _guard = self.lock_entities();
        // SAFETY: rcl's default options; a zeroed service is the zero-initialised one.
        unsafe {
            let options = (self.api.service_get_default_options)();
            let mut handle: Box<Handle> = Box::new(std::mem::zeroed());
            let rc =
                (self.api.service_init)(&mut *handle, &*self.node, ty.service, name_c.as_ptr(), &options);
            let server = ServiceServer {
                ros: self.clone(),
                handle,
                ty,
                live: rc == RET_OK,
            };
            if rc != RET_OK {
                return Err(self.error("rcl_service_init", rc));
            }
            Ok(server)
        }
    }

    /// A client of service type `type_name` on `name`.
    pub fn service_client(self: &Arc<Self>, name: &str, type_name: &str) -> Result<ServiceClient, RosError> {
        let name_c = cstring(name)?;
        let ty = self.service_type(type_name)?;
        let _guard = self.lock_entities();
        // SAFETY: as in `service_server`.
        unsafe {
            let options = (self.api.client_get_default_options)();
            let mut handle: Box<Handle> = Box::new(std::mem::zeroed());
            let rc = (self.api.client_init)(&mut *handle, &*self.node, ty.service, name_c.as_ptr(), &options);
            let client = ServiceClient {
                ros: self.clone(),
                handle,
                ty,
                live: rc == RET_OK,
            };
            if rc != RET_OK {
                return Err(self.error("rcl_client_init", rc));
            }
            Ok(client)
        }
    }

    /// Every service with its types, as the graph knows it now; with `own`, only
    /// those this node serves.
    pub fn services(&self, own: bool) -> Result<Vec<(String, Vec<String>)>, RosError> {
        let (name, ns) = (cstring(&self.node_name)?, cstring("/")?);
        // SAFETY: as `topics`.
        unsafe {
            self.names_and_types("rcl_get_service_names_and_types", |nat, allocator| {
                if own {
                    (self.api.service_names_and_types_by_node)(
                        &*self.node,
                        allocator,
                        name.as_ptr(),
                        ns.as_ptr(),
                        nat,
                    )
                } else {
                    (self.api.service_names_and_types)(&*self.node, allocator, nat)
                }
            })
        }
    }
}

/// A ROS 2 service server whose requests and responses are CDR.
pub struct ServiceServer {
    ros: Arc<Ros>,
    pub(super) handle: Box<Handle>,
    ty: ServiceType,
    live: bool,
}

// SAFETY: used by one thread at a time (`&mut self`); its structures are its own.
unsafe impl Send for ServiceServer {}

impl ServiceServer {
    /// The participant it belongs to.
    pub fn ros(&self) -> Arc<Ros> {
        self.ros.clone()
    }

    /// The next request (its id, and its CDR), if one waits.
    pub fn take(&mut self) -> Result<Option<(RequestId, &[u8])>, RosError> {
        let mut id = RequestId::default();
        // SAFETY: the request structure is of this service's request type.
        let rc = unsafe { (self.ros.api.take_request)(&*self.handle, &mut id, self.ty.request.ptr) };
        match rc {
            RET_OK => {}
            ffi::RET_SERVICE_TAKE_FAILED => return Ok(None),
            rc => return Err(self.ros.error("rcl_take_request", rc)),
        }
        self.ros.write_cdr(&mut self.ty.request)?;
        let m = &self.ty.request.cdr;
        // SAFETY: rmw wrote `buffer_length` bytes at `buffer`; borrowed until the next take.
        Ok(Some((id, unsafe { bytes_of(m) })))
    }

    /// Answers request `id` with the response `cdr` (refused if it is not a whole
    /// response of the type).
    pub fn respond(&mut self, mut id: RequestId, cdr: &[u8]) -> Result<(), RosError> {
        self.ros.read_cdr(&mut self.ty.response, cdr)?;
        // SAFETY: the response structure is of this service's response type.
        let rc = unsafe { (self.ros.api.send_response)(&*self.handle, &mut id, self.ty.response.ptr) };
        if rc != RET_OK {
            return Err(self.ros.error("rcl_send_response", rc));
        }
        Ok(())
    }
}

impl Drop for ServiceServer {
    fn drop(&mut self) {
        let ros = self.ros.clone();
        {
            let _guard = ros.lock_entities();
            if self.live {
                let node = (&*ros.node as *const ffi::Node).cast_mut();
                // SAFETY: initialised by `service_server` on this node.
                let rc = unsafe { (ros.api.service_fini)(&mut *self.handle, node) };
                fini_result(&ros.api, "rcl_service_fini", rc);
            }
        }
        ros.drop_message(&mut self.ty.request);
        ros.drop_message(&mut self.ty.response);
    }
}

/// A ROS 2 service client whose requests and responses are CDR.
pub struct ServiceClient {
    ros: Arc<Ros>,
    pub(super) handle: Box<Handle>,
    ty: ServiceType,
    live: bool,
}

// SAFETY: used by one thread at a time (`&mut self`); its structures are its own.
unsafe impl Send for ServiceClient {}

impl ServiceClient {
    /// The participant it belongs to.
    pub fn ros(&self) -> Arc<Ros> {
        self.ros.clone()
    }

    /// Whether a server of the service is there.
    pub fn server_available(&self) -> Result<bool, RosError> {
        let mut available = false;
        let _guard = self.ros.lock_entities();
        // SAFETY: the node and the client are initialised.
        let rc =
            unsafe { (self.ros.api.server_is_available)(&*self.ros.node, &*self.handle, &mut available) };
        if rc != RET_OK {
            return Err(self.ros.error("rcl_service_server_is_available", rc));
        }
        Ok(available)
    }

    /// Sends the request `cdr` (refused if it is not a whole request of the type);
    /// returns its sequence number.
    pub fn send(&mut self, cdr: &[u8]) -> Result<i64, RosError> {
        self.ros.read_cdr(&mut self.ty.request, cdr)?;
        let mut seq = 0i64;
        // SAFETY: the request structure is of this service's request type.
        let rc = unsafe { (self.ros.api.send_request)(&*self.handle, self.ty.request.ptr, &mut seq) };
        if rc != RET_OK {
            return Err(self.ros.error("rcl_send_request", rc));
        }
        Ok(seq)
    }

    /// The next response (the sequence number of its request, and its CDR), if one
    /// waits.
    pub fn take(&mut self) -> Result<Option<(i64, &[u8])>, RosError> {
        let mut id = RequestId::default();
        // SAFETY: the response structure is of this service's response type.
        let rc = unsafe { (self.ros.api.take_response)(&*self.handle, &mut id, self.ty.response.ptr) };
        match rc {
            RET_OK => {}
            ffi::RET_CLIENT_TAKE_FAILED => return Ok(None),
            rc => return Err(self.ros.error("rcl_take_response", rc)),
        }
        self.ros.write_cdr(&mut self.ty.response)?;
        let m = &self.ty.response.cdr;
        // SAFETY: rmw wrote `buffer_length` bytes at `buffer`; borrowed until the next take.
        Ok(Some((id.sequence_number, unsafe { bytes_of(m) })))
    }
}

impl Drop for ServiceClient {
    fn drop(&mut self) {
        let ros = self.ros.clone();
        {
            let _guard = ros.lock_entities();
            if self.live {
                let node = (&*ros.node as *const ffi::Node).cast_mut();
                // SAFETY: initialised by `service_client` on this node.
                let rc = unsafe { (ros.api.client_fini)(&mut *self.handle, node) };
                fini_result(&ros.api, "rcl_client_fini", rc);
            }
        }
        ros.drop_message(&mut self.ty.request);
        ros.drop_message(&mut self.ty.response);
    }
}
