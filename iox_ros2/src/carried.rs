//! How an iox service carries a ROS 2 type: the attributes that say what it carries,
//! the route its samples take to and from CDR, and the size classes of services made
//! for ROS messages (by the gateway, and by `iox replay` of a ROS recording).
//!
//! Attributes (see `iox_service::attributes`): [`TYPE_KEY`] the ROS type
//! (`sensor_msgs/msg/Image`, or a service type `std_srvs/srv/SetBool`), [`QOS_KEY`] the
//! topic's QoS, [`DEFINITION_KEY`] the type's definition as MCAP's `ros2msg` holds it
//! (left out when longer than an attribute holds), [`IMPORTED_KEY`] on a service a
//! gateway made from ROS.
//!
//! Routes ([`route_of`]):
//! - [`Route::Cdr`]: a `[u8]` service recording [`TYPE_KEY`]: each sample is one CDR
//!   message of the type, as ROS middlewares write it;
//! - [`Route::Framed`]: a `[u8]` service whose user header is a [`crate::framed`]
//!   header (which one: [`FramedKind`]) ([`crate::image::ImageHeader`], [`crate::pointcloud::PointCloud2Header`]):
//!   the message as header and data;
//! - [`Route::Typed`]: a typed service (a struct with a recorded schema, valid for every
//!   bit pattern) recording [`TYPE_KEY`]: the struct, converted field by field
//!   ([`crate::fixed`]).

use iox_service::{PubSubBuilder, StaticConfig, UserHeader};

use crate::framed::{Framed, FramedError};
use crate::image::ImageHeader;
use crate::pointcloud::PointCloud2Header;

/// The attribute naming a service's ROS 2 type.
pub const TYPE_KEY: &str = "ros2/type";
/// The attribute holding a service's ROS 2 QoS (`reliable, volatile, keep_last 10`).
pub const QOS_KEY: &str = "ros2/qos";
/// The attribute holding a service's ROS 2 definition text.
pub const DEFINITION_KEY: &str = "ros2/definition";
/// The attribute that marks a service a gateway imported from ROS.
pub const IMPORTED_KEY: &str = "ros2/imported_from";

/// Size classes (bytes per chunk, count) of a service made for ROS messages: 4 KiB x
/// 64, 64 KiB x 32, 1 MiB x 16, 16 MiB x 8 (about 200 MiB, reserved when the service
/// is created), taken as a budget (`allow_pool_exhaustion`): a sample that finds its
/// class empty is dropped and counted by whoever sends it. The gateway raises the
/// counts with a topic's depth and takes others from `--pool`.
pub const DEFAULT_CLASSES: [(usize, usize); 4] = [(4096, 64), (65536, 32), (1 << 20, 16), (16 << 20, 8)];

/// How a service's samples become ROS messages (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// CDR bytes passed through.
    Cdr,
    /// A header and the data ([`crate::framed`]).
    Framed(FramedKind),
    /// A struct converted field by field.
    Typed,
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Route::Cdr => "cdr",
            Route::Framed(FramedKind::Image) => "image",
            Route::Framed(FramedKind::PointCloud2) => "pointcloud2",
            Route::Typed => "typed",
        })
    }
}

/// The ROS type and route of the service of `config`, or why it carries none.
pub fn route_of(config: &StaticConfig) -> Result<(String, Route), String> {
    let ros_type = config.attributes.get(TYPE_KEY);
    match &config.user_header {
        Some(h) => match FramedKind::of_header(h) {
            Some(kind) if ros_type.is_none_or(|t| t == kind.ros_type()) => {
                Ok((kind.ros_type().to_owned(), Route::Framed(kind)))
            }
            Some(kind) => Err(format!(
                "its user header carries {} but it records ROS type {}",
                kind.ros_type(),
                ros_type.unwrap_or_default()
            )),
            None => Err(format!(
                "its user header {} is not one of iox_ros2's ROS headers (image::ImageHeader, pointcloud::PointCloud2Header)",
                h.identity
            )),
        },
        None => match ros_type {
            Some(t) if config.payload == <[u8] as iox_service::Payload>::payload_type() => {
                Ok((t.to_owned(), Route::Cdr))
            }
            Some(t) if config.schema.is_some() && config.payload.any_bit_pattern() => {
                Ok((t.to_owned(), Route::Typed))
            }
            Some(t) => Err(format!(
                "it records ROS type {t} but carries {}, which is neither CDR bytes ([u8]) nor a struct with a recorded schema valid for every bit pattern",
                config.payload
            )),
            None => Err(format!(
                "it carries {} and records no ROS type: create it as [u8] CDR with attribute {TYPE_KEY}, or with the image header",
                config.payload
            )),
        },
    }
}

/// `builder` set up for a service made to carry ROS type `type_name` ([`Route::Cdr`],
/// or [`Route::Framed`] when `H` is a framed header): [`DEFAULT_CLASSES`] as a budget,
/// and the type and its definition recorded.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// use iox_ros2::carried::{ros_service, route_of, Route};
/// use iox_service::Service;
/// let b = Service::named("chatter")?.root(dir.path()).publish_subscribe::<[u8]>();
/// let svc = ros_service(b, "std_msgs/msg/String", "string data\n").create()?;
/// assert_eq!(route_of(svc.static_config()), Ok(("std_msgs/msg/String".into(), Route::Cdr)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn ros_service<H: UserHeader>(
    builder: PubSubBuilder<[u8], H>,
    type_name: &str,
    definition: &str,
) -> PubSubBuilder<[u8], H> {
    let builder = builder
        .size_classes(&DEFAULT_CLASSES)
        .allow_pool_exhaustion(true)
        .attribute(TYPE_KEY, type_name);
    if !definition.is_empty() && definition.len() <= iox_service::attributes::MAX_VALUE_LEN {
        builder.attribute(DEFINITION_KEY, definition)
    } else {
        builder
    }
}

/// Which [`Framed`] header a service carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FramedKind {
    /// [`ImageHeader`]: `sensor_msgs/msg/Image`.
    Image,
    /// [`PointCloud2Header`]: `sensor_msgs/msg/PointCloud2`.
    PointCloud2,
}

impl FramedKind {
    /// Every kind.
    pub const ALL: [FramedKind; 2] = [FramedKind::Image, FramedKind::PointCloud2];

    /// The kind whose header is `header` (a service's recorded user header).
    pub fn of_header(header: &iox_service::HeaderType) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.header().identity == header.identity)
    }

    /// The kind that carries ROS type `name`.
    pub fn of_ros_type(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.ros_type() == name)
    }

    /// The header type as a service records it.
    pub fn header(self) -> iox_service::HeaderType {
        match self {
            Self::Image => iox_service::HeaderType::of::<ImageHeader>(),
            Self::PointCloud2 => iox_service::HeaderType::of::<PointCloud2Header>(),
        }
    }

    /// The ROS type.
    pub fn ros_type(self) -> &'static str {
        match self {
            Self::Image => ImageHeader::ROS_TYPE,
            Self::PointCloud2 => PointCloud2Header::ROS_TYPE,
        }
    }

    /// The ROS type's definition.
    pub fn definition(self) -> &'static str {
        match self {
            Self::Image => ImageHeader::DEFINITION,
            Self::PointCloud2 => PointCloud2Header::DEFINITION,
        }
    }

    /// A sample's bytes (the header's, then the data) of the message `cdr`.
    pub fn sample_of(self, cdr: &[u8]) -> Result<Vec<u8>, FramedError> {
        fn go<H: Framed>(cdr: &[u8]) -> Result<Vec<u8>, FramedError> {
            let (h, data) = H::from_cdr(cdr)?;
            let mut out = h.to_bytes();
            out.extend_from_slice(&cdr[data]);
            Ok(out)
        }
        match self {
            Self::Image => go::<ImageHeader>(cdr),
            Self::PointCloud2 => go::<PointCloud2Header>(cdr),
        }
    }

    /// The message of a sample's bytes (the header's, then the data) into `out`;
    /// false if they are not a header and data.
    pub fn cdr_of(self, sample: &[u8], out: &mut Vec<u8>) -> bool {
        fn go<H: Framed>(sample: &[u8], out: &mut Vec<u8>) -> bool {
            let Some((header, data)) = sample.split_at_checked(size_of::<H>()) else {
                return false;
            };
            H::from_bytes(header).is_some_and(|h| h.to_cdr(data, out).is_ok())
        }
        match self {
            Self::Image => go::<ImageHeader>(sample, out),
            Self::PointCloud2 => go::<PointCloud2Header>(sample, out),
        }
    }
}
