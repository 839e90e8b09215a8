//! `iox-ros2`: the gateway program. See the crate docs and the README's "With ROS 2".

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use iox_ros2_gateway::{Gateway, Options, install};

/// Carries iox publish-subscribe services to ROS 2 topics and back.
///
/// ROS arguments follow `--ros-args` as for any ROS 2 node (`--ros-args -r
/// __node:=camera_gateway -r /camera/front:=/front -p use_sim_time:=true`); rcl parses
/// them.
#[derive(Debug, Parser)]
#[command(name = "iox-ros2", version)]
struct Args {
    /// Export iox services matching this pattern as ROS 2 topics ('camera/*', '**'). Repeatable.
    #[arg(long = "export", value_name = "PATTERN")]
    export: Vec<String>,
    /// Import ROS 2 topics whose service name matches this pattern. Repeatable.
    #[arg(long = "import", value_name = "PATTERN")]
    import: Vec<String>,
    /// Import services matching this pattern as CDR bytes even when they are images. Repeatable.
    #[arg(long = "cdr", value_name = "PATTERN")]
    cdr: Vec<String>,
    /// Export iox request-response services matching this pattern as ROS 2 services. Repeatable.
    #[arg(long = "export-service", value_name = "PATTERN")]
    export_service: Vec<String>,
    /// Import ROS 2 services whose service name matches this pattern. Repeatable.
    #[arg(long = "import-service", value_name = "PATTERN")]
    import_service: Vec<String>,
    /// The ROS 2 install's prefix (default: $AMENT_PREFIX_PATH). Repeatable.
    #[arg(long = "ros-prefix", value_name = "DIR")]
    ros_prefix: Vec<PathBuf>,
    /// The QoS of imported topics matching PATTERN, which DDS discovery does not tell
    /// whole (no depth): 'camera/*=reliable, volatile, keep_last 100'. Repeatable; the
    /// first match wins.
    #[arg(long = "qos", value_name = "PATTERN=QOS")]
    qos: Vec<String>,
    /// The pool size classes of services imported for PATTERN: 'camera/*=8Mx24,64Kx32'
    /// (SIZExCOUNT, sizes in bytes or with K, M, G). Repeatable; the first match wins.
    #[arg(long = "pool", value_name = "PATTERN=CLASSES")]
    pool: Vec<String>,
    /// Fast DDS's builtin transports for the gateway's participant, when
    /// FASTDDS_BUILTIN_TRANSPORTS is not set: LARGE_DATA (UDP for discovery, then shared
    /// memory or TCP; for images and point clouds several times faster), DEFAULT, or any
    /// value Fast DDS takes. Every node of the ROS graph must use the same setting: a
    /// LARGE_DATA participant and a DEFAULT one never match. Default: the environment's.
    #[arg(long, value_name = "VALUE")]
    dds_transports: Option<String>,
    /// The ROS node's name.
    #[arg(long, default_value = "iox_gateway")]
    node_name: String,
    /// The iox root (default: $IOX_ROOT or /dev/shm).
    #[arg(long)]
    root: Option<PathBuf>,
    /// Seconds between status lines on stderr (0: none).
    #[arg(long, default_value_t = 10)]
    status_interval: u64,
}

/// Splits a command line into the gateway's own arguments and the ROS arguments rcl
/// parses, as every ROS 2 node's command line has them: from `--ros-args` up to a
/// `--` that ends them (or the end); several `--ros-args` sections are all ROS's.
fn split_ros_args(all: impl IntoIterator<Item = String>) -> (Vec<String>, Vec<String>) {
    let (mut own, mut ros) = (Vec::new(), Vec::new());
    let mut in_ros = false;
    for arg in all {
        match arg.as_str() {
            "--ros-args" => {
                in_ros = true;
                ros.push(arg);
            }
            "--" if in_ros => {
                in_ros = false;
                ros.push(arg);
            }
            _ if in_ros => ros.push(arg),
            _ => own.push(arg),
        }
    }
    (own, ros)
}

fn main() -> std::process::ExitCode {
    let (own, ros_args) = split_ros_args(std::env::args());
    let args = Args::parse_from(own);
    if args.export.is_empty()
        && args.import.is_empty()
        && args.export_service.is_empty()
        && args.import_service.is_empty()
    {
        eprintln!(
            "iox-ros2: nothing to do: give --export, --import, --export-service or --import-service patterns"
        );
        return std::process::ExitCode::from(2);
    }
    let transports = match (std::env::var("FASTDDS_BUILTIN_TRANSPORTS"), &args.dds_transports) {
        (Ok(set), _) => set,
        (Err(_), Some(chosen)) => {
            // SAFETY: no other thread runs yet (main's first steps, before ROS is
            // loaded or any thread is started), so nothing reads the environment
            // while it changes; the re-executed gateway and ROS inherit it.
            unsafe { std::env::set_var("FASTDDS_BUILTIN_TRANSPORTS", chosen) };
            chosen.clone()
        }
        (Err(_), None) => "DEFAULT".into(),
    };
    let prefixes = install::prefixes(&args.ros_prefix);
    let dirs = install::library_dirs(&prefixes);
    if let Some(e) = install::reexec_with_libraries(&dirs) {
        eprintln!("iox-ros2: cannot restart with the ROS libraries on LD_LIBRARY_PATH: {e}");
        return std::process::ExitCode::FAILURE;
    }
    let mut o = Options::new();
    if let Some(root) = args.root {
        o.root = root;
    }
    o.export = args.export;
    o.import = args.import;
    o.cdr = args.cdr;
    o.export_services = args.export_service;
    o.import_services = args.import_service;
    o.ros_prefixes = prefixes;
    o.node_name = args.node_name;
    o.ros_args = ros_args;
    o.qos = args.qos;
    o.pools = args.pool;
    let gateway = match Gateway::start(o, &dirs) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("iox-ros2: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    eprintln!(
        "iox-ros2: running (ROS node {}, Fast DDS transports {transports})",
        gateway.node_name()
    );
    let term = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, term.clone()) {
            eprintln!("iox-ros2: cannot handle signal {sig}: {e}");
        }
    }
    let mut last = std::time::Instant::now();
    while !term.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        if args.status_interval > 0 && last.elapsed() >= Duration::from_secs(args.status_interval) {
            last = std::time::Instant::now();
            eprintln!("iox-ros2: {}", gateway.status());
        }
    }
    eprintln!("iox-ros2: stopping: {}", gateway.status());
    gateway.stop();
    std::process::ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::split_ros_args;

    #[test]
    fn ros_arguments_are_split_off() {
        let line = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        let (own, ros) = split_ros_args(line(
            "iox-ros2 --export ** --ros-args -r __node:=gw -p a:=1 -- --import x --ros-args -r __ns:=/r",
        ));
        assert_eq!(own, line("iox-ros2 --export ** --import x"));
        assert_eq!(
            ros,
            line("--ros-args -r __node:=gw -p a:=1 -- --ros-args -r __ns:=/r")
        );
        let (own, ros) = split_ros_args(line("iox-ros2 --import **"));
        assert_eq!((own, ros), (line("iox-ros2 --import **"), vec![]));
    }
}
