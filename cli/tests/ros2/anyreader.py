"""Prints every message of a recording as rosbags' AnyReader (the reader ROS 2 users
open bags with, which requires MCAP's ros2 profile) decodes it, with the types the
file's own definitions give: one line per message, `topic type field=value ...`."""
import pathlib
import sys

from rosbags.highlevel import AnyReader

with AnyReader([pathlib.Path(sys.argv[1])]) as reader:
    for conn, _, raw in reader.messages():
        msg = reader.deserialize(raw, conn.msgtype)
        if conn.msgtype == "std_msgs/msg/String":
            fields = f"data={msg.data}"
        elif conn.msgtype == "sensor_msgs/msg/Image":
            fields = (f"sec={msg.header.stamp.sec} height={msg.height} width={msg.width} "
                      f"encoding={msg.encoding} data={bytes(msg.data).hex()}")
        elif conn.msgtype == "sensor_msgs/msg/JointState":
            fields = (f"name={list(msg.name)} position={msg.position.tolist()} "
                      f"velocity={msg.velocity.tolist()} effort={msg.effort.tolist()}")
        else:
            fields = repr(msg)
        print(f"{conn.topic} {conn.msgtype} {fields}")
