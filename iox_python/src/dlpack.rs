//! DLPack, both ways: capsules iox hands out (a sample's tensor, a loan's writable
//! tensor, in GPU or host memory) and capsules iox takes (`send_tensor`, from any
//! object with `__dlpack__`: a torch or CuPy tensor, a numpy array); and the streams
//! DLPack's `stream` argument names (with the `cuda` feature).
//!
//! Out: the classic unversioned `DLManagedTensor` (`"dltensor"`), which every consumer
//! reads, with the element type, shape and strides of the sample's tensor record (a
//! sample of a service whose payload is not a slice of numbers is a 1-D `uint8` tensor
//! of its bytes). The tensor, its shape and strides and what keeps its memory alive
//! (the sample; for a loan its cell, see [`LoanViews`]) are one allocation,
//! freed by the deleter the consumer calls once, or by the capsule's destructor if no
//! consumer took it.
//!
//! In: [`Imported`] reads a producer's capsule (`"dltensor"`; a versioned one is not
//! asked for, as no `max_version` is passed), checks what iox can carry (a layout
//! [`TensorLayout::strided`] accepts: at most 8 dimensions, no negative strides),
//! and calls the producer's deleter when dropped, after the bytes were copied or the
//! copy was enqueued, renaming the capsule `"used_dltensor"` as the protocol asks.

use std::ffi::{CStr, c_void};

#[cfg(feature = "cuda")]
use iox_service::cuda::Stream;
use iox_service::tensor::{DType, TensorError, TensorLayout};
use pyo3::exceptions::PyBufferError;
#[cfg(feature = "cuda")]
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// DLPack's device types.
pub(crate) const KDL_CPU: i32 = 1;
pub(crate) const KDL_CUDA: i32 = 2;
/// Page-locked host memory the CUDA driver allocated.
pub(crate) const KDL_CUDA_HOST: i32 = 3;

const NAME: &CStr = c"dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";
const USED: &CStr = c"used_dltensor";
const MAX_DIMS: usize = iox_service::tensor::MAX_DIMS;

#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

/// `DLManagedTensor`'s fields (the part every producer writes).
#[repr(C)]
struct DlManagedTensor {
    tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// `DLManagedTensorVersioned` (DLPack 1.0): a version, flags (read-only, ...), then the
/// tensor.
#[repr(C)]
struct DlManagedTensorVersioned {
    version: [u32; 2],
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensorVersioned)>,
    flags: u64,
    tensor: DlTensor,
}

/// DLPack's flag of a tensor its consumer must not write.
const FLAG_READ_ONLY: u64 = 1;

/// A managed tensor (`H`: either head), followed by what it owns: one allocation, the
/// head first, so its address is the box's.
#[repr(C)]
struct Managed<H> {
    head: H,
    shape: [i64; MAX_DIMS],
    strides: [i64; MAX_DIMS],
    /// What keeps the memory valid until the consumer is done (a sample), if the
    /// capsule is to keep it.
    owner: Option<Box<dyn Send>>,
}

/// The deleters DLPack consumers call when done: drop the owner (a sample: its release
/// records the end of the reads on the stream it waited on) and free the tensor.
unsafe extern "C" fn delete(managed: *mut DlManagedTensor) {
    if !managed.is_null() {
        // SAFETY: made by `Box::into_raw` of a `Managed<DlManagedTensor>` (whose first
        // field is the head) in `export`, deleted once (DLPack's contract: the consumer
        // calls it once; the capsule destructor only for an unconsumed capsule).
        drop_attached(unsafe { Box::from_raw(managed.cast::<Managed<DlManagedTensor>>()) });
    }
}

unsafe extern "C" fn delete_versioned(managed: *mut DlManagedTensorVersioned) {
    if !managed.is_null() {
        // SAFETY: as `delete`, for the versioned head.
        drop_attached(unsafe { Box::from_raw(managed.cast::<Managed<DlManagedTensorVersioned>>()) });
    }
}

/// Drops what a deleter freed while attached to the interpreter, so the Python
/// references its owner holds (a loan's cell) go now, on this thread: a consumer calls
/// the deleter outside pyo3, which would otherwise defer them to whichever thread next
/// enters iox, where a thread-bound loan cell could not be dropped (its chunk kept).
/// During interpreter shutdown, dropped as it is.
fn drop_attached<T>(managed: T) {
    let mut managed = Some(managed);
    if Python::try_attach(|_| drop(managed.take())).is_none() {
        drop(managed);
    }
}

/// Destroys a capsule: an unconsumed one (still named "dltensor" or
/// "dltensor_versioned") deletes its tensor.
unsafe extern "C" fn destroy_capsule(capsule: *mut pyo3::ffi::PyObject) {
    // SAFETY: called by Python with the capsule being destroyed; the pointer under
    // each name is the head `export` stored under it.
    unsafe {
        if pyo3::ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) == 1 {
            delete(pyo3::ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr()).cast());
        } else if pyo3::ffi::PyCapsule_IsValid(capsule, VERSIONED.as_ptr()) == 1 {
            delete_versioned(pyo3::ffi::PyCapsule_GetPointer(capsule, VERSIONED.as_ptr()).cast());
        }
    }
}

/// How a capsule is handed out: `max_version` is what the consumer passed to
/// `__dlpack__` (a versioned capsule from DLPack 1.0 on, the classic one before), and
/// whether the consumer may write the memory.
pub(crate) struct Export {
    pub(crate) max_version: Option<(u32, u32)>,
    pub(crate) read_only: bool,
}

/// Refuses what an in-place export cannot give (`what`: "a loan", "a sample"): a
/// consumer's `dl_device` other than the memory's own `here`, or `copy=True`.
pub(crate) fn refuse_copies(
    what: &str,
    here: (i32, i32),
    dl_device: Option<(i32, i32)>,
    copy: Option<bool>,
) -> PyResult<()> {
    let place = match here {
        (KDL_CUDA, ordinal) => format!("on GPU {ordinal}"),
        _ => "in host memory".to_owned(),
    };
    if let Some(d) = dl_device.filter(|&d| d != here) {
        return Err(PyBufferError::new_err(format!(
            "{what} is exported in place, {place}; no copy to DLPack device {d:?} is made"
        )));
    }
    if copy == Some(true) {
        return Err(PyBufferError::new_err(format!(
            "{what} is exported in place, {place}; copy=True is not offered"
        )));
    }
    Ok(())
}

/// A loan (a host or device tensor loan) that hands out writable DLPack views of its
/// chunk, and those views: each capsule's owner holds the loan's cell, so the cell's
/// other references are views a consumer still holds (or capsules not yet consumed).
/// `send` is refused while any is alive (`ViewsAlive`, as for a plain loan's numpy
/// views): writing through one after the send would change what subscribers read, and
/// no consumer's memory can be taken back. A loan closed or dropped unsent gives its
/// chunk back when the last view is gone (the cell goes then), never while one can
/// still write it. The cell belongs to the loan's thread (the loan does): a last view
/// freed on another thread keeps the chunk until the process ends (pyo3 does not drop
/// a thread-bound object elsewhere, and warns), as for a plain loan's numpy arrays.
pub(crate) struct LoanViews<L: 'static> {
    cell: std::cell::RefCell<Option<Py<LoanCell>>>,
    _loan: std::marker::PhantomData<L>,
}

/// Where a [`LoanViews`] keeps its loan (type-erased: a pyclass is not generic).
#[pyclass(module = "iox", name = "_LoanCell", unsendable)]
pub(crate) struct LoanCell {
    loan: std::cell::RefCell<Option<Box<dyn std::any::Any>>>,
}

impl<L: 'static> LoanViews<L> {
    /// Holds `loan` (unsent) for views to come.
    pub(crate) fn new(py: Python<'_>, loan: L) -> PyResult<Self> {
        let cell = Py::new(
            py,
            LoanCell {
                loan: std::cell::RefCell::new(Some(Box::new(loan))),
            },
        )?;
        Ok(Self {
            cell: std::cell::RefCell::new(Some(cell)),
            _loan: std::marker::PhantomData,
        })
    }

    /// The cell of an unsent, unclosed loan.
    fn open_cell(&self, py: Python<'_>) -> PyResult<Py<LoanCell>> {
        match &*self.cell.borrow() {
            Some(cell) if cell.borrow(py).loan.borrow().is_some() => Ok(cell.clone_ref(py)),
            _ => Err(PyBufferError::new_err("the loan was sent or closed")),
        }
    }

    /// Whether the loan can still be written and sent.
    pub(crate) fn is_open(&self, py: Python<'_>) -> bool {
        self.open_cell(py).is_ok()
    }

    /// A writable capsule of the loan's chunk (at `data` on `device`), keeping the pool
    /// mapped and the loan's chunk taken while the consumer's view lives.
    pub(crate) fn export<'py>(
        &self,
        py: Python<'py>,
        data: u64,
        device: (i32, i32),
        layout: &TensorLayout,
        keep: &iox_service::PoolKeepAlive,
        max_version: Option<(u32, u32)>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let cell = self.open_cell(py)?;
        let how = Export {
            max_version,
            read_only: false,
        };
        export(
            py,
            data,
            device,
            layout,
            how,
            Some(Box::new((keep.clone(), cell))),
        )
    }

    /// The loan, to send: refused while views of it are alive.
    pub(crate) fn take_to_send(&self, py: Python<'_>) -> PyResult<L> {
        let cell = self.open_cell(py)?;
        // Ours (`self.cell`) and the one just cloned; any more are views' capsules.
        let views = cell.get_refcnt(py).saturating_sub(2);
        if views > 0 {
            return Err(crate::errors::ViewsAlive::new_err(format!(
                "send() refused: {views} DLPack view(s) of this loan are still alive (from \
                 np.from_dlpack / torch.from_dlpack, or capsules not consumed), and writing \
                 through them after the send would change what subscribers read; `del` them \
                 first (or copy into the loan with `view[...] = x` from a view you drop)"
            )));
        }
        let loan = cell
            .borrow(py)
            .loan
            .borrow_mut()
            .take()
            .expect("checked by open_cell");
        self.cell.borrow_mut().take();
        Ok(*loan.downcast::<L>().expect("a LoanViews<L> holds an L"))
    }

    /// Gives the loan up unsent: its chunk goes back now, or when the last view of it
    /// is gone.
    pub(crate) fn close(&self, py: Python<'_>) {
        if let Some(cell) = self.cell.borrow_mut().take()
            && cell.get_refcnt(py) == 1
        {
            cell.borrow(py).loan.borrow_mut().take();
        }
    }
}

/// A capsule of the tensor `layout` at address `data` on `(device_type, ordinal)`,
/// keeping `owner` alive until the consumer is done.
pub(crate) fn export<'py>(
    py: Python<'py>,
    data: u64,
    device: (i32, i32),
    layout: &TensorLayout,
    how: Export,
    owner: Option<Box<dyn Send>>,
) -> PyResult<Bound<'py, PyAny>> {
    let (code, bits) = layout.dtype().dlpack();
    let tensor = DlTensor {
        data: data as usize as *mut c_void,
        device: DlDevice {
            device_type: device.0,
            device_id: device.1,
        },
        ndim: layout.shape().len() as i32,
        dtype: DlDataType { code, bits, lanes: 1 },
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let mut shape = [0; MAX_DIMS];
    let mut strides = [0; MAX_DIMS];
    for (d, (&size, &stride)) in layout.shape().iter().zip(layout.strides()).enumerate() {
        shape[d] = size as i64;
        strides[d] = stride;
    }
    if how.max_version.is_some_and(|(major, _)| major >= 1) {
        let mut managed = Box::new(Managed {
            head: DlManagedTensorVersioned {
                version: [1, 0],
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(delete_versioned),
                flags: if how.read_only { FLAG_READ_ONLY } else { 0 },
                tensor,
            },
            shape,
            strides,
            owner,
        });
        managed.head.tensor.shape = managed.shape.as_mut_ptr();
        managed.head.tensor.strides = managed.strides.as_mut_ptr();
        let raw = Box::into_raw(managed);
        // SAFETY: `raw` is live; its head is first; deleted below on failure.
        unsafe { (*raw).head.manager_ctx = raw.cast() };
        // SAFETY: as above; the destructor deletes an unconsumed capsule's tensor.
        return unsafe { capsule(py, raw.cast(), VERSIONED, || delete_versioned(raw.cast())) };
    }
    let mut managed = Box::new(Managed {
        head: DlManagedTensor {
            tensor,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete),
        },
        shape,
        strides,
        owner,
    });
    managed.head.tensor.shape = managed.shape.as_mut_ptr();
    managed.head.tensor.strides = managed.strides.as_mut_ptr();
    let raw = Box::into_raw(managed);
    // SAFETY: `raw` is live; its head is first; deleted below on failure.
    unsafe { (*raw).head.manager_ctx = raw.cast() };
    // SAFETY: as above.
    unsafe { capsule(py, raw.cast(), NAME, || delete(raw.cast())) }
}

/// A capsule named `name` of `head`; on failure `undo` frees it.
///
/// # Safety
/// `head` is a live managed tensor of the kind `name` says, owned by the capsule
/// (whose destructor deletes it unless consumed).
unsafe fn capsule<'py>(
    py: Python<'py>,
    head: *mut c_void,
    name: &'static CStr,
    undo: impl FnOnce(),
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: the caller's contract; the name is static.
    let capsule = unsafe { pyo3::ffi::PyCapsule_New(head, name.as_ptr(), Some(destroy_capsule)) };
    if capsule.is_null() {
        undo();
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference Python just returned (non-null).
    Ok(unsafe { Bound::from_owned_ptr(py, capsule) })
}

/// A producer's tensor, read from its capsule; the producer's deleter runs when this
/// is dropped (the capsule is then marked used).
pub(crate) struct Imported<'py> {
    capsule: Bound<'py, PyAny>,
    managed: *mut DlManagedTensor,
    /// The first element's address.
    pub(crate) data: u64,
    /// `(device_type, ordinal)`.
    pub(crate) device: (i32, i32),
    pub(crate) layout: TensorLayout,
}

impl<'py> Imported<'py> {
    /// Takes the capsule `capsule` (what `__dlpack__` returned).
    pub(crate) fn take(capsule: Bound<'py, PyAny>) -> PyResult<Self> {
        // SAFETY: the capsule API on a Python object; checks validity and name first.
        let managed = unsafe {
            if pyo3::ffi::PyCapsule_IsValid(capsule.as_ptr(), NAME.as_ptr()) != 1 {
                return Err(PyBufferError::new_err(
                    "__dlpack__ returned something other than an unconsumed \"dltensor\" capsule",
                ));
            }
            pyo3::ffi::PyCapsule_GetPointer(capsule.as_ptr(), NAME.as_ptr()).cast::<DlManagedTensor>()
        };
        if managed.is_null() {
            return Err(PyErr::fetch(capsule.py()));
        }
        // The capsule is ours from here: mark it used (so its destructor does not
        // delete it too), and delete it when done.
        // SAFETY: a valid capsule (checked above); the name is static.
        if unsafe { pyo3::ffi::PyCapsule_SetName(capsule.as_ptr(), USED.as_ptr()) } != 0 {
            return Err(PyErr::fetch(capsule.py()));
        }
        let mut imported = Self {
            capsule,
            managed,
            data: 0,
            device: (0, 0),
            layout: TensorLayout::contiguous(DType::U8, &[0]).map_err(tensor_error)?,
        };
        // SAFETY: a producer's DLManagedTensor, valid until its deleter runs (on our
        // drop); its shape (and strides, if not null) hold `ndim` entries.
        let t = unsafe { &(*managed).tensor };
        let dtype = DType::from_dlpack(t.dtype.code, t.dtype.bits, t.dtype.lanes).ok_or_else(|| {
            tensor_error(TensorError::UnknownDType {
                code: t.dtype.code,
                bits: t.dtype.bits,
                lanes: t.dtype.lanes,
            })
        })?;
        let ndim = usize::try_from(t.ndim).unwrap_or(usize::MAX);
        if ndim > MAX_DIMS {
            return Err(tensor_error(TensorError::TooManyDims { ndim }));
        }
        let mut shape = [0usize; MAX_DIMS];
        for (d, size) in shape.iter_mut().enumerate().take(ndim) {
            // SAFETY: `shape` has `ndim` entries (DLPack's contract).
            let s = unsafe { *t.shape.add(d) };
            *size = usize::try_from(s).map_err(|_| tensor_error(TensorError::Overflow))?;
        }
        imported.layout = if t.strides.is_null() {
            TensorLayout::contiguous(dtype, &shape[..ndim])
        } else {
            // SAFETY: as for the shape.
            let strides: Vec<i64> = (0..ndim).map(|d| unsafe { *t.strides.add(d) }).collect();
            TensorLayout::strided(dtype, &shape[..ndim], &strides)
        }
        .map_err(tensor_error)?;
        imported.data = (t.data as u64).wrapping_add(t.byte_offset);
        imported.device = (t.device.device_type, t.device.device_id);
        Ok(imported)
    }
}

impl Drop for Imported<'_> {
    fn drop(&mut self) {
        // SAFETY: the producer's tensor, deleted once (the capsule is marked used).
        unsafe {
            if let Some(deleter) = (*self.managed).deleter {
                deleter(self.managed);
            }
        }
        let _ = &self.capsule;
    }
}

#[cfg(feature = "cuda")]
/// The stream DLPack's `stream` argument names (`None` for -1: no ordering).
pub(crate) fn dlpack_stream(stream: Option<i64>) -> PyResult<Option<Stream>> {
    match stream {
        None => Ok(Some(Stream::null())),
        Some(-1) => Ok(None),
        Some(0) => Err(PyValueError::new_err(
            "stream=0 is ambiguous for CUDA in DLPack; pass 1 (legacy default) or a stream handle",
        )),
        // The release records on the stream later, maybe on another thread, where the
        // per-thread default stream is another stream.
        Some(2) => Err(PyValueError::new_err(
            "stream=2 (the per-thread default stream) is not accepted: the tensor's release may run on another thread, whose per-thread stream is another one; pass a stream handle",
        )),
        Some(s) if s < -1 => Err(PyValueError::new_err(format!("stream={s} is not a CUDA stream"))),
        // SAFETY: DLPack's contract: the consumer passes a valid stream of the
        // device (or the special handles 1 and 2), alive while it uses the tensor.
        Some(s) => Ok(Some(unsafe { Stream::from_raw(s as usize as *mut c_void) })),
    }
}

/// A tensor error as `iox.TensorError` (an `iox.Error` and a `BufferError`, see
/// `errors`).
pub(crate) fn tensor_error(e: TensorError) -> PyErr {
    crate::errors::tensor(e.to_string())
}
