//! Request-response with payload types given at run time (`raw_payload_types`, what
//! the C ABI uses) meets typed Rust ports of the same types: a raw client and a typed
//! server, a typed client and a raw server; a wrong size is refused at the loan; a
//! raw service of other types is refused at open.

use std::time::Duration;

use iox_service::{LoanError, OpenError, OpenOrCreateError, Payload, Service};

fn raw(root: &std::path::Path) -> Result<iox_service::RequestResponseService<[u8], [u8]>, OpenOrCreateError> {
    // SAFETY: the ports below use only the raw loan and receive methods, and read
    // payloads through their addresses.
    unsafe {
        Service::named("raw/rr")
            .unwrap()
            .root(root)
            .request_response::<[u8], [u8]>()
            .raw_payload_types(<u64 as Payload>::payload_type(), <u32 as Payload>::payload_type())
            .open_or_create()
    }
}

#[test]
fn raw_and_typed_ports_share_a_service_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let raw_svc = raw(dir.path()).unwrap();
    let typed = Service::named("raw/rr")
        .unwrap()
        .root(dir.path())
        .request_response::<u64, u32>()
        .open()
        .unwrap();

    // Raw client -> typed server -> raw response.
    let client = raw_svc.client_builder().create().unwrap();
    let server = typed.server_builder().create().unwrap();
    let mut loan = client.loan_raw(8).unwrap();
    assert!(matches!(
        client.loan_raw(7),
        Err(LoanError::NotWholePayload {
            bytes: 7,
            element: 8,
            slice: false
        })
    ));
    // SAFETY: 8 bytes, aligned for u64 (the loan's promise).
    unsafe { loan.as_mut_ptr().cast::<u64>().write(41) };
    // SAFETY: all 8 bytes were written with a u64.
    let pending = unsafe { loan.send() }.unwrap();
    let active = server.receive_timeout(Duration::from_secs(10)).unwrap().unwrap();
    assert_eq!(*active, 41);
    active.loan_uninit().unwrap().write_payload(42).send().unwrap();
    drop(active);
    let response = pending
        .receive_timeout_raw(Duration::from_secs(10))
        .unwrap()
        .unwrap();
    assert_eq!((response.len_bytes(), response.len()), (4, 1));
    // SAFETY: 4 bytes of a u32 the server wrote.
    assert_eq!(unsafe { response.as_ptr().cast::<u32>().read() }, 42);
    drop((response, pending, client, server));

    // Typed client -> raw server.
    let client = typed.client_builder().create().unwrap();
    let server = raw_svc.server_builder().create().unwrap();
    let pending = client.loan_uninit().unwrap().write_payload(7).send().unwrap();
    let active = server
        .receive_timeout_raw(Duration::from_secs(10))
        .unwrap()
        .unwrap();
    assert_eq!(active.len_bytes(), 8);
    // SAFETY: 8 bytes of a u64 the client wrote.
    assert_eq!(unsafe { active.as_ptr().cast::<u64>().read() }, 7);
    let mut r = active.loan_raw(4).unwrap();
    assert!(active.loan_raw(8).is_err(), "a response is exactly a u32");
    // SAFETY: 4 bytes, aligned for u32.
    unsafe { r.as_mut_ptr().cast::<u32>().write(14) };
    // SAFETY: written in full.
    unsafe { r.send() }.unwrap();
    drop(active);
    assert_eq!(
        *pending.receive_timeout(Duration::from_secs(10)).unwrap().unwrap(),
        14
    );
}

#[test]
fn a_raw_service_of_other_types_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _typed = Service::named("raw/rr")
        .unwrap()
        .root(dir.path())
        .request_response::<u64, u64>()
        .create()
        .unwrap();
    let e = raw(dir.path()).unwrap_err();
    assert!(
        matches!(e, OpenOrCreateError::Open(OpenError::IncompatiblePayload { .. })),
        "{e:?}"
    );
}
