//! Page sizes of publish-subscribe pools from C (see `iox_service::pages`): the pages a
//! service's payload lives on, 4 KiB (the default), reserved 2 MiB or 1 GiB huge pages,
//! or transparent huge pages (best effort).
//!
//! Setting: `IoxPubSubOptions::page_size` holds an [`IoxPageSize`] as a plain integer
//! (any value C writes is defined; one that is none is `IOX_STATUS_INVALID_ARGUMENT`),
//! used only where `page_size_set` is true: a creating call records it, an opening call
//! requires the service to have it (`IOX_STATUS_OPEN_FAILED` naming both otherwise).
//!
//! Refusals: creating on more huge pages than the machine has free is
//! `IOX_STATUS_NO_HUGE_PAGES`, its message saying how many are needed, how many are
//! free and how to reserve more (`/proc/sys/vm/nr_hugepages`, `hugepages=` at boot);
//! huge pages with a file backing or device memory are `IOX_STATUS_OPEN_FAILED`.
//!
//! Reading: `IoxPoolInfo::page_size` and `page_bytes` (a port's view of its pool).

use iox_service::PageSize;

use crate::status::{IoxStatus, refuse};

/// The pages a publish-subscribe pool lives on (`IoxPubSubOptions::page_size`,
/// `IoxPoolInfo::page_size`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// The variants' names make the C names (`IOX_PAGE_SIZE_HUGE_2MIB`): cbindgen splits
// words at the underscore.
#[allow(non_camel_case_types)]
pub enum IoxPageSize {
    /// The system's base page size (4 KiB on x86-64): the default.
    Base = 0,
    /// Reserved 2 MiB huge pages (hugetlb): `/proc/sys/vm/nr_hugepages`.
    Huge_2Mib = 1,
    /// Reserved 1 GiB huge pages (hugetlb), usually reserved at boot
    /// (`hugepagesz=1G hugepages=N`).
    Huge_1Gib = 2,
    /// Ordinary shared memory advised for transparent huge pages: best effort.
    Transparent = 3,
}

const SIZES: [(IoxPageSize, PageSize); 4] = [
    (IoxPageSize::Base, PageSize::Base),
    (IoxPageSize::Huge_2Mib, PageSize::Huge2MiB),
    (IoxPageSize::Huge_1Gib, PageSize::Huge1GiB),
    (IoxPageSize::Transparent, PageSize::Transparent),
];

/// The C value of `pages`.
pub(crate) fn of(pages: PageSize) -> IoxPageSize {
    SIZES
        .iter()
        .find(|(_, p)| *p == pages)
        .map_or(IoxPageSize::Base, |(c, _)| *c)
}

/// The page size C's `code` names (`what` names the field in messages); any other
/// value is `IOX_STATUS_INVALID_ARGUMENT`.
pub(crate) fn read(code: u32, what: &str) -> Result<PageSize, IoxStatus> {
    match SIZES.iter().find(|(c, _)| *c as u32 == code) {
        Some((_, p)) => Ok(*p),
        None => refuse(
            IoxStatus::InvalidArgument,
            format!(
                "{what} is {code}: IOX_PAGE_SIZE_BASE (0), IOX_PAGE_SIZE_HUGE_2MIB (1), IOX_PAGE_SIZE_HUGE_1GIB (2) or IOX_PAGE_SIZE_TRANSPARENT (3)"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_page_size_goes_there_and_back() {
        for p in PageSize::ALL {
            assert_eq!(read(of(p) as u32, "p"), Ok(p));
        }
        assert_eq!(read(4, "p"), Err(IoxStatus::InvalidArgument));
        assert_eq!(read(u32::MAX, "p"), Err(IoxStatus::InvalidArgument));
    }
}
