// benches/src/bin/msgloop.rs written against the C++ layer (iox.hpp over the C ABI):
// one process sends and receives N `std::uint64_t` values through one service (one
// publisher, one subscriber, default limits), to count instructions per message with
// callgrind against the Rust loop. `instructions` compiles and counts both:
//
//   cargo build --release -p iox_benches --bins
//   cargo run --release -p iox_benches --bin instructions -- --library iox --case one
//
// (its "iox from C++" line: (Ir(30000) - Ir(10000)) / 20000 for each loop).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "iox.hpp"

[[noreturn]] static void die(const char* what, const iox::Error& e) {
    std::fprintf(stderr, "cpp_msgloop: %s: %s\n", what, e.message.c_str());
    std::exit(1);
}

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: cpp_msgloop MESSAGES\n");
        return 2;
    }
    unsigned long long n = std::strtoull(argv[1], nullptr, 10);
    char dir[] = "/tmp/cpp_msgloop.XXXXXX";
    if (mkdtemp(dir) == nullptr) {
        std::perror("mkdtemp");
        return 1;
    }
    iox::Options o;
    o.root = dir;
    auto svc = iox::PubSub<std::uint64_t>::open_or_create("msgloop", o);
    if (!svc) die("open", svc.error());
    auto tx = svc->publisher();
    if (!tx) die("publisher", tx.error());
    auto rx = svc->subscriber();
    if (!rx) die("subscriber", rx.error());
    std::uint64_t sum = 0;
    for (std::uint64_t i = 0; i < n; i++) {
        auto loan = tx->loan();
        if (!loan) die("loan", loan.error());
        **loan = i;
        auto sent = std::move(loan.value()).send();
        if (!sent) die("send", sent.error());
        auto got = rx->receive();
        if (!got) die("receive", got.error());
        if (!got.value()) {
            std::fprintf(stderr, "cpp_msgloop: no sample\n");
            return 1;
        }
        sum += **got.value();
    }
    std::printf("%llu messages, checksum %llu\n", n, static_cast<unsigned long long>(sum));
    std::string rm = std::string("rm -rf ") + dir;
    return std::system(rm.c_str()) == 0 ? 0 : 1;
}
