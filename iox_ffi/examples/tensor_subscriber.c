/* Typed tensors into C on a machine without a GPU: the tensor subscriber of the host
 * tensor service "same/tensors" (a Python or C++ producer's: tensor i has shape
 * [i + 1, 8], element k of its bytes is 1000 i + k, every third one strided as an
 * [8, i + 1] array's transpose). Checks each tensor's element type, shape, strides and
 * every value, and prints "float32 [ROWS, 8]" per tensor.
 *   c_tensor_subscriber [--count N]   waits up to 30 s for the service and each tensor */
#define _POSIX_C_SOURCE 199309L /* nanosleep */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "iox.h"

static int fail(const char* what) {
    fprintf(stderr, "c_tensor_subscriber: %s: %s\n", what, iox_last_error());
    return 1;
}

int main(int argc, char** argv) {
    int count = 4;
    if (argc == 3 && strcmp(argv[1], "--count") == 0) count = atoi(argv[2]);
    IoxPubSubOptions o;
    iox_pubsub_options_init(&o);
    o.payload.name = "f32";
    o.payload.size = sizeof(float);
    o.payload.alignment = _Alignof(float);
    o.payload.any_bit_pattern = true;
    o.payload.slice = true;
    o.tensors = true;
    IoxPubSubService* service = NULL;
    /* The producer creates the service: look for it, bounded. */
    for (int tries = 0;; tries++) {
        IoxStatus s = iox_pubsub_open("same/tensors", IOX_OPEN, &o, &service);
        if (s == IOX_STATUS_OK) break;
        if (tries >= 3000) return fail("open");
        struct timespec ten_ms = {0, 10 * 1000 * 1000};
        nanosleep(&ten_ms, NULL);
    }
    IoxTensorSubscriber* sub = NULL;
    if (iox_tensor_subscriber_create(service, &sub) != IOX_STATUS_OK) return fail("subscriber");
    for (int i = 0; i < count; i++) {
        IoxTensorSample t;
        bool received = false;
        if (iox_tensor_subscriber_receive(sub, 30ull * 1000 * 1000 * 1000, &t, &received) != IOX_STATUS_OK)
            return fail("receive");
        if (!received) return fprintf(stderr, "c_tensor_subscriber: no tensor %d within 30 s\n", i), 1;
        uint64_t rows = (uint64_t)i + 1;
        int strided = i % 3 == 2;
        if (t.tensor.element != IOX_ELEMENT_F32 || t.tensor.ndim != 2 || t.tensor.shape[0] != rows ||
            t.tensor.shape[1] != 8 || t.tensor.strides[0] != (strided ? 1 : 8) ||
            t.tensor.strides[1] != (strided ? (int64_t)rows : 1) || t.len_bytes != rows * 8 * sizeof(float))
            return fprintf(stderr, "c_tensor_subscriber: tensor %d has another layout\n", i), 1;
        const float* v = t.data;
        for (uint64_t k = 0; k < rows * 8; k++)
            if (v[k] != (float)(1000 * i + k))
                return fprintf(stderr, "c_tensor_subscriber: tensor %d element %llu is %f\n", i,
                               (unsigned long long)k, v[k]), 1;
        printf("float32 [%llu, 8]\n", (unsigned long long)rows);
        fflush(stdout);
        if (iox_tensor_subscriber_release(sub, t.id) != IOX_STATUS_OK) return fail("release");
    }
    iox_tensor_subscriber_drop(sub);
    iox_pubsub_service_drop(service);
    return 0;
}
