/* Publishes `--count N` readings (default 10), one every 100 ms, once a subscriber is
 * there (waits up to 30 s). Talks to the Rust, Python and C++ examples' service. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "iox.h"
#include "reading.h"

static int die(const char* what, IoxStatus s) {
    fprintf(stderr, "error: %s: %s (%s)\n", what, iox_last_error(), iox_status_name(s));
    return 1;
}

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int main(int argc, char** argv) {
    uint64_t count = 10;
    if (argc == 3 && strcmp(argv[1], "--count") == 0) {
        count = strtoull(argv[2], NULL, 10);
    } else if (argc != 1) {
        fprintf(stderr, "usage: c_publisher [--count N]\n");
        return 2;
    }
    IoxPubSubOptions o;
    iox_pubsub_options_init(&o);
    o.payload.name = READING_TYPE_NAME;
    o.payload.size = sizeof(Reading);
    o.payload.alignment = _Alignof(Reading);
    o.payload.any_bit_pattern = true;
    o.subscriber_buffer = READINGS_BUFFER;
    IoxPubSubService* service = NULL;
    IoxStatus s = iox_pubsub_open(READINGS_SERVICE, IOX_OPEN_OR_CREATE, &o, &service);
    if (s != IOX_STATUS_OK) return die("open", s);
    IoxPublisher* publisher = NULL;
    if ((s = iox_publisher_create(service, false, &publisher)) != IOX_STATUS_OK) return die("publisher", s);
    uint64_t subscribers = 0;
    printf("c_publisher: waiting up to 30 s for a subscriber\n");
    fflush(stdout);
    for (int waited = 0; subscribers == 0; waited++) {
        if (waited == 30000) return fprintf(stderr, "error: no subscriber within 30 s\n"), 1;
        if ((s = iox_pubsub_port_counts(service, NULL, &subscribers)) != IOX_STATUS_OK) return die("counts", s);
        if (subscribers == 0) sleep_ms(1);
    }
    for (uint64_t seq = 0; seq < count; seq++) {
        IoxLoan loan;
        if ((s = iox_publisher_loan(publisher, sizeof(Reading), &loan)) != IOX_STATUS_OK) return die("loan", s);
        Reading* r = loan.data;
        r->seq = seq;
        r->value = (double)seq * 0.5;
        uint64_t delivered = 0;
        if ((s = iox_publisher_send(publisher, loan.id, &delivered)) != IOX_STATUS_OK) return die("send", s);
        printf("c_publisher: sent %" PRIu64 " to %" PRIu64 " subscriber(s)\n", seq, delivered);
        fflush(stdout);
        if (seq + 1 < count) sleep_ms(100);
    }
    iox_publisher_drop(publisher);
    iox_pubsub_service_drop(service);
    return 0;
}
