//! A publish-subscribe builder's part in the service protocol (`service::Pattern`):
//! the static config it creates (made in `creating.rs`), and whether an existing
//! service is the one it asks for (payload and its schema, user header, memory type, limits, backing, page size, overflow,
//! history, the largest sample), each mismatch an `OpenError` naming both sides.

use super::service::PubSubBuilder;
use crate::Payload;
use crate::static_config::{MessagingPattern, PubSubConfig, StaticConfig};
use crate::user_header::UserHeader;
use iox_core::service::{CreateError, OpenError, Pattern, Target};

impl<P: ?Sized + Payload, H: UserHeader> Pattern for PubSubBuilder<P, H> {
    const PATTERN: MessagingPattern = MessagingPattern::PublishSubscribe;
    type Section = PubSubConfig;

    fn section(c: &StaticConfig) -> Option<&PubSubConfig> {
        c.publish_subscribe()
    }

    fn new_config(&self, target: &Target) -> Result<StaticConfig, CreateError> {
        if let Some(source) = self.typed_header_on_bytes() {
            return self.fail(source);
        }
        if let Some(payload) = self.not_carriable() {
            return Err(CreateError::NotCarriable {
                name: target.name.to_string(),
                payload,
            });
        }
        self.config()
    }

    fn check_compatible(
        &self,
        target: &Target,
        c: &StaticConfig,
        ps: &PubSubConfig,
    ) -> Result<(), OpenError> {
        let name = || target.name.to_string();
        if let Some(source) = self.typed_header_on_bytes() {
            return Err(OpenError::InvalidSetting { name: name(), source });
        }
        if let Some(payload) = self.not_carriable() {
            return Err(OpenError::NotCarriable {
                name: name(),
                payload,
            });
        }
        let requested = self.payload_type();
        // Same name, other fields: say which field (a type-name mismatch is the
        // payload error below).
        if let (Some(mine), Some(theirs)) = (self.schema(), &c.schema)
            && requested.type_name() == c.payload.type_name()
            && let Some(d) = mine.difference(theirs)
        {
            return Err(OpenError::IncompatibleSchema(Box::new(
                crate::schema::SchemaMismatch {
                    name: name(),
                    type_name: requested.type_name().to_owned(),
                    field: d.field,
                    requested: d.left,
                    found: d.right,
                    requested_size: mine.size(),
                    found_size: theirs.size(),
                    holders: Vec::new(),
                },
            )));
        }
        self.check_header(target, c)?;
        if c.payload != requested {
            return Err(OpenError::IncompatiblePayload {
                name: name(),
                requested: self.payload_type(),
                found: c.payload.clone(),
            });
        }
        if let Some(t) = self.memory_type
            && t != c.memory_type
        {
            return Err(OpenError::IncompatibleMemoryType {
                name: name(),
                requested: t,
                found: c.memory_type,
            });
        }
        let limits = [
            ("max_publishers", self.max_publishers, ps.max_publishers),
            ("max_subscribers", self.max_subscribers, ps.max_subscribers),
            ("subscriber_buffer", self.subscriber_buffer, ps.subscriber_buffer),
            ("max_loans", self.max_loans, ps.max_loans),
            ("max_held", self.max_held, ps.max_held),
        ];
        for (what, requested, found) in limits {
            if let Some(r) = requested
                && r > found
            {
                return Err(OpenError::IncompatibleLimit {
                    name: name(),
                    what,
                    requested: r.to_string(),
                    found: found.to_string(),
                });
            }
        }
        if let Some(b) = self.backing
            && b != c.backing.kind()
        {
            return Err(OpenError::IncompatibleLimit {
                name: name(),
                what: "payload backing",
                requested: format!("{b:?}"),
                found: format!("{:?}", c.backing.kind()),
            });
        }
        if let Some(p) = self.page_size
            && p != c.layout.page_size()
        {
            return Err(OpenError::IncompatibleLimit {
                name: name(),
                what: "page size",
                requested: p.to_string(),
                found: c.layout.page_size().to_string(),
            });
        }
        if let Some(o) = self.overflow
            && o != ps.overflow
        {
            return Err(OpenError::IncompatibleLimit {
                name: name(),
                what: "overflow policy",
                requested: format!("{o:?}"),
                found: format!("{:?}", ps.overflow),
            });
        }
        if let Some(h) = self.history
            && h != ps.history
        {
            return Err(OpenError::IncompatibleLimit {
                name: name(),
                what: "history",
                requested: h.to_string(),
                found: ps.history.to_string(),
            });
        }
        if let Some(t) = self.tensors
            && t != ps.tensors
        {
            return Err(OpenError::IncompatibleLimit {
                name: name(),
                what: "tensor records",
                requested: t.to_string(),
                found: ps.tensors.to_string(),
            });
        }
        let element = c.payload.element_size().max(1);
        let wanted = self
            .max_slice_len
            .map(|l| l.saturating_mul(element))
            .or(self
                .size_classes
                .as_ref()
                .and_then(|cl| cl.iter().map(|c| c.0).max()))
            .map(|bytes| bytes.saturating_add(self.payload_offset()));
        if let Some(bytes) = wanted
            && bytes > c.layout.max_chunk_size()
        {
            return Err(OpenError::IncompatibleLimit {
                name: name(),
                what: "largest sample (bytes)",
                requested: bytes.to_string(),
                found: c.layout.max_chunk_size().to_string(),
            });
        }
        Ok(())
    }
}

impl<P: ?Sized + Payload, H: UserHeader> PubSubBuilder<P, H> {
    /// Whether the service's user header is the one this builder declares: the same
    /// type (or both none), then, for the same name, the same fields.
    fn check_header(&self, target: &Target, c: &StaticConfig) -> Result<(), OpenError> {
        let mine = self.header_type();
        if let (Some(m), Some(theirs)) = (&mine, &c.user_header)
            && m.type_name() == theirs.type_name()
            && let (Some(ms), Some(ts)) = (&m.schema, &theirs.schema)
            && let Some(d) = ms.difference(ts)
        {
            return Err(OpenError::IncompatibleSchema(Box::new(
                crate::schema::SchemaMismatch {
                    name: target.name.to_string(),
                    type_name: format!("{} (the user header)", m.type_name()),
                    field: d.field,
                    requested: d.left,
                    found: d.right,
                    requested_size: ms.size(),
                    found_size: ts.size(),
                    holders: Vec::new(),
                },
            )));
        }
        if mine.as_ref().map(|h| &h.identity) != c.user_header.as_ref().map(|h| &h.identity) {
            return Err(OpenError::IncompatibleUserHeader(Box::new(
                iox_core::service::UserHeaderMismatch {
                    name: target.name.to_string(),
                    requested: mine.map(|h| h.identity),
                    found: c.user_header.as_ref().map(|h| h.identity.clone()),
                },
            )));
        }
        Ok(())
    }
}
