//! Reads a valgrind `lackey --trace-mem=yes` log of one case's process and turns it into
//! per-message costs: instructions per side, and the shared-memory cache lines each
//! side touched (read or wrote), per message.
//!
//! The log has one line per guest instruction (`I  addr,size`) and per data access
//! (` L`, ` S`, ` M` = load, store, modify; `addr,size` in hex). A load of a marker
//! (`cases::MARKS`) switches the side the following lines belong to; the `END` marker
//! closes a message. Only accesses inside the process's shared mappings (`shm` ranges,
//! read from `/proc/self/maps` when the ports exist) are lines; an access spanning two
//! 64-byte lines counts both. Between the warm-up and the first marker nothing is
//! counted.
//!
//! Per message, a line touched by two or more sides, one of them writing it, is
//! *shared*: across processes it moves between the cores (the cost the instruction
//! count does not show).

use std::collections::BTreeMap;
use std::io::BufRead;

/// Bytes per cache line (x86-64 and most ARM cores).
pub const LINE: u64 = 64;

/// What the child told the tracer before its loop: marker addresses and shared ranges.
#[derive(Debug, Default)]
pub struct Layout {
    /// `MARKS[i]`'s address, by index.
    pub marks: Vec<u64>,
    /// Shared mappings, `[start, end)`.
    pub shm: Vec<(u64, u64)>,
    /// Each shared mapping's file, as `/proc/self/maps` names it.
    pub names: Vec<String>,
}

impl Layout {
    /// Parses the child's standard output: `mark I ADDR` and `shm START END NAME` lines
    /// (hex without prefix; the shared mappings when the ports exist), `shm-after START
    /// END` (the same after the loop: one not there before is refused), anything else
    /// ignored.
    pub fn parse(stdout: &str) -> Result<Layout, String> {
        let mut layout = Layout::default();
        let mut after = Vec::new();
        for line in stdout.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let hex = |s: &str| u64::from_str_radix(s, 16).map_err(|e| format!("{line:?}: {e}"));
            match words.as_slice() {
                ["mark", i, addr] => {
                    let i: usize = i.parse().map_err(|e| format!("{line:?}: {e}"))?;
                    if layout.marks.len() <= i {
                        layout.marks.resize(i + 1, 0);
                    }
                    layout.marks[i] = hex(addr)?;
                }
                ["shm", start, end, name @ ..] => {
                    layout.shm.push((hex(start)?, hex(end)?));
                    layout.names.push(name.join(" "));
                }
                ["shm-after", start, end] => after.push((hex(start)?, hex(end)?)),
                _ => {}
            }
        }
        if layout.marks.is_empty() || layout.shm.is_empty() {
            return Err(format!(
                "the case printed no markers or no shared mappings:\n{stdout}"
            ));
        }
        // A mapping made while the messages ran (a pool grown, a segment mapped
        // late) would hold accesses no count saw: refused, not measured.
        if let Some(new) = after.iter().find(|r| !layout.shm.contains(r)) {
            return Err(format!(
                "a shared mapping {:#x}..{:#x} appeared while the messages ran: its lines would go uncounted",
                new.0, new.1
            ));
        }
        Ok(layout)
    }

    fn in_shm(&self, addr: u64) -> bool {
        self.shm.iter().any(|&(s, e)| addr >= s && addr < e)
    }
}

/// One message's figures: per side instructions, lines touched, lines written; and the
/// lines shared between sides.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Message {
    /// Per side.
    pub instructions: Vec<u64>,
    /// Per side.
    pub lines: Vec<u64>,
    /// Per side.
    pub written: Vec<u64>,
    /// Lines sides in two or more processes touched, one writing.
    pub shared: u64,
    /// The system calls made during the message (their numbers, sorted).
    pub syscalls: Vec<u32>,
}

/// Totals over the measured messages of one case.
#[derive(Debug, Default, Clone)]
pub struct Costs {
    /// Messages closed by an `END` marker.
    pub messages: u64,
    /// Per side (marker index - 1): instructions.
    pub instructions: Vec<u64>,
    /// Per side: shared-memory lines touched, summed over messages.
    pub lines: Vec<u64>,
    /// Per side: of those, lines it wrote.
    pub written: Vec<u64>,
    /// Lines touched by two or more processes in a message, one writing, summed.
    pub shared: u64,
    /// System calls, summed over messages.
    pub syscalls: u64,
    /// Messages in which a time-driven path ran (one that made system calls the
    /// other messages do not make), counted as their twin one period away (see
    /// [`Costs::from_messages`]).
    pub replaced: usize,
    /// The last message's lines: (mapping's file, offset of the line in it, sides bits,
    /// writers bits), for `--explain`.
    pub last: Vec<(String, u64, u32, u32)>,
}

impl Costs {
    /// Sums `messages`. With `time_driven` (a case whose steps look at something at
    /// most every so many milliseconds of wall time: request-response's liveness look,
    /// which the tracer's slowness makes land in varying messages), a message whose
    /// system calls go beyond the ones most messages make (the look's: open, lock,
    /// close) is replaced by its twin one period `p` away, `p` the smallest power of
    /// two up to 16 for which every other message equals the one `p` before it (queues
    /// and pools cycle with such periods). So the sums do not depend on when the clock
    /// ticked, and nothing else is ever replaced: an extra cost in some messages that
    /// makes no system call counts, in every case. Without `time_driven`, or without
    /// such a period, or when more than half the messages would be replaced, the
    /// messages are summed as they are and [`Costs::replaced`] stays 0.
    pub fn from_messages(mut messages: Vec<Message>, sides: usize, time_driven: bool) -> Costs {
        let n = messages.len();
        // The system calls most messages make.
        let mut kinds: Vec<&Vec<u32>> = messages.iter().map(|m| &m.syscalls).collect();
        kinds.sort();
        let steady = kinds
            .chunk_by(|a, b| a == b)
            .max_by_key(|run| run.len())
            .map(|run| run[0].clone())
            .unwrap_or_default();
        let extra = |m: &Message| m.syscalls != steady && steady.iter().all(|c| m.syscalls.contains(c));
        let slow: Vec<bool> = messages.iter().map(|m| time_driven && extra(m)).collect();
        let mut replaced = 0;
        let count = slow.iter().filter(|&&s| s).count();
        if count > 0 && count <= n / 2 {
            let period = [1, 2, 4, 8, 16]
                .into_iter()
                .find(|&p| (p..n).all(|i| slow[i] || slow[i - p] || messages[i] == messages[i - p]));
            if let Some(p) = period {
                for i in 0..n {
                    if !slow[i] {
                        continue;
                    }
                    let twin = (1..=n / p)
                        .flat_map(|k| [i.checked_sub(k * p), Some(i + k * p)])
                        .flatten()
                        .find(|&j| j < n && !slow[j]);
                    if let Some(j) = twin {
                        messages[i] = messages[j].clone();
                        replaced += 1;
                    }
                }
            }
        }
        let mut costs = Costs {
            instructions: vec![0; sides],
            lines: vec![0; sides],
            written: vec![0; sides],
            replaced,
            ..Costs::default()
        };
        for m in &messages {
            for side in 0..sides {
                costs.instructions[side] += m.instructions[side];
                costs.lines[side] += m.lines[side];
                costs.written[side] += m.written[side];
            }
            costs.shared += m.shared;
            costs.syscalls += m.syscalls.len() as u64;
        }
        costs.messages = n as u64;
        costs
    }

    /// Per message: `total / messages`.
    pub fn per(&self, total: u64) -> f64 {
        total as f64 / self.messages.max(1) as f64
    }
}

/// Bit per side: touched, written.
#[derive(Default, Clone, Copy)]
struct Touch {
    sides: u32,
    writers: u32,
}

/// Reads a lackey log from `log` of a case whose sides run in processes `process`
/// (per side).
pub fn read(log: impl BufRead, layout: &Layout, process: &[u8], time_driven: bool) -> Result<Costs, String> {
    let sides = process.len();
    let mut messages = Vec::new();
    let mut last = Vec::new();
    let mut current = Message {
        instructions: vec![0; sides],
        lines: vec![0; sides],
        written: vec![0; sides],
        shared: 0,
        syscalls: Vec::new(),
    };
    // 0 = not measuring; else marker index (side + 1).
    let mut phase = 0usize;
    let mut message: BTreeMap<u64, Touch> = BTreeMap::new();
    for line in log.split(b'\n') {
        let line = line.map_err(|e| format!("reading the trace: {e}"))?;
        // `--trace-syscalls=yes`: `SYSCALL[pid,tid](NUMBER) name ( args ) --> result`,
        // an asynchronous one again on a second line (`... [async] -->`), not counted.
        if let Some(rest) = line.strip_prefix(b"SYSCALL[") {
            if phase > 0 && !line.windows(13).any(|w| w == b"... [async] -") {
                let text = String::from_utf8_lossy(rest);
                let number = text
                    .split_once("](")
                    .and_then(|(_, r)| r.split_once(')'))
                    .and_then(|(n, _)| n.parse::<u32>().ok())
                    .ok_or_else(|| format!("a system call line without its number: {text:?}"))?;
                current.syscalls.push(number);
            }
            continue;
        }
        let (kind, rest) = match line.as_slice() {
            [b'I', b' ', rest @ ..] => (b'I', rest),
            [b' ', k @ (b'L' | b'S' | b'M'), b' ', rest @ ..] => (*k, rest),
            _ => continue,
        };
        if kind == b'I' {
            if phase > 0 {
                current.instructions[phase - 1] += 1;
            }
            continue;
        }
        let text = std::str::from_utf8(rest).map_err(|_| "a trace line is not text")?;
        let (addr, size) = text
            .trim()
            .split_once(',')
            .ok_or_else(|| format!("trace line {text:?}"))?;
        let addr = u64::from_str_radix(addr, 16).map_err(|e| format!("{text:?}: {e}"))?;
        let size: u64 = size.parse().map_err(|e| format!("{text:?}: {e}"))?;
        if kind == b'L'
            && let Some(i) = layout.marks.iter().position(|&m| m == addr)
        {
            if i == 0 {
                if phase > 0 {
                    last = close(&mut current, &mut message, layout, process);
                    current.syscalls.sort_unstable();
                    messages.push(current.clone());
                    current.instructions.fill(0);
                    current.lines.fill(0);
                    current.written.fill(0);
                    current.shared = 0;
                    current.syscalls.clear();
                }
                phase = 0;
            } else if i <= sides {
                phase = i;
            } else {
                return Err(format!("marker {i} past the case's {sides} sides"));
            }
            continue;
        }
        if phase == 0 || !layout.in_shm(addr) {
            continue;
        }
        let bit = 1u32 << (phase - 1);
        for l in addr / LINE..=(addr + size.max(1) - 1) / LINE {
            let t = message.entry(l).or_default();
            t.sides |= bit;
            if kind != b'L' {
                t.writers |= bit;
            }
        }
    }
    if messages.is_empty() {
        return Err("the trace holds no measured message (no END marker)".into());
    }
    let mut costs = Costs::from_messages(messages, sides, time_driven);
    costs.last = last;
    Ok(costs)
}

/// Closes a message: counts its lines into `m`, returns them (for `--explain`).
fn close(
    m: &mut Message,
    message: &mut BTreeMap<u64, Touch>,
    layout: &Layout,
    process: &[u8],
) -> Vec<(String, u64, u32, u32)> {
    let processes = |bits: u32| {
        (0..process.len())
            .filter(|&i| bits & (1 << i) != 0)
            .fold(0u32, |acc, i| acc | 1 << process[i])
    };
    let mut lines = Vec::new();
    for (&line, t) in message.iter() {
        let addr = line * LINE;
        if let Some(i) = layout.shm.iter().position(|&(s, e)| addr >= s && addr < e) {
            let name = layout.names[i].clone();
            lines.push((name, addr - layout.shm[i].0, t.sides, t.writers));
        }
        for side in 0..m.lines.len() {
            if t.sides & (1 << side) != 0 {
                m.lines[side] += 1;
            }
            if t.writers & (1 << side) != 0 {
                m.written[side] += 1;
            }
        }
        if processes(t.sides).count_ones() >= 2 && t.writers != 0 {
            m.shared += 1;
        }
    }
    message.clear();
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout::parse("mark 0 100\nmark 1 108\nmark 2 110\nshm 10000 20000 /x\nchecksum 3\n").unwrap()
    }

    /// Two sides in two processes: the first writes line 0 and reads line 1, the
    /// second reads line 0 (shared: written by one, touched by both) and line 2.
    #[test]
    fn a_message_counts_each_sides_lines_and_the_shared_ones() {
        let log = "I  400000,3\n L 100,8\n\
                   I  400003,3\n L 108,8\nI  400006,4\n S 10000,8\n L 10040,8\n L 10048,8\n\
                   I  40000a,3\n L 110,8\nI  40000d,4\n L 10008,8\n L 10080,16\n L 30000,8\n\
                   I  400011,3\n L 100,8\n";
        let c = read(log.as_bytes(), &layout(), &[0, 1], false).unwrap();
        assert_eq!(c.messages, 1);
        // The marker loads' own instructions count to the side before them.
        assert_eq!(c.instructions, vec![2, 2]);
        assert_eq!(c.lines, vec![2, 2]);
        assert_eq!(c.written, vec![1, 0]);
        assert_eq!(c.shared, 1);
    }

    #[test]
    fn a_mapping_made_during_the_messages_is_refused() {
        let before = "mark 0 100\nmark 1 108\nshm 10000 20000 /x\n";
        assert!(Layout::parse(&format!("{before}shm-after 10000 20000\n")).is_ok());
        let grown = format!("{before}shm-after 10000 20000\nshm-after 30000 31000\n");
        assert!(Layout::parse(&grown).unwrap_err().contains("appeared"));
    }

    #[test]
    fn an_access_across_a_line_boundary_touches_both_lines() {
        let log = " L 108,8\n S 1003c,8\n L 100,8\n";
        let c = read(log.as_bytes(), &layout(), &[0, 1], false).unwrap();
        assert_eq!((c.lines[0], c.written[0]), (2, 2));
    }

    #[test]
    fn sides_in_one_process_share_nothing() {
        let log = " L 108,8\n S 10000,8\n L 110,8\n L 10000,8\n L 100,8\n";
        assert_eq!(read(log.as_bytes(), &layout(), &[0, 0], false).unwrap().shared, 0);
        assert_eq!(read(log.as_bytes(), &layout(), &[0, 1], false).unwrap().shared, 1);
    }

    #[test]
    fn a_trace_without_an_end_marker_is_an_error() {
        let log = " L 108,8\n S 10000,8\n";
        assert!(read(log.as_bytes(), &layout(), &[0], false).is_err());
    }

    fn message(instructions: u64, lines: u64, syscalls: &[u32]) -> Message {
        Message {
            instructions: vec![instructions],
            lines: vec![lines],
            written: vec![0],
            shared: 0,
            syscalls: syscalls.to_vec(),
        }
    }

    /// A cycle of two (100, 1 line), (104, 2 lines), each reading the clock (228);
    /// messages with a time-driven look (its open and close on top): each counts as its
    /// twin, whichever message it hit.
    #[test]
    fn a_time_driven_message_counts_as_its_twin_one_period_away() {
        let cycle = |i: usize| {
            if i.is_multiple_of(2) {
                message(100, 1, &[228])
            } else {
                message(104, 2, &[228])
            }
        };
        let plain: Vec<Message> = (0..16).map(cycle).collect();
        let want = Costs::from_messages(plain.clone(), 1, true);
        assert_eq!(
            (want.instructions[0], want.lines[0], want.replaced),
            (1632, 24, 0)
        );
        for slow in [[3, 8], [0, 15], [6, 7]] {
            let mut m = plain.clone();
            for i in slow {
                m[i] = message(5000, 9, &[3, 228, 257]);
            }
            let got = Costs::from_messages(m, 1, true);
            assert_eq!((got.instructions[0], got.lines[0], got.replaced), (1632, 24, 2));
        }
    }

    /// What is not a time-driven look counts as it is: a costlier message without an
    /// extra system call, any message of a case without looks, and looks in more than
    /// half the messages.
    #[test]
    fn nothing_else_is_replaced() {
        let base: Vec<Message> = (0..16).map(|_| message(100, 1, &[])).collect();
        let mut every_eighth = base.clone();
        every_eighth[0] = message(500, 4, &[]);
        every_eighth[8] = message(500, 4, &[]);
        let got = Costs::from_messages(every_eighth, 1, true);
        assert_eq!((got.instructions[0], got.lines[0], got.replaced), (2400, 22, 0));
        let mut with_calls = base.clone();
        with_calls[3] = message(500, 4, &[257]);
        let got = Costs::from_messages(with_calls.clone(), 1, false);
        assert_eq!((got.instructions[0], got.syscalls, got.replaced), (2000, 1, 0));
        let many: Vec<Message> = (0..16)
            .map(|i| message(100, 1, if i < 9 { &[257] } else { &[] }))
            .collect();
        assert_eq!(Costs::from_messages(many, 1, true).replaced, 0);
    }

    #[test]
    fn system_calls_are_read_from_the_trace_once_each() {
        let log = " L 108,8\nSYSCALL[7,1](228) sys_clock_gettime ( 1, 0x1 ) --> [pre-success] Success(0x0)\n\
                   SYSCALL[7,1](0) sys_read ( 3, 0x1, 8 ) --> [async] ... \n\
                   SYSCALL[7,1](0) ... [async] --> Success(0x8) \n L 100,8\n\
                   SYSCALL[7,1](1) sys_write ( 1, 0x1, 8 ) --> [pre-success] Success(0x8)\n";
        let c = read(log.as_bytes(), &layout(), &[0], false).unwrap();
        assert_eq!(c.syscalls, 2);
    }
}
