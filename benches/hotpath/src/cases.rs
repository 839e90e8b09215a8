//! The message loops the hot-path gate traces, one per case, written against the public
//! API only. Each runs in one process (the trace is of one process), with every side's
//! ports in it: warm-up messages unmarked, then [`MEASURED`] messages in which each
//! step is preceded by a marker load ([`mark`]) naming the side about to act, and one
//! [`END`] marker after them. The tracer attributes every instruction and every access
//! to shared memory between two markers to the side the first one names.
//!
//! Invariants: the loops touch no shared memory outside the library's calls (the
//! payload writes and reads are the user's, and are counted, as the user pays them);
//! the measured part allocates nothing of its own; what happens between markers is the
//! same for every message of a case, so the per-message figures are exact averages.

use std::hint::black_box;
use std::path::Path;

use iox_service::Service;

/// Messages traced per case, after the warm-up.
pub const MEASURED: u64 = 64;
/// Messages sent before tracing starts (queues, free lists and caches in their steady
/// state: more than any ring or buffer of the cases).
pub const WARM_UP: u64 = 40;

/// Marker index that ends the measured part.
pub const END: usize = 0;

/// Loads whose addresses the tracer knows mark the steps: index = side + 1 ([`END`]
/// = 0).
pub static MARKS: [u64; 8] = [0; 8];

/// Marks the start of a step by `side` (or [`END`]): one load of `MARKS[index]`.
#[inline(always)]
pub fn mark(index: usize) {
    // SAFETY: a volatile read of a static in bounds (index < 8, checked by the
    // indexing); volatile so the load happens exactly here.
    black_box(unsafe { std::ptr::read_volatile(&MARKS[index]) });
}

/// The marker of message `i`'s steps: [`mark`] once the warm-up is over, nothing before.
fn marks(i: u64) -> impl Fn(usize) {
    move |side| {
        if i >= WARM_UP {
            mark(side)
        }
    }
}

/// A case: its name, the sides its steps belong to, and the process each side runs in
/// when the case is deployed (a publisher's sends in one, a subscriber's receives and
/// polls in another): lines two processes share move between their cores.
pub struct Case {
    /// Its name on the command line and in the committed file.
    pub name: &'static str,
    /// The sides, by marker index - 1.
    pub sides: &'static [&'static str],
    /// Per side, its process.
    pub process: &'static [u8],
    /// Whether a step looks at something at most every so many milliseconds of wall
    /// time (request-response's liveness look): see `trace::Costs::from_messages`.
    pub time_driven: bool,
}

const PUBSUB: &[&str] = &["send", "receive", "empty-poll"];

/// The cases, in table order.
pub const CASES: [Case; 7] = [
    Case {
        name: "typed",
        sides: PUBSUB,
        process: &[0, 1, 1],
        time_driven: false,
    },
    Case {
        name: "slice",
        sides: PUBSUB,
        process: &[0, 1, 1],
        time_driven: false,
    },
    Case {
        name: "header",
        sides: PUBSUB,
        process: &[0, 1, 1],
        time_driven: false,
    },
    Case {
        name: "fanout4",
        sides: PUBSUB,
        process: &[0, 1, 1],
        time_driven: false,
    },
    Case {
        name: "reqres",
        sides: &["client-send", "server", "client-receive"],
        process: &[0, 1, 0],
        time_driven: true,
    },
    Case {
        name: "blackboard",
        sides: &["update", "read"],
        process: &[0, 1],
        time_driven: false,
    },
    Case {
        name: "loan",
        sides: &["loan-drop"],
        process: &[0],
        time_driven: false,
    },
];

/// The gate's own check (`--self-test`): `typed` with one more read of the service's
/// shared memory per receive (the removed flag, which a receive that finds a sample
/// does not read), which the gate must report as a rise.
pub const EXTRA_READ: Case = Case {
    name: "typed-extra-read",
    sides: PUBSUB,
    process: &[0, 1, 1],
    time_driven: false,
};

const SEND: usize = 1;
const RECEIVE: usize = 2;
const POLL: usize = 3;

fn pubsub<P: iox_service::Payload + ?Sized>(root: &Path, name: &str) -> iox_service::PubSubBuilder<P> {
    Service::named(name)
        .expect("a valid name")
        .root(root)
        .publish_subscribe::<P>()
        .subscriber_buffer(4)
}

/// Runs case `name` (one of [`CASES`]) in `root`; `ready` is called once every port
/// exists, before the warm-up (the tracer reads the process's shared mappings then).
/// Returns a checksum of what was received.
pub fn run(name: &str, root: &Path, ready: impl FnOnce()) -> u64 {
    match name {
        "typed" => typed(root, 1, false, ready),
        "typed-extra-read" => typed(root, 1, true, ready),
        "fanout4" => typed(root, 4, false, ready),
        "slice" => slice(root, ready),
        "header" => header(root, ready),
        "reqres" => reqres(root, ready),
        "blackboard" => blackboard(root, ready),
        "loan" => loan(root, ready),
        other => panic!("no case {other:?}"),
    }
}

fn typed(root: &Path, subscribers: usize, extra_read: bool, ready: impl FnOnce()) -> u64 {
    let svc = pubsub::<u64>(root, "hotpath/typed")
        .max_subscribers(subscribers as u32)
        .open_or_create()
        .expect("the service");
    let publisher = svc.publisher_builder().create().expect("a publisher");
    let subs: Vec<_> = (0..subscribers)
        .map(|_| svc.subscriber_builder().create().expect("a subscriber"))
        .collect();
    ready();
    let mut sum = 0;
    for i in 0..WARM_UP + MEASURED {
        let m = marks(i);
        m(POLL);
        assert!(subs[0].receive().expect("received").is_none());
        m(SEND);
        publisher
            .loan_uninit()
            .expect("a loan")
            .write_payload(i)
            .send()
            .expect("sent");
        m(RECEIVE);
        for s in &subs {
            sum += *s.receive().expect("received").expect("a sample");
            if extra_read {
                sum += u64::from(s.is_service_removed());
            }
        }
        m(END);
    }
    sum
}

fn slice(root: &Path, ready: impl FnOnce()) -> u64 {
    const LEN: usize = 64;
    let svc = pubsub::<[u8]>(root, "hotpath/slice")
        .max_subscribers(1)
        .size_classes(&[(LEN, 32)])
        .open_or_create()
        .expect("the service");
    let publisher = svc.publisher_builder().create().expect("a publisher");
    let sub = svc.subscriber_builder().create().expect("a subscriber");
    ready();
    let mut sum = 0u64;
    for i in 0..WARM_UP + MEASURED {
        let m = marks(i);
        m(POLL);
        assert!(sub.receive().expect("received").is_none());
        m(SEND);
        let mut loan = publisher.loan_slice_uninit(LEN).expect("a loan");
        for (k, b) in loan.payload_mut().iter_mut().enumerate() {
            b.write(i as u8 ^ k as u8);
        }
        // SAFETY: every byte was written just above.
        unsafe { loan.assume_init() }.send().expect("sent");
        m(RECEIVE);
        let s = sub.receive().expect("received").expect("a sample");
        sum += u64::from(s[0]) + u64::from(s[LEN - 1]);
        drop(s);
        m(END);
    }
    sum
}

fn header(root: &Path, ready: impl FnOnce()) -> u64 {
    let svc = pubsub::<u64>(root, "hotpath/header")
        .max_subscribers(1)
        .user_header::<[u64; 8]>()
        .open_or_create()
        .expect("the service");
    let publisher = svc.publisher_builder().create().expect("a publisher");
    let sub = svc.subscriber_builder().create().expect("a subscriber");
    ready();
    let mut sum = 0;
    for i in 0..WARM_UP + MEASURED {
        let m = marks(i);
        m(POLL);
        assert!(sub.receive().expect("received").is_none());
        m(SEND);
        publisher
            .loan_uninit()
            .expect("a loan")
            .write_header([i; 8])
            .write_payload(i)
            .send()
            .expect("sent");
        m(RECEIVE);
        let s = sub.receive().expect("received").expect("a sample");
        sum += s.user_header()[7] + *s;
        drop(s);
        m(END);
    }
    sum
}

fn reqres(root: &Path, ready: impl FnOnce()) -> u64 {
    let svc = Service::named("hotpath/reqres")
        .expect("a valid name")
        .root(root)
        .request_response::<u64, u64>()
        .max_clients(1)
        .max_servers(1)
        .max_active_requests_per_client(2)
        .max_response_buffer(1)
        .open_or_create()
        .expect("the service");
    let client = svc.client_builder().create().expect("a client");
    let server = svc.server_builder().create().expect("a server");
    ready();
    let mut sum = 0;
    for i in 0..WARM_UP + MEASURED {
        let m = marks(i);
        m(1);
        let pending = client
            .loan_uninit()
            .expect("a request loan")
            .write_payload(i)
            .send()
            .expect("the request sent");
        m(2);
        let active = server.receive().expect("received").expect("a request");
        let answer = *active + 1;
        active
            .loan_uninit()
            .expect("a response loan")
            .write_payload(answer)
            .send()
            .expect("the response sent");
        drop(active);
        m(3);
        let response = pending.receive().expect("received").expect("a response");
        sum += *response;
        drop(response);
        drop(pending);
        m(END);
    }
    sum
}

fn blackboard(root: &Path, ready: impl FnOnce()) -> u64 {
    let board = Service::named("hotpath/blackboard")
        .expect("a valid name")
        .root(root)
        .blackboard::<u32>()
        .add::<u64>(0, 0)
        .create()
        .expect("the blackboard");
    let writer = board.writer_builder().create().expect("a writer");
    let reader = board.reader_builder().create().expect("a reader");
    let w = writer.entry::<u64>(&0).expect("the writer's entry");
    let r = reader.entry::<u64>(&0).expect("the reader's entry");
    ready();
    let mut sum = 0;
    for i in 0..WARM_UP + MEASURED {
        let m = marks(i);
        m(1);
        w.update_with_copy(i).expect("updated");
        m(2);
        sum += r.get().expect("read");
        m(END);
    }
    sum
}

fn loan(root: &Path, ready: impl FnOnce()) -> u64 {
    let svc = pubsub::<u64>(root, "hotpath/loan")
        .max_subscribers(1)
        .open_or_create()
        .expect("the service");
    let publisher = svc.publisher_builder().create().expect("a publisher");
    ready();
    for i in 0..WARM_UP + MEASURED {
        let m = marks(i);
        m(1);
        drop(black_box(publisher.loan_uninit().expect("a loan")));
        m(END);
    }
    0
}
