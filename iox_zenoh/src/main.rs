//! `iox-zenoh`: the bridge program. See the crate docs and the README's "Across
//! machines" section.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use iox_zenoh::{Bridge, Options};

/// Carries iox publish-subscribe services over Zenoh, both ways.
#[derive(Debug, Parser)]
#[command(name = "iox-zenoh", version)]
struct Args {
    /// Export local services matching this pattern (Zenoh key syntax: 'camera/*', 'plan/**'). Repeatable.
    #[arg(long = "export", value_name = "PATTERN")]
    export: Vec<String>,
    /// Import services matching this pattern from Zenoh. Repeatable.
    #[arg(long = "import", value_name = "PATTERN")]
    import: Vec<String>,
    /// Zenoh endpoint to connect to (tcp/10.0.0.2:7447). Repeatable.
    #[arg(long, value_name = "ENDPOINT")]
    connect: Vec<String>,
    /// Zenoh endpoint to listen on (tcp/0.0.0.0:7447). Repeatable.
    #[arg(long, value_name = "ENDPOINT")]
    listen: Vec<String>,
    /// Zenoh config file (JSON5) for everything else Zenoh offers; --connect/--listen override its endpoints.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Key prefix: service 'camera/front' travels as '<prefix>/camera/front'.
    #[arg(long, default_value = "iox")]
    prefix: String,
    /// The iox root (default: $IOX_ROOT or /dev/shm).
    #[arg(long)]
    root: Option<PathBuf>,
    /// Seconds between status lines on stderr (0: none).
    #[arg(long, default_value_t = 10)]
    status_interval: u64,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    if args.export.is_empty() && args.import.is_empty() {
        eprintln!("iox-zenoh: nothing to do: give --export and/or --import patterns");
        return std::process::ExitCode::from(2);
    }
    let mut o = Options::new();
    if let Some(root) = args.root {
        o.root = root;
    }
    o.prefix = args.prefix;
    o.export = args.export;
    o.import = args.import;
    o.connect = args.connect;
    o.listen = args.listen;
    o.zenoh_config = args.config;
    let bridge = match Bridge::start(o) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("iox-zenoh: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    eprintln!("iox-zenoh: running (zenoh id {})", bridge.session().zid());
    // SIGINT/SIGTERM end the bridge cleanly (its ports are released).
    let term = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, term.clone()) {
            eprintln!("iox-zenoh: cannot handle signal {sig}: {e}");
        }
    }
    let mut last = std::time::Instant::now();
    while !term.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        if args.status_interval > 0 && last.elapsed() >= Duration::from_secs(args.status_interval) {
            last = std::time::Instant::now();
            eprintln!("iox-zenoh: {}", bridge.status());
        }
    }
    eprintln!("iox-zenoh: stopping: {}", bridge.status());
    bridge.stop();
    std::process::ExitCode::SUCCESS
}
