"""One side of one hop of `ros2hop` (benches/src/bin/ros2hop.rs): images published
with their send time (CLOCK_MONOTONIC, ns) in the header stamp, received and timed.

    hop.py rclpy-pub|iox-pub|ros2-pub|ros2-loan --topic T --size N --count C --rate R --warmup W
    hop.py rclpy-sub|iox-sub|ros2-sub --topic T --count C

Publishers wait for a subscriber, send W warm-up images (stamp.sec = -1, not timed),
then C timed ones, R per second (0: as fast as they go), each stamped when it is
ready to go: an rclpy message built (rclpy, and iox.ros2's one-line Publisher, which
copies the pixels into shared memory in `publish`), or an iox loan written in place.
An image of N bytes is rows of 1920 rgb8 pixels when N is a multiple of 5760 (1080p:
6220800), else one mono8 row. Subscribers print
`lat NS` per timed image and `rate MSGS_PER_S` (first to last timed image) at the end,
after C images or 3 s without one. rclpy: reliable, volatile, depth 10 (ROS 2's
default); iox: a bytes service with iox.ros2.IMAGE_HEADER, under $IOX_ROOT; ros2:
iox.ros2.Publisher / Subscription(Image, topic), published from an rclpy message
(ros2-pub) or written in place (ros2-loan), taken in place.
"""
import argparse
import sys
import time

import numpy as np


def stamp_now():
    t = time.monotonic_ns()
    return t // 1_000_000_000, t % 1_000_000_000


def stamp_loan(loan, warmup):
    """Stamps a loan's image header: -1 s for a warm-up image, else now."""
    h = loan.header
    if warmup:
        h["sec"], h["nanosec"] = -1, 0
    else:
        h["sec"], h["nanosec"] = stamp_now()


def pace(rate, i, start):
    if rate > 0:
        due = start + i / rate
        while time.monotonic() < due:
            time.sleep(min(0.001, max(0.0, due - time.monotonic())))


def report(lat, first, last):
    out = [f"lat {x}" for x in lat]
    n = len(lat)
    out.append(f"rate {((n - 1) / ((last - first) / 1e9)) if n > 1 and last > first else 0:.1f}")
    print("\n".join(out), flush=True)


def make_image(size):
    from sensor_msgs.msg import Image
    data = np.zeros(size, np.uint8).tobytes()
    if size % 5760 == 0:
        return Image(height=size // 5760, width=1920, encoding="rgb8", step=5760, data=data)
    return Image(height=1, width=size, encoding="mono8", step=size, data=data)


def send_timed(a, publish):
    """Publishes W warm-up then C timed copies of one image, stamped when built."""
    msg = make_image(a.size)
    start = time.monotonic()
    for i in range(a.warmup + a.count):
        pace(a.rate, i, start)
        if i < a.warmup:
            msg.header.stamp.sec, msg.header.stamp.nanosec = -1, 0
        else:
            msg.header.stamp.sec, msg.header.stamp.nanosec = stamp_now()
        publish(msg)


def ros2_pub(a):
    """iox.ros2's one-line publisher: the message object in, its pixels copied once."""
    import iox
    from sensor_msgs.msg import Image
    pub = iox.ros2.Publisher(Image, a.topic)
    end = time.monotonic() + 60
    while pub.get_subscription_count() < 1 and time.monotonic() < end:
        time.sleep(0.001)
    send_timed(a, pub.publish)


def ros2_loan(a):
    """iox.ros2's publisher with the pixels written in place (`loan_image`), as a
    camera driver that owns its buffer would: stamped when complete, as iox-pub."""
    import iox
    from sensor_msgs.msg import Image
    pub = iox.ros2.Publisher(Image, a.topic)
    end = time.monotonic() + 60
    while pub.get_subscription_count() < 1 and time.monotonic() < end:
        time.sleep(0.001)
    shape = (a.size // 5760, 1920, "rgb8") if a.size % 5760 == 0 else (1, a.size, "mono8")
    start = time.monotonic()
    for i in range(a.warmup + a.count):
        pace(a.rate, i, start)
        loan = pub.loan_image(*shape)
        iox.ros2.image_view(loan)[...] = 0
        stamp_loan(loan, i < a.warmup)
        loan.send()


def ros2_sub(a):
    import iox
    from sensor_msgs.msg import Image
    sub = iox.ros2.Subscription(Image, a.topic)
    print("ready", flush=True)
    lat, times = [], []
    last = time.monotonic()
    while len(lat) < a.count and time.monotonic() - last < (3 if lat else 60):
        m = sub.take(timeout=0.1, in_place=True)
        if m is None:
            continue
        now = time.monotonic_ns()
        if m.header.stamp.sec >= 0:
            lat.append(now - (m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec))
            times.append(now)
            last = time.monotonic()
        del m
    report(lat, times[0] if times else 0, times[-1] if times else 0)


def rclpy_pub(a):
    import rclpy
    from sensor_msgs.msg import Image
    rclpy.init()
    node = rclpy.create_node("hop_pub")
    pub = node.create_publisher(Image, a.topic, 10)
    end = time.monotonic() + 60
    while pub.get_subscription_count() < 1 and time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.01)
    send_timed(a, pub.publish)
    time.sleep(1)  # let the reliable writer finish before the node goes


def rclpy_sub(a):
    import rclpy
    from sensor_msgs.msg import Image
    rclpy.init()
    node = rclpy.create_node("hop_sub")
    lat, times = [], []

    def on(msg):
        now = time.monotonic_ns()
        if msg.header.stamp.sec >= 0:
            lat.append(now - (msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec))
            times.append(now)

    node.create_subscription(Image, a.topic, on, 10)
    last = time.monotonic()
    seen = 0
    while len(lat) < a.count and time.monotonic() - last < (3 if lat else 60):
        rclpy.spin_once(node, timeout_sec=0.05)
        if len(lat) != seen:
            seen, last = len(lat), time.monotonic()
    report(lat, times[0] if times else 0, times[-1] if times else 0)


def iox_service(a):
    import iox
    return (iox.Service(a.topic.strip("/"), root=None)
            .publish_subscribe(bytes, max_len=a.size, user_header=iox.ros2.IMAGE_HEADER))


def iox_pub(a):
    """Writes each image in place into a loan (as a camera driver would), stamps it
    when it is complete, and sends it."""
    import iox
    svc = iox_service(a).open()
    pub = svc.publisher()
    pub.wait_for_subscribers(1, 60)
    header = iox.ros2.image_header(1, a.size, "mono8")
    start = time.monotonic()
    for i in range(a.warmup + a.count):
        pace(a.rate, i, start)
        loan = pub.loan(a.size)
        loan.array[:] = 0
        h = loan.header
        h[...] = header
        del h
        stamp_loan(loan, i < a.warmup)
        loan.send()


def iox_sub(a):
    svc = iox_service(a).create()
    sub = svc.subscriber()
    print("ready", flush=True)
    lat, times = [], []
    last = time.monotonic()
    while len(lat) < a.count and time.monotonic() - last < (3 if lat else 60):
        s = sub.receive(timeout=0.1)
        if s is None:
            continue
        now = time.monotonic_ns()
        h = s.header
        if int(h["sec"]) >= 0:
            lat.append(now - (int(h["sec"]) * 1_000_000_000 + int(h["nanosec"])))
            times.append(now)
            last = time.monotonic()
        del s
    report(lat, times[0] if times else 0, times[-1] if times else 0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["rclpy-pub", "rclpy-sub", "iox-pub", "iox-sub", "ros2-pub", "ros2-loan",
                                    "ros2-sub"])
    p.add_argument("--topic", default="/bench/img")
    p.add_argument("--size", type=int, default=1 << 20)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--rate", type=float, default=30)
    p.add_argument("--warmup", type=int, default=10)
    a = p.parse_args()
    {"rclpy-pub": rclpy_pub, "rclpy-sub": rclpy_sub, "iox-pub": iox_pub, "iox-sub": iox_sub,
     "ros2-pub": ros2_pub, "ros2-loan": ros2_loan, "ros2-sub": ros2_sub}[a.mode](a)


if __name__ == "__main__":
    sys.exit(main())
