"""Writes a rosbag2 bag in MCAP storage with `rosbags` (ROS 2 Kilted's types), as ROS
2's own recorder lays it out: three `std_msgs/msg/String` on /chatter ("hello N") and
two 4x4 `mono8` `sensor_msgs/msg/Image` on /camera/front (pixel i of image N is
i + N, stamp N s, frame "camera"), and one `sensor_msgs/msg/PointCloud2` on /lidar
(three float32 x, y, z points: point i is (i, 2i, 3i), frame "lidar"). Prints the MCAP
file's path."""
import pathlib
import sys

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

store = get_typestore(Stores.ROS2_KILTED)
String = store.types["std_msgs/msg/String"]
Image = store.types["sensor_msgs/msg/Image"]
Header = store.types["std_msgs/msg/Header"]
Time = store.types["builtin_interfaces/msg/Time"]
PointCloud2 = store.types["sensor_msgs/msg/PointCloud2"]
PointField = store.types["sensor_msgs/msg/PointField"]

out = pathlib.Path(sys.argv[1])
with Writer(out, version=9, storage_plugin=StoragePlugin.MCAP) as w:
    chatter = w.add_connection("/chatter", String.__msgtype__, typestore=store)
    camera = w.add_connection("/camera/front", Image.__msgtype__, typestore=store)
    lidar = w.add_connection("/lidar", PointCloud2.__msgtype__, typestore=store)
    t = 1_000_000_000
    for n in range(3):
        w.write(chatter, t, store.serialize_cdr(String(data=f"hello {n}"), String.__msgtype__))
        t += 1000
    for n in range(2):
        img = Image(
            header=Header(stamp=Time(sec=n, nanosec=0), frame_id="camera"),
            height=4, width=4, encoding="mono8", is_bigendian=0, step=4,
            data=(np.arange(16, dtype=np.uint8) + n),
        )
        w.write(camera, t, store.serialize_cdr(img, Image.__msgtype__))
        t += 1000
    points = np.array([[i, 2 * i, 3 * i] for i in range(3)], np.float32)
    cloud = PointCloud2(
        header=Header(stamp=Time(sec=5, nanosec=0), frame_id="lidar"),
        height=1, width=3,
        fields=[PointField(name=n, offset=4 * k, datatype=7, count=1) for k, n in enumerate("xyz")],
        is_bigendian=False, point_step=12, row_step=36,
        data=points.view(np.uint8).reshape(-1), is_dense=True,
    )
    w.write(lidar, t, store.serialize_cdr(cloud, PointCloud2.__msgtype__))
print(next(out.glob("*.mcap")))
