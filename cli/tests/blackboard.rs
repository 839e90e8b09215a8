//! `iox show` and `iox list` on blackboards: keys, value types, generations, pins and
//! writers, in text and JSON.

use iox_service::Service;

mod common;
use common::{code, iox, text};

#[test]
fn show_and_list_describe_keys_generations_pins_and_writers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let board = Service::named("cli/board")
        .unwrap()
        .root(root)
        .blackboard::<u16>()
        .max_readers(2)
        .add::<f64>(7, 0.0)
        .add::<[u32; 4]>(300, [0; 4])
        .create()
        .unwrap();
    let writer = board.writer_builder().create().unwrap();
    let reader = board.reader_builder().create().unwrap();
    let speed = writer.entry::<f64>(&7).unwrap();
    speed.update_with_copy(1.0).unwrap();
    speed.update_with_copy(2.0).unwrap();
    let entry = reader.entry::<[u32; 4]>(&300).unwrap();
    let _guard = entry.read().unwrap();

    let out = iox(root, &["show", "cli/board"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let shown = text(&out);
    assert!(shown.contains("pattern   blackboard, 2 keys of u16"), "{shown}");
    assert!(
        shown.contains("limits    1 writers, 2 readers, 6 buffers per key"),
        "{shown}"
    );
    let row = |key: &str| {
        shown
            .lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .unwrap_or_else(|| panic!("a row for key {key}: {shown}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    let seven = row("7");
    assert_eq!(
        seven[seven.len() - 3..],
        ["3", "0", "no"],
        "generation 3, unpinned, unlocked: {shown}"
    );
    let three_hundred = row("300");
    assert_eq!(
        three_hundred[three_hundred.len() - 3..],
        ["1", "1", "no"],
        "the guard pins one buffer: {shown}"
    );
    assert!(shown.lines().any(|l| l.starts_with("writer")), "{shown}");
    assert!(shown.lines().any(|l| l.starts_with("reader")), "{shown}");

    let out = iox(root, &["show", "cli/board", "--json"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let json: serde_json::Value = serde_json::from_str(&text(&out)).unwrap();
    let keys = json["keys"].as_array().expect("keys in the JSON");
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0]["key"], "7");
    assert_eq!(keys[0]["generation"], 3);

    let listed = text(&iox(root, &["list"]));
    let row = listed
        .lines()
        .find(|l| l.starts_with("cli/board "))
        .expect("a row");
    assert!(
        row.contains("Blackboard") && row.contains("2 keys of u16"),
        "{row}"
    );
}
