// ROS 2 messages on iox from C++, header-only over iox.hpp: a C++ ROS node moves its hot
// topic to iox and keeps the rest of the graph on ROS (the `iox-ros2` gateway exports
// the service as the topic; Python's `iox.ros2.Subscription` and Rust's
// `iox_ros2::image` read it).
//
//   auto camera = iox::ros2::Image::open_or_create("camera/image", iox::ros2::image_options());
//   auto publisher = camera->publisher();
//   auto loan = publisher->loan(1080 * 1920 * 3);
//   loan->header() = iox::ros2::ImageHeader::make(1080, 1920, "rgb8", "camera", sec, nanosec).value();
//   // ... write the pixels in place: loan->data() ...
//   std::move(loan.value()).send();
//
// - `sensor_msgs/msg/Image` and `sensor_msgs/msg/PointCloud2` travel as a user header
//   (`ImageHeader`, `PointCloud2Header`: Rust's `iox_ros2::image::ImageHeader` and
//   `iox_ros2::pointcloud::PointCloud2Header`, the same fields, sizes and names, checked
//   here at compile time) in front of the data, a `std::uint8_t[]` slice, in one chunk.
// - Every other ROS type travels as its CDR bytes (`Cdr`, a `std::uint8_t[]` service
//   recording `ros2/type`): what rclcpp's `rclcpp::Serialization<T>` writes.
// - `image_options`, `pointcloud_options` and `cdr_options` make a service as the
//   gateway and `iox.ros2` make one: `ros2/type` and `ros2/qos` recorded, `depth`
//   samples per subscriber; opening takes an existing one as it is.
#ifndef IOX_ROS2_HPP
#define IOX_ROS2_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "iox.hpp"

namespace iox::ros2 {

inline constexpr std::size_t ENCODING_MAX = 32;
inline constexpr std::size_t FRAME_ID_MAX = 128;
inline constexpr std::size_t FIELDS_MAX = 16;
inline constexpr std::size_t FIELD_NAME_MAX = 32;

namespace detail {
/// Copies `text` into `dst` (at most `max` bytes); false if it is longer.
inline bool put(std::uint8_t* dst, std::size_t max, std::string_view text, std::uint8_t& len) {
    if (text.size() > max) return false;
    std::memcpy(dst, text.data(), text.size());
    len = static_cast<std::uint8_t>(text.size());
    return true;
}
}  // namespace detail

/// `sensor_msgs/msg/Image` without its pixels (184 bytes, no padding).
struct ImageHeader {
    std::int32_t sec;
    std::uint32_t nanosec;
    std::uint32_t height;
    std::uint32_t width;
    std::uint32_t step;
    std::uint8_t is_bigendian;
    std::uint8_t encoding_len;
    std::uint8_t frame_id_len;
    std::uint8_t reserved;
    std::uint8_t encoding[ENCODING_MAX];
    std::uint8_t frame_id[FRAME_ID_MAX];

    /// A header for `height` x `width` pixels of `encoding` with `step` bytes a row
    /// (0: width x the encoding's bytes per pixel, for the encodings `bytes_per_pixel`
    /// knows), or an error if a string is longer than the header holds, the encoding's
    /// pixel size is unknown and no step is given, or the step does not fit 32 bits.
    static Result<ImageHeader> make(std::uint32_t height, std::uint32_t width, std::string_view encoding,
                                    std::string_view frame_id = {}, std::int32_t sec = 0,
                                    std::uint32_t nanosec = 0, std::uint32_t step = 0) {
        ImageHeader h{};
        h.sec = sec;
        h.nanosec = nanosec;
        h.height = height;
        h.width = width;
        if (step == 0) {
            std::uint64_t bpp = bytes_per_pixel(encoding);
            std::uint64_t row = bpp * width;
            if (bpp == 0) {
                return Error{IOX_STATUS_INVALID_ARGUMENT, "encoding " + std::string(encoding) +
                                                              " is not one iox knows the pixel size of: give the step"};
            }
            if (row > UINT32_MAX) return Error{IOX_STATUS_INVALID_ARGUMENT, "the image's row is longer than 4 GiB"};
            step = static_cast<std::uint32_t>(row);
        }
        h.step = step;
        if (!detail::put(h.encoding, ENCODING_MAX, encoding, h.encoding_len) ||
            !detail::put(h.frame_id, FRAME_ID_MAX, frame_id, h.frame_id_len)) {
            return Error{IOX_STATUS_INVALID_ARGUMENT, "the image's encoding or frame_id is longer than an iox image header holds"};
        }
        return h;
    }
    /// Bytes per pixel of the encodings of sensor_msgs' image_encodings that Python's
    /// `iox.ros2` shapes too; 0 for others.
    static std::uint32_t bytes_per_pixel(std::string_view e) {
        if (e == "mono8" || e == "8UC1") return 1;
        if (e == "mono16" || e == "16UC1" || e == "16SC1") return 2;
        if (e == "rgb8" || e == "bgr8" || e == "8UC3") return 3;
        if (e == "rgba8" || e == "bgra8" || e == "8UC4" || e == "32SC1" || e == "32FC1") return 4;
        if (e == "rgb16" || e == "bgr16" || e == "16UC3") return 6;
        if (e == "rgba16" || e == "bgra16" || e == "16UC4" || e == "64FC1") return 8;
        if (e == "32FC3") return 12;
        return 0;
    }
    std::string_view encoding_text() const {
        return {reinterpret_cast<const char*>(encoding), std::min<std::size_t>(encoding_len, ENCODING_MAX)};
    }
    std::string_view frame_id_text() const {
        return {reinterpret_cast<const char*>(frame_id), std::min<std::size_t>(frame_id_len, FRAME_ID_MAX)};
    }
};
static_assert(sizeof(ImageHeader) == 184 && alignof(ImageHeader) == 4, "Rust's iox_ros2::image::ImageHeader");

/// One `sensor_msgs/msg/PointField` (44 bytes).
struct PointFieldEntry {
    std::uint32_t offset;
    std::uint32_t count;
    std::uint8_t datatype;
    std::uint8_t name_len;
    std::uint8_t reserved[2];
    std::uint8_t name[FIELD_NAME_MAX];
};
static_assert(sizeof(PointFieldEntry) == 44, "Rust's iox_ros2::pointcloud::PointFieldEntry");

/// `sensor_msgs/msg/PointCloud2` without its points (860 bytes, no padding).
/// Made with `{}`: no fields, stamp zero, little-endian, dense (as Rust's
/// `PointCloud2Header::new`).
struct PointCloud2Header {
    std::int32_t sec = 0;
    std::uint32_t nanosec = 0;
    std::uint32_t height = 0;
    std::uint32_t width = 0;
    std::uint32_t point_step = 0;
    std::uint32_t row_step = 0;
    std::uint8_t is_bigendian = 0;
    std::uint8_t is_dense = 1;
    std::uint8_t frame_id_len = 0;
    std::uint8_t field_count = 0;
    std::uint8_t frame_id[FRAME_ID_MAX] = {};
    PointFieldEntry fields[FIELDS_MAX] = {};

    /// Adds a field (`datatype`: sensor_msgs/PointField's INT8 1 .. FLOAT64 8); false if
    /// the header holds no more or the name is too long.
    bool add_field(std::string_view name, std::uint32_t offset, std::uint8_t datatype, std::uint32_t count = 1) {
        if (field_count >= FIELDS_MAX) return false;
        PointFieldEntry& f = fields[field_count];
        f = PointFieldEntry{};
        if (!detail::put(f.name, FIELD_NAME_MAX, name, f.name_len)) return false;
        f.offset = offset;
        f.count = count;
        f.datatype = datatype;
        field_count++;
        return true;
    }
};
static_assert(sizeof(PointCloud2Header) == 860 && alignof(PointCloud2Header) == 4,
              "Rust's iox_ros2::pointcloud::PointCloud2Header");

/// An image topic's service: header and pixels.
using Image = PubSub<std::uint8_t[], ImageHeader>;
/// A point-cloud topic's service: header and points.
using PointCloud2 = PubSub<std::uint8_t[], PointCloud2Header>;
/// Any other ROS type's service: its CDR bytes.
using Cdr = PubSub<std::uint8_t[]>;

/// The settings the gateway and `iox.ros2` give a service of ROS type `type_name`:
/// `ros2/type` and `ros2/qos` recorded, `depth` samples per subscriber, messages of at
/// most `max_bytes` (images: the pixels; CDR: the whole message).
inline Options ros_options(const std::string& type_name, std::uint64_t max_bytes, std::uint32_t depth = 10) {
    Options o;
    o.max_slice_len = max_bytes;
    o.subscriber_buffer = depth;
    o.attributes = {{"ros2/type", type_name},
                    {"ros2/qos", "reliable, volatile, keep_last " + std::to_string(depth)}};
    o.required_attributes = {{"ros2/type", type_name}};
    return o;
}
/// `ros_options` for images of at most `max_bytes` pixels (default: 1080p rgb8).
inline Options image_options(std::uint64_t max_bytes = 1920ull * 1080 * 3, std::uint32_t depth = 10) {
    return ros_options("sensor_msgs/msg/Image", max_bytes, depth);
}
/// `ros_options` for point clouds of at most `max_bytes` of points.
inline Options pointcloud_options(std::uint64_t max_bytes, std::uint32_t depth = 10) {
    return ros_options("sensor_msgs/msg/PointCloud2", max_bytes, depth);
}
/// `ros_options` for CDR messages of `type_name` of at most `max_bytes`.
inline Options cdr_options(const std::string& type_name, std::uint64_t max_bytes = 65536, std::uint32_t depth = 10) {
    return ros_options(type_name, max_bytes, depth);
}

}  // namespace iox::ros2

template <>
struct iox::TypeName<iox::ros2::ImageHeader> {
    static constexpr const char* value = "ros2 sensor_msgs/msg/Image header";
};
template <>
struct iox::AnyBitPattern<iox::ros2::ImageHeader> : std::true_type {};
template <>
struct iox::TypeName<iox::ros2::PointCloud2Header> {
    static constexpr const char* value = "ros2 sensor_msgs/msg/PointCloud2 header";
};
template <>
struct iox::AnyBitPattern<iox::ros2::PointCloud2Header> : std::true_type {};

#endif
