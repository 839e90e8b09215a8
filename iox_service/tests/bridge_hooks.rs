//! The hooks a bridge uses to move samples of any type as bytes:
//! `carry_payload_type`, `Sample::payload_bytes`, `Publisher::send_payload_bytes`,
//! `publisher_slot`.

use iox_service::{OpenError, Payload, SendBytesError, Service};

#[test]
fn a_byte_view_carries_typed_and_slice_payloads_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let typed = Service::named("hooks/typed")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[u32; 3]>()
        .create()
        .unwrap();
    let bytes = Service::named("hooks/typed")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[u8]>()
        .carry_payload_type(<[u32; 3] as Payload>::payload_type())
        .open()
        .unwrap();
    let raw_sub = bytes.subscriber_builder().create().unwrap();
    let typed_sub = typed.subscriber_builder().create().unwrap();
    let typed_pub = typed.publisher_builder().create().unwrap();
    let raw_pub = bytes.publisher_builder().create().unwrap();
    assert_ne!(typed_pub.publisher_slot(), raw_pub.publisher_slot());

    typed_pub
        .loan_uninit()
        .unwrap()
        .write_payload([1, 2, 3])
        .send()
        .unwrap();
    let s = raw_sub.receive().unwrap().unwrap();
    let want: Vec<u8> = [1u32, 2, 3].iter().flat_map(|v| v.to_ne_bytes()).collect();
    assert_eq!(s.payload_bytes().unwrap(), &want[..]);
    assert_eq!(s.publisher_slot(), typed_pub.publisher_slot());
    assert_eq!(*typed_sub.receive().unwrap().unwrap(), [1, 2, 3]);

    let (a, b) = want.split_at(5);
    raw_pub.send_payload_bytes(&[a, b]).unwrap();
    let t = typed_sub.receive().unwrap().unwrap();
    assert_eq!(*t, [1, 2, 3]);
    assert_eq!(t.publisher_slot(), raw_pub.publisher_slot());
    assert!(matches!(
        raw_pub.send_payload_bytes(&[&want[..11]]),
        Err(SendBytesError::Length { len: 11, .. })
    ));

    // A slice of u16 elements: lengths count elements, bytes are twice that.
    let slice = Service::named("hooks/slice")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[u8]>()
        .carry_payload_type(<[u16] as Payload>::payload_type())
        .chunk_sizes(&[64])
        .create()
        .unwrap();
    let typed = Service::named("hooks/slice")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[u16]>()
        .open()
        .unwrap();
    let sub = typed.subscriber_builder().create().unwrap();
    let raw_pub = slice.publisher_builder().create().unwrap();
    raw_pub.send_payload_bytes(&[&[1, 0, 2, 0, 3, 0]]).unwrap();
    assert_eq!(&*sub.receive().unwrap().unwrap(), &[1u16, 2, 3]);
    assert!(matches!(
        raw_pub.send_payload_bytes(&[&[1, 0, 2]]),
        Err(SendBytesError::Length { .. })
    ));
    assert!(matches!(
        raw_pub.send_payload_bytes(&[&[0; 66]]),
        Err(SendBytesError::TooLarge { len: 66, max: 64 })
    ));

    // The identity is checked on open, as for typed programs.
    let wrong = Service::named("hooks/slice")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[u8]>()
        .carry_payload_type(<[u32] as Payload>::payload_type())
        .open();
    assert!(matches!(wrong, Err(OpenError::IncompatiblePayload { .. })));
}
