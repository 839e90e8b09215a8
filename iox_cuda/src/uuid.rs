//! GPUs named by UUID, as a static config records them: an ordinal differs between
//! processes with different `CUDA_VISIBLE_DEVICES`, a UUID does not.

use cudarc::driver::sys;

use crate::driver::{self, CudaError, check};

/// The UUID of this process's device `ordinal`.
///
/// ```
/// match iox_cuda::device_uuid(0) {
///     Ok(uuid) => println!("device 0 is {}", iox_cuda::format_uuid(&uuid)),
///     Err(e) => println!("no CUDA device here: {e}"),
/// }
/// ```
pub fn device_uuid(ordinal: i32) -> Result<[u8; 16], CudaError> {
    let device = driver::device(ordinal)?;
    let mut uuid = sys::CUuuid { bytes: [0; 16] };
    // SAFETY: driver loaded, valid device and out-pointer.
    check("cuDeviceGetUuid_v2", unsafe {
        sys::cuDeviceGetUuid_v2(&mut uuid, device)
    })?;
    Ok(uuid.bytes.map(|b| b as u8))
}

/// The ordinal of the visible device with this UUID, if there is one.
///
/// ```
/// // No device has the all-zero UUID (or there is no driver at all).
/// assert!(!matches!(iox_cuda::ordinal_of(&[0; 16]), Ok(Some(_))));
/// ```
pub fn ordinal_of(uuid: &[u8; 16]) -> Result<Option<i32>, CudaError> {
    driver::load()?;
    let mut count = 0;
    // SAFETY: driver loaded and initialised; valid out-pointer.
    check("cuDeviceGetCount", unsafe { sys::cuDeviceGetCount(&mut count) })?;
    for ordinal in 0..count {
        if device_uuid(ordinal)? == *uuid {
            return Ok(Some(ordinal));
        }
    }
    Ok(None)
}

/// A UUID as `nvidia-smi -L` prints it: `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
///
/// ```
/// let text = iox_cuda::format_uuid(&[0xab; 16]);
/// assert_eq!(text, "GPU-abababab-abab-abab-abab-abababababab");
/// assert_eq!(iox_cuda::parse_uuid(&text), Some([0xab; 16]));
/// ```
pub fn format_uuid(uuid: &[u8; 16]) -> String {
    let h: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// The UUID [`format_uuid`] printed (strict: that form only, hex digits of either
/// case; anything else, a sign or a missing prefix included, is `None`).
///
/// ```
/// let uuid = iox_cuda::parse_uuid("GPU-00112233-4455-6677-8899-aabbccddeeff").unwrap();
/// assert_eq!(uuid[..3], [0x00, 0x11, 0x22]);
/// assert_eq!(iox_cuda::parse_uuid("00112233-4455-6677-8899-aabbccddeeff"), None);
/// assert_eq!(iox_cuda::parse_uuid("GPU-+0112233-4455-6677-8899-aabbccddeeff"), None);
/// ```
pub fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let rest = text.strip_prefix("GPU-")?;
    let groups: Vec<&str> = rest.split('-').collect();
    if groups.iter().map(|g| g.len()).collect::<Vec<_>>() != [8, 4, 4, 4, 12]
        || !groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return None;
    }
    let hex: String = groups.concat();
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::{format_uuid, parse_uuid};

    #[test]
    fn format_and_parse_are_inverse_and_parse_is_strict() {
        let uuid: [u8; 16] = std::array::from_fn(|i| (i * 17 + 3) as u8);
        let text = format_uuid(&uuid);
        assert_eq!(text, "GPU-03142536-4758-697a-8b9c-adbecfe0f102");
        assert_eq!(parse_uuid(&text), Some(uuid));
        assert_eq!(parse_uuid(&text.to_uppercase()), Some(uuid));
        for bad in [
            "",
            "GPU-",
            "03142536-4758-697a-8b9c-adbecfe0f102",
            "gpu-03142536-4758-697a-8b9c-adbecfe0f102",
            "GPU-031425364758697a8b9cadbecfe0f102",
            "GPU-0314253-64758-697a-8b9c-adbecfe0f102",
            "GPU-03142536-4758-697a-8b9c-adbecfe0f10",
            "GPU-03142536-4758-697a-8b9c-adbecfe0f1022",
            "GPU-03142536-4758-697a-8b9c-adbecfe0f10g",
            "GPU-+3142536-4758-697a-8b9c-adbecfe0f102",
            "GPU-03142536-4758-697a-8b9c-adbecfe0f102-",
            "GPU-03142536-4758-697a-8b9c-adbecfe0f1\u{e9}",
        ] {
            assert_eq!(parse_uuid(bad), None, "{bad:?}");
        }
    }
}
