//! How `iox record` writes a service in MCAP's ROS 2 profile (`ros2msg` schema, `cdr`
//! messages), and how `iox replay` reads such a channel back, whoever wrote it.
//!
//! Which services have a ROS 2 form ([`ros_form`]), by the route the service's
//! attributes and types give (`iox_ros2::carried`):
//! - CDR messages of a ROS type (a `[u8]` service recording `ros2/type`, as the ROS 2
//!   gateway's imports do): written as they are, the schema the type's definition from
//!   the service's `ros2/definition`, else from the ROS install found
//!   (`AMENT_PREFIX_PATH`); without either the service is recorded as iox's own bytes;
//! - images and point clouds (a header and the data, `iox_ros2::framed`):
//!   `sensor_msgs/msg/Image` (which Foxglove shows as an image) and
//!   `sensor_msgs/msg/PointCloud2`;
//! - a typed payload: as the ROS type it records (`ros2/type`, when the install gives
//!   its definition and the struct matches it), else as a `.msg` written for it
//!   (`iox_msgs/msg/<Type>`, `iox_ros2::generate`).
//!
//! Replay: a channel recorded by iox carries the service's static config in its
//! metadata and is replayed into that service. A channel recorded by ROS 2's tools
//! (rosbag2, or `rosbags`) has none: it is replayed into a service made as the gateway
//! makes one for a topic of its type ([`foreign`]): `[u8]` CDR, or header and data for
//! images and point clouds, recording the type and the definition the file gives. Every
//! CDR message replayed is checked against the definition first (a whole message of its
//! type), and one that is not is reported and not sent.

use std::path::Path;

use iox_ros2::carried::FramedKind;
use iox_ros2::carried::{DEFINITION_KEY, Route, TYPE_KEY, ros_service, route_of};
use iox_ros2::fixed::Plan;
use iox_ros2::generate::Generated;
use iox_ros2::image::ImageHeader;
use iox_ros2::library::Library;
use iox_ros2::pointcloud::PointCloud2Header;
use iox_service::{Service, StaticConfig};

/// A service's samples as ROS 2 messages.
pub struct RosForm {
    /// The schema's name (`sensor_msgs/msg/Image`, `iox_msgs/msg/Reading`).
    pub name: String,
    /// The `ros2msg` definition.
    pub text: String,
    /// How samples convert.
    pub conversion: Conversion,
}

/// How one sample converts to and from a CDR message.
pub enum Conversion {
    /// A struct, field by field.
    Plan(Plan),
    /// CDR bytes as they are; checked against the definitions on replay.
    Cdr(Library),
    /// A header and its data (images, point clouds).
    Framed(FramedKind),
}

/// The ROS 2 form of the service of `config`, if it has one (module docs).
pub fn ros_form(config: &StaticConfig) -> Option<RosForm> {
    match route_of(config) {
        Ok((type_name, Route::Cdr)) => {
            let text = match config.attributes.get(DEFINITION_KEY) {
                Some(t) => t.to_owned(),
                None => Library::from_env().definition_text(&type_name).ok()?,
            };
            let library = Library::from_definition_text(&type_name, &text).ok()?;
            Some(RosForm {
                name: type_name,
                text,
                conversion: Conversion::Cdr(library),
            })
        }
        Ok((_, Route::Framed(kind))) => Some(RosForm {
            name: kind.ros_type().to_owned(),
            text: config
                .attributes
                .get(DEFINITION_KEY)
                .unwrap_or(kind.definition())
                .to_owned(),
            conversion: Conversion::Framed(kind),
        }),
        Ok((type_name, Route::Typed)) => {
            let mut library = Library::from_env();
            let schema = config.schema.as_ref()?;
            match (
                Plan::new(&mut library, &type_name, schema),
                library.definition_text(&type_name),
            ) {
                (Ok(plan), Ok(text)) => Some(RosForm {
                    name: type_name,
                    text,
                    conversion: Conversion::Plan(plan),
                }),
                _ => generated(config),
            }
        }
        Err(_) => generated(config),
    }
}

/// A typed payload's generated form (`iox_msgs`).
fn generated(config: &StaticConfig) -> Option<RosForm> {
    if config.user_header.is_some() || !matches!(config.payload, iox_service::PayloadType::Typed { .. }) {
        return None;
    }
    let schema = config.schema.as_ref().filter(|s| s.is_complete())?;
    let Generated { name, text, plan } =
        iox_ros2::generate::generate(schema, config.payload.type_name()).ok()?;
    Some(RosForm {
        name,
        text,
        conversion: Conversion::Plan(plan),
    })
}

impl Conversion {
    /// Writes the CDR message of one recorded sample (`sample`: the user header's
    /// bytes, then the payload's) into `out`; false if it has no such message.
    pub fn encode(&self, sample: &[u8], out: &mut Vec<u8>) -> bool {
        match self {
            Conversion::Plan(plan) if sample.len() == plan.struct_size() => {
                plan.encode(sample, out);
                true
            }
            Conversion::Plan(_) => false,
            Conversion::Cdr(_) => {
                out.clear();
                out.extend_from_slice(sample);
                true
            }
            Conversion::Framed(kind) => kind.cdr_of(sample, out),
        }
    }

    /// The sample (header bytes, then payload bytes) of the CDR message `cdr` of
    /// type `name`, or why it is not one.
    pub fn decode(&mut self, name: &str, cdr: &[u8]) -> Result<Vec<u8>, String> {
        match self {
            Conversion::Plan(plan) => {
                let mut value = vec![0u8; plan.struct_size()];
                plan.decode(cdr, &mut value).map_err(|e| e.to_string())?;
                Ok(value)
            }
            Conversion::Cdr(library) => {
                iox_ros2::cdr::check(library, name, cdr).map_err(|e| e.to_string())?;
                Ok(cdr.to_vec())
            }
            Conversion::Framed(kind) => kind.sample_of(cdr).map_err(|e| e.to_string()),
        }
    }
}

/// A service for a channel of ROS type `type_name` with definition `text` that a ROS
/// tool recorded (module docs): its static config, a handle that keeps it while the
/// replay runs, and the conversion of its messages.
pub fn foreign(
    root: &Path,
    topic: &str,
    type_name: &str,
    text: &str,
) -> Result<(StaticConfig, Box<dyn std::any::Any>, RosForm), String> {
    let name = topic.trim_start_matches('/');
    let library =
        Library::from_definition_text(type_name, text).map_err(|e| format!("its definition: {e}"))?;
    let builder = Service::named(name)
        .map_err(|e| e.to_string())?
        .root(root)
        .publish_subscribe::<[u8]>();
    let form = |conversion| RosForm {
        name: type_name.to_owned(),
        text: text.to_owned(),
        conversion,
    };
    let check = |config: &StaticConfig| match config.attributes.get(TYPE_KEY) {
        Some(t) if t == type_name => Ok(()),
        other => Err(format!(
            "service {name:?} exists and records ROS type {}, not {type_name}",
            other.unwrap_or("none")
        )),
    };
    let made = |service: Box<dyn std::any::Any>, config: StaticConfig, conversion| {
        check(&config)?;
        Ok((config, service, form(conversion)))
    };
    match FramedKind::of_ros_type(type_name) {
        Some(kind @ FramedKind::Image) => {
            let s = ros_service(builder.user_header::<ImageHeader>(), type_name, text)
                .open_or_create()
                .map_err(|e| e.to_string())?;
            let config = s.static_config().clone();
            made(Box::new(s), config, Conversion::Framed(kind))
        }
        Some(kind @ FramedKind::PointCloud2) => {
            let s = ros_service(builder.user_header::<PointCloud2Header>(), type_name, text)
                .open_or_create()
                .map_err(|e| e.to_string())?;
            let config = s.static_config().clone();
            made(Box::new(s), config, Conversion::Framed(kind))
        }
        None => {
            let s = ros_service(builder, type_name, text)
                .open_or_create()
                .map_err(|e| e.to_string())?;
            let config = s.static_config().clone();
            made(Box::new(s), config, Conversion::Cdr(library))
        }
    }
}
