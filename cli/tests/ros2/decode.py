"""Prints every message of an MCAP file as MCAP's ROS 2 reader (mcap-ros2-support)
decodes it: one line per message, `topic type field=value ...`."""
import sys

from mcap_ros2.reader import read_ros2_messages

for m in read_ros2_messages(sys.argv[1]):
    msg = m.ros_msg
    name = m.schema.name
    if name == "std_msgs/msg/String":
        fields = f"data={msg.data}"
    elif name == "sensor_msgs/msg/Image":
        fields = (
            f"sec={msg.header.stamp.sec} frame_id={msg.header.frame_id} height={msg.height} "
            f"width={msg.width} encoding={msg.encoding} step={msg.step} data={bytes(msg.data).hex()}"
        )
    elif name == "sensor_msgs/msg/JointState":
        fields = (f"name={list(msg.name)} position={list(msg.position)} "
                  f"velocity={list(msg.velocity)} effort={list(msg.effort)}")
    else:
        fields = repr(msg)
    print(f"{m.channel.topic} {name} {fields}")
