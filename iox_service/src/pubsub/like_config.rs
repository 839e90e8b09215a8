//! Building a service like one described by a static config from elsewhere: a bridge
//! recreating a remote service, `iox replay` recreating a recorded one. One place says
//! which recorded settings a recreated service takes, so the two cannot drift apart.

use crate::{PubSubBuilder, StaticConfig};

impl PubSubBuilder<[u8]> {
    /// For a builder that carries `config`'s payload type
    /// ([`carry_payload_type`](Self::carry_payload_type) or
    /// [`raw_payload_type`](Self::raw_payload_type)): its schema, memory type and, when
    /// creating, its attributes (as [`attribute`](Self::attribute)s: recorded, not
    /// required), limits, overflow, history, backing kind and size classes (the
    /// counts as recorded, so the pool is the original's:
    /// [`allow_pool_exhaustion`](Self::allow_pool_exhaustion) is set). A `config` of
    /// another pattern contributes only its schema, memory type and attributes.
    /// `config`'s user header too, for a builder of
    /// [`raw_payload_type`](Self::raw_payload_type) (whose `unsafe` contract covers
    /// it); a carrying builder declares it with the `unsafe`
    /// [`raw_user_header`](Self::raw_user_header) itself, since its `[u8]` ports would
    /// otherwise read the header and the gap after it as payload. The classes' sizes
    /// are the payload's, the header's room added back when the service is created.
    /// Not the
    /// permissions: who may open the new service is the caller's decision (a file or a
    /// remote host should not make a service world-writable by saying so).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let other = tempfile::tempdir().unwrap();
    /// use iox_service::Service;
    /// let original = Service::named("doc/like")?.root(dir.path())
    ///     .publish_subscribe::<u32>().subscriber_buffer(9).history(3)
    ///     .attribute("ros2/type", "std_msgs/msg/UInt32")
    ///     .create()?;
    /// let config = original.static_config();
    /// let copy = Service::named("doc/like")?.root(other.path())
    ///     .publish_subscribe::<[u8]>()
    ///     .carry_payload_type(config.payload.clone())
    ///     .like_config(config)
    ///     .create()?;
    /// assert_eq!(copy.static_config().publish_subscribe(), config.publish_subscribe());
    /// assert_eq!(copy.static_config().schema, config.schema);
    /// assert_eq!(copy.attributes(), original.attributes());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn like_config(self, config: &StaticConfig) -> Self {
        let mut b = self.memory_type(config.memory_type);
        for (key, value) in &config.attributes {
            b = b.attribute(key, value);
        }
        if let Some(schema) = &config.schema {
            b = b.payload_schema(schema.clone());
        }
        if b.payload_override.is_some() && !b.carried {
            // Under the caller's `raw_payload_type` contract, which covers the header.
            b.header_override = config.user_header.clone();
        }
        let Some(section) = config.publish_subscribe() else {
            return b;
        };
        let offset = crate::user_header::payload_offset_of(config);
        let classes: Vec<(usize, usize)> = config
            .layout
            .classes()
            .iter()
            .map(|c| (c.chunk_size.saturating_sub(offset), c.count as usize))
            .collect();
        b.max_publishers(section.max_publishers)
            .max_subscribers(section.max_subscribers)
            .subscriber_buffer(section.subscriber_buffer)
            .max_loans(section.max_loans)
            .max_held(section.max_held)
            .overflow(section.overflow)
            .history(section.history)
            .backing(config.backing.kind())
            .size_classes(&classes)
            .allow_pool_exhaustion(true)
    }
}
