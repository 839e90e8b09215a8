//! How C handles are checked: ports and services behind marked pointers, loans and
//! samples behind ids with generations.
//!
//! - A service or port is a `Box` handed out as a pointer. Its first word is a marker
//!   ([`Marked`]) that names its kind while it lives and is overwritten when it is
//!   dropped, so a NULL pointer, a pointer of another kind and (while the allocator has
//!   not reused the memory) a dropped one are refused with a status instead of being
//!   used. This is a best effort: a pointer this library never made, or one whose memory
//!   was reused, is undefined behaviour in C as with any C library.
//! - A port remembers the thread that created it; a call from another thread is
//!   refused (`IOX_STATUS_WRONG_THREAD`), as a port's send and receive state is
//!   single-threaded.
//! - A loan or a sample is an id into its port's [`Slots`]: the slot index and the
//!   slot's generation, which changes whenever the slot is emptied. An id that was
//!   sent, discarded or released, or one of another port, no longer matches, and the
//!   call says so (`IOX_STATUS_STALE_HANDLE`): these are fully checked.

use crate::status::{IoxStatus, fail};

/// The marker of a live object of kind `kind`.
pub(crate) const fn marker(kind: &[u8; 8]) -> u64 {
    u64::from_le_bytes(*kind)
}

/// What a dropped object's marker becomes.
const DEAD: u64 = marker(b"iox-dead");

/// An object handed to C: its marker first, then what it holds.
#[repr(C)]
pub(crate) struct Marked<T> {
    /// Unused: a freed block's first words are where allocators keep their free-list
    /// links, so the marker comes after them and reads `DEAD` until the block is reused.
    _allocator_words: [u64; 2],
    marker: u64,
    thread: usize,
    pub(crate) inner: T,
}

/// An id of this thread: `pthread_self`, one load from the thread pointer (a Rust
/// thread-local in a shared library costs a `__tls_get_addr` call per look). A thread
/// that exited may pass its id to a new one, which the check then takes for the
/// creator: the check catches a port shared between live threads, its purpose.
fn this_thread() -> usize {
    // SAFETY: pthread_self has no preconditions and cannot fail.
    unsafe { libc::pthread_self() as usize }
}

impl<T> Marked<T> {
    /// Boxes `inner` under `marker` for the calling thread; the pointer for C.
    pub(crate) fn into_raw(marker: u64, inner: T) -> *mut Self {
        Box::into_raw(Box::new(Self {
            _allocator_words: [0; 2],
            marker,
            thread: this_thread(),
            inner,
        }))
    }

    /// The object behind `ptr` if it is a live one of kind `marker`, used from the thread
    /// that made it when `same_thread`.
    ///
    /// # Safety
    /// `ptr` is NULL or points to readable memory at least as large as a `Marked<T>`
    /// (see the module docs for what is checked and what cannot be).
    pub(crate) unsafe fn get<'a>(
        ptr: *mut Self,
        marker: u64,
        same_thread: bool,
    ) -> Result<&'a Self, IoxStatus> {
        if ptr.is_null() {
            return Err(fail(IoxStatus::NullPointer, "a NULL handle was passed"));
        }
        // SAFETY: the caller's contract: `ptr` points to memory at least this large;
        // the marker is read first, before anything that needs a live object.
        let seen = unsafe { std::ptr::addr_of!((*ptr).marker).read() };
        if seen != marker {
            let what = if seen == DEAD {
                "this handle was already dropped"
            } else {
                "this is not a live handle of this kind (of another kind, dropped already, or not made by iox)"
            };
            return Err(fail(IoxStatus::InvalidHandle, what));
        }
        // SAFETY: the marker says this is a live `Marked<T>` made by `into_raw`.
        let this = unsafe { &*ptr };
        if same_thread && this.thread != this_thread() {
            return Err(fail(
                IoxStatus::WrongThread,
                "this port belongs to the thread that created it; create a port in this thread",
            ));
        }
        Ok(this)
    }

    /// Drops the object behind `ptr` (checked as [`Self::get`]).
    ///
    /// # Safety
    /// As [`Self::get`], and no reference to the object is in use.
    pub(crate) unsafe fn drop_raw(ptr: *mut Self, marker: u64, same_thread: bool) -> IoxStatus {
        // SAFETY: the caller's contract.
        if let Err(status) = unsafe { Self::get(ptr, marker, same_thread) } {
            return status;
        }
        // SAFETY: checked live and ours above; the marker is overwritten first so a
        // second drop of the same pointer is refused while the memory is not reused.
        unsafe {
            std::ptr::addr_of_mut!((*ptr).marker).write(DEAD);
            let mut b = Box::from_raw(ptr);
            b.marker = DEAD;
            drop(b);
        }
        IoxStatus::Ok
    }
}

/// Items a port lends to C (loans, samples), each named by an id: `index << 32 |
/// generation`. Generations are odd while a slot is full, so 0 is never an id.
pub(crate) struct Slots<T> {
    slots: Vec<(u32, Option<T>)>,
    free: Vec<u32>,
}

impl<T> Slots<T> {
    pub(crate) fn new() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Keeps `item`; its id.
    #[inline]
    pub(crate) fn insert(&mut self, item: T) -> u64 {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push((0, None));
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.0 = slot.0.wrapping_add(1) | 1;
        slot.1 = Some(item);
        u64::from(index) << 32 | u64::from(slot.0)
    }

    /// The live items with their ids.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, (g, item))| item.as_ref().map(|t| ((i as u64) << 32 | u64::from(*g), t)))
    }

    /// Takes the item named `id` out, if it is live; its id is stale from then on.
    #[inline]
    pub(crate) fn remove(&mut self, id: u64) -> Option<T> {
        let (index, generation) = ((id >> 32) as usize, id as u32);
        match self.slots.get_mut(index) {
            Some((g, item @ Some(_))) if *g == generation => {
                *g = g.wrapping_add(1);
                self.free.push(index as u32);
                item.take()
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Slots;

    #[test]
    fn ids_go_stale_when_their_item_leaves() {
        let mut s = Slots::new();
        let a = s.insert('a');
        assert_ne!(a, 0);
        assert_eq!(s.remove(a), Some('a'));
        assert_eq!(s.remove(a), None, "a second remove of one id");
        let b = s.insert('b');
        assert_ne!(a, b, "the reused slot has a new generation");
        assert_eq!(s.remove(a), None);
        assert_eq!(s.remove(b ^ (1 << 32)), None, "another index");
        assert_eq!(
            s.iter().map(|(id, c)| (id, *c)).collect::<Vec<_>>(),
            vec![(b, 'b')]
        );
        assert_eq!(s.remove(b), Some('b'));
        assert_eq!(s.iter().count(), 0);
    }
}
