// Sleeps in a WaitSet on the examples' readings and a 1 s heartbeat, printing each
// reading as it arrives, until `--count N` readings (default 10) came; Ctrl-C ends it.
// Talks to the Rust, Python and C examples' publishers.
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
template <>
struct iox::AnyBitPattern<Reading> : std::true_type {};

static int fail(const char* what, const iox::Error& e) {
    std::fprintf(stderr, "error: %s: %s\n", what, e.message.c_str());
    return 1;
}

int main(int argc, char** argv) {
    std::uint64_t count = 10;
    if (argc == 3 && std::strcmp(argv[1], "--count") == 0) {
        count = std::strtoull(argv[2], nullptr, 10);
    } else if (argc != 1) {
        std::fprintf(stderr, "usage: cpp_waitset [--count N]\n");
        return 2;
    }
    iox::Options options;
    options.subscriber_buffer = READINGS_BUFFER;
    auto service = iox::PubSub<Reading>::open_or_create(READINGS_SERVICE, options);
    if (!service) return fail("open", service.error());
    auto subscriber = service->subscriber();
    if (!subscriber) return fail("subscriber", subscriber.error());
    auto waitset = iox::WaitSet::create();
    if (!waitset) return fail("waitset", waitset.error());
    auto fd = subscriber->fd();
    if (!fd) return fail("fd", fd.error());
    auto readings = waitset->attach(fd.value());
    auto heartbeat = waitset->attach_interval(std::chrono::seconds(1));
    if (!readings || !heartbeat) return fail("attach", readings ? heartbeat.error() : readings.error());
    std::uint64_t got = 0;
    while (got < count) {
        auto round = waitset->wait();
        if (!round) return fail("wait", round.error());
        if (round->kind == IOX_WAIT_TERMINATION) break;
        if (round->fired(heartbeat.value())) std::printf("cpp_waitset: waiting\n");
        if (round->fired(readings.value())) {
            // Receive until none is left: the descriptor fires again for the next one.
            for (;;) {
                auto sample = subscriber->receive();
                if (!sample) return fail("receive", sample.error());
                if (!sample.value()) break;
                const Reading& r = **sample.value();
                std::printf("cpp_waitset: got seq %llu value %.1f\n", static_cast<unsigned long long>(r.seq), r.value);
                got++;
            }
        }
        std::fflush(stdout);
    }
    return 0;
}
