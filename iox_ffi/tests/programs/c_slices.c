/* Slices from C: `c_slices ROOT SERVICE` opens a service of u32 slices (up to 1024
 * elements), waits (up to 30 s) for a subscriber, checks that a loan of a byte count
 * that is not a whole number of u32 is refused, and sends slices of 1, 100 and 1024
 * elements, element i of slice k being k * 10000 + i. */
#include <stdio.h>
#include <time.h>

#include "iox.h"

static int die(const char* what, IoxStatus s) {
    fprintf(stderr, "c_slices: %s: %s: %s\n", what, iox_status_name(s), iox_last_error());
    return 1;
}

int main(int argc, char** argv) {
    if (argc != 3) return fprintf(stderr, "usage: c_slices ROOT SERVICE\n"), 2;
    IoxPubSubOptions o;
    iox_pubsub_options_init(&o);
    o.root = argv[1];
    o.payload.name = "u32";
    o.payload.size = 4;
    o.payload.alignment = 4;
    o.payload.any_bit_pattern = true;
    o.payload.slice = true;
    o.payload.max_slice_len = 1024;
    o.subscriber_buffer = 8;
    IoxPubSubService* service = NULL;
    IoxStatus s = iox_pubsub_open(argv[2], IOX_OPEN_OR_CREATE, &o, &service);
    if (s != IOX_STATUS_OK) return die("open", s);
    IoxPublisher* pub = NULL;
    if ((s = iox_publisher_create(service, false, &pub)) != IOX_STATUS_OK) return die("publisher", s);
    uint64_t subscribers = 0;
    for (int waited = 0; subscribers == 0; waited++) {
        if (waited == 30000) return fprintf(stderr, "c_slices: no subscriber within 30 s\n"), 1;
        if ((s = iox_pubsub_port_counts(service, NULL, &subscribers)) != IOX_STATUS_OK) return die("counts", s);
        struct timespec t = {0, 1000000};
        if (subscribers == 0) nanosleep(&t, NULL);
    }
    IoxLoan loan;
    if ((s = iox_publisher_loan(pub, 6, &loan)) != IOX_STATUS_LOAN_FAILED)
        return fprintf(stderr, "c_slices: a loan of 6 bytes of u32 elements: %s\n", iox_status_name(s)), 1;
    if ((s = iox_publisher_loan(pub, 4 * 1025, &loan)) != IOX_STATUS_LOAN_FAILED)
        return fprintf(stderr, "c_slices: a loan over the largest chunk: %s\n", iox_status_name(s)), 1;
    const uint32_t lens[3] = {1, 100, 1024};
    for (uint32_t k = 0; k < 3; k++) {
        if ((s = iox_publisher_loan(pub, 4ull * lens[k], &loan)) != IOX_STATUS_OK) return die("loan", s);
        uint32_t* e = loan.data;
        for (uint32_t i = 0; i < lens[k]; i++) e[i] = k * 10000 + i;
        if ((s = iox_publisher_send(pub, loan.id, NULL)) != IOX_STATUS_OK) return die("send", s);
    }
    iox_publisher_drop(pub);
    iox_pubsub_service_drop(service);
    return 0;
}
