/* Device pointers from C: `c_device ROOT` opens a CUDA-pinned service of u64, pins it
 * from a publisher and a subscriber, sends 3 values and checks each sample's device
 * pointer: set, and as far from the first sample's as its host address is; then the
 * same of a held sample, a loan and a held loan. Prints
 * "device pointers ok" or why not; exit 1 on any failure. */
#include <inttypes.h>
#include <stdio.h>

#include "iox.h"

static int die(const char* what, IoxStatus s) {
    fprintf(stderr, "c_device: %s: %s: %s\n", what, iox_status_name(s), iox_last_error());
    return 1;
}

int main(int argc, char** argv) {
    if (argc != 2) return fprintf(stderr, "usage: c_device ROOT\n"), 2;
    IoxPubSubOptions o;
    iox_pubsub_options_init(&o);
    o.root = argv[1];
    o.payload.name = "u64";
    o.payload.size = 8;
    o.payload.alignment = 8;
    o.payload.any_bit_pattern = true;
    o.memory_type = 2; /* CUDA-pinned */
    o.memory_type_set = true;
    o.subscriber_buffer = 4;
    IoxPubSubService* service = NULL;
    IoxStatus s = iox_pubsub_open("ffi/device", IOX_OPEN_OR_CREATE, &o, &service);
    if (s != IOX_STATUS_OK) return die("open", s);
    IoxPublisher* pub = NULL;
    IoxSubscriber* sub = NULL;
    if ((s = iox_publisher_create(service, true, &pub)) != IOX_STATUS_OK) return die("publisher", s);
    if ((s = iox_subscriber_create(service, true, &sub)) != IOX_STATUS_OK) return die("subscriber", s);
    IoxPoolInfo info;
    if ((s = iox_subscriber_pool_info(sub, &info)) != IOX_STATUS_OK) return die("pool info", s);
    if (info.memory_type != 2) return fprintf(stderr, "c_device: memory type %u\n", info.memory_type), 1;
    uint64_t first_dev = 0;
    const char* first_host = NULL;
    for (uint64_t i = 0; i < 3; i++) {
        IoxLoan loan;
        if ((s = iox_publisher_loan(pub, 8, &loan)) != IOX_STATUS_OK) return die("loan", s);
        *(uint64_t*)loan.data = i;
        if ((s = iox_publisher_send(pub, loan.id, NULL)) != IOX_STATUS_OK) return die("send", s);
        IoxSample sample;
        bool got = false;
        if ((s = iox_subscriber_receive(sub, 0, &sample, &got)) != IOX_STATUS_OK || !got) return die("receive", s);
        uint64_t dev = 0;
        if ((s = iox_subscriber_device_ptr(sub, sample.id, &dev)) != IOX_STATUS_OK) return die("device_ptr", s);
        if (dev == 0) return fprintf(stderr, "c_device: a NULL device pointer\n"), 1;
        if (i == 0) {
            first_dev = dev;
            first_host = sample.data;
        } else if (dev - first_dev != (uint64_t)((const char*)sample.data - first_host)) {
            fprintf(stderr, "c_device: device pointer %" PRIx64 " is not at the host offset\n", dev);
            return 1;
        }
        if ((s = iox_subscriber_release(sub, sample.id)) != IOX_STATUS_OK) return die("release", s);
    }
    /* A held sample (the C++ layer's) gives the same device pointer for its payload. */
    IoxLoan loan;
    if ((s = iox_publisher_loan(pub, 8, &loan)) != IOX_STATUS_OK) return die("loan", s);
    *(uint64_t*)loan.data = 3;
    if ((s = iox_publisher_send(pub, loan.id, NULL)) != IOX_STATUS_OK) return die("send", s);
    IoxHeldSample held;
    bool got = false;
    if ((s = iox_subscriber_receive_held(sub, 0, &held, &got)) != IOX_STATUS_OK || !got) return die("receive held", s);
    uint64_t dev = 0;
    if ((s = iox_held_sample_device_ptr(&held, &dev)) != IOX_STATUS_OK) return die("held device_ptr", s);
    if (dev - first_dev != (uint64_t)((const char*)held.data - first_host)) {
        fprintf(stderr, "c_device: held device pointer %" PRIx64 " is not at the host offset\n", dev);
        return 1;
    }
    if ((s = iox_held_sample_release(&held)) != IOX_STATUS_OK) return die("release held", s);
    /* Loans of the pinned publisher have device pointers too, at the same offsets as
     * the samples of their chunks: where a kernel would write the payload. */
    if ((s = iox_publisher_loan(pub, 8, &loan)) != IOX_STATUS_OK) return die("loan", s);
    uint64_t loan_dev = 0;
    if ((s = iox_publisher_device_ptr(pub, loan.id, &loan_dev)) != IOX_STATUS_OK) return die("loan device_ptr", s);
    if (loan_dev - first_dev != (uint64_t)((const char*)loan.data - first_host)) {
        fprintf(stderr, "c_device: loan device pointer %" PRIx64 " is not at the host offset\n", loan_dev);
        return 1;
    }
    if ((s = iox_publisher_discard(pub, loan.id)) != IOX_STATUS_OK) return die("discard", s);
    IoxHeldLoan held_loan;
    if ((s = iox_publisher_loan_held(pub, 8, &held_loan)) != IOX_STATUS_OK) return die("held loan", s);
    if ((s = iox_held_loan_device_ptr(&held_loan, &loan_dev)) != IOX_STATUS_OK) return die("held loan device_ptr", s);
    if (loan_dev - first_dev != (uint64_t)((const char*)held_loan.data - first_host)) {
        fprintf(stderr, "c_device: held loan device pointer %" PRIx64 " is not at the host offset\n", loan_dev);
        return 1;
    }
    if ((s = iox_held_loan_discard(&held_loan)) != IOX_STATUS_OK) return die("held discard", s);
    if ((s = iox_held_sample_device_ptr(&held, &dev)) != IOX_STATUS_STALE_HANDLE) {
        fprintf(stderr, "c_device: a released held sample gave a device pointer\n");
        return 1;
    }
    iox_subscriber_drop(sub);
    iox_publisher_drop(pub);
    iox_pubsub_service_drop(service);
    printf("device pointers ok\n");
    return 0;
}
