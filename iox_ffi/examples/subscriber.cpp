// Receives `--count N` readings (default 10), sleeping up to 30 s for each, and prints
// them. Talks to the Rust, Python and C examples' publishers.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "iox.hpp"
#include "reading.h"

template <>
struct iox::TypeName<Reading> {
    static constexpr const char* value = READING_TYPE_NAME;
};
// Two plain numbers, no padding: every bit pattern is a value (as the Rust derive says).
template <>
struct iox::AnyBitPattern<Reading> : std::true_type {};

int main(int argc, char** argv) {
    std::uint64_t count = 10;
    if (argc == 3 && std::strcmp(argv[1], "--count") == 0) {
        count = std::strtoull(argv[2], nullptr, 10);
    } else if (argc != 1) {
        std::fprintf(stderr, "usage: cpp_subscriber [--count N]\n");
        return 2;
    }
    iox::Options options;
    options.subscriber_buffer = READINGS_BUFFER;
    auto service = iox::PubSub<Reading>::open_or_create(READINGS_SERVICE, options);
    if (!service) return std::fprintf(stderr, "error: %s\n", service.error().message.c_str()), 1;
    auto subscriber = service->subscriber();
    if (!subscriber) return std::fprintf(stderr, "error: %s\n", subscriber.error().message.c_str()), 1;
    for (std::uint64_t i = 0; i < count; i++) {
        auto sample = subscriber->receive_for(std::chrono::seconds(30));
        if (!sample) return std::fprintf(stderr, "error: %s\n", sample.error().message.c_str()), 1;
        if (!sample.value()) return std::fprintf(stderr, "error: nothing within 30 s\n"), 1;
        const Reading& r = **sample.value();
        std::printf("cpp_subscriber: got seq %llu value %.1f\n", static_cast<unsigned long long>(r.seq), r.value);
        std::fflush(stdout);
    }
    return 0;
}
