//! How C handles are checked: ports and services behind marked pointers, loans and
//! samples behind ids with generations.
//!
//! - A service or port is a `Box` handed out as a pointer. It carries a marker word
//!   ([`Marked`]) that names its kind while it lives and is overwritten when it is
//!   dropped, so a NULL pointer, a pointer of another kind and (while the allocator has
//!   not reused the memory) a dropped one are refused with a status instead of being
//!   used. This is a best effort: a pointer this library never made, or one whose memory
//!   was reused, is undefined behaviour in C as with any C library.
//! - A port remembers the thread that created it; a call from another thread is
//!   refused (`IOX_STATUS_WRONG_THREAD`), as a port's send and receive state is
//!   single-threaded.
//! - A loan or a sample is an id into its port's [`Slots`]: the table's tag, the slot
//!   index and the slot's generation, which changes whenever the slot is filled. An id
//!   that was sent, discarded or released, or one of another port or table, no longer
//!   matches, and the call says so (`IOX_STATUS_STALE_HANDLE`); the limits of that
//!   check are on [`Slots`].

use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU16, Ordering};

use crate::status::{IoxStatus, fail, refuse};

/// The marker of a live object of kind `kind`.
pub(crate) const fn marker(kind: &[u8; 8]) -> u64 {
    u64::from_le_bytes(*kind)
}

/// What a dropped object's marker becomes.
const DEAD: u64 = marker(b"iox-dead");

/// An object handed to C: two words left to the allocator, its marker, its creating
/// thread, then what it holds.
#[repr(C)]
pub(crate) struct Marked<T> {
    /// Unused: a freed block's first words are where allocators keep their free-list
    /// links, so the marker comes after them and reads `DEAD` until the block is reused.
    _allocator_words: [u64; 2],
    marker: u64,
    thread: usize,
    pub(crate) inner: T,
}

/// An id of this thread, unique among live threads. On x86-64 Linux it is the thread
/// pointer, which the ELF TLS ABI keeps at `%fs:0` (one load, no call); elsewhere
/// `pthread_self` (a call into libc). Either way no Rust thread-local is touched: one in
/// a shared library costs a `__tls_get_addr` call per look. A thread that exited may
/// pass its id to a new one, which the check then takes for the creator: the check
/// catches a port shared between live threads, its purpose.
#[inline(always)]
pub(crate) fn this_thread() -> usize {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let tp: usize;
        // SAFETY: the x86-64 ELF TLS ABI (which glibc and musl follow) makes the word at
        // `%fs:0` the thread control block's pointer to itself, readable by every
        // thread at any time; the load touches nothing else (no stack, flags kept).
        unsafe {
            std::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags));
        }
        tp
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        // SAFETY: pthread_self has no preconditions and cannot fail.
        unsafe { libc::pthread_self() as usize }
    }
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
            drop(Box::from_raw(ptr));
        }
        IoxStatus::Ok
    }
}

/// The live object of kind `marker` behind `ptr` (made by [`hand_out`]), used from its
/// creating thread when `same_thread`.
///
/// # Safety
/// As [`Marked::get`].
#[inline(always)]
pub(crate) unsafe fn live<'a, T>(ptr: *mut T, marker: u64, same_thread: bool) -> Result<&'a T, IoxStatus> {
    // SAFETY: the caller's contract.
    unsafe { Marked::<T>::get(ptr.cast(), marker, same_thread) }.map(|m| &m.inner)
}

/// Makes an object with `make` (once `out` is known not to be NULL), boxes it under
/// `marker` for the calling thread and writes the handle to `*out`.
///
/// # Safety
/// `out` is NULL (refused) or points to writable memory for a pointer.
pub(crate) unsafe fn hand_out<T>(
    out: *mut *mut T,
    marker: u64,
    make: impl FnOnce() -> Result<T, IoxStatus>,
) -> Result<(), IoxStatus> {
    let out = non_null(out, "out")?;
    let inner = make()?;
    let p = Marked::into_raw(marker, inner);
    // SAFETY: the caller's contract; not NULL (checked).
    unsafe { out.write(p.cast()) };
    Ok(())
}

/// Drops the object of kind `marker` behind `ptr`.
///
/// # Safety
/// As [`Marked::drop_raw`].
pub(crate) unsafe fn drop_handle<T>(ptr: *mut T, marker: u64, same_thread: bool) -> Result<(), IoxStatus> {
    // SAFETY: the caller's contract.
    match unsafe { Marked::<T>::drop_raw(ptr.cast(), marker, same_thread) } {
        IoxStatus::Ok => Ok(()),
        status => Err(status),
    }
}

/// `ptr`, if it is not NULL (`what` names it in the refusal).
#[inline(always)]
pub(crate) fn non_null<T>(ptr: *mut T, what: &str) -> Result<*mut T, IoxStatus> {
    if ptr.is_null() {
        return refuse(IoxStatus::NullPointer, format!("{what} must not be NULL"));
    }
    Ok(ptr)
}

/// Writes `value` through `out` if it is not NULL (an optional out parameter).
///
/// # Safety
/// `out` is NULL or points to writable memory for a `T`.
#[inline(always)]
pub(crate) unsafe fn put<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { out.write(value) };
    }
}

/// A loaned chunk: write `len_bytes` bytes at `data` (and, for a service with a user
/// header, `header_len` bytes at `header`), then send or discard it by `id`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoxLoan {
    /// The payload's first byte, aligned for the service's type.
    pub data: *mut c_void,
    /// The payload's length in bytes.
    pub len_bytes: u64,
    /// What the port knows this loan by.
    pub id: u64,
    /// The user header's first byte, aligned for its type (not initialised: write all
    /// `header_len` bytes before sending); NULL for a service without a header (and
    /// for request-response loans).
    pub header: *mut c_void,
    /// The user header's length in bytes (0 without one).
    pub header_len: u64,
}

/// A received sample (or request, or response): read `len_bytes` bytes at `data` (and
/// the user header's `header_len` bytes at `header`), then release it by `id`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoxSample {
    /// The payload's first byte (read-only).
    pub data: *const c_void,
    /// The payload's length in bytes.
    pub len_bytes: u64,
    /// Its length in elements of the service's type (1 for a value).
    pub len: u64,
    /// What the port knows this sample by.
    pub id: u64,
    /// The user header's first byte (read-only, aligned for its type); NULL for a
    /// service without a header (and for requests and responses).
    pub header: *const c_void,
    /// The user header's length in bytes (0 without one).
    pub header_len: u64,
}

/// Keeps loan `item` in `table` and describes it to C in `*out` (checked not NULL by
/// the caller before the loan was made), with its user header's address and length
/// (NULL and 0: none).
///
/// # Safety
/// `out` points to writable memory for an `IoxLoan`.
#[inline(always)]
pub(crate) unsafe fn lend<T>(
    table: &RefCell<Slots<T>>,
    item: T,
    data: *mut c_void,
    len_bytes: usize,
    (header, header_len): (*mut c_void, u64),
    out: *mut IoxLoan,
) -> Result<(), IoxStatus> {
    let id = table.borrow_mut().insert(item)?;
    let loan = IoxLoan {
        data,
        len_bytes: len_bytes as u64,
        id,
        header,
        header_len,
    };
    // SAFETY: the caller's contract.
    unsafe { out.write(loan) };
    Ok(())
}

/// Keeps received `item` in `table` and describes it to C in `*out` (checked not NULL
/// by the caller before the receive), with its user header's address and length (NULL
/// and 0: none).
///
/// # Safety
/// `out` points to writable memory for an `IoxSample`.
#[inline(always)]
pub(crate) unsafe fn show<T>(
    table: &RefCell<Slots<T>>,
    item: T,
    data: *const c_void,
    len_bytes: usize,
    len: usize,
    (header, header_len): (*const c_void, u64),
    out: *mut IoxSample,
) -> Result<(), IoxStatus> {
    let id = table.borrow_mut().insert(item)?;
    let sample = IoxSample {
        data,
        len_bytes: len_bytes as u64,
        len: len as u64,
        id,
        header,
        header_len,
    };
    // SAFETY: the caller's contract.
    unsafe { out.write(sample) };
    Ok(())
}

/// Takes the item `id` out of `table`, or refuses with `what` (a stale id).
#[inline(always)]
pub(crate) fn take<T>(table: &RefCell<Slots<T>>, id: u64, what: &str) -> Result<T, IoxStatus> {
    match table.borrow_mut().remove(id) {
        Some(item) => Ok(item),
        None => refuse(IoxStatus::StaleHandle, what),
    }
}

/// The length `len_bytes` from C as an address-sized count.
#[inline(always)]
pub(crate) fn bytes(len_bytes: u64) -> Result<usize, IoxStatus> {
    usize::try_from(len_bytes).or_else(|_| {
        refuse(
            IoxStatus::InvalidArgument,
            "len_bytes does not fit this machine's addresses",
        )
    })
}

/// A duration of `ns` nanoseconds, or `None` for 0 (do not wait).
#[inline(always)]
pub(crate) fn timeout(ns: u64) -> Option<std::time::Duration> {
    (ns != 0).then(|| std::time::Duration::from_nanos(ns))
}

/// Items a port lends to C (loans, samples, ...), each named by an id:
/// `tag << 48 | index << 32 | generation`. The tag is the table's own (drawn from a
/// process-wide counter, never 0), so an id of another table is refused as stale (unless
/// 65,535 tables were made in between); the generation counts the inserts into the
/// slot, so an id is refused once its item left (unless the slot was filled 2^32 times
/// since). At most 65,536 items live in one table.
pub(crate) struct Slots<T> {
    tag: u64,
    slots: Vec<(u32, Option<T>)>,
    free: Vec<u16>,
}

/// The next table's tag.
static NEXT_TAG: AtomicU16 = AtomicU16::new(1);

impl<T> Slots<T> {
    pub(crate) fn new() -> Self {
        let mut tag = NEXT_TAG.fetch_add(1, Ordering::Relaxed);
        if tag == 0 {
            tag = NEXT_TAG.fetch_add(1, Ordering::Relaxed);
        }
        Self {
            tag: u64::from(tag) << 48,
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Keeps `item`; its id (refused, with the item dropped, if the table is full).
    #[inline]
    pub(crate) fn insert(&mut self, item: T) -> Result<u64, IoxStatus> {
        let index = match self.free.pop() {
            Some(i) => usize::from(i),
            None if self.slots.len() <= usize::from(u16::MAX) => {
                self.slots.push((0, None));
                self.slots.len() - 1
            }
            None => {
                return refuse(
                    IoxStatus::InvalidArgument,
                    "more than 65,536 items held by one port at once",
                );
            }
        };
        let slot = &mut self.slots[index];
        slot.0 = slot.0.wrapping_add(1);
        slot.1 = Some(item);
        Ok(self.tag | (index as u64) << 32 | u64::from(slot.0))
    }

    /// The slot of `id` in this table, if the id is this table's.
    #[inline]
    fn slot_of(&self, id: u64) -> Option<(usize, u32)> {
        (id & (0xffff << 48) == self.tag).then_some((((id >> 32) & 0xffff) as usize, id as u32))
    }

    /// The item named `id`, if it is live.
    #[inline]
    pub(crate) fn get(&self, id: u64) -> Option<&T> {
        let (index, generation) = self.slot_of(id)?;
        match self.slots.get(index) {
            Some((g, Some(item))) if *g == generation => Some(item),
            _ => None,
        }
    }

    /// The item named `id`, if it is live, to change it in place.
    #[inline]
    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        let (index, generation) = self.slot_of(id)?;
        match self.slots.get_mut(index) {
            Some((g, Some(item))) if *g == generation => Some(item),
            _ => None,
        }
    }

    /// Takes the item named `id` out, if it is live; its id is stale from then on.
    #[inline]
    pub(crate) fn remove(&mut self, id: u64) -> Option<T> {
        let (index, generation) = self.slot_of(id)?;
        match self.slots.get_mut(index) {
            Some((g, item @ Some(_))) if *g == generation => {
                self.free.push(index as u16);
                item.take()
            }
            _ => None,
        }
    }

    /// The live items with their ids.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, (g, item))| {
            item.as_ref()
                .map(|t| (self.tag | (i as u64) << 32 | u64::from(*g), t))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Slots;

    #[test]
    fn ids_go_stale_when_their_item_leaves() {
        let mut s = Slots::new();
        let a = s.insert('a').unwrap();
        assert_ne!(a, 0);
        assert_eq!(s.get(a), Some(&'a'));
        assert_eq!(s.remove(a), Some('a'));
        assert_eq!(s.remove(a), None, "a second remove of one id");
        let b = s.insert('b').unwrap();
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

    #[test]
    fn ids_of_another_table_are_refused() {
        let (mut one, mut other) = (Slots::new(), Slots::new());
        let a = one.insert('a').unwrap();
        let b = other.insert('b').unwrap();
        assert_eq!(
            a & 0xffff_ffff_ffff,
            b & 0xffff_ffff_ffff,
            "same index and generation"
        );
        assert_eq!(other.get(a), None);
        assert_eq!(other.remove(a), None);
        assert_eq!(one.remove(b), None);
        assert_eq!(one.remove(a), Some('a'));
    }
}
