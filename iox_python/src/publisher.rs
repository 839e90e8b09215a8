//! Publishers and loans. A publisher and its loans belong to the thread that made the
//! publisher (iox's `Publisher` is not `Send`: one send journal per port). The Python
//! objects (`Publisher`, `Loan`) may travel between threads; every call checks the
//! thread first (`thread_bound::Owner`) and raises `iox.WrongThread`, naming the
//! owner, before touching the port, which lives in a `ThreadBound` (`_PublisherCore`,
//! `_LoanCell`) only the owner thread reaches. (Decision: refuse, rather than make
//! ports usable from any thread, which would put a lock on every send.) Dropped on
//! another thread (the last reference gone there, or a garbage collection running
//! there), the port or loan is kept, untouched, for the owner thread to drop at its
//! next call (`thread_bound`).
//!
//! Loans and views. A `Loan` owns a `_LoanCell`, which owns the loaned chunk; the
//! writable arrays `loan.array` hands out have the cell as their base. `send()` is
//! refused (`ViewsAlive`) while any such array (or a view derived from it) is alive:
//! the cell's reference count is then above the loan's own one. So after a send no
//! array in this process can write to the chunk subscribers are reading. Decision:
//! refuse rather than invalidate, because numpy cannot revoke memory from an array
//! that exists; the usual `s.array[...] = frame` makes a temporary view that is gone
//! before `s.send()`. A loan dropped unsent (or left by `with`) returns its chunk when
//! the cell goes, i.e. after the last array viewing it.
//!
//! User headers. `loan.header` is a writable view of the chunk's header under the same
//! rules (its base is the cell too, so it counts for `ViewsAlive`). A loan's header
//! starts zeroed (it is small, and a header the program forgets to write then reads
//! as zeros everywhere, never as an older sample's). `Publisher.send` of a service
//! with a header takes it as `header=`, converted as the payload is.

use std::cell::RefCell;
use std::sync::Arc;

use iox_service::{Publisher, RawLoan};
use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::source::{contiguous, is_bytes, payload};
use crate::spec::ArraySpec;
use crate::thread_bound::{Owner, ThreadBound, detached};

const PUBLISHER: (&str, &str) = ("Publisher", "publisher");
const LOAN: (&str, &str) = ("Loan", "publisher");
use crate::{array, errors};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPublisher>()?;
    m.add_class::<PublisherCore>()?;
    m.add_class::<PyLoan>()?;
    m.add_class::<LoanCell>()?;
    Ok(())
}

/// A publisher (`iox.Publisher`): its owner thread and its port.
#[pyclass(name = "Publisher", module = "iox")]
pub(crate) struct PyPublisher {
    owner: Owner,
    core: Py<PublisherCore>,
}

/// The port of a `Publisher`, reached from its owner thread only.
#[pyclass(name = "_PublisherCore", module = "iox", frozen)]
pub(crate) struct PublisherCore {
    inner: ThreadBound<Publisher<[u8]>>,
    spec: Arc<ArraySpec>,
    /// Bytes of one sample, for typed services (`None`: slices, any length).
    fixed: Option<usize>,
}

impl PyPublisher {
    /// A publisher of `service`, whose samples are arrays of `spec`.
    pub(crate) fn new(
        py: Python<'_>,
        service: &iox_service::PubSubService<[u8]>,
        spec: &Arc<ArraySpec>,
        pin: bool,
    ) -> PyResult<Self> {
        let owner = Owner::current(py)?;
        let core = Py::new(py, PublisherCore::new(&owner, service, spec, pin)?)?;
        Ok(Self { owner, core })
    }

    /// The port, on its owner thread.
    fn core(&self) -> PyResult<&PublisherCore> {
        self.owner.check("Publisher", "publisher")?;
        Ok(self.core.get())
    }
}

impl PublisherCore {
    fn new(
        owner: &Owner,
        service: &iox_service::PubSubService<[u8]>,
        spec: &Arc<ArraySpec>,
        pin: bool,
    ) -> PyResult<Self> {
        let inner = service
            .publisher_builder()
            .pin_memory(pin)
            .create()
            .map_err(errors::port)?;
        let fixed = match &service.static_config().payload {
            iox_service::PayloadType::Typed { size, .. } => Some(*size as usize),
            iox_service::PayloadType::Slice { .. } => None,
        };
        Ok(Self {
            inner: ThreadBound::new(owner.clone(), PUBLISHER, inner),
            spec: spec.clone(),
            fixed,
        })
    }

    fn loan_bytes(&self, bytes: usize) -> PyResult<RawLoan> {
        if let Some(size) = self.fixed
            && bytes != size
        {
            return Err(PyValueError::new_err(format!(
                "this service carries {size} bytes per sample, not {bytes}"
            )));
        }
        let item = self.spec.itemsize.max(1);
        if !bytes.is_multiple_of(item) {
            return Err(PyValueError::new_err(format!(
                "{bytes} bytes is not a whole number of {item}-byte elements"
            )));
        }
        let mut loan = self.inner.get()?.loan_raw(bytes).map_err(|e| errors::loan(&e))?;
        let header_len = loan.header_len();
        // SAFETY: the chunk's first `header_len` bytes are the loan's header, loaned
        // to us alone and not yet viewed by anything.
        unsafe { std::ptr::write_bytes(loan.header_ptr(), 0, header_len) };
        Ok(loan)
    }
}

#[pymethods]
impl PyPublisher {
    /// Loans a chunk: `loan()` for a fixed-shape service, `loan(n)` for `n` elements
    /// of a slice service. Use as a context manager; write `s.array`, then `s.send()`.
    #[pyo3(signature = (n = None))]
    fn loan(&self, py: Python<'_>, n: Option<usize>) -> PyResult<PyLoan> {
        let core = self.core()?;
        let bytes = match (core.fixed, n) {
            (Some(size), None) => size,
            (Some(_), Some(_)) => {
                return Err(PyTypeError::new_err(
                    "a fixed-shape service's loan() takes no length",
                ));
            }
            (None, Some(n)) => n
                .checked_mul(core.spec.itemsize)
                .ok_or_else(|| PyValueError::new_err("length overflows"))?,
            (None, None) => {
                return Err(PyTypeError::new_err(
                    "a slice service's loan(n) needs the number of elements",
                ));
            }
        };
        let loan = core.loan_bytes(bytes)?;
        let cell = Py::new(
            py,
            LoanCell {
                loan: ThreadBound::new(self.owner.clone(), LOAN, RefCell::new(Some(loan))),
                spec: core.spec.clone(),
            },
        )?;
        Ok(PyLoan {
            owner: self.owner.clone(),
            cell: Some(cell),
        })
    }

    /// Copies `data` (an array, or anything numpy converts, e.g. `bytes`) into a loan
    /// and sends it: one copy. A fixed-shape service needs exactly its shape; a slice
    /// service takes any length. Values are converted to the service's dtype only
    /// where numpy's `casting` rule allows it: `"safe"` (the default) refuses casts that
    /// could change a value (float64 into float32, int64 into uint8) with a TypeError;
    /// pass `casting="same_kind"` or `"unsafe"` to convert anyway. `bytes`, `bytearray`
    /// and `memoryview` are the sample's bytes as they are (no cast: raw bytes).
    /// A service with a user header needs `header=` (a value of the header's dtype and
    /// shape: an array, a numpy record, a tuple of its fields, or its bytes), converted
    /// the same way; a service without one refuses it. Returns how many subscribers
    /// got it.
    #[pyo3(signature = (data, *, header = None, casting = "safe"))]
    fn send(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        header: Option<&Bound<'_, PyAny>>,
        casting: &str,
    ) -> PyResult<usize> {
        let core = self.core()?;
        let head = match (&core.spec.header, header) {
            (Some(h), Some(value)) => {
                let mut src = contiguous(
                    py,
                    value,
                    h.dtype.bind(py),
                    casting,
                    "header to this service's user header",
                )?;
                // Bytes come out of `frombuffer` flat: the header's own shape, when they
                // are as many as it holds (a mismatch is reported below).
                if is_bytes(value) && src.len() == h.shape.iter().product::<usize>() {
                    src = src
                        .call_method1("reshape", (h.shape.clone(),))?
                        .cast_into::<PyUntypedArray>()?;
                }
                if src.shape() != h.shape.as_slice() {
                    return Err(PyValueError::new_err(format!(
                        "this service's user header is {} of shape {:?}, not of shape {:?}",
                        h.dtype.bind(py),
                        h.shape,
                        src.shape()
                    )));
                }
                Some(src)
            }
            (Some(h), None) => {
                return Err(PyTypeError::new_err(format!(
                    "this service carries a user header ({} of shape {:?}): pass it as \
                     send(data, header=...), or write loan.header in place",
                    h.dtype.bind(py),
                    h.shape
                )));
            }
            (None, Some(_)) => {
                return Err(PyTypeError::new_err(
                    "this service has no user header: drop header= (declare one with \
                     publish_subscribe(..., user_header=...) when creating the service)",
                ));
            }
            (None, None) => None,
        };
        let src = payload(py, &core.spec, data, casting, "data to this service")?;
        let bytes = src.len() * core.spec.itemsize;
        let mut loan = core.loan_bytes(bytes)?;
        if let Some(head) = &head {
            let h = core.spec.header.as_ref().expect("a header source needs a header");
            crate::spec::check_header_len(h, loan.header_len())?;
            // SAFETY: `head` is a C-contiguous array of the header's dtype and shape
            // (converted and checked above), hence `header_len` bytes (checked), alive
            // for this call; the loan's header is `header_len` bytes, ours alone, and
            // cannot overlap it (as for the payload below).
            unsafe {
                let head_ptr = (*head.as_array_ptr()).data.cast::<u8>();
                std::ptr::copy(head_ptr, loan.header_ptr(), loan.header_len());
            }
        }
        // SAFETY: `src` is a C-contiguous array of `bytes` bytes (asarray order="C" /
        // frombuffer with our dtype), alive for this call; the loan's chunk holds
        // `bytes` bytes and is ours alone; they cannot overlap (the source is not in a
        // loaned chunk: loans are never viewed by arrays once sent, and a live loan's
        // views would be another chunk).
        unsafe {
            let data_ptr = (*src.as_array_ptr()).data.cast::<u8>();
            std::ptr::copy(data_ptr, loan.as_mut_ptr(), bytes);
            // SAFETY: all bytes were just written, and the header (if any) above.
            loan.send()
        }
        .map_err(errors::other)
    }

    /// Waits up to `timeout` seconds until `n` subscribers are connected; returns how many are.
    fn wait_for_subscribers(&self, py: Python<'_>, n: usize, timeout: f64) -> PyResult<usize> {
        let publisher = self.core()?.inner.get()?;
        let t = std::time::Duration::from_secs_f64(timeout.max(0.0));
        // SAFETY: the closure uses the port only, no Python object.
        unsafe { detached(py, publisher, |p| p.wait_for_subscribers(n, t)) }.map_err(errors::other)
    }

    /// Whether this port pinned the pool.
    #[getter]
    fn is_pinned(&self) -> PyResult<bool> {
        Ok(self.core()?.inner.get()?.is_pinned())
    }
}

/// Owns a loaned chunk; the base object of the loan's arrays (see the module docs).
#[pyclass(name = "_LoanCell", module = "iox", frozen)]
pub(crate) struct LoanCell {
    /// `None` once sent or discarded.
    loan: ThreadBound<RefCell<Option<RawLoan>>>,
    spec: Arc<ArraySpec>,
}

/// A loaned sample (`iox.Loan`): write `array`, then `send()`. Its chunk is reached
/// from the publisher's owner thread only.
#[pyclass(name = "Loan", module = "iox")]
pub(crate) struct PyLoan {
    owner: Owner,
    /// `None` once sent or released.
    cell: Option<Py<LoanCell>>,
}

impl PyLoan {
    /// The live loan's cell (its `ThreadBound` checks the thread).
    fn cell<'py>(&self, py: Python<'py>) -> PyResult<&Bound<'py, LoanCell>> {
        match &self.cell {
            Some(c) if c.get().loan.get()?.borrow().is_some() => Ok(c.bind(py)),
            _ => Err(errors::Error::new_err("the loan was already sent or released")),
        }
    }
}

#[pymethods]
impl PyLoan {
    /// A writable numpy view of the loaned chunk (uninitialised: stale bytes until
    /// written). Drop it (and views of it) before `send()`.
    #[getter]
    fn array<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let cell = self.cell(py)?;
        let c = cell.get();
        let mut slot = c.loan.get()?.borrow_mut();
        let loan = slot.as_mut().expect("checked by cell()");
        let shape = c.spec.shape_for(loan.len_bytes());
        // SAFETY: the chunk holds `len_bytes` bytes aligned for the recorded type and is
        // loaned to us alone; the cell (the base) owns it until it is destroyed, and
        // `send` refuses while any array with this base lives, so nobody else reads
        // or writes the chunk while a writable array exists.
        unsafe {
            array::view(
                py,
                c.spec.dtype.bind(py),
                &shape,
                loan.as_mut_ptr(),
                true,
                cell.clone().into_any(),
            )
        }
    }

    /// A writable numpy view of the loan's user header, in place: a 0-d array for a
    /// structured or scalar header (`loan.header["width"] = 640`, or
    /// `loan.header[...] = (stamp, 640, 480)`), `None` for a service without a header.
    /// It starts zeroed. Like `array`, drop it (and views of it) before `send()`.
    #[getter]
    fn header<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let cell = self.cell(py)?;
        let c = cell.get();
        let Some(h) = &c.spec.header else {
            return Ok(None);
        };
        let mut slot = c.loan.get()?.borrow_mut();
        let loan = slot.as_mut().expect("checked by cell()");
        crate::spec::check_header_len(h, loan.header_len())?;
        // SAFETY: the chunk's first `header_len` bytes are the loan's header (dtype x
        // shape is that size: checked above), aligned for the recorded header type and
        // loaned to us alone; the cell (the base) owns the chunk until it is destroyed,
        // and `send` refuses while any array with this base lives, so nobody else reads
        // or writes it while a writable array exists.
        unsafe {
            array::view(
                py,
                h.dtype.bind(py),
                &h.shape,
                loan.header_ptr(),
                true,
                cell.clone().into_any(),
            )
        }
        .map(Some)
    }

    /// Sends the sample; returns how many subscribers got it. Refused with
    /// `ViewsAlive` while arrays viewing the loan (its payload or header) exist.
    fn send(&mut self, py: Python<'_>) -> PyResult<usize> {
        let cell = self.cell(py)?;
        // One reference is ours (`self.cell`); more are arrays' bases.
        let views = cell.get_refcnt() - 1;
        if views > 0 {
            return Err(errors::ViewsAlive::new_err(format!(
                "send() refused: {views} numpy view(s) of this loan are still alive, and writing \
                 through them after the send would change what subscribers read; `del` them \
                 first (or write with `loan.array[...] = x` without keeping the array)"
            )));
        }
        let loan = cell
            .get()
            .loan
            .get()?
            .borrow_mut()
            .take()
            .expect("checked by cell()");
        self.cell = None;
        // SAFETY: the chunk was handed out to the user to write; payload bytes they did
        // not write hold what an earlier sample left (shared memory, as numpy.empty's
        // stale contents), which subscribers only read through numpy views; header
        // bytes they did not write are the zeros `loan_bytes` wrote.
        unsafe { loan.send() }.map_err(errors::other)
    }

    /// Gives the loan up without sending. The chunk returns to the pool once no array
    /// views it.
    fn release(&mut self, py: Python<'_>) -> PyResult<()> {
        self.owner.check("Loan", "publisher")?;
        if let Some(cell) = self.cell.take() {
            let b = cell.bind(py);
            if b.get_refcnt() == 1 {
                b.get().loan.get()?.borrow_mut().take();
            }
        }
        Ok(())
    }

    /// Whether the loan can still be written and sent.
    #[getter]
    fn is_active(&self, py: Python<'_>) -> PyResult<bool> {
        self.owner.check("Loan", "publisher")?;
        Ok(self.cell(py).is_ok())
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Releases an unsent loan; does not suppress exceptions.
    fn __exit__(
        &mut self,
        py: Python<'_>,
        _ty: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.release(py)?;
        Ok(false)
    }
}
