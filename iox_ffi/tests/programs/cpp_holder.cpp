// A C++ subscriber that holds what it receives: `cpp_holder ROOT SERVICE COUNT` opens
// the service, receives COUNT readings (up to 10 s each), keeps every sample, prints
// "holding N" and waits to be killed (the crash test SIGKILLs it).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "iox.hpp"
#include "reading.h"

template <>
struct iox::TypeName<Reading> {
    static constexpr const char* value = READING_NAME;
};
template <>
struct iox::AnyBitPattern<Reading> : std::true_type {};

int main(int argc, char** argv) {
    if (argc != 4) return std::fprintf(stderr, "usage: cpp_holder ROOT SERVICE COUNT\n"), 2;
    iox::Options o;
    o.root = argv[1];
    auto service = iox::PubSub<Reading>::open_existing(argv[2], o);
    if (!service) return std::fprintf(stderr, "cpp_holder: %s\n", service.error().message.c_str()), 1;
    auto sub = service->subscriber();
    if (!sub) return std::fprintf(stderr, "cpp_holder: %s\n", sub.error().message.c_str()), 1;
    std::printf("ready\n");
    std::fflush(stdout);
    std::vector<iox::Sample<Reading>> held;
    std::uint64_t count = std::strtoull(argv[3], nullptr, 10);
    while (held.size() < count) {
        auto got = sub->receive_for(std::chrono::seconds(10));
        if (!got) return std::fprintf(stderr, "cpp_holder: %s\n", got.error().message.c_str()), 1;
        if (!got.value()) return std::fprintf(stderr, "cpp_holder: nothing within 10 s\n"), 1;
        held.push_back(std::move(*got.value()));
    }
    std::printf("holding %zu\n", held.size());
    std::fflush(stdout);
    for (;;) pause();
}
