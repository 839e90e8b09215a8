/* The overflow policy from C: `c_overflow ROOT` creates a u64 service with
 * IOX_OVERFLOW_REJECT and a one-sample queue, and its subscriber; the first send
 * reaches it, the second finds the queue full: IOX_STATUS_QUEUE_FULL, 0 delivered, a
 * message saying so; after a receive the third goes through. An unknown policy is
 * IOX_STATUS_INVALID_ARGUMENT. Prints "overflow ok" or why not; exit 1 on failure. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "iox.h"

static int die(const char* what, IoxStatus s) {
    fprintf(stderr, "c_overflow: %s: %s: %s\n", what, iox_status_name(s), iox_last_error());
    return 1;
}

static IoxStatus send(IoxPublisher* pub, uint64_t value, uint64_t* delivered) {
    IoxLoan loan;
    IoxStatus s = iox_publisher_loan(pub, 8, &loan);
    if (s != IOX_STATUS_OK) return s;
    *(uint64_t*)loan.data = value;
    return iox_publisher_send(pub, loan.id, delivered);
}

int main(int argc, char** argv) {
    if (argc != 2) return fprintf(stderr, "usage: c_overflow ROOT\n"), 2;
    IoxPubSubOptions o;
    iox_pubsub_options_init(&o);
    o.root = argv[1];
    o.payload.name = "u64";
    o.payload.size = 8;
    o.payload.alignment = 8;
    o.payload.any_bit_pattern = true;
    o.subscriber_buffer = 1;
    IoxPubSubService* service = NULL;
    o.overflow = 7;
    IoxStatus s = iox_pubsub_open("ffi/overflow", IOX_CREATE, &o, &service);
    if (s != IOX_STATUS_INVALID_ARGUMENT || strstr(iox_last_error(), "IOX_OVERFLOW_REJECT") == NULL) {
        return die("an unknown overflow policy was not refused", s);
    }
    o.overflow = IOX_OVERFLOW_REJECT;
    if ((s = iox_pubsub_open("ffi/overflow", IOX_CREATE, &o, &service)) != IOX_STATUS_OK) return die("open", s);
    IoxPublisher* pub = NULL;
    IoxSubscriber* sub = NULL;
    if ((s = iox_subscriber_create(service, false, &sub)) != IOX_STATUS_OK) return die("subscriber", s);
    if ((s = iox_publisher_create(service, false, &pub)) != IOX_STATUS_OK) return die("publisher", s);
    uint64_t delivered = 9;
    if ((s = send(pub, 1, &delivered)) != IOX_STATUS_OK || delivered != 1) return die("first send", s);
    delivered = 9;
    s = send(pub, 2, &delivered);
    if (s != IOX_STATUS_QUEUE_FULL || delivered != 0 || strstr(iox_last_error(), "full") == NULL) {
        fprintf(stderr, "c_overflow: second send: %s, %" PRIu64 " delivered: %s\n", iox_status_name(s), delivered,
                iox_last_error());
        return 1;
    }
    IoxSample sample;
    bool got = false;
    if ((s = iox_subscriber_receive(sub, 0, &sample, &got)) != IOX_STATUS_OK || !got) return die("receive", s);
    if (*(const uint64_t*)sample.data != 1) return fprintf(stderr, "c_overflow: received another sample\n"), 1;
    if ((s = iox_subscriber_release(sub, sample.id)) != IOX_STATUS_OK) return die("release", s);
    if ((s = send(pub, 3, &delivered)) != IOX_STATUS_OK || delivered != 1) return die("third send", s);
    iox_publisher_drop(pub);
    iox_subscriber_drop(sub);
    iox_pubsub_service_drop(service);
    printf("overflow ok\n");
    return 0;
}
