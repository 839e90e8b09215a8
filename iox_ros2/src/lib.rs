//! iox and ROS 2, the layer above the core that knows ROS message types.
//!
//! - [`msg`]: `.msg` definitions parsed from their text.
//! - [`library`]: definitions found in a ROS 2 install at run time (`share/<pkg>/msg`
//!   under `AMENT_PREFIX_PATH` or given prefixes), with the types they use; nothing is
//!   generated per message type.
//! - [`fixed`]: an iox struct's recorded schema matched field by field against a
//!   fixed-size message, and its values converted to and from CDR, the encoding ROS 2
//!   middlewares use.
//! - [`generate`]: `.msg` definitions written for iox's own types, so ROS tools read
//!   iox samples by field (`iox record`'s `ros2msg` channels).
//! - [`cdr`]: CDR messages of any shape walked with bounds checks (a malformed message
//!   is an error naming the field), and written.
//! - [`value`]: CDR messages of any type decoded to field values and encoded from them
//!   (`iox echo` and `iox pub` on ROS-typed services).
//! - [`framed`], [`image`], [`pointcloud`]: `sensor_msgs/msg/Image` and
//!   `sensor_msgs/msg/PointCloud2` as an iox user header plus the data as a byte slice,
//!   converted to and from CDR.
//! - [`carried`]: how an iox service says which ROS type it carries (attributes) and
//!   the route its samples take.
//!
//! This is the type side; the gateway process (`iox_ros2_gateway`) uses it to carry
//! samples between iox services and ROS 2 topics.
//!
//! ```
//! # let dir = tempfile::tempdir().unwrap();
//! # let msg = dir.path().join("share/demo/msg");
//! # std::fs::create_dir_all(&msg).unwrap();
//! # std::fs::write(msg.join("Stamp.msg"), "int32 sec\nuint32 nanosec\n").unwrap();
//! use iox_ros2::{fixed::Plan, library::Library};
//! use iox_service::ZeroCopySafe;
//!
//! #[derive(ZeroCopySafe, Clone, Copy)]
//! #[repr(C)]
//! struct Stamp { sec: i32, nanosec: u32 }
//!
//! let mut ros = Library::with_prefixes(vec![dir.path().to_owned()]);
//! let plan = Plan::new(&mut ros, "demo/msg/Stamp", &Stamp::schema())?;
//! let mut cdr = Vec::new();
//! plan.encode(&[1, 0, 0, 0, 2, 0, 0, 0], &mut cdr);
//! assert_eq!(cdr, [0, 1, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod carried;
pub mod cdr;
pub mod fixed;
pub mod framed;
pub mod generate;
pub mod image;
pub mod library;
pub mod msg;
pub mod pointcloud;
pub mod value;
