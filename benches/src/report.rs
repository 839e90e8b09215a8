//! Results: one row per (transport, payload size), printed as a table with the
//! iox/iceoryx2 ratios and each transport's ratio to the floor, and written as CSV.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

use crate::floor_transport;

/// One measured case.
pub struct Row {
    /// "iox", "iceoryx2", "unix-socket" or [`floor_transport::NAME`].
    pub transport: &'static str,
    /// Payload bytes.
    pub len: usize,
    /// One-way latency histogram, ns.
    pub one_way: Histogram<u64>,
    /// First round trip / 2, ns.
    pub first: u64,
}

impl Row {
    /// (median, p99, p99.9) in ns.
    pub fn percentiles(&self) -> (u64, u64, u64) {
        let h = &self.one_way;
        (
            h.value_at_quantile(0.5),
            h.value_at_quantile(0.99),
            h.value_at_quantile(0.999),
        )
    }
}

/// Human-readable size.
pub fn size_name(len: usize) -> String {
    match len {
        l if l >= 1 << 20 => format!("{} MiB", l >> 20),
        l if l >= 1 << 10 => format!("{} KiB", l >> 10),
        l => format!("{l} B"),
    }
}

/// The latency table plus the ratios of iox to iceoryx2, then, for each payload size
/// the floor ran at (8 B), every transport's median and p99 over the floor's median
/// from the same run.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| payload | transport | median ns | p99 ns | p99.9 ns | samples |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for r in rows {
        let (m, p99, p999) = r.percentiles();
        let _ = writeln!(
            out,
            "| {} | {} | {m} | {p99} | {p999} | {} |",
            size_name(r.len),
            r.transport,
            r.one_way.len()
        );
    }
    let _ = writeln!(out, "\n| payload | iox/iceoryx2 median | iox/iceoryx2 p99 |");
    let _ = writeln!(out, "|---|---|---|");
    let find = |t: &str, len: usize| rows.iter().find(|r| r.transport == t && r.len == len);
    for len in lens_of(rows) {
        if let (Some(a), Some(b)) = (find("iox", len), find("iceoryx2", len)) {
            let (am, ap, _) = a.percentiles();
            let (bm, bp, _) = b.percentiles();
            let _ = writeln!(
                out,
                "| {} | {:.2} | {:.2} |",
                size_name(len),
                am as f64 / bm as f64,
                ap as f64 / bp as f64
            );
        }
        // `pingpong`'s typed rows (u64 loans both sides), where they ran.
        if let (Some(a), Some(b)) = (find("iox typed u64", len), find("iceoryx2 typed u64", len)) {
            let (am, ap, _) = a.percentiles();
            let (bm, bp, _) = b.percentiles();
            let _ = writeln!(
                out,
                "| {} typed u64 | {:.2} | {:.2} |",
                size_name(len),
                am as f64 / bm as f64,
                ap as f64 / bp as f64
            );
        }
    }
    for len in lens_of(rows) {
        let Some(floor) = find(floor_transport::NAME, len) else {
            continue;
        };
        let (fm, _, _) = floor.percentiles();
        let _ = writeln!(
            out,
            "\nAt {}, against the floor (one shared word, median {fm} ns, same run); \
             median and p99 over the floor's median:",
            size_name(len)
        );
        for r in rows.iter().filter(|r| r.len == len) {
            let (m, p99, _) = r.percentiles();
            let _ = writeln!(
                out,
                "{} / floor = {:.2}x median, {:.2}x p99",
                r.transport,
                m as f64 / fm.max(1) as f64,
                p99 as f64 / fm.max(1) as f64
            );
        }
    }
    out
}

/// The distinct payload sizes of `rows`, in order (rows come grouped by size).
fn lens_of(rows: &[Row]) -> Vec<usize> {
    let mut lens: Vec<usize> = rows.iter().map(|r| r.len).collect();
    lens.dedup();
    lens
}

/// The rows as CSV.
pub fn csv(rows: &[Row]) -> String {
    let mut out = String::from("transport,payload_bytes,median_ns,p99_ns,p999_ns,samples,first_ns\n");
    for r in rows {
        let (m, p99, p999) = r.percentiles();
        let _ = writeln!(
            out,
            "{},{},{m},{p99},{p999},{},{}",
            r.transport,
            r.len,
            r.one_way.len(),
            r.first
        );
    }
    out
}
