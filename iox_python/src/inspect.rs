//! `iox.pool_usage(name, root)`: a service's pool occupancy per size class, read
//! from its files (as `iox show` does): to see that no chunk leaked.

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::errors;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pool_usage, m)?)
}

/// `[(chunk_size, count, in_use), ...]` for the service `name` under `root`.
#[pyfunction]
fn pool_usage(py: Python<'_>, name: &str, root: PathBuf) -> PyResult<Vec<(usize, u32, u32)>> {
    let info = py
        .detach(|| iox_service::inspect::inspect_in(&root, name))
        .map_err(errors::other)?;
    Ok(info
        .classes
        .iter()
        .map(|c| (c.chunk_size, c.count, c.in_use))
        .collect())
}
