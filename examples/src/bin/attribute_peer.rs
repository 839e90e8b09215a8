//! Service attributes from a Rust process, for the Python attribute tests
//! (`iox_python/tests/test_attributes.py`), on a publish-subscribe service of `u64`:
//!
//! - `attribute_peer create SERVICE KEY=VALUE...`: creates the service recording the
//!   attributes (a `\n` in a value given as the two characters `\` `n`), prints
//!   `ready`, waits (up to 30 s) for a subscriber, sends it the sample `1`, and waits
//!   (up to 30 s) for it to leave.
//! - `attribute_peer show SERVICE [KEY[=VALUE]...]`: opens the service requiring each
//!   `KEY=VALUE` (that value) and `KEY` (any value), and prints its attributes, one
//!   `KEY=VALUE` line each, sorted by key (newlines in values as `\n`); a requirement
//!   the service does not meet exits 1 with the error, which names the key and values.

use std::time::{Duration, Instant};

use iox_service::Service;

fn wait_until(what: &str, mut done: impl FnMut() -> bool) -> Result<(), Box<dyn std::error::Error>> {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > iox_examples::PATIENCE {
            return Err(format!("{what} within 30 s").into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

fn create(name: &str, pairs: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let mut builder = Service::named(name)?.publish_subscribe::<u64>();
    for pair in pairs {
        let (key, value) = pair.split_once('=').ok_or("create takes KEY=VALUE arguments")?;
        builder = builder.attribute(key, value.replace("\\n", "\n"));
    }
    let svc = builder.create()?;
    let publisher = svc.publisher_builder().create()?;
    println!("ready");
    wait_until("no subscriber connected", || svc.port_counts().1 > 0)?;
    publisher.loan_uninit()?.write_payload(1).send()?;
    wait_until("the subscriber did not leave", || svc.port_counts().1 == 0)
}

fn show(name: &str, requirements: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let mut builder = Service::named(name)?.publish_subscribe::<u64>();
    for r in requirements {
        builder = match r.split_once('=') {
            Some((key, value)) => builder.require_attribute(key, value),
            None => builder.require_attribute_key(r.as_str()),
        };
    }
    let svc = builder.open()?;
    for (key, value) in svc.attributes() {
        println!("{key}={}", value.replace('\n', "\\n"));
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    iox_examples::exit_with(match args.as_slice() {
        [mode, name, rest @ ..] if mode == "create" => create(name, rest),
        [mode, name, rest @ ..] if mode == "show" => show(name, rest),
        _ => Err("usage: attribute_peer create SERVICE KEY=VALUE... | attribute_peer show SERVICE [KEY[=VALUE]...]".into()),
    })
}
