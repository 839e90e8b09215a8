//! Instructions per message, counted by callgrind: deterministic where timings on a
//! shared machine are not. For each library (iox, iceoryx2) and case (see
//! `iox_benches::counted`), this program runs itself under
//! `valgrind --tool=callgrind` twice, with `--small` and `--large` messages, and
//! reports `(Ir(large) - Ir(small)) / (large - small)`: set-up and teardown cancel out.
//!
//! ```sh
//! cargo run --release -p iox_benches --bin instructions            # ~1 min
//! cargo run --release -p iox_benches --bin instructions -- --library iox --case one
//! ```
//!
//! Needs valgrind (Debian package `valgrind`); without it, it says so and exits 0
//! (CI does not run it). Figures are per message: a send plus every receive of it
//! (`fanout4`: one send, four receives), or one loan and its release (`loan`). With
//! case `one`, it also counts iox from C++ against the same loop in Rust (the
//! `msgloop` binary: build every binary of this crate first) when g++ is there.

use std::process::{Command, ExitCode};

use clap::Parser;
use iox_benches::counted::{self, Case, Library};

#[derive(Parser, Debug)]
#[command(about = "Instructions per message (callgrind), iox and iceoryx2 side by side")]
struct Args {
    /// Only this library (default: both).
    #[arg(long)]
    library: Option<Library>,
    /// Only this case (default: all).
    #[arg(long)]
    case: Option<Case>,
    /// Messages of the smaller run.
    #[arg(long, default_value_t = 10_000)]
    small: u64,
    /// Messages of the larger run.
    #[arg(long, default_value_t = 30_000)]
    large: u64,
    /// Internal: run one loop (what the program runs under valgrind).
    #[arg(long, num_args = 3, value_names = ["LIBRARY", "CASE", "N"], hide = true)]
    child: Option<Vec<String>>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(child) = &args.child {
        return run_child(child);
    }
    let version = Command::new("valgrind").arg("--version").output();
    let version = match version {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => {
            println!("SKIP instructions: valgrind not found (install the Debian package `valgrind`)");
            return ExitCode::SUCCESS;
        }
    };
    if args.large <= args.small {
        eprintln!("--large must be above --small");
        return ExitCode::FAILURE;
    }
    let libraries: Vec<Library> = match args.library {
        Some(l) => vec![l],
        None => vec![Library::Iox, Library::Iceoryx2],
    };
    let cases: Vec<Case> = args.case.map_or_else(|| Case::ALL.to_vec(), |c| vec![c]);
    println!(
        "instructions per message, callgrind ({version}), (Ir({}) - Ir({})) / {}",
        args.large,
        args.small,
        args.large - args.small
    );
    let mut table: Vec<(Case, Vec<Option<f64>>)> = Vec::new();
    for &case in &cases {
        let mut row = Vec::new();
        for &library in &libraries {
            let per = measure(library, case, args.small, args.large, false);
            match per {
                Some(v) => eprintln!("  {:<9} {:<8} {v:8.1}", library.name(), case.name()),
                None => eprintln!("  {:<9} {:<8} failed", library.name(), case.name()),
            }
            row.push(per);
        }
        table.push((case, row));
    }
    print_table(&libraries, &table);
    // The send side alone: each message minus its receives, for one subscriber and
    // for four; the difference over three is what one more subscriber costs a send.
    if cases.contains(&Case::One) && cases.contains(&Case::Fanout4) {
        for (col, &library) in libraries.iter().enumerate() {
            let get = |c: Case| table.iter().find(|(k, _)| *k == c).and_then(|(_, r)| r[col]);
            let recv_one = measure(library, Case::One, args.small, args.large, true);
            let recv_four = measure(library, Case::Fanout4, args.small, args.large, true);
            if let (Some(one), Some(four), Some(r1), Some(r4)) =
                (get(Case::One), get(Case::Fanout4), recv_one, recv_four)
            {
                let (send_one, send_four) = (one - r1, four - r4);
                println!(
                    "{}: receive {r1:.1}; send side: 1 subscriber {send_one:.1}, 4 subscribers {send_four:.1}, each additional subscriber {:.1} (with its receive {:.1})",
                    library.name(),
                    (send_four - send_one) / 3.0,
                    (four - one) / 3.0
                );
                if library == Library::Iox {
                    let each = (send_four - send_one) / 3.0;
                    let verdict = if each <= 60.0 { "met" } else { "NOT met" };
                    println!("target: each additional subscriber (send side) <= 60: {each:.1} ({verdict})");
                }
            }
        }
    }
    if libraries.contains(&Library::Iox) && cases.contains(&Case::One) {
        print_cpp(args.small, args.large);
    }
    if libraries.contains(&Library::Iox) {
        let col = libraries
            .iter()
            .position(|&l| l == Library::Iox)
            .expect("iox is listed");
        print_targets(&table, col);
    }
    ExitCode::SUCCESS
}

/// The child: one loop, its checksum printed.
fn run_child(child: &[String]) -> ExitCode {
    use clap::ValueEnum;
    let library = Library::from_str(&child[0], true).expect("a library");
    let case = Case::from_str(&child[1], true).expect("a case");
    let n: u64 = child[2].parse().expect("a message count");
    let sum = if case == Case::Header64 {
        iox_benches::counted_header::run(library, n)
    } else {
        counted::run(library, case, n)
    };
    println!("{} {} {n}: checksum {sum}", library.name(), case.name());
    ExitCode::SUCCESS
}

/// Instructions per message of `case` with `library`, or `None` if a run failed;
/// with `receives_only`, only those inside the receives (and their samples' drops).
fn measure(library: Library, case: Case, small: u64, large: u64, receives_only: bool) -> Option<f64> {
    let a = count(library, case, small, receives_only)?;
    let b = count(library, case, large, receives_only)?;
    Some((b as f64 - a as f64) / (large - small) as f64)
}

/// Instructions of one run under callgrind (its "Collected" total).
fn count(library: Library, case: Case, n: u64, receives_only: bool) -> Option<u64> {
    let exe = std::env::current_exe().ok()?;
    let mut cmd = Command::new("valgrind");
    cmd.args(["--tool=callgrind", "--callgrind-out-file=/dev/null"]);
    if receives_only {
        // Count only inside `counted::counted_receive_*` (kept out of line).
        cmd.args(["--collect-atstart=no", "--toggle-collect=*counted_receive*"]);
    }
    cmd.arg(exe)
        .args(["--child", library.name(), case.name(), &n.to_string()]);
    collected(cmd, &format!("{} {} {n}", library.name(), case.name()))
}

/// The "Collected" total callgrind reports for `cmd` (a valgrind command line), or
/// `None` (said on stderr, naming `what`) if the run failed.
fn collected(mut cmd: Command, what: &str) -> Option<u64> {
    let out = cmd.output().ok()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        eprintln!("{what} failed:\n{stderr}");
        return None;
    }
    stderr
        .lines()
        .find_map(|l| l.split_once("Collected :").map(|(_, v)| v.trim().parse().ok()))
        .flatten()
}

/// iox from C++ against Rust, one loop each of loan, write, send, receive, release
/// (`iox_ffi/bench/msgloop.cpp` on the C++ layer, the `msgloop` binary in Rust):
/// instructions per message of each and their ratio.
fn print_cpp(small: u64, large: u64) {
    let per = |exe: &std::path::Path| -> Option<f64> {
        let run = |n: u64| {
            let mut cmd = Command::new("valgrind");
            cmd.args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
                .arg(exe)
                .arg(n.to_string());
            collected(cmd, &format!("{} {n}", exe.display()))
        };
        Some((run(large)? as f64 - run(small)? as f64) / (large - small) as f64)
    };
    let cpp = match iox_benches::cpp_transport::build_msgloop() {
        Ok(exe) => exe,
        Err(why) => {
            println!("SKIP iox from C++: {why}");
            return;
        }
    };
    let rust = cpp.with_file_name("msgloop");
    if !rust.exists() {
        println!(
            "SKIP iox from C++: {} is missing (cargo build --release -p iox_benches --bins)",
            rust.display()
        );
        return;
    }
    if let (Some(c), Some(r)) = (per(&cpp), per(&rust)) {
        println!(
            "iox from C++ (iox_ffi/bench/msgloop.cpp against the msgloop binary): C++ {c:.1}, Rust {r:.1} per message, {:.2}x",
            c / r
        );
    }
}

fn print_table(libraries: &[Library], table: &[(Case, Vec<Option<f64>>)]) {
    let fmt = |v: &Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"));
    print!("| case |");
    for l in libraries {
        print!(" {} |", l.name());
    }
    println!();
    print!("|---|");
    for _ in libraries {
        print!("---:|");
    }
    println!();
    for (case, row) in table {
        print!("| {} |", case.name());
        for v in row {
            print!(" {} |", fmt(v));
        }
        println!();
    }
}

/// The issue's targets for iox, where the table has the cases they need.
fn print_targets(table: &[(Case, Vec<Option<f64>>)], col: usize) {
    let get = |c: Case| table.iter().find(|(k, _)| *k == c).and_then(|(_, r)| r[col]);
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    if let Some(one) = get(Case::One) {
        println!(
            "target: 1 pub / 1 sub <= 350: {one:.1} ({})",
            verdict(one <= 350.0)
        );
    }
    if let (Some(m1), Some(m16)) = (get(Case::Max1), get(Case::Max16)) {
        let ratio = m16 / m1;
        println!(
            "target: max_subscribers(16) within 10% of (1): {ratio:.3}x ({})",
            verdict(ratio <= 1.10)
        );
    }
    if let Some(loan) = get(Case::Loan) {
        println!(
            "target: loan + release <= 80: {loan:.1} ({})",
            verdict(loan <= 80.0)
        );
    }
    if let (Some(rr), Some(one)) = (get(Case::Reqres), get(Case::One)) {
        let ratio = rr / one;
        println!(
            "target: request-response round trip <= 2x a pub-sub one-way: {rr:.1} = {ratio:.2}x ({})",
            verdict(ratio <= 2.0)
        );
    }
}
