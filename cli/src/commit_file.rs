//! An output file that only ever grows by whole commits, so a recorder killed at any
//! moment (SIGKILL, a second signal) leaves a file that ends at a record boundary.
//!
//! Writes go to memory; [`CommitFile::flush`] hands everything written since the last
//! commit to the kernel in one `write` (a regular file takes it whole: a process
//! killed during the call can cut it short only in the kernel's page-by-page copy,
//! which takes microseconds per MiB). The MCAP writer writes through it with seeking
//! disabled (chunks are built in memory, never patched in place), and the recorder
//! commits only after `mcap::Writer::flush`, which closes the chunk and writes its
//! message indexes first: so every commit ends at a record boundary, and no placeholder
//! length ever reaches the file.
//!
//! Memory: what was written since the last commit; the recorder commits at least
//! every [`crate::record::FLUSH_EVERY`] and whenever [`CommitFile::pending`] passes
//! [`COMMIT_BYTES`].

use std::cell::Cell;
use std::fs::File;
use std::io::Write;
use std::rc::Rc;

/// Bytes held in memory before the recorder commits them, whatever the time.
pub const COMMIT_BYTES: usize = 4 << 20;

/// See the module docs.
pub struct CommitFile {
    file: File,
    held: Vec<u8>,
    /// The length of `held`, shared with the recorder (which cannot reach the file
    /// inside the MCAP writer).
    pending: Rc<Cell<usize>>,
}

impl CommitFile {
    /// A committing writer to `file`; the counter of bytes not yet committed.
    pub fn new(file: File) -> (Self, Rc<Cell<usize>>) {
        let pending = Rc::new(Cell::new(0));
        let me = Self {
            file,
            held: Vec::with_capacity(COMMIT_BYTES),
            pending: Rc::clone(&pending),
        };
        (me, pending)
    }
}

impl Write for CommitFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.held.extend_from_slice(buf);
        self.pending.set(self.held.len());
        Ok(buf.len())
    }

    /// Commits: everything held, in one `write_all`.
    fn flush(&mut self) -> std::io::Result<()> {
        if !self.held.is_empty() {
            self.file.write_all(&self.held)?;
            self.held.clear();
            self.pending.set(0);
        }
        Ok(())
    }
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
        f.flush().unwrap();
        assert_eq!(pending.get(), 0);
        assert_eq!(std::fs::read(&path).unwrap(), b"half a record");
    }
}
