// Frames with a per-sample user header, from C++: a `FrameHeader` (stamp, width,
// height, step, encoding) in front of each frame's pixels, written in place with
// `loan.header()` and read in place with `sample.header()`, on the service the Rust
// `camera` example and Python share ("examples/camera", see camera.h).
//   cpp_camera publish [--count N]    waits up to 30 s for a subscriber, sends frames
//                                     0..N, then waits (up to 30 s) until it leaves
//   cpp_camera subscribe [--count N]  prints "ready", receives N frames (30 s each at
//                                     most), checks every header field and pixel
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "camera.h"
#include "iox.hpp"

template <>
struct iox::TypeName<FrameHeader> {
    static constexpr const char* value = FRAME_HEADER_NAME;
};
// Numbers and bytes, no padding: every bit pattern is a value (as the Rust derive says).
template <>
struct iox::AnyBitPattern<FrameHeader> : std::true_type {};
// Its fields, recorded with the service: Python reads them without a dtype, `iox echo`
// prints them, and a program whose FrameHeader has other fields is refused naming one.
IOX_FIELDS(FrameHeader, IOX_FIELD(FrameHeader, stamp_ns), IOX_FIELD(FrameHeader, width),
           IOX_FIELD(FrameHeader, height), IOX_FIELD(FrameHeader, step), IOX_FIELD(FrameHeader, encoding))

// `[u8]` frames, each with a FrameHeader.
using Camera = iox::PubSub<std::uint8_t[], FrameHeader>;

static int fail(const std::string& message) {
    std::fprintf(stderr, "error: %s\n", message.c_str());
    return 1;
}

// Polls `done` every 5 ms for up to 30 s.
template <class F>
static bool wait_until(F done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
}

static int publish(Camera& camera, std::uint64_t count) {
    auto publisher = camera.publisher();
    if (!publisher) return fail(publisher.error().message);
    auto subscribers = [&] { auto c = camera.port_counts(); return c ? c->second : 0; };
    if (!wait_until([&] { return subscribers() > 0; })) return fail("no subscriber connected within 30 s");
    for (std::uint64_t i = 0; i < count; i++) {
        FrameHeader h = camera_frame_header(i);
        auto loan = publisher->loan(std::size_t{h.width} * h.height);
        if (!loan) return fail(loan.error().message);
        loan->header() = h;  // in place, in front of the pixels
        for (std::size_t j = 0; j < loan->size(); j++) (*loan)[j] = camera_frame_pixel(i, j);
        auto sent = std::move(loan.value()).send();
        if (!sent) return fail(sent.error().message);
    }
    if (!wait_until([&] { return subscribers() == 0; })) return fail("the subscriber did not leave within 30 s");
    return 0;
}

static int subscribe(Camera& camera, std::uint64_t count) {
    auto subscriber = camera.subscriber();
    if (!subscriber) return fail(subscriber.error().message);
    std::printf("ready\n");
    std::fflush(stdout);
    for (std::uint64_t n = 0; n < count; n++) {
        auto sample = subscriber->receive_for(std::chrono::seconds(30));
        if (!sample) return fail(sample.error().message);
        if (!sample.value()) return fail("no frame within 30 s");
        const auto& frame = *sample.value();
        const FrameHeader& h = frame.header();
        std::uint64_t i = h.stamp_ns - 1000000;
        FrameHeader want = camera_frame_header(i);
        if (std::memcmp(&h, &want, sizeof h) != 0) return fail("frame " + std::to_string(i) + ": wrong header");
        if (frame.size() != std::size_t{h.width} * h.height) return fail("frame " + std::to_string(i) + ": wrong size");
        for (std::size_t j = 0; j < frame.size(); j++) {
            if (frame[j] != camera_frame_pixel(i, j)) return fail("frame " + std::to_string(i) + ": wrong pixel");
        }
        std::printf("cpp_camera: frame %llu stamp %llu %ux%u %s ok\n", static_cast<unsigned long long>(i),
                    static_cast<unsigned long long>(h.stamp_ns), h.width, h.height,
                    reinterpret_cast<const char*>(h.encoding));
        std::fflush(stdout);
    }
    return 0;
}

int main(int argc, char** argv) {
    std::uint64_t count = 5;
    if (argc == 4 && std::strcmp(argv[2], "--count") == 0) {
        count = std::strtoull(argv[3], nullptr, 10);
    } else if (argc != 2) {
        std::fprintf(stderr, "usage: cpp_camera publish|subscribe [--count N]\n");
        return 2;
    }
    iox::Options options;
    options.max_slice_len = CAMERA_MAX_PIXELS;
    options.subscriber_buffer = CAMERA_BUFFER;
    auto camera = Camera::open_or_create(CAMERA_SERVICE, options);
    if (!camera) return fail(camera.error().message);
    if (std::strcmp(argv[1], "publish") == 0) return publish(camera.value(), count);
    if (std::strcmp(argv[1], "subscribe") == 0) return subscribe(camera.value(), count);
    std::fprintf(stderr, "usage: cpp_camera publish|subscribe [--count N]\n");
    return 2;
}
