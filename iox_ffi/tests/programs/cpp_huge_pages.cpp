// Huge-page pools from C++ (tests/huge_pages_c.rs): `cpp_huge_pages ROOT SERVICE LEN`
// opens SERVICE, the u8 slices on 2 MiB pages that `c_huge_pages publish` created:
// asking for base pages is refused (IOX_STATUS_OPEN_FAILED naming the page size), asking
// for `iox::PageSize::Huge2MiB` opens it; its subscriber's pool info says 2 MiB pages;
// prints "subscribed", receives one frame (up to 30 s), checks that it is LEN bytes, byte
// i being frame_byte(i), and prints "received LEN".
// Exit 0 on success; otherwise 1 with why on stderr.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "iox.hpp"

static int fail(const std::string& what, const std::string& detail) {
    std::fprintf(stderr, "cpp_huge_pages: %s: %s\n", what.c_str(), detail.c_str());
    return 1;
}

// Byte i of the frame (what tests/programs/c_huge_pages.c sends).
static std::uint8_t frame_byte(std::uint64_t i) { return static_cast<std::uint8_t>((i * 2654435761u) >> 13); }

int main(int argc, char** argv) {
    if (argc != 4) return std::fprintf(stderr, "usage: cpp_huge_pages ROOT SERVICE LEN\n"), 2;
    const std::uint64_t len = std::strtoull(argv[3], nullptr, 10);
    using Frames = iox::PubSub<std::uint8_t[]>;
    iox::Options o;
    o.root = argv[1];
    o.page_size = iox::PageSize::Base;
    auto refused = Frames::open_existing(argv[2], o);
    if (refused) return fail("open for base pages", "a service on 2 MiB pages opened for base pages");
    if (refused.error().status != IOX_STATUS_OPEN_FAILED ||
        refused.error().message.find("page size 2 MiB") == std::string::npos)
        return fail("open for base pages", std::string(iox_status_name(refused.error().status)) + ": " +
                                               refused.error().message);
    o.page_size = iox::PageSize::Huge2MiB;
    auto svc = Frames::open_existing(argv[2], o);
    if (!svc) return fail("open for 2 MiB pages", svc.error().message);
    auto sub = svc->subscriber();
    if (!sub) return fail("subscriber", sub.error().message);
    auto info = sub->pool_info();
    if (!info) return fail("pool info", info.error().message);
    if (iox::page_size(*info) != iox::PageSize::Huge2MiB || info->page_bytes != (2u << 20) || info->len % (2u << 20) != 0)
        return fail("pool info", "page size " + std::to_string(info->page_size) + ", " +
                                     std::to_string(info->page_bytes) + " bytes a page, " + std::to_string(info->len) +
                                     " long");
    std::printf("subscribed\n");
    std::fflush(stdout);
    auto got = sub->receive_for(std::chrono::seconds(30));
    if (!got) return fail("receive", got.error().message);
    if (!*got) return fail("receive", "no frame within 30 s");
    const auto& frame = **got;
    if (frame.size() != len) return fail("frame", std::to_string(frame.size()) + " bytes, not " + std::to_string(len));
    for (std::uint64_t i = 0; i < len; i++)
        if (frame[i] != frame_byte(i))
            return fail("frame", "byte " + std::to_string(i) + " is " + std::to_string(frame[i]) + ", not " +
                                     std::to_string(frame_byte(i)));
    std::printf("received %llu\n", static_cast<unsigned long long>(len));
    return 0;
}
