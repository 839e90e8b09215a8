//! Waiting for any of several subscriptions, service servers and clients at once
//! (`rcl_wait`).

use std::sync::Arc;
use std::time::Duration;

use super::ffi::{self, RET_OK};
use super::{Ros, RosError, ServiceClient, ServiceServer, Subscription};

/// Which entities are ready after [`WaitSet::wait`], in the order given.
#[derive(Debug, Clone, Default)]
pub struct Ready {
    /// Subscriptions with a message.
    pub subscriptions: Vec<bool>,
    /// Servers with a request.
    pub services: Vec<bool>,
    /// Clients with a response.
    pub clients: Vec<bool>,
}

/// A reusable wait set (rcl's, grown as needed).
pub struct WaitSet {
    ros: Arc<Ros>,
    set: Box<ffi::WaitSet>,
    /// Room for (subscriptions, services, clients); zero before the first wait.
    capacity: (usize, usize, usize),
    initialised: bool,
}

// SAFETY: used by one thread at a time (`&mut self`).
unsafe impl Send for WaitSet {}

impl WaitSet {
    /// An empty wait set.
    pub fn new(ros: &Arc<Ros>) -> Self {
        Self {
            ros: ros.clone(),
            // SAFETY: all-zero is rcl's zero-initialised wait set.
            set: Box::new(unsafe { std::mem::zeroed() }),
            capacity: (0, 0, 0),
            initialised: false,
        }
    }

    /// Waits up to `timeout` until any of the entities is ready.
    pub fn wait(
        &mut self,
        subs: &[&Subscription],
        services: &[&ServiceServer],
        clients: &[&ServiceClient],
        timeout: Duration,
    ) -> Result<Ready, RosError> {
        let need = (subs.len(), services.len(), clients.len());
        if need == (0, 0, 0) {
            std::thread::sleep(timeout);
            return Ok(Ready::default());
        }
        let api = &self.ros.api;
        // SAFETY: the wait set is (re)initialised on the gateway's context with room
        // for every entity added; the entities are boxed handles borrowed for the
        // call; readiness is read before the next clear.
        unsafe {
            if !self.initialised
                || need.0 > self.capacity.0
                || need.1 > self.capacity.1
                || need.2 > self.capacity.2
            {
                if self.initialised {
                    (api.wait_set_fini)(&mut *self.set);
                    *self.set = std::mem::zeroed();
                    self.initialised = false;
                }
                let room = (
                    need.0.max(self.capacity.0),
                    need.1.max(self.capacity.1),
                    need.2.max(self.capacity.2),
                );
                let ctx = (&*self.ros.context as *const ffi::Context).cast_mut();
                let rc = (api.wait_set_init)(
                    &mut *self.set,
                    room.0,
                    0,
                    0,
                    room.2,
                    room.1,
                    0,
                    ctx,
                    (api.get_default_allocator)(),
                );
                if rc != RET_OK {
                    return Err(self.ros.error("rcl_wait_set_init", rc));
                }
                self.capacity = room;
                self.initialised = true;
            }
            (api.wait_set_clear)(&mut *self.set);
            let null = std::ptr::null_mut();
            for s in subs {
                let rc = (api.wait_set_add_subscription)(&mut *self.set, &*s.handle, null);
                if rc != RET_OK {
                    return Err(self.ros.error("rcl_wait_set_add_subscription", rc));
                }
            }
            for s in services {
                let rc = (api.wait_set_add_service)(&mut *self.set, &*s.handle, null);
                if rc != RET_OK {
                    return Err(self.ros.error("rcl_wait_set_add_service", rc));
                }
            }
            for c in clients {
                let rc = (api.wait_set_add_client)(&mut *self.set, &*c.handle, null);
                if rc != RET_OK {
                    return Err(self.ros.error("rcl_wait_set_add_client", rc));
                }
            }
            let ns = i64::try_from(timeout.as_nanos()).unwrap_or(i64::MAX);
            let rc = (api.wait)(&mut *self.set, ns);
            if rc == ffi::RET_TIMEOUT {
                return Ok(Ready {
                    subscriptions: vec![false; need.0],
                    services: vec![false; need.1],
                    clients: vec![false; need.2],
                });
            }
            if rc != RET_OK {
                return Err(self.ros.error("rcl_wait", rc));
            }
            let ready =
                |p: *const *const ffi::Handle, n: usize| (0..n).map(|i| !(*p.add(i)).is_null()).collect();
            Ok(Ready {
                subscriptions: ready(self.set.subscriptions, need.0),
                services: ready(self.set.services, need.1),
                clients: ready(self.set.clients, need.2),
            })
        }
    }
}

impl Drop for WaitSet {
    fn drop(&mut self) {
        if self.initialised {
            // SAFETY: initialised by `wait`.
            let rc = unsafe { (self.ros.api.wait_set_fini)(&mut *self.set) };
            super::fini_result(&self.ros.api, "rcl_wait_set_fini", rc);
        }
    }
}
