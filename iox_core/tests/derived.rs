//! What `#[derive(ZeroCopySafe)]` gives the core: the payload identity
//! (`iox_core::zero_copy`) and the schema (`iox_core::schema`), checked and compared.
//! Through the facade, as users derive it: the derive's output names `iox_service`.

use iox_service::schema::{Field, Schema, SchemaError};
use iox_service::{Payload, PayloadType, ZeroCopySafe};

#[derive(ZeroCopySafe, Clone, Copy)]
#[repr(C)]
struct Inner {
    a: u8,
    b: u32,
}

#[derive(ZeroCopySafe, Clone, Copy)]
#[repr(C)]
struct Outer {
    flag: bool,
    inner: [Inner; 2],
    t: (u16, f64),
}

#[test]
fn derived_schemas_check_and_name_their_fields() {
    let s = Outer::schema();
    s.check(size_of::<Outer>() as u64).unwrap();
    let Schema::Struct { fields, .. } = &s else {
        panic!("{s:?}")
    };
    let names: Vec<_> = fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["flag", "inner", "t"]);
    assert_eq!(fields[1].offset, 4);
    assert_eq!(fields[2].offset, std::mem::offset_of!(Outer, t) as u64);
    // Padding after `a` (3 bytes) in each Inner is not data.
    assert_eq!(Inner::schema().data_ranges(), [(0, 1), (4, 4)]);
    assert_eq!(<[u32; 4]>::schema().data_ranges(), [(0, 16)]);
}

#[test]
fn differences_name_the_field() {
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    struct A {
        x: f64,
        y: f64,
    }
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    struct B {
        x: f64,
        y: i64,
    }
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    struct C {
        x: f64,
        z: f64,
    }
    let d = A::schema().difference(&B::schema()).unwrap();
    assert_eq!(
        (d.field.as_str(), d.left.as_str(), d.right.as_str()),
        ("y", "f64", "i64")
    );
    assert_eq!(A::schema().difference(&C::schema()).unwrap().field, "y");
    assert_eq!(A::schema().difference(&A::schema()), None);
    assert_eq!(A::schema().difference(&Schema::Bytes { size: 16 }), None);
    assert!(A::schema().difference(&Schema::Bytes { size: 8 }).is_some());
    let d = Outer::schema().difference(&Outer::schema()).is_none();
    assert!(d);
    assert!(Outer::schema().is_complete());
    let opaque = Schema::Array {
        element: Box::new(Schema::Bytes { size: 2 }),
        len: 2,
    };
    assert!(!opaque.is_complete());
}

#[test]
fn damaged_schemas_are_refused() {
    let bad = Schema::Struct {
        name: "S".into(),
        size: 8,
        alignment: 8,
        fields: vec![Field {
            name: "x".into(),
            offset: 4,
            schema: Schema::F64,
        }],
    };
    assert!(matches!(bad.check(8), Err(SchemaError::FieldOutside { .. })));
    let huge = Schema::Array {
        element: Box::new(Schema::U64),
        len: u64::MAX,
    };
    assert!(matches!(huge.check(8), Err(SchemaError::Overflow(_))));
    let mut deep = Schema::U8;
    for _ in 0..40 {
        deep = Schema::Array {
            element: Box::new(deep),
            len: 1,
        };
    }
    assert_eq!(deep.check(1), Err(SchemaError::TooLarge));
    // Zero-size elements: the size never overflows, the count is bounded.
    let empty = || Schema::Struct {
        name: "Empty".into(),
        size: 0,
        alignment: 1,
        fields: vec![],
    };
    let endless = Schema::Array {
        element: Box::new(empty()),
        len: u64::MAX,
    };
    assert_eq!(endless.check(0), Err(SchemaError::TooLarge));
    let few = Schema::Array {
        element: Box::new(empty()),
        len: 4,
    };
    few.check(0).unwrap();
    assert_eq!(few.data_ranges(), []);
    assert!(matches!(Schema::U32.check(8), Err(SchemaError::Size { .. })));
    let unnamed = Schema::Struct {
        name: String::new(),
        size: 0,
        alignment: 1,
        fields: vec![],
    };
    assert!(matches!(unnamed.check(0), Err(SchemaError::Name(_))));
}

#[test]
fn any_bit_pattern() {
    #[derive(Clone, Copy)]
    struct HandWritten {
        _value: u64,
    }
    // SAFETY: a plain number; ANY_BIT_PATTERN is left at its default.
    unsafe impl ZeroCopySafe for HandWritten {}

    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    struct Flagged {
        on: bool,
        level: u8,
    }
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    struct Padded {
        a: u8,
        b: u32,
    }
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C, packed)]
    struct Packed {
        a: u8,
        b: u32,
    }
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(transparent)]
    struct Wrapped(Packed);
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C, align(8))]
    struct Aligned(u32);
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    struct Nested {
        p: Padded,
    }
    // Read through a function: clippy refuses `assert!` on a constant.
    fn abp<T: ZeroCopySafe>() -> bool {
        T::ANY_BIT_PATTERN
    }
    assert!(abp::<u8>() && abp::<i128>() && abp::<f64>());
    assert!(abp::<usize>() && abp::<[u32; 4]>());
    assert!(!abp::<bool>() && !abp::<[bool; 2]>());
    assert!(abp::<(u32, f32)>() && abp::<(u8, u8, u16, u32)>());
    // Padding, or a bool, in a tuple or array.
    assert!(!abp::<(u8, u16)>() && !abp::<(u64, u8)>());
    assert!(!abp::<(u8, bool)>());
    assert!(abp::<[(u16, u16); 3]>() && !abp::<([u8; 3], u32)>());
    assert!(!abp::<HandWritten>());
    assert!(!abp::<Flagged>() && !abp::<Padded>());
    assert!(abp::<Packed>() && abp::<Wrapped>());
    assert!(!abp::<Aligned>() && !abp::<Nested>());
}

/// A derived type's identity, in a slice and in a tuple.
#[test]
fn derived_payload_identity() {
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    #[iox(type_name = "Inner")]
    struct Inner {
        a: u32,
        b: [u8; 4],
    }
    assert_eq!(
        <[Inner]>::payload_type(),
        PayloadType::Slice {
            element: "Inner".into(),
            size: 8,
            alignment: 4,
            invalid_bit_patterns: false,
        }
    );
    assert_eq!(<(Inner, u8)>::type_name(), "(Inner, u8)");
}
