// Access policies from C++ (tests/access_c.rs), one program in two roles:
// `cpp_access create ROOT SERVICE READER_UID`: creates the u64 service SERVICE with
//   permissions 0666 and the policy "READER_UID may read" (`Options::access`), checks
//   that it reads back, prints "created", and holds the service until its standard input
//   ends (the test closes it, or kills this process if it fails first).
// `cpp_access stranger ROOT SERVICE`: run as a user the policy does not name; its open
//   must fail with IOX_STATUS_NOT_IN_ACCESS_POLICY and a message that names the access
//   policy and this process's uid; prints "refused".
// Exit 0 on success; otherwise 1 with why on stderr.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "iox.hpp"

static int fail(const std::string& what, const std::string& detail) {
    std::fprintf(stderr, "cpp_access: %s: %s\n", what.c_str(), detail.c_str());
    return 1;
}

static bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

static int create(const char* root, const char* name, std::uint32_t reader) {
    iox::Options o;
    o.root = root;
    o.permissions = 0666;
    // A creator required of another user: this process may not create it.
    o.access = iox::AccessPolicy().read_uid(reader).created_by(reader);
    auto refused = iox::PubSub<std::uint64_t>::create(name, o);
    if (refused) return fail("create", "a policy naming another creator was not refused");
    if (!contains(refused.error().message, "as the creator"))
        return fail("the refusal does not say whose creator", refused.error().message);
    o.access = iox::AccessPolicy().read_uid(reader).created_by(static_cast<std::uint32_t>(geteuid()));
    auto svc = iox::PubSub<std::uint64_t>::create(name, o);
    if (!svc) return fail("create", svc.error().message);
    auto policy = svc->access_policy();
    if (!policy || !*policy) return fail("access policy", policy ? "none recorded" : policy.error().message);
    if (!contains(**policy, "read: uid " + std::to_string(reader))) return fail("access policy reads", **policy);
    std::printf("created\n");
    std::fflush(stdout);
    // Holds the service until told to stop: standard input ends.
    while (std::getchar() != EOF) {
    }
    return 0;
}

static int stranger(const char* root, const char* name) {
    iox::Options o;
    o.root = root;
    auto svc = iox::PubSub<std::uint64_t>::open_existing(name, o);
    if (svc) return fail("open", "a process the access policy does not name opened the service");
    const iox::Error& e = svc.error();
    if (e.status != IOX_STATUS_NOT_IN_ACCESS_POLICY)
        return fail("open", std::string(iox_status_name(e.status)) + " instead of IOX_STATUS_NOT_IN_ACCESS_POLICY: " +
                                e.message);
    std::string me = "uid " + std::to_string(geteuid());
    if (!contains(e.message, "access policy") || !contains(e.message, me))
        return fail("the refusal does not name the access policy and " + me, e.message);
    std::printf("refused\n");
    return 0;
}

int main(int argc, char** argv) {
    std::string role = argc > 1 ? argv[1] : "";
    if (role == "create" && argc == 5) return create(argv[2], argv[3], static_cast<std::uint32_t>(std::strtoul(argv[4], nullptr, 10)));
    if (role == "stranger" && argc == 4) return stranger(argv[2], argv[3]);
    std::fprintf(stderr, "usage: cpp_access create ROOT SERVICE READER_UID | cpp_access stranger ROOT SERVICE\n");
    return 2;
}
