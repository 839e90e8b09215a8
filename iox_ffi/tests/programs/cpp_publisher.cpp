// A C++ publisher: `cpp_publisher ROOT SERVICE COUNT` opens (or creates) the service,
// sends COUNT readings (seq, seq * 0.5) through the C++ layer and prints how many
// subscribers got the last one. Exit 1 with the library's message on any failure.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "iox.hpp"
#include "reading.h"

template <>
struct iox::TypeName<Reading> {
    static constexpr const char* value = READING_NAME;
};
template <>
struct iox::AnyBitPattern<Reading> : std::true_type {};

static int die(const char* what, const iox::Error& e) {
    std::fprintf(stderr, "cpp_publisher: %s: %s: %s\n", what, iox_status_name(e.status), e.message.c_str());
    return 1;
}

int main(int argc, char** argv) {
    if (argc != 4) return std::fprintf(stderr, "usage: cpp_publisher ROOT SERVICE COUNT\n"), 2;
    iox::Options o;
    o.root = argv[1];
    o.subscriber_buffer = 64;
    auto service = iox::PubSub<Reading>::open_or_create(argv[2], o);
    if (!service) return die("open", service.error());
    auto publisher = service->publisher();
    if (!publisher) return die("publisher", publisher.error());
    std::uint64_t count = std::strtoull(argv[3], nullptr, 10);
    std::uint64_t delivered = 0;
    for (std::uint64_t i = 0; i < count; i++) {
        auto loan = publisher->loan();
        if (!loan) return die("loan", loan.error());
        loan->operator*() = Reading{i, static_cast<double>(i) * 0.5};
        auto sent = std::move(loan.value()).send();
        if (!sent) return die("send", sent.error());
        delivered = sent.value();
    }
    std::printf("sent %llu delivered %llu\n", static_cast<unsigned long long>(count),
                static_cast<unsigned long long>(delivered));
    return 0;
}
