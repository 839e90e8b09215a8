// The blackboard `examples/robot` from C++, the same one as the Rust example
// `examples/src/bin/blackboard.rs`: keys of type u32, key 0 a speed (f64), key 1 a
// position ([f32; 3]).
//
//   cpp_blackboard write 5   # five updates of both keys
//   cpp_blackboard read      # prints both keys once
//   cpp_blackboard watch N   # prints the next N changes (waits up to 30 s for each)
//
// Either side may start first: the first opens it and writes the initial values.
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "iox_blackboard.hpp"

using Board = iox::Blackboard<std::uint32_t>;
using Position = std::array<float, 3>;

static int fail(const char* what, const iox::Error& e) {
    std::fprintf(stderr, "error: %s: %s\n", what, e.message.c_str());
    return 1;
}

static int write(Board& board, unsigned long updates) {
    auto writer = board.writer();
    if (!writer) return fail("writer", writer.error());
    for (unsigned long i = 1; i <= updates; i++) {
        auto speed = writer->update<double>(0, i * 0.5);
        if (!speed) return fail("update speed", speed.error());
        auto g = writer->update<Position>(1, Position{float(i), 2.0f * float(i), 0.0f});
        if (!g) return fail("update position", g.error());
        std::printf("update %lu: generation %llu\n", i, static_cast<unsigned long long>(*g));
    }
    return 0;
}

static int read(Board& board) {
    auto reader = board.reader();
    if (!reader) return fail("reader", reader.error());
    auto speed = reader->get<double>(0);
    if (!speed) return fail("get speed", speed.error());
    auto position = reader->get<Position>(1);
    if (!position) return fail("get position", position.error());
    auto g = reader->generation(1);
    if (!g) return fail("generation", g.error());
    std::printf("speed %g\nposition [%g, %g, %g] (generation %llu)\n", *speed, (*position)[0], (*position)[1],
                (*position)[2], static_cast<unsigned long long>(g->first));
    return 0;
}

static int watch(Board& board, unsigned long changes) {
    auto listener = board.listener();
    if (!listener) return fail("listener", listener.error());
    auto reader = board.reader();
    if (!reader) return fail("reader", reader.error());
    std::printf("watching\n");
    std::fflush(stdout);
    for (unsigned long i = 0; i < changes; i++) {
        auto id = listener->wait_for(std::chrono::seconds(30));
        if (!id) return fail("wait", id.error());
        if (!*id) return std::fprintf(stderr, "error: no change within 30 s\n"), 1;
        auto speed = reader->get<double>(0);
        if (!speed) return fail("get speed", speed.error());
        std::printf("key %u changed: speed %g\n", **id, *speed);
        std::fflush(stdout);
    }
    return 0;
}

int main(int argc, char** argv) {
    bool ok = argc >= 2 && (std::strcmp(argv[1], "read") == 0 ? argc == 2 : argc == 3);
    if (!ok || (std::strcmp(argv[1], "write") != 0 && std::strcmp(argv[1], "read") != 0 &&
                std::strcmp(argv[1], "watch") != 0)) {
        std::fprintf(stderr, "usage: cpp_blackboard write UPDATES | read | watch CHANGES\n");
        return 2;
    }
    auto board = Board::named("examples/robot").add<double>(0, 0.0).add<Position>(1, Position{0, 0, 0}).open_or_create();
    if (!board) return fail("open", board.error());
    if (std::strcmp(argv[1], "read") == 0) return read(*board);
    unsigned long n = std::strtoul(argv[2], nullptr, 10);
    return std::strcmp(argv[1], "write") == 0 ? write(*board, n) : watch(*board, n);
}
