//! Whether a peer process may have a service's descriptors: its credentials, read
//! from the connected socket (`SO_PEERCRED`, `SO_PEERGROUPS`), against the owner,
//! group and mode of the service's dynamic segment, the file every participant opens
//! read-write. The rule is the kernel's own for that file: the owner's bits if the
//! peer is its owner, else the group's if the file's group is one of the peer's,
//! else the others'; uid 0 is admitted (it could open the file anyway).
//!
//! Credentials are those of the peer when it connected, translated by the kernel
//! into this process's user namespace (a pid the peer has in another PID namespace
//! reads as 0 here, and is not used).

use std::os::fd::{AsRawFd, BorrowedFd};

/// A peer's credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (empty if the kernel cannot say).
    pub groups: Vec<u32>,
}

/// The credentials of the peer of connected Unix socket `fd`.
pub fn peer(fd: BorrowedFd<'_>) -> std::io::Result<Peer> {
    // libc's ucred rather than rustix's: rustix types the pid as non-zero, and a peer
    // in another PID namespace has pid 0 here.
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` is a writable ucred of `len` bytes, the size SO_PEERCRED writes.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Supplementary groups: 64 first; with more, the kernel says how many (ERANGE)
    // and the second call has room. An old kernel without SO_PEERGROUPS: none.
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    for _ in 0..2 {
        let mut len = (groups.len() * size_of::<libc::gid_t>()) as libc::socklen_t;
        // SAFETY: `groups` is a writable buffer of `len` bytes; the kernel writes at
        // most `len` bytes of gid_t and says how many (or, with ERANGE, how many it
        // needs, writing nothing).
        let rc = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let count = len as usize / size_of::<libc::gid_t>();
        if rc == 0 {
            groups.truncate(count);
            break;
        }
        let again =
            std::io::Error::last_os_error().raw_os_error() == Some(libc::ERANGE) && count > groups.len();
        groups = if again { vec![0; count] } else { Vec::new() };
        if !again {
            break;
        }
    }
    Ok(Peer {
        uid: cred.uid,
        gid: cred.gid,
        groups,
    })
}

/// `Ok` if `peer` may read and write a file owned by `owner:group` with `mode`;
/// otherwise why not, naming the permissions.
pub fn admit(peer: &Peer, owner: u32, group: u32, mode: u32) -> Result<(), String> {
    if peer.uid == 0 {
        return Ok(());
    }
    let bits = if peer.uid == owner {
        (mode >> 6) & 0o6
    } else if peer.gid == group || peer.groups.contains(&group) {
        (mode >> 3) & 0o6
    } else {
        mode & 0o6
    };
    if bits == 0o6 {
        return Ok(());
    }
    Err(format!(
        "uid {} (gid {}) may not read and write the service, whose files are owned by \
         {owner}:{group} with mode {:04o}",
        peer.uid,
        peer.gid,
        mode & 0o7777
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(uid: u32, gid: u32, groups: &[u32]) -> Peer {
        Peer {
            uid,
            gid,
            groups: groups.to_vec(),
        }
    }

    #[test]
    fn the_kernels_rule_for_owner_group_and_others() {
        assert!(admit(&p(1000, 1000, &[]), 1000, 1000, 0o600).is_ok());
        assert!(admit(&p(1001, 1001, &[]), 1000, 1000, 0o600).is_err());
        assert!(admit(&p(1001, 50, &[]), 1000, 50, 0o660).is_ok(), "primary group");
        assert!(
            admit(&p(1001, 1001, &[7, 50]), 1000, 50, 0o660).is_ok(),
            "supplementary"
        );
        assert!(admit(&p(1001, 1001, &[7]), 1000, 50, 0o660).is_err());
        assert!(admit(&p(1001, 1001, &[]), 1000, 50, 0o666).is_ok(), "others");
        // The owner's bits decide for the owner, even when the group's would admit.
        assert!(admit(&p(1000, 50, &[]), 1000, 50, 0o060).is_err());
        assert!(admit(&p(0, 0, &[]), 1000, 50, 0o600).is_ok(), "root");
        let why = admit(&p(1001, 1001, &[]), 1000, 50, 0o660).unwrap_err();
        assert!(why.contains("1000:50") && why.contains("0660"), "{why}");
    }
}
