// A C++ ROS 2 camera's hot topic on iox (iox_ros2.hpp): `sensor_msgs/msg/Image` frames
// as an `ImageHeader` in front of the pixels, written in place, on the service
// "camera/image" that `iox-ros2 --export` shows to ROS as the topic /camera/image and
// Python's `iox.ros2.Subscription(Image, "/camera/image")` takes as rclpy messages.
//   cpp_ros2_camera publish [--count N]    waits up to 30 s for a subscriber, sends N
//                                          1080p rgb8 frames (frame i: stamp i s,
//                                          frame_id "camera", pixel j = (j * 7 + i) % 256),
//                                          then waits (up to 30 s) until it leaves
//   cpp_ros2_camera subscribe [--count N]  prints "ready", receives N frames, checks
//                                          each as above, prints one line per frame
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "iox_ros2.hpp"

static constexpr std::uint32_t HEIGHT = 1080, WIDTH = 1920;

static int fail(const std::string& message) {
    std::fprintf(stderr, "error: %s\n", message.c_str());
    return 1;
}

template <class F>
static bool wait_until(F done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
}

static std::uint8_t pixel(std::uint64_t frame, std::size_t j) { return static_cast<std::uint8_t>((j * 7 + frame) & 0xff); }

static int publish(iox::ros2::Image& camera, std::uint64_t count) {
    auto publisher = camera.publisher();
    if (!publisher) return fail(publisher.error().message);
    auto subscribers = [&] { auto c = camera.port_counts(); return c ? c->second : 0; };
    if (!wait_until([&] { return subscribers() > 0; })) return fail("no subscriber connected within 30 s");
    for (std::uint64_t i = 0; i < count; i++) {
        auto header = iox::ros2::ImageHeader::make(HEIGHT, WIDTH, "rgb8", "camera", static_cast<std::int32_t>(i));
        if (!header) return fail(header.error().message);
        auto loan = publisher->loan(std::size_t{header->step} * HEIGHT);
        if (!loan) return fail(loan.error().message);
        loan->header() = header.value();
        for (std::size_t j = 0; j < loan->size(); j++) (*loan)[j] = pixel(i, j);
        auto sent = std::move(loan.value()).send();
        if (!sent) return fail(sent.error().message);
    }
    if (!wait_until([&] { return subscribers() == 0; })) return fail("the subscriber did not leave within 30 s");
    return 0;
}

static int subscribe(iox::ros2::Image& camera, std::uint64_t count) {
    auto subscriber = camera.subscriber();
    if (!subscriber) return fail(subscriber.error().message);
    std::printf("ready\n");
    std::fflush(stdout);
    for (std::uint64_t n = 0; n < count; n++) {
        auto sample = subscriber->receive_for(std::chrono::seconds(30));
        if (!sample) return fail(sample.error().message);
        if (!sample.value()) return fail("no frame within 30 s");
        const auto& frame = *sample.value();
        const iox::ros2::ImageHeader& h = frame.header();
        std::uint64_t i = static_cast<std::uint64_t>(h.sec);
        if (h.height != HEIGHT || h.width != WIDTH || h.step != WIDTH * 3 || h.encoding_text() != "rgb8" ||
            h.frame_id_text() != "camera") {
            return fail("frame " + std::to_string(i) + ": wrong header");
        }
        if (frame.size() != std::size_t{h.step} * h.height) return fail("frame " + std::to_string(i) + ": wrong size");
        for (std::size_t j = 0; j < frame.size(); j++) {
            if (frame[j] != pixel(i, j)) return fail("frame " + std::to_string(i) + ": wrong pixel");
        }
        std::printf("cpp_ros2_camera: frame %llu %ux%u rgb8 ok\n", static_cast<unsigned long long>(i), h.width, h.height);
        std::fflush(stdout);
    }
    return 0;
}

int main(int argc, char** argv) {
    std::uint64_t count = 3;
    if (argc == 4 && std::strcmp(argv[2], "--count") == 0) {
        count = std::strtoull(argv[3], nullptr, 10);
    } else if (argc != 2) {
        std::fprintf(stderr, "usage: cpp_ros2_camera publish|subscribe [--count N]\n");
        return 2;
    }
    auto camera = iox::ros2::Image::open_or_create("camera/image", iox::ros2::image_options());
    if (!camera) return fail(camera.error().message);
    if (std::strcmp(argv[1], "publish") == 0) return publish(camera.value(), count);
    if (std::strcmp(argv[1], "subscribe") == 0) return subscribe(camera.value(), count);
    std::fprintf(stderr, "usage: cpp_ros2_camera publish|subscribe [--count N]\n");
    return 2;
}
