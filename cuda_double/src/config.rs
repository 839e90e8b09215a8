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
            failures: Mutex::new(failures),
        }
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
