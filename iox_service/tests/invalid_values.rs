//! Readers never trust writers: a typed reader of a type with bytes that are no value
//! (`bool`, and structs, arrays and headers holding one) refuses a sample whose bytes
//! are not a value, whoever wrote them, and goes on with the next. Each writer here is
//! another process: a tensor publisher's `send_bytes` (safe code, any bytes), and
//! hostile writers that put a 2 into a `bool` through raw pointers (what another
//! language, a bridge or a damaged file can do). The refused sample's chunk is
//! released: the pool is whole again afterwards.

use std::path::{Path, PathBuf};
use std::time::Duration;

use iox_service::tensor::{DType, TensorLayout};
use iox_service::{
    ReadError, ReceiveError, ResponseReceiveError, ServerReceiveError, Service, ZeroCopySafe, user_header,
};
use iox_testkit::{env, role, root_env, spawn_self, wait_ok};

const LIMIT: Duration = Duration::from_secs(30);

#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Reading {
    seq: u32,
    valid: bool,
    value: f64,
}

#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Flags {
    on: [bool; 2],
}

/// A struct nesting the bool two levels down (through an array of structs).
#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Nested {
    id: u16,
    flags: [Flags; 3],
}

fn root() -> PathBuf {
    PathBuf::from(env::<String>("IOX_ROOT"))
}

fn named(root: &Path, name: &str) -> Service {
    Service::named(name).unwrap().root(root)
}

/// Runs role `role` of `test` in a child process and waits for it.
fn child(test: &str, role: &str, root: &Path) {
    wait_ok(spawn_self(test, role, &[root_env(root)]), LIMIT);
}

fn refused<T>(got: Result<T, ReceiveError>) -> String {
    match got {
        Err(e @ ReceiveError::InvalidValue { .. }) => e.to_string(),
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("an invalid value was handed out"),
    }
}

#[test]
fn a_bool_tensor_sent_as_any_bytes_is_refused_by_a_typed_subscriber() {
    const TEST: &str = "a_bool_tensor_sent_as_any_bytes_is_refused_by_a_typed_subscriber";
    let service = |root: &Path| {
        named(root, "bools/tensor")
            .publish_subscribe::<[bool]>()
            .tensors(true)
            .max_slice_len(1024)
            .subscriber_buffer(4)
            .open_or_create()
            .unwrap()
    };
    if role().as_deref() == Some("writer") {
        let svc = service(&root());
        let publisher = svc.tensor_publisher_builder().create().unwrap();
        let layout = TensorLayout::contiguous(DType::Bool, &[3]).unwrap();
        publisher
            .loan_tensor(&layout)
            .unwrap()
            .send_bytes(&[2, 7, 255])
            .unwrap();
        publisher
            .loan_tensor(&layout)
            .unwrap()
            .send_bytes(&[1, 0, 1])
            .unwrap();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = service(dir.path());
    let subscriber = svc.subscriber_builder().create().unwrap();
    child(TEST, "writer", dir.path());
    let said = refused(subscriber.receive());
    assert!(said.contains("bool"), "{said}");
    let good = subscriber.receive().unwrap().expect("the valid tensor after it");
    assert_eq!(&*good, &[true, false, true]);
    drop(good);
    assert!(subscriber.receive().unwrap().is_none());
    let free: u32 = svc.pool_info().classes.iter().map(|c| c.free).sum();
    let total: u32 = svc.pool_info().classes.iter().map(|c| c.count).sum();
    assert_eq!(free, total, "the refused sample's chunk was released");
}

#[test]
fn structs_headers_and_nested_bools_are_checked_field_by_field() {
    const TEST: &str = "structs_headers_and_nested_bools_are_checked_field_by_field";
    let readings = |root: &Path| {
        named(root, "bools/readings")
            .publish_subscribe::<Reading>()
            .user_header::<Flags>()
            .subscriber_buffer(8)
            .open_or_create()
            .unwrap()
    };
    let nested = |root: &Path| {
        named(root, "bools/nested")
            .publish_subscribe::<[Nested]>()
            .max_slice_len(4)
            .subscriber_buffer(8)
            .open_or_create()
            .unwrap()
    };
    if role().as_deref() == Some("hostile") {
        let root = root();
        let publisher = readings(&root).publisher_builder().create().unwrap();
        let ok = Reading {
            seq: 1,
            valid: true,
            value: 0.5,
        };
        let send = |payload_byte: Option<(usize, u8)>, header_byte: Option<u8>| {
            let mut loan = publisher
                .loan_uninit()
                .unwrap()
                .write_header(Flags { on: [true, false] });
            loan.payload_mut().write(ok);
            let payload = loan.payload_mut().as_mut_ptr().cast::<u8>();
            // SAFETY: a hostile writer: bytes of its own loan, the payload's and the
            // header's (the header is `offset_for` bytes before the payload).
            unsafe {
                if let Some((at, b)) = payload_byte {
                    payload.add(at).write(b);
                }
                if let Some(b) = header_byte {
                    payload
                        .sub(user_header::offset_for::<Flags, Reading>())
                        .add(1)
                        .write(b);
                }
                loan.assume_init().send().unwrap();
            }
        };
        send(Some((std::mem::offset_of!(Reading, valid), 2)), None);
        send(None, Some(3));
        send(None, None);
        let publisher = nested(&root).publisher_builder().create().unwrap();
        let value = Nested {
            id: 9,
            flags: [Flags { on: [false, true] }; 3],
        };
        let mut loan = publisher.loan_slice_uninit(2).unwrap();
        for v in loan.payload_mut() {
            v.write(value);
        }
        let second = std::mem::size_of::<Nested>() + std::mem::offset_of!(Nested, flags) + 5;
        // SAFETY: a hostile writer: one byte of its own loan, the last flag of the
        // second element.
        unsafe {
            loan.payload_mut().as_mut_ptr().cast::<u8>().add(second).write(4);
            loan.assume_init().send().unwrap();
        }
        let loan = publisher.loan_slice_uninit(1).unwrap();
        loan.write_from_slice(&[value]).send().unwrap();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (r, n) = (readings(dir.path()), nested(dir.path()));
    let (rs, ns) = (
        r.subscriber_builder().create().unwrap(),
        n.subscriber_builder().create().unwrap(),
    );
    child(TEST, "hostile", dir.path());
    let said = refused(rs.receive());
    assert!(said.contains("Reading"), "the payload's type is named: {said}");
    let said = refused(rs.receive());
    assert!(said.contains("Flags"), "the header's type is named: {said}");
    let good = rs.receive().unwrap().expect("the valid reading");
    assert_eq!((good.user_header().on, good.valid), ([true, false], true));
    drop(good);
    let said = refused(ns.receive());
    assert!(said.contains("Nested"), "{said}");
    let good = ns.receive().unwrap().expect("the valid slice");
    assert_eq!(good[0].flags[2].on, [false, true]);
}

#[test]
fn requests_responses_and_blackboard_values_are_checked() {
    const TEST: &str = "requests_responses_and_blackboard_values_are_checked";
    let planner = |root: &Path| {
        named(root, "bools/planner")
            .request_response::<[bool], bool>()
            .request_slice_len(8)
            .open_or_create()
            .unwrap()
    };
    let board = |root: &Path| {
        named(root, "bools/board")
            .blackboard::<u32>()
            .add(1u32, false)
            .open_or_create()
            .unwrap()
    };
    match role().as_deref() {
        Some("client") => {
            // Sends a request whose second bool is a 9; its stream must end unanswered.
            let client = planner(&root()).client_builder().create().unwrap();
            let mut loan = client.loan_slice_uninit(2).unwrap();
            for v in loan.payload_mut() {
                v.write(true);
            }
            // SAFETY: a hostile writer: a byte of its own loan.
            let pending = unsafe {
                loan.payload_mut().as_mut_ptr().cast::<u8>().add(1).write(9);
                loan.assume_init().send().unwrap()
            };
            assert!(pending.receive_timeout(LIMIT).unwrap().is_none());
            assert!(pending.is_finished() && !pending.is_server_gone());
            return;
        }
        Some("server") => {
            // Answers the one request with a response byte of 5, then a valid one.
            let server = planner(&root()).server_builder().create().unwrap();
            let request = server.receive_timeout(LIMIT).unwrap().expect("a request");
            let mut loan = request.loan_uninit().unwrap();
            loan.payload_mut().write(true);
            // SAFETY: a hostile writer: its own response loan's byte.
            unsafe {
                loan.payload_mut().as_mut_ptr().cast::<u8>().write(5);
                loan.assume_init().send().unwrap();
            }
            request.loan_uninit().unwrap().write_payload(true).send().unwrap();
            return;
        }
        Some("board") => {
            let board = board(&root());
            let writer = board.writer_builder().create().unwrap();
            let entry = writer.entry_raw(&1).unwrap();
            // SAFETY: a hostile writer: one byte, the value's size, from its own stack.
            unsafe { entry.update_from([6u8].as_ptr()) }.unwrap();
            return;
        }
        _ => {}
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = planner(dir.path());
    let server = svc.server_builder().create().unwrap();
    let client_process = spawn_self(TEST, "client", &[root_env(dir.path())]);
    let got = server.receive_timeout(LIMIT);
    assert!(
        matches!(got, Err(ServerReceiveError::InvalidValue { .. })),
        "the request was handed out: {:?}",
        got.map(|r| r.is_some())
    );
    wait_ok(client_process, LIMIT);
    drop(server);

    let client = svc.client_builder().create().unwrap();
    let server_process = spawn_self(TEST, "server", &[root_env(dir.path())]);
    assert!(
        iox_testkit::wait_until(LIMIT, || svc.port_counts().1 == 1),
        "no server"
    );
    let pending = client
        .loan_slice_uninit(1)
        .unwrap()
        .write_from_slice(&[true])
        .send()
        .unwrap();
    let first = pending.receive_timeout(LIMIT);
    assert!(
        matches!(first, Err(ResponseReceiveError::InvalidValue(_))),
        "the response was handed out: {:?}",
        first.map(|r| r.is_some())
    );
    assert_eq!(pending.receive_timeout(LIMIT).unwrap().map(|r| *r), Some(true));
    wait_ok(server_process, LIMIT);

    let board = board(dir.path());
    let reader = board.reader_builder().create().unwrap();
    child(TEST, "board", dir.path());
    let entry = reader.entry::<bool>(&1).unwrap();
    assert!(matches!(entry.get(), Err(ReadError::InvalidValue { .. })));
    assert!(matches!(entry.read(), Err(ReadError::InvalidValue { .. })));
}
