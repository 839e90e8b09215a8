//! What the gateway is told about the services it imports into, beyond what DDS
//! discovery says: their QoS (`--qos PATTERN=QOS`) and their pools' size classes
//! (`--pool PATTERN=SIZExCOUNT,...`).
//!
//! Decisions:
//! - DDS discovery carries a publisher's reliability and durability but not its history
//!   depth (Fast DDS reports it as unknown, 0), so an import's depth is ROS 2's default,
//!   10, unless `--qos` gives the topic's QoS; the first matching `--qos` wins, and it
//!   replaces the discovered QoS whole (a subscription asking `reliable` of a
//!   `best_effort` publisher gets nothing from DDS, as in any ROS node).
//! - A service the gateway creates reserves its pool at creation (a full `/dev/shm` is
//!   an error then, never a SIGBUS later). Without `--pool` its size classes are
//!   `iox_ros2::carried::DEFAULT_CLASSES`, each count raised to hold a full subscriber
//!   buffer, the history, and two samples in flight (one being published, one being
//!   copied out by a reader such as `iox record`), as far as [`CLASS_BUDGET`] bytes per
//!   class: [`default_classes`]. A depth-10 topic of 1080p frames gets 12 chunks of
//!   16 MiB; a depth-100 one 16 (256 MiB), not the 202 its depth would ask (3.2 GiB
//!   reserved for every such topic): a topic whose messages need other sizes, a deep
//!   history of large messages, or more readers that fall behind at once, is given its
//!   classes with `--pool` (the first matching one wins).

use iox_ros2::carried::DEFAULT_CLASSES;

use crate::names::{NameError, Pattern};
use crate::qos::{Qos, QosParseError};

/// The `--qos` and `--pool` settings (module docs).
#[derive(Debug, Default, Clone)]
pub struct Sizing {
    qos: Vec<(Pattern, Qos)>,
    pools: Vec<(Pattern, Vec<(usize, usize)>)>,
}

/// Why a `--qos` or `--pool` setting was refused.
#[derive(Debug, thiserror::Error)]
pub enum SizingError {
    /// Not `PATTERN=VALUE`.
    #[error("{0:?} is not PATTERN=VALUE")]
    Form(String),
    /// The pattern is not a service-name pattern.
    #[error(transparent)]
    Pattern(#[from] NameError),
    /// The QoS text did not parse.
    #[error(transparent)]
    Qos(#[from] QosParseError),
    /// A size class that is not `SIZExCOUNT`.
    #[error("size class {0:?} is not SIZExCOUNT (a size in bytes or with K, M, G; a count above 0: 16Mx24)")]
    Class(String),
}

fn split(setting: &str) -> Result<(Pattern, &str), SizingError> {
    let (pattern, value) = setting
        .split_once('=')
        .ok_or_else(|| SizingError::Form(setting.to_owned()))?;
    Ok((Pattern::new(pattern.trim())?, value.trim()))
}

fn size(text: &str) -> Option<usize> {
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, ""),
    };
    let shift = match unit {
        "" => 0,
        "K" | "k" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        _ => return None,
    };
    digits
        .parse::<usize>()
        .ok()?
        .checked_mul(1 << shift)
        .filter(|&n| n > 0)
}

/// Parses `SIZExCOUNT,...` (`16Mx24,1Mx16`).
pub fn parse_classes(text: &str) -> Result<Vec<(usize, usize)>, SizingError> {
    text.split(',')
        .map(|class| {
            let class = class.trim();
            class
                .split_once('x')
                .and_then(|(s, n)| Some((size(s)?, n.parse::<usize>().ok().filter(|&n| n > 0)?)))
                .ok_or_else(|| SizingError::Class(class.to_owned()))
        })
        .collect()
}

/// The most bytes [`default_classes`] raises one class to (module docs).
pub const CLASS_BUDGET: usize = 256 << 20;

/// The size classes of a service made with subscriber buffer `buffer` and `history`
/// without `--pool` (module docs).
///
/// ```
/// use iox_ros2_gateway::sizing::default_classes;
/// // A depth-10 volatile topic: 12 chunks of each class at least.
/// assert_eq!(default_classes(10, 0).last(), Some(&(16 << 20, 12)));
/// ```
pub fn default_classes(buffer: u32, history: u32) -> Vec<(usize, usize)> {
    let needed = buffer as usize + history as usize + 2;
    DEFAULT_CLASSES
        .iter()
        .map(|&(size, count)| (size, count.max(needed.min(CLASS_BUDGET / size))))
        .collect()
}

impl Sizing {
    /// From the `--qos` and `--pool` settings, each `PATTERN=VALUE`.
    ///
    /// ```
    /// use iox_ros2_gateway::sizing::Sizing;
    /// let s = Sizing::new(&["camera/*=reliable, volatile, keep_last 100".into()], &["camera/*=8Mx110".into()])?;
    /// let qos = s.qos_for("camera/front").unwrap();
    /// assert_eq!(qos.depth, Some(100));
    /// assert_eq!(s.classes_for("camera/front", &qos), vec![(8 << 20, 110)]);
    /// assert!(s.qos_for("chatter").is_none());
    /// # Ok::<(), iox_ros2_gateway::sizing::SizingError>(())
    /// ```
    pub fn new(qos: &[String], pools: &[String]) -> Result<Self, SizingError> {
        let qos = qos
            .iter()
            .map(|s| {
                let (p, v) = split(s)?;
                Ok((p, v.parse::<Qos>()?))
            })
            .collect::<Result<_, SizingError>>()?;
        let pools = pools
            .iter()
            .map(|s| {
                let (p, v) = split(s)?;
                Ok((p, parse_classes(v)?))
            })
            .collect::<Result<_, SizingError>>()?;
        Ok(Self { qos, pools })
    }

    /// The QoS `--qos` gives service `name`, if any.
    pub fn qos_for(&self, name: &str) -> Option<Qos> {
        self.qos.iter().find(|(p, _)| p.matches(name)).map(|(_, q)| *q)
    }

    /// The size classes of service `name` imported with `qos`.
    pub fn classes_for(&self, name: &str, qos: &Qos) -> Vec<(usize, usize)> {
        match self.pools.iter().find(|(p, _)| p.matches(name)) {
            Some((_, classes)) => classes.clone(),
            None => {
                let (buffer, history) = qos.iox_buffer_and_history();
                default_classes(buffer, history)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_that_do_not_parse_say_why() {
        for (qos, pool, want) in [
            ("camera", "", "PATTERN=VALUE"),
            ("a=fast", "", "QoS"),
            ("", "a=16M", "SIZExCOUNT"),
            ("", "a=16Mx0", "SIZExCOUNT"),
            ("", "a=16Tx2", "SIZExCOUNT"),
        ] {
            let q: Vec<String> = [qos]
                .iter()
                .filter(|s| !s.is_empty())
                .map(|s| s.to_string())
                .collect();
            let p: Vec<String> = [pool]
                .iter()
                .filter(|s| !s.is_empty())
                .map(|s| s.to_string())
                .collect();
            let e = Sizing::new(&q, &p).unwrap_err().to_string();
            assert!(e.contains(want), "{qos} {pool}: {e}");
        }
        assert_eq!(
            parse_classes("4Kx64, 1Mx2").unwrap(),
            vec![(4096, 64), (1 << 20, 2)]
        );
    }

    #[test]
    fn defaults_hold_a_full_buffer_the_history_and_two_in_flight() {
        // Depth 100 transient local: 100 in the buffer, 100 kept, 2 in flight, as far
        // as 256 MiB a class.
        assert_eq!(
            default_classes(100, 100),
            [(4096, 202), (65536, 202), (1 << 20, 202), (16 << 20, 16)]
        );
        // A small depth keeps the ladder's own counts.
        assert_eq!(default_classes(1, 0), DEFAULT_CLASSES.to_vec());
    }
}
