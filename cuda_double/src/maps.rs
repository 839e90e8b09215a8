//! Is a range of this process's address space mapped, and how: read from
//! `/proc/self/maps`, as a driver learns it from the kernel when it pins pages.

/// How a whole range is mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mapped {
    /// Some byte of it is not mapped (or not readable).
    No,
    /// Readable everywhere, not writable everywhere.
    ReadOnly,
    /// Readable and writable everywhere.
    ReadWrite,
}

impl Mapped {
    /// For the log.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Mapped::No => "no",
            Mapped::ReadOnly => "ro",
            Mapped::ReadWrite => "rw",
        }
    }
}

/// How `addr..addr + len` is mapped in this process now.
pub(crate) fn mapped(addr: usize, len: usize) -> Mapped {
    let Some(end) = addr.checked_add(len) else {
        return Mapped::No;
    };
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return Mapped::No;
    };
    let mut areas: Vec<(usize, usize, bool, bool)> = maps
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (start, stop) = fields.next()?.split_once('-')?;
            let perms = fields.next()?.as_bytes();
            Some((
                usize::from_str_radix(start, 16).ok()?,
                usize::from_str_radix(stop, 16).ok()?,
                perms.first() == Some(&b'r'),
                perms.get(1) == Some(&b'w'),
            ))
        })
        .collect();
    areas.sort_unstable();
    let (mut at, mut writable) = (addr, true);
    for (start, stop, read, write) in areas {
        if stop <= at {
            continue;
        }
        if start > at || !read {
            return Mapped::No;
        }
        writable &= write;
        at = stop;
        if at >= end {
            break;
        }
    }
    match (at >= end && len > 0, writable) {
        (false, _) => Mapped::No,
        (true, true) => Mapped::ReadWrite,
        (true, false) => Mapped::ReadOnly,
    }
}
