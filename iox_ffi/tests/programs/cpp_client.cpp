// A C++ client: `cpp_client ROOT SERVICE N` sends N requests Reading{i, i * 0.5} one
// after another and prints each request's stream of u64 responses: "request i: a b".
#include <chrono>
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
    std::fprintf(stderr, "cpp_client: %s: %s: %s\n", what, iox_status_name(e.status), e.message.c_str());
    return 1;
}

int main(int argc, char** argv) {
    if (argc != 4) return std::fprintf(stderr, "usage: cpp_client ROOT SERVICE N\n"), 2;
    iox::RequestResponseOptions o;
    o.root = argv[1];
    auto service = iox::RequestResponse<Reading, std::uint64_t>::open_or_create(argv[2], o);
    if (!service) return die("open", service.error());
    auto client = service->client();
    if (!client) return die("client", client.error());
    std::uint64_t n = std::strtoull(argv[3], nullptr, 10);
    for (std::uint64_t i = 0; i < n; i++) {
        auto pending = client->send_copy(Reading{i, static_cast<double>(i) * 0.5});
        if (!pending) return die("send", pending.error());
        std::string line = "request " + std::to_string(i) + ":";
        for (int waits = 0; !pending->finished(); waits++) {
            if (waits == 1000) return std::fprintf(stderr, "cpp_client: the stream did not end\n"), 1;
            auto r = pending->receive_for(std::chrono::seconds(10));
            if (!r) return die("receive", r.error());
            if (r.value()) line += " " + std::to_string(**r.value());
        }
        std::printf("%s\n", line.c_str());
    }
    return 0;
}
