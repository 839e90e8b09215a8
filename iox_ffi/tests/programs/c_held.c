/* Loans and samples held in the caller's memory (IoxHeldLoan, IoxHeldSample: the C++
 * layer's path), and the mistakes a C caller can make with them: `c_held ROOT` runs
 * each check in this process, prints one line per check, then "N passed, M failed";
 * exit 0 only if none failed. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "iox.h"
#include "reading.h"

static int passed, failed;

static void check(const char* what, IoxStatus got, IoxStatus want) {
    const char* msg = iox_last_error();
    int ok = got == want && (want == IOX_STATUS_OK || (msg != NULL && msg[0] != '\0'));
    printf("%s %s: %s (%s)\n", ok ? "ok  " : "FAIL", what, iox_status_name(got), want == IOX_STATUS_OK ? "" : msg);
    ok ? passed++ : failed++;
}

static void expect(const char* what, int ok) {
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    ok ? passed++ : failed++;
}

static IoxStatus send_reading(IoxPublisher* pub, uint64_t seq) {
    IoxHeldLoan loan;
    IoxStatus s = iox_publisher_loan_held(pub, sizeof(Reading), &loan);
    if (s != IOX_STATUS_OK) return s;
    Reading r = {seq, 0.5};
    memcpy(loan.data, &r, sizeof r);
    return iox_held_loan_send(&loan, NULL);
}

struct other_thread {
    IoxHeldLoan* loan;
    IoxStatus status;
};

static void* send_from_other_thread(void* arg) {
    struct other_thread* t = arg;
    t->status = iox_held_loan_send(t->loan, NULL);
    return NULL;
}

/* A user header in front of each reading (the held API; the handle API's is checked
 * across processes by c_camera.c). */
typedef struct Stamp {
    uint64_t ns;
} Stamp;

static void with_a_header(const char* root) {
    IoxPubSubOptions o;
    iox_pubsub_options_init(&o);
    o.root = root;
    o.payload.name = READING_NAME;
    o.payload.size = sizeof(Reading);
    o.payload.alignment = _Alignof(Reading);
    o.payload.any_bit_pattern = true;
    o.user_header.name = "ffi/Stamp";
    o.user_header.size = sizeof(Stamp);
    o.user_header.alignment = 3;
    o.user_header.any_bit_pattern = true;
    IoxPubSubService* service = NULL;
    check("a header alignment that is no power of two",
          iox_pubsub_open("ffi/held-header", IOX_OPEN_OR_CREATE, &o, &service), IOX_STATUS_INVALID_ARGUMENT);
    o.user_header.alignment = _Alignof(Stamp);
    check("open with a header", iox_pubsub_open("ffi/held-header", IOX_OPEN_OR_CREATE, &o, &service), IOX_STATUS_OK);
    IoxPublisher* pub = NULL;
    IoxSubscriber* sub = NULL;
    check("its publisher", iox_publisher_create(service, false, &pub), IOX_STATUS_OK);
    check("its subscriber", iox_subscriber_create(service, false, &sub), IOX_STATUS_OK);
    IoxHeldLoan loan;
    check("a held loan with a header", iox_publisher_loan_held(pub, sizeof(Reading), &loan), IOX_STATUS_OK);
    expect("its header is in front of the payload, aligned",
           loan.header != NULL && loan.header_len == sizeof(Stamp) && (uintptr_t)loan.header % _Alignof(Stamp) == 0 &&
               (char*)loan.data == (char*)loan.header + sizeof(Stamp));
    Stamp stamp = {42};
    Reading r = {7, 3.5};
    memcpy(loan.header, &stamp, sizeof stamp);
    memcpy(loan.data, &r, sizeof r);
    check("send it", iox_held_loan_send(&loan, NULL), IOX_STATUS_OK);
    check("a second held loan", iox_publisher_loan_held(pub, sizeof(Reading), &loan), IOX_STATUS_OK);
    check("discarded unsent", iox_held_loan_discard(&loan), IOX_STATUS_OK);
    IoxHeldSample sample;
    bool got = false;
    check("receive it held", iox_subscriber_receive_held(sub, 0, &sample, &got), IOX_STATUS_OK);
    expect("the header and the reading arrived",
           got && sample.header_len == sizeof(Stamp) && ((const Stamp*)sample.header)->ns == 42 &&
               ((const Reading*)sample.data)->seq == 7);
    check("release it", iox_held_sample_release(&sample), IOX_STATUS_OK);
    check("the discarded loan never arrives", iox_subscriber_receive_held(sub, 0, &sample, &got), IOX_STATUS_OK);
    expect("nothing else was received", !got);
    iox_subscriber_drop(sub);
    iox_publisher_drop(pub);
    iox_pubsub_service_drop(service);
}

int main(int argc, char** argv) {
    if (argc != 2) return fprintf(stderr, "usage: c_held ROOT\n"), 2;
    IoxPubSubOptions o;
    iox_pubsub_options_init(&o);
    o.root = argv[1];
    o.payload.name = READING_NAME;
    o.payload.size = sizeof(Reading);
    o.payload.alignment = _Alignof(Reading);
    o.payload.any_bit_pattern = true;
    IoxPubSubService* service = NULL;
    IoxPublisher* pub = NULL;
    IoxSubscriber* sub = NULL;
    check("open", iox_pubsub_open("ffi/held", IOX_OPEN_OR_CREATE, &o, &service), IOX_STATUS_OK);
    check("publisher", iox_publisher_create(service, false, &pub), IOX_STATUS_OK);
    check("subscriber", iox_subscriber_create(service, false, &sub), IOX_STATUS_OK);
    if (failed != 0) return printf("%d passed, %d failed (set-up)\n", passed, failed), 1;

    /* Loans. */
    IoxHeldLoan loan;
    check("a held loan of the wrong size", iox_publisher_loan_held(pub, sizeof(Reading) - 1, &loan),
          IOX_STATUS_INVALID_ARGUMENT);
    check("a held loan into NULL", iox_publisher_loan_held(pub, sizeof(Reading), NULL), IOX_STATUS_NULL_POINTER);
    check("a held loan", iox_publisher_loan_held(pub, sizeof(Reading), &loan), IOX_STATUS_OK);
    expect("it has a payload address and length", loan.data != NULL && loan.len_bytes == sizeof(Reading));
    expect("and no header (the service has none)", loan.header == NULL && loan.header_len == 0);
    Reading r = {1, 1.5};
    memcpy(loan.data, &r, sizeof r);
    uint64_t delivered = 0;
    uint64_t loan_device = 0;
    check("a device pointer of an unpinned held loan", iox_held_loan_device_ptr(&loan, &loan_device),
          IOX_STATUS_NO_DEVICE_POINTER);
    check("send it", iox_held_loan_send(&loan, &delivered), IOX_STATUS_OK);
    check("a device pointer of a sent held loan", iox_held_loan_device_ptr(&loan, &loan_device),
          IOX_STATUS_STALE_HANDLE);
    expect("one subscriber got it", delivered == 1);
    check("the same held loan sent twice", iox_held_loan_send(&loan, NULL), IOX_STATUS_STALE_HANDLE);
    check("a sent held loan discarded", iox_held_loan_discard(&loan), IOX_STATUS_STALE_HANDLE);
    IoxHeldLoan never;
    memset(&never, 0, sizeof never);
    check("a held loan that was never filled", iox_held_loan_send(&never, NULL), IOX_STATUS_STALE_HANDLE);
    check("a NULL held loan", iox_held_loan_discard(NULL), IOX_STATUS_NULL_POINTER);

    struct other_thread t = {&loan, IOX_STATUS_OK};
    check("another held loan", iox_publisher_loan_held(pub, sizeof(Reading), &loan), IOX_STATUS_OK);
    pthread_t thread;
    pthread_create(&thread, NULL, send_from_other_thread, &t);
    pthread_join(thread, NULL);
    check("a held loan sent from another thread", t.status, IOX_STATUS_WRONG_THREAD);
    check("discarded by its own thread", iox_held_loan_discard(&loan), IOX_STATUS_OK);

    /* Samples. */
    IoxHeldSample sample;
    bool got = false;
    check("receive held", iox_subscriber_receive_held(sub, 0, &sample, &got), IOX_STATUS_OK);
    expect("the sent reading arrived",
           got && sample.len == 1 && sample.len_bytes == sizeof(Reading) && ((const Reading*)sample.data)->seq == 1);
    expect("without a header", sample.header == NULL && sample.header_len == 0);
    uint64_t device = 0;
    check("a device pointer of an unpinned held sample", iox_held_sample_device_ptr(&sample, &device),
          IOX_STATUS_NO_DEVICE_POINTER);
    check("release it", iox_held_sample_release(&sample), IOX_STATUS_OK);
    check("a device pointer of a released held sample", iox_held_sample_device_ptr(&sample, &device),
          IOX_STATUS_STALE_HANDLE);
    check("the same held sample released twice", iox_held_sample_release(&sample), IOX_STATUS_STALE_HANDLE);
    IoxHeldSample empty;
    memset(&empty, 0, sizeof empty);
    check("a held sample that was never filled", iox_held_sample_release(&empty), IOX_STATUS_STALE_HANDLE);
    check("receive held with nothing queued", iox_subscriber_receive_held(sub, 0, &empty, &got), IOX_STATUS_OK);
    expect("nothing was received, and the struct stays empty", !got && empty.live == 0);
    check("receive held into NULL", iox_subscriber_receive_held(sub, 0, NULL, &got), IOX_STATUS_NULL_POINTER);

    /* A held sample outlives its subscriber and publisher; its release then gives the
     * chunk back to the pool (one more free chunk, nothing else moving). */
    check("send one more", send_reading(pub, 2), IOX_STATUS_OK);
    check("receive it held", iox_subscriber_receive_held(sub, 0, &sample, &got), IOX_STATUS_OK);
    check("drop the subscriber", iox_subscriber_drop(sub), IOX_STATUS_OK);
    check("drop the publisher", iox_publisher_drop(pub), IOX_STATUS_OK);
    expect("the sample is still readable", got && ((const Reading*)sample.data)->seq == 2);
    IoxPublisher* watcher = NULL;
    IoxPoolInfo before, after;
    check("a publisher to watch the pool", iox_publisher_create(service, false, &watcher), IOX_STATUS_OK);
    check("pool before", iox_publisher_pool_info(watcher, &before), IOX_STATUS_OK);
    check("release after its ports are gone", iox_held_sample_release(&sample), IOX_STATUS_OK);
    check("pool after", iox_publisher_pool_info(watcher, &after), IOX_STATUS_OK);
    expect("the chunk is back in the pool", after.free_chunks == before.free_chunks + 1);
    check("drop the watcher", iox_publisher_drop(watcher), IOX_STATUS_OK);
    check("drop the service", iox_pubsub_service_drop(service), IOX_STATUS_OK);
    with_a_header(argv[1]);
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
