//! The hot path's costs per message, deterministic: for each case of `cases` (typed,
//! slice, user-header and fan-out publish-subscribe, request-response, the blackboard,
//! a loan dropped), this program runs itself under `valgrind --tool=lackey
//! --trace-mem=yes` and counts, per message and per side (the publisher's send, the
//! subscriber's receive, ...), the instructions executed and the shared-memory cache
//! lines touched and written, and the lines two sides share with a write between them
//! (each one moves between cores when the sides are two processes: what the instruction
//! count alone does not show), and the system calls per message. See `trace` for how
//! the log is read.
//!
//! ```sh
//! cargo run --release -p iox_hotpath                      # the table
//! cargo run --release -p iox_hotpath -- --check           # against benches/hotpath/costs.txt
//! cargo run --release -p iox_hotpath -- --write           # record the new numbers
//! ```
//!
//! What the counts do not see: the kernel's work in a system call (the calls are
//! counted, not their cost); a line two processes share more than once in a message
//! (lines are counted per message, not transfers); where the compiler moves work
//! across a marker (a marker is a load, not a barrier: such a move shows as one side's
//! rise and another's fall). A shared mapping made while the messages run is refused.
//!
//! `--check` fails (exit 1) when any count rises above the committed one: lines,
//! written lines, shared lines and system calls exactly; instructions exactly with the rustc that
//! recorded them (the file names it) and within 3 % with another (code generation
//! moves them; the check says so). A commit that raises a number on purpose runs
//! `--write` and says why. Needs valgrind; without it the program says so and exits 2
//! (`IOX_REQUIRE_VALGRIND=1`) or 0.

mod cases;
mod trace;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Instructions and shared-memory cache lines per message, traced by valgrind")]
struct Args {
    /// Only these cases (default: all).
    #[arg(long, value_delimiter = ',')]
    case: Vec<String>,
    /// Compare with the committed numbers; fail when one rises.
    #[arg(long)]
    check: bool,
    /// Write the numbers measured to the committed file.
    #[arg(long)]
    write: bool,
    /// The committed numbers.
    #[arg(long, default_value_os_t = default_file())]
    file: PathBuf,
    /// Check that the gate fails on one extra read of shared memory per receive (the
    /// `typed` case against a variant with the read), and exit.
    #[arg(long)]
    self_test: bool,
    /// Also list the lines of the last message (mapping, offset, who touched, who wrote).
    #[arg(long)]
    explain: bool,
    /// Internal: run one case under the tracer (`CASE ROOT`).
    #[arg(long, num_args = 2, hide = true)]
    child: Option<Vec<String>>,
}

fn default_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("costs.txt")
}

/// Lines of the committed file: `case side metric value`.
type Numbers = BTreeMap<(String, String, String), f64>;

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(child) = &args.child {
        return run_child(&child[0], Path::new(&child[1]));
    }
    match Command::new("valgrind").arg("--version").output() {
        Ok(o) if o.status.success() => {}
        _ => {
            let required = std::env::var_os("IOX_REQUIRE_VALGRIND").is_some_and(|v| v == "1");
            println!(
                "SKIP hotpath: valgrind not found (install the Debian package `valgrind`){}",
                if required {
                    "; IOX_REQUIRE_VALGRIND=1: failing"
                } else {
                    ""
                }
            );
            return if required {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    }
    if args.self_test {
        return self_test();
    }
    let selected: Vec<&cases::Case> = cases::CASES
        .iter()
        .filter(|c| args.case.is_empty() || args.case.iter().any(|a| a == c.name))
        .collect();
    if selected.is_empty() {
        eprintln!("no such case; the cases: {:?}", cases::CASES.map(|c| c.name));
        return ExitCode::FAILURE;
    }
    let mut measured = Numbers::new();
    println!(
        "{:<11} {:<15} {:>12} {:>7} {:>8} {:>7}",
        "case", "side", "instructions", "lines", "written", "shared"
    );
    for case in selected {
        let (name, sides) = (case.name, case.sides);
        let costs = match measure(case) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{name}: {e}");
                return ExitCode::FAILURE;
            }
        };
        let shared = costs.per(costs.shared);
        if costs.replaced > 0 {
            println!(
                "  ({} of {} messages ran the time-driven liveness look, each counted as its twin one period away)",
                costs.replaced, costs.messages
            );
        }
        if args.explain {
            for (file, offset, sides_bits, writers) in &costs.last {
                let who = |bits: u32| -> Vec<&str> {
                    (0..sides.len())
                        .filter(|i| bits & (1 << i) != 0)
                        .map(|i| sides[i])
                        .collect()
                };
                println!(
                    "  {file} +{offset:#x}: touched by {:?}, written by {:?}",
                    who(*sides_bits),
                    who(*writers)
                );
            }
        }
        for (i, side) in sides.iter().enumerate() {
            let row = [
                ("instructions", costs.per(costs.instructions[i])),
                ("lines", costs.per(costs.lines[i])),
                ("written", costs.per(costs.written[i])),
            ];
            println!(
                "{name:<11} {side:<15} {:>12.1} {:>7.2} {:>8.2} {:>7}",
                row[0].1,
                row[1].1,
                row[2].1,
                if i == 0 {
                    format!("{shared:.2}")
                } else {
                    String::new()
                }
            );
        }
        measured.extend(numbers(name, sides, &costs));
    }
    let rustc = rustc_version();
    if args.write {
        let mut text = format!(
            "# Costs per message of the hot path (cargo run --release -p iox_hotpath -- --write).\n\
             # A commit that raises one says why. Recorded with: {rustc}\n"
        );
        for ((case, side, metric), value) in &measured {
            let _ = writeln!(text, "{case} {side} {metric} {value:.2}");
        }
        if let Err(e) = std::fs::write(&args.file, text) {
            eprintln!("writing {}: {e}", args.file.display());
            return ExitCode::FAILURE;
        }
        println!("written to {}", args.file.display());
    }
    if args.check {
        let text = match std::fs::read_to_string(&args.file) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("reading {}: {e}", args.file.display());
                return ExitCode::FAILURE;
            }
        };
        return match compare(&text, &measured, &rustc) {
            Ok(Verdict { rises, .. }) if rises.is_empty() => {
                println!("hotpath: every count at or below {}", args.file.display());
                ExitCode::SUCCESS
            }
            Ok(Verdict { rises, .. }) => {
                for r in rises {
                    println!("FAIL {r}; if the rise is meant, run --write and say why in the commit");
                }
                ExitCode::FAILURE
            }
            Err(e) => {
                eprintln!("{}: {e}", args.file.display());
                ExitCode::FAILURE
            }
        };
    }
    ExitCode::SUCCESS
}

/// `typed` measured, written as a committed file, and `typed-extra-read` compared with
/// it: the comparison must name the receive's lines.
fn self_test() -> ExitCode {
    let extra_case = &cases::EXTRA_READ;
    let base = &cases::CASES[0];
    let (Ok(plain), Ok(extra)) = (measure(base), measure(extra_case)) else {
        eprintln!("self-test: a traced case failed");
        return ExitCode::FAILURE;
    };
    let mut committed = format!("# {}\n", rustc_version());
    for (key, value) in numbers(base.name, base.sides, &plain) {
        let _ = writeln!(committed, "{} {} {} {value:.2}", key.0, key.1, key.2);
    }
    let now: Numbers = numbers(base.name, extra_case.sides, &extra).collect();
    let verdict = match compare(&committed, &now, &rustc_version()) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("self-test: {e}");
            return ExitCode::FAILURE;
        }
    };
    let caught = verdict.rises.iter().any(|r| r.starts_with("typed receive lines"));
    for r in &verdict.rises {
        println!("self-test: the gate reports {r}");
    }
    if caught {
        println!("self-test: one extra shared-memory read per receive fails the gate");
        ExitCode::SUCCESS
    } else {
        println!(
            "self-test FAILED: an extra shared-memory read per receive did not raise the receive's lines"
        );
        ExitCode::FAILURE
    }
}

/// A case's figures as committed-file keys.
fn numbers<'a>(
    case: &'a str,
    sides: &'a [&'a str],
    costs: &'a trace::Costs,
) -> impl Iterator<Item = ((String, String, String), f64)> + 'a {
    sides
        .iter()
        .enumerate()
        .flat_map(move |(i, side)| {
            [
                ("instructions", costs.per(costs.instructions[i])),
                ("lines", costs.per(costs.lines[i])),
                ("written", costs.per(costs.written[i])),
            ]
            .map(|(metric, v)| ((case.to_string(), side.to_string(), metric.to_string()), v))
        })
        .chain([
            (
                (case.to_string(), "-".to_string(), "shared".to_string()),
                costs.per(costs.shared),
            ),
            (
                (case.to_string(), "-".to_string(), "syscalls".to_string()),
                costs.per(costs.syscalls),
            ),
        ])
}

fn rustc_version() -> String {
    Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()))
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown rustc".into())
}

/// The outcome of comparing measured numbers with a committed file.
struct Verdict {
    /// `case side metric: now per message, committed was (+rise)`, one per rise.
    rises: Vec<String>,
}

/// Compares `measured` with the committed file's `text`: lines, written and shared
/// exactly (to the file's two decimals), instructions exactly when the file was
/// recorded with `rustc`, within 3 % otherwise. Prints what fell and notes.
fn compare(text: &str, measured: &Numbers, rustc: &str) -> Result<Verdict, String> {
    let same_rustc = text.lines().any(|l| l.starts_with('#') && l.ends_with(rustc));
    let mut committed = Numbers::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let w: Vec<&str> = line.split_whitespace().collect();
        match (w.as_slice(), w.get(3).and_then(|v| v.parse::<f64>().ok())) {
            ([case, side, metric, _], Some(v)) => {
                committed.insert((case.to_string(), side.to_string(), metric.to_string()), v);
            }
            _ => return Err(format!("a line that is not `case side metric value`: {line:?}")),
        }
    }
    if !same_rustc {
        println!(
            "note: the committed numbers were recorded with another rustc than {rustc}: \
             instructions may rise 3 % before they fail"
        );
    }
    let mut rises = Vec::new();
    for (key, &now) in measured {
        let (case, side, metric) = key;
        let Some(&was) = committed.get(key) else {
            rises.push(format!("{case} {side} {metric}: {now:.2}, not committed"));
            continue;
        };
        let allowed = if metric == "instructions" && !same_rustc {
            was * 1.03
        } else {
            was + 0.005
        };
        if now > allowed {
            rises.push(format!(
                "{case} {side} {metric}: {now:.2} per message, committed {was:.2} (+{:.2})",
                now - was
            ));
        } else if now < was - 0.005 {
            println!(
                "lower {case} {side} {metric}: {now:.2} per message, committed {was:.2} (--write keeps it)"
            );
        }
    }
    Ok(Verdict { rises })
}

/// Traces `case` in a child under lackey and reads its log.
fn measure(case: &cases::Case) -> Result<trace::Costs, String> {
    let name = case.name;
    let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    let log = dir.path().join("trace");
    let root = dir.path().join("root");
    std::fs::create_dir(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    // IOX_HOTPATH_CHILD: trace another build's child (the same `--child CASE ROOT`
    // interface), to compare two commits.
    let exe = match std::env::var_os("IOX_HOTPATH_CHILD") {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?,
    };
    let out = Command::new("valgrind")
        .arg("--tool=lackey")
        .arg("--trace-mem=yes")
        // The system calls too: they tell a time-driven look from everything else.
        .arg("--trace-syscalls=yes")
        .arg(format!("--log-file={}", log.display()))
        .arg(exe)
        .arg("--child")
        .arg(name)
        .arg(&root)
        // A panic's backtrace, symbolised under the tracer, takes minutes: the
        // panic's message is enough.
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("starting valgrind: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("the traced case failed ({}):\n{stdout}", out.status));
    }
    let layout = trace::Layout::parse(&stdout)?;
    let file = std::fs::File::open(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    trace::read(
        BufReader::with_capacity(1 << 20, file),
        &layout,
        case.process,
        case.time_driven,
    )
}

fn run_child(case: &str, root: &Path) -> ExitCode {
    let mut out = std::io::stdout().lock();
    for (i, m) in cases::MARKS.iter().enumerate() {
        let _ = writeln!(out, "mark {i} {:x}", m as *const u64 as usize);
    }
    drop(out);
    let sum = cases::run(case, root, || {
        let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
        let mut out = std::io::stdout().lock();
        for line in maps.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            // Shared mappings: the pools and the services' segments.
            if w.len() >= 2
                && w[1].as_bytes().get(3) == Some(&b's')
                && let Some((s, e)) = w[0].split_once('-')
            {
                let name = w.get(5..).map(|n| n.join(" ")).unwrap_or_default();
                let _ = writeln!(out, "shm {s} {e} {name}");
            }
        }
        let _ = out.flush();
    });
    // The shared mappings again: one made during the loop would hold lines no count saw.
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    for line in maps.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() >= 2
            && w[1].as_bytes().get(3) == Some(&b's')
            && let Some((s, e)) = w[0].split_once('-')
        {
            println!("shm-after {s} {e}");
        }
    }
    println!("checksum {sum}");
    ExitCode::SUCCESS
}
