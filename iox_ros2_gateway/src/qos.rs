//! Quality of service, mapped between a ROS 2 topic and an iox service.
//!
//! | ROS 2 | iox |
//! |---|---|
//! | history `keep_last N` (depth) | subscriber buffer `N` (the gateway's and the readers' queue) |
//! | history `keep_all` | subscriber buffer [`KEEP_ALL_BUFFER`] |
//! | durability `transient_local` | history `N`: late subscribers get the last `N` samples |
//! | durability `volatile` | history 0 |
//! | reliability `reliable` / `best_effort` | recorded; iox delivers every sample that fits a reader's buffer and drops a full buffer's oldest either way, as `keep_last` does |
//!
//! **Import** (ROS -> iox): the gateway's subscription takes the QoS every publisher of
//! the topic offers (reliable only if all are, transient local only if all are), as
//! `ros2 bag record` does, so it is compatible with each of them. DDS discovery does
//! not carry a publisher's history depth (Fast DDS reports it unknown), so the depth
//! is ROS 2's default, 10, unless the gateway is told the topic's QoS (`--qos
//! PATTERN=QOS`, [`crate::sizing`]); a service it creates gets the table's buffer and
//! history, and every service it imports records the QoS as attribute `ros2/qos`
//! (`reliable, transient_local, keep_last 10`).
//!
//! **Export** (iox -> ROS): the gateway publishes `reliable` (which `reliable` and
//! `best_effort` subscribers both accept), `transient_local` with depth = the
//! service's history when it keeps one, else `volatile` with depth = its subscriber
//! buffer, at least ROS 2's default 10 (what a ROS publisher without QoS offers: a
//! service made with iox's default buffer of 4 would otherwise let the DDS writer
//! overwrite messages a reliable reader has not acknowledged); a service that records
//! `ros2/qos` is published with that QoS. A ROS
//! subscription asking for more than that (`transient_local` of a service without
//! history, `reliable` of a `best_effort` service) gets nothing from DDS: the gateway
//! finds it in the graph and reports it in its status, naming the node and what to
//! change, instead of the silence DDS leaves.

use std::fmt;

use crate::rcl::{self, QosProfile};

/// The subscriber buffer a `keep_all` topic gets (iox queues are bounded).
pub const KEEP_ALL_BUFFER: u32 = 256;

/// The part of a QoS profile the gateway maps (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Qos {
    /// `reliable` (else `best_effort`).
    pub reliable: bool,
    /// `transient_local` (else `volatile`).
    pub transient_local: bool,
    /// `keep_last` depth; `None` for `keep_all`.
    pub depth: Option<u32>,
}

/// Why a `ros2.qos` text did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("QoS {0:?} is not `reliable|best_effort, transient_local|volatile, keep_last N|keep_all`")]
pub struct QosParseError(String);

impl Qos {
    /// ROS 2's default for topics: reliable, volatile, keep_last 10.
    pub const DEFAULT: Qos = Qos {
        reliable: true,
        transient_local: false,
        depth: Some(10),
    };

    /// The rmw profile (other policies at the middleware's defaults).
    pub fn profile(&self) -> QosProfile {
        QosProfile {
            history: if self.depth.is_some() {
                rcl::HISTORY_KEEP_LAST
            } else {
                rcl::HISTORY_KEEP_ALL
            },
            depth: self.depth.unwrap_or(0) as usize,
            reliability: if self.reliable {
                rcl::RELIABLE
            } else {
                rcl::BEST_EFFORT
            },
            durability: if self.transient_local {
                rcl::TRANSIENT_LOCAL
            } else {
                rcl::VOLATILE
            },
            deadline: Default::default(),
            lifespan: Default::default(),
            liveliness: 0,
            liveliness_lease_duration: Default::default(),
            avoid_ros_namespace_conventions: false,
        }
    }

    /// What an endpoint's profile says (unknown or system-default values read as
    /// ROS 2's defaults).
    pub fn from_profile(p: &QosProfile) -> Qos {
        Qos {
            reliable: p.reliability != rcl::BEST_EFFORT,
            transient_local: p.durability == rcl::TRANSIENT_LOCAL,
            depth: if p.history == rcl::HISTORY_KEEP_ALL {
                None
            } else {
                Some(u32::try_from(p.depth).unwrap_or(u32::MAX).max(1))
            },
        }
    }

    /// The subscription that accepts every one of `publishers` (module docs); the
    /// default when there are none.
    pub fn accepting(publishers: &[QosProfile]) -> Qos {
        if publishers.is_empty() {
            return Qos::DEFAULT;
        }
        let all: Vec<Qos> = publishers.iter().map(Qos::from_profile).collect();
        Qos {
            reliable: all.iter().all(|q| q.reliable),
            transient_local: all.iter().all(|q| q.transient_local),
            // Discovery does not carry the depth (module docs).
            depth: Qos::DEFAULT.depth,
        }
    }

    /// The iox subscriber buffer and history for this QoS (module docs).
    pub fn iox_buffer_and_history(&self) -> (u32, u32) {
        let buffer = self.depth.unwrap_or(KEEP_ALL_BUFFER).clamp(1, KEEP_ALL_BUFFER);
        (buffer, if self.transient_local { buffer } else { 0 })
    }

    /// What the gateway offers ROS for a service with this subscriber buffer and
    /// history (module docs).
    pub fn of_service(subscriber_buffer: u32, history: u32) -> Qos {
        Qos {
            reliable: true,
            transient_local: history > 0,
            depth: Some(if history > 0 {
                history
            } else {
                subscriber_buffer.max(Qos::DEFAULT.depth.unwrap_or(1))
            }),
        }
    }

    /// Why a subscription asking for `requested` gets nothing from a publisher
    /// offering this, if it does not.
    pub fn refuses(&self, requested: &QosProfile) -> Option<String> {
        let want = Qos::from_profile(requested);
        if want.transient_local && !self.transient_local {
            return Some(
                "it asks for transient_local durability and the iox service keeps no history (create it with .history(N))"
                    .into(),
            );
        }
        if want.reliable && !self.reliable {
            return Some("it asks for reliable delivery and the service is best_effort".into());
        }
        None
    }
}

impl fmt::Display for Qos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = if self.reliable { "reliable" } else { "best_effort" };
        let d = if self.transient_local {
            "transient_local"
        } else {
            "volatile"
        };
        match self.depth {
            Some(n) => write!(f, "{r}, {d}, keep_last {n}"),
            None => write!(f, "{r}, {d}, keep_all"),
        }
    }
}

impl std::str::FromStr for Qos {
    type Err = QosParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || QosParseError(s.to_owned());
        let parts: Vec<&str> = s.split(',').map(str::trim).collect();
        let [r, d, h] = parts[..] else { return Err(bad()) };
        let reliable = match r {
            "reliable" => true,
            "best_effort" => false,
            _ => return Err(bad()),
        };
        let transient_local = match d {
            "transient_local" => true,
            "volatile" => false,
            _ => return Err(bad()),
        };
        let depth = match h.split_once(' ') {
            _ if h == "keep_all" => None,
            Some(("keep_last", n)) => Some(n.trim().parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(bad)?),
            _ => return Err(bad()),
        };
        Ok(Qos {
            reliable,
            transient_local,
            depth,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips_and_bad_text_is_refused() {
        for q in [
            Qos::DEFAULT,
            Qos {
                reliable: false,
                transient_local: true,
                depth: None,
            },
        ] {
            assert_eq!(q.to_string().parse::<Qos>().unwrap(), q);
        }
        for bad in [
            "",
            "reliable",
            "reliable, volatile, keep_last 0",
            "fast, volatile, keep_all",
        ] {
            assert!(bad.parse::<Qos>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_subscription_accepts_every_publisher() {
        let reliable_tl = Qos {
            reliable: true,
            transient_local: true,
            depth: Some(5),
        };
        let best_effort = Qos {
            reliable: false,
            transient_local: false,
            depth: Some(1),
        };
        let q = Qos::accepting(&[reliable_tl.profile(), best_effort.profile()]);
        assert_eq!(
            q,
            Qos {
                reliable: false,
                transient_local: false,
                depth: Some(10)
            }
        );
        assert_eq!(Qos::from_profile(&q.profile()), q);
        assert_eq!(
            Qos::accepting(&[reliable_tl.profile()]).iox_buffer_and_history(),
            (10, 10)
        );
    }

    #[test]
    fn what_a_service_offers_and_refuses() {
        // A service made with iox's default buffer (4) is published as a ROS
        // publisher without QoS is, keep_last 10: a reliable reader that falls behind
        // by 5 does not lose messages the DDS writer already overwrote.
        let volatile = Qos::of_service(4, 0);
        assert_eq!(volatile.to_string(), "reliable, volatile, keep_last 10");
        assert_eq!(Qos::of_service(64, 0).depth, Some(64));
        let wants_history = Qos {
            reliable: false,
            transient_local: true,
            depth: Some(1),
        };
        assert!(
            volatile
                .refuses(&wants_history.profile())
                .unwrap()
                .contains("history")
        );
        assert_eq!(Qos::of_service(4, 2).refuses(&wants_history.profile()), None);
    }
}
