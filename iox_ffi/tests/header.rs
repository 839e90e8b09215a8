//! The checked-in C header is what cbindgen makes of this crate's source now: a change
//! of the ABI that forgets the header fails here. `IOX_FFI_WRITE_HEADER=1` rewrites it.

use std::path::Path;

#[test]
fn the_checked_in_header_is_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut made = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen reads the crate")
        .write(&mut made);
    let path = dir.join("include/iox.h");
    if std::env::var_os("IOX_FFI_WRITE_HEADER").is_some() {
        std::fs::write(&path, &made).expect("write the header");
    }
    let kept = std::fs::read(&path).unwrap_or_default();
    assert!(
        kept == made,
        "{} is stale: regenerate it with `IOX_FFI_WRITE_HEADER=1 cargo test -p iox_ffi --test header`",
        path.display()
    );
}
