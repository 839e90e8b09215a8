"""Writes a rosbag2 bag in MCAP storage with `rosbags` (ROS 2 Kilted's types), as ROS
2's own recorder lays it out: three `std_msgs/msg/String` on /chatter ("hello N") and
two 4x4 `mono8` `sensor_msgs/msg/Image` on /camera/front (pixel i of image N is
i + N, stamp N s, frame "camera"). Prints the MCAP file's path."""
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

out = pathlib.Path(sys.argv[1])
with Writer(out, version=9, storage_plugin=StoragePlugin.MCAP) as w:
    chatter = w.add_connection("/chatter", String.__msgtype__, typestore=store)
    camera = w.add_connection("/camera/front", Image.__msgtype__, typestore=store)
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
print(next(out.glob("*.mcap")))
