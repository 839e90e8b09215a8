//! The README's "With ROS 2" walk-through, run as written: its shell block's commands
//! (the gateway, the `ros2_invert` example, the rclpy node) and its `camera_node.py`,
//! taken from the guide's ROS 2 page (docs/guide/ros2.md), inside a loopback-only network namespace with the test's own
//! iox root. Paths of the built programs and of the ROS venv are the only things
//! replaced (`target/release/...` by this build's, `/tmp/ros` by `IOX_ROS_VENV`).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::in_netns;
use iox_testkit::Reaped;

/// The README's fenced blocks of the section `heading`, as (language, text).
fn blocks(heading: &str) -> Vec<(String, String)> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/guide/ros2.md")).unwrap();
    let start = readme
        .find(heading)
        .unwrap_or_else(|| panic!("README has {heading:?}"));
    let rest = &readme[start + heading.len()..];
    let section = &rest[..rest.find("\n## ").unwrap_or(rest.len())];
    let mut out = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in section.lines() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(lang)) => current = Some((lang.to_owned(), String::new())),
            (Some(_), Some("")) => out.extend(current.take()),
            (Some((_, text)), _) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

#[test]
fn the_ros2_walk_through_runs_as_written() {
    in_netns("the_ros2_walk_through_runs_as_written", |net| {
        let blocks = blocks("## With ROS 2");
        let node = &blocks
            .iter()
            .find(|(lang, text)| lang == "python" && text.starts_with("# camera_node.py"))
            .expect("the README's camera_node.py")
            .1;
        let commands = &blocks
            .iter()
            .find(|(lang, text)| lang == "sh" && text.contains("target/release/iox-ros2 "))
            .expect("the README's walk-through commands")
            .1;
        let node_path = net.dir.join("camera_node.py");
        std::fs::write(&node_path, node).unwrap();
        let examples = std::env::current_exe()
            .unwrap()
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("examples");
        let programs: [(&str, PathBuf); 4] = [
            (
                "target/release/iox-ros2",
                PathBuf::from(env!("CARGO_BIN_EXE_iox-ros2")),
            ),
            (
                "target/release/examples/ros2_invert",
                examples.join("ros2_invert"),
            ),
            ("/tmp/ros", net.venv.clone()),
            ("camera_node.py", node_path),
        ];
        let mut background = Vec::new();
        let lines: Vec<&str> = commands.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 3, "the walk-through is three commands:\n{commands}");
        for (i, line) in lines.iter().enumerate() {
            let (line, in_background) = match line.trim().strip_suffix('&') {
                Some(l) => (l.trim(), true),
                None => (line.trim(), false),
            };
            let words: Vec<String> = line
                .split_whitespace()
                .map(|w| {
                    programs
                        .iter()
                        .find_map(|(from, to)| {
                            w.strip_prefix(from).map(|rest| format!("{}{rest}", to.display()))
                        })
                        .unwrap_or_else(|| w.to_owned())
                })
                .collect();
            let mut cmd = Command::new(&words[0]);
            cmd.args(&words[1..])
                .env("IOX_ROOT", &net.root)
                .stdin(Stdio::null());
            if in_background {
                let log = std::fs::File::create(net.dir.join(format!("command{i}.log"))).unwrap();
                cmd.stdout(Stdio::null()).stderr(log);
                background.push(Reaped::new(cmd.spawn().unwrap_or_else(|e| panic!("{line}: {e}"))));
            } else {
                let out = cmd.output().unwrap();
                let logs: String = (0..i)
                    .map(|j| {
                        std::fs::read_to_string(net.dir.join(format!("command{j}.log"))).unwrap_or_default()
                    })
                    .collect();
                let said = String::from_utf8_lossy(&out.stdout);
                assert!(
                    out.status.success() && said.contains("inverted frames back through iox"),
                    "{line}: {}\n{said}{}\nthe other commands said:\n{logs}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        drop(background);
    });
}
