//! `iox show` and `iox list` on request-response services.

use iox_service::Service;

mod common;
use common::{code, iox, text};

#[test]
fn show_and_list_describe_clients_servers_and_requests_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let svc = Service::named("cli/rr")
        .unwrap()
        .root(root)
        .request_response::<u64, u32>()
        .max_clients(3)
        .max_servers(1)
        .max_active_requests_per_client(2)
        .max_response_buffer(8)
        .create()
        .unwrap();
    let server = svc.server_builder().create().unwrap();
    let client = svc.client_builder().create().unwrap();
    let _a = client.loan_uninit().unwrap().write_payload(1).send().unwrap();
    let _b = client.loan_uninit().unwrap().write_payload(2).send().unwrap();
    let _active = server.receive().unwrap().unwrap();

    let out = iox(root, &["show", "cli/rr"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let shown = text(&out);
    assert!(shown.contains("response  u32"), "{shown}");
    assert!(
        shown.contains("limits    3 clients, 1 servers, 2 active requests per client, response buffer 8"),
        "{shown}"
    );
    assert!(shown.contains("requests  2 in flight"), "{shown}");
    let client_row = shown
        .lines()
        .find(|l| l.starts_with("client"))
        .expect("a client row");
    assert!(
        client_row.trim_end().ends_with(" 2"),
        "two in flight: {client_row}"
    );
    let server_row = shown
        .lines()
        .find(|l| l.starts_with("server"))
        .expect("a server row");
    assert!(server_row.trim_end().ends_with(" 1"), "one waiting: {server_row}");

    let out = iox(root, &["list"]);
    let listed = text(&out);
    assert!(
        listed.contains("RequestResponse") && listed.contains("u64 (size 8, alignment 8) -> u32"),
        "{listed}"
    );
    let row = listed.lines().find(|l| l.starts_with("cli/rr")).unwrap();
    assert!(
        row.split_whitespace().rev().nth(2) == Some("1") && row.split_whitespace().rev().nth(1) == Some("1"),
        "one client, one server: {row}"
    );
}
