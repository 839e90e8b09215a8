/* A C subscriber: `c_subscriber ROOT SERVICE COUNT` opens (or creates) the service,
 * prints "ready", receives COUNT readings (up to 10 s each, sleeping), checks each is
 * (seq, seq * 0.5) in order, and prints "received N sum S". Exit 1 with the library's
 * message on any failure. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "iox.h"
#include "reading.h"

static int die(const char* what, IoxStatus s) {
    fprintf(stderr, "c_subscriber: %s: %s: %s\n", what, iox_status_name(s), iox_last_error());
    return 1;
}

int main(int argc, char** argv) {
    if (argc != 4) return fprintf(stderr, "usage: c_subscriber ROOT SERVICE COUNT\n"), 2;
    uint64_t count = strtoull(argv[3], NULL, 10);
    IoxPubSubOptions o;
    iox_pubsub_options_init(&o);
    o.root = argv[1];
    o.payload.name = READING_NAME;
    o.payload.size = sizeof(Reading);
    o.payload.alignment = _Alignof(Reading);
    o.payload.any_bit_pattern = true;
    o.subscriber_buffer = 64;
    IoxPubSubService* service = NULL;
    IoxStatus s = iox_pubsub_open(argv[2], IOX_OPEN_OR_CREATE, &o, &service);
    if (s != IOX_STATUS_OK) return die("open", s);
    IoxSubscriber* sub = NULL;
    if ((s = iox_subscriber_create(service, false, &sub)) != IOX_STATUS_OK) return die("subscriber", s);
    printf("ready\n");
    fflush(stdout);
    uint64_t sum = 0;
    for (uint64_t i = 0; i < count; i++) {
        IoxSample sample;
        bool got = false;
        if ((s = iox_subscriber_receive(sub, 10ull * 1000 * 1000 * 1000, &sample, &got)) != IOX_STATUS_OK)
            return die("receive", s);
        if (!got) return fprintf(stderr, "c_subscriber: nothing within 10 s after %" PRIu64 "\n", i), 1;
        const Reading* r = (const Reading*)sample.data;
        if (sample.len_bytes != sizeof(Reading) || r->seq != i || r->value != (double)i * 0.5) {
            fprintf(stderr, "c_subscriber: got (%" PRIu64 ", %f, %" PRIu64 " bytes), expected seq %" PRIu64 "\n",
                    r->seq, r->value, sample.len_bytes, i);
            return 1;
        }
        sum += r->seq;
        if ((s = iox_subscriber_release(sub, sample.id)) != IOX_STATUS_OK) return die("release", s);
    }
    printf("received %" PRIu64 " sum %" PRIu64 "\n", count, sum);
    if ((s = iox_subscriber_drop(sub)) != IOX_STATUS_OK) return die("drop subscriber", s);
    if ((s = iox_pubsub_service_drop(service)) != IOX_STATUS_OK) return die("drop service", s);
    return 0;
}
