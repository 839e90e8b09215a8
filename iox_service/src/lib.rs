//! # iox_service
//!
//! Services by name over shared memory, brokerless and zero-copy. Every service owns
//! one pool (see `iox_mempool`), described by a static config file under the root
//! (`/dev/shm` or `$IOX_ROOT`). Ports are built with builders that return `Result`;
//! samples are loaned, written in place, sent as a handle and read in place.
//!
//! ```
//! use iox_service::{Service, MemoryType};
//! use std::time::Duration;
//! # let dir = tempfile::tempdir().unwrap();
//! let service = Service::named("lidar/points").unwrap()
//! #   .root(dir.path())
//!     .publish_subscribe::<[u8]>()
//!     .max_publishers(1)
//!     .max_subscribers(1)
//!     .subscriber_buffer(1)
//!     // Two classes, each with as many chunks as these limits can occupy (6).
//!     .chunk_sizes(&[4096, 1 << 20])
//!     .memory_type(MemoryType::Locked)
//!     .open_or_create()
//!     .unwrap();
//! let publisher = service.publisher_builder().pin_memory(true).create().unwrap();
//! let subscriber = service.subscriber_builder().create().unwrap();
//! let sample = publisher.loan_slice_uninit(300_000).unwrap();
//! sample.write_from_fn(|i| i as u8).send().unwrap();
//! let got = subscriber.receive_timeout(Duration::from_secs(1)).unwrap().unwrap();
//! assert_eq!(got.len(), 300_000);
//! assert_eq!(got[1000], (1000 % 256) as u8);
//! ```

#[cfg(feature = "tokio")]
mod async_ready;
mod blackboard;
mod builder_attributes;
mod device;
mod event;
mod handle_methods;
pub mod opener;
mod pubsub;
mod reqres;
mod service;
mod waitset;

// The core's modules, under the paths the ports use (`crate::shm`, ...); the public
// ones are part of this crate's API.
pub use iox_core::{access, attributes, inspect, name, schema, static_config, tensor};
use iox_core::{port, recovery, shm, slot_claim, valid, zero_copy};
#[cfg(feature = "testing")]
#[doc(hidden)]
pub use iox_process::testing;
#[cfg(not(feature = "testing"))]
use iox_process::testing;

// `#[derive(ZeroCopySafe)]` emits `::iox_service::...` paths; this makes them resolve
// inside this crate too (its unit tests).
extern crate self as iox_service;

// Crate-internal short paths (the folders above hold the modules).
pub(crate) use iox_core::{cleanup, doorbell, dynamic, fork, node, queue};
pub(crate) use pubsub::{publisher, sample, subscriber};

pub use access::{AccessPolicy, Principal, Role};
pub use attributes::{AttributeError, Attributes};
pub use blackboard::{
    BlackboardBuilder, BlackboardService, EntryError, EntryLoan, IntKeyBlackboard, IntKeyBuilder,
    IntKeyError, IntKeyReader, IntKeyWriter, KeyInfo, KeyType, MAX_BLACKBOARD_KEYS, MAX_BLACKBOARD_VALUE,
    RawReaderEntry, RawWriterEntry, ReadError, Reader, ReaderBuilder, ReaderEntry, ValueGuard, WriteError,
    Writer, WriterBuilder, WriterEntry,
};
pub use cleanup::{CleanupError, RemoveError};
#[cfg(feature = "cuda")]
pub use device::publisher::{
    DeviceLoan, DeviceLoanError, DevicePublisher, DevicePublisherBuilder, DeviceSendError,
};
#[cfg(feature = "cuda")]
pub use device::subscriber::{DeviceSample, DeviceSubscriber, DeviceSubscriberBuilder, DeviceWaitError};
#[cfg(feature = "tokio")]
pub use event::WaitAsyncError;
pub use event::{
    EventBuilder, EventId, EventService, ListenError, Listener, ListenerBuilder, Notifier, NotifierBuilder,
    NotifyError,
};
/// The CUDA side of device-memory services (streams, device memory), with the `cuda`
/// feature.
#[cfg(feature = "cuda")]
pub use iox_cuda as cuda;
pub use iox_mempool::pages;
pub use iox_mempool::{
    Backing, ClassInfo, MemoryType, MemoryTypeError, PageSize, PageSizeError, PinError, Pinner, PoolInfo,
    Region, UserCode, register_pinner,
};
pub use iox_process::robust_mutex;
pub use name::{NameError, ServiceName};
pub use port::{LoanError, PortCreateError, WaitForPortsError};
pub use publisher::{
    Publisher, PublisherBuilder, SendBytesError, SendError, SendablePublisher, UpdateConnectionsError,
};
pub use pubsub::raw::{PoolKeepAlive, RawLoan, RawSample};
#[cfg(feature = "tokio")]
pub use pubsub::receive_async::ReceiveAsyncError;
pub use pubsub::service::{PubSubBuilder, PubSubService};
pub use pubsub::tensor::{
    TensorLoan, TensorLoanError, TensorPublisher, TensorPublisherBuilder, TensorSample, TensorSendError,
    TensorSubscriber, TensorSubscriberBuilder,
};
pub use pubsub::user_header;
pub use pubsub::user_header::{HeaderType, HeaderWritten, UserHeader};
pub use recovery::CleanupReport;
pub use reqres::raw::{RawActiveRequest, RawRequest, RawResponse, RawResponseLoan};
pub use reqres::{
    ActiveRequest, Client, ClientBuilder, MAX_ACTIVE_REQUESTS, PendingResponse, RequestMut, RequestMutUninit,
    RequestResponseBuilder, RequestResponseService, RequestSendError, Response, ResponseMut,
    ResponseMutUninit, ResponseReceiveError, ResponseSendError, Server, ServerBuilder, ServerReceiveError,
};
pub use sample::{DevicePtrError, Sample, SampleMut, SampleMutUninit};
pub use schema::Schema;
pub use service::{CreateError, OpenError, OpenOrCreateError, RootError, Service, UserHeaderMismatch};
pub use shm::dynamic::Corruption;
pub use static_config::{
    BlackboardConfig, BlackboardEntry, ConfigError, DeviceIdentity, EventConfig, InvalidConfig,
    MessagingPattern, Overflow, PatternConfig, PayloadBacking, PortLimits, PubSubConfig,
    RequestResponseConfig, StaticConfig,
};
pub use subscriber::{ReceiveError, Subscriber, SubscriberBuilder};
pub use valid::InvalidValue;
pub use waitset::{
    AttachmentId, CallbackProgression, WaitSet, WaitSetAttachError, WaitSetBuilder, WaitSetCreateError,
    WaitSetGuard, WaitSetRunError, WaitSetRunResult, Waker,
};
pub use zero_copy::{Payload, PayloadType, ZeroCopySafe};
