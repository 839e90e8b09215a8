//! What the request-response tests share (`tests/reqres.rs`, `tests/reqres_faults.rs`):
//! the payloads, a planner service, a server loop and a stream collector.
#![allow(dead_code)] // each test file uses a part

use std::path::Path;
use std::time::Duration;

use iox_service::{RequestResponseBuilder, RequestResponseService, Service};

pub const LIMIT: Duration = Duration::from_secs(60);
pub const WAIT: Duration = Duration::from_secs(20);

pub use iox_testkit::root_env;

#[derive(Debug, Clone, Copy, PartialEq, Eq, iox_service::ZeroCopySafe)]
#[repr(C)]
pub struct Goal {
    pub x: u64,
    pub y: u64,
    pub count: u32,
    pub client: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, iox_service::ZeroCopySafe)]
#[repr(C)]
pub struct Waypoint {
    pub x: u64,
    pub y: u64,
    pub index: u32,
    pub client: u32,
}

/// The planner's limits: 6 clients, 2 servers, 4 active requests per client, 16
/// responses buffered per request.
fn planner_limits(b: RequestResponseBuilder<Goal, Waypoint>) -> RequestResponseBuilder<Goal, Waypoint> {
    b.max_clients(6)
        .max_servers(2)
        .max_active_requests_per_client(4)
        .max_response_buffer(16)
}

/// The planner service `name` under the environment's root, opened or created (a
/// child's side).
pub fn planner(name: &str) -> RequestResponseService<Goal, Waypoint> {
    planner_limits(Service::named(name).unwrap().request_response())
        .open_or_create()
        .unwrap()
}

/// The planner service `name`, created under `root` (a test's own side).
pub fn create_planner(root: &Path, name: &str) -> RequestResponseService<Goal, Waypoint> {
    planner_limits(Service::named(name).unwrap().root(root).request_response())
        .create()
        .unwrap()
}

/// A server that answers every goal with `count` waypoints until told to stop (by
/// `STOP_AFTER` requests handled); each waypoint names the goal's client.
pub fn serve(svc: &RequestResponseService<Goal, Waypoint>, stop_after: usize) {
    let server = svc.server_builder().create().unwrap();
    let mut handled = 0;
    while handled < stop_after {
        let Some(active) = server.receive_timeout(WAIT).unwrap() else {
            panic!("no request within {WAIT:?}");
        };
        let g = *active;
        for i in 0..g.count {
            active
                .loan_uninit()
                .unwrap()
                .write_payload(Waypoint {
                    x: g.x + u64::from(i),
                    y: g.y * 2,
                    index: i,
                    client: g.client,
                })
                .send()
                .unwrap();
        }
        handled += 1;
    }
}

/// Receives the whole stream of `pending`, checking content and order.
pub fn collect(pending: &iox_service::PendingResponse<Goal, Waypoint>, g: Goal) -> u32 {
    let mut n = 0;
    while let Some(w) = pending.receive_timeout(WAIT).unwrap() {
        assert_eq!(
            *w,
            Waypoint {
                x: g.x + u64::from(n),
                y: g.y * 2,
                index: n,
                client: g.client
            }
        );
        n += 1;
    }
    assert!(pending.is_finished(), "timed out after {n} responses");
    n
}
