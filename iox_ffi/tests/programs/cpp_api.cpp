// Every part of the C++ layer in one process: `cpp_api ROOT` runs each check and prints
// one line per check, then "N passed, M failed"; exit 0 only if none failed. (Across
// processes, the other programs and the examples cover the same types.)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

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

template <class R>
static bool ok(const char* what, R& r) {
    if (!r) check(what, false, r.error().message);
    return static_cast<bool>(r);
}

using namespace std::chrono_literals;

static void values(const char* root) {
    iox::Options o;
    o.root = root;
    auto svc = iox::PubSub<Reading>::open_or_create("api/values", o);
    if (!ok("open values", svc)) return;
    auto pub = svc->publisher();
    auto sub = svc->subscriber();
    if (!ok("publisher", pub) || !ok("subscriber", sub)) return;
    auto counts = svc->port_counts();
    check("port counts", counts && counts->first == 1 && counts->second == 1);
    auto info = pub->pool_info();
    check("pool info", info && info->total_chunks > 0 && info->len > 0);
    auto sent = pub->send_copy(Reading{3, 1.5});
    check("send_copy reaches one subscriber", sent && sent.value() == 1);
    {
        auto loan = pub->loan();
        if (ok("loan", loan)) {
            loan->operator*() = Reading{4, 2.0};
            check("loan's size is one value", loan->size() == 1);
        }
        // Dropped unsent: given back.
    }
    {
        auto loan = pub->loan();
        if (ok("loan to move", loan)) {
            auto moved = std::move(loan.value());
            check("a moved-from loan has no data", loan->data() == nullptr && loan->size() == 0);
            moved.operator*() = Reading{5, 2.5};
            auto n = std::move(moved).send();
            check("the moved loan sends", n && n.value() == 1);
            check("a sent loan has no data", moved.data() == nullptr);
        }
    }
    {
        // Two samples held at once: the default max_held.
        auto a = sub->receive_for(1s);
        check("receive the copy", a && a.value() && (**a.value()).seq == 3);
        auto c = sub->receive_for(1s);
        check("the moved loan arrives", c && c.value() && (**c.value()).seq == 5);
    }
    auto b = sub->receive();
    check("the discarded loan never arrives", b && !b.value(), b ? "" : b.error().message);
    {
        // A loan sent from another thread is refused and stays for its own thread.
        auto loan = pub->loan();
        if (ok("a loan for another thread", loan)) {
            (*loan.value()) = Reading{9, 4.5};
            iox::Result<std::uint64_t> there = iox::Error{IOX_STATUS_OK, ""};
            std::thread other([&] { there = std::move(loan.value()).send(); });
            other.join();
            check("a loan sent from another thread is refused",
                  !there && there.error().status == IOX_STATUS_WRONG_THREAD);
            auto here = std::move(loan.value()).send();
            check("then its own thread sends it", here && here.value() == 1, here ? "" : here.error().message);
            auto got = sub->receive_for(1s);
            check("and it arrives", got && got.value() && (**got.value()).seq == 9);
        }
    }
    {
        // A sample and a loan each hold their own: they outlive their ports.
        auto sent2 = pub->send_copy(Reading{6, 3.0});
        auto kept = sub->receive_for(1s);
        auto later = pub->loan();
        check("a sample and a loan to keep", sent2 && kept && kept.value() && later);
        if (kept && kept.value() && later) {
            iox::Sample<Reading> sample = std::move(*kept.value());
            check("a moved-from sample has no data", kept.value()->data() == nullptr && kept.value()->size() == 0);
            auto loan = std::move(later.value());
            { auto gone = std::move(sub.value()); }
            { auto gone = std::move(pub.value()); }
            check("the sample outlives its subscriber", sample->seq == 6);
            auto dev = sample.device_ptr();
            check("an unpinned sample has no device pointer",
                  !dev && dev.error().status == IOX_STATUS_NO_DEVICE_POINTER);
            *loan = Reading{7, 3.5};
            auto n = std::move(loan).send();
            check("the loan outlives its publisher (sent to no one)", n && n.value() == 0,
                  n ? std::to_string(n.value()) : n.error().message);
        }
    }
    auto wrong = iox::PubSub<std::uint64_t>::open_existing("api/values", o);
    check("another type is refused", !wrong && wrong.error().status == IOX_STATUS_OPEN_FAILED,
          wrong ? "" : wrong.error().message);
}

// A user header in front of each value (`PubSub<T, H>`).
struct Stamp {
    std::uint64_t ns;
    std::uint32_t frame;
    std::uint32_t flags;
};
template <>
struct iox::TypeName<Stamp> {
    static constexpr const char* value = "api/Stamp";
};

static void headers(const char* root) {
    iox::Options o;
    o.root = root;
    using Stamped = iox::PubSub<Reading, Stamp>;
    auto svc = Stamped::open_or_create("api/headers", o);
    if (!ok("open with a header", svc)) return;
    auto pub = svc->publisher();
    auto sub = svc->subscriber();
    if (!ok("header publisher", pub) || !ok("header subscriber", sub)) return;
    {
        auto loan = pub->loan();
        if (ok("a loan with a header", loan)) {
            check("its header is sizeof(H), in front of the payload",
                  loan->header_size() == sizeof(Stamp) && loan->header_data() == &loan->header() &&
                      reinterpret_cast<char*>(loan->get()) == reinterpret_cast<char*>(&loan->header()) + sizeof(Stamp));
            loan->header() = Stamp{1000, 1, 0};
            **loan = Reading{1, 0.5};
            auto n = std::move(loan.value()).send();
            check("it sends", n && n.value() == 1);
            check("a sent loan has no header", loan->header_data() == nullptr && loan->header_size() == 0);
        }
    }
    auto sent = pub->send_copy(Stamp{2000, 2, 7}, Reading{2, 1.0});
    check("send_copy with a header", sent && sent.value() == 1);
    {
        auto a = sub->receive_for(1s);
        check("the loan's header arrives", a && a.value() && a.value()->header().ns == 1000 && (**a.value()).seq == 1);
        auto b = sub->receive_for(1s);
        check("send_copy's header arrives",
              b && b.value() && b.value()->header().frame == 2 && b.value()->header().flags == 7 &&
                  b.value()->header_size() == sizeof(Stamp) && (**b.value()).seq == 2);
        if (b && b.value()) {
            iox::Sample<Reading, Stamp> moved = std::move(*b.value());
            check("a moved-from sample has no header", b.value()->header_data() == nullptr);
            check("the moved sample keeps it", moved.header().ns == 2000);
        }
    }
    auto none = iox::PubSub<Reading>::open_existing("api/headers", o);
    check("opening without the header is refused, naming it",
          !none && none.error().status == IOX_STATUS_OPEN_FAILED &&
              none.error().message.find("api/Stamp") != std::string::npos &&
              none.error().message.find("no user header") != std::string::npos,
          none ? "" : none.error().message);
    auto other = iox::PubSub<Reading, std::uint64_t>::open_existing("api/headers", o);
    check("another header is refused, naming both",
          !other && other.error().message.find("api/Stamp") != std::string::npos &&
              other.error().message.find("u64") != std::string::npos,
          other ? "" : other.error().message);
    iox::Sample<Reading> plain(iox::Spent{});
    check("a sample of a service without a header has none", plain.header_data() == nullptr && plain.header_size() == 0);
}

static void slices(const char* root) {
    iox::Options o;
    o.root = root;
    o.max_slice_len = 64;
    auto svc = iox::PubSub<std::uint32_t[]>::open_or_create("api/slices", o);
    if (!ok("open slices", svc)) return;
    auto pub = svc->publisher();
    auto sub = svc->subscriber();
    if (!ok("slice publisher", pub) || !ok("slice subscriber", sub)) return;
    auto loan = pub->loan(10);
    if (!ok("slice loan", loan)) return;
    for (std::size_t i = 0; i < loan->size(); i++) (*loan)[i] = static_cast<std::uint32_t>(i * i);
    check("slice loan holds 10", loan->size() == 10);
    auto sent = std::move(loan.value()).send();
    check("slice sent", sent && sent.value() == 1);
    auto got = sub->receive_for(1s);
    check("slice received", got && got.value() && got.value()->size() == 10 && (*got.value())[9] == 81);
    auto big = pub->loan(65);
    check("a slice over the largest chunk is refused", !big && big.error().status == IOX_STATUS_LOAN_FAILED);
}

static void events(const char* root) {
    iox::EventOptions o;
    o.root = root;
    auto svc = iox::Event::open_or_create("api/events", o);
    if (!ok("open events", svc)) return;
    auto notifier = svc->notifier();
    auto listener = svc->listener();
    if (!ok("notifier", notifier) || !ok("listener", listener)) return;
    auto ws = iox::WaitSet::create(false);
    if (!ok("waitset", ws)) return;
    auto fd = listener->fd();
    if (!ok("listener fd", fd)) return;
    auto att = ws->attach(fd.value());
    auto tick = ws->attach_interval(1ms);
    if (!ok("attach", att) || !ok("attach interval", tick)) return;
    auto none = ws->wait_for(0ns);
    check("nothing yet", none && !none->fired(att.value()));
    auto reached = notifier->notify(5);
    check("notify reaches one listener", reached && reached.value() == 1);
    auto round = ws->wait_for(1s);
    check("the WaitSet wakes for the event", round && round->kind == IOX_WAIT_EVENTS && round->fired(att.value()));
    auto id = listener->wait_for();
    check("the listener takes id 5", id && id.value() && *id.value() == 5);
    auto again = listener->wait_for(1ms);
    check("nothing else pending", again && !again.value());
    auto d = ws->detach(tick.value());
    auto d2 = ws->detach(tick.value());
    check("detach once", d && !d2 && d2.error().status == IOX_STATUS_STALE_HANDLE);
    auto waker = ws->waker();
    if (ok("waker", waker)) {
        std::thread other([&] { (void)waker->wake(); });
        auto woken = ws->wait_for(10s);
        other.join();
        check("a waker in another thread interrupts the wait", woken && woken->kind == IOX_WAIT_INTERRUPT);
    }
    auto too_big = notifier->notify(100000);
    check("an id above the maximum is refused", !too_big && too_big.error().status == IOX_STATUS_NOTIFY_FAILED);
}

static void dropped_port(const char* root) {
    iox::Options o;
    o.root = root;
    auto svc = iox::PubSub<Reading>::open_or_create("api/dropped", o);
    if (!ok("open dropped", svc)) return;
    auto pub = svc->publisher();
    auto ws = iox::WaitSet::create(false);
    if (!ok("publisher", pub) || !ok("waitset", ws)) return;
    std::uint64_t id = 0;
    {
        auto sub = svc->subscriber();
        if (!ok("subscriber", sub)) return;
        auto fd = sub->fd();
        if (!ok("fd", fd)) return;
        auto att = ws->attach(fd.value());
        if (!ok("attach", att)) return;
        id = att.value();
        auto none = sub->receive();  // empty: arms the descriptor
        check("nothing to receive", none && !none.value());
        auto sent = pub->send_copy(Reading{1, 1.0});
        check("sent to the subscriber", sent && sent.value() == 1);
        auto round = ws->wait_for(1s);
        check("the attachment fires", round && round->fired(id));
    }  // the subscriber goes with the sample and its token unread
    auto after = ws->wait_for(50ms);
    check("a dropped port's attachment no longer fires", after && after->kind == IOX_WAIT_TIMEOUT);
    auto d = ws->detach(id);
    check("its attachment detaches", static_cast<bool>(d));
}

static void request_response(const char* root) {
    iox::RequestResponseOptions o;
    o.root = root;
    auto svc = iox::RequestResponse<Reading, std::uint64_t>::open_or_create("api/rr", o);
    if (!ok("open request-response", svc)) return;
    auto server = svc->server();
    auto client = svc->client();
    if (!ok("server", server) || !ok("client", client)) return;
    auto pending = client->send_copy(Reading{7, 0.0});
    if (!ok("send a request", pending)) return;
    auto request = server->receive_for(1s);
    if (!ok("receive the request", request)) return;
    check("the request arrived", request.value().has_value() && (**request.value()).seq == 7);
    if (!request.value()) return;
    auto r1 = request.value()->respond(70);
    auto loan = request.value()->loan();
    if (ok("response loan", loan)) {
        *loan.value() = 71;
        auto r2 = std::move(loan.value()).send();
        check("two responses sent", r1 && r2);
    }
    request.value().reset();  // ends the stream
    std::string got;
    while (!pending->finished()) {
        auto r = pending->receive_for(1s);
        if (!ok("receive a response", r)) return;
        if (r.value()) got += std::to_string(**r.value()) + " ";
    }
    check("the stream is 70 71 and ends", got == "70 71 ", got);
    auto cfd = client->fd();
    auto sfd = server->fd();
    check("client and server descriptors", cfd && sfd && cfd.value() >= 0 && sfd.value() >= 0);
}

int main(int argc, char** argv) {
    if (argc != 2) return std::fprintf(stderr, "usage: cpp_api ROOT\n"), 2;
    values(argv[1]);
    headers(argv[1]);
    slices(argv[1]);
    events(argv[1]);
    dropped_port(argv[1]);
    request_response(argv[1]);
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
