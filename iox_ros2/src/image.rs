//! `sensor_msgs/msg/Image` as iox carries it zero-copy: a fixed [`ImageHeader`] (the
//! user header of the sample) and the pixels as the sample's byte slice, in one chunk,
//! so an iox reader gets the pixels in place without decoding anything.
//!
//! The header holds every field of the message but `data`: the stamp, `height`,
//! `width`, `step`, `is_bigendian`, and the two strings (`header.frame_id`,
//! `encoding`) as bytes with their lengths, at most [`FRAME_ID_MAX`] and
//! [`ENCODING_MAX`] bytes (longer ones are refused with [`FramedError::TooLong`], not
//! cut). The slice is `data`, byte for byte; its length is the slice's length (ROS
//! itself does not require `step * height`, and neither is it checked here).
//!
//! Converting is one copy of the pixels each way ([`Framed::from_cdr`] gives where
//! they are in the CDR message; [`Framed::to_cdr`] writes a message around them),
//! and the layout is fixed: the same in Rust, Python (`iox.ros2.IMAGE_HEADER`) and C.

use std::ops::Range;

use iox_service::ZeroCopySafe;

use crate::cdr::{Reader, Writer};
use crate::framed::{Framed, FramedError, put, used};

/// Longest `encoding` an [`ImageHeader`] holds, in bytes.
pub const ENCODING_MAX: usize = 32;
/// Longest `header.frame_id` an [`ImageHeader`] holds, in bytes.
pub const FRAME_ID_MAX: usize = 128;

/// The ROS type these convert.
pub const IMAGE_TYPE: &str = "sensor_msgs/msg/Image";

/// `sensor_msgs/msg/Image`'s definition as MCAP's `ros2msg` encoding holds it (fields
/// only, with the types it uses).
pub const IMAGE_DEFINITION: &str = "std_msgs/Header header\nuint32 height\nuint32 width\nstring encoding\nuint8 is_bigendian\nuint32 step\nuint8[] data\n\
================================================================================\nMSG: std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id\n\
================================================================================\nMSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n";

/// Bytes of an [`ImageHeader`].
pub const HEADER_LEN: usize = std::mem::size_of::<ImageHeader>();

/// Every field of a `sensor_msgs/msg/Image` but its pixels (module docs).
///
/// ```
/// use iox_ros2::{framed::Framed, image::ImageHeader};
/// let mut h = ImageHeader::new(480, 640, 640 * 3, "rgb8", "camera")?;
/// h.sec = 7;
/// let mut cdr = Vec::new();
/// h.to_cdr(&[1, 2, 3], &mut cdr)?;
/// let (back, pixels) = ImageHeader::from_cdr(&cdr)?;
/// assert_eq!(back, h);
/// assert_eq!(&cdr[pixels], &[1, 2, 3]);
/// assert_eq!(back.encoding(), b"rgb8");
/// # Ok::<(), iox_ros2::framed::FramedError>(())
/// ```
#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
#[iox(type_name = "ros2 sensor_msgs/msg/Image header")]
pub struct ImageHeader {
    /// `header.stamp.sec`.
    pub sec: i32,
    /// `header.stamp.nanosec`.
    pub nanosec: u32,
    /// Rows.
    pub height: u32,
    /// Columns.
    pub width: u32,
    /// Bytes per row.
    pub step: u32,
    /// Whether multi-byte pixel values are big-endian.
    pub is_bigendian: u8,
    /// Bytes of `encoding` used.
    pub encoding_len: u8,
    /// Bytes of `frame_id` used.
    pub frame_id_len: u8,
    /// Zero.
    pub reserved: u8,
    /// `encoding` (`rgb8`, `mono16`, ...), its first `encoding_len` bytes.
    pub encoding: [u8; ENCODING_MAX],
    /// `header.frame_id`, its first `frame_id_len` bytes.
    pub frame_id: [u8; FRAME_ID_MAX],
}

impl ImageHeader {
    /// A header for `height` x `width` pixels with `step` bytes per row, stamp zero.
    pub fn new(
        height: u32,
        width: u32,
        step: u32,
        encoding: &str,
        frame_id: &str,
    ) -> Result<Self, FramedError> {
        let mut h = Self {
            sec: 0,
            nanosec: 0,
            height,
            width,
            step,
            is_bigendian: 0,
            encoding_len: 0,
            frame_id_len: 0,
            reserved: 0,
            encoding: [0; ENCODING_MAX],
            frame_id: [0; FRAME_ID_MAX],
        };
        h.set_encoding(encoding.as_bytes())?;
        h.set_frame_id(frame_id.as_bytes())?;
        Ok(h)
    }

    /// Sets `encoding`.
    pub fn set_encoding(&mut self, text: &[u8]) -> Result<(), FramedError> {
        self.encoding_len = put(&mut self.encoding, text, "encoding")?;
        Ok(())
    }

    /// Sets `header.frame_id`.
    pub fn set_frame_id(&mut self, text: &[u8]) -> Result<(), FramedError> {
        self.frame_id_len = put(&mut self.frame_id, text, "frame_id")?;
        Ok(())
    }

    /// `encoding`'s bytes (a length past the array, which only a faulty writer leaves,
    /// reads as the whole array).
    pub fn encoding(&self) -> &[u8] {
        used(&self.encoding, self.encoding_len)
    }

    /// `header.frame_id`'s bytes (as [`encoding`](Self::encoding)).
    pub fn frame_id(&self) -> &[u8] {
        used(&self.frame_id, self.frame_id_len)
    }
}

impl crate::framed::Sealed for ImageHeader {}

impl Framed for ImageHeader {
    const ROS_TYPE: &'static str = IMAGE_TYPE;
    const DEFINITION: &'static str = IMAGE_DEFINITION;

    fn from_cdr(cdr: &[u8]) -> Result<(Self, Range<usize>), FramedError> {
        let mut r = Reader::new(cdr)?;
        let sec = r.i32("header.stamp.sec")?;
        let nanosec = r.u32("header.stamp.nanosec")?;
        let frame_id = r.string("header.frame_id")?;
        let height = r.u32("height")?;
        let width = r.u32("width")?;
        let encoding = r.string("encoding")?;
        let is_bigendian = r.u8("is_bigendian")?;
        let step = r.u32("step")?;
        let n = r.u32("data")? as usize;
        let start = r.offset();
        r.bytes(1, n, "data")?;
        let mut h = Self::new(height, width, step, "", "")?;
        h.sec = sec;
        h.nanosec = nanosec;
        h.is_bigendian = is_bigendian;
        h.set_frame_id(frame_id)?;
        h.set_encoding(encoding)?;
        Ok((h, start..start + n))
    }

    fn to_cdr(&self, pixels: &[u8], out: &mut Vec<u8>) -> Result<(), FramedError> {
        for (field, len, max) in [
            ("encoding", self.encoding_len as usize, ENCODING_MAX),
            ("frame_id", self.frame_id_len as usize, FRAME_ID_MAX),
        ] {
            if len > max {
                return Err(FramedError::TooLong { field, len, max });
            }
        }
        out.reserve(pixels.len() + 64 + ENCODING_MAX + FRAME_ID_MAX);
        let mut w = Writer::new(out);
        w.i32(self.sec);
        w.u32(self.nanosec);
        w.string(self.frame_id());
        w.u32(self.height);
        w.u32(self.width);
        w.string(self.encoding());
        w.u8(self.is_bigendian);
        w.u32(self.step);
        w.byte_sequence(pixels);
        w.finish();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixed::CdrError;

    #[test]
    fn malformed_images_are_refused() {
        let h = ImageHeader::new(2, 2, 2, "mono8", "f").unwrap();
        let mut cdr = Vec::new();
        h.to_cdr(&[1, 2, 3, 4], &mut cdr).unwrap();
        for cut in 0..cdr.len() - 4 {
            assert!(ImageHeader::from_cdr(&cdr[..cut]).is_err(), "cut at {cut}");
        }
        let mut wrong = cdr.clone();
        wrong[1] = 7;
        assert!(matches!(
            ImageHeader::from_cdr(&wrong),
            Err(FramedError::Cdr(CdrError::Encapsulation(_)))
        ));
        // The data length says 4 GiB.
        let mut long = cdr.clone();
        let n = long.len();
        long[n - 8..n - 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            ImageHeader::from_cdr(&long),
            Err(FramedError::Cdr(CdrError::PastEnd { .. }))
        ));
        let mut bad = h;
        bad.encoding_len = 200;
        assert!(matches!(
            bad.to_cdr(&[], &mut cdr),
            Err(FramedError::TooLong { .. })
        ));
        assert_eq!(bad.encoding().len(), ENCODING_MAX);
    }

    #[test]
    fn bytes_round_trip_and_the_definition_parses() {
        let mut h = ImageHeader::new(3, 4, 12, "rgb8", "cam").unwrap();
        h.sec = -5;
        h.nanosec = 7;
        assert_eq!(ImageHeader::from_bytes(&h.to_bytes()), Some(h));
        assert_eq!(ImageHeader::from_bytes(&[0; 3]), None);
        // The layout has no padding: the fields fill it.
        assert_eq!(HEADER_LEN, 4 * 5 + 4 + ENCODING_MAX + FRAME_ID_MAX);
        let lib = crate::library::Library::from_definition_text(IMAGE_TYPE, IMAGE_DEFINITION).unwrap();
        assert_eq!(lib.get(IMAGE_TYPE).unwrap().fields.len(), 7);
    }

    #[test]
    fn a_long_frame_id_is_refused_not_cut() {
        let long = "x".repeat(FRAME_ID_MAX + 1);
        assert_eq!(
            ImageHeader::new(1, 1, 1, "mono8", &long),
            Err(FramedError::TooLong {
                field: "frame_id",
                len: FRAME_ID_MAX + 1,
                max: FRAME_ID_MAX
            })
        );
    }
}
