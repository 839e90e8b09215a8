// Publishes `--count N` typed tensors (default 16) in GPU memory on the service the
// Rust `gpu_tensors` example and Python's `iox` read (`examples/typed-tensors`: float32
// elements, at most 64 x 8): tensor i has shape [i % 64 + 1, 8] and element k holds
// 1000 i + k. Each is loaned on a CUDA stream (here the legacy default stream),
// written on it (here with the driver's cuMemcpyHtoD, looked up at run time; a kernel
// in a real program) and sent on it: no host synchronisation per tensor.
// `--receive --count N` reads N such tensors instead: each one's shape and strides
// from the sample, its elements copied back after the stream waited for the write,
// one line per tensor: `float32 [2, 8] strides [8, 1] checked`.
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
    int (*copy_back)(void*, std::uint64_t, std::size_t);

    static bool load(Driver& d) {
        void* lib = dlopen("libcuda.so.1", RTLD_NOW);
        if (lib == nullptr) return false;
        d.init = reinterpret_cast<int (*)(unsigned)>(dlsym(lib, "cuInit"));
        d.retain = reinterpret_cast<int (*)(void**, int)>(dlsym(lib, "cuDevicePrimaryCtxRetain"));
        d.push = reinterpret_cast<int (*)(void*)>(dlsym(lib, "cuCtxPushCurrent_v2"));
        d.copy = reinterpret_cast<int (*)(std::uint64_t, const void*, std::size_t)>(dlsym(lib, "cuMemcpyHtoD_v2"));
        d.copy_back = reinterpret_cast<int (*)(void*, std::uint64_t, std::size_t)>(dlsym(lib, "cuMemcpyDtoH_v2"));
        return d.init && d.retain && d.push && d.copy && d.copy_back;
    }
};

int fail(const char* what, const iox::Error& e) {
    std::fprintf(stderr, "error: %s: %s\n", what, e.message.c_str());
    return 1;
}

const char* name_of(IoxElement e) { return e == IOX_ELEMENT_F32 ? "float32" : "another type"; }

template <class T>
std::string list(const std::vector<T>& v) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
    return out + "]";
}

// Reads `count` tensors and checks every element (the sender's index is the first
// element's thousands).
int receive(iox::PubSub<float[]>& service, Driver& cuda, std::uint64_t count) {
    auto subscriber = service.device_subscriber();
    if (!subscriber) return fail("device subscriber", subscriber.error());
    void* ctx = nullptr;
    if (cuda.retain(&ctx, 0) != 0 || cuda.push(ctx) != 0) return std::fprintf(stderr, "error: no context\n"), 1;
    for (std::uint64_t n = 0; n < count; ++n) {
        auto got = subscriber->receive(std::chrono::seconds(30));
        if (!got) return fail("receive", got.error());
        if (!*got) return std::fprintf(stderr, "error: no tensor within 30 s\n"), 1;
        iox::DeviceSample& sample = **got;
        auto waited = sample.wait(nullptr);
        if (!waited) return fail("wait", waited.error());
        std::vector<float> values(sample.size_bytes() / sizeof(float));
        if (cuda.copy_back(values.data(), sample.device_ptr(), sample.size_bytes()) != 0) {
            return std::fprintf(stderr, "error: the copy from the GPU failed\n"), 1;
        }
        std::uint64_t i = values.empty() ? 0 : static_cast<std::uint64_t>(values[0] / 1000);
        for (std::size_t k = 0; k < values.size(); ++k) {
            if (values[k] != static_cast<float>(1000 * i + k)) {
                return std::fprintf(stderr, "error: tensor %llu element %zu is %f\n", (unsigned long long)i, k, values[k]), 1;
            }
        }
        iox::Tensor t = sample.tensor();
        std::printf("%s %s strides %s checked\n", name_of(t.element), list(t.shape).c_str(), list(t.strides).c_str());
        std::fflush(stdout);
    }
    return 0;
}
}  // namespace

int main(int argc, char** argv) {
    std::uint64_t count = 16;
    bool receiving = false;
    for (int a = 1; a < argc; ++a) {
        if (std::strcmp(argv[a], "--receive") == 0) {
            receiving = true;
        } else if (std::strcmp(argv[a], "--count") == 0 && a + 1 < argc) {
            count = std::strtoull(argv[++a], nullptr, 10);
        } else {
            std::fprintf(stderr, "usage: device_tensors [--receive] [--count N]\n");
            return 2;
        }
    }
    iox::Options options;
    options.memory_type = 3;  // CudaDevice: the pool is GPU memory
    options.max_slice_len = 64 * 8;
    options.subscriber_buffer = 64;
    auto service = iox::PubSub<float[]>::open_or_create("examples/typed-tensors", options);
    if (!service) return fail("open", service.error());
    if (receiving) {
        Driver cuda{};
        if (!Driver::load(cuda) || cuda.init(0) != 0) return std::fprintf(stderr, "error: no usable CUDA driver\n"), 1;
        return receive(*service, cuda, count);
    }
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
