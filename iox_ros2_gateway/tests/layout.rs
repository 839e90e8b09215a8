//! The gateway's C structures (`src/rcl/ffi.rs`) against the installed ROS 2 headers:
//! a C program compiled with the venv's `include/` prints each size, offset and
//! constant the gateway relies on, and each must equal the Rust side's. An install
//! whose structures differ fails here instead of corrupting memory in the gateway.
//!
//! Needs the ROS venv (`IOX_ROS_VENV`) and a C compiler (`cc`); skips without them
//! unless `IOX_REQUIRE_ROS=1`.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn c_structures_match_the_installed_headers() {
    let test = "c_structures_match_the_installed_headers";
    let Some(venv) = std::env::var_os("IOX_ROS_VENV").map(PathBuf::from) else {
        iox_testkit::skip(
            test,
            "IOX_REQUIRE_ROS",
            "IOX_ROS_VENV is not set (scripts/ros-venv.sh DIR)",
        );
        return;
    };
    let facts = iox_ros2_gateway::rcl::layout_facts();
    let dir = tempfile::tempdir().unwrap();
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <rcl/rcl.h>\n#include <rcl/graph.h>\n\
         #include <rmw/topic_endpoint_info_array.h>\n#include <rcutils/error_handling.h>\nint main(void) {\n",
    );
    for (expr, _) in &facts {
        c.push_str(&format!("  printf(\"%zu\\n\", (size_t)({expr}));\n"));
    }
    c.push_str("  return 0;\n}\n");
    let src = dir.path().join("layout.c");
    std::fs::write(&src, c).unwrap();
    let exe = dir.path().join("layout");
    let mut cc = Command::new("cc");
    cc.arg("-o").arg(&exe).arg(&src);
    for entry in std::fs::read_dir(venv.join("include")).unwrap().flatten() {
        cc.arg("-I").arg(entry.path());
    }
    let built = match cc.output() {
        Ok(o) => o,
        Err(e) => {
            iox_testkit::skip(test, "IOX_REQUIRE_ROS", format!("no C compiler (cc): {e}"));
            return;
        }
    };
    assert!(
        built.status.success(),
        "compiling against the headers failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    let values: Vec<usize> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(values.len(), facts.len());
    let wrong: Vec<String> = facts
        .iter()
        .zip(&values)
        .filter(|((_, rust), c)| rust != *c)
        .map(|((expr, rust), c)| format!("{expr}: C {c}, Rust {rust}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "the gateway's structures differ from the installed headers:\n{}",
        wrong.join("\n")
    );
}
