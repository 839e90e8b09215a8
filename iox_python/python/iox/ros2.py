"""ROS 2 messages on iox services, from Python.

**CDR services.** A ``bytes`` service that records ``ros2/type`` (what the ROS 2
gateway ``iox-ros2`` makes for a topic, or what a program creates with
``.attribute("ros2/type", "std_msgs/msg/String")``) carries one CDR message per
sample, as ROS 2 middlewares write it. ``to_message(sample, String)`` turns a
received sample into an rclpy message object, ``send_message(publisher, msg)``
publishes one, and ``message_class(service)`` finds the class the service records.
rclpy (and the message package) are imported only when these are called.

**Images.** ``sensor_msgs/msg/Image`` travels as the user header ``IMAGE_HEADER``
(every field but the pixels, the same layout as Rust's ``iox_ros2::image::ImageHeader``)
plus the pixels as the sample's bytes, in one chunk. ``image_view(sample)`` is a numpy
view of the pixels in place, shaped by the header (height x width, and channels for
colour encodings), ``image_header(...)`` the header to send with them::

    svc = iox.Service("camera/front").publish_subscribe(
        bytes, max_len=640 * 480 * 3, user_header=iox.ros2.IMAGE_HEADER).open_or_create()
    pub = svc.publisher()
    pub.send(frame, header=iox.ros2.image_header(480, 640, "rgb8", frame_id="camera"))
"""

from __future__ import annotations

import importlib

import numpy as np

from ._types import Type

#: Longest ``encoding`` and ``frame_id`` an image header holds, in bytes.
ENCODING_MAX = 32
FRAME_ID_MAX = 128

#: The image header: Rust's ``iox_ros2::image::ImageHeader`` (184 bytes, no padding).
IMAGE_HEADER = Type(
    "ros2 sensor_msgs/msg/Image header",
    np.dtype(
        [
            ("sec", np.int32),
            ("nanosec", np.uint32),
            ("height", np.uint32),
            ("width", np.uint32),
            ("step", np.uint32),
            ("is_bigendian", np.uint8),
            ("encoding_len", np.uint8),
            ("frame_id_len", np.uint8),
            ("reserved", np.uint8),
            ("encoding", np.uint8, (ENCODING_MAX,)),
            ("frame_id", np.uint8, (FRAME_ID_MAX,)),
        ],
        align=True,
    ),
)

# Element dtype and channels of the encodings ``image_view`` shapes (others: rows of
# ``step`` bytes).
_ENCODINGS = {
    "mono8": (np.uint8, 1), "8UC1": (np.uint8, 1),
    "mono16": (np.uint16, 1), "16UC1": (np.uint16, 1),
    "rgb8": (np.uint8, 3), "bgr8": (np.uint8, 3), "8UC3": (np.uint8, 3),
    "rgba8": (np.uint8, 4), "bgra8": (np.uint8, 4), "8UC4": (np.uint8, 4),
    "32FC1": (np.float32, 1),
}


def message_class(type_or_service):
    """The rclpy message class of a ROS type name (``"std_msgs/msg/String"``), or of
    the type an open service records as ``ros2/type`` (its ``attributes``)."""
    name = type_or_service
    if not isinstance(name, str):
        name = type_or_service.attributes.get("ros2/type")
        if name is None:
            raise ValueError("the service records no ROS type (attribute ros2/type)")
    parts = name.split("/")
    if len(parts) != 3 or parts[1] not in ("msg", "srv"):
        raise ValueError(f"{name!r} is not a ROS type name (pkg/msg/Type)")
    try:
        module = importlib.import_module(f"{parts[0]}.{parts[1]}")
    except ImportError as e:
        raise ImportError(f"ROS type {name}: its package {parts[0]} is not importable "
                          f"(source the ROS environment, or install it): {e}") from e
    try:
        return getattr(module, parts[2])
    except AttributeError:
        raise ImportError(f"ROS package {parts[0]} has no type {parts[2]}") from None


def to_message(sample, msg_class):
    """The rclpy message object of a received CDR sample (or its bytes)."""
    from rclpy.serialization import deserialize_message

    if isinstance(sample, (bytes, bytearray, memoryview)):
        return deserialize_message(bytes(sample), msg_class)
    data = sample.array if hasattr(sample, "array") else sample
    return deserialize_message(np.asarray(data).tobytes(), msg_class)


def send_message(publisher, msg) -> int:
    """Publishes the rclpy message object ``msg`` as one CDR sample; returns how many
    subscribers got it."""
    from rclpy.serialization import serialize_message

    return publisher.send(serialize_message(msg))


def image_header(height: int, width: int, encoding: str, *, frame_id: str = "", sec: int = 0,
                 nanosec: int = 0, step: int | None = None, is_bigendian: bool = False) -> np.ndarray:
    """An image header (a 0-d array of ``IMAGE_HEADER``) for ``height`` x ``width``
    pixels of ``encoding``; ``step`` (bytes per row) defaults to width x the
    encoding's bytes per pixel. Strings longer than the header holds are refused."""
    enc, frame = encoding.encode(), frame_id.encode()
    for what, text, most in (("encoding", enc, ENCODING_MAX), ("frame_id", frame, FRAME_ID_MAX)):
        if len(text) > most:
            raise ValueError(f"the image's {what} is {len(text)} bytes; an iox image header holds at most {most}")
    if step is None:
        dtype, channels = _ENCODINGS.get(encoding, (np.uint8, 1))
        step = width * channels * np.dtype(dtype).itemsize
    h = np.zeros((), IMAGE_HEADER.dtype)
    h["sec"], h["nanosec"], h["height"], h["width"], h["step"] = sec, nanosec, height, width, step
    h["is_bigendian"] = int(is_bigendian)
    h["encoding_len"], h["frame_id_len"] = len(enc), len(frame)
    h["encoding"][: len(enc)] = np.frombuffer(enc, np.uint8)
    h["frame_id"][: len(frame)] = np.frombuffer(frame, np.uint8)
    return h


def text(header, field: str) -> str:
    """``encoding`` or ``frame_id`` of an image header, as text."""
    n = min(int(header[f"{field}_len"]), ENCODING_MAX if field == "encoding" else FRAME_ID_MAX)
    return bytes(np.asarray(header[field])[:n]).decode(errors="replace")


def image_view(sample) -> np.ndarray:
    """The pixels of a received image sample (or a loan) as a numpy view in place:
    (height, width) for one-channel encodings, (height, width, channels) for colour
    ones, (height, step) bytes for encodings it does not know. Read-only for samples;
    the view keeps the sample alive."""
    header = sample.header
    if header is None or header.dtype != IMAGE_HEADER.dtype:
        raise TypeError("not an image sample: its service's user header is not iox.ros2.IMAGE_HEADER")
    height, width, step = int(header["height"]), int(header["width"]), int(header["step"])
    raw = np.asarray(sample.array if hasattr(sample, "array") else sample).view(np.uint8).reshape(-1)
    if height * step > raw.size:
        raise ValueError(f"the header says {height} rows of {step} bytes, the sample holds {raw.size} bytes")
    rows = raw[: height * step].reshape(height, step)
    dtype, channels = _ENCODINGS.get(text(header, "encoding"), (None, 0))
    if dtype is None or width * channels * np.dtype(dtype).itemsize > step:
        return rows
    pixels = rows[:, : width * channels * np.dtype(dtype).itemsize].view(dtype)
    return pixels.reshape(height, width) if channels == 1 else pixels.reshape(height, width, channels)
