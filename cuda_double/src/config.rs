//! The double's settings, read once from the environment of the process that loads
//! it (see the crate docs for the variables).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::result::{self, CuResult};

/// Settings of this process's double.
pub(crate) struct Config {
    pub(crate) log: Option<std::path::PathBuf>,
    pub(crate) devices: i32,
    pub(crate) read_only_register: bool,
    /// Per ordinal, its UUID from `IOX_CUDA_DOUBLE_UUIDS` (`None`: not given there, or
    /// not 32 hex digits; such an ordinal gets the default).
    uuids: Vec<Option<[u8; 16]>>,
    /// Call name -> (code, calls left to fail; `None`: every call).
    failures: Mutex<HashMap<String, (CuResult, Option<u64>)>>,
}

impl Config {
    fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let mut failures = HashMap::new();
        for spec in var("IOX_CUDA_DOUBLE_FAIL").unwrap_or_default().split(',') {
            let mut parts = spec.trim().split(':');
            let (Some(call), Some(code)) = (parts.next(), parts.next()) else {
                continue;
            };
            let code = code.trim().parse().map_or(result::UNKNOWN, result::known);
            let times = parts.next().and_then(|t| t.trim().parse().ok());
            failures.insert(call.trim().to_string(), (code, times));
        }
        Self {
            log: var("IOX_CUDA_DOUBLE_LOG").map(Into::into),
            devices: var("IOX_CUDA_DOUBLE_DEVICES")
                .and_then(|v| v.parse().ok())
                .unwrap_or(1),
            read_only_register: var("IOX_CUDA_DOUBLE_READ_ONLY_REGISTER").as_deref() != Some("0"),
            uuids: var("IOX_CUDA_DOUBLE_UUIDS")
                .unwrap_or_default()
                .split(',')
                .map(parse_uuid)
                .collect(),
            failures: Mutex::new(failures),
        }
    }

    /// Device `ordinal`'s UUID: entry `ordinal` of `IOX_CUDA_DOUBLE_UUIDS`, else the
    /// bytes `ioxdbl`, the ordinal (4 bytes, little-endian) and zeros.
    pub(crate) fn uuid(&self, ordinal: i32) -> [u8; 16] {
        if let Some(Some(u)) = usize::try_from(ordinal).ok().and_then(|i| self.uuids.get(i)) {
            return *u;
        }
        let mut u = *b"ioxdbl\0\0\0\0\0\0\0\0\0\0";
        u[6..10].copy_from_slice(&ordinal.to_le_bytes());
        u
    }

    /// The code `call` must fail with now, if a failure was asked for (counting it).
    pub(crate) fn injected(&self, call: &str) -> Option<CuResult> {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let (code, left) = failures.get_mut(call)?;
        match left {
            Some(0) => None,
            Some(n) => {
                *n -= 1;
                Some(*code)
            }
            None => Some(*code),
        }
    }
}

/// This process's settings.
pub(crate) fn get() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(Config::from_env)
}

/// 32 hex digits as 16 bytes (dashes and a `GPU-` prefix, as `nvidia-smi -L` shows
/// UUIDs, are allowed).
fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let text = text.trim();
    let text: String = text
        .strip_prefix("GPU-")
        .unwrap_or(text)
        .chars()
        .filter(|c| *c != '-')
        .collect();
    if text.len() != 32 || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}
