//! Publishes `--count N` readings (default 10), one every 100 ms, once a subscriber
//! is connected (it waits up to 30 s for one). Run `subscriber` in another terminal.

fn main() -> std::process::ExitCode {
    iox_examples::exit_with(iox_examples::run_publisher(
        iox_examples::count_arg(10),
        std::time::Duration::from_millis(100),
    ))
}
