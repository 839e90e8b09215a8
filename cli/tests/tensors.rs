//! `iox show` on a tensor service: the element type and that each sample carries its
//! shape and strides; and on a service whose element is no number, that it carries
//! bytes only. The tool runs as its own process.

use iox_service::{Service, ZeroCopySafe};

mod common;
use common::{code, iox, text};

#[derive(ZeroCopySafe, Clone, Copy)]
#[repr(C)]
#[iox(type_name = "Pair")]
struct Pair {
    a: f32,
    b: f32,
}

#[test]
fn show_names_a_tensor_services_element_type() {
    let dir = tempfile::tempdir().unwrap();
    let _floats = Service::named("t/floats")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[half::f16]>()
        .max_slice_len(16)
        .tensors(true)
        .create()
        .unwrap();
    let out = iox(dir.path(), &["show", "t/floats"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(
        text(&out).contains("tensors   float16, with each sample's shape and strides"),
        "{}",
        text(&out)
    );
    // A slice of structs carries no tensors: refused when created (no tensor port
    // could use it), so `iox show` never meets one on a host service.
    let refused = Service::named("t/pairs")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[Pair]>()
        .max_slice_len(16)
        .tensors(true)
        .create()
        .map(|_| ())
        .expect_err("a tensor service of structs was created");
    assert!(
        refused
            .to_string()
            .contains("a tensor service carries a slice of numbers"),
        "{refused}"
    );
    let _plain = Service::named("t/plain")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[f32]>()
        .max_slice_len(16)
        .create()
        .unwrap();
    assert!(!text(&iox(dir.path(), &["show", "t/plain"])).contains("tensors"));
}
