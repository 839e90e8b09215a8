// Request-response between two processes: `cpp_request_response server [--count N]`
// answers N requests (default 3) with the square of the number asked, then exits;
// `cpp_request_response client [--count N]` asks 1..N and prints the answers. The
// service is "examples/squares" (u64 -> u64), which a Rust program opens as
// `request_response::<u64, u64>()`.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "iox.hpp"

using Squares = iox::RequestResponse<std::uint64_t, std::uint64_t>;

static int fail(const char* what, const iox::Error& e) {
    std::fprintf(stderr, "error: %s: %s\n", what, e.message.c_str());
    return 1;
}

static int serve(Squares& service, std::uint64_t count) {
    auto server = service.server();
    if (!server) return fail("server", server.error());
    std::printf("server: waiting for %llu requests\n", static_cast<unsigned long long>(count));
    std::fflush(stdout);
    for (std::uint64_t served = 0; served < count;) {
        auto request = server->receive_for(std::chrono::seconds(30));
        if (!request) return fail("receive", request.error());
        if (!request.value()) return std::fprintf(stderr, "error: no request within 30 s\n"), 1;
        std::uint64_t n = **request.value();
        auto sent = request.value()->respond(n * n);
        if (!sent) return fail("respond", sent.error());
        served++;
    }  // each request's stream ends when its ActiveRequest goes
    return 0;
}

static int ask(Squares& service, std::uint64_t count) {
    auto client = service.client();
    if (!client) return fail("client", client.error());
    for (std::uint64_t n = 1; n <= count; n++) {
        // A server may not be there yet: ask again for up to 30 s.
        auto pending = client->send_copy(n);
        for (int tries = 0; !pending && tries < 3000; tries++) {
            struct timespec t = {0, 10 * 1000 * 1000};
            nanosleep(&t, nullptr);
            pending = client->send_copy(n);
        }
        if (!pending) return fail("send", pending.error());
        auto answer = pending->receive_for(std::chrono::seconds(30));
        if (!answer) return fail("receive", answer.error());
        if (!answer.value()) return std::fprintf(stderr, "error: no answer within 30 s\n"), 1;
        std::printf("client: %llu squared is %llu\n", static_cast<unsigned long long>(n),
                    static_cast<unsigned long long>(**answer.value()));
    }
    return 0;
}

int main(int argc, char** argv) {
    std::uint64_t count = 3;
    bool ok_args = argc == 2 || (argc == 4 && std::strcmp(argv[2], "--count") == 0);
    if (!ok_args || (std::strcmp(argv[1], "server") != 0 && std::strcmp(argv[1], "client") != 0)) {
        std::fprintf(stderr, "usage: cpp_request_response server|client [--count N]\n");
        return 2;
    }
    if (argc == 4) count = std::strtoull(argv[3], nullptr, 10);
    auto service = Squares::open_or_create("examples/squares");
    if (!service) return fail("open", service.error());
    return std::strcmp(argv[1], "server") == 0 ? serve(*service, count) : ask(*service, count);
}
