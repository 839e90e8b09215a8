//! Receives `--count N` readings (default 10), blocking (no busy-wait) up to 30 s for
//! each. Run `publisher` in another terminal.

fn main() -> std::process::ExitCode {
    iox_examples::exit_with(iox_examples::run_subscriber(iox_examples::count_arg(10)))
}
