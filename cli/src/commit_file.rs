//! An output file that only ever grows by whole commits, so a recorder killed at any
//! moment (SIGKILL, a second signal) leaves a file that ends at a record boundary.
//!
//! Writes go to memory; [`CommitFile::flush`] hands everything written since the last
//! commit to the kernel in one `write` (a regular file takes it whole: a process
//! killed during the call can cut it short only in the kernel's page-by-page copy,
//! which takes microseconds per MiB). It seeks within what it holds (not into what it
//! committed), so the MCAP writer writes a chunk in place and patches the chunk's
//! length there, in memory; the recorder commits only after `mcap::Writer::flush`,
//! which closes the chunk (its length patched) and writes its message indexes first:
//! so every commit ends at a record boundary, and no placeholder length ever reaches
//! the file.
//!
//! A commit that fails (a full disk) is taken back: the file is cut to its length
//! before it, and every later write and commit fails, so nothing (the MCAP writer's
//! summary, written when it is dropped) lands behind a torn commit.
//!
//! Memory: what was written since the last commit; the recorder commits at least
//! every [`crate::record::FLUSH_EVERY`] and whenever [`CommitFile::pending`] passes
//! [`COMMIT_BYTES`].

use std::cell::Cell;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::rc::Rc;

/// Bytes held in memory before the recorder commits them, whatever the time.
pub const COMMIT_BYTES: usize = 2 << 20;

/// See the module docs.
pub struct CommitFile {
    file: File,
    held: Vec<u8>,
    /// Where the next write goes in `held` (the MCAP writer seeks back to patch a
    /// chunk's length).
    at: usize,
    /// The length of `held`, shared with the recorder (which cannot reach the file
    /// inside the MCAP writer).
    pending: Rc<Cell<usize>>,
    /// The file's length after the last commit.
    committed: u64,
    /// A commit failed: nothing more is written.
    failed: bool,
}

impl CommitFile {
    /// A committing writer to `file`; the counter of bytes not yet committed.
    pub fn new(file: File) -> (Self, Rc<Cell<usize>>) {
        let pending = Rc::new(Cell::new(0));
        let me = Self {
            file,
            held: Vec::with_capacity(COMMIT_BYTES),
            at: 0,
            pending: Rc::clone(&pending),
            committed: 0,
            failed: false,
        };
        (me, pending)
    }
}

impl Write for CommitFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.failed {
            return Err(failed());
        }
        if self.at == self.held.len() {
            // Appending: all but the chunk length's patch.
            self.held.extend_from_slice(buf);
        } else {
            let over = buf.len().min(self.held.len() - self.at);
            self.held[self.at..self.at + over].copy_from_slice(&buf[..over]);
            self.held.extend_from_slice(&buf[over..]);
        }
        self.at += buf.len();
        self.pending.set(self.held.len());
        Ok(buf.len())
    }

    /// Commits: everything held, in one `write_all`; a failed one is taken back.
    fn flush(&mut self) -> std::io::Result<()> {
        if self.failed {
            return Err(failed());
        }
        if !self.held.is_empty() {
            if let Err(e) = self.file.write_all(&self.held) {
                self.failed = true;
                let _ = self.file.set_len(self.committed);
                return Err(e);
            }
            self.committed += self.held.len() as u64;
            self.held.clear();
            self.at = 0;
            self.pending.set(0);
        }
        Ok(())
    }
}

impl Seek for CommitFile {
    /// Moves within what is held since the last commit; committed bytes are final.
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        let end = self.committed + self.held.len() as u64;
        let target = match pos {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => end.checked_add_signed(d),
            SeekFrom::Current(d) => (self.committed + self.at as u64).checked_add_signed(d),
        };
        match target {
            Some(t) if (self.committed..=end).contains(&t) => {
                self.at = (t - self.committed) as usize;
                Ok(t)
            }
            _ => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a seek outside what was written since the last commit",
            )),
        }
    }
}

fn failed() -> std::io::Error {
    std::io::Error::other("an earlier commit of this file failed; it ends at the commit before")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_reaches_the_file_before_a_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let (mut f, pending) = CommitFile::new(File::create(&path).unwrap());
        f.write_all(b"half a record").unwrap();
        assert_eq!(pending.get(), 13);
        assert_eq!(std::fs::read(&path).unwrap(), b"");
        // Patched in place before the commit, as a chunk's length is.
        f.seek(SeekFrom::Start(0)).unwrap();
        f.write_all(b"HALF").unwrap();
        f.seek(SeekFrom::End(0)).unwrap();
        f.write_all(b"!").unwrap();
        f.flush().unwrap();
        assert_eq!(pending.get(), 0);
        assert_eq!(std::fs::read(&path).unwrap(), b"HALF a record!");
        // What is committed is final.
        assert!(f.seek(SeekFrom::Start(0)).is_err());
        assert_eq!(f.stream_position().unwrap(), 14);
    }

    /// A commit that fails half-way (here: past the file size limit, as a full disk
    /// would) is cut back to the commit before, and nothing is written after it. In a
    /// child process: the limit is the process's.
    #[test]
    fn a_failed_commit_is_taken_back() {
        const TEST: &str = "commit_file::tests::a_failed_commit_is_taken_back";
        if iox_testkit::role().is_none() {
            let dir = tempfile::tempdir().unwrap();
            let child = iox_testkit::spawn_self(TEST, "small", &[("DIR", dir.path().display().to_string())]);
            iox_testkit::wait_ok(child, std::time::Duration::from_secs(60));
            return;
        }
        let path = std::path::PathBuf::from(iox_testkit::env::<String>("DIR")).join("f");
        let (mut f, _) = CommitFile::new(File::create(&path).unwrap());
        f.write_all(b"first").unwrap();
        f.flush().unwrap();
        // SAFETY: ignoring SIGXFSZ only makes writes past the limit fail with EFBIG.
        unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
        let limit = rustix::process::getrlimit(rustix::process::Resource::Fsize);
        let small = rustix::process::Rlimit {
            current: Some(4096 + 5),
            maximum: limit.maximum,
        };
        rustix::process::setrlimit(rustix::process::Resource::Fsize, small).unwrap();
        f.write_all(&[7; 8192]).unwrap();
        assert!(f.flush().is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        assert!(f.write_all(b"summary").is_err() && f.flush().is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
    }
}
