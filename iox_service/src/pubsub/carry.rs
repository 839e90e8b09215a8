//! Byte services that carry another payload's identity: language bindings, whose
//! payload types are known only at run time (`raw_payload_type`, `unsafe`: their ports
//! move bytes as that type), and programs that move samples without knowing their
//! type, such as bridges (`carry_payload_type`: only payloads valid for every bit
//! pattern, so no `[u8]` port can make or show an invalid value); with the field
//! layout they record (`payload_schema`).

use crate::{HeaderType, PayloadType, PubSubBuilder, Schema};

impl PubSubBuilder<[u8]> {
    /// Records `payload` in the static config instead of `[u8]` (and checks an existing
    /// service against it): for language bindings, whose payload types are known only
    /// at run time (a numpy dtype and shape). The service is then the one a Rust
    /// program opens with the type `payload` describes, and this side's ports move its
    /// payload as bytes through [`Publisher::loan_raw`](crate::Publisher::loan_raw) and
    /// [`Subscriber::receive_raw`](crate::Subscriber::receive_raw) (see `pubsub::raw`).
    /// A `Typed` payload gets one size class of its size; a `Slice` payload takes its
    /// classes from `size_classes` / `chunk_sizes` (bytes) or `max_slice_len` (elements
    /// of `payload`, as for a Rust `[T]` service).
    ///
    /// # Safety
    /// The ports built from this service must loan only with `loan_raw` and receive
    /// only with `receive_raw` (the other methods record or read lengths in bytes,
    /// not in elements of `payload`), and must read samples only through their
    /// addresses ([`RawSample::as_ptr`](crate::RawSample::as_ptr)), since a payload
    /// written as another type may have padding bytes that are not initialised.
    /// The same holds for a user header recorded with
    /// [`raw_user_header`](Self::raw_user_header) or taken from a config by
    /// [`like_config`](Self::like_config).
    pub unsafe fn raw_payload_type(mut self, payload: PayloadType) -> Self {
        self.payload_override = Some(payload);
        self.carried = false;
        self
    }

    /// Carries the payload as bytes while recording (when creating) and requiring
    /// (when opening) the identity `payload` instead of `[u8]`'s: for programs that move
    /// a service's samples without knowing its type, such as a bridge recreating a
    /// remote service with the exporter's payload type. Give the pool's size classes in
    /// bytes ([`size_classes`](Self::size_classes) or
    /// [`chunk_sizes`](Self::chunk_sizes)); the pool's alignment is at least
    /// `payload`'s. Samples of such a service are read with
    /// [`Sample::payload_bytes`](crate::Sample::payload_bytes) and sent with
    /// [`Publisher::send_payload_bytes`](crate::Publisher::send_payload_bytes), which
    /// count in the recorded type's elements. Typed programs open the service as
    /// usual. Only payloads valid for every bit pattern are carried
    /// ([`PayloadType::any_bit_pattern`](crate::PayloadType::any_bit_pattern)): for
    /// others (padding, a `bool`) `create` and `open` fail with `NotCarriable`
    /// ([`CreateError::NotCarriable`](crate::CreateError::NotCarriable), [`OpenError::NotCarriable`](crate::OpenError::NotCarriable)), since every
    /// `[u8]` port writes or reads bytes (a loan filled with 2 and sent would be an
    /// invalid `bool` for a typed reader; padding read as bytes is uninitialised
    /// memory). The validity is part of the identity a typed program must match, so a
    /// carrier claiming it falsely meets `IncompatiblePayload`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use iox_service::{Payload, Service};
    /// let bytes = Service::named("doc/carry")?.root(dir.path())
    ///     .publish_subscribe::<[u8]>()
    ///     .carry_payload_type(<u64 as Payload>::payload_type())
    ///     .chunk_sizes(&[8])
    ///     .create()?;
    /// let typed = Service::named("doc/carry")?.root(dir.path())
    ///     .publish_subscribe::<u64>().open()?;
    /// let subscriber = typed.subscriber_builder().create()?;
    /// let publisher = bytes.publisher_builder().create()?;
    /// publisher.send_payload_bytes(&[&7u64.to_ne_bytes()])?;
    /// assert_eq!(*subscriber.receive()?.unwrap(), 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn carry_payload_type(mut self, payload: crate::PayloadType) -> Self {
        self.payload_override = Some(payload);
        self.carried = true;
        self
    }

    /// With [`raw_payload_type`](Self::raw_payload_type) or
    /// [`carry_payload_type`](Self::carry_payload_type): the field layout of that
    /// payload (its element, for a slice), recorded when creating and compared when
    /// opening, as a Rust type's is (see [`crate::schema`]). Without it such a builder
    /// records no schema and accepts any. A schema whose size is not the payload's is
    /// refused by `create` ([`InvalidConfig::Schema`](crate::InvalidConfig::Schema)).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use iox_service::{Payload, Schema, Service};
    /// let svc = Service::named("doc/schema")?.root(dir.path())
    ///     .publish_subscribe::<[u8]>()
    ///     .carry_payload_type(<u32 as Payload>::payload_type())
    ///     .payload_schema(Schema::U32)
    ///     .chunk_sizes(&[4])
    ///     .create()?;
    /// assert_eq!(svc.static_config().schema, Some(Schema::U32));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn payload_schema(mut self, schema: Schema) -> Self {
        self.schema_override = Some(schema);
        self
    }

    /// Records `header` as the service's user header (and requires it of an existing
    /// service) for a byte service whose header, like its payload, is known only at run
    /// time: a binding's or a bridge's. Its ports move the header as bytes beside the
    /// payload: [`RawLoan::header_ptr`](crate::RawLoan::header_ptr),
    /// [`RawSample::header_ptr`](crate::RawSample::header_ptr),
    /// [`Publisher::send_sample_bytes`](crate::Publisher::send_sample_bytes) and
    /// [`Sample::header_bytes`](crate::Sample::header_bytes), which find the payload
    /// after it (see [`crate::user_header`]). With `carry_payload_type`, the header too
    /// must be valid for every bit pattern (else `NotCarriable`).
    ///
    /// # Safety
    /// As for [`raw_payload_type`](Self::raw_payload_type): the ports built from this
    /// service must loan, send and read only through those methods and `loan_raw` /
    /// `receive_raw`; the typed `[u8]` methods (`loan_slice_uninit`, a sample's `Deref`)
    /// know no header and would read and write it as payload.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use iox_service::{HeaderType, Payload, Service};
    /// let header = HeaderType { identity: <[u32; 2] as Payload>::payload_type(), schema: None };
    /// // SAFETY: its ports use only the byte methods below.
    /// let bytes = unsafe {
    ///     Service::named("doc/carry-header")?.root(dir.path())
    ///         .publish_subscribe::<[u8]>()
    ///         .carry_payload_type(<[u8] as Payload>::payload_type())
    ///         .raw_user_header(header)
    /// }
    /// .chunk_sizes(&[16])
    /// .create()?;
    /// let typed = Service::named("doc/carry-header")?.root(dir.path())
    ///     .publish_subscribe::<[u8]>().user_header::<[u32; 2]>().open()?;
    /// let subscriber = typed.subscriber_builder().create()?;
    /// let publisher = bytes.publisher_builder().create()?;
    /// let head = [640u32, 480u32].map(u32::to_ne_bytes).concat();
    /// publisher.send_sample_bytes(&head, &[b"pixels"])?;
    /// let sample = subscriber.receive()?.unwrap();
    /// assert_eq!(*sample.user_header(), [640, 480]);
    /// assert_eq!(&sample[..], b"pixels");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub unsafe fn raw_user_header(mut self, header: HeaderType) -> Self {
        self.header_override = Some(header);
        self
    }
}
