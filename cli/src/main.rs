//! `iox`: list, inspect, watch, clean and remove the iox services under a root;
//! notify or listen on event services; and, on publish-subscribe services, print
//! samples by their recorded schema (`echo`), measure their rate (`hz`), publish a
//! value (`pub`), record into MCAP files (`record`), play recordings back
//! (`replay`) and serve them live to Foxglove (`foxglove`).
//!
//! `list` and `show` print the attributes services' creators recorded, and
//! `list --attribute KEY=VALUE` lists only the services that have them (`filter.rs`).
//!
//! Reading commands (`list`, `show`, `watch`, `clean --dry-run`) use
//! `iox_service::inspect`, which only loads from the files and never changes them.
//! `clean` runs the same dead-process recovery as opening a service does; `remove`
//! deletes a service (refusing while live ports exist unless `--force`). `notify` and
//! `listen` open an event service and make a notifier or a listener on it.
//!
//! `clean` needs no new file under the root, so it works on a full one (where it
//! frees the space dead processes held); `clean --dry-run` lists exactly the files a
//! `clean` run at the same moment would remove.
//!
//! Exit codes: 0 ok, 1 not found (the service, or the root directory), 2 usage,
//! 3 corrupt files found, 4 refused (`remove` with live ports and no `--force`;
//! `notify`/`listen` on a service whose ports of that kind are all taken),
//! 5 the root cannot be used (read-only, not writable, full, other I/O error),
//! 6 the service has another pattern than the command works on (`notify`/`listen` on
//! a publish-subscribe service, `echo`/`hz`/`pub` on an event service).
//! `echo`, `hz` and `listen` stopped by `--timeout` exit 0; `pub` refusing its input
//! exits 2; `replay` of a file cut short replays what is readable, then exits 3.

mod commit_file;
mod echo;
mod events;
mod filter;
mod foxglove;
mod publish;
mod record;
mod render;
mod replay;
mod topic;

use iox_cli::{ros_form, value};

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use iox_service::inspect::{self, Health, InspectError, ServiceInfo};
use iox_service::{CleanupError, RemoveError, RootError, Service};

const NOT_FOUND: u8 = 1;
const CORRUPT: u8 = 3;
const REFUSED: u8 = 4;
const ROOT_UNUSABLE: u8 = 5;
const WRONG_PATTERN: u8 = 6;

/// Inspect and tidy iox shared-memory services.
#[derive(Parser)]
#[command(name = "iox", version, about)]
struct Cli {
    /// Directory holding the services (default: $IOX_ROOT, else /dev/shm).
    #[arg(long, global = true)]
    root: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every service: name, pattern, payload, memory type, pool size, ports, state,
    /// and the attributes its creator recorded.
    ///
    /// Example: iox list --attribute ros2/type=std_msgs/msg/String --attribute ros2/qos
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Only services with this attribute: KEY=VALUE (exactly that value) or KEY
        /// (any value). Repeat it: every one must hold.
        #[arg(long = "attribute", value_name = "KEY[=VALUE]")]
        attributes: Vec<String>,
    },
    /// One service: its static config (with its attributes), size classes, ports and
    /// users.
    Show {
        /// The service name.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// A live view of one service's pool occupancy and samples per second (refreshing in
    /// place on a terminal; one plain line per refresh otherwise).
    Watch {
        /// The service name.
        name: String,
        /// Seconds between refreshes.
        #[arg(long, default_value_t = 1.0)]
        interval: f64,
        /// Stop after this many refreshes (default: until interrupted).
        #[arg(long)]
        count: Option<u64>,
    },
    /// Recover what dead processes left: port slots, chunks, handles, files; remove
    /// services no live process uses.
    Clean {
        /// Only this service (default: everything under the root).
        name: Option<String>,
        /// Print what would be recovered and removed, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Notify an event service's listeners of one event id.
    Notify {
        /// The service name.
        name: String,
        /// The event id (default 0).
        #[arg(long)]
        id: Option<u32>,
        /// Wait for the service to be created instead of failing.
        #[arg(long)]
        wait: bool,
    },
    /// Listen on an event service: print each event id as it comes, one per line.
    Listen {
        /// The service name.
        name: String,
        /// Stop after this long (seconds, or with ms/s/m: 500ms, 10s, 1m); default:
        /// until interrupted.
        #[arg(long, value_parser = events::parse_duration)]
        timeout: Option<Duration>,
        /// Stop after this many ids.
        #[arg(long)]
        count: Option<u64>,
        /// Wait for the service to be created instead of failing (within --timeout).
        #[arg(long)]
        wait: bool,
    },
    /// Print each sample of a publish-subscribe service, with field names (RON, or JSON).
    ///
    /// Example: iox echo examples/readings --count 3
    #[command(visible_alias = "sub")]
    Echo(echo::EchoArgs),
    /// The rate samples arrive at: Hz, and the mean, min, max and std of the interval.
    ///
    /// Example: iox hz examples/readings --window 100
    Hz(echo::HzArgs),
    /// Publish a value, written as RON or JSON by the service's schema.
    ///
    /// Example: iox pub examples/readings '(seq: 1, value: 0.5)' --rate 10 --count 20
    Pub(publish::PubArgs),
    /// Record publish-subscribe services into an MCAP file, one channel per service.
    ///
    /// Example: iox record -o run.mcap 'robot/*' examples/readings --duration 10s
    Record(record::RecordArgs),
    /// Serve services live to Foxglove or Lichtblick over the Foxglove WebSocket
    /// protocol (ws://127.0.0.1:8765), one channel per service, without ROS.
    ///
    /// Example: iox foxglove 'robot/*' camera/image
    Foxglove(foxglove::FoxgloveArgs),
    /// Republish a recording into its services (created from the recorded configs).
    ///
    /// Example: iox replay run.mcap --rate 2 --topics 'robot/*'
    Replay(replay::ReplayArgs),
    /// Remove a service's files.
    Remove {
        /// The service name.
        name: String,
        /// Remove it even while live processes have ports on it.
        #[arg(long)]
        force: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let root = cli.root.unwrap_or_else(iox_mempool::root::root_dir);
    match run(&root, cli.command) {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            eprintln!("iox: {message}");
            ExitCode::from(message.code)
        }
    }
}

/// A failure with its exit code.
struct Failure {
    code: u8,
    text: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

fn fail(code: u8, text: impl Into<String>) -> Failure {
    Failure {
        code,
        text: text.into(),
    }
}

/// A root that cannot be used: "not found" if it is missing or not a directory.
fn root_failure(e: RootError) -> Failure {
    match e {
        RootError::Missing { .. } | RootError::NotADirectory { .. } => fail(NOT_FOUND, e.to_string()),
        _ => fail(ROOT_UNUSABLE, e.to_string()),
    }
}

fn inspect_one(root: &Path, name: &str) -> Result<ServiceInfo, Failure> {
    inspect::inspect_in(root, name).map_err(|e| match e {
        InspectError::NotFound(_) => fail(NOT_FOUND, format!("{e} under {}", root.display())),
        InspectError::Root(e) => root_failure(e),
        _ => fail(2, e.to_string()),
    })
}

fn corrupt_code(services: &[ServiceInfo]) -> u8 {
    if services.iter().any(|s| s.health == Health::Corrupt) {
        CORRUPT
    } else {
        0
    }
}

fn json(value: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(value).expect("inspection results always serialise")
}

fn run(root: &Path, command: Command) -> Result<u8, Failure> {
    match command {
        Command::List {
            json: as_json,
            attributes,
        } => {
            let filters = attributes
                .iter()
                .map(|a| filter::AttributeFilter::parse(a))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| fail(2, e))?;
            let mut all = inspect::inspect_all_in(root).map_err(root_failure)?;
            all.services.retain(|s| filters.iter().all(|f| f.holds(s)));
            if as_json {
                println!("{}", json(&all));
            } else {
                print!("{}", render::list(&all));
            }
            Ok(corrupt_code(&all.services))
        }
        Command::Show { name, json: as_json } => {
            let info = inspect_one(root, &name)?;
            if as_json {
                println!("{}", json(&info));
            } else {
                print!("{}", render::show(&info));
            }
            Ok(corrupt_code(std::slice::from_ref(&info)))
        }
        Command::Watch {
            name,
            interval,
            count,
        } => {
            let interval = Duration::try_from_secs_f64(interval)
                .map_err(|_| fail(2, format!("--interval {interval} is not a duration")))?;
            // A terminal gets a view refreshing in place; a pipe or a file gets one
            // plain line per refresh, without screen control.
            let in_place = std::io::stdout().is_terminal();
            let mut last: Option<(Instant, u64)> = None;
            let mut n = 0;
            loop {
                let info = inspect_one(root, &name)?;
                let now = Instant::now();
                let rate = last.map(|(t, sent)| {
                    info.sent().saturating_sub(sent) as f64 / now.duration_since(t).as_secs_f64()
                });
                if in_place {
                    // Clear the screen and home the cursor.
                    print!("\x1b[2J\x1b[H{}", render::watch(&info, rate, interval));
                } else {
                    print!("{}", render::watch_line(&info, rate));
                }
                last = Some((now, info.sent()));
                n += 1;
                if count.is_some_and(|c| n >= c) {
                    return Ok(corrupt_code(std::slice::from_ref(&info)));
                }
                std::thread::sleep(interval);
            }
        }
        Command::Clean { name, dry_run: true } => {
            let services = match &name {
                Some(name) => vec![inspect_one(root, name)?],
                None => {
                    let all = inspect::inspect_all_in(root).map_err(root_failure)?;
                    for f in all.dead_node_files.iter().chain(&all.dead_temp_files) {
                        println!("would remove file {f} (left by a dead process)");
                    }
                    all.services
                }
            };
            for s in &services {
                print!("{}", render::dry_run(s));
            }
            Ok(corrupt_code(&services))
        }
        Command::Clean {
            name: Some(name),
            dry_run: false,
        } => {
            inspect_one(root, &name)?; // not found -> exit 1
            let report = Service::cleanup_dead_in(root, &name).map_err(|e| match e {
                CleanupError::Root(e) => root_failure(e),
                e => fail(CORRUPT, format!("{name}: {e}")),
            })?;
            println!("{}", render::report(&report));
            Ok(0)
        }
        Command::Clean {
            name: None,
            dry_run: false,
        } => {
            let (report, failed) = Service::cleanup_all_dead_in(root).map_err(|e| match e {
                CleanupError::Root(e) => root_failure(e),
                e => fail(CORRUPT, e.to_string()),
            })?;
            println!("{}", render::report(&report));
            for (stem, e) in &failed {
                eprintln!("iox: {stem}: {e}");
            }
            Ok(if failed.is_empty() { 0 } else { CORRUPT })
        }
        Command::Notify { name, id, wait } => events::notify(root, &name, id, wait),
        Command::Listen {
            name,
            timeout,
            count,
            wait,
        } => events::listen(root, &name, timeout, count, wait),
        Command::Echo(args) => echo::echo(root, args),
        Command::Hz(args) => echo::hz(root, args),
        Command::Pub(args) => publish::publish(root, args),
        Command::Record(args) => record::record(root, args),
        Command::Replay(args) => replay::replay(root, args),
        Command::Foxglove(args) => foxglove::foxglove(root, args),
        Command::Remove { name, force } => {
            let info = inspect_one(root, &name)?;
            let (p, s) = info.live_ports();
            if p + s > 0 && !force {
                return Err(fail(
                    REFUSED,
                    format!(
                        "service {name:?} has {p} live publisher(s) and {s} live subscriber(s); use --force to remove it anyway"
                    ),
                ));
            }
            Service::remove_in(root, &name).map_err(|e| match e {
                RemoveError::Root { source, .. } => root_failure(source),
                e => fail(CORRUPT, e.to_string()),
            })?;
            println!("removed {name}");
            Ok(0)
        }
    }
}

/// A size in bytes: a number, or with K, M or G (powers of 1024).
fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (number, scale) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&t[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    number
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{text:?} is not a size (e.g. 1000000, 64K, 100M, 2G)"))
}
