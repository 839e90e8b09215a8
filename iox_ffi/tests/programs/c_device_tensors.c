/* Device tensors from C: `c_device_tensors ROOT` creates a CudaDevice service of f32
 * (at most 16 per sample) with a device publisher and subscriber in this process, and
 * checks: the publisher's element type and largest sample; loans refused with
 * IOX_STATUS_INVALID_TENSOR and a message naming the sizes (too large, strides past the
 * end, another element type, 9 dimensions, no element type); a 2x3 tensor and a
 * transposed 3x2 view sent and received with their shape and strides; a byte loan as
 * a 1-D tensor; stale ids refused. Prints "device tensors ok" or why not; exit 1 on
 * any failure. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "iox.h"

static int die(const char* what, IoxStatus s) {
    fprintf(stderr, "c_device_tensors: %s: %s: %s\n", what, iox_status_name(s), iox_last_error());
    return 1;
}

static IoxTensor tensor(IoxElement e, uint32_t ndim, const uint64_t* shape, const int64_t* strides) {
    IoxTensor t;
    memset(&t, 0, sizeof t);
    t.element = e;
    t.ndim = ndim;
    for (uint32_t d = 0; d < ndim && d < IOX_TENSOR_MAX_DIMS; d++) {
        t.shape[d] = shape[d];
        t.strides[d] = strides[d];
    }
    return t;
}

/* The loan of `t` must be refused as an invalid tensor whose message holds `words`. */
static int refused(IoxDevicePublisher* pub, IoxTensor t, const char* words) {
    IoxDeviceLoan loan;
    IoxStatus s = iox_device_publisher_loan(pub, NULL, &t, &loan);
    if (s != IOX_STATUS_INVALID_TENSOR || strstr(iox_last_error(), words) == NULL) {
        fprintf(stderr, "c_device_tensors: expected a refusal naming '%s', got %s: %s\n", words,
                iox_status_name(s), iox_last_error());
        return 1;
    }
    return 0;
}

static int same(const IoxTensor* a, const IoxTensor* b) {
    if (a->element != b->element || a->ndim != b->ndim) return 0;
    for (uint32_t d = 0; d < a->ndim; d++) {
        if (a->shape[d] != b->shape[d] || a->strides[d] != b->strides[d]) return 0;
    }
    return 1;
}

int main(int argc, char** argv) {
    if (argc != 2) return fprintf(stderr, "usage: c_device_tensors ROOT\n"), 2;
    IoxPubSubOptions o;
    iox_pubsub_options_init(&o);
    o.root = argv[1];
    o.payload.name = "f32";
    o.payload.size = 4;
    o.payload.alignment = 4;
    o.payload.any_bit_pattern = true;
    o.payload.slice = true;
    o.payload.max_slice_len = 16;
    o.memory_type = 3; /* CudaDevice */
    o.memory_type_set = true;
    o.subscriber_buffer = 4;
    IoxPubSubService* service = NULL;
    IoxStatus s = iox_pubsub_open("ffi/tensors", IOX_CREATE, &o, &service);
    if (s != IOX_STATUS_OK) return die("open", s);
    IoxDevicePublisher* pub = NULL;
    IoxDeviceSubscriber* sub = NULL;
    if ((s = iox_device_publisher_create(service, &pub)) != IOX_STATUS_OK) return die("publisher", s);
    if ((s = iox_device_subscriber_create(service, &sub)) != IOX_STATUS_OK) return die("subscriber", s);
    IoxElement element = IOX_ELEMENT_NONE;
    uint64_t max_bytes = 0;
    if ((s = iox_device_publisher_info(pub, &element, &max_bytes, NULL)) != IOX_STATUS_OK) return die("info", s);
    if (element != IOX_ELEMENT_F32 || max_bytes != 64) {
        return fprintf(stderr, "c_device_tensors: element %d, max %" PRIu64 "\n", (int)element, max_bytes), 1;
    }

    uint64_t big[2] = {4, 5}, four[1] = {4}, nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    int64_t row[2] = {5, 1}, ten[1] = {10}, one[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    if (refused(pub, tensor(IOX_ELEMENT_F32, 2, big, row), "80 bytes; 64 bytes fit")) return 1;
    if (refused(pub, tensor(IOX_ELEMENT_F32, 1, four, ten), "124 bytes")) return 1;
    if (refused(pub, tensor(IOX_ELEMENT_F16, 1, four, one), "float16 on a service of float32")) return 1;
    if (refused(pub, tensor(IOX_ELEMENT_F32, 9, nine, one), "at most 8")) return 1;
    if (refused(pub, tensor(IOX_ELEMENT_NONE, 1, four, one), "tensor.element is 0")) return 1;
    if (refused(pub, tensor((IoxElement)99, 1, four, one), "tensor.element is 99")) return 1;

    /* A 2x3 tensor, then its transpose as a strided view of the same 6 floats. */
    uint64_t shapes[2][2] = {{2, 3}, {3, 2}};
    int64_t strides[2][2] = {{3, 1}, {1, 3}};
    for (int i = 0; i < 2; i++) {
        IoxTensor t = tensor(IOX_ELEMENT_F32, 2, shapes[i], strides[i]);
        IoxDeviceLoan loan;
        if ((s = iox_device_publisher_loan(pub, NULL, &t, &loan)) != IOX_STATUS_OK) return die("loan", s);
        if (loan.len_bytes != 24 || loan.device_ptr == 0 || !same(&loan.tensor, &t)) {
            return fprintf(stderr, "c_device_tensors: loan %d is %" PRIu64 " bytes\n", i, loan.len_bytes), 1;
        }
        uint64_t delivered = 0;
        if ((s = iox_device_publisher_send(pub, loan.id, NULL, &delivered)) != IOX_STATUS_OK) return die("send", s);
        if (delivered != 1) return fprintf(stderr, "c_device_tensors: delivered %" PRIu64 "\n", delivered), 1;
        if (iox_device_publisher_send(pub, loan.id, NULL, NULL) != IOX_STATUS_STALE_HANDLE) {
            return fprintf(stderr, "c_device_tensors: a second send of a loan was not refused\n"), 1;
        }
        IoxDeviceSample sample;
        bool got = false;
        if ((s = iox_device_subscriber_receive(sub, 0, &sample, &got)) != IOX_STATUS_OK || !got) {
            return die("receive", s);
        }
        if (!same(&sample.tensor, &t) || sample.len_bytes != 24 || sample.device_ptr != loan.device_ptr) {
            return fprintf(stderr, "c_device_tensors: sample %d has another tensor\n", i), 1;
        }
        if ((s = iox_device_subscriber_wait(sub, sample.id, NULL)) != IOX_STATUS_OK) return die("wait", s);
        if (i == 0) {
            if ((s = iox_device_subscriber_release(sub, sample.id)) != IOX_STATUS_OK) return die("release", s);
        } else if ((s = iox_device_subscriber_release_on(sub, sample.id, NULL)) != IOX_STATUS_OK) {
            return die("release_on", s);
        }
        if (iox_device_subscriber_release(sub, sample.id) != IOX_STATUS_STALE_HANDLE) {
            return fprintf(stderr, "c_device_tensors: a second release was not refused\n"), 1;
        }
    }

    /* Bytes: 12 of them are a 1-D tensor of 3 floats; a discarded loan's id is stale. */
    IoxDeviceLoan bytes;
    if ((s = iox_device_publisher_loan_bytes(pub, NULL, 12, &bytes)) != IOX_STATUS_OK) return die("loan_bytes", s);
    if (bytes.tensor.element != IOX_ELEMENT_F32 || bytes.tensor.ndim != 1 || bytes.tensor.shape[0] != 3) {
        return fprintf(stderr, "c_device_tensors: a byte loan's tensor is not [3]\n"), 1;
    }
    if ((s = iox_device_publisher_discard(pub, bytes.id)) != IOX_STATUS_OK) return die("discard", s);
    if (iox_device_publisher_discard(pub, bytes.id) != IOX_STATUS_STALE_HANDLE) {
        return fprintf(stderr, "c_device_tensors: a second discard was not refused\n"), 1;
    }
    if ((s = iox_device_publisher_drop(pub)) != IOX_STATUS_OK) return die("drop publisher", s);
    if ((s = iox_device_subscriber_drop(sub)) != IOX_STATUS_OK) return die("drop subscriber", s);
    if ((s = iox_pubsub_service_drop(service)) != IOX_STATUS_OK) return die("drop service", s);
    printf("device tensors ok\n");
    return 0;
}
