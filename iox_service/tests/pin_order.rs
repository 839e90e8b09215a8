//! Pinned ports of one service in one process, in any order and on any threads: one
//! registration, made once, never swapped. A process that may write the pool (it holds
//! the payload's descriptor read-write, as every opener does today) registers it
//! writable whichever port comes first, so a pinned publisher built after a pinned
//! subscriber uses the registration that exists (an earlier version registered the
//! subscriber's read-only mapping and then unregistered and registered it again,
//! writable, under the first guard: 2 pin calls in 3 of 10 runs of four ports on four
//! threads). The pins go through a pinner of a user memory type that records what it
//! registers (how `CudaPinned`'s `READ_ONLY` flag is decided), in child processes; the
//! parent receives what their publishers send.

use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use iox_service::{MemoryType, PinError, Pinner, PubSubService, Region, Service};
use iox_testkit::{role, root_env, spawn_self, wait_ok, wait_until};

const LIMIT: Duration = Duration::from_secs(60);
const CODE: u16 = 0x0140;

/// Records the pinner's calls: (pin or unpin, read-only).
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<(bool, bool)>>,
}

impl Recorder {
    /// Registrations alive now, and whether the last one made is read-only.
    fn live(&self) -> (i64, Option<bool>) {
        let calls = self.calls.lock().unwrap();
        let live = calls.iter().map(|&(pin, _)| if pin { 1 } else { -1 }).sum();
        (live, calls.iter().rev().find(|c| c.0).map(|c| c.1))
    }

    /// The calls made so far, forgotten.
    fn take(&self) -> Vec<(bool, bool)> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

impl Pinner for Recorder {
    fn pin(&self, region: &Region<'_>) -> Result<(), PinError> {
        self.calls.lock().unwrap().push((true, region.read_only()));
        Ok(())
    }
    fn unpin(&self, region: &Region<'_>) -> Result<(), PinError> {
        self.calls.lock().unwrap().push((false, region.read_only()));
        Ok(())
    }
}

fn recorder() -> Arc<Recorder> {
    let r = Arc::new(Recorder::default());
    iox_service::register_pinner(MemoryType::user(CODE).unwrap(), r.clone()).unwrap();
    r
}

fn service(root: &std::path::Path, name: &str) -> PubSubService<u64> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .memory_type(MemoryType::user(CODE).unwrap())
        .max_publishers(4)
        .max_subscribers(5)
        .subscriber_buffer(8)
        .open_or_create()
        .unwrap()
}

#[test]
fn pinned_ports_work_in_any_order_and_on_any_threads() {
    const TEST: &str = "pinned_ports_work_in_any_order_and_on_any_threads";
    const ROUNDS: u64 = 12;
    if role().as_deref() == Some("ports") {
        let root = std::path::PathBuf::from(iox_testkit::env::<String>("IOX_ROOT"));
        let rec = recorder();
        // The subscriber first: the payload is mapped read-only, and so registered.
        let svc = service(&root, "pin/order");
        let sub = svc.subscriber_builder().pin_memory(true).create().unwrap();
        assert_eq!(
            rec.live(),
            (1, Some(false)),
            "a process that may write the pool registers it writable, whoever comes first"
        );
        let publisher = svc.publisher_builder().pin_memory(true).create().unwrap();
        publisher.loan_uninit().unwrap().write_payload(7).send().unwrap();
        assert_eq!(*sub.receive().unwrap().unwrap(), 7);
        drop((sub, publisher));
        assert_eq!(rec.take(), [(true, false), (false, false)], "one pin, one unpin");
        // Two publishers and two subscribers built at once, on four threads, on a
        // fresh service each round.
        for round in 0..ROUNDS {
            let svc = service(&root, &format!("pin/threads-{round}"));
            // Five parties: the four port threads and this one (which checks the
            // registration once all are built, and after they are gone).
            let step = Arc::new(Barrier::new(5));
            let threads: Vec<_> = (0..4)
                .map(|i| {
                    let (svc, step) = (svc.clone(), step.clone());
                    std::thread::spawn(move || -> Result<(), String> {
                        step.wait();
                        let built = if i % 2 == 0 {
                            svc.publisher_builder()
                                .pin_memory(true)
                                .create()
                                .map(|p| (Some(p), None))
                        } else {
                            svc.subscriber_builder()
                                .pin_memory(true)
                                .create()
                                .map(|s| (None, Some(s)))
                        };
                        step.wait(); // all built
                        // A refusal still takes its part in every step (no one waits
                        // for it forever), and is reported at the end.
                        let (publisher, subscriber) = match &built {
                            Ok((p, s)) => (p.as_ref(), s.as_ref()),
                            Err(_) => (None, None),
                        };
                        step.wait(); // checked
                        if let Some(p) = publisher {
                            p.loan_uninit().unwrap().write_payload(round).send().unwrap();
                        }
                        step.wait(); // all sent
                        if let Some(s) = subscriber {
                            for _ in 0..2 {
                                assert_eq!(*s.receive().unwrap().unwrap(), round);
                            }
                        }
                        built.map(drop).map_err(|e| e.to_string())
                    })
                })
                .collect();
            step.wait(); // go
            step.wait(); // all built
            let live = rec.live();
            step.wait(); // checked
            step.wait(); // all sent
            for t in threads {
                t.join().unwrap().unwrap_or_else(|e| panic!("round {round}: {e}"));
            }
            assert_eq!(
                live,
                (1, Some(false)),
                "round {round}: one registration, writable"
            );
            assert_eq!(
                rec.take(),
                [(true, false), (false, false)],
                "round {round}: one pin call and one unpin, nothing swapped"
            );
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The parent reads the first service as the child's publisher sends, from another
    // process (its own mapping, unpinned).
    let svc = Service::named("pin/order")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<u64>()
        .memory_type(MemoryType::user(CODE).unwrap())
        .max_publishers(4)
        .max_subscribers(5)
        .subscriber_buffer(8)
        .create()
        .unwrap();
    let sub = svc.subscriber_builder().create().unwrap();
    let mut child = spawn_self(TEST, "ports", &[root_env(dir.path())]);
    let mut got = None;
    // Until the sample comes, or the child ended without sending it (it failed).
    wait_until(LIMIT, || {
        got = sub.receive().unwrap().map(|s| *s);
        got.is_some() || child.try_wait().unwrap().is_some()
    });
    wait_ok(child, LIMIT);
    assert_eq!(got, Some(7));
}
