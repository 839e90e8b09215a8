/* The C API of iox. Generated from iox_ffi/src by cbindgen (see iox_ffi/tests/header.rs); do not edit. */

#ifndef IOX_H
#define IOX_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

// Key type `u8` (`IoxBlackboardOptions::key_type`).
#define IOX_KEY_U8 0

// Key type `u16`.
#define IOX_KEY_U16 1

// Key type `u32`.
#define IOX_KEY_U32 2

// Key type `u64`.
#define IOX_KEY_U64 3

// Key type `i8`.
#define IOX_KEY_I8 4

// Key type `i16`.
#define IOX_KEY_I16 5

// Key type `i32`.
#define IOX_KEY_I32 6

// Key type `i64`.
#define IOX_KEY_I64 7

// Most dimensions of a tensor.
#define IOX_TENSOR_MAX_DIMS 8

// Open the service if it exists, else create it.
#define IOX_OPEN_OR_CREATE 0

// Open an existing service only.
#define IOX_OPEN 1

// Create the service; fails if it exists.
#define IOX_CREATE 2

// `IoxPubSubOptions::overflow`: the service's policy (the default when creating).
#define IOX_OVERFLOW_DEFAULT 0

// `IoxPubSubOptions::overflow`: a full queue drops that subscriber's oldest sample.
#define IOX_OVERFLOW_DROP_OLDEST 1

// `IoxPubSubOptions::overflow`: a full queue keeps its samples; that subscriber does
// not get the new one, and the send says `IOX_STATUS_QUEUE_FULL`.
#define IOX_OVERFLOW_REJECT 2

// A round found events: `*count` entries describe them.
#define IOX_WAIT_EVENTS 0

// The wait's time passed with nothing to report.
#define IOX_WAIT_TIMEOUT 1

// SIGINT or SIGTERM arrived (a WaitSet created with `termination_signals`).
#define IOX_WAIT_TERMINATION 2

// Another thread woke the WaitSet through its `IoxWaker`.
#define IOX_WAIT_INTERRUPT 3

// The outcome of a call. Values are stable: new ones are only ever appended.
typedef enum IoxStatus {
  // The call did what it says.
  IOX_STATUS_OK = 0,
  // A required pointer argument was NULL.
  IOX_STATUS_NULL_POINTER = 1,
  // A port or service pointer that this library did not make, or one already
  // dropped (checked by a marker word: best effort, see the crate docs).
  IOX_STATUS_INVALID_HANDLE = 2,
  // A loan or sample id that is not live: already sent, discarded or released, or
  // of another port.
  IOX_STATUS_STALE_HANDLE = 3,
  // A port used from a thread other than the one that created it.
  IOX_STATUS_WRONG_THREAD = 4,
  // An argument was refused (a name that is not valid UTF-8 or not a service name,
  // an unknown open mode, options that do not describe a type).
  IOX_STATUS_INVALID_ARGUMENT = 5,
  // Opening or creating the service failed.
  IOX_STATUS_OPEN_FAILED = 6,
  // Creating a port failed.
  IOX_STATUS_PORT_CREATE_FAILED = 7,
  // A loan failed.
  IOX_STATUS_LOAN_FAILED = 8,
  // A send failed.
  IOX_STATUS_SEND_FAILED = 9,
  // A receive failed.
  IOX_STATUS_RECEIVE_FAILED = 10,
  // The library panicked (a bug in iox): the message says where.
  IOX_STATUS_PANIC = 11,
  // A notify failed.
  IOX_STATUS_NOTIFY_FAILED = 12,
  // A listener's wait failed.
  IOX_STATUS_LISTEN_FAILED = 13,
  // Creating, attaching to or waiting on a WaitSet failed.
  IOX_STATUS_WAIT_SET_FAILED = 14,
  // A device pointer was asked of a loan or sample whose port did not pin the pool with a
  // pinner that gives one (e.g. CUDA's).
  IOX_STATUS_NO_DEVICE_POINTER = 15,
  // A tensor that does not fit the service (another element type, more bytes than
  // its largest sample, strides past its end, more than 8 dimensions, a negative
  // stride), or a received tensor record that does not describe its sample.
  IOX_STATUS_INVALID_TENSOR = 16,
  // A send of a service with the `IOX_OVERFLOW_REJECT` policy found some subscribers'
  // queues full: they did not get the sample (the call's `delivered` says how many
  // did). Send again once they made room, or use the default policy, which drops
  // their oldest sample instead.
  IOX_STATUS_QUEUE_FULL = 17,
  // A publisher was refused by the service's access policy
  // (`IoxPubSubOptions::access`): this process is a reader in it, so it may
  // subscribe but never publish (its descriptor of the pool is read-only), or, a
  // publisher in it, it opened the service when only readers held it. The message
  // says which, naming its identity and the policy.
  IOX_STATUS_NOT_A_PUBLISHER = 18,
  // Opening a service was refused because its access policy names neither this
  // process's uid nor any of its groups. The message names its identity and the
  // policy; run as a user or group the policy names, or ask the service's creator to
  // name yours.
  IOX_STATUS_NOT_IN_ACCESS_POLICY = 19,
  // Creating a service on huge pages (`IoxPubSubOptions::page_size`
  // `IOX_PAGE_SIZE_HUGE_2MIB` or `IOX_PAGE_SIZE_HUGE_1GIB`) found too few of them
  // free, or none of that size in this kernel. The message says how many the pool
  // needs, how many are free, and how to reserve more (as root: `echo N >
  // /proc/sys/vm/nr_hugepages`, or `hugepages=N` on the kernel's command line).
  IOX_STATUS_NO_HUGE_PAGES = 20,
} IoxStatus;

// A tensor's element type (DLPack's types of these sizes).
typedef enum IoxElement {
  // No element type: the service's payload is not a slice of numbers.
  IOX_ELEMENT_NONE = 0,
  IOX_ELEMENT_BOOL = 1,
  IOX_ELEMENT_U8 = 2,
  IOX_ELEMENT_U16 = 3,
  IOX_ELEMENT_U32 = 4,
  IOX_ELEMENT_U64 = 5,
  IOX_ELEMENT_I8 = 6,
  IOX_ELEMENT_I16 = 7,
  IOX_ELEMENT_I32 = 8,
  IOX_ELEMENT_I64 = 9,
  IOX_ELEMENT_F16 = 10,
  IOX_ELEMENT_BF16 = 11,
  IOX_ELEMENT_F32 = 12,
  IOX_ELEMENT_F64 = 13,
} IoxElement;

// The pages a publish-subscribe pool lives on (`IoxPubSubOptions::page_size`,
// `IoxPoolInfo::page_size`).
typedef enum IoxPageSize {
  // The system's base page size (4 KiB on x86-64): the default.
  IOX_PAGE_SIZE_BASE = 0,
  // Reserved 2 MiB huge pages (hugetlb): `/proc/sys/vm/nr_hugepages`.
  IOX_PAGE_SIZE_HUGE_2MIB = 1,
  // Reserved 1 GiB huge pages (hugetlb), usually reserved at boot
  // (`hugepagesz=1G hugepages=N`).
  IOX_PAGE_SIZE_HUGE_1GIB = 2,
  // Ordinary shared memory advised for transparent huge pages: best effort.
  IOX_PAGE_SIZE_TRANSPARENT = 3,
} IoxPageSize;

// An open blackboard (opaque); any thread.
typedef struct IoxBlackboard IoxBlackboard;

// A reader of a blackboard (opaque): used from the thread that created it.
typedef struct IoxBlackboardReader IoxBlackboardReader;

// A writer of a blackboard (opaque): used from the thread that created it.
typedef struct IoxBlackboardWriter IoxBlackboardWriter;

// A client (opaque): used from the thread that created it.
typedef struct IoxClient IoxClient;

// A device publisher (opaque): used from the thread that created it.
typedef struct IoxDevicePublisher IoxDevicePublisher;

// A device subscriber (opaque): used from the thread that created it.
typedef struct IoxDeviceSubscriber IoxDeviceSubscriber;

// An open event service (opaque); any thread.
typedef struct IoxEventService IoxEventService;

// A listener (opaque): used from the thread that created it.
typedef struct IoxListener IoxListener;

// A notifier (opaque): used from the thread that created it.
typedef struct IoxNotifier IoxNotifier;

// An open publish-subscribe service (opaque). Drop it with
// [`iox_pubsub_service_drop`]; its ports keep the service open on their own.
typedef struct IoxPubSubService IoxPubSubService;

// A publisher (opaque): used from the thread that created it.
typedef struct IoxPublisher IoxPublisher;

// An open request-response service (opaque); any thread.
typedef struct IoxRequestResponseService IoxRequestResponseService;

// A server (opaque): used from the thread that created it.
typedef struct IoxServer IoxServer;

// A subscriber (opaque): used from the thread that created it.
typedef struct IoxSubscriber IoxSubscriber;

// A tensor publisher (opaque): used from the thread that created it.
typedef struct IoxTensorPublisher IoxTensorPublisher;

// A tensor subscriber (opaque): used from the thread that created it.
typedef struct IoxTensorSubscriber IoxTensorSubscriber;

// A WaitSet (opaque): used from the thread that created it.
typedef struct IoxWaitSet IoxWaitSet;

// Wakes a WaitSet from any thread (opaque): its wait returns `IOX_WAIT_INTERRUPT`.
typedef struct IoxWaker IoxWaker;

// One field of a struct type (`IoxType::fields`): its name, its byte offset
// (`offsetof`), and its type: a number or `bool` by the name Rust gives it (`"u8"`,
// `"i32"`, `"f64"`, `"bool"`, ...), or a nested struct (`nested`, with its own fields).
// `count` 0 is one value; `count` N of 1 or more makes it an array of N (`float v[3]`:
// `"f32"`, count 3; `float v[1]`: count 1, an array of one, as Rust's `[f32; 1]`).
typedef struct IoxField {
  // The field's name (printable ASCII, at most 255 bytes).
  const char *name;
  // Its byte offset in the struct (`offsetof`).
  uint64_t offset;
  // A number's or `bool`'s name as Rust gives it; ignored when `nested` is set.
  const char *type_name;
  // A struct field's type (its `fields` set); NULL for a number or `bool`.
  const struct IoxType *nested;
  // 0: one value; N (1 or more): an array of N.
  uint64_t count;
} IoxField;

// A payload type (or a user header's type) as a Rust program records it: what makes a
// C or C++ type and a Rust type one service's type.
typedef struct IoxType {
  // The type's name, as a Rust program records it (its `#[iox(type_name = "...")]`,
  // or `"u64"`, `"f32"`, ... for numbers).
  const char *name;
  // `sizeof` the type (of one element for a slice).
  uint64_t size;
  // `alignof` the type.
  uint64_t alignment;
  // Whether every bit pattern of the type's bytes is a value (no padding, no `bool`
  // or enum fields). Part of the identity: must match the Rust side's.
  bool any_bit_pattern;
  // Slices of `size`-byte elements instead of one value.
  bool slice;
  // For a slice: the most elements one payload holds (required when creating).
  uint64_t max_slice_len;
  // The type's fields (of one element, for a slice), `field_count` of them; NULL
  // with 0: none declared. A publish-subscribe service records them as its
  // payload's or user header's layout when created and compares them field by field
  // when opened (see [`IoxField`]); a request-response service checks them and
  // records none (its types are compared by name, size and alignment).
  const struct IoxField *fields;
  // How many `fields` there are.
  size_t field_count;
} IoxType;

// One key of a blackboard this call may create: the key, its value type (one value:
// not a slice) and its initial value.
typedef struct IoxBlackboardEntry {
  // The key (signed keys as their two's complement, see the module docs).
  uint64_t key;
  // The type of its values, named as a Rust program names it (`"f64"`, `"[f32; 3]"`,
  // a struct's `type_name`).
  struct IoxType value;
  // The initial value, `value.size` bytes, written when this call creates the
  // blackboard; NULL: zero bytes (which must then be a value of the type).
  const void *initial;
} IoxBlackboardEntry;

// One attribute: a key and its value, NUL-terminated UTF-8.
typedef struct IoxAttribute {
  // The key (1 to 128 bytes of printable ASCII, no `=` or whitespace).
  const char *key;
  // The value (at most 8192 bytes, no control characters but `\n` and `\t`); in
  // `required_attributes`, NULL requires only the key.
  const char *value;
} IoxAttribute;

// The keys and settings of a blackboard. Fill it with
// [`iox_blackboard_options_init`], then set the key type, the entries and what else
// differs; zero means the default (on open: whatever the blackboard has).
typedef struct IoxBlackboardOptions {
  // The root directory of the service's files; NULL: `IOX_ROOT`, else `/dev/shm`.
  const char *root;
  // The key type: `IOX_KEY_U8` ... `IOX_KEY_I64`.
  uint32_t key_type;
  // The keys (`entry_count` of them): required to create; on open, each must be
  // one of the blackboard's with this value type (NULL with 0: no check).
  const struct IoxBlackboardEntry *entries;
  // How many `entries` there are.
  size_t entry_count;
  // Most writers (0: default, 1).
  uint32_t max_writers;
  // Most readers (0: default).
  uint32_t max_readers;
  // Most change listeners (0: default).
  uint32_t max_listeners;
  // How long to wait for a service another process is creating or removing, in
  // milliseconds (0: default, 10 s).
  uint64_t timeout_ms;
  // Attributes to record when this call creates the blackboard (`attribute_count`
  // of them; NULL with 0: none).
  const struct IoxAttribute *attributes;
  // How many `attributes` there are.
  size_t attribute_count;
  // Attributes an existing blackboard must have when this call opens it (NULL with
  // 0: none); an entry whose `value` is NULL requires only the key.
  const struct IoxAttribute *required_attributes;
  // How many `required_attributes` there are.
  size_t required_attribute_count;
} IoxBlackboardOptions;

// A tensor: element type, `ndim` sizes and strides (in elements, row-major for a
// contiguous tensor: the last dimension's stride is 1).
typedef struct IoxTensor {
  // An `IoxElement` (a plain integer here, so that any value C writes is defined;
  // one that is no element is refused).
  uint32_t element;
  uint32_t ndim;
  uint64_t shape[IOX_TENSOR_MAX_DIMS];
  int64_t strides[IOX_TENSOR_MAX_DIMS];
} IoxTensor;

// A loaned chunk of GPU memory: write it with work on the loan's stream, then send
// or discard it by `id`.
typedef struct IoxDeviceLoan {
  // The chunk's device address (in this process's context of the service's GPU).
  uint64_t device_ptr;
  // Bytes loaned (the tensor's span).
  uint64_t len_bytes;
  // What the publisher knows this loan by.
  uint64_t id;
  // The tensor the sample will carry.
  struct IoxTensor tensor;
} IoxDeviceLoan;

// A received tensor in GPU memory: read it with work enqueued after a wait on a
// stream, then release it by `id`.
typedef struct IoxDeviceSample {
  // The sample's device address (in this process's context of the service's GPU).
  uint64_t device_ptr;
  // Bytes sent.
  uint64_t len_bytes;
  // What the subscriber knows this sample by.
  uint64_t id;
  // This process's ordinal of the GPU.
  int32_t device;
  // Its tensor (checked against the service and the sample's bytes).
  struct IoxTensor tensor;
} IoxDeviceSample;

// The settings of an event service. Fill it with [`iox_event_options_init`], then set
// what differs; zero means the default (on open: whatever the service has).
typedef struct IoxEventOptions {
  // The root directory of the service's files; NULL: `IOX_ROOT`, else `/dev/shm`.
  const char *root;
  // Most notifiers (0: default).
  uint32_t max_notifiers;
  // Most listeners (0: default).
  uint32_t max_listeners;
  // The largest event id (0: default).
  uint32_t event_id_max;
  // How long to wait for a service another process is creating or removing, in
  // milliseconds (0: default, 10 s).
  uint64_t timeout_ms;
  // Attributes to record when this call creates the service (`attribute_count` of
  // them; NULL with 0: none). Not compared with an existing service's on open.
  const struct IoxAttribute *attributes;
  // How many `attributes` there are.
  size_t attribute_count;
  // Attributes an existing service must have when this call opens it
  // (`required_attribute_count` of them; NULL with 0: none); an entry whose `value`
  // is NULL requires only the key. A call that may create must record them too.
  const struct IoxAttribute *required_attributes;
  // How many `required_attributes` there are.
  size_t required_attribute_count;
} IoxEventOptions;

// Opaque room for the port's loan or sample (8-byte aligned).
typedef struct IoxHeldState {
  // Not to be read or written by the caller.
  uint64_t opaque[8];
} IoxHeldState;

// A loan kept by the caller (see the module docs): write `len_bytes` bytes at `data`
// (and, for a service with a user header, `header_len` bytes at `header`), then send
// or discard it exactly once.
typedef struct IoxHeldLoan {
  // The payload's first byte, aligned for the service's type.
  void *data;
  // The payload's length in bytes.
  uint64_t len_bytes;
  // The user header's first byte, aligned for its type (not initialised: write all
  // `header_len` bytes before sending); NULL for a service without a header.
  void *header;
  // The user header's length in bytes (0 without one).
  uint64_t header_len;
  // Non-zero while the struct holds a loan.
  uint64_t live;
  // The thread that loaned it.
  uint64_t thread;
  // The loan itself.
  struct IoxHeldState state;
} IoxHeldLoan;

// A received sample kept by the caller (see the module docs): read `len_bytes` bytes
// at `data` (and the user header's `header_len` bytes at `header`), then release it
// exactly once.
typedef struct IoxHeldSample {
  // The payload's first byte (read-only).
  const void *data;
  // The payload's length in bytes.
  uint64_t len_bytes;
  // Its length in elements of the service's type (1 for a value).
  uint64_t len;
  // The user header's first byte (read-only, aligned for its type); NULL for a
  // service without a header.
  const void *header;
  // The user header's length in bytes (0 without one).
  uint64_t header_len;
  // Non-zero while the struct holds a sample.
  uint64_t live;
  // The sample itself.
  struct IoxHeldState state;
} IoxHeldSample;

// A loaned chunk: write `len_bytes` bytes at `data` (and, for a service with a user
// header, `header_len` bytes at `header`), then send or discard it by `id`.
typedef struct IoxLoan {
  // The payload's first byte, aligned for the service's type.
  void *data;
  // The payload's length in bytes.
  uint64_t len_bytes;
  // What the port knows this loan by.
  uint64_t id;
  // The user header's first byte, aligned for its type (not initialised: write all
  // `header_len` bytes before sending); NULL for a service without a header (and
  // for request-response loans).
  void *header;
  // The user header's length in bytes (0 without one).
  uint64_t header_len;
} IoxLoan;

// A port's view of its service's pool: where it is mapped in this process, how long,
// its memory type, and its chunks (for a caller's own registrations: RDMA, Vulkan,
// ...).
typedef struct IoxPoolInfo {
  // The payload mapping's first byte in this process.
  void *base;
  // The mapping's length in bytes (whole pages).
  uint64_t len;
  // The memory type's code (0 CPU, 1 page-locked, 2 CUDA-pinned, 3 CUDA device memory,
  // >= 0x100 users').
  uint32_t memory_type;
  // How many size classes the pool has.
  uint32_t classes;
  // Chunks over all classes.
  uint64_t total_chunks;
  // Chunks not in use now (a snapshot).
  uint64_t free_chunks;
  // The pages the pool lives on (see `IoxPubSubOptions::page_size`).
  enum IoxPageSize page_size;
  // Their size in bytes (4096, 2 MiB, 1 GiB; 2 MiB for transparent huge pages): `len`
  // is a multiple of it.
  uint64_t page_bytes;
} IoxPoolInfo;

// The types and settings of a request-response service. Fill it with
// [`iox_request_response_options_init`], then set the types and what else differs;
// zero means the default (on open: whatever the service has).
typedef struct IoxRequestResponseOptions {
  // The root directory of the service's files; NULL: `IOX_ROOT`, else `/dev/shm`.
  const char *root;
  // The request type.
  struct IoxType request;
  // The response type.
  struct IoxType response;
  // Most clients (0: default).
  uint32_t max_clients;
  // Most servers (0: default).
  uint32_t max_servers;
  // Requests one client may have active at once (0: default).
  uint32_t max_active_requests_per_client;
  // Responses of one request that may wait for the client (0: default).
  uint32_t max_response_buffer;
  // How long to wait for a service another process is creating or removing, in
  // milliseconds (0: default, 10 s).
  uint64_t timeout_ms;
  // Attributes to record when this call creates the service (`attribute_count` of
  // them; NULL with 0: none). Not compared with an existing service's on open.
  const struct IoxAttribute *attributes;
  // How many `attributes` there are.
  size_t attribute_count;
  // Attributes an existing service must have when this call opens it
  // (`required_attribute_count` of them; NULL with 0: none); an entry whose `value`
  // is NULL requires only the key. A call that may create must record them too.
  const struct IoxAttribute *required_attributes;
  // How many `required_attributes` there are.
  size_t required_attribute_count;
} IoxRequestResponseOptions;

// A received sample (or request, or response): read `len_bytes` bytes at `data` (and
// the user header's `header_len` bytes at `header`), then release it by `id`.
typedef struct IoxSample {
  // The payload's first byte (read-only).
  const void *data;
  // The payload's length in bytes.
  uint64_t len_bytes;
  // Its length in elements of the service's type (1 for a value).
  uint64_t len;
  // What the port knows this sample by.
  uint64_t id;
  // The user header's first byte (read-only, aligned for its type); NULL for a
  // service without a header (and for requests and responses).
  const void *header;
  // The user header's length in bytes (0 without one).
  uint64_t header_len;
} IoxSample;

// Who may publish besides the creator and who may only read (subscribe): four lists of
// ids, each an array and its count (NULL with 0: none). All four empty: only the
// creator (and root) may use the service.
typedef struct IoxAccessPolicy {
  // Users that may publish (`publish_uid_count` of them).
  const uint32_t *publish_uids;
  // How many `publish_uids` there are.
  size_t publish_uid_count;
  // Groups whose members may publish (`publish_gid_count` of them).
  const uint32_t *publish_gids;
  // How many `publish_gids` there are.
  size_t publish_gid_count;
  // Users that may only read (`read_uid_count` of them).
  const uint32_t *read_uids;
  // How many `read_uids` there are.
  size_t read_uid_count;
  // Groups whose members may only read (`read_gid_count` of them).
  const uint32_t *read_gids;
  // How many `read_gids` there are.
  size_t read_gid_count;
  // When opening: the uid the service must have been created by (NULL: any; a
  // service of the same name and rules someone else created first is then accepted).
  // When creating: this process's uid, or the create fails.
  const uint32_t *created_by;
} IoxAccessPolicy;

// The payload type and settings of a publish-subscribe service. Fill it with
// [`iox_pubsub_options_init`], then set the type and what else differs. Zero in a
// limit means the service's default (on open: whatever the service has).
typedef struct IoxPubSubOptions {
  // The root directory of the service's files; NULL: `IOX_ROOT`, else `/dev/shm`.
  const char *root;
  // The payload type.
  struct IoxType payload;
  // Memory type code (0 CPU, 1 page-locked, 2 CUDA-pinned, 3 CUDA device memory, >= 0x100
  // users' own).
  uint32_t memory_type;
  // Whether `memory_type` is set (on open: must match then).
  bool memory_type_set;
  // Most publishers (0: default).
  uint32_t max_publishers;
  // Most subscribers (0: default).
  uint32_t max_subscribers;
  // Samples each subscriber's queue holds (0: default).
  uint32_t subscriber_buffer;
  // Samples a late subscriber gets on connecting (0: none).
  uint32_t history;
  // Loans one publisher may hold at once (0: default).
  uint32_t max_loans;
  // Samples one subscriber may hold at once (0: default).
  uint32_t max_held;
  // How long to wait for a service another process is creating or removing, in
  // milliseconds (0: default, 10 s).
  uint64_t timeout_ms;
  // Attributes to record when this call creates the service (`attribute_count` of
  // them; NULL with 0: none). Not compared with an existing service's on open.
  const struct IoxAttribute *attributes;
  // How many `attributes` there are.
  size_t attribute_count;
  // Attributes an existing service must have when this call opens it
  // (`required_attribute_count` of them; NULL with 0: none); an entry whose `value`
  // is NULL requires only the key. A call that may create must record them too.
  const struct IoxAttribute *required_attributes;
  // How many `required_attributes` there are.
  size_t required_attribute_count;
  // What a send does when a subscriber's queue is full: `IOX_OVERFLOW_DEFAULT` (0;
  // when creating: drop that subscriber's oldest sample; when opening: whatever the
  // service has), `IOX_OVERFLOW_DROP_OLDEST` or `IOX_OVERFLOW_REJECT` (that
  // subscriber does not get the sample; the send says `IOX_STATUS_QUEUE_FULL`). An
  // opener that sets it requires the service to have it.
  uint32_t overflow;
  // The per-sample user header (a camera frame's stamp and size in front of its
  // pixels): `name` NULL (the default) for none; else one value (`slice` false)
  // whose name, size, alignment and `any_bit_pattern` must equal what every other
  // program of the service declares (a Rust program's `.user_header::<H>()`), or
  // the open fails naming both headers.
  struct IoxType user_header;
  // A host tensor service: the payload is a slice of numbers and every sample carries
  // its tensor (element type, shape, strides; see `iox_tensor_publisher_create`).
  // Recorded when creating; an opener that sets it requires it.
  bool tensors;
  // Unix permissions of the service's files when this call creates it (0: the
  // default, 0600, its creator's uid only; e.g. 0660 for its group, 0666 for
  // everyone, within which `access` then decides; bits of 0777 including 0600). Not
  // compared on open.
  uint32_t permissions;
  // Who may publish and who may only subscribe (NULL, the default: no policy, every
  // process the permissions admit may publish). Recorded when this call creates the
  // service, this process's uid its creator; an opener that sets it requires the
  // service to have the same rules. A reader's publisher is refused with
  // `IOX_STATUS_NOT_A_PUBLISHER`, a process the policy does not name is refused at
  // open with `IOX_STATUS_NOT_IN_ACCESS_POLICY`. See `IoxAccessPolicy`.
  const struct IoxAccessPolicy *access;
  // The pages the pool lives on, an `IoxPageSize` (a plain integer here, so that any
  // value C writes is defined; one that is none is `IOX_STATUS_INVALID_ARGUMENT`):
  // `IOX_PAGE_SIZE_BASE` (4 KiB, the default), `IOX_PAGE_SIZE_HUGE_2MIB` or
  // `IOX_PAGE_SIZE_HUGE_1GIB` (reserved huge pages; creating on too few is
  // `IOX_STATUS_NO_HUGE_PAGES`, its message saying how to reserve them), or
  // `IOX_PAGE_SIZE_TRANSPARENT` (best effort). Used only where `page_size_set` is true.
  uint32_t page_size;
  // Whether `page_size` is set (on open: the service must have it then).
  bool page_size_set;
} IoxPubSubOptions;

// A loaned chunk for a host tensor: write `len_bytes` bytes at `data`, then send or
// discard it by `id`.
typedef struct IoxTensorLoan {
  // The tensor's first byte (host memory, aligned for the element type).
  void *data;
  // Bytes loaned (the tensor's span).
  uint64_t len_bytes;
  // What the publisher knows this loan by.
  uint64_t id;
  // The tensor the sample will carry.
  struct IoxTensor tensor;
} IoxTensorLoan;

// A received host tensor: read `len_bytes` bytes at `data` as `tensor` says, then
// release it by `id`.
typedef struct IoxTensorSample {
  // The tensor's first byte (read-only).
  const void *data;
  // Bytes sent (the tensor's span).
  uint64_t len_bytes;
  // What the subscriber knows this sample by.
  uint64_t id;
  // Its tensor (checked against the service and the sample's bytes).
  struct IoxTensor tensor;
} IoxTensorSample;

// One attachment's news from a wait.
typedef struct IoxWaitSetEvent {
  // The attachment (as `iox_waitset_attach_*` returned it).
  uint64_t id;
  // Its descriptor is readable, or its interval ticked.
  bool fired;
  // Its deadline passed with its descriptor unreadable.
  bool missed_deadline;
} IoxWaitSetEvent;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// The default options (key type `u32`, no entries). Does nothing if `options` is NULL.
//
// # Safety
// `options` is NULL or points to writable memory for an `IoxBlackboardOptions`.
void iox_blackboard_options_init(struct IoxBlackboardOptions *options);

// Opens, creates, or opens-or-creates (`mode` as for `iox_pubsub_open`) the blackboard
// `name` with `options`; on success `*out` is the blackboard.
//
// # Safety
// `name` is a NUL-terminated string; `options` points to an `IoxBlackboardOptions`
// whose strings are NULL or NUL-terminated, whose `entries` point to `entry_count`
// entries whose types are as `iox_pubsub_open` reads them and whose `initial` is NULL
// or points to `value.size` bytes of a valid value of that type; `out` points to
// writable memory for a pointer.
enum IoxStatus iox_blackboard_open(const char *name,
                                   uint32_t mode,
                                   const struct IoxBlackboardOptions *options,
                                   struct IoxBlackboard **out);

// Closes this handle of the blackboard. Any thread.
//
// # Safety
// `board` is NULL or a pointer from [`iox_blackboard_open`].
enum IoxStatus iox_blackboard_drop(struct IoxBlackboard *board);

// How many attributes the blackboard's creator recorded: `*count`.
//
// # Safety
// `board` is a pointer from [`iox_blackboard_open`]; `count` points to writable memory
// for a `size_t`.
enum IoxStatus iox_blackboard_attribute_count(struct IoxBlackboard *board, size_t *count);

// Attribute `index` (0 to count - 1, sorted by key) of the blackboard: `*key` and
// `*value` (either out pointer may be NULL), valid until the handle is dropped. An
// index out of range is `IOX_STATUS_INVALID_ARGUMENT`.
//
// # Safety
// `board` is a pointer from [`iox_blackboard_open`]; `key` and `value` are NULL or
// point to writable memory for a pointer.
enum IoxStatus iox_blackboard_attribute(struct IoxBlackboard *board,
                                        size_t index,
                                        const char **key,
                                        const char **value);

// The value of the blackboard's attribute `key`: `*value`, or NULL if it has none;
// valid until the handle is dropped.
//
// # Safety
// `board` is a pointer from [`iox_blackboard_open`]; `key` is a NUL-terminated string;
// `value` points to writable memory for a pointer.
enum IoxStatus iox_blackboard_attribute_get(struct IoxBlackboard *board,
                                            const char *key,
                                            const char **value);

// How many keys the blackboard has: `*count`.
//
// # Safety
// `board` is a pointer from [`iox_blackboard_open`]; `count` points to writable memory
// for a `size_t`.
enum IoxStatus iox_blackboard_key_count(struct IoxBlackboard *board, size_t *count);

// Key `index` (0 to count - 1: the order of their change event ids): `*key` (signed
// keys as their two's complement) and, if `value_size` is not NULL, the size of its
// values in bytes. An index out of range is `IOX_STATUS_INVALID_ARGUMENT`.
//
// # Safety
// `board` is a pointer from [`iox_blackboard_open`]; `key` points to writable memory
// for a `uint64_t`; `value_size` is NULL or points to writable memory for a `uint64_t`.
enum IoxStatus iox_blackboard_key(struct IoxBlackboard *board,
                                  size_t index,
                                  uint64_t *key,
                                  uint64_t *value_size);

// Creates a reader of `board`; `*out` is the reader.
//
// # Safety
// `board` is a pointer from [`iox_blackboard_open`]; `out` points to writable memory
// for a pointer.
enum IoxStatus iox_blackboard_reader_create(struct IoxBlackboard *board,
                                            struct IoxBlackboardReader **out);

// Copies `key`'s latest value into `dst`, which holds `size` bytes (the value's size,
// else `IOX_STATUS_INVALID_ARGUMENT`); `*generation` (if not NULL) is the value's
// generation (1 for the initial value, one more per update).
//
// # Safety
// `reader` is a pointer from [`iox_blackboard_reader_create`]; `dst` points to `size`
// writable bytes; `generation` is NULL or points to writable memory for a `uint64_t`.
enum IoxStatus iox_blackboard_reader_get(struct IoxBlackboardReader *reader,
                                         uint64_t key,
                                         void *dst,
                                         uint64_t size,
                                         uint64_t *generation);

// `key`'s generation now (`*generation`) and whether it changed since this reader last
// read it (`*changed`, if not NULL), without reading the value.
//
// # Safety
// `reader` is a pointer from [`iox_blackboard_reader_create`]; `generation` points to
// writable memory for a `uint64_t`; `changed` is NULL or points to a writable `bool`.
enum IoxStatus iox_blackboard_reader_generation(struct IoxBlackboardReader *reader,
                                                uint64_t key,
                                                uint64_t *generation,
                                                bool *changed);

// Drops the reader (from its own thread).
//
// # Safety
// `reader` is NULL or a pointer from [`iox_blackboard_reader_create`].
enum IoxStatus iox_blackboard_reader_drop(struct IoxBlackboardReader *reader);

// Creates a writer of `board` (at most `max_writers`); `*out` is the writer.
//
// # Safety
// `board` is a pointer from [`iox_blackboard_open`]; `out` points to writable memory
// for a pointer.
enum IoxStatus iox_blackboard_writer_create(struct IoxBlackboard *board,
                                            struct IoxBlackboardWriter **out);

// Sets `key`'s value to the `size` bytes at `src` (the value's size, else
// `IOX_STATUS_INVALID_ARGUMENT`) and notifies its change listeners; `*generation` (if
// not NULL) is the generation published.
//
// # Safety
// `writer` is a pointer from [`iox_blackboard_writer_create`]; `src` points to `size`
// readable bytes that are a valid value of the key's type; `generation` is NULL or
// points to writable memory for a `uint64_t`.
enum IoxStatus iox_blackboard_writer_update(struct IoxBlackboardWriter *writer,
                                            uint64_t key,
                                            const void *src,
                                            uint64_t size,
                                            uint64_t *generation);

// Drops the writer (from its own thread).
//
// # Safety
// `writer` is NULL or a pointer from [`iox_blackboard_writer_create`].
enum IoxStatus iox_blackboard_writer_drop(struct IoxBlackboardWriter *writer);

// Creates a listener of the blackboard's changes (event id `i` when the `i`-th key of
// [`iox_blackboard_key`] is updated); `*out` is an `IoxListener` (`iox_listener_wait`,
// `iox_listener_fd`, the WaitSet; `iox_listener_drop`).
//
// # Safety
// `board` is a pointer from [`iox_blackboard_open`]; `out` points to writable memory
// for a pointer.
enum IoxStatus iox_blackboard_listener_create(struct IoxBlackboard *board,
                                              struct IoxListener **out);

// Creates a device publisher of `service` (a `CudaDevice` service); `*out` is the
// publisher. Fails (`IOX_STATUS_PORT_CREATE_FAILED`) where this process has no CUDA
// driver or not the service's GPU, naming it.
//
// # Safety
// `service` is a pointer from `iox_pubsub_open`; `out` points to writable memory for
// a pointer.
enum IoxStatus iox_device_publisher_create(struct IoxPubSubService *service,
                                           struct IoxDevicePublisher **out);

// The service's element type (`IOX_ELEMENT_NONE`: not a slice of numbers), its
// largest sample in bytes and this process's ordinal of its GPU (each out pointer may
// be NULL).
//
// # Safety
// `publisher` is a pointer from [`iox_device_publisher_create`]; the others are NULL
// or writable.
enum IoxStatus iox_device_publisher_info(struct IoxDevicePublisher *publisher,
                                         enum IoxElement *element,
                                         uint64_t *max_bytes,
                                         int32_t *device);

// Loans a chunk for `tensor` on `stream` (see the module docs); `*loan` is filled.
//
// # Safety
// `publisher` is a pointer from [`iox_device_publisher_create`]; `tensor` points to a
// readable `IoxTensor`; `stream` is as the module docs say; `loan` points to writable
// memory for an `IoxDeviceLoan`.
enum IoxStatus iox_device_publisher_loan(struct IoxDevicePublisher *publisher,
                                         void *stream,
                                         const struct IoxTensor *tensor,
                                         struct IoxDeviceLoan *loan);

// Loans a chunk for `len_bytes` bytes on `stream`: a 1-D tensor of the service's
// element type (`len_bytes` a multiple of its size); `*loan` is filled.
//
// # Safety
// As [`iox_device_publisher_loan`], without `tensor`.
enum IoxStatus iox_device_publisher_loan_bytes(struct IoxDevicePublisher *publisher,
                                               void *stream,
                                               uint64_t len_bytes,
                                               struct IoxDeviceLoan *loan);

// Records the end of the writes on `stream` and sends loan `id`; `*delivered` (if not
// NULL) is how many subscribers got it. The id is stale afterwards.
//
// # Safety
// `publisher` is a pointer from [`iox_device_publisher_create`]; `stream` as the
// module docs say; `delivered` NULL or writable.
enum IoxStatus iox_device_publisher_send(struct IoxDevicePublisher *publisher,
                                         uint64_t id,
                                         void *stream,
                                         uint64_t *delivered);

// Gives loan `id` back unsent (work still writing it must be done, or ordered before
// the chunk's next loan, by the caller). The id is stale afterwards.
//
// # Safety
// `publisher` is a pointer from [`iox_device_publisher_create`].
enum IoxStatus iox_device_publisher_discard(struct IoxDevicePublisher *publisher, uint64_t id);

// Waits up to `timeout_ns` until `n` subscribers are connected; `*connected` (if not
// NULL) is how many are.
//
// # Safety
// `publisher` is a pointer from [`iox_device_publisher_create`]; `connected` NULL or
// writable.
enum IoxStatus iox_device_publisher_wait_for_subscribers(struct IoxDevicePublisher *publisher,
                                                         uint64_t n,
                                                         uint64_t timeout_ns,
                                                         uint64_t *connected);

// Drops the publisher and discards its loans (from its own thread).
//
// # Safety
// `publisher` is NULL or a pointer from [`iox_device_publisher_create`].
enum IoxStatus iox_device_publisher_drop(struct IoxDevicePublisher *publisher);

// Creates a device subscriber of `service` (a `CudaDevice` service); `*out` is the
// subscriber.
//
// # Safety
// `service` is a pointer from `iox_pubsub_open`; `out` points to writable memory for
// a pointer.
enum IoxStatus iox_device_subscriber_create(struct IoxPubSubService *service,
                                            struct IoxDeviceSubscriber **out);

// Receives the next sample, waiting up to `timeout_ns` (0: do not wait) without
// spinning; `*received` says whether `*sample` was filled.
//
// # Safety
// `subscriber` is a pointer from [`iox_device_subscriber_create`]; `sample` and
// `received` point to writable memory for an `IoxDeviceSample` and a `bool`.
enum IoxStatus iox_device_subscriber_receive(struct IoxDeviceSubscriber *subscriber,
                                             uint64_t timeout_ns,
                                             struct IoxDeviceSample *sample,
                                             bool *received);

// Makes `stream` wait for the publisher's write of sample `id`: work enqueued on it
// afterwards may read the sample.
//
// # Safety
// `subscriber` is a pointer from [`iox_device_subscriber_create`]; `stream` as the
// module docs say.
enum IoxStatus iox_device_subscriber_wait(struct IoxDeviceSubscriber *subscriber,
                                          uint64_t id,
                                          void *stream);

// Releases sample `id`, recording the end of its reads on the stream it was last
// waited on (nothing if it never was: it was not read on the GPU). The id is stale
// afterwards.
//
// # Safety
// `subscriber` is a pointer from [`iox_device_subscriber_create`].
enum IoxStatus iox_device_subscriber_release(struct IoxDeviceSubscriber *subscriber, uint64_t id);

// Releases sample `id` after the reads enqueued on `stream`. The id is stale
// afterwards (also when the driver refused the record: the sample is released).
//
// # Safety
// `subscriber` is a pointer from [`iox_device_subscriber_create`]; `stream` as the
// module docs say.
enum IoxStatus iox_device_subscriber_release_on(struct IoxDeviceSubscriber *subscriber,
                                                uint64_t id,
                                                void *stream);

// Drops the subscriber and releases its samples (from its own thread).
//
// # Safety
// `subscriber` is NULL or a pointer from [`iox_device_subscriber_create`].
enum IoxStatus iox_device_subscriber_drop(struct IoxDeviceSubscriber *subscriber);

// The default options. Does nothing if `options` is NULL.
//
// # Safety
// `options` is NULL or points to writable memory for an `IoxEventOptions`.
void iox_event_options_init(struct IoxEventOptions *options);

// Opens, creates, or opens-or-creates (`mode` as for `iox_pubsub_open`) the event
// service `name`; on success `*out` is the service.
//
// # Safety
// `name` is a NUL-terminated string; `options` points to an `IoxEventOptions` whose
// `root` is NULL or NUL-terminated; `out` points to writable memory for a pointer.
enum IoxStatus iox_event_open(const char *name,
                              uint32_t mode,
                              const struct IoxEventOptions *options,
                              struct IoxEventService **out);

// Closes this handle of the event service. Any thread.
//
// # Safety
// `service` is NULL or a pointer from [`iox_event_open`].
enum IoxStatus iox_event_service_drop(struct IoxEventService *service);

// How many attributes the event service's creator recorded: `*count`.
//
// # Safety
// `service` is a pointer from [`iox_event_open`]; `count` points to writable memory for a
// `size_t`.
enum IoxStatus iox_event_attribute_count(struct IoxEventService *service, size_t *count);

// Attribute `index` (0 to count - 1, sorted by key) of the event service: `*key` and
// `*value` (either out pointer may be NULL). The strings stay valid until the service
// handle is dropped. An index out of range is `IOX_STATUS_INVALID_ARGUMENT`.
//
// # Safety
// `service` is a pointer from [`iox_event_open`]; `key` and `value` are NULL or point to
// writable memory for a pointer.
enum IoxStatus iox_event_attribute(struct IoxEventService *service,
                                   size_t index,
                                   const char **key,
                                   const char **value);

// The value of the event service's attribute `key`: `*value`, or NULL if it has none.
// The string stays valid until the service handle is dropped.
//
// # Safety
// `service` is a pointer from [`iox_event_open`]; `key` is a NUL-terminated string;
// `value` points to writable memory for a pointer.
enum IoxStatus iox_event_attribute_get(struct IoxEventService *service,
                                       const char *key,
                                       const char **value);

// Creates a notifier of `service`; `*out` is the notifier.
//
// # Safety
// `service` is a pointer from [`iox_event_open`]; `out` points to writable memory for
// a pointer.
enum IoxStatus iox_notifier_create(struct IoxEventService *service, struct IoxNotifier **out);

// Signals event `event_id` to every listener; `*listeners` (if not NULL) is how many
// it reached.
//
// # Safety
// `notifier` is a pointer from [`iox_notifier_create`]; `listeners` is NULL or points
// to writable memory for a `uint64_t`.
enum IoxStatus iox_notifier_notify(struct IoxNotifier *notifier,
                                   uint32_t event_id,
                                   uint64_t *listeners);

// Drops the notifier (from its own thread).
//
// # Safety
// `notifier` is NULL or a pointer from [`iox_notifier_create`].
enum IoxStatus iox_notifier_drop(struct IoxNotifier *notifier);

// Creates a listener of `service`; `*out` is the listener.
//
// # Safety
// `service` is a pointer from [`iox_event_open`]; `out` points to writable memory for
// a pointer.
enum IoxStatus iox_listener_create(struct IoxEventService *service, struct IoxListener **out);

// Takes one pending event id, waiting up to `timeout_ns` nanoseconds (0: do not wait)
// without spinning. `*got` says whether `*event_id` was set.
//
// # Safety
// `listener` is a pointer from [`iox_listener_create`]; `event_id` and `got` point to
// writable memory for a `uint32_t` and a `bool`.
enum IoxStatus iox_listener_wait(struct IoxListener *listener,
                                 uint64_t timeout_ns,
                                 uint32_t *event_id,
                                 bool *got);

// The listener's readiness descriptor: readable while an event id is pending, for
// `poll`/`epoll` or an `IoxWaitSet`. Owned by the listener (do not close it); valid
// until the listener is dropped.
//
// # Safety
// `listener` is a pointer from [`iox_listener_create`]; `fd` points to writable memory
// for an `int`.
enum IoxStatus iox_listener_fd(struct IoxListener *listener, int32_t *fd);

// Drops the listener (from its own thread).
//
// # Safety
// `listener` is NULL or a pointer from [`iox_listener_create`].
enum IoxStatus iox_listener_drop(struct IoxListener *listener);

// Loans a chunk for `len_bytes` bytes (as `iox_publisher_loan`) into `*loan`, which
// must not hold a loan.
//
// # Safety
// `publisher` is a pointer from `iox_publisher_create`; `loan` points to writable
// memory for an `IoxHeldLoan`.
enum IoxStatus iox_publisher_loan_held(struct IoxPublisher *publisher,
                                       uint64_t len_bytes,
                                       struct IoxHeldLoan *loan);

// The device address of the held loan's payload (as `iox_publisher_device_ptr`): for a
// loan of a publisher that pinned a `CudaPinned` pool, where a kernel writes it.
// `IOX_STATUS_NO_DEVICE_POINTER` if it did not pin, or its pinner gives none.
//
// # Safety
// `loan` is NULL (refused) or points to an `IoxHeldLoan` (see the module docs);
// `device_ptr` points to writable memory for a `uint64_t`.
enum IoxStatus iox_held_loan_device_ptr(const struct IoxHeldLoan *loan, uint64_t *device_ptr);

// Sends the loan in `*loan` (as `iox_publisher_send`); `*delivered` (if not NULL) is
// how many subscribers got it. The struct is spent afterwards, whether the send
// succeeded or not, unless the call was refused before the send: NULL, a struct that
// is not live (`IOX_STATUS_STALE_HANDLE`), or a call from another thread than the
// loaning one (`IOX_STATUS_WRONG_THREAD`: the loan stays, for that thread).
//
// # Safety
// `loan` was filled by [`iox_publisher_loan_held`] (or is spent: refused); all of its
// `len_bytes` bytes were written with a valid value of the service's type, and all of
// its `header_len` header bytes with a valid value of the header's type;
// `delivered` is NULL or points to writable memory for a `uint64_t`.
enum IoxStatus iox_held_loan_send(struct IoxHeldLoan *loan, uint64_t *delivered);

// Gives the loan in `*loan` back unsent; the struct is spent afterwards (refusals as
// [`iox_held_loan_send`]).
//
// # Safety
// As [`iox_held_loan_send`].
enum IoxStatus iox_held_loan_discard(struct IoxHeldLoan *loan);

// Receives the next sample (as `iox_subscriber_receive`) into `*sample`, which must
// not hold one; `*received` says whether it was filled.
//
// # Safety
// `subscriber` is a pointer from `iox_subscriber_create`; `sample` and `received`
// point to writable memory for an `IoxHeldSample` and a `bool`.
enum IoxStatus iox_subscriber_receive_held(struct IoxSubscriber *subscriber,
                                           uint64_t timeout_ns,
                                           struct IoxHeldSample *sample,
                                           bool *received);

// Releases the sample in `*sample` (its chunk returns to the pool once no one else
// holds it); the struct is spent afterwards. Works after its subscriber was dropped.
//
// # Safety
// `sample` is NULL (refused) or points to an `IoxHeldSample` filled by
// [`iox_subscriber_receive_held`] (or spent: refused), used by one thread at a time.
enum IoxStatus iox_held_sample_release(struct IoxHeldSample *sample);

// The device address of the held sample's payload (as `iox_subscriber_device_ptr`):
// for a sample of a subscriber that pinned a `CudaPinned` pool.
// `IOX_STATUS_NO_DEVICE_POINTER` if it did not pin, or its pinner gives none.
//
// # Safety
// `sample` is NULL (refused) or points to an `IoxHeldSample` (see
// [`iox_held_sample_release`]); `device_ptr` points to writable memory for a
// `uint64_t`.
enum IoxStatus iox_held_sample_device_ptr(const struct IoxHeldSample *sample, uint64_t *device_ptr);

// Creates a publisher of `service` (pinning its pool once if `pin_memory`); `*out` is
// the publisher, usable from this thread only.
//
// # Safety
// `service` is a pointer from `iox_pubsub_open` (checked as far as the crate docs
// say); `out` points to writable memory for a pointer.
enum IoxStatus iox_publisher_create(struct IoxPubSubService *service,
                                    bool pin_memory,
                                    struct IoxPublisher **out);

// Loans a chunk for `len_bytes` bytes: the type's size for a value, a multiple of the
// element size for a slice. `*loan` is filled on success. The bytes are not
// initialised: write all of them, and the user header's (`loan->header`, if the
// service has one), before sending.
//
// # Safety
// `publisher` is a pointer from [`iox_publisher_create`]; `loan` points to writable
// memory for an `IoxLoan`.
enum IoxStatus iox_publisher_loan(struct IoxPublisher *publisher,
                                  uint64_t len_bytes,
                                  struct IoxLoan *loan);

// Sends the loan `id` to every connected subscriber; `*delivered` (if not NULL) is how
// many got it. The id is stale afterwards, whether the send succeeded or not.
//
// # Safety
// `publisher` is a pointer from [`iox_publisher_create`]; all of the loan's
// `len_bytes` bytes were written with a valid value of the service's type, and all
// of its `header_len` header bytes with a valid value of the header's type;
// `delivered` is NULL or points to writable memory for a `uint64_t`.
enum IoxStatus iox_publisher_send(struct IoxPublisher *publisher, uint64_t id, uint64_t *delivered);

// Gives the loan `id` back unsent. The id is stale afterwards.
//
// # Safety
// `publisher` is a pointer from [`iox_publisher_create`].
enum IoxStatus iox_publisher_discard(struct IoxPublisher *publisher, uint64_t id);

// The device address of loan `id`'s payload, for a publisher that pinned a
// `CudaPinned` pool (`pin_memory`): where a kernel writes it, with no copy (finish
// that work before sending). `IOX_STATUS_NO_DEVICE_POINTER` if the publisher did not
// pin, or its pinner gives none.
//
// # Safety
// `publisher` is a pointer from [`iox_publisher_create`]; `device_ptr` points to
// writable memory for a `uint64_t`.
enum IoxStatus iox_publisher_device_ptr(struct IoxPublisher *publisher,
                                        uint64_t id,
                                        uint64_t *device_ptr);

// The publisher's view of the pool (see `IoxPoolInfo`).
//
// # Safety
// `publisher` is a pointer from [`iox_publisher_create`]; `info` points to writable
// memory for an `IoxPoolInfo`.
enum IoxStatus iox_publisher_pool_info(struct IoxPublisher *publisher, struct IoxPoolInfo *info);

// Drops the publisher and every loan it still holds (from its own thread).
//
// # Safety
// `publisher` is NULL or a pointer from [`iox_publisher_create`].
enum IoxStatus iox_publisher_drop(struct IoxPublisher *publisher);

// The default options (no types yet). Does nothing if `options` is NULL.
//
// # Safety
// `options` is NULL or points to writable memory for an `IoxRequestResponseOptions`.
void iox_request_response_options_init(struct IoxRequestResponseOptions *options);

// Opens, creates, or opens-or-creates (`mode` as for `iox_pubsub_open`) the
// request-response service `name`; on success `*out` is the service.
//
// # Safety
// `name` is a NUL-terminated string; `options` points to an
// `IoxRequestResponseOptions` whose strings are NULL or NUL-terminated and whose types'
// `fields` are as `iox_pubsub_open` requires; `out` points to writable memory for a
// pointer.
enum IoxStatus iox_request_response_open(const char *name,
                                         uint32_t mode,
                                         const struct IoxRequestResponseOptions *options,
                                         struct IoxRequestResponseService **out);

// Closes this handle of the service. Any thread.
//
// # Safety
// `service` is NULL or a pointer from [`iox_request_response_open`].
enum IoxStatus iox_request_response_service_drop(struct IoxRequestResponseService *service);

// How many attributes the request-response service's creator recorded: `*count`.
//
// # Safety
// `service` is a pointer from [`iox_request_response_open`]; `count` points to writable memory for a
// `size_t`.
enum IoxStatus iox_request_response_attribute_count(struct IoxRequestResponseService *service,
                                                    size_t *count);

// Attribute `index` (0 to count - 1, sorted by key) of the request-response service: `*key` and
// `*value` (either out pointer may be NULL). The strings stay valid until the service
// handle is dropped. An index out of range is `IOX_STATUS_INVALID_ARGUMENT`.
//
// # Safety
// `service` is a pointer from [`iox_request_response_open`]; `key` and `value` are NULL or point to
// writable memory for a pointer.
enum IoxStatus iox_request_response_attribute(struct IoxRequestResponseService *service,
                                              size_t index,
                                              const char **key,
                                              const char **value);

// The value of the request-response service's attribute `key`: `*value`, or NULL if it has none.
// The string stays valid until the service handle is dropped.
//
// # Safety
// `service` is a pointer from [`iox_request_response_open`]; `key` is a NUL-terminated string;
// `value` points to writable memory for a pointer.
enum IoxStatus iox_request_response_attribute_get(struct IoxRequestResponseService *service,
                                                  const char *key,
                                                  const char **value);

// Creates a client of `service`; `*out` is the client.
//
// # Safety
// `service` is a pointer from [`iox_request_response_open`]; `out` points to writable
// memory for a pointer.
enum IoxStatus iox_client_create(struct IoxRequestResponseService *service,
                                 bool pin_memory,
                                 struct IoxClient **out);

// Loans a request of `len_bytes` bytes (the request type's size, or a whole number of
// its elements for a slice); `*loan` is filled. Write all of it before sending.
//
// # Safety
// `client` is a pointer from [`iox_client_create`]; `loan` points to writable memory
// for an `IoxLoan`.
enum IoxStatus iox_client_loan(struct IoxClient *client, uint64_t len_bytes, struct IoxLoan *loan);

// Sends the request loan `id` to one server; `*pending` names its stream of
// responses: receive them with [`iox_client_receive`], and drop it with
// [`iox_client_drop_pending`] once done (its request slot stays taken until then; a
// client has `max_active_requests_per_client` of them). The loan id is stale
// afterwards, whether the send succeeded or not.
//
// # Safety
// `client` is a pointer from [`iox_client_create`]; the loan's bytes were all written
// with a valid value of the request type; `pending` points to writable memory for a
// `uint64_t`.
enum IoxStatus iox_client_send(struct IoxClient *client, uint64_t id, uint64_t *pending);

// Gives the request loan `id` back unsent.
//
// # Safety
// `client` is a pointer from [`iox_client_create`].
enum IoxStatus iox_client_discard(struct IoxClient *client, uint64_t id);

// Receives the next response of the request `pending`, waiting up to `timeout_ns`
// (0: do not wait) without spinning. `*got` says whether `*response` was filled
// (release it with [`iox_client_release`]); `*finished` (if not NULL) whether the
// stream has ended (the server finished the request, or is gone; written also when
// the call fails because the server is gone): then no response will come any more.
//
// # Safety
// `client` is a pointer from [`iox_client_create`]; `response` and `got` point to
// writable memory for an `IoxSample` and a `bool`; `finished` is NULL or points to
// writable memory for a `bool`.
enum IoxStatus iox_client_receive(struct IoxClient *client,
                                  uint64_t pending,
                                  uint64_t timeout_ns,
                                  struct IoxSample *response,
                                  bool *got,
                                  bool *finished);

// Releases the response `id`.
//
// # Safety
// `client` is a pointer from [`iox_client_create`].
enum IoxStatus iox_client_release(struct IoxClient *client, uint64_t id);

// Drops the pending response `pending`: its request is abandoned if its stream has
// not ended (responses still coming are released), and its request slot is free for
// another request.
//
// # Safety
// `client` is a pointer from [`iox_client_create`].
enum IoxStatus iox_client_drop_pending(struct IoxClient *client, uint64_t pending);

// The client's readiness descriptor: readable when a response (or the end of a
// stream) may have arrived. Owned by the client; valid until it is dropped.
//
// # Safety
// `client` is a pointer from [`iox_client_create`]; `fd` points to writable memory
// for an `int`.
enum IoxStatus iox_client_fd(struct IoxClient *client, int32_t *fd);

// Drops the client with its loans, pending responses and responses.
//
// # Safety
// `client` is NULL or a pointer from [`iox_client_create`].
enum IoxStatus iox_client_drop(struct IoxClient *client);

// Creates a server of `service`; `*out` is the server.
//
// # Safety
// `service` is a pointer from [`iox_request_response_open`]; `out` points to writable
// memory for a pointer.
enum IoxStatus iox_server_create(struct IoxRequestResponseService *service,
                                 bool pin_memory,
                                 struct IoxServer **out);

// Takes the next request, waiting up to `timeout_ns` (0: do not wait) without
// spinning. `*got` says whether `*request` was filled; its `id` names the active
// request: respond with [`iox_server_loan`] / [`iox_server_send`], end the stream
// with [`iox_server_finish`].
//
// # Safety
// `server` is a pointer from [`iox_server_create`]; `request` and `got` point to
// writable memory for an `IoxSample` and a `bool`.
enum IoxStatus iox_server_receive(struct IoxServer *server,
                                  uint64_t timeout_ns,
                                  struct IoxSample *request,
                                  bool *got);

// Loans a response of `len_bytes` bytes to the active request `request`; `*loan` is
// filled. Write all of it before sending.
//
// # Safety
// `server` is a pointer from [`iox_server_create`]; `loan` points to writable memory
// for an `IoxLoan`.
enum IoxStatus iox_server_loan(struct IoxServer *server,
                               uint64_t request,
                               uint64_t len_bytes,
                               struct IoxLoan *loan);

// Sends the response loan `id` to the client of its request. While the client's
// response buffer (`max_response_buffer`) is full, this waits for the client to take
// responses (sleeping in steps, watching that the client lives): a program that is
// its own client must receive before it sends more than that. The loan id is stale
// afterwards, whether the send succeeded or not.
//
// # Safety
// `server` is a pointer from [`iox_server_create`]; the loan's bytes were all written
// with a valid value of the response type.
enum IoxStatus iox_server_send(struct IoxServer *server, uint64_t id);

// Gives the response loan `id` back unsent.
//
// # Safety
// `server` is a pointer from [`iox_server_create`].
enum IoxStatus iox_server_discard(struct IoxServer *server, uint64_t id);

// Ends the active request `request`: its unsent response loans are discarded, and
// the client's stream ends after the responses sent.
//
// # Safety
// `server` is a pointer from [`iox_server_create`].
enum IoxStatus iox_server_finish(struct IoxServer *server, uint64_t request);

// The server's readiness descriptor: readable when a request waits. Owned by the
// server; valid until it is dropped.
//
// # Safety
// `server` is a pointer from [`iox_server_create`]; `fd` points to writable memory
// for an `int`.
enum IoxStatus iox_server_fd(struct IoxServer *server, int32_t *fd);

// Drops the server, finishing its active requests and discarding its loans.
//
// # Safety
// `server` is NULL or a pointer from [`iox_server_create`].
enum IoxStatus iox_server_drop(struct IoxServer *server);

// The default options: no type yet (`payload.name` NULL), everything else the service's
// defaults. Does nothing if `options` is NULL.
//
// # Safety
// `options` is NULL or points to writable memory for an `IoxPubSubOptions`.
void iox_pubsub_options_init(struct IoxPubSubOptions *options);

// Opens, creates, or opens-or-creates (`mode`: `IOX_OPEN_OR_CREATE`, `IOX_OPEN`,
// `IOX_CREATE`) the publish-subscribe service `name` with `options`; on success
// `*out` is the service. On failure `*out` is untouched and [`crate::status::iox_last_error`]
// says why (e.g. that an existing service records another type, naming both).
//
// # Safety
// `name` is a NUL-terminated string; `options` points to an `IoxPubSubOptions` whose
// strings are NULL or NUL-terminated, whose types' `fields` are NULL or
// `field_count` readable `IoxField`s (strings NUL-terminated, `nested` NULL or
// readable types of the same kind), whose attribute arrays hold their counts, and
// whose `access` is NULL or a readable `IoxAccessPolicy` whose arrays hold their
// counts; `out` points to writable memory for a pointer.
enum IoxStatus iox_pubsub_open(const char *name,
                               uint32_t mode,
                               const struct IoxPubSubOptions *options,
                               struct IoxPubSubService **out);

// Closes this handle of the service (the service's files go when its last handle and
// port anywhere are gone). Any thread.
//
// # Safety
// `service` is NULL or a pointer from [`iox_pubsub_open`] (checked as far as the crate
// docs say).
enum IoxStatus iox_pubsub_service_drop(struct IoxPubSubService *service);

// How many publishers and subscribers the service has now, in any process (a
// snapshot): what a program polls, bounded in time, to wait for the other side.
// Either out pointer may be NULL.
//
// # Safety
// `service` is a pointer from [`iox_pubsub_open`]; `publishers` and `subscribers` are
// NULL or point to writable memory for a `uint64_t`.
enum IoxStatus iox_pubsub_port_counts(struct IoxPubSubService *service,
                                      uint64_t *publishers,
                                      uint64_t *subscribers);

// How many attributes the publish-subscribe service's creator recorded: `*count`.
//
// # Safety
// `service` is a pointer from [`iox_pubsub_open`]; `count` points to writable memory for a
// `size_t`.
enum IoxStatus iox_pubsub_attribute_count(struct IoxPubSubService *service, size_t *count);

// Attribute `index` (0 to count - 1, sorted by key) of the publish-subscribe service: `*key` and
// `*value` (either out pointer may be NULL). The strings stay valid until the service
// handle is dropped. An index out of range is `IOX_STATUS_INVALID_ARGUMENT`.
//
// # Safety
// `service` is a pointer from [`iox_pubsub_open`]; `key` and `value` are NULL or point to
// writable memory for a pointer.
enum IoxStatus iox_pubsub_attribute(struct IoxPubSubService *service,
                                    size_t index,
                                    const char **key,
                                    const char **value);

// The value of the publish-subscribe service's attribute `key`: `*value`, or NULL if it has none.
// The string stays valid until the service handle is dropped.
//
// # Safety
// `service` is a pointer from [`iox_pubsub_open`]; `key` is a NUL-terminated string;
// `value` points to writable memory for a pointer.
enum IoxStatus iox_pubsub_attribute_get(struct IoxPubSubService *service,
                                        const char *key,
                                        const char **value);

// The publish-subscribe service's access policy as text: `*policy` is NULL for a service
// without one, else e.g. `"publish: uid 1000 (creator), uid 1001; read: uid 1002, gid
// 50"`. The string stays valid until the service handle is dropped.
//
// # Safety
// `service` is a pointer from `iox_pubsub_open`; `policy` points to writable memory for
// a pointer.
enum IoxStatus iox_pubsub_access_policy(struct IoxPubSubService *service, const char **policy);

// The message of this thread's last failed call ("" if none failed yet). The text
// stays valid until the next failing call on this thread; copy it to keep it.
const char *iox_last_error(void);

// A short, constant name of a status value (e.g. `"IOX_STATUS_STALE_HANDLE"`), for
// logs; `"IOX_STATUS_UNKNOWN"` for a value that is none. Takes the plain integer, so
// any value a C caller passes is defined.
const char *iox_status_name(int32_t status);

// Creates a subscriber of `service` (pinning its pool once if `pin_memory`); `*out` is
// the subscriber, usable from this thread only.
//
// # Safety
// `service` is a pointer from `iox_pubsub_open`; `out` points to writable memory for a
// pointer.
enum IoxStatus iox_subscriber_create(struct IoxPubSubService *service,
                                     bool pin_memory,
                                     struct IoxSubscriber **out);

// Receives the next sample, waiting up to `timeout_ns` nanoseconds (0: do not wait)
// without spinning. `*received` says whether `*sample` was filled.
//
// # Safety
// `subscriber` is a pointer from [`iox_subscriber_create`]; `sample` and `received`
// point to writable memory for an `IoxSample` and a `bool`.
enum IoxStatus iox_subscriber_receive(struct IoxSubscriber *subscriber,
                                      uint64_t timeout_ns,
                                      struct IoxSample *sample,
                                      bool *received);

// Releases the sample `id` (its chunk returns to the pool once no one else holds it).
// The id is stale afterwards.
//
// # Safety
// `subscriber` is a pointer from [`iox_subscriber_create`].
enum IoxStatus iox_subscriber_release(struct IoxSubscriber *subscriber, uint64_t id);

// The subscriber's view of the pool (see `IoxPoolInfo`).
//
// # Safety
// `subscriber` is a pointer from [`iox_subscriber_create`]; `info` points to writable
// memory for an `IoxPoolInfo`.
enum IoxStatus iox_subscriber_pool_info(struct IoxSubscriber *subscriber, struct IoxPoolInfo *info);

// The device address of sample `id`'s payload, for a subscriber that pinned a
// `CudaPinned` pool (`pin_memory`): what a kernel reads it through, with no copy.
// `IOX_STATUS_NO_DEVICE_POINTER` if the subscriber did not pin, or its pinner gives
// none.
//
// # Safety
// `subscriber` is a pointer from [`iox_subscriber_create`]; `device_ptr` points to
// writable memory for a `uint64_t`.
enum IoxStatus iox_subscriber_device_ptr(struct IoxSubscriber *subscriber,
                                         uint64_t id,
                                         uint64_t *device_ptr);

// The subscriber's readiness descriptor, for `poll`/`epoll` or an `IoxWaitSet`: it
// becomes readable when a sample arrives; receive until none is left, then wait
// again. Owned by the subscriber (do not close it); valid until it is dropped.
//
// # Safety
// `subscriber` is a pointer from [`iox_subscriber_create`]; `fd` points to writable
// memory for an `int`.
enum IoxStatus iox_subscriber_fd(struct IoxSubscriber *subscriber, int32_t *fd);

// Drops the subscriber and releases every sample it still holds (from its own thread).
//
// # Safety
// `subscriber` is NULL or a pointer from [`iox_subscriber_create`].
enum IoxStatus iox_subscriber_drop(struct IoxSubscriber *subscriber);

// Creates a tensor publisher of `service` (a host tensor service: `tensors` set when
// it was created); `*out` is the publisher. Another service is
// `IOX_STATUS_PORT_CREATE_FAILED`, saying why.
//
// # Safety
// `service` is a pointer from `iox_pubsub_open`; `out` points to writable memory for
// a pointer.
enum IoxStatus iox_tensor_publisher_create(struct IoxPubSubService *service,
                                           struct IoxTensorPublisher **out);

// The service's element type and its largest tensor in bytes (each out pointer may be
// NULL).
//
// # Safety
// `publisher` is a pointer from [`iox_tensor_publisher_create`]; the others are NULL
// or writable.
enum IoxStatus iox_tensor_publisher_info(struct IoxTensorPublisher *publisher,
                                         enum IoxElement *element,
                                         uint64_t *max_bytes);

// Loans a chunk for `tensor`; `*loan` is filled. Write all of its `len_bytes` bytes
// before sending it.
//
// # Safety
// `publisher` is a pointer from [`iox_tensor_publisher_create`]; `tensor` points to a
// readable `IoxTensor`; `loan` points to writable memory for an `IoxTensorLoan`.
enum IoxStatus iox_tensor_publisher_loan(struct IoxTensorPublisher *publisher,
                                         const struct IoxTensor *tensor,
                                         struct IoxTensorLoan *loan);

// Sends loan `id`, every one of whose bytes the caller wrote; `*delivered` (if not
// NULL) is how many subscribers got it. The id is stale afterwards.
//
// # Safety
// `publisher` is a pointer from [`iox_tensor_publisher_create`]; all `len_bytes`
// bytes of the loan were written; `delivered` NULL or writable.
enum IoxStatus iox_tensor_publisher_send(struct IoxTensorPublisher *publisher,
                                         uint64_t id,
                                         uint64_t *delivered);

// Gives loan `id` back unsent. The id is stale afterwards.
//
// # Safety
// `publisher` is a pointer from [`iox_tensor_publisher_create`].
enum IoxStatus iox_tensor_publisher_discard(struct IoxTensorPublisher *publisher, uint64_t id);

// Waits up to `timeout_ns` until `n` subscribers are connected; `*connected` (if not
// NULL) is how many are.
//
// # Safety
// `publisher` is a pointer from [`iox_tensor_publisher_create`]; `connected` NULL or
// writable.
enum IoxStatus iox_tensor_publisher_wait_for_subscribers(struct IoxTensorPublisher *publisher,
                                                         uint64_t n,
                                                         uint64_t timeout_ns,
                                                         uint64_t *connected);

// Drops the publisher and discards its loans (from its own thread).
//
// # Safety
// `publisher` is NULL or a pointer from [`iox_tensor_publisher_create`].
enum IoxStatus iox_tensor_publisher_drop(struct IoxTensorPublisher *publisher);

// Creates a tensor subscriber of `service` (a host tensor service); `*out` is the
// subscriber.
//
// # Safety
// `service` is a pointer from `iox_pubsub_open`; `out` points to writable memory for
// a pointer.
enum IoxStatus iox_tensor_subscriber_create(struct IoxPubSubService *service,
                                            struct IoxTensorSubscriber **out);

// Receives the next tensor, waiting up to `timeout_ns` (0: do not wait) without
// spinning; `*received` says whether `*sample` was filled.
//
// # Safety
// `subscriber` is a pointer from [`iox_tensor_subscriber_create`]; `sample` and
// `received` point to writable memory for an `IoxTensorSample` and a `bool`.
enum IoxStatus iox_tensor_subscriber_receive(struct IoxTensorSubscriber *subscriber,
                                             uint64_t timeout_ns,
                                             struct IoxTensorSample *sample,
                                             bool *received);

// Releases sample `id`. The id is stale afterwards.
//
// # Safety
// `subscriber` is a pointer from [`iox_tensor_subscriber_create`].
enum IoxStatus iox_tensor_subscriber_release(struct IoxTensorSubscriber *subscriber, uint64_t id);

// Drops the subscriber and releases its samples (from its own thread).
//
// # Safety
// `subscriber` is NULL or a pointer from [`iox_tensor_subscriber_create`].
enum IoxStatus iox_tensor_subscriber_drop(struct IoxTensorSubscriber *subscriber);

// Creates a WaitSet; with `termination_signals`, SIGINT and SIGTERM end its waits
// with `IOX_WAIT_TERMINATION` (and no longer terminate the process while it lives).
//
// # Safety
// `out` points to writable memory for a pointer.
enum IoxStatus iox_waitset_create(bool termination_signals, struct IoxWaitSet **out);

// Attaches descriptor `fd` (e.g. from `iox_subscriber_fd` or `iox_listener_fd`): a
// wait reports it `fired` while it is readable. With `deadline_ns` not 0, a wait also
// reports `missed_deadline` whenever it stays unreadable that long. `*id` names the
// attachment.
//
// # Safety
// `ws` is a pointer from [`iox_waitset_create`]; `id` points to writable memory for a
// `uint64_t`.
enum IoxStatus iox_waitset_attach_fd(struct IoxWaitSet *ws,
                                     int32_t fd,
                                     uint64_t deadline_ns,
                                     uint64_t *id);

// Attaches an interval: a wait reports it `fired` every `period_ns` nanoseconds, the
// first time one period from now.
//
// # Safety
// `ws` is a pointer from [`iox_waitset_create`]; `id` points to writable memory for a
// `uint64_t`.
enum IoxStatus iox_waitset_attach_interval(struct IoxWaitSet *ws, uint64_t period_ns, uint64_t *id);

// Detaches attachment `id` (closing the WaitSet's copy of its descriptor).
//
// # Safety
// `ws` is a pointer from [`iox_waitset_create`].
enum IoxStatus iox_waitset_detach(struct IoxWaitSet *ws, uint64_t id);

// Waits up to `timeout_ns` nanoseconds (`UINT64_MAX`: without limit, 0: only looks)
// for something to happen, sleeping. `*result` is one of `IOX_WAIT_*`; with
// `IOX_WAIT_EVENTS`, the first `capacity` attachments with news are written to
// `events` and `*count` is how many had news (more than `capacity` means some were
// not written: give room for every attachment to see them all).
//
// # Safety
// `ws` is a pointer from [`iox_waitset_create`]; `events` points to writable memory
// for `capacity` `IoxWaitSetEvent`s (or is NULL with `capacity` 0); `count` and
// `result` point to writable memory for a `size_t` and a `uint32_t`.
enum IoxStatus iox_waitset_wait(struct IoxWaitSet *ws,
                                uint64_t timeout_ns,
                                struct IoxWaitSetEvent *events,
                                size_t capacity,
                                size_t *count,
                                uint32_t *result);

// A waker of `ws`, for other threads: [`iox_waker_wake`] ends its current or next
// wait with `IOX_WAIT_INTERRUPT`. It may outlive the WaitSet (waking nothing then).
//
// # Safety
// `ws` is a pointer from [`iox_waitset_create`]; `out` points to writable memory for a
// pointer.
enum IoxStatus iox_waitset_waker(struct IoxWaitSet *ws, struct IoxWaker **out);

// Wakes the waker's WaitSet. Any thread.
//
// # Safety
// `waker` is a pointer from [`iox_waitset_waker`].
enum IoxStatus iox_waker_wake(struct IoxWaker *waker);

// Drops the waker. Any thread.
//
// # Safety
// `waker` is NULL or a pointer from [`iox_waitset_waker`].
enum IoxStatus iox_waker_drop(struct IoxWaker *waker);

// Drops the WaitSet and its attachments (from its own thread).
//
// # Safety
// `ws` is NULL or a pointer from [`iox_waitset_create`].
enum IoxStatus iox_waitset_drop(struct IoxWaitSet *ws);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* IOX_H */
