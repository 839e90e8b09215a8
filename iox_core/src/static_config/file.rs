//! Reading a static config file off disk: bounded in size, never following a link,
//! and with a permission error that names the file's owner, group and mode and who
//! asked.

use std::io::Read;
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags};

use crate::static_config::{ConfigError, MAX_CONFIG_LEN};

/// Who may read `path` and who is asking: "owned by 1000:50, mode 0600; this process
/// is uid 65534 gid 65534" (the file's part left out if it cannot be looked at).
fn access_of(path: &Path) -> String {
    let me = format!(
        "this process is uid {} gid {}",
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw()
    );
    match rustix::fs::stat(path) {
        Ok(st) => format!(
            "owned by {}:{}, mode {:04o}; {me}",
            st.st_uid,
            st.st_gid,
            st.st_mode & 0o7777
        ),
        Err(_) => me,
    }
}

pub fn read_bounded(path: &Path) -> Result<String, ConfigError> {
    let p = || path.to_owned();
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        rustix::io::Errno::NOENT => ConfigError::NotFound { path: p() },
        rustix::io::Errno::LOOP => ConfigError::NotRegularFile { path: p() },
        rustix::io::Errno::ACCESS | rustix::io::Errno::PERM => ConfigError::PermissionDenied {
            path: p(),
            access: access_of(path),
        },
        e => ConfigError::Io {
            path: p(),
            source: e.into(),
        },
    })?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| ConfigError::Io {
        path: p(),
        source: e.into(),
    })?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(ConfigError::NotRegularFile { path: p() });
    }
    if stat.st_size as u64 > MAX_CONFIG_LEN {
        return Err(ConfigError::TooLarge {
            path: p(),
            len: stat.st_size as u64,
        });
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(MAX_CONFIG_LEN + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| ConfigError::Io { path: p(), source })?;
    String::from_utf8(bytes).map_err(|e| ConfigError::Malformed {
        path: p(),
        message: format!("not UTF-8 text ({e})"),
    })
}
