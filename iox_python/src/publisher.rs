//! Publishers and loans. A publisher and its loans belong to the thread that made the
//! publisher (iox's `Publisher` is not `Send`: one send journal per port). The Python
//! objects (`Publisher`, `Loan`) may travel between threads; every call checks the
//! thread first ([`Owner`]) and raises `iox.WrongThread`, naming the owner, before
//! touching the port, which lives in an `unsendable` object (`_PublisherCore`,
//! `_LoanCell`) only the owner thread reaches. (Decision: refuse, rather than make
//! ports usable from any thread, which would put a lock on every send.) Dropped on
//! another thread (the last reference gone there), the port is leaked with a warning
//! rather than used from the wrong thread.
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

use std::cell::RefCell;
use std::sync::Arc;
use std::thread::ThreadId;

use iox_service::{Publisher, RawLoan};
use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::pubsub::{ArraySpec, PyPubSubService};
use crate::{array, errors};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPublisher>()?;
    m.add_class::<PublisherCore>()?;
    m.add_class::<PyLoan>()?;
    m.add_class::<LoanCell>()?;
    Ok(())
}

/// The thread a publisher and its loans belong to.
#[derive(Debug, Clone)]
struct Owner {
    id: ThreadId,
    /// Its Python name (`threading.current_thread().name`), for messages.
    name: Arc<str>,
}

impl Owner {
    fn current(py: Python<'_>) -> PyResult<Self> {
        let thread = py.import("threading")?.call_method0("current_thread")?;
        Ok(Self {
            id: std::thread::current().id(),
            name: thread.getattr("name")?.extract::<String>()?.into(),
        })
    }

    /// `Ok` on the owner thread; `iox.WrongThread` naming it elsewhere.
    fn check(&self, what: &str) -> PyResult<()> {
        if std::thread::current().id() == self.id {
            return Ok(());
        }
        Err(errors::WrongThread::new_err(format!(
            "this {what} belongs to thread {:?}, which created the publisher: an iox publisher \
             and its loans are used from one thread (one send journal per port); call it from \
             that thread, or create a publisher in this one (svc.publisher())",
            self.name
        )))
    }
}

/// A publisher (`iox.Publisher`): its owner thread and its port.
#[pyclass(name = "Publisher", module = "iox")]
pub(crate) struct PyPublisher {
    owner: Owner,
    core: Py<PublisherCore>,
}

/// The port of a `Publisher`, reached from its owner thread only.
#[pyclass(name = "_PublisherCore", module = "iox", unsendable)]
pub(crate) struct PublisherCore {
    inner: Publisher<[u8]>,
    spec: Arc<ArraySpec>,
    /// Bytes of one sample, for typed services (`None`: slices, any length).
    fixed: Option<usize>,
}

impl PyPublisher {
    pub(crate) fn new(py: Python<'_>, svc: &PyPubSubService, pin: bool) -> PyResult<Self> {
        let core = Py::new(py, PublisherCore::new(svc, pin)?)?;
        Ok(Self {
            owner: Owner::current(py)?,
            core,
        })
    }

    /// The port, on its owner thread.
    fn core<'py>(&self, py: Python<'py>) -> PyResult<PyRef<'py, PublisherCore>> {
        self.owner.check("Publisher")?;
        Ok(self.core.bind(py).borrow())
    }
}

impl PublisherCore {
    fn new(svc: &PyPubSubService, pin: bool) -> PyResult<Self> {
        let inner = svc
            .inner
            .publisher_builder()
            .pin_memory(pin)
            .create()
            .map_err(errors::other)?;
        let fixed = match &svc.inner.static_config().payload {
            iox_service::PayloadType::Typed { size, .. } => Some(*size as usize),
            iox_service::PayloadType::Slice { .. } => None,
        };
        Ok(Self {
            inner,
            spec: svc.spec.clone(),
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
        self.inner.loan_raw(bytes).map_err(|e| errors::loan(&e))
    }
}

#[pymethods]
impl PyPublisher {
    /// Loans a chunk: `loan()` for a fixed-shape service, `loan(n)` for `n` elements
    /// of a slice service. Use as a context manager; write `s.array`, then `s.send()`.
    #[pyo3(signature = (n = None))]
    fn loan(&self, py: Python<'_>, n: Option<usize>) -> PyResult<PyLoan> {
        let core = self.core(py)?;
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
                loan: RefCell::new(Some(loan)),
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
    /// Returns how many subscribers got it.
    #[pyo3(signature = (data, *, casting = "safe"))]
    fn send(&self, py: Python<'_>, data: &Bound<'_, PyAny>, casting: &str) -> PyResult<usize> {
        let core = self.core(py)?;
        let np = py.import("numpy")?;
        let dtype = core.spec.dtype.bind(py);
        let src = if data.is_instance_of::<pyo3::types::PyBytes>()
            || data.is_instance_of::<pyo3::types::PyByteArray>()
            || data.is_instance_of::<pyo3::types::PyMemoryView>()
        {
            np.call_method1("frombuffer", (data, dtype))?
        } else {
            // What the data is, then the cast the rule allows. asarray, not
            // ascontiguousarray (which makes a 0-d array 1-d).
            let given = np.call_method1("asarray", (data,))?;
            let from = given.getattr("dtype")?;
            let kw = pyo3::types::PyDict::new(py);
            kw.set_item("casting", casting)?;
            if !np
                .getattr("can_cast")?
                .call((&from, dtype), Some(&kw))?
                .is_truthy()?
            {
                return Err(PyTypeError::new_err(format!(
                    "cannot send {from} data to this service of {dtype} with casting {casting:?}: \
                     the conversion could change values; convert it yourself (e.g. \
                     a.astype(np.{dtype})) or pass casting=\"same_kind\" or \"unsafe\""
                )));
            }
            let kw = pyo3::types::PyDict::new(py);
            kw.set_item("dtype", dtype)?;
            kw.set_item("order", "C")?;
            np.getattr("asarray")?.call((given,), Some(&kw))?
        };
        let src = src.cast_into::<PyUntypedArray>()?;
        if let Some(shape) = &core.spec.shape
            && src.shape() != shape.as_slice()
        {
            return Err(PyValueError::new_err(format!(
                "this service carries arrays of shape {shape:?}, not {:?}",
                src.shape()
            )));
        }
        let bytes = src.len() * core.spec.itemsize;
        let mut loan = core.loan_bytes(bytes)?;
        // SAFETY: `src` is a C-contiguous array of `bytes` bytes (asarray order="C" /
        // frombuffer with our dtype), alive for this call; the loan's chunk holds
        // `bytes` bytes and is ours alone; they cannot overlap (the source is not in a
        // loaned chunk: loans are never viewed by arrays once sent, and a live loan's
        // views would be another chunk).
        unsafe {
            let data_ptr = (*src.as_array_ptr()).data.cast::<u8>();
            std::ptr::copy(data_ptr, loan.as_mut_ptr(), bytes);
            // SAFETY: all bytes were just written.
            loan.send()
        }
        .map_err(errors::other)
    }

    /// Waits up to `timeout` seconds until `n` subscribers are connected; returns how many are.
    fn wait_for_subscribers(&self, py: Python<'_>, n: usize, timeout: f64) -> PyResult<usize> {
        // The port is not `Send`: this waits holding the GIL (use short timeouts in
        // threaded programs).
        self.core(py)?
            .inner
            .wait_for_subscribers(n, std::time::Duration::from_secs_f64(timeout.max(0.0)))
            .map_err(errors::other)
    }

    /// Whether this port pinned the pool.
    #[getter]
    fn is_pinned(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.core(py)?.inner.is_pinned())
    }
}

/// Owns a loaned chunk; the base object of the loan's arrays (see the module docs).
#[pyclass(name = "_LoanCell", module = "iox", unsendable)]
pub(crate) struct LoanCell {
    /// `None` once sent or discarded.
    loan: RefCell<Option<RawLoan>>,
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
    fn cell<'py>(&self, py: Python<'py>) -> PyResult<&Bound<'py, LoanCell>> {
        self.owner.check("Loan")?;
        match &self.cell {
            Some(c) if c.bind(py).borrow().loan.borrow().is_some() => Ok(c.bind(py)),
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
        let c = cell.borrow();
        let mut slot = c.loan.borrow_mut();
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

    /// Sends the sample; returns how many subscribers got it. Refused with
    /// `ViewsAlive` while arrays viewing the loan exist.
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
        let loan = cell.borrow().loan.borrow_mut().take().expect("checked by cell()");
        self.cell = None;
        // SAFETY: the chunk was handed out to the user to write; bytes they did not
        // write hold what an earlier sample left (shared memory, as numpy.empty's
        // stale contents), which subscribers only read through numpy views.
        unsafe { loan.send() }.map_err(errors::other)
    }

    /// Gives the loan up without sending. The chunk returns to the pool once no array
    /// views it.
    fn release(&mut self, py: Python<'_>) -> PyResult<()> {
        self.owner.check("Loan")?;
        if let Some(cell) = self.cell.take() {
            let b = cell.bind(py);
            if b.get_refcnt() == 1 {
                b.borrow().loan.borrow_mut().take();
            }
        }
        Ok(())
    }

    /// Whether the loan can still be written and sent.
    #[getter]
    fn is_active(&self, py: Python<'_>) -> PyResult<bool> {
        self.owner.check("Loan")?;
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
