//! Human-readable text for the `iox` commands (JSON goes through serde instead).

use std::fmt::Write;
use std::time::Duration;

use iox_service::inspect::{Health, PortCount, RootInfo, ServiceInfo};
use iox_service::{CleanupReport, MessagingPattern, PatternConfig};

fn health(s: &ServiceInfo) -> &'static str {
    match s.health {
        Health::Alive => "alive",
        Health::Stale => "stale",
        Health::Creating => "creating",
        Health::Removing => "removing",
        Health::Corrupt => "corrupt",
    }
}

/// The STATE cell of `iox list`: the health word, except for a stale service, which
/// says whether live processes use it and what is dead in it (the PUBS and SUBS cells
/// count the dead ports).
fn list_state(s: &ServiceInfo) -> String {
    if s.health != Health::Stale {
        return health(s).to_string();
    }
    let live = s.users.iter().any(|u| u.alive) || s.ports.iter().any(|p| p.alive);
    let dead_ports = s.ports.iter().filter(|p| !p.alive).count();
    match (live, dead_ports) {
        (false, _) => "unused (iox clean removes it)".into(),
        (true, 0) => "in use; dead handles (iox clean)".into(),
        (true, 1) => "in use; 1 dead port (iox clean)".into(),
        (true, n) => format!("in use; {n} dead ports (iox clean)"),
    }
}

fn bytes(n: usize) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

/// One process's mapping of a pool on huge pages, as the kernel reports it.
fn mapped_pages(p: &iox_service::inspect::pages::ProcessPages) -> String {
    match (&p.mapped, &p.unreadable) {
        (Some(m), _) if m.kernel_page > iox_service::pages::page_size() as u64 => format!(
            "pid {}: {} resident of {}, mapped with {} pages",
            p.pid,
            bytes(m.resident as usize),
            bytes(m.size as usize),
            bytes(m.kernel_page as usize)
        ),
        (Some(m), _) => format!(
            "pid {}: {} resident of {}, {} of it on transparent huge pages (the kernel gave them)",
            p.pid,
            bytes(m.resident as usize),
            bytes(m.size as usize),
            bytes(m.huge as usize)
        ),
        (None, Some(why)) => format!("pid {}: cannot be looked at ({why})", p.pid),
        (None, None) => format!("pid {}: does not map the pool", p.pid),
    }
}

/// Live ports, and the dead ones not yet recovered apart: `1` or `1 (+2 dead)`.
fn ports(n: PortCount) -> String {
    if n.dead == 0 {
        n.live.to_string()
    } else {
        format!("{} (+{} dead)", n.live, n.dead)
    }
}

/// `iox list`: one row per service, columns as wide as their widest cell.
pub fn list(all: &RootInfo) -> String {
    let header = [
        "NAME", "PATTERN", "PAYLOAD", "MEMORY", "POOL", "PUBS", "SUBS", "STATE",
    ];
    let rows: Vec<[String; 8]> = all
        .services
        .iter()
        .map(|s| {
            let (pattern, payload, memory) = match s.config.as_ref().map(|c| (c, &c.pattern)) {
                Some((_, PatternConfig::Event(e))) => (
                    format!("{:?}", MessagingPattern::Event),
                    format!("ids 0..={}", e.event_id_max),
                    "-".into(),
                ),
                Some((_, PatternConfig::Blackboard(b))) => (
                    format!("{:?}", MessagingPattern::Blackboard),
                    format!("{} keys of {}", b.entries.len(), b.key_type),
                    "-".into(),
                ),
                Some((c, PatternConfig::RequestResponse(r))) => (
                    format!("{:?}", c.messaging_pattern()),
                    format!("{} -> {}", c.payload, r.response),
                    c.memory_type.to_string(),
                ),
                Some((c, _)) => (
                    format!("{:?}", c.messaging_pattern()),
                    c.payload.to_string(),
                    c.memory_type.to_string(),
                ),
                None => ("?".into(), "?".into(), "?".into()),
            };
            [
                s.name.clone().unwrap_or_else(|| s.stem.clone()),
                pattern,
                payload,
                memory,
                bytes(s.pool_bytes),
                ports(s.publishers),
                ports(s.subscribers),
                list_state(s),
            ]
        })
        .collect();
    let mut width = header.map(str::len);
    for row in &rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 8]| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(width).enumerate() {
            // Numbers right-aligned, text left-aligned.
            let _ = if (4..7).contains(&i) {
                write!(l, "{cell:>w$}  ")
            } else {
                write!(l, "{cell:<w$}  ")
            };
        }
        l.trim_end().to_string() + "\n"
    };
    let mut out = line(header);
    for (row, s) in rows.iter().zip(&all.services) {
        out += &line(row.each_ref().map(String::as_str));
        for p in &s.problems {
            let _ = writeln!(out, "    problem: {p}");
        }
        for (key, value) in s.config.iter().flat_map(|c| c.attributes.iter()) {
            let _ = writeln!(out, "    attribute {key}={}", abbreviated(value));
        }
        if let Some(access) = s.config.as_ref().and_then(|c| c.access.as_ref()) {
            let _ = writeln!(out, "    access {access}");
        }
    }
    if all.services.is_empty() {
        out.push_str("(no services)\n");
    }
    out
}

/// An attribute's value on one line of `iox list`: its first line, at most 60
/// characters, `...` if anything was left out (`iox show` prints it whole).
fn abbreviated(value: &str) -> String {
    const MOST: usize = 60;
    let first = value.lines().next().unwrap_or("");
    let cut: String = first.chars().take(MOST).collect();
    if cut.len() < value.len() {
        format!("{cut}...")
    } else {
        cut
    }
}

/// `iox show NAME`.
pub fn show(s: &ServiceInfo) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "service   {}", s.name.as_deref().unwrap_or("?"));
    let with_pool_file = matches!(
        s.config.as_ref().map(|c| c.backing),
        Some(iox_service::PayloadBacking::File)
    );
    let _ = writeln!(
        out,
        "files     {}.{{service,dynamic,chunks{}}}",
        s.stem,
        if with_pool_file { ",pool" } else { "" }
    );
    let _ = writeln!(out, "state     {}", health(s));
    for r in &s.stale_reasons {
        let _ = writeln!(out, "          stale: {r}");
    }
    for p in &s.problems {
        let _ = writeln!(out, "          problem: {p}");
    }
    for (key, value) in s.config.iter().flat_map(|c| c.attributes.iter()) {
        // A value of several lines continues under its first line.
        let indent = " ".repeat("attribute ".len() + key.len() + " = ".len());
        let _ = writeln!(
            out,
            "attribute {key} = {}",
            value.trim_end_matches('\n').replace('\n', &format!("\n{indent}"))
        );
    }
    if let Some(access) = s.config.as_ref().and_then(|c| c.access.as_ref()) {
        let _ = writeln!(out, "access    {access}");
    }
    let event = s.config.as_ref().and_then(|c| c.event().copied());
    if let (Some(c), Some(e)) = (&s.config, event) {
        let id = |i: Option<u32>| i.map_or("-".to_string(), |i| i.to_string());
        let _ = writeln!(out, "pattern   event, ids 0..={}", e.event_id_max);
        let _ = writeln!(
            out,
            "lifecycle notifier created {}, dropped {}, dead {}",
            id(e.notifier_created_event),
            id(e.notifier_dropped_event),
            id(e.notifier_dead_event)
        );
        let _ = writeln!(
            out,
            "limits    {} notifiers, {} listeners",
            e.max_notifiers, e.max_listeners
        );
        let _ = writeln!(out, "mode      {:o}", c.permissions);
    } else if let Some((c, b)) = s.config.as_ref().and_then(|c| Some((c, c.blackboard()?))) {
        let _ = writeln!(
            out,
            "pattern   blackboard, {} keys of {}",
            b.entries.len(),
            b.key_type
        );
        let _ = writeln!(
            out,
            "limits    {} writers, {} readers, {} buffers per key",
            b.max_writers, b.max_readers, b.buffers
        );
        let _ = writeln!(out, "mode      {:o}", c.permissions);
        let _ = writeln!(
            out,
            "\n{:<20} {:<24} {:>10} {:>6} {:<6}",
            "KEY", "VALUE", "GENERATION", "PINNED", "LOCKED"
        );
        for k in &s.keys {
            let _ = writeln!(
                out,
                "{:<20} {:<24} {:>10} {:>6} {:<6}",
                k.key,
                k.value,
                k.generation,
                k.pinned_buffers,
                if k.locked { "yes" } else { "no" }
            );
        }
    } else if let Some(c) = &s.config {
        if let Some(h) = &c.user_header {
            let offset = iox_service::user_header::payload_offset_of(c);
            let _ = writeln!(out, "header    {} (payload at offset {offset})", h.identity);
            if let Some(schema) = &h.schema {
                for line in fields(schema, "") {
                    let _ = writeln!(out, "  {line}");
                }
            }
        }
        let _ = writeln!(out, "payload   {}", c.payload);
        if let Some(schema) = &c.schema {
            for line in fields(schema, "") {
                let _ = writeln!(out, "  {line}");
            }
        }
        if let Some(r) = c.request_response() {
            let _ = writeln!(out, "response  {}", r.response);
            let in_flight: u64 = s
                .ports
                .iter()
                .filter(|p| p.kind == "client")
                .map(|p| p.pending)
                .sum();
            let _ = writeln!(
                out,
                "limits    {} clients, {} servers, {} active requests per client, response buffer {}",
                r.max_clients, r.max_servers, r.max_active_requests_per_client, r.max_response_buffer
            );
            let _ = writeln!(out, "requests  {in_flight} in flight");
        }
        let _ = writeln!(out, "memory    {}", c.memory_type);
        if let Some(p) = c.publish_subscribe() {
            let _ = writeln!(
                out,
                "limits    {} publishers, {} subscribers, buffer {}, {} loans, {} held, overflow {:?}, history {}",
                p.max_publishers,
                p.max_subscribers,
                p.subscriber_buffer,
                p.max_loans,
                p.max_held,
                p.overflow,
                p.history
            );
            if p.tensors || c.memory_type == iox_service::MemoryType::CudaDevice {
                let element = c.tensor_element();
                let _ = match element {
                    Some(t) => writeln!(
                        out,
                        "tensors   {t}, with each sample's shape and strides (sent by tensor publishers)"
                    ),
                    None => writeln!(
                        out,
                        "tensors   none: the payload is not a slice of numbers (bytes only)"
                    ),
                };
            }
        }
        let _ = writeln!(out, "mode      {:o}", c.permissions);
        let _ = match c.backing {
            iox_service::PayloadBacking::File => writeln!(out, "backing   file ({}.pool)", s.stem),
            iox_service::PayloadBacking::Memfd(id) => writeln!(
                out,
                "backing   sealed memfd (inode {}:{}, reached through the processes using it)",
                id.dev, id.ino
            ),
            iox_service::PayloadBacking::CudaDevice(id) => writeln!(
                out,
                "backing   memory of GPU {} ({} bytes, exported by the driver, handed over by the processes using it)",
                id.uuid_text(),
                id.len
            ),
        };
        let _ = writeln!(out, "pool      {}", bytes(s.pool_bytes));
        let pages = c.layout.page_size();
        if !pages.is_base() {
            let _ = writeln!(out, "pages     {pages}");
            for p in &s.pages {
                let _ = writeln!(out, "  {}", mapped_pages(p));
            }
        }
    }
    if event.is_some() {
        return out + &event_ports(s);
    }
    if !s.classes.is_empty() && s.keys.is_empty() {
        let _ = writeln!(
            out,
            "\n{:>12} {:>8} {:>8} {:>8}",
            "CHUNK", "COUNT", "IN USE", "FREE"
        );
        for c in &s.classes {
            let _ = writeln!(
                out,
                "{:>12} {:>8} {:>8} {:>8}",
                bytes(c.chunk_size),
                c.count,
                c.in_use,
                c.free
            );
        }
    }
    let _ = writeln!(
        out,
        "\n{:<11} {:>4} {:>8} {:<6} {:<9} {:<6} {:>10} {:>8} {:>7}",
        "PORT", "SLOT", "PID", "ALIVE", "PHASE", "PINNED", "SENT", "MISSED", "PENDING"
    );
    for p in &s.ports {
        let _ = writeln!(
            out,
            "{:<11} {:>4} {:>8} {:<6} {:<9} {:<6} {:>10} {:>8} {:>7}",
            p.kind,
            p.slot,
            shown_pid(p.pid, p.other_namespace),
            if p.alive { "yes" } else { "DEAD" },
            p.phase,
            if p.pinned { "yes" } else { "no" },
            p.sent,
            p.missed,
            p.pending
        );
    }
    let _ = writeln!(
        out,
        "\n{:>8} {:<6} {:<6} {:>12}",
        "PROCESS", "ALIVE", "PINNED", "PINNED BYTES"
    );
    for p in &s.processes {
        let _ = writeln!(
            out,
            "{:>8} {:<6} {:<6} {:>12}",
            shown_pid(p.pid, p.other_namespace),
            if p.alive { "yes" } else { "DEAD" },
            if p.pinned { "yes" } else { "no" },
            if p.pinned {
                bytes(p.pinned_bytes)
            } else {
                "-".into()
            }
        );
    }
    let _ = writeln!(
        out,
        "\nhandles   {}",
        s.users
            .iter()
            .map(|u| format!(
                "pid {}{}",
                shown_pid(u.pid, u.other_namespace),
                if u.alive { "" } else { " (DEAD)" }
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    out.push_str(&namespace_note(s));
    out
}

/// The ports and handles of an event service: notifiers with their notification
/// counts, listeners with the ids pending for them.
fn event_ports(s: &ServiceInfo) -> String {
    let mut out = format!(
        "\n{:<9} {:>4} {:>8} {:<6} {:<9} {:>10}  {}\n",
        "PORT", "SLOT", "PID", "ALIVE", "PHASE", "NOTIFIED", "PENDING IDS"
    );
    for p in &s.ports {
        let notified = if p.kind == "notifier" {
            p.sent.to_string()
        } else {
            "-".into()
        };
        let pending = if p.kind == "listener" {
            pending_ids(&p.pending_ids)
        } else {
            "-".into()
        };
        let _ = writeln!(
            out,
            "{:<9} {:>4} {:>8} {:<6} {:<9} {:>10}  {}",
            p.kind,
            p.slot,
            shown_pid(p.pid, p.other_namespace),
            if p.alive { "yes" } else { "DEAD" },
            p.phase,
            notified,
            pending
        );
    }
    let _ = writeln!(
        out,
        "\nhandles   {}",
        s.users
            .iter()
            .map(|u| format!(
                "pid {}{}",
                shown_pid(u.pid, u.other_namespace),
                if u.alive { "" } else { " (DEAD)" }
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    out.push_str(&namespace_note(s));
    out
}

/// Pending ids, the first 16 of them and a count of the rest.
fn pending_ids(ids: &[u32]) -> String {
    if ids.is_empty() {
        return "(none)".into();
    }
    let shown: Vec<String> = ids.iter().take(16).map(u32::to_string).collect();
    match ids.len() {
        n if n > 16 => format!("{} (+{} more)", shown.join(" "), n - 16),
        _ => shown.join(" "),
    }
}

/// One frame of `iox watch NAME`.
pub fn watch(s: &ServiceInfo, rate: Option<f64>, interval: Duration) -> String {
    let mut out = format!(
        "{}  ({}; every {:?}; Ctrl-C to stop)\n\n",
        s.name.as_deref().unwrap_or(&s.stem),
        health(s),
        interval
    );
    for c in &s.classes {
        let width = 40;
        let filled = (c.in_use as usize * width).div_ceil(c.count.max(1) as usize);
        let _ = writeln!(
            out,
            "{:>10} [{}{}] {:>6}/{:<6} in use",
            bytes(c.chunk_size),
            "#".repeat(filled),
            ".".repeat(width - filled),
            c.in_use,
            c.count
        );
    }
    let (p, sub) = (ports(s.publishers), ports(s.subscribers));
    let _ = writeln!(out, "\npublishers {p}, subscribers {sub}");
    let _ = writeln!(out, "samples/s  {}", samples_per_second(rate));
    out
}

fn samples_per_second(rate: Option<f64>) -> String {
    match rate {
        Some(r) => format!("{r:.0}"),
        None => "(measuring)".into(),
    }
}

/// One refresh of `iox watch NAME` when its output is not a terminal: one plain line,
/// no screen control.
pub fn watch_line(s: &ServiceInfo, rate: Option<f64>) -> String {
    let classes: Vec<String> = s
        .classes
        .iter()
        .map(|c| format!("{} {}/{}", bytes(c.chunk_size), c.in_use, c.count))
        .collect();
    format!(
        "{}  {}  publishers {}  subscribers {}  in use {}  samples/s {}\n",
        s.name.as_deref().unwrap_or(&s.stem),
        health(s),
        ports(s.publishers),
        ports(s.subscribers),
        if classes.is_empty() {
            "?".to_string()
        } else {
            classes.join(", ")
        },
        samples_per_second(rate)
    )
}

/// What `iox clean --dry-run` would do to one service.
pub fn dry_run(s: &ServiceInfo) -> String {
    let name = s.name.as_deref().unwrap_or(&s.stem);
    let mut out = String::new();
    for p in s.ports.iter().filter(|p| !p.alive) {
        let _ = writeln!(
            out,
            "{name}: would recover {} slot {} of dead pid {}",
            p.kind, p.slot, p.pid
        );
    }
    for u in s.users.iter().filter(|u| !u.alive) {
        let _ = writeln!(out, "{name}: would unregister the handle of dead pid {}", u.pid);
    }
    if s.would_be_removed() {
        let _ = writeln!(out, "{name}: would remove the service (no live process uses it)");
        for f in &s.files {
            let _ = writeln!(out, "{name}: would remove file {f} (of the service)");
        }
    }
    for p in &s.problems {
        let _ = writeln!(out, "{name}: corrupt, left alone: {p}");
    }
    if out.is_empty() {
        let _ = writeln!(out, "{name}: nothing to do");
    }
    out
}

/// The result of `iox clean`.
pub fn report(r: &CleanupReport) -> String {
    format!(
        "looked at {} service(s): recovered {} port(s) of dead processes ({} chunk(s) freed, {} interrupted send(s) finished), {} dead handle(s); removed {} service(s) and {} file(s) of dead processes",
        r.services, r.ports, r.chunks_freed, r.sends_finished, r.users, r.services_removed, r.files_removed
    )
}

/// A pid as its process sees it, starred when that process is in another PID
/// namespace (another container): there the number names another process, or none.
fn shown_pid(pid: u32, other_namespace: bool) -> String {
    if other_namespace {
        format!("{pid}*")
    } else {
        pid.to_string()
    }
}

/// The footnote for starred pids, if any are shown.
fn namespace_note(s: &ServiceInfo) -> String {
    let starred = s.ports.iter().any(|p| p.other_namespace) || s.users.iter().any(|u| u.other_namespace);
    if starred {
        "* pid in another PID namespace (another container), as that process sees it\n".into()
    } else {
        String::new()
    }
}

/// One line per field of `schema` (nested structs indented under their field):
/// `name: type @ offset`.
fn fields(schema: &iox_service::Schema, indent: &str) -> Vec<String> {
    let iox_service::Schema::Struct { fields: list, .. } = schema else {
        return vec![format!("{indent}schema: {schema}")];
    };
    let mut out = Vec::new();
    for f in list {
        match &f.schema {
            nested @ iox_service::Schema::Struct { name, .. } => {
                out.push(format!("{indent}{}: {name} @ {}", f.name, f.offset));
                out.extend(fields(nested, &format!("{indent}  ")));
            }
            other => out.push(format!("{indent}{}: {other} @ {}", f.name, f.offset)),
        }
    }
    out
}
