//! The C ABI of iox: publish-subscribe services, publishers and subscribers for C and
//! C++ programs, sharing services with Rust and Python programs.
//!
//! The header is `include/iox.h` (generated from this crate by cbindgen and checked in;
//! a test fails when it is stale), the C++17 layer `include/iox.hpp` (header-only, RAII
//! types over the C calls). Build the library with
//! `cargo build --release -p iox_ffi` (`target/release/libiox_ffi.so` and `.a`).
//!
//! The boundary:
//! - **Handles.** Services and ports are opaque pointers, made by a `*_create` /
//!   `*_open` call and ended by its `*_drop`. Loans and samples are ids kept by their
//!   port: `IoxLoan` and `IoxSample` carry the payload's address, its length and the id,
//!   and the user header's address and length for a service that declares one
//!   (`IoxPubSubOptions::user_header`; NULL and 0 otherwise).
//!   What is checked and what cannot be: see `handle`.
//! - **Threads.** A publisher or subscriber is used from the thread that created it (a
//!   call from another thread is `IOX_STATUS_WRONG_THREAD`); services from any thread.
//!   Make a port per thread, as in Rust.
//! - **Errors.** Every call returns an `IoxStatus`; `iox_last_error()` is the calling
//!   thread's last message. Nothing unwinds into C: a panic is `IOX_STATUS_PANIC`.
//! - **Ownership.** A port keeps its service open, a loan or sample with an id lives
//!   inside its port: dropping a port discards its loans and releases its samples, so
//!   their addresses must not be used after it. A held loan or sample (`held`: the C++
//!   layer's path) lives in the caller's struct instead, needs no table, and outlives
//!   its port; it must be sent or released exactly once and never copied.
//! - **What C callers must not do:** use a pointer after its `*_drop` or one this
//!   library did not make (best-effort refusal only), read a sample's bytes after its
//!   release, write more than a loan's `len_bytes` (or its header's `header_len`), send
//!   a loan whose bytes (payload and header) are not a valid value of the service's
//!   types, call a port's functions from two threads at
//!   once (they are refused from any but the creating thread), or copy an
//!   `IoxHeldLoan` / `IoxHeldSample` and use both copies.
//!
//! - **Attributes.** Each options struct records and requires service attributes;
//!   `iox_*_attribute_count`, `iox_*_attribute` and `iox_*_attribute_get` read a
//!   service's, as strings its handle keeps (see `attributes`).
//!
//! - **Access policies.** A publish-subscribe service may record who may publish and
//!   who may only subscribe (`IoxPubSubOptions::access`, kernel-enforced: a reader's
//!   pool is read-only); refusals are `IOX_STATUS_NOT_A_PUBLISHER` and
//!   `IOX_STATUS_NOT_IN_ACCESS_POLICY` (see `access`).
//!
//! - **Page sizes.** A publish-subscribe pool may live on reserved 2 MiB or 1 GiB huge
//!   pages or transparent huge pages (`IoxPubSubOptions::page_size` and
//!   `page_size_set`, an `IoxPageSize`; on open, required if set); a port's
//!   `IoxPoolInfo` says which. Too few reserved pages at create is
//!   `IOX_STATUS_NO_HUGE_PAGES`, its message saying how to reserve them (see `pages`).
//!
//! - **Device memory** (`CudaDevice` services, the `cuda` feature, on by default: the
//!   driver is loaded at run time, when a process first uses one): device publishers
//!   and subscribers whose loans and samples are tensors in GPU memory, ordered on the
//!   caller's CUDA streams (see `device`).
//!
//! Not in the C ABI: the blocking `receive_async`-style integrations (C has the
//! readiness descriptors instead).

pub mod access;
mod args;
pub mod attributes;
pub mod blackboard;
#[cfg(feature = "cuda")]
pub mod device;
pub mod event;
mod fields;
mod handle;
pub mod held;
pub mod pages;
pub mod publisher;
pub mod reqres;
pub mod service;
pub mod status;
pub mod subscriber;
pub mod tensor;
pub mod waitset;

pub use access::IoxAccessPolicy;
pub use attributes::IoxAttribute;
pub use blackboard::{
    IoxBlackboard, IoxBlackboardEntry, IoxBlackboardOptions, IoxBlackboardReader, IoxBlackboardWriter,
};
#[cfg(feature = "cuda")]
pub use device::{
    IoxDeviceLoan, IoxDevicePublisher, IoxDeviceSample, IoxDeviceSubscriber, IoxElement, IoxTensor,
};
pub use event::{IoxEventOptions, IoxEventService, IoxListener, IoxNotifier};
pub use held::{IoxHeldLoan, IoxHeldSample, IoxHeldState};
pub use pages::IoxPageSize;
pub use publisher::{IoxLoan, IoxPublisher};
pub use reqres::{IoxClient, IoxRequestResponseOptions, IoxRequestResponseService, IoxServer};
pub use service::{
    IOX_CREATE, IOX_OPEN, IOX_OPEN_OR_CREATE, IoxPoolInfo, IoxPubSubOptions, IoxPubSubService, IoxType,
};
pub use status::IoxStatus;
pub use subscriber::{IoxSample, IoxSubscriber};
pub use waitset::{IoxWaitSet, IoxWaitSetEvent, IoxWaker};
