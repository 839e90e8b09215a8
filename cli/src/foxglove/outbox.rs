//! One client's outgoing messages: control messages (server info, channel
//! advertisements, status) in order, and samples (data) in a bounded queue that drops
//! the oldest.
//!
//! Invariants:
//! - data never holds more than [`Limits::messages`] samples nor more than
//!   [`Limits::bytes`] payload bytes; a sample that does not fit pushes out the oldest
//!   ones, each counted (per channel) as dropped;
//! - control messages are never dropped: a client that lets [`CONTROL_MAX`] of them
//!   (or [`CONTROL_MAX_BYTES`]) pile up unread is told to go ([`Outbox::push_control`]
//!   says so), as it reads nothing any more;
//! - a sample larger than the byte limit on its own is counted apart
//!   ([`Outbox::too_big`]): the limit, not the client, loses it;
//! - control messages go out before data, so a channel's advertisement precedes its
//!   samples and a client learns of a new service without waiting behind images;
//! - samples of a subscription the client ended are taken out without being counted
//!   (nothing the client asked for was lost).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use tokio_tungstenite::tungstenite::Message;

/// Control messages a client may leave unread before it is disconnected.
pub const CONTROL_MAX: usize = 4096;
/// Bytes of control messages (channel advertisements carry whole schemas) a client
/// may leave unread before it is disconnected.
pub const CONTROL_MAX_BYTES: usize = 64 << 20;

/// How much data one client's queue holds.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Samples.
    pub messages: usize,
    /// Payload bytes.
    pub bytes: usize,
}

/// One sample for one client.
#[derive(Debug, Clone)]
pub struct Data {
    /// The channel it belongs to.
    pub channel: u64,
    /// The client's subscription of that channel.
    pub subscription: u32,
    /// When the bridge received it (ns since the Unix epoch).
    pub log_time: u64,
    /// The message, shared between the clients it goes to.
    pub bytes: Arc<Vec<u8>>,
}

/// What goes out next.
#[derive(Debug)]
pub enum Next {
    /// A control message, framed.
    Control(Message),
    /// A sample.
    Data(Data),
}

/// The client read no control message for too long.
#[derive(Debug)]
pub struct Unread;

/// One client's queues (module docs).
#[derive(Debug)]
pub struct Outbox {
    limits: Limits,
    control: VecDeque<Message>,
    control_bytes: usize,
    data: VecDeque<Data>,
    data_bytes: usize,
    /// Samples dropped, by channel, since the client connected.
    dropped: BTreeMap<u64, u64>,
    /// Samples larger than the byte limit, by channel.
    too_big: BTreeMap<u64, u64>,
    /// Samples handed to the connection.
    sent: u64,
}

impl Outbox {
    /// An empty outbox with `limits` for its data.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            control: VecDeque::new(),
            control_bytes: 0,
            data: VecDeque::new(),
            data_bytes: 0,
            dropped: BTreeMap::new(),
            too_big: BTreeMap::new(),
            sent: 0,
        }
    }

    /// Queues a control message; [`Unread`] when [`CONTROL_MAX`] (or
    /// [`CONTROL_MAX_BYTES`]) are waiting already.
    pub fn push_control(&mut self, message: Message) -> Result<(), Unread> {
        if self.control.len() >= CONTROL_MAX || self.control_bytes + message.len() > CONTROL_MAX_BYTES {
            return Err(Unread);
        }
        self.control_bytes += message.len();
        self.control.push_back(message);
        Ok(())
    }

    /// Queues a sample, dropping the oldest ones (counted) to make room (module docs).
    pub fn push_data(&mut self, data: Data) {
        let len = data.bytes.len();
        if len > self.limits.bytes {
            *self.too_big.entry(data.channel).or_default() += 1;
            return;
        }
        while self.data.len() >= self.limits.messages || self.data_bytes + len > self.limits.bytes {
            let Some(old) = self.data.pop_front() else { break };
            self.data_bytes -= old.bytes.len();
            *self.dropped.entry(old.channel).or_default() += 1;
        }
        self.data_bytes += len;
        self.data.push_back(data);
    }

    /// The next message to send: control first.
    pub fn pop(&mut self) -> Option<Next> {
        if let Some(m) = self.control.pop_front() {
            self.control_bytes -= m.len();
            return Some(Next::Control(m));
        }
        let d = self.data.pop_front()?;
        self.data_bytes -= d.bytes.len();
        self.sent += 1;
        Some(Next::Data(d))
    }

    /// Takes out the queued samples of `subscription` (ended by the client), uncounted.
    pub fn forget(&mut self, subscription: u32) {
        let bytes = &mut self.data_bytes;
        self.data.retain(|d| {
            let keep = d.subscription != subscription;
            if !keep {
                *bytes -= d.bytes.len();
            }
            keep
        });
    }

    /// Samples dropped so far, by channel.
    pub fn dropped(&self) -> &BTreeMap<u64, u64> {
        &self.dropped
    }

    /// Samples larger than the byte limit so far, by channel.
    pub fn too_big(&self) -> &BTreeMap<u64, u64> {
        &self.too_big
    }

    /// Samples handed to the connection so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(channel: u64, n: usize) -> Data {
        Data {
            channel,
            subscription: channel as u32,
            log_time: 0,
            bytes: Arc::new(vec![0; n]),
        }
    }

    fn drain(o: &mut Outbox) -> Vec<(u64, usize)> {
        std::iter::from_fn(|| o.pop())
            .filter_map(|n| match n {
                Next::Data(d) => Some((d.channel, d.bytes.len())),
                Next::Control(_) => None,
            })
            .collect()
    }

    #[test]
    fn a_full_queue_drops_the_oldest_and_counts_them_by_channel() {
        let mut o = Outbox::new(Limits {
            messages: 3,
            bytes: 1000,
        });
        for i in 0..5 {
            o.push_data(data(i % 2, 10 + i as usize));
        }
        assert_eq!(o.dropped().values().sum::<u64>(), 2);
        assert_eq!(o.dropped().get(&0), Some(&1));
        assert_eq!(o.dropped().get(&1), Some(&1));
        assert_eq!(drain(&mut o), vec![(0, 12), (1, 13), (0, 14)]);
        assert_eq!(o.sent(), 3);
    }

    #[test]
    fn the_byte_limit_drops_the_oldest_and_an_oversized_sample_itself() {
        let mut o = Outbox::new(Limits {
            messages: 100,
            bytes: 100,
        });
        o.push_data(data(1, 60));
        o.push_data(data(1, 50));
        assert_eq!(o.dropped().values().sum::<u64>(), 1);
        o.push_data(data(2, 101));
        assert_eq!(o.dropped().get(&2), None);
        assert_eq!(o.too_big().get(&2), Some(&1));
        assert_eq!(drain(&mut o), vec![(1, 50)]);
    }

    #[test]
    fn control_goes_first_and_too_much_unread_control_is_refused() {
        let mut o = Outbox::new(Limits {
            messages: 10,
            bytes: 10,
        });
        o.push_data(data(1, 1));
        o.push_control(Message::text("a")).unwrap();
        assert!(matches!(o.pop(), Some(Next::Control(_))));
        for _ in 0..CONTROL_MAX {
            o.push_control(Message::text("b")).unwrap();
        }
        assert!(o.push_control(Message::text("c")).is_err());
    }

    #[test]
    fn an_ended_subscription_leaves_without_counting() {
        let mut o = Outbox::new(Limits {
            messages: 10,
            bytes: 100,
        });
        o.push_data(data(1, 10));
        o.push_data(data(2, 10));
        o.forget(1);
        assert_eq!(o.dropped().values().sum::<u64>(), 0);
        assert_eq!(drain(&mut o), vec![(2, 10)]);
    }
}
