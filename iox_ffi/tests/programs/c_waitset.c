/* A C WaitSet over a subscriber (with a deadline), a listener and an interval:
 * `c_waitset ROOT`. Waits until the subscriber's deadline was missed and the interval
 * ticked, prints "ready", then prints "sample N" for each reading and "event N" for
 * each event id until it has 3 readings and event 7, detaches, prints "done". Exit 1
 * with the library's message on any failure, or after 10 s without news. */
#include <inttypes.h>
#include <stdio.h>

#include "iox.h"
#include "reading.h"

#define MS 1000000ull

static int die(const char* what, IoxStatus s) {
    fprintf(stderr, "c_waitset: %s: %s: %s\n", what, iox_status_name(s), iox_last_error());
    return 1;
}

int main(int argc, char** argv) {
    if (argc != 2) return fprintf(stderr, "usage: c_waitset ROOT\n"), 2;
    IoxStatus s;
    IoxEventOptions eo;
    iox_event_options_init(&eo);
    eo.root = argv[1];
    IoxEventService* events = NULL;
    if ((s = iox_event_open("ffi/ws-events", IOX_OPEN_OR_CREATE, &eo, &events)) != IOX_STATUS_OK)
        return die("event open", s);
    IoxListener* listener = NULL;
    if ((s = iox_listener_create(events, &listener)) != IOX_STATUS_OK) return die("listener", s);
    IoxPubSubOptions o;
    iox_pubsub_options_init(&o);
    o.root = argv[1];
    o.payload.name = READING_NAME;
    o.payload.size = sizeof(Reading);
    o.payload.alignment = _Alignof(Reading);
    o.payload.any_bit_pattern = true;
    o.subscriber_buffer = 64;
    IoxPubSubService* readings = NULL;
    if ((s = iox_pubsub_open("ffi/ws-readings", IOX_OPEN_OR_CREATE, &o, &readings)) != IOX_STATUS_OK)
        return die("pubsub open", s);
    IoxSubscriber* sub = NULL;
    if ((s = iox_subscriber_create(readings, false, &sub)) != IOX_STATUS_OK) return die("subscriber", s);

    IoxWaitSet* ws = NULL;
    if ((s = iox_waitset_create(false, &ws)) != IOX_STATUS_OK) return die("waitset", s);
    int sub_fd = -1, lsn_fd = -1;
    if ((s = iox_subscriber_fd(sub, &sub_fd)) != IOX_STATUS_OK) return die("subscriber fd", s);
    if ((s = iox_listener_fd(listener, &lsn_fd)) != IOX_STATUS_OK) return die("listener fd", s);
    uint64_t sub_id = 0, lsn_id = 0, tick_id = 0, bad = 0;
    if ((s = iox_waitset_attach_fd(ws, sub_fd, 20 * MS, &sub_id)) != IOX_STATUS_OK) return die("attach sub", s);
    if ((s = iox_waitset_attach_fd(ws, lsn_fd, 0, &lsn_id)) != IOX_STATUS_OK) return die("attach listener", s);
    if ((s = iox_waitset_attach_interval(ws, 5 * MS, &tick_id)) != IOX_STATUS_OK) return die("attach interval", s);
    if (iox_waitset_attach_fd(ws, -1, 0, &bad) != IOX_STATUS_INVALID_ARGUMENT)
        return fprintf(stderr, "c_waitset: a negative descriptor was attached\n"), 1;

    IoxWaitSetEvent news[8];
    size_t count = 0;
    uint32_t result = 0;
    int missed = 0, ticked = 0;
    while (!(missed && ticked)) {
        if ((s = iox_waitset_wait(ws, 10000 * MS, news, 8, &count, &result)) != IOX_STATUS_OK) return die("wait", s);
        if (result != IOX_WAIT_EVENTS) return fprintf(stderr, "c_waitset: no deadline or tick within 10 s\n"), 1;
        for (size_t i = 0; i < count && i < 8; i++) {
            missed |= news[i].id == sub_id && news[i].missed_deadline;
            ticked |= news[i].id == tick_id && news[i].fired;
        }
    }
    printf("ready\n");
    fflush(stdout);

    int samples = 0, event7 = 0;
    while (samples < 3 || !event7) {
        if ((s = iox_waitset_wait(ws, 10000 * MS, news, 8, &count, &result)) != IOX_STATUS_OK) return die("wait", s);
        if (result != IOX_WAIT_EVENTS) return fprintf(stderr, "c_waitset: nothing within 10 s\n"), 1;
        for (size_t i = 0; i < count && i < 8; i++) {
            if (news[i].id == sub_id && news[i].fired) {
                for (;;) {
                    IoxSample sample;
                    bool got = false;
                    if ((s = iox_subscriber_receive(sub, 0, &sample, &got)) != IOX_STATUS_OK) return die("receive", s);
                    if (!got) break;
                    printf("sample %" PRIu64 "\n", ((const Reading*)sample.data)->seq);
                    samples++;
                    iox_subscriber_release(sub, sample.id);
                }
            }
            if (news[i].id == lsn_id && news[i].fired) {
                for (;;) {
                    uint32_t id = 0;
                    bool got = false;
                    if ((s = iox_listener_wait(listener, 0, &id, &got)) != IOX_STATUS_OK) return die("listen", s);
                    if (!got) break;
                    printf("event %u\n", id);
                    event7 |= id == 7;
                }
            }
        }
        fflush(stdout);
    }
    if ((s = iox_waitset_detach(ws, tick_id)) != IOX_STATUS_OK) return die("detach", s);
    if (iox_waitset_detach(ws, tick_id) != IOX_STATUS_STALE_HANDLE)
        return fprintf(stderr, "c_waitset: an attachment detached twice\n"), 1;
    iox_waitset_drop(ws);
    iox_subscriber_drop(sub);
    iox_listener_drop(listener);
    iox_pubsub_service_drop(readings);
    iox_event_service_drop(events);
    printf("done\n");
    return 0;
}
