//! `sensor_msgs/msg/PointCloud2` as iox carries it zero-copy: a fixed
//! [`PointCloud2Header`] (the sample's user header: every field but `data`, the point
//! fields as a bounded list of [`PointFieldEntry`]) and the points as the sample's
//! bytes, in one chunk, so an iox reader gets the points in place without decoding.
//!
//! Bounds: at most [`FIELDS_MAX`] point fields with names of at most
//! [`FIELD_NAME_MAX`] bytes, a `frame_id` of at most [`FRAME_ID_MAX`] bytes; a message
//! over them is refused ([`FramedError::TooLong`]), never cut. `is_bigendian` and
//! `is_dense` are ROS `bool`s: a message holding another byte there is malformed, and a
//! header holding one is written as `true`.

use std::ops::Range;

use iox_service::ZeroCopySafe;

use crate::cdr::{Reader, Writer};
use crate::fixed::CdrError;
use crate::framed::{Framed, FramedError, put, used};

/// The ROS type this converts.
pub const POINTCLOUD2_TYPE: &str = "sensor_msgs/msg/PointCloud2";
/// Most point fields a [`PointCloud2Header`] holds.
pub const FIELDS_MAX: usize = 16;
/// Longest point field name, in bytes.
pub const FIELD_NAME_MAX: usize = 32;
/// Longest `header.frame_id`, in bytes.
pub const FRAME_ID_MAX: usize = 128;

/// `sensor_msgs/msg/PointCloud2`'s definition as MCAP's `ros2msg` encoding holds it.
pub const POINTCLOUD2_DEFINITION: &str = "std_msgs/Header header\nuint32 height\nuint32 width\nsensor_msgs/PointField[] fields\nbool is_bigendian\nuint32 point_step\nuint32 row_step\nuint8[] data\nbool is_dense\n\
================================================================================\nMSG: std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id\n\
================================================================================\nMSG: sensor_msgs/PointField\nstring name\nuint32 offset\nuint8 datatype\nuint32 count\n\
================================================================================\nMSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n";

/// One `sensor_msgs/msg/PointField`.
#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
#[iox(type_name = "ros2 sensor_msgs/msg/PointField entry")]
pub struct PointFieldEntry {
    /// Offset of the field in a point.
    pub offset: u32,
    /// Elements in the field.
    pub count: u32,
    /// `INT8` (1) .. `FLOAT64` (8).
    pub datatype: u8,
    /// Bytes of `name` used.
    pub name_len: u8,
    /// Zero.
    pub reserved: [u8; 2],
    /// The field's name (`x`, `intensity`), its first `name_len` bytes.
    pub name: [u8; FIELD_NAME_MAX],
}

impl PointFieldEntry {
    /// A field named `name`.
    pub fn new(name: &str, offset: u32, datatype: u8, count: u32) -> Result<Self, FramedError> {
        let mut f = Self {
            offset,
            count,
            datatype,
            name_len: 0,
            reserved: [0; 2],
            name: [0; FIELD_NAME_MAX],
        };
        f.name_len = put(&mut f.name, name.as_bytes(), "field name")?;
        Ok(f)
    }

    /// The field's name.
    pub fn name(&self) -> &[u8] {
        used(&self.name, self.name_len)
    }
}

/// Every field of a `sensor_msgs/msg/PointCloud2` but its points (module docs).
///
/// ```
/// use iox_ros2::framed::Framed;
/// use iox_ros2::pointcloud::{PointCloud2Header, PointFieldEntry};
/// let xyz = ["x", "y", "z"].map(|n| n.to_owned());
/// let fields: Vec<_> = xyz.iter().enumerate()
///     .map(|(i, n)| PointFieldEntry::new(n, 4 * i as u32, 7, 1))
///     .collect::<Result<_, _>>()?;
/// let h = PointCloud2Header::new(1, 2, 12, &fields, "lidar")?;
/// let mut cdr = Vec::new();
/// h.to_cdr(&[0; 24], &mut cdr)?;
/// let (back, points) = PointCloud2Header::from_cdr(&cdr)?;
/// assert_eq!(back, h);
/// assert_eq!(points.len(), 24);
/// assert_eq!(back.fields()[2].name(), b"z");
/// # Ok::<(), iox_ros2::framed::FramedError>(())
/// ```
#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
#[iox(type_name = "ros2 sensor_msgs/msg/PointCloud2 header")]
pub struct PointCloud2Header {
    /// `header.stamp.sec`.
    pub sec: i32,
    /// `header.stamp.nanosec`.
    pub nanosec: u32,
    /// Rows (1 for an unordered cloud).
    pub height: u32,
    /// Points per row.
    pub width: u32,
    /// Bytes per point.
    pub point_step: u32,
    /// Bytes per row.
    pub row_step: u32,
    /// Whether multi-byte values are big-endian (0 or 1).
    pub is_bigendian: u8,
    /// Whether no point is invalid (0 or 1).
    pub is_dense: u8,
    /// Bytes of `frame_id` used.
    pub frame_id_len: u8,
    /// Entries of `fields` used.
    pub field_count: u8,
    /// `header.frame_id`, its first `frame_id_len` bytes.
    pub frame_id: [u8; FRAME_ID_MAX],
    /// The point fields, the first `field_count`.
    pub fields: [PointFieldEntry; FIELDS_MAX],
}

impl PointCloud2Header {
    /// A header for `height` x `width` points of `point_step` bytes with `fields`,
    /// stamp zero, dense, little-endian.
    pub fn new(
        height: u32,
        width: u32,
        point_step: u32,
        fields: &[PointFieldEntry],
        frame_id: &str,
    ) -> Result<Self, FramedError> {
        let empty = PointFieldEntry {
            offset: 0,
            count: 0,
            datatype: 0,
            name_len: 0,
            reserved: [0; 2],
            name: [0; FIELD_NAME_MAX],
        };
        let mut h = Self {
            sec: 0,
            nanosec: 0,
            height,
            width,
            point_step,
            row_step: width.saturating_mul(point_step),
            is_bigendian: 0,
            is_dense: 1,
            frame_id_len: 0,
            field_count: 0,
            frame_id: [0; FRAME_ID_MAX],
            fields: [empty; FIELDS_MAX],
        };
        h.frame_id_len = put(&mut h.frame_id, frame_id.as_bytes(), "frame_id")?;
        if fields.len() > FIELDS_MAX {
            return Err(FramedError::TooLong {
                field: "fields",
                len: fields.len(),
                max: FIELDS_MAX,
            });
        }
        h.fields[..fields.len()].copy_from_slice(fields);
        h.field_count = fields.len() as u8;
        Ok(h)
    }

    /// The point fields used.
    pub fn fields(&self) -> &[PointFieldEntry] {
        &self.fields[..(self.field_count as usize).min(FIELDS_MAX)]
    }

    /// `header.frame_id`'s bytes.
    pub fn frame_id(&self) -> &[u8] {
        used(&self.frame_id, self.frame_id_len)
    }
}

fn ros_bool(r: &mut Reader<'_>, field: &str) -> Result<u8, FramedError> {
    match r.u8(field)? {
        v @ (0 | 1) => Ok(v),
        value => Err(CdrError::Bool {
            field: field.to_owned(),
            value,
        }
        .into()),
    }
}

impl crate::framed::Sealed for PointCloud2Header {}

impl Framed for PointCloud2Header {
    const ROS_TYPE: &'static str = POINTCLOUD2_TYPE;
    const DEFINITION: &'static str = POINTCLOUD2_DEFINITION;

    fn from_cdr(cdr: &[u8]) -> Result<(Self, Range<usize>), FramedError> {
        let mut r = Reader::new(cdr)?;
        let sec = r.i32("header.stamp.sec")?;
        let nanosec = r.u32("header.stamp.nanosec")?;
        let frame_id = r.string("header.frame_id")?;
        let height = r.u32("height")?;
        let width = r.u32("width")?;
        let n = r.u32("fields")? as usize;
        if n > FIELDS_MAX {
            return Err(FramedError::TooLong {
                field: "fields",
                len: n,
                max: FIELDS_MAX,
            });
        }
        let mut fields = Vec::with_capacity(n);
        for _ in 0..n {
            let name = r.string("fields.name")?;
            let offset = r.u32("fields.offset")?;
            let datatype = r.u8("fields.datatype")?;
            let count = r.u32("fields.count")?;
            let mut f = PointFieldEntry::new("", offset, datatype, count)?;
            f.name_len = put(&mut f.name, name, "field name")?;
            fields.push(f);
        }
        let is_bigendian = ros_bool(&mut r, "is_bigendian")?;
        let point_step = r.u32("point_step")?;
        let row_step = r.u32("row_step")?;
        let len = r.u32("data")? as usize;
        let start = r.offset();
        r.bytes(1, len, "data")?;
        let is_dense = ros_bool(&mut r, "is_dense")?;
        let mut h = Self::new(height, width, point_step, &fields, "")?;
        h.frame_id_len = put(&mut h.frame_id, frame_id, "frame_id")?;
        (h.sec, h.nanosec, h.row_step, h.is_bigendian, h.is_dense) =
            (sec, nanosec, row_step, is_bigendian, is_dense);
        Ok((h, start..start + len))
    }

    fn to_cdr(&self, points: &[u8], out: &mut Vec<u8>) -> Result<(), FramedError> {
        if self.field_count as usize > FIELDS_MAX {
            return Err(FramedError::TooLong {
                field: "fields",
                len: self.field_count as usize,
                max: FIELDS_MAX,
            });
        }
        out.reserve(points.len() + 256 + FRAME_ID_MAX + FIELDS_MAX * (FIELD_NAME_MAX + 16));
        let mut w = Writer::new(out);
        w.i32(self.sec);
        w.u32(self.nanosec);
        w.string(self.frame_id());
        w.u32(self.height);
        w.u32(self.width);
        w.u32(self.field_count as u32);
        for f in self.fields() {
            w.string(f.name());
            w.u32(f.offset);
            w.u8(f.datatype);
            w.u32(f.count);
        }
        w.u8((self.is_bigendian != 0) as u8);
        w.u32(self.point_step);
        w.u32(self.row_step);
        w.byte_sequence(points);
        w.u8((self.is_dense != 0) as u8);
        w.finish();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cloud() -> (PointCloud2Header, Vec<u8>) {
        let f = ["x", "y", "z", "intensity"]
            .iter()
            .enumerate()
            .map(|(i, n)| PointFieldEntry::new(n, 4 * i as u32, 7, 1).unwrap())
            .collect::<Vec<_>>();
        let mut h = PointCloud2Header::new(1, 3, 16, &f, "lidar").unwrap();
        h.sec = 9;
        let mut cdr = Vec::new();
        h.to_cdr(&[5; 48], &mut cdr).unwrap();
        (h, cdr)
    }

    #[test]
    fn every_cut_and_bad_bool_is_refused() {
        let (h, cdr) = cloud();
        assert_eq!(PointCloud2Header::from_cdr(&cdr).unwrap().0, h);
        for cut in 0..cdr.len() - 4 {
            assert!(PointCloud2Header::from_cdr(&cdr[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = cdr.clone();
        let dense = cdr.len() - 4; // the last byte before the padding
        assert_eq!(bad[dense], 1);
        bad[dense] = 2;
        assert!(matches!(
            PointCloud2Header::from_cdr(&bad),
            Err(FramedError::Cdr(CdrError::Bool { .. }))
        ));
    }

    #[test]
    fn bytes_round_trip_and_too_many_fields_are_refused() {
        let (h, _) = cloud();
        assert_eq!(PointCloud2Header::from_bytes(&h.to_bytes()), Some(h));
        // No padding: the fields fill it.
        assert_eq!(size_of::<PointFieldEntry>(), 4 + 4 + 1 + 1 + 2 + FIELD_NAME_MAX);
        assert_eq!(
            size_of::<PointCloud2Header>(),
            6 * 4 + 4 + FRAME_ID_MAX + FIELDS_MAX * size_of::<PointFieldEntry>()
        );
        let many = vec![PointFieldEntry::new("x", 0, 7, 1).unwrap(); FIELDS_MAX + 1];
        assert!(matches!(
            PointCloud2Header::new(1, 1, 4, &many, ""),
            Err(FramedError::TooLong { field: "fields", .. })
        ));
    }
}
