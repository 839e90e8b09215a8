//! # iox_ros2_gateway: iox services and ROS 2 topics, both ways
//!
//! A gateway process (`iox-ros2`) is an ordinary iox participant and an ordinary ROS 2
//! node (`iox_gateway`). By name patterns it exports iox publish-subscribe services as
//! ROS 2 topics and imports ROS 2 topics as iox services, both directions in one
//! process, so the hot local hop runs on iox and the rest of the robot keeps using
//! ROS 2.
//!
//! - Names and patterns ([`names`]): service `camera/front` is topic `/camera/front`.
//! - QoS ([`qos`]): depth, durability and reliability mapped both ways; a ROS
//!   subscription the mapping leaves without messages is reported.
//! - Types: CDR bytes of any installed ROS type passed through, and
//!   `sensor_msgs/msg/Image` as an iox user header plus the pixels
//!   ([`iox_ros2::image`]); a service records its ROS type, QoS and definition as
//!   attributes (`ros2/type`, `ros2/qos`, `ros2/definition`), so `iox list` shows
//!   what it carries.
//! - What the gateway is told beyond discovery ([`sizing`]): an import's QoS and its
//!   pool's size classes.
//! - Export ([`export`]) and import ([`import`]); no loops: the gateway's
//!   subscriptions ignore its own publishers and its exports skip what it imported.
//! - ROS 2 itself ([`rcl`]): the C client library loaded at run time from the install
//!   found ([`install`]); nothing is generated or linked per message type, and this
//!   crate builds without ROS.
//!
//! The core crates never depend on this one.

pub mod export;
pub mod gateway;
pub mod import;
pub mod install;
pub mod names;
pub mod qos;
pub mod rcl;
pub mod services;
pub mod sizing;

pub use gateway::{Gateway, Options, StartError, Status};

/// Locks one of the gateway's mutexes, whatever a panicking thread left in it: each
/// holds maps that every step leaves whole.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
