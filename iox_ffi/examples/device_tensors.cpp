// Publishes `--count N` typed tensors (default 16) in GPU memory on the service the
// Rust `gpu_tensors` example and Python's `iox` read (`examples/typed-tensors`: float32
// elements, at most 64 x 8): tensor i has shape [i % 64 + 1, 8] and element k holds
// 1000 i + k. Each is loaned on a CUDA stream (here the legacy default stream),
// written on it (here with the driver's cuMemcpyHtoD, looked up at run time; a kernel
// in a real program) and sent on it: no host synchronisation per tensor.
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "iox.hpp"

namespace {
// The driver calls this example uses, from the libcuda.so.1 iox loads as well.
struct Driver {
    int (*init)(unsigned);
    int (*retain)(void**, int);
    int (*push)(void*);
    int (*copy)(std::uint64_t, const void*, std::size_t);

    static bool load(Driver& d) {
        void* lib = dlopen("libcuda.so.1", RTLD_NOW);
        if (lib == nullptr) return false;
        d.init = reinterpret_cast<int (*)(unsigned)>(dlsym(lib, "cuInit"));
        d.retain = reinterpret_cast<int (*)(void**, int)>(dlsym(lib, "cuDevicePrimaryCtxRetain"));
        d.push = reinterpret_cast<int (*)(void*)>(dlsym(lib, "cuCtxPushCurrent_v2"));
        d.copy = reinterpret_cast<int (*)(std::uint64_t, const void*, std::size_t)>(dlsym(lib, "cuMemcpyHtoD_v2"));
        return d.init && d.retain && d.push && d.copy;
    }
};

int fail(const char* what, const iox::Error& e) {
    std::fprintf(stderr, "error: %s: %s\n", what, e.message.c_str());
    return 1;
}
}  // namespace

int main(int argc, char** argv) {
    std::uint64_t count = 16;
    if (argc == 3 && std::strcmp(argv[1], "--count") == 0) {
        count = std::strtoull(argv[2], nullptr, 10);
    } else if (argc != 1) {
        std::fprintf(stderr, "usage: device_tensors [--count N]\n");
        return 2;
    }
    iox::Options options;
    options.memory_type = 3;  // CudaDevice: the pool is GPU memory
    options.max_slice_len = 64 * 8;
    options.subscriber_buffer = 64;
    auto service = iox::PubSub<float[]>::open_or_create("examples/typed-tensors", options);
    if (!service) return fail("open", service.error());
    auto publisher = service->device_publisher();
    if (!publisher) return fail("device publisher", publisher.error());
    Driver cuda{};
    void* ctx = nullptr;
    if (!Driver::load(cuda) || cuda.init(0) != 0 || cuda.retain(&ctx, publisher->device()) != 0 || cuda.push(ctx) != 0) {
        std::fprintf(stderr, "error: no usable CUDA driver\n");
        return 1;
    }
    auto connected = publisher->wait_for_subscribers(1, std::chrono::seconds(30));
    if (!connected || *connected < 1) return std::fprintf(stderr, "error: no subscriber within 30 s\n"), 1;
    void* stream = nullptr;  // the legacy default stream
    for (std::uint64_t i = 0; i < count; ++i) {
        auto loan = publisher->loan(iox::Tensor::contiguous(IOX_ELEMENT_F32, {i % 64 + 1, 8}), stream);
        if (!loan) return fail("loan", loan.error());
        std::vector<float> values(loan->size_bytes() / sizeof(float));
        for (std::size_t k = 0; k < values.size(); ++k) values[k] = static_cast<float>(1000 * i + k);
        if (cuda.copy(loan->device_ptr(), values.data(), loan->size_bytes()) != 0) {
            return std::fprintf(stderr, "error: the copy to the GPU failed\n"), 1;
        }
        auto sent = std::move(*loan).send(stream);
        if (!sent) return fail("send", sent.error());
    }
    std::printf("device_tensors: sent %llu tensors\n", static_cast<unsigned long long>(count));
    // Until the reader is gone (at most 30 s): this process's events must outlive its waits.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
        auto ports = service->port_counts();
        if (!ports || ports->second == 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return 0;
}
