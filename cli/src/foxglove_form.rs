//! How a service looks in Foxglove (`iox foxglove`): its channel's schema and message encoding, and
//! each sample's message, chosen from what the service's static config records.
//!
//! Forms ([`form_of`], first that applies):
//! 1. a host tensor service (`tensors(true)`) of `u8`: `sensor_msgs/msg/Image` in CDR,
//!    each tensor of shape `[h, w]` or `[h, w, 1]` as `mono8`, `[h, w, 3]` as `rgb8`,
//!    `[h, w, 4]` as `rgba8` (other shapes, and strided tensors, are not shown: said
//!    once, counted);
//! 2. a host tensor service of any other element type: JSON `{"dtype", "shape",
//!    "data"}`, `data` the elements in row-major order (at most [`MAX_VALUES`]; `f16`
//!    and `bf16` widened to exact `f64`s);
//! 3. a service with a ROS 2 form (`crate::ros_form`, what `iox record` writes): CDR
//!    of a ROS type (`ros2/type`, with its definition), images and point clouds of
//!    the gateway's headers as `sensor_msgs/msg/Image` / `PointCloud2` (which Foxglove
//!    draws), typed structs as their ROS type or an `iox_msgs/msg/<Type>` written for
//!    them, all `ros2msg` schemas and `cdr` messages;
//! 4. any other payload with a schema but `[u8]` (slices of structs or numbers, structs
//!    ROS cannot hold such as 128-bit numbers or tuples): JSON with a JSON schema of
//!    named fields. The top level is an object: a struct's fields, or `{"data": v}`
//!    for other payloads, or `{"header": h, "data": v}` for a service with a user
//!    header. Numbers are exact: integers beyond 2^53 (what a JSON reader's doubles
//!    hold) and non-finite floats are strings. An array longer than [`MAX_VALUES`]
//!    ends in a string `"... N more"`;
//! 5. everything else (`[u8]` without a ROS type, or a payload without a schema): the
//!    raw form, `iox_msgs/msg/Bytes` (`uint8[] data`) in CDR, the data the user
//!    header's bytes (channel metadata `iox.header_bytes` says how many) then the
//!    payload's, as `iox record` writes them.
//!
//! A service whose payload or header has padding and no schema naming every field is
//! not shown at all ([`form_of`] says why): its padding bytes may not be read.

use std::collections::BTreeMap;

use iox_ros2::carried::FramedKind;
use iox_ros2::framed::Framed;
use iox_ros2::image::ImageHeader;
use iox_service::tensor::{DType, TensorLayout};
use iox_service::{PayloadType, Schema, StaticConfig};
use serde_json::{Value as Json, json};

use crate::readable::{by_schema_or_bytes, header_by_schema_or_bytes};
use crate::ros_form::{Conversion, ros_form};
use crate::value::{self, Value};

/// Most elements of one array (a tensor's, a slice's, a struct's array field) sent as
/// JSON values per sample (the rest counted in a trailing `"... N more"` string).
pub const MAX_VALUES: usize = 1 << 16;
/// Largest integer every JSON reader holds exactly (a double's 53-bit mantissa).
const EXACT: u128 = 1 << 53;
/// The raw form's definition (module docs).
const RAW_DEFINITION: &str = "# The sample's bytes: the user header's (channel metadata iox.header_bytes), then the payload's.\nuint8[] data\n";
/// CDR's encapsulation header: plain CDR, little-endian.
const CDR_LE: [u8; 4] = [0, 1, 0, 0];

/// A channel to advertise: a service as Foxglove sees it.
#[derive(Debug, Clone)]
pub struct ChannelSpec {
    /// The topic.
    pub topic: String,
    /// The message encoding (`cdr`, `json`).
    pub encoding: String,
    /// The schema's name.
    pub schema_name: String,
    /// The schema's encoding (`ros2msg`, `jsonschema`).
    pub schema_encoding: String,
    /// The schema.
    pub schema: Vec<u8>,
    /// Metadata shown with the channel.
    pub metadata: BTreeMap<String, String>,
}

/// A service's channel and how its samples become messages.
pub struct Form {
    /// The channel to advertise.
    pub spec: ChannelSpec,
    /// Bytes of the user header at the start of each copied sample.
    header_bytes: usize,
    /// The conversion.
    pub encoding: Encoding,
}

/// How one sample becomes a message.
pub enum Encoding {
    /// ROS 2 CDR (form 3).
    Ros(Conversion),
    /// JSON of the header and payload schemas (form 4).
    Json {
        header: Option<Schema>,
        payload: Schema,
        slice: bool,
    },
    /// A `u8` tensor as an image (form 1).
    TensorImage,
    /// Tensor values (form 2).
    TensorValues(DType),
    /// The bytes (form 5).
    Raw,
}

/// One received sample, copied out of shared memory.
pub struct Copied<'a> {
    /// The user header's bytes, then the payload's.
    pub bytes: &'a [u8],
    /// A tensor sample's layout.
    pub tensor: Option<&'a TensorLayout>,
    /// When it was received (ns since the Unix epoch).
    pub at: u64,
}

/// The form of service `name` with static config `config` (module docs), or why it
/// is not shown.
pub fn form_of(name: &str, config: &StaticConfig) -> Result<Form, String> {
    if !by_schema_or_bytes(config) {
        return Err(format!(
            "its payload {} has padding or invalid bit patterns and no schema describes all its bytes",
            config.payload
        ));
    }
    if !header_by_schema_or_bytes(config) {
        return Err(
            "its user header has padding or invalid bit patterns and no schema describes all its bytes"
                .into(),
        );
    }
    let mut metadata = BTreeMap::from([("iox.payload".to_owned(), config.payload.to_string())]);
    let spec =
        |encoding: &str, schema_name: &str, schema_encoding: &str, schema: Vec<u8>, metadata| ChannelSpec {
            topic: format!("/{name}"),
            encoding: encoding.into(),
            schema_name: schema_name.into(),
            schema_encoding: schema_encoding.into(),
            schema,
            metadata,
        };
    let header_bytes = config.user_header.as_ref().map_or(0, |h| h.size());
    let tensor = config
        .publish_subscribe()
        .is_some_and(|p| p.tensors)
        .then(|| config.tensor_element())
        .flatten();
    if let Some(dtype) = tensor {
        return Ok(if dtype == DType::U8 {
            Form {
                spec: spec(
                    "cdr",
                    FramedKind::Image.ros_type(),
                    "ros2msg",
                    FramedKind::Image.definition().into(),
                    metadata,
                ),
                encoding: Encoding::TensorImage,
                header_bytes,
            }
        } else {
            Form {
                spec: spec("json", "iox.Tensor", "jsonschema", tensor_schema(dtype), metadata),
                encoding: Encoding::TensorValues(dtype),
                header_bytes,
            }
        });
    }
    if let Some(ros) = ros_form(config) {
        return Ok(Form {
            spec: spec("cdr", &ros.name, "ros2msg", ros.text.into_bytes(), metadata),
            encoding: Encoding::Ros(ros.conversion),
            header_bytes,
        });
    }
    let bytes_payload = config.payload == <[u8] as iox_service::Payload>::payload_type();
    match &config.schema {
        Some(payload) if !bytes_payload => {
            // A header without a schema is shown as its bytes.
            let header = config.user_header.as_ref().map(|h| {
                h.schema.clone().unwrap_or(Schema::Bytes {
                    size: header_bytes as u64,
                })
            });
            let slice = matches!(config.payload, PayloadType::Slice { .. });
            let schema = json_schema_of(config.payload.type_name(), header.as_ref(), payload, slice);
            Ok(Form {
                spec: spec("json", config.payload.type_name(), "jsonschema", schema, metadata),
                encoding: Encoding::Json {
                    header,
                    payload: payload.clone(),
                    slice,
                },
                header_bytes,
            })
        }
        _ => {
            metadata.insert("iox.header_bytes".into(), header_bytes.to_string());
            Ok(Form {
                spec: spec(
                    "cdr",
                    "iox_msgs/msg/Bytes",
                    "ros2msg",
                    RAW_DEFINITION.into(),
                    metadata,
                ),
                encoding: Encoding::Raw,
                header_bytes,
            })
        }
    }
}

impl Form {
    /// The message of one sample into `out`, or why the sample is not shown.
    pub fn encode(&self, sample: &Copied<'_>, out: &mut Vec<u8>) -> Result<(), String> {
        out.clear();
        match &self.encoding {
            Encoding::Ros(conversion) => conversion
                .encode(sample.bytes, out)
                .then_some(())
                .ok_or_else(|| "the sample is not a message of its ROS type".into()),
            Encoding::Json {
                header,
                payload,
                slice,
            } => {
                let (h, p) = sample.bytes.split_at_checked(self.header_bytes).ok_or_else(|| {
                    format!(
                        "{} bytes, fewer than its {}-byte header",
                        sample.bytes.len(),
                        self.header_bytes
                    )
                })?;
                let header_value = header.as_ref().map(|s| value::decode(s, h, MAX_VALUES));
                let size = payload.size().unwrap_or(0) as usize;
                let payload_value = if *slice {
                    value::decode_slice(payload, p, MAX_VALUES)
                } else if p.len() == size {
                    value::decode(payload, p, MAX_VALUES)
                } else {
                    return Err(format!("{} bytes, not the {size} its schema has", p.len()));
                };
                let top = match (header_value, payload_value) {
                    (None, Value::Struct(fields)) if !slice => exact(Value::Struct(fields)),
                    (None, v) => json!({ "data": exact(v) }),
                    (Some(h), v) => json!({ "header": exact(h), "data": exact(v) }),
                };
                serde_json::to_writer(&mut *out, &top).map_err(|e| e.to_string())
            }
            Encoding::TensorImage => {
                let layout = sample.tensor.ok_or("no tensor record")?;
                let (encoding, channels) = match layout.shape() {
                    [_, _] | [_, _, 1] => ("mono8", 1),
                    [_, _, 3] => ("rgb8", 3),
                    [_, _, 4] => ("rgba8", 4),
                    shape => {
                        return Err(format!(
                            "a u8 tensor of shape {shape:?} is no image (h x w, h x w x 1, 3 or 4)"
                        ));
                    }
                };
                let (h, w) = (layout.shape()[0], layout.shape()[1]);
                let too_big = || format!("a {h} x {w} image is larger than sensor_msgs/msg/Image holds");
                let step = w
                    .checked_mul(channels)
                    .and_then(|s| u32::try_from(s).ok())
                    .ok_or_else(too_big)?;
                let (h, w) = (u32::try_from(h).map_err(|_| too_big())?, w as u32);
                if u64::from(h) * u64::from(step) != sample.bytes.len() as u64 {
                    return Err(format!(
                        "{} bytes, not the {h} x {step} its shape has",
                        sample.bytes.len()
                    ));
                }
                let mut header = ImageHeader::new(h, w, step, encoding, "").map_err(|e| e.to_string())?;
                header.sec = i32::try_from(sample.at / 1_000_000_000).unwrap_or(i32::MAX);
                header.nanosec = (sample.at % 1_000_000_000) as u32;
                header.to_cdr(sample.bytes, out).map_err(|e| e.to_string())
            }
            Encoding::TensorValues(dtype) => {
                let layout = sample.tensor.ok_or("no tensor record")?;
                let top = json!({
                    "dtype": dtype.name(),
                    "shape": layout.shape(),
                    "data": exact(tensor_values(*dtype, sample.bytes)),
                });
                serde_json::to_writer(&mut *out, &top).map_err(|e| e.to_string())
            }
            Encoding::Raw => {
                let len = u32::try_from(sample.bytes.len()).map_err(|_| "a sample of 4 GiB or more")?;
                out.extend_from_slice(&CDR_LE);
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(sample.bytes);
                Ok(())
            }
        }
    }
}

/// A tensor's elements (`bytes`, contiguous) as values; `f16`/`bf16` widened.
fn tensor_values(dtype: DType, bytes: &[u8]) -> Value {
    let schema = match dtype {
        DType::Bool => Schema::Bool,
        DType::U8 => Schema::U8,
        DType::U16 => Schema::U16,
        DType::U32 => Schema::U32,
        DType::U64 => Schema::U64,
        DType::I8 => Schema::I8,
        DType::I16 => Schema::I16,
        DType::I32 => Schema::I32,
        DType::I64 => Schema::I64,
        DType::F32 => Schema::F32,
        DType::F64 => Schema::F64,
        DType::F16 | DType::BF16 => {
            let count = bytes.len() / 2;
            let mut out: Vec<Value> = bytes
                .chunks_exact(2)
                .take(MAX_VALUES)
                .map(|b| {
                    let bits = u16::from_ne_bytes([b[0], b[1]]);
                    Value::Float(if dtype == DType::F16 {
                        half::f16::from_bits(bits).to_f64()
                    } else {
                        half::bf16::from_bits(bits).to_f64()
                    })
                })
                .collect();
            if count > MAX_VALUES {
                out.push(Value::More(count - MAX_VALUES));
            }
            return Value::Array(out);
        }
        // A newer iox's element type: its bytes.
        _ => return Value::Bytes(bytes.to_vec()),
    };
    value::decode_slice(&schema, bytes, MAX_VALUES)
}

/// `v` as JSON, numbers exact (module docs).
fn exact(v: Value) -> Json {
    match v {
        Value::Bool(b) => Json::Bool(b),
        Value::Int(n) if n.unsigned_abs() <= EXACT => json!(n as i64),
        Value::UInt(n) if n <= EXACT => json!(n as u64),
        Value::Int(n) => Json::String(n.to_string()),
        Value::UInt(n) => Json::String(n.to_string()),
        Value::Float(f) => {
            serde_json::Number::from_f64(f).map_or_else(|| Json::String(f.to_string()), Json::Number)
        }
        Value::Array(items) => Json::Array(items.into_iter().map(exact).collect()),
        Value::More(n) => Json::String(format!("... {n} more")),
        Value::Struct(fields) => Json::Object(fields.into_iter().map(|(k, v)| (k, exact(v))).collect()),
        Value::Bytes(b) => Json::String(b.iter().map(|b| format!("{b:02x}")).collect()),
        Value::Text(t) => Json::String(t),
    }
}

/// The JSON schema of one value of `schema` (module docs: exact numbers).
fn json_schema(schema: &Schema) -> Json {
    let number = |big: bool, float: bool| match (big, float) {
        (_, true) => json!({ "type": ["number", "string"] }),
        (true, false) => json!({ "type": ["integer", "string"] }),
        (false, false) => json!({ "type": "integer" }),
    };
    match schema {
        Schema::Bool => json!({ "type": "boolean" }),
        Schema::U8 | Schema::U16 | Schema::U32 | Schema::I8 | Schema::I16 | Schema::I32 => {
            number(false, false)
        }
        Schema::U64 | Schema::U128 | Schema::I64 | Schema::I128 => number(true, false),
        Schema::F32 | Schema::F64 => number(false, true),
        Schema::Array { element, len } => json!({
            "type": "array", "items": json_schema(element), "minItems": len, "maxItems": len,
        }),
        Schema::Struct { name, fields, .. } => json!({
            "type": "object",
            "title": name,
            "properties": fields.iter().map(|f| (f.name.clone(), json_schema(&f.schema))).collect::<serde_json::Map<_, _>>(),
            "required": fields.iter().map(|f| f.name.clone()).collect::<Vec<_>>(),
        }),
        // Bytes of unknown layout (and f16, which `iox echo` shows as bytes too).
        _ => json!({ "type": "string", "description": "bytes of unknown layout, in hex" }),
    }
}

/// The channel schema of form 4 (module docs).
fn json_schema_of(title: &str, header: Option<&Schema>, payload: &Schema, slice: bool) -> Vec<u8> {
    let value = if slice {
        json!({ "type": "array", "items": json_schema(payload) })
    } else {
        json_schema(payload)
    };
    let top = match header {
        None if !slice && matches!(payload, Schema::Struct { .. }) => value,
        None => json!({ "type": "object", "title": title, "properties": { "data": value } }),
        Some(header) => json!({
            "type": "object",
            "title": title,
            "properties": { "header": json_schema(header), "data": value },
        }),
    };
    top.to_string().into_bytes()
}

/// The channel schema of form 2 (module docs).
fn tensor_schema(dtype: DType) -> Vec<u8> {
    let item = match dtype {
        DType::U64 | DType::I64 => json!({ "type": ["integer", "string"] }),
        DType::Bool => json!({ "type": "boolean" }),
        DType::F16 | DType::BF16 | DType::F32 | DType::F64 => json!({ "type": ["number", "string"] }),
        _ => json!({ "type": "integer" }),
    };
    json!({
        "type": "object",
        "title": "iox.Tensor",
        "properties": {
            "dtype": { "type": "string" },
            "shape": { "type": "array", "items": { "type": "integer" } },
            "data": { "type": "array", "items": item, "description": "the elements, row-major" },
        },
    })
    .to_string()
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_beyond_a_double_and_non_finite_floats_are_strings() {
        assert_eq!(exact(Value::UInt(1 << 53)), json!(9007199254740992u64));
        assert_eq!(exact(Value::UInt((1 << 53) + 1)), json!("9007199254740993"));
        assert_eq!(exact(Value::Int(-(1 << 60))), json!("-1152921504606846976"));
        assert_eq!(exact(Value::Float(f64::NAN)), json!("NaN"));
        assert_eq!(exact(Value::Float(0.5)), json!(0.5));
    }

    #[test]
    fn long_slices_are_cut_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let svc = iox_service::Service::named("long")
            .unwrap()
            .root(dir.path())
            .publish_subscribe::<[u32]>()
            .max_slice_len(MAX_VALUES + 10)
            .create()
            .unwrap();
        let form = form_of("long", svc.static_config()).unwrap();
        let bytes = vec![1u8; (MAX_VALUES + 10) * 4];
        let mut out = Vec::new();
        form.encode(
            &Copied {
                bytes: &bytes,
                tensor: None,
                at: 0,
            },
            &mut out,
        )
        .unwrap();
        let v: Json = serde_json::from_slice(&out).unwrap();
        let data = v["data"].as_array().unwrap();
        assert_eq!(data.len(), MAX_VALUES + 1);
        assert_eq!(data[MAX_VALUES], json!("... 10 more"));
    }

    #[test]
    fn a_user_header_comes_first_by_its_schema() {
        let dir = tempfile::tempdir().unwrap();
        let svc = iox_service::Service::named("headed")
            .unwrap()
            .root(dir.path())
            .publish_subscribe::<[u32]>()
            .user_header::<u64>()
            .max_slice_len(2)
            .create()
            .unwrap();
        let form = form_of("headed", svc.static_config()).unwrap();
        let bytes: Vec<u8> = [
            7u64.to_ne_bytes().as_slice(),
            &5u32.to_ne_bytes(),
            &6u32.to_ne_bytes(),
        ]
        .concat();
        let mut out = Vec::new();
        form.encode(
            &Copied {
                bytes: &bytes,
                tensor: None,
                at: 0,
            },
            &mut out,
        )
        .unwrap();
        let v: Json = serde_json::from_slice(&out).unwrap();
        assert_eq!(v, json!({ "header": 7, "data": [5, 6] }));
        assert!(
            form.encode(
                &Copied {
                    bytes: &bytes[..4],
                    tensor: None,
                    at: 0
                },
                &mut out
            )
            .is_err()
        );
    }

    #[test]
    fn half_floats_widen_exactly() {
        let v = tensor_values(DType::F16, &half::f16::from_f32(0.333).to_bits().to_ne_bytes());
        assert_eq!(
            v,
            Value::Array(vec![Value::Float(half::f16::from_f32(0.333).to_f64())])
        );
    }
}
