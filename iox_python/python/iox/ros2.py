"""ROS 2 messages on iox services, from Python.

**CDR services.** A ``bytes`` service that records ``ros2/type`` (what the ROS 2
gateway ``iox-ros2`` makes for a topic, or what a program creates with
``.attribute("ros2/type", "std_msgs/msg/String")``) carries one CDR message per
sample, as ROS 2 middlewares write it. ``to_message(sample, String)`` turns a
received sample into an rclpy message object, ``send_message(publisher, msg)``
publishes one, and ``message_class(service)`` finds the class the service records.
rclpy (and the message package) are imported only when these are called.

**Services.** A request-response service of ``bytes`` both ways that records
``ros2/type`` (a service type, ``std_srvs/srv/SetBool``) carries one CDR request and
response each; the gateway exports it as a ROS service (``--export-service``) or
imports one (``--import-service``). A Python server reads ``to_message(req,
SetBool.Request)`` and answers ``respond(req, SetBool.Response(...))``; a client sends
``send_message(client, SetBool.Request(...))`` and reads ``to_message(response,
SetBool.Response)``.

**Images.** ``sensor_msgs/msg/Image`` travels as the user header ``IMAGE_HEADER``
(every field but the pixels, the same layout as Rust's ``iox_ros2::image::ImageHeader``)
plus the pixels as the sample's bytes, in one chunk. ``image_view(sample)`` is a numpy
view of the pixels in place, shaped by the header (height x width, and channels for
colour encodings), ``image_header(...)`` the header to send with them::

    svc = iox.Service("camera/front").publish_subscribe(
        bytes, max_len=640 * 480 * 3, user_header=iox.ros2.IMAGE_HEADER).open_or_create()
    pub = svc.publisher()
    pub.send(frame, header=iox.ros2.image_header(480, 640, "rgb8", frame_id="camera"))

**One line for a node's hot topic.** ``Publisher(Image, "/camera/image")`` and
``Subscription(Image, "/camera/image")`` move ROS message objects over an iox service
named as the topic (``camera/image``), made exactly as the ROS 2 gateway makes one for
it, so ``iox-ros2 --export 'camera/**'`` still shows the topic to the rest of the ROS
graph (and Foxglove), and a gateway that imported the topic first shares its service.
``sensor_msgs/msg/Image`` and ``sensor_msgs/msg/PointCloud2`` travel as a header and
their data (``publish`` copies the data once, from the message into shared memory;
``loan_image`` / ``loan_cloud`` let a camera write it in place; ``take(in_place=True)``
gives a view of the data in shared memory instead of a copy); every other type as CDR
(``rclpy.serialization``)::

    pub = iox.ros2.Publisher(Image, "/camera/image")      # instead of node.create_publisher
    pub.publish(msg)
    sub = iox.ros2.Subscription(Image, "/camera/image")   # instead of node.create_subscription
    msg = sub.take(timeout=1.0)                            # a sensor_msgs.msg.Image, or None

Decisions: the service keeps ``depth`` samples per subscriber (ROS 2's default 10), and
the last ``depth`` for late subscribers with ``transient_local=True`` (a service the
publisher creates); it records ``ros2/type`` and ``ros2/qos`` (``reliable, volatile,
keep_last DEPTH``), which the gateway exports with; its pool is the gateway's size classes for that depth (up to
16 MiB a message; ``size_classes=`` for larger), taken as a budget (a publish that finds
no free chunk of its size raises ``iox.Error``: readers hold them all). rclpy is
imported only when a message class is needed.
"""

from __future__ import annotations

import importlib
import struct

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
    "mono16": (np.uint16, 1), "16UC1": (np.uint16, 1), "16SC1": (np.int16, 1),
    "rgb8": (np.uint8, 3), "bgr8": (np.uint8, 3), "8UC3": (np.uint8, 3),
    "rgba8": (np.uint8, 4), "bgra8": (np.uint8, 4), "8UC4": (np.uint8, 4),
    "rgb16": (np.uint16, 3), "bgr16": (np.uint16, 3), "16UC3": (np.uint16, 3),
    "rgba16": (np.uint16, 4), "bgra16": (np.uint16, 4), "16UC4": (np.uint16, 4),
    "32SC1": (np.int32, 1), "32FC1": (np.float32, 1), "32FC3": (np.float32, 3),
    "64FC1": (np.float64, 1),
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


def send_message(port, msg):
    """Sends the rclpy message object ``msg`` as CDR: through a publisher (returns how
    many subscribers got it) or a request-response client (a ROS service's request;
    returns the ``PendingResponse``)."""
    from rclpy.serialization import serialize_message

    return port.send(serialize_message(msg))


def respond(request, msg) -> None:
    """Answers an ``iox.ActiveRequest`` of a ROS service with the rclpy response object
    ``msg``, as CDR (``to_message(request, SetBool.Request)`` reads the request)."""
    from rclpy.serialization import serialize_message

    request.respond(serialize_message(msg))


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
        if encoding not in _ENCODINGS:
            raise ValueError(f"encoding {encoding!r} is not one iox knows the pixel size of: give step= (bytes per row)")
        dtype, channels = _ENCODINGS[encoding]
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
    # Multi-byte pixels in the byte order the header says.
    dtype = np.dtype(dtype).newbyteorder(">" if int(header["is_bigendian"]) else "<")
    pixels = rows[:, : width * channels * dtype.itemsize].view(dtype)
    return pixels.reshape(height, width) if channels == 1 else pixels.reshape(height, width, channels)


#: Longest point field name and most fields a point-cloud header holds.
FIELD_NAME_MAX = 32
FIELDS_MAX = 16

#: One point field of ``POINTCLOUD2_HEADER`` (Rust's ``iox_ros2::pointcloud::PointFieldEntry``).
POINT_FIELD = np.dtype(
    [
        ("offset", np.uint32),
        ("count", np.uint32),
        ("datatype", np.uint8),
        ("name_len", np.uint8),
        ("reserved", np.uint8, (2,)),
        ("name", np.uint8, (FIELD_NAME_MAX,)),
    ],
    align=True,
)

#: The point-cloud header: Rust's ``iox_ros2::pointcloud::PointCloud2Header``.
POINTCLOUD2_HEADER = Type(
    "ros2 sensor_msgs/msg/PointCloud2 header",
    np.dtype(
        [
            ("sec", np.int32),
            ("nanosec", np.uint32),
            ("height", np.uint32),
            ("width", np.uint32),
            ("point_step", np.uint32),
            ("row_step", np.uint32),
            ("is_bigendian", np.uint8),
            ("is_dense", np.uint8),
            ("frame_id_len", np.uint8),
            ("field_count", np.uint8),
            ("frame_id", np.uint8, (FRAME_ID_MAX,)),
            ("fields", POINT_FIELD, (FIELDS_MAX,)),
        ],
        align=True,
    ),
)

#: Size classes (bytes, count) of a service made for ROS messages: the ROS 2 gateway's
#: (``iox_ros2::carried::DEFAULT_CLASSES``).
DEFAULT_CLASSES = ((4096, 64), (65536, 32), (1 << 20, 16), (16 << 20, 8))
_CLASS_BUDGET = 256 << 20
IMAGE_TYPE = "sensor_msgs/msg/Image"
POINTCLOUD2_TYPE = "sensor_msgs/msg/PointCloud2"


def type_name(msg_class) -> str:
    """The ROS type name (``sensor_msgs/msg/Image``) of an rclpy message class."""
    module = getattr(msg_class, "__module__", "")
    parts = module.split(".")
    if len(parts) < 2 or parts[1] != "msg" or not hasattr(msg_class, "get_fields_and_field_types"):
        raise TypeError(f"{msg_class!r} is not an rclpy message class (from pkg.msg import Type)")
    return f"{parts[0]}/msg/{msg_class.__name__}"


def default_classes(depth: int):
    """The size classes of a service kept ``depth`` deep: the gateway's, each count
    raised to hold a full buffer and two samples in flight, as far as 256 MiB a class
    (what ``iox-ros2`` gives a topic it imports)."""
    needed = depth + 2
    return [(size, max(count, min(needed, _CLASS_BUDGET // size))) for size, count in DEFAULT_CLASSES]


def _text_into(dst, text: str, most: int, what: str) -> int:
    raw = text.encode()
    if len(raw) > most:
        raise ValueError(f"{what} is {len(raw)} bytes; an iox header holds at most {most}")
    dst[: len(raw)] = np.frombuffer(raw, np.uint8)
    return len(raw)


def pointcloud_header(height: int, width: int, point_step: int, fields, *, frame_id: str = "",
                      sec: int = 0, nanosec: int = 0, row_step: int | None = None,
                      is_bigendian: bool = False, is_dense: bool = True) -> np.ndarray:
    """A point-cloud header (a 0-d array of ``POINTCLOUD2_HEADER``); ``fields`` are
    ``sensor_msgs.msg.PointField`` objects or ``(name, offset, datatype, count)``."""
    fields = list(fields)
    if len(fields) > FIELDS_MAX:
        raise ValueError(f"the cloud has {len(fields)} fields; an iox point-cloud header holds at most {FIELDS_MAX}")
    h = np.zeros((), POINTCLOUD2_HEADER.dtype)
    h["sec"], h["nanosec"], h["height"], h["width"] = sec, nanosec, height, width
    h["point_step"] = point_step
    h["row_step"] = width * point_step if row_step is None else row_step
    h["is_bigendian"], h["is_dense"] = int(is_bigendian), int(is_dense)
    h["frame_id_len"] = _text_into(h["frame_id"], frame_id, FRAME_ID_MAX, "the cloud's frame_id")
    h["field_count"] = len(fields)
    for i, f in enumerate(fields):
        name, offset, datatype, count = (f if isinstance(f, tuple)
                                         else (f.name, f.offset, f.datatype, f.count))
        e = h["fields"][i]
        e["offset"], e["count"], e["datatype"] = offset, count, datatype
        e["name_len"] = _text_into(e["name"], name, FIELD_NAME_MAX, f"point field name {name!r}")
    return h


def _stamp(msg):
    return int(msg.header.stamp.sec), int(msg.header.stamp.nanosec)


class Stamp:
    """``builtin_interfaces/msg/Time``'s fields, without rclpy's checks (an
    ``InPlace``'s ``header.stamp``)."""

    __slots__ = ("sec", "nanosec")

    def __init__(self, sec: int, nanosec: int):
        self.sec, self.nanosec = sec, nanosec


class Header:
    """``std_msgs/msg/Header``'s fields, without rclpy's checks (an ``InPlace``'s
    ``header``; ``to_message()`` makes the rclpy one)."""

    __slots__ = ("stamp", "frame_id")

    def __init__(self, stamp: Stamp, frame_id: str):
        self.stamp, self.frame_id = stamp, frame_id

    def to_message(self):
        from std_msgs.msg import Header as RosHeader

        h = RosHeader(frame_id=self.frame_id)
        h.stamp.sec, h.stamp.nanosec = self.stamp.sec, self.stamp.nanosec
        return h


# IMAGE_HEADER's fields before `reserved`, `encoding` and `frame_id` (native order, as
# the header is this machine's memory).
_IMAGE_FIXED = struct.Struct("=iIIIIBBB")


def _header_of(header) -> Header:
    return Header(Stamp(int(header["sec"]), int(header["nanosec"])), text(header, "frame_id"))


class _Port:
    """What a publisher and a subscription share: the service named as the topic."""

    def __init__(self, msg_class, topic: str, depth: int, size_classes, root, transient_local=False):
        from . import Service

        if depth < 1:
            raise ValueError("depth must be at least 1")
        self.msg_class = msg_class
        self.type_name = type_name(msg_class)
        self.topic = "/" + topic.strip("/")
        self.name = topic.strip("/")
        header = {IMAGE_TYPE: IMAGE_HEADER, POINTCLOUD2_TYPE: POINTCLOUD2_HEADER}.get(self.type_name)
        self._header = header
        from . import ServiceExists, ServiceNotFound

        history = depth if transient_local else 0
        classes = list(size_classes) if size_classes is not None else default_classes(depth + history)
        durability = "transient_local" if transient_local else "volatile"

        def builder(classes):
            # Opening takes the service as its creator made it (a C++ camera's one
            # class, the gateway's ladder and depth); creating makes it as the gateway
            # would.
            return Service(self.name, root=root).publish_subscribe(bytes, size_classes=classes, user_header=header)
        for _ in range(3):
            try:
                self.service = builder(None).open()
                break
            except ServiceNotFound:
                pass
            b = (builder(classes).subscriber_buffer(depth)
                 .allow_pool_exhaustion(True)
                 .attribute("ros2/type", self.type_name)
                 .attribute("ros2/qos", f"reliable, {durability}, keep_last {depth}"))
            try:
                self.service = (b.history(history) if history else b).create()
                break
            except ServiceExists:
                continue  # another process created it meanwhile: open that one
        else:
            raise ServiceExists(f"iox service {self.name!r} was created and removed while opening it")
        recorded = self.service.attributes.get("ros2/type")
        if recorded != self.type_name:
            raise TypeError(f"iox service {self.name!r} carries {recorded or 'no ROS type'}, not {self.type_name}")


class Publisher(_Port):
    """A ROS 2 topic's publisher on iox (module docs): ``publish(msg)`` an rclpy message
    object, or ``loan_image`` / ``loan_cloud`` and write the data in place."""

    def __init__(self, msg_class, topic: str, *, depth: int = 10, transient_local: bool = False,
                 size_classes=None, root=None):
        super().__init__(msg_class, topic, depth, size_classes, root, transient_local)
        self._pub = self.service.publisher()

    def publish(self, msg) -> int:
        """Publishes ``msg`` (an object of the publisher's class); returns how many
        subscribers got it."""
        if not isinstance(msg, self.msg_class):
            raise TypeError(f"{type(msg).__name__} is not {self.type_name}")
        if self.type_name == IMAGE_TYPE:
            sec, nanosec = _stamp(msg)
            header = image_header(msg.height, msg.width, msg.encoding, frame_id=msg.header.frame_id,
                                  sec=sec, nanosec=nanosec, step=msg.step,
                                  is_bigendian=bool(msg.is_bigendian))
            return self._send_data(msg.data, header)
        if self.type_name == POINTCLOUD2_TYPE:
            sec, nanosec = _stamp(msg)
            header = pointcloud_header(msg.height, msg.width, msg.point_step, msg.fields,
                                       frame_id=msg.header.frame_id, sec=sec, nanosec=nanosec,
                                       row_step=msg.row_step, is_bigendian=bool(msg.is_bigendian),
                                       is_dense=bool(msg.is_dense))
            return self._send_data(msg.data, header)
        from rclpy.serialization import serialize_message

        return self._pub.send(serialize_message(msg))

    def _send_data(self, data, header) -> int:
        # One copy, from the message's buffer into the loan (array.array and bytes
        # both expose their buffer).
        src = np.frombuffer(memoryview(data).cast("B"), np.uint8)
        loan = self._pub.loan(src.size)
        dst = loan.array
        dst[:] = src
        h = loan.header
        h[...] = header
        del dst, h
        return loan.send()

    def loan_image(self, height: int, width: int, encoding: str, *, frame_id: str = "",
                   sec: int = 0, nanosec: int = 0, step: int | None = None):
        """A loan for one image, its header written: ``image_view(loan)`` is the
        writable pixel view; then ``loan.send()``."""
        if self.type_name != IMAGE_TYPE:
            raise TypeError(f"the publisher carries {self.type_name}, not {IMAGE_TYPE}")
        header = image_header(height, width, encoding, frame_id=frame_id, sec=sec, nanosec=nanosec, step=step)
        loan = self._pub.loan(int(header["height"]) * int(header["step"]))
        h = loan.header
        h[...] = header
        del h
        return loan

    def loan_cloud(self, height: int, width: int, point_step: int, fields, *, frame_id: str = "",
                   sec: int = 0, nanosec: int = 0):
        """A loan for one point cloud, its header written: ``loan.array`` is the
        writable data (``height * width * point_step`` bytes); then ``loan.send()``."""
        if self.type_name != POINTCLOUD2_TYPE:
            raise TypeError(f"the publisher carries {self.type_name}, not {POINTCLOUD2_TYPE}")
        header = pointcloud_header(height, width, point_step, fields, frame_id=frame_id, sec=sec, nanosec=nanosec)
        loan = self._pub.loan(height * width * point_step)
        h = loan.header
        h[...] = header
        del h
        return loan

    def get_subscription_count(self) -> int:
        """Subscribers of the service now (the gateway's, when it exports the topic,
        among them)."""
        return self.service.port_counts()[1]


class InPlace:
    """A received image or point cloud with the message's field names (``header`` a
    plain ``Header``: ``header.stamp.sec``, ``header.frame_id``), its ``data`` a
    read-only numpy view of the bytes in shared memory (kept while this object lives;
    drop it to give the chunk back). ``to_message()`` copies it into an rclpy message."""

    def __init__(self, port, sample):
        self._port, self._sample = port, sample
        h = sample.header
        self._data = None
        if port.type_name == IMAGE_TYPE:
            # One copy of the 184 header bytes and one unpack: numpy's field access
            # costs tens of microseconds per frame when the caches are cold.
            raw = h.tobytes()
            sec, nanosec, self.height, self.width, self.step, self.is_bigendian, enc_len, frame_len = \
                _IMAGE_FIXED.unpack_from(raw)
            enc_at = _IMAGE_FIXED.size + 1
            frame_at = enc_at + ENCODING_MAX
            self.encoding = raw[enc_at:enc_at + min(enc_len, ENCODING_MAX)].decode(errors="replace")
            frame_id = raw[frame_at:frame_at + min(frame_len, FRAME_ID_MAX)].decode(errors="replace")
            self.header = Header(Stamp(sec, nanosec), frame_id)
        else:
            self.header = _header_of(h)
            self.height, self.width = int(h["height"]), int(h["width"])
            self.is_bigendian = int(h["is_bigendian"])
            from sensor_msgs.msg import PointField

            self.point_step, self.row_step = int(h["point_step"]), int(h["row_step"])
            self.is_dense = bool(h["is_dense"])
            self.fields = []
            for e in h["fields"][: int(h["field_count"])]:
                n = int(e["name_len"])
                self.fields.append(PointField(name=bytes(np.asarray(e["name"])[:n]).decode(errors="replace"),
                                              offset=int(e["offset"]), datatype=int(e["datatype"]),
                                              count=int(e["count"])))

    @property
    def data(self) -> np.ndarray:
        """The data (pixels, points) as bytes in shared memory, read-only, made on first
        use."""
        if self._data is None:
            self._data = np.asarray(self._sample.array).view(np.uint8).reshape(-1)
        return self._data

    def pixels(self) -> np.ndarray:
        """An image's pixels shaped by its encoding (``image_view``)."""
        return image_view(self._sample)

    def to_message(self):
        """The rclpy message: the data copied out of shared memory."""
        import array

        data = array.array("B")
        data.frombytes(memoryview(self.data))
        m = self._port.msg_class()
        m.header, m.height, m.width, m.is_bigendian = self.header.to_message(), self.height, self.width, self.is_bigendian
        if self._port.type_name == IMAGE_TYPE:
            m.encoding, m.step = self.encoding, self.step
        else:
            m.fields, m.point_step, m.row_step, m.is_dense = self.fields, self.point_step, self.row_step, self.is_dense
            m.is_bigendian = bool(self.is_bigendian)
        m.data = data
        return m


class Subscription(_Port):
    """A ROS 2 topic's subscription on iox (module docs): ``take()`` the next message
    as an rclpy object, or ``take(in_place=True)`` an image or point cloud as a view of
    shared memory (``InPlace``)."""

    def __init__(self, msg_class, topic: str, *, depth: int = 10, size_classes=None, root=None):
        super().__init__(msg_class, topic, depth, size_classes, root)
        self._sub = self.service.subscriber()

    def take(self, timeout: float | None = 0.0, *, in_place: bool = False):
        """The next message, waiting up to ``timeout`` seconds (None: until one comes;
        0: not at all), or None."""
        sample = self._sub.receive(timeout=timeout)
        if sample is None:
            return None
        if self._header is not None:
            view = InPlace(self, sample)
            return view if in_place else view.to_message()
        if in_place:
            raise TypeError(f"{self.type_name} travels as CDR: it has no in-place form")
        return to_message(sample, self.msg_class)

    def fileno(self) -> int:
        """A descriptor that becomes readable when a message waits (for a selector or
        an event loop)."""
        return self._sub.fileno()

    def get_publisher_count(self) -> int:
        """Publishers of the service now."""
        return self.service.port_counts()[0]
