// A C++ notifier: `cpp_notifier ROOT SERVICE ID...` opens (or creates) the event
// service, waits (up to 30 s, polling) for nothing but its own notifier to be made,
// and signals each ID in order, printing how many listeners each reached.
#include <cstdio>
#include <cstdlib>

#include "iox.hpp"

int main(int argc, char** argv) {
    if (argc < 4) return std::fprintf(stderr, "usage: cpp_notifier ROOT SERVICE ID...\n"), 2;
    iox::EventOptions o;
    o.root = argv[1];
    auto events = iox::Event::open_or_create(argv[2], o);
    if (!events) return std::fprintf(stderr, "cpp_notifier: %s\n", events.error().message.c_str()), 1;
    auto notifier = events->notifier();
    if (!notifier) return std::fprintf(stderr, "cpp_notifier: %s\n", notifier.error().message.c_str()), 1;
    for (int i = 3; i < argc; i++) {
        auto reached = notifier->notify(static_cast<std::uint32_t>(std::strtoul(argv[i], nullptr, 10)));
        if (!reached) return std::fprintf(stderr, "cpp_notifier: %s\n", reached.error().message.c_str()), 1;
        std::printf("notified %s reached %llu\n", argv[i], static_cast<unsigned long long>(reached.value()));
    }
    return 0;
}
