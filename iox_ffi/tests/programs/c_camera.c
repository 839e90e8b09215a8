/* Frames with a user header through the C API (examples/camera.h: the Rust and C++
 * `camera` examples' service and frames), alternating the handle API (IoxLoan,
 * IoxSample: even frames) and the held API (IoxHeldLoan, IoxHeldSample: odd frames):
 *   c_camera ROOT subscribe N   first checks that opening without the header, or with
 *                               another one, fails naming both (the service exists: the
 *                               caller created it), then prints "ready", receives N
 *                               frames and checks every header field and pixel, one
 *                               line a frame
 *   c_camera ROOT publish N     waits (30 s at most) for a subscriber, sends frames 0..N
 * Exit 1 with the library's message on any failure. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../examples/camera.h"
#include "iox.h"

static int die(const char* what, IoxStatus s) {
    fprintf(stderr, "c_camera: %s: %s (%s)\n", what, iox_last_error(), iox_status_name(s));
    return 1;
}

static int wrong(const char* what) {
    fprintf(stderr, "c_camera: %s\n", what);
    return 1;
}

static void options(IoxPubSubOptions* o, const char* root) {
    iox_pubsub_options_init(o);
    o->root = root;
    o->payload.name = "u8";
    o->payload.size = 1;
    o->payload.alignment = 1;
    o->payload.any_bit_pattern = true;
    o->payload.slice = true;
    o->payload.max_slice_len = CAMERA_MAX_PIXELS;
    o->subscriber_buffer = CAMERA_BUFFER;
    o->user_header.name = FRAME_HEADER_NAME;
    o->user_header.size = sizeof(FrameHeader);
    o->user_header.alignment = _Alignof(FrameHeader);
    o->user_header.any_bit_pattern = true;
}

/* Whether frame `i`'s header and pixels are what camera.h says. */
static bool frame_ok(const void* header, uint64_t header_len, const void* data, uint64_t len, uint64_t* index) {
    if (header == NULL || header_len != sizeof(FrameHeader)) return false;
    if ((uintptr_t)header % _Alignof(FrameHeader) != 0) return false;
    /* The payload follows the header (32 bytes, a multiple of the pixels' alignment). */
    if ((const uint8_t*)data != (const uint8_t*)header + sizeof(FrameHeader)) return false;
    FrameHeader h;
    memcpy(&h, header, sizeof h);
    *index = h.stamp_ns - 1000000;
    FrameHeader want = camera_frame_header(*index);
    if (memcmp(&h, &want, sizeof h) != 0 || len != (uint64_t)h.width * h.height) return false;
    for (uint64_t j = 0; j < len; j++) {
        if (((const uint8_t*)data)[j] != camera_frame_pixel(*index, j)) return false;
    }
    return true;
}

static int refused_naming(const char* what, IoxStatus s, const char* a, const char* b) {
    const char* msg = iox_last_error();
    if (s != IOX_STATUS_OPEN_FAILED || msg == NULL || strstr(msg, a) == NULL || strstr(msg, b) == NULL) {
        fprintf(stderr, "c_camera: %s: %s (%s)\n", what, msg ? msg : "(no message)", iox_status_name(s));
        return 1;
    }
    printf("refused: %s\n", msg);
    return 0;
}

static int subscribe(const char* root, uint64_t count) {
    IoxPubSubOptions o;
    IoxPubSubService* service = NULL;
    /* The service has a header: opening without one, or with another, is refused. */
    options(&o, root);
    o.user_header.name = NULL;
    if (refused_naming("open without the header", iox_pubsub_open(CAMERA_SERVICE, IOX_OPEN, &o, &service),
                       FRAME_HEADER_NAME, "no user header"))
        return 1;
    options(&o, root);
    o.user_header.name = "u64";
    o.user_header.size = 8;
    o.user_header.alignment = 8;
    if (refused_naming("open with another header", iox_pubsub_open(CAMERA_SERVICE, IOX_OPEN, &o, &service),
                       FRAME_HEADER_NAME, "u64"))
        return 1;
    options(&o, root);
    o.user_header.slice = true;
    IoxStatus s = iox_pubsub_open(CAMERA_SERVICE, IOX_OPEN, &o, &service);
    if (s != IOX_STATUS_INVALID_ARGUMENT || strstr(iox_last_error(), "user_header.slice") == NULL)
        return die("a slice header is refused", s);

    options(&o, root);
    if ((s = iox_pubsub_open(CAMERA_SERVICE, IOX_OPEN, &o, &service)) != IOX_STATUS_OK) return die("open", s);
    IoxSubscriber* sub = NULL;
    if ((s = iox_subscriber_create(service, false, &sub)) != IOX_STATUS_OK) return die("subscriber", s);
    printf("ready\n");
    fflush(stdout);
    for (uint64_t n = 0; n < count; n++) {
        bool got = false;
        uint64_t i = 0;
        const char* api = n % 2 == 0 ? "handle" : "held";
        if (n % 2 == 0) {
            IoxSample sample;
            s = iox_subscriber_receive(sub, 30000000000ull, &sample, &got);
            if (s != IOX_STATUS_OK) return die("receive", s);
            if (!got) return wrong("no frame within 30 s");
            if (!frame_ok(sample.header, sample.header_len, sample.data, sample.len_bytes, &i))
                return wrong("a frame (handle API) is not what was sent");
            if ((s = iox_subscriber_release(sub, sample.id)) != IOX_STATUS_OK) return die("release", s);
        } else {
            IoxHeldSample sample;
            s = iox_subscriber_receive_held(sub, 30000000000ull, &sample, &got);
            if (s != IOX_STATUS_OK) return die("receive held", s);
            if (!got) return wrong("no frame within 30 s");
            if (!frame_ok(sample.header, sample.header_len, sample.data, sample.len_bytes, &i))
                return wrong("a frame (held API) is not what was sent");
            if ((s = iox_held_sample_release(&sample)) != IOX_STATUS_OK) return die("release held", s);
        }
        printf("c_camera: frame %llu ok (%s)\n", (unsigned long long)i, api);
        fflush(stdout);
    }
    iox_subscriber_drop(sub);
    iox_pubsub_service_drop(service);
    return 0;
}

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static int publish(const char* root, uint64_t count) {
    IoxPubSubOptions o;
    options(&o, root);
    IoxPubSubService* service = NULL;
    IoxStatus s = iox_pubsub_open(CAMERA_SERVICE, IOX_OPEN_OR_CREATE, &o, &service);
    if (s != IOX_STATUS_OK) return die("open", s);
    IoxPublisher* pub = NULL;
    if ((s = iox_publisher_create(service, false, &pub)) != IOX_STATUS_OK) return die("publisher", s);
    uint64_t subscribers = 0;
    for (int waited = 0; subscribers == 0; waited += 5) {
        if (waited > 30000) return wrong("no subscriber connected within 30 s");
        if ((s = iox_pubsub_port_counts(service, NULL, &subscribers)) != IOX_STATUS_OK) return die("port counts", s);
        if (subscribers == 0) sleep_ms(5);
    }
    for (uint64_t i = 0; i < count; i++) {
        FrameHeader h = camera_frame_header(i);
        uint64_t len = (uint64_t)h.width * h.height;
        uint64_t delivered = 0;
        if (i % 2 == 0) {
            IoxLoan loan;
            if ((s = iox_publisher_loan(pub, len, &loan)) != IOX_STATUS_OK) return die("loan", s);
            if (loan.header == NULL || loan.header_len != sizeof h) return wrong("a loan without its header");
            memcpy(loan.header, &h, sizeof h);
            for (uint64_t j = 0; j < len; j++) ((uint8_t*)loan.data)[j] = camera_frame_pixel(i, j);
            if ((s = iox_publisher_send(pub, loan.id, &delivered)) != IOX_STATUS_OK) return die("send", s);
        } else {
            IoxHeldLoan loan;
            if ((s = iox_publisher_loan_held(pub, len, &loan)) != IOX_STATUS_OK) return die("loan held", s);
            if (loan.header == NULL || loan.header_len != sizeof h) return wrong("a held loan without its header");
            memcpy(loan.header, &h, sizeof h);
            for (uint64_t j = 0; j < len; j++) ((uint8_t*)loan.data)[j] = camera_frame_pixel(i, j);
            if ((s = iox_held_loan_send(&loan, &delivered)) != IOX_STATUS_OK) return die("send held", s);
        }
        if (delivered != 1) return wrong("a frame reached no subscriber");
    }
    iox_publisher_drop(pub);
    iox_pubsub_service_drop(service);
    printf("sent %llu\n", (unsigned long long)count);
    return 0;
}

int main(int argc, char** argv) {
    if (argc != 4) return fprintf(stderr, "usage: c_camera ROOT subscribe|publish N\n"), 2;
    uint64_t count = strtoull(argv[3], NULL, 10);
    if (strcmp(argv[2], "subscribe") == 0) return subscribe(argv[1], count);
    if (strcmp(argv[2], "publish") == 0) return publish(argv[1], count);
    return fprintf(stderr, "usage: c_camera ROOT subscribe|publish N\n"), 2;
}
