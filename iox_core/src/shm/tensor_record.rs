//! A chunk's tensor record: the element type, shape and strides of the sample in it,
//! kept in host memory beside the chunk (a device service's chunks are GPU memory,
//! which no host port reads). One record per chunk of a tensor service's pool (every
//! `CudaDevice` pub-sub service, and host services created with `tensors`), in its
//! dynamic segment (`Dynamic::tensor_record`, the last region); the words are a
//! [`TensorLayout`]'s ([`crate::tensor`]).
//!
//! Who writes and who reads, and why no reader sees a torn or stale record:
//! - only the port holding the chunk's loan writes its record ([`TensorRecord::store`],
//!   Relaxed stores), before it sends the chunk; every loan of a tensor port writes
//!   one (a plain loan a 1-D record of its length), and a tensor service has no other
//!   sending ports (host ports of a device service, and plain publishers of a host
//!   tensor service, are refused), so a chunk is never sent with an earlier sample's
//!   record;
//! - readers load it ([`TensorRecord::load`], Relaxed) while they hold a sample of the
//!   chunk: the send's Release and the take's Acquire order the stores before the
//!   loads, and the chunk is loaned again (its record written) only once every sample
//!   of it was released;
//! - a writer killed while storing leaves a record of a chunk it never sent: recovery
//!   returns the chunk and the next loan writes the record again. A writer with write
//!   access that stores garbage is a writer that sends garbage bytes: readers check the
//!   record ([`TensorLayout::from_words`], then against the sample), so it is an error,
//!   never a read outside the sample.

use crate::sync::{AtomicU64, Ordering};
use crate::tensor::{TensorError, TensorLayout, WORDS};

/// A view of one chunk's record.
#[derive(Clone, Copy)]
pub struct TensorRecord<'a> {
    words: &'a [AtomicU64],
}

impl<'a> TensorRecord<'a> {
    /// The record in `words` (exactly [`WORDS`] of them).
    pub fn new(words: &'a [AtomicU64]) -> Self {
        assert_eq!(words.len(), WORDS, "a tensor record is {WORDS} words");
        Self { words }
    }

    /// Writes `t` (by the chunk's loan holder, before the send).
    pub fn store(&self, t: &TensorLayout) {
        for (word, value) in self.words.iter().zip(t.to_words()) {
            word.store(value, Ordering::Relaxed);
        }
    }

    /// Reads the record (by a holder of a sample of the chunk), checked as words.
    pub fn load(&self) -> Result<TensorLayout, TensorError> {
        let words: [u64; WORDS] = std::array::from_fn(|i| self.words[i].load(Ordering::Relaxed));
        TensorLayout::from_words(&words)
    }
}
