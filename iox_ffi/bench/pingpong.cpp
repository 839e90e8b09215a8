// The ping-pong of iox_benches' `pingpong` (benches/src/endpoint.rs), written against
// the C++ layer, so the benchmark measures iox as a C++ program sees it:
//   cpp_pingpong follower ID LEN
//   cpp_pingpong leader ID LEN WARMUP ITERS BUDGET_MS
// Services "bench/ID/ping" (leader -> follower) and "bench/ID/pong" carry u8 slices of
// LEN bytes; only the first and last byte are written and read (a tag). The leader
// prints one line per timed round trip: its one-way latency (round trip / 2) in ns,
// after a first line "first N" (the very first round trip / 2). Both busy-poll.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "iox.hpp"

using Bytes = std::uint8_t[];
using Clock = std::chrono::steady_clock;

static const std::pair<std::uint8_t, std::uint8_t> STOP{0, 255};

[[noreturn]] static void die(const char* what, const iox::Error& e) {
    std::fprintf(stderr, "cpp_pingpong: %s: %s\n", what, e.message.c_str());
    std::exit(1);
}

struct Side {
    iox::PubSub<Bytes> ping, pong;
    iox::Publisher<Bytes> tx;
    iox::Subscriber<Bytes> rx;
    std::size_t len;

    void send(std::uint8_t first, std::uint8_t last) {
        auto loan = tx.loan(len);
        if (!loan) die("loan", loan.error());
        loan->data()[0] = first;
        loan->data()[len - 1] = last;
        auto sent = std::move(loan.value()).send();
        if (!sent) die("send", sent.error());
    }

    bool try_recv(std::pair<std::uint8_t, std::uint8_t>& got) {
        auto s = rx.receive();
        if (!s) die("receive", s.error());
        if (!s.value()) return false;
        const auto& sample = *s.value();
        got = {sample[0], sample[sample.size() - 1]};
        return true;
    }

    std::pair<std::uint8_t, std::uint8_t> recv() {
        std::pair<std::uint8_t, std::uint8_t> got;
        while (!try_recv(got)) {
        }
        return got;
    }
};

static iox::PubSub<Bytes> open(const std::string& name, std::size_t len) {
    iox::Options o;
    o.max_slice_len = len;
    o.max_publishers = 1;
    o.max_subscribers = 1;
    o.subscriber_buffer = 2;
    auto s = iox::PubSub<Bytes>::open_or_create(name, o);
    if (!s) die("open", s.error());
    return std::move(s.value());
}

static Side connect(const std::string& id, bool leader, std::size_t len) {
    auto ping = open("bench/" + id + "/ping", len);
    auto pong = open("bench/" + id + "/pong", len);
    auto& out = leader ? ping : pong;
    auto& in = leader ? pong : ping;
    auto tx = out.publisher();
    if (!tx) die("publisher", tx.error());
    auto rx = in.subscriber();
    if (!rx) die("subscriber", rx.error());
    auto start = Clock::now();
    for (;;) {
        auto o = out.port_counts();
        auto i = in.port_counts();
        if (!o || !i) die("port counts", o ? i.error() : o.error());
        if (o->second > 0 && i->first > 0) break;
        if (Clock::now() - start > std::chrono::seconds(30)) {
            std::fprintf(stderr, "cpp_pingpong: the other side never connected\n");
            std::exit(1);
        }
        std::this_thread::yield();
    }
    return Side{std::move(ping), std::move(pong), std::move(tx.value()), std::move(rx.value()), len};
}

static void follow(Side& s) {
    for (;;) {
        auto got = s.recv();
        s.send(got.first, got.second);
        if (got == STOP) break;
    }
    // Echo further STOPs until none came for 200 ms (the leader may have lost ours).
    auto last = Clock::now();
    while (Clock::now() - last < std::chrono::milliseconds(200)) {
        std::pair<std::uint8_t, std::uint8_t> got;
        if (s.try_recv(got) && got == STOP) {
            s.send(STOP.first, STOP.second);
            last = Clock::now();
        }
    }
}

static void lead(Side& s, unsigned long warmup, unsigned long iters, unsigned long budget_ms) {
    std::uint8_t tag = 0;
    auto round = [&]() {
        tag = static_cast<std::uint8_t>(tag % 254 + 1);
        std::uint8_t t = static_cast<std::uint8_t>(tag * 7) | 1;
        auto start = Clock::now();
        s.send(tag, t);
        auto got = s.recv();
        auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
        if (got.first != tag || got.second != t) {
            std::fprintf(stderr, "cpp_pingpong: echo carried the wrong bytes\n");
            std::exit(1);
        }
        return static_cast<unsigned long long>(ns);
    };
    std::printf("first %llu\n", round() / 2);
    for (unsigned long i = 0; i < warmup; i++) round();
    std::string out;
    auto start = Clock::now();
    for (unsigned long i = 0; i < iters; i++) {
        unsigned long long one_way = round() / 2;
        out += std::to_string(one_way > 0 ? one_way : 1);
        out += '\n';
        if (i % 64 == 0 && Clock::now() - start > std::chrono::milliseconds(budget_ms)) break;
    }
    std::fputs(out.c_str(), stdout);
    // STOP until it comes back.
    auto sent = Clock::now() - std::chrono::seconds(1);
    for (;;) {
        if (Clock::now() - sent > std::chrono::milliseconds(1)) {
            s.send(STOP.first, STOP.second);
            sent = Clock::now();
        }
        std::pair<std::uint8_t, std::uint8_t> got;
        if (s.try_recv(got) && got == STOP) break;
    }
}

int main(int argc, char** argv) {
    bool leader = argc == 7 && std::strcmp(argv[1], "leader") == 0;
    bool follower = argc == 4 && std::strcmp(argv[1], "follower") == 0;
    if (!leader && !follower) {
        std::fprintf(stderr,
                     "usage: cpp_pingpong follower ID LEN | cpp_pingpong leader ID LEN WARMUP ITERS BUDGET_MS\n");
        return 2;
    }
    std::size_t len = std::strtoull(argv[3], nullptr, 10);
    Side s = connect(argv[2], leader, len);
    if (leader) {
        lead(s, std::strtoul(argv[4], nullptr, 10), std::strtoul(argv[5], nullptr, 10),
             std::strtoul(argv[6], nullptr, 10));
    } else {
        follow(s);
    }
    return 0;
}
