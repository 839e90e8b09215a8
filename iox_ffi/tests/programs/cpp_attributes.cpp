// Service attributes from C++ (and the C calls under it), with a Rust process on the
// other side (tests/cross_language.rs):
// `cpp_attributes read ROOT`: opens the services the Rust side created (ffi/attr/*:
//   publish-subscribe, event, request-response) with requirements they meet, prints
//   each attribute as "SERVICE KEY=VALUE" (a value's newlines and tabs as \n and \t),
//   checks the refusals (another value, a missing key) and the C calls' answers to
//   mistakes, one line per check, then "N passed, M failed"; exit 0 only if none failed.
// `cpp_attributes create ROOT`: creates the event service ffi/attr/from-cpp with
//   attributes, prints "ready", waits (up to 30 s) for event 1, prints "done".
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "iox.hpp"
#include "reading.h"

template <>
struct iox::TypeName<Reading> {
    static constexpr const char* value = READING_NAME;
};
template <>
struct iox::AnyBitPattern<Reading> : std::true_type {};

static int passed = 0, failed = 0;

static void check(const char* what, bool ok, const std::string& detail = "") {
    std::printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", what, detail.empty() ? "" : ": ", detail.c_str());
    ok ? passed++ : failed++;
}

static bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

static std::string escaped(const std::string& value) {
    std::string out;
    for (char c : value) {
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else {
            out += c;
        }
    }
    return out;
}

static void print(const char* service, const std::vector<iox::Attribute>& attributes) {
    for (const auto& a : attributes) std::printf("%s %s=%s\n", service, a.first.c_str(), escaped(a.second).c_str());
}

static void pubsub(const char* root) {
    iox::Options o;
    o.root = root;
    o.required_attributes = {{"ros2/type", "ffi/Reading"}, {"unit", std::nullopt}};
    auto svc = iox::PubSub<Reading>::open_existing("ffi/attr/readings", o);
    check("open with requirements met", static_cast<bool>(svc), svc ? "" : svc.error().message);
    if (!svc) return;
    auto all = svc->attributes();
    check("three attributes, sorted by key",
          all && all->size() == 3 && (*all)[0].first == "ros2/msgdef" && (*all)[2].first == "unit");
    if (all) print("readings", *all);
    auto unit = svc->attribute("unit");
    check("attribute(key)", unit && unit.value() && *unit.value() == "m/s");
    auto none = svc->attribute("dds/partition");
    check("attribute(missing key) is nullopt", none && !none.value());

    o.required_attributes = {{"ros2/type", "geometry_msgs/msg/Pose"}};
    auto other = iox::PubSub<Reading>::open_existing("ffi/attr/readings", o);
    check("another value is refused, naming the key and both values",
          !other && other.error().status == IOX_STATUS_OPEN_FAILED &&
              contains(other.error().message, "\"ros2/type\"") &&
              contains(other.error().message, "geometry_msgs/msg/Pose") &&
              contains(other.error().message, "ffi/Reading"),
          other ? "opened" : other.error().message);
    o.required_attributes = {{"dds/partition", std::nullopt}};
    auto missing = iox::PubSub<Reading>::open_existing("ffi/attr/readings", o);
    check("a missing key is refused, naming it",
          !missing && contains(missing.error().message, "\"dds/partition\""),
          missing ? "opened" : missing.error().message);
}

static void event(const char* root) {
    iox::EventOptions o;
    o.root = root;
    o.required_attributes = {{"role", "estop"}};
    // Recorded only when creating: not compared with the existing service's.
    o.attributes = {{"role", "estop"}, {"other", "ignored on open"}};
    auto svc = iox::Event::open_or_create("ffi/attr/event", o);
    check("event: open_or_create opens the existing one", static_cast<bool>(svc),
          svc ? "" : svc.error().message);
    if (!svc) return;
    auto all = svc->attributes();
    check("event: its creator's attributes", all && all->size() == 1 && (*all)[0] == iox::Attribute{"role", "estop"});
    if (all) print("event", *all);
}

static void request_response(const char* root) {
    iox::RequestResponseOptions o;
    o.root = root;
    o.required_attributes = {{"version", "2"}};
    auto svc = iox::RequestResponse<Reading, std::uint64_t>::open_existing("ffi/attr/rr", o);
    check("request-response: open with a requirement met", static_cast<bool>(svc),
          svc ? "" : svc.error().message);
    if (!svc) return;
    auto version = svc->attribute("version");
    check("request-response: attribute(key)", version && version.value() && *version.value() == "2");
    auto all = svc->attributes();
    if (all) print("rr", *all);
}

static void c_calls(const char* root) {
    IoxPubSubOptions o;
    iox_pubsub_options_init(&o);
    o.root = root;
    o.payload = iox::type_of<Reading>();
    check("options_init: no attributes",
          o.attributes == nullptr && o.attribute_count == 0 && o.required_attributes == nullptr &&
              o.required_attribute_count == 0);
    IoxPubSubService* s = nullptr;
    o.attribute_count = 1;
    check("a count without an array is refused",
          iox_pubsub_open("ffi/attr/c", IOX_OPEN_OR_CREATE, &o, &s) == IOX_STATUS_NULL_POINTER && s == nullptr,
          iox_last_error());
    IoxAttribute bad{"bad key", "v"};
    o.attributes = &bad;
    check("an invalid key fails the open, naming it",
          iox_pubsub_open("ffi/attr/c", IOX_CREATE, &o, &s) == IOX_STATUS_OPEN_FAILED &&
              contains(iox_last_error(), "\"bad key\""),
          iox_last_error());
    IoxAttribute good[2] = {{"b", "2"}, {"a", "1\n2"}};
    IoxAttribute need{"a", nullptr};
    o.attributes = good;
    o.attribute_count = 2;
    o.required_attributes = &need;
    o.required_attribute_count = 1;
    if (iox_pubsub_open("ffi/attr/c", IOX_CREATE, &o, &s) != IOX_STATUS_OK) {
        check("create with attributes", false, iox_last_error());
        return;
    }
    std::size_t n = 0;
    const char* key = nullptr;
    const char* value = nullptr;
    check("count", iox_pubsub_attribute_count(s, &n) == IOX_STATUS_OK && n == 2);
    check("index 0 is the first key",
          iox_pubsub_attribute(s, 0, &key, &value) == IOX_STATUS_OK && std::strcmp(key, "a") == 0 &&
              std::strcmp(value, "1\n2") == 0);
    check("either out pointer may be NULL", iox_pubsub_attribute(s, 1, nullptr, &value) == IOX_STATUS_OK &&
                                               std::strcmp(value, "2") == 0);
    check("an index out of range is refused",
          iox_pubsub_attribute(s, 2, &key, &value) == IOX_STATUS_INVALID_ARGUMENT &&
              contains(iox_last_error(), "out of range"),
          iox_last_error());
    check("get of a missing key gives NULL",
          iox_pubsub_attribute_get(s, "c", &value) == IOX_STATUS_OK && value == nullptr);
    check("get without an out pointer is refused", iox_pubsub_attribute_get(s, "a", nullptr) == IOX_STATUS_NULL_POINTER);
    iox_pubsub_service_drop(s);
}

static int create(const char* root) {
    iox::EventOptions o;
    o.root = root;
    o.attributes = {{"ros2/type", "std_msgs/msg/Empty"}, {"note", "made in C++\n\tline 2"}};
    o.required_attributes = {{"ros2/type", "std_msgs/msg/Empty"}};
    auto svc = iox::Event::create("ffi/attr/from-cpp", o);
    if (!svc) return std::fprintf(stderr, "cpp_attributes: %s\n", svc.error().message.c_str()), 1;
    auto listener = svc->listener();
    if (!listener) return std::fprintf(stderr, "cpp_attributes: %s\n", listener.error().message.c_str()), 1;
    std::printf("ready\n");
    std::fflush(stdout);
    auto id = listener->wait_for(std::chrono::seconds(30));
    if (!id || !id.value() || *id.value() != 1) return std::fprintf(stderr, "cpp_attributes: no event 1\n"), 1;
    std::printf("done\n");
    return 0;
}

int main(int argc, char** argv) {
    if (argc != 3) return std::fprintf(stderr, "usage: cpp_attributes read|create ROOT\n"), 2;
    if (std::strcmp(argv[1], "create") == 0) return create(argv[2]);
    pubsub(argv[2]);
    event(argv[2]);
    request_response(argv[2]);
    c_calls(argv[2]);
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
