// Typed tensors from C++ on a machine without a GPU: a host tensor service
// (`Options::tensors`, a slice of floats whose every sample carries its shape and
// strides), the same calls as the device ports without streams. Tensor i has shape
// [i + 1, 8] and its bytes hold 1000 i + k at element k; every third one is sent as the
// transpose of an [8, i + 1] array (strides [1, i + 1]), whose strides travel with it.
//   cpp_tensors publish [--count N]    waits up to 30 s for a subscriber, sends N tensors
//   cpp_tensors subscribe [--count N]  receives N tensors (30 s each at most), checks each
//                                      one's layout and values, prints "float32 [ROWS, 8]"
// A Python `svc.tensor_subscriber()` reads them with numpy (iox_python/tests/test_tensors.py);
// the C consumer is tensor_subscriber.c.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "iox.hpp"

using Tensors = iox::PubSub<float[]>;

static int fail(const std::string& message) {
    std::fprintf(stderr, "cpp_tensors: %s\n", message.c_str());
    return 1;
}

static int subscribe(Tensors& service, int count) {
    auto subscriber = service.tensor_subscriber();
    if (!subscriber) return fail(subscriber.error().message);
    for (int i = 0; i < count; ++i) {
        auto got = subscriber->receive(std::chrono::seconds(30));
        if (!got) return fail(got.error().message);
        if (!got.value()) return fail("no tensor " + std::to_string(i) + " within 30 s");
        const iox::TensorSample& s = *got.value();
        iox::Tensor t = s.tensor();
        std::uint64_t rows = static_cast<std::uint64_t>(i) + 1;
        std::vector<std::int64_t> strides = i % 3 == 2 ? std::vector<std::int64_t>{1, static_cast<std::int64_t>(rows)}
                                                       : std::vector<std::int64_t>{8, 1};
        if (t.element != IOX_ELEMENT_F32 || t.shape != std::vector<std::uint64_t>{rows, 8} || t.strides != strides)
            return fail("tensor " + std::to_string(i) + " has another layout");
        const float* v = s.elements<float>();
        for (std::uint64_t k = 0; k < rows * 8; ++k)
            if (v[k] != static_cast<float>(1000 * i + k))
                return fail("tensor " + std::to_string(i) + " element " + std::to_string(k) + " differs");
        std::printf("float32 [%llu, 8]\n", static_cast<unsigned long long>(rows));
        std::fflush(stdout);
    }
    return 0;
}

int main(int argc, char** argv) {
    bool publish = argc >= 2 && std::strcmp(argv[1], "publish") == 0;
    if (argc < 2 || (!publish && std::strcmp(argv[1], "subscribe") != 0)) {
        std::fprintf(stderr, "usage: cpp_tensors publish|subscribe [--count N]\n");
        return 2;
    }
    int count = 4;
    if (argc == 4 && std::strcmp(argv[2], "--count") == 0) count = std::atoi(argv[3]);
    iox::Options options;
    options.max_slice_len = 64 * 8;
    options.subscriber_buffer = 16;
    options.tensors = true;
    auto service = Tensors::open_or_create("same/tensors", options);
    if (!service) return fail(service.error().message);
    if (!publish) return subscribe(service.value(), count);
    auto publisher = service->tensor_publisher();
    if (!publisher) return fail(publisher.error().message);
    auto connected = publisher->wait_for_subscribers(1, std::chrono::seconds(30));
    if (!connected || connected.value() < 1) return fail("no subscriber within 30 s");
    for (int i = 0; i < count; ++i) {
        std::uint64_t rows = static_cast<std::uint64_t>(i) + 1;
        iox::Tensor t = iox::Tensor::contiguous(IOX_ELEMENT_F32, {rows, 8});
        if (i % 3 == 2) t.strides = {1, static_cast<std::int64_t>(rows)};  // an [8, rows] array's transpose
        auto loan = publisher->loan(t);
        if (!loan) return fail(loan.error().message);
        float* v = loan->elements<float>();
        for (std::uint64_t k = 0; k < rows * 8; ++k) v[k] = static_cast<float>(1000 * i + k);
        auto sent = std::move(loan.value()).send();
        if (!sent) return fail(sent.error().message);
        if (sent.value() != 1) return fail("a tensor reached " + std::to_string(sent.value()) + " subscribers");
    }
    std::printf("sent\n");
    return 0;
}
