//! The main demo: runs a subscriber and a publisher as two processes (this program
//! started twice more, with `--role`), and prints what they print. Exits non-zero if
//! either fails. Ctrl-C reaches all three (one process group): the two children leave
//! their WaitSets with a termination request and exit cleanly, and this process,
//! holding a WaitSet for that reason alone, waits for them instead of dying first.

use std::process::Command;
use std::time::Duration;

fn main() -> std::process::ExitCode {
    iox_examples::exit_with(run())
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let count = iox_examples::count_arg(10);
    let args: Vec<String> = std::env::args().collect();
    match args
        .iter()
        .position(|a| a == "--role")
        .map(|i| args.get(i + 1).map(String::as_str))
    {
        Some(Some("publisher")) => return iox_examples::run_publisher(count, Duration::from_millis(100)),
        Some(Some("subscriber")) => return iox_examples::run_subscriber(count),
        Some(_) => return Err("--role takes publisher or subscriber".into()),
        None => {}
    }
    // Installs the SIGINT/SIGTERM handling: a signal now leaves us running to collect
    // the children (and a second one still terminates us).
    let signals = iox_service::WaitSet::new()?;
    let me = std::env::current_exe()?;
    let spawn = |role: &str| {
        Command::new(&me)
            .args(["--role", role, "--count", &count.to_string()])
            .spawn()
    };
    let mut subscriber = spawn("subscriber")?;
    let mut publisher = spawn("publisher")?;
    let (p, s) = (publisher.wait()?, subscriber.wait()?);
    if !p.success() || !s.success() {
        return Err(format!("publisher {p}, subscriber {s}").into());
    }
    let stopped = signals
        .wait_and_process_once_with_timeout(|_| iox_service::CallbackProgression::Continue, Duration::ZERO)?;
    if stopped == iox_service::WaitSetRunResult::TerminationRequest {
        println!("pubsub: stopped by a signal; both processes left cleanly");
        return Ok(());
    }
    println!("pubsub: {count} readings went from one process to the other through shared memory");
    Ok(())
}
