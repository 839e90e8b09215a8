//! The call log: one line per driver call, appended to `IOX_CUDA_DOUBLE_LOG`.
//!
//! Format: `pid=P tid=T call=NAME key=value ... result=CODE name=CUDA_... [key=value
//! ...]`: the arguments before `result`, what the call handed back after it. Values
//! never contain spaces. Each line is one `write` to a file opened with `O_APPEND`,
//! so the lines of several processes sharing one log never interleave.

use std::fmt::Display;
use std::io::Write;

use crate::config;
use crate::result::{self, CuResult};

/// One call being logged.
pub(crate) struct Call {
    line: String,
    name: &'static str,
}

impl Call {
    /// Starts the line of a call of `name` by this thread.
    pub(crate) fn new(name: &'static str) -> Self {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        Self {
            line: format!("pid={} tid={tid} call={name}", std::process::id()),
            name,
        }
    }

    /// Adds `key=value`.
    pub(crate) fn arg(&mut self, key: &str, value: impl Display) -> &mut Self {
        use std::fmt::Write as _;
        let _ = write!(self.line, " {key}={value}");
        self
    }

    /// The call's name.
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// Adds the result, then `outs`, writes the line and returns `code`.
    pub(crate) fn finish(mut self, code: CuResult, outs: &[(&str, String)]) -> CuResult {
        let name = result::name(code);
        self.arg("result", code).arg("name", name);
        for (k, v) in outs {
            self.arg(k, v);
        }
        self.line.push('\n');
        if let Some(path) = &config::get().log
            && let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path)
        {
            let _ = f.write_all(self.line.as_bytes());
        }
        code
    }
}

/// Formats an address as the log shows it.
pub(crate) fn hex(v: impl Into<u64>) -> String {
    format!("{:#x}", v.into())
}
