//! The static config a publish-subscribe builder creates: the pool layout its limits
//! need (see the service module's "Pool sizing"), on the page size asked for, the
//! memory type and where the payload lives, checked as a whole with the access policy
//! the protocol will record (who may write decides whether hugetlb pages are allowed).

use iox_mempool::segment;
use iox_mempool::{Backing, MemfdIdentity, MemoryType, PoolLayout};

use super::service::PubSubBuilder;
use crate::static_config::{
    self, HeaderType, InvalidConfig, PatternConfig, PayloadBacking, PubSubConfig, StaticConfig,
};
use crate::user_header::UserHeader;
use crate::{Payload, PayloadType};
use iox_core::service::CreateError;

impl<P: ?Sized + Payload, H: UserHeader> PubSubBuilder<P, H> {
    /// The pool layout, with `counts` chunks for every class whose count is derived;
    /// a count the user gave below `counts` is refused unless they allowed exhaustion.
    fn layout(&self, counts: usize) -> Result<PoolLayout, CreateError> {
        let payload = self.payload_type();
        let header = self.header_type();
        let alignment = payload
            .alignment()
            .max(header.as_ref().map_or(1, HeaderType::alignment))
            .max(iox_mempool::layout::DEFAULT_ALIGNMENT);
        // Every class holds the header in front of the payload bytes it was given.
        let offset = self.payload_offset();
        let with_header = |bytes: usize| bytes.checked_add(offset);
        let classes = if matches!(payload, PayloadType::Typed { .. }) {
            let Some(bytes) = with_header(payload.element_size()) else {
                return self.fail(InvalidConfig::Overflow {
                    what: "user header and payload",
                    value: payload.element_size(),
                });
            };
            vec![(bytes.max(1), counts)]
        } else if let Some(classes) = &self.size_classes {
            let mut out = Vec::with_capacity(classes.len());
            for &(payload_bytes, count) in classes {
                let Some(bytes) = with_header(payload_bytes) else {
                    return self.fail(InvalidConfig::Overflow {
                        what: "size class",
                        value: payload_bytes,
                    });
                };
                match count {
                    None => out.push((bytes, counts)),
                    // A count of 0 is the layout's to refuse.
                    Some(count) if count >= counts || count == 0 || self.allow_pool_exhaustion => {
                        out.push((bytes, count))
                    }
                    Some(count) => {
                        return self.fail(InvalidConfig::PoolTooSmall {
                            chunk_size: bytes,
                            count,
                            needed: counts,
                        });
                    }
                }
            }
            out
        } else if let Some(len) = self.max_slice_len {
            let Some(bytes) = len.checked_mul(payload.element_size()).and_then(with_header) else {
                return self.fail(InvalidConfig::Overflow {
                    what: "max_slice_len",
                    value: len,
                });
            };
            vec![(bytes.max(1), counts)]
        } else {
            return Err(CreateError::MissingSliceSize(
                self.target.name.to_string(),
                ".size_classes(...) or .max_slice_len(...)",
            ));
        };
        PoolLayout::with_alignment(alignment, &classes).map_err(|source| CreateError::Layout {
            name: self.target.name.to_string(),
            source,
        })
    }

    pub(super) fn config(&self) -> Result<StaticConfig, CreateError> {
        let memory_type = self.memory_type.unwrap_or_default();
        let section = PubSubConfig {
            max_publishers: self.max_publishers.unwrap_or(2),
            max_subscribers: self.max_subscribers.unwrap_or(8),
            subscriber_buffer: self.subscriber_buffer.unwrap_or(4),
            max_loans: self.max_loans.unwrap_or(2),
            max_held: self.max_held.unwrap_or(2),
            overflow: self.overflow.unwrap_or_default(),
            history: self.history.unwrap_or(0),
            tensors: self.tensors.unwrap_or(false) || memory_type == MemoryType::CudaDevice,
        };
        let mut config = StaticConfig {
            version: static_config::CONFIG_VERSION,
            name: self.target.name.to_string(),
            pattern: PatternConfig::PublishSubscribe(section),
            payload: self.payload_type(),
            memory_type,
            layout: PoolLayout::new(&[(64, 1)]).expect("constant layout"),
            permissions: self.permissions.unwrap_or(segment::DEFAULT_MODE),
            // The memfd's identity is filled in when it is created (try_create).
            backing: PayloadBacking::File,
            created_unix_ns: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            schema: self.schema(),
            user_header: self.header_type(),
            // Set by the protocol for every pattern (`service::create`).
            attributes: Default::default(),
            access: None,
        };
        if let Err(e) = config.check() {
            // Limits first, so a zero count is reported as such, not as a layout error.
            if !e.is_payload() {
                return self.fail(e);
            }
        }
        let counts = section.worst_case_chunks();
        let pages = self.page_size.unwrap_or_default();
        config.layout =
            self.layout(counts as usize)?
                .on_pages(pages)
                .map_err(|source| CreateError::Layout {
                    name: self.target.name.to_string(),
                    source,
                })?;
        let memfd = self.backing.is_none_or(|b| b == Backing::Memfd);
        if memory_type == MemoryType::CudaDevice {
            if !memfd {
                return self.fail(InvalidConfig::DeviceMemory);
            }
            // Before the driver is asked anything.
            if !pages.is_base() {
                return self.fail(InvalidConfig::PageSize {
                    pages,
                    why: iox_core::static_config::NO_DEVICE_PAGES,
                });
            }
            if self.target.access.as_ref().is_some_and(|a| a.has_readers()) {
                return self.fail(InvalidConfig::Access(iox_core::access::NO_DEVICE_READERS.into()));
            }
            let planned = iox_core::device::planned(self.cuda_device, config.layout.payload_len()).map_err(
                |reason| CreateError::DeviceMemory {
                    name: self.target.name.to_string(),
                    reason,
                },
            )?;
            config.backing = PayloadBacking::CudaDevice(planned);
        } else if memfd {
            config.backing = PayloadBacking::Memfd(MemfdIdentity {
                len: config.layout.payload_len() as u64,
                dev: 0,
                ino: 0,
                nonce: 0,
            });
        }
        // With the policy it will carry (as the protocol records it: this uid its
        // creator), since who may write decides whether hugetlb pages are allowed.
        config.access =
            (self.target.access.clone()).map(|a| a.with_creator(rustix::process::geteuid().as_raw()));
        config.check().or_else(|e| self.fail(e))?;
        Ok(config)
    }
}
