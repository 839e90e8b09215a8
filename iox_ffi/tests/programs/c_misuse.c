/* What the C API does with mistakes a C caller can make: `c_misuse ROOT` runs each
 * check in this process and prints one line per check, then "N passed, M failed";
 * exit 0 only if none failed. Every mistake must come back as its status with a
 * message, never a crash. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "iox.h"
#include "reading.h"

static int passed, failed;

static void check(const char* what, IoxStatus got, IoxStatus want) {
    const char* msg = iox_last_error();
    int ok = got == want && (want == IOX_STATUS_OK || (msg != NULL && msg[0] != '\0'));
    printf("%s %s: %s (%s)\n", ok ? "ok  " : "FAIL", what, iox_status_name(got), want == IOX_STATUS_OK ? "" : msg);
    ok ? passed++ : failed++;
}

static void options(IoxPubSubOptions* o, const char* root) {
    iox_pubsub_options_init(o);
    o->root = root;
    o->payload.name = READING_NAME;
    o->payload.size = sizeof(Reading);
    o->payload.alignment = _Alignof(Reading);
    o->payload.any_bit_pattern = true;
}

struct other_thread {
    IoxPublisher* publisher;
    IoxStatus status;
    char message[256];
};

static void* loan_from_other_thread(void* arg) {
    struct other_thread* t = arg;
    IoxLoan loan;
    t->status = iox_publisher_loan(t->publisher, sizeof(Reading), &loan);
    /* The last error is per thread: this thread's message, read here. */
    snprintf(t->message, sizeof t->message, "%s", iox_last_error());
    return NULL;
}

int main(int argc, char** argv) {
    if (argc != 2) return fprintf(stderr, "usage: c_misuse ROOT\n"), 2;
    IoxPubSubOptions o;
    options(&o, argv[1]);
    IoxPubSubService* service = NULL;
    check("open", iox_pubsub_open("ffi/misuse", IOX_OPEN_OR_CREATE, &o, &service), IOX_STATUS_OK);
    IoxPublisher* pub = NULL;
    IoxSubscriber* sub = NULL;
    check("publisher", iox_publisher_create(service, false, &pub), IOX_STATUS_OK);
    check("subscriber", iox_subscriber_create(service, false, &sub), IOX_STATUS_OK);
    if (failed != 0) return printf("%d passed, %d failed (set-up)\n", passed, failed), 1;

    IoxLoan loan;
    check("loan from a NULL publisher", iox_publisher_loan(NULL, sizeof(Reading), &loan), IOX_STATUS_NULL_POINTER);
    check("a subscriber passed as a publisher", iox_publisher_loan((IoxPublisher*)sub, sizeof(Reading), &loan),
          IOX_STATUS_INVALID_HANDLE);
    check("a service passed as a subscriber", iox_subscriber_release((IoxSubscriber*)service, 1),
          IOX_STATUS_INVALID_HANDLE);
    check("a loan of the wrong size", iox_publisher_loan(pub, sizeof(Reading) + 1, &loan), IOX_STATUS_INVALID_ARGUMENT);

    check("loan", iox_publisher_loan(pub, sizeof(Reading), &loan), IOX_STATUS_OK);
    if (failed != 0) return printf("%d passed, %d failed (loan)\n", passed, failed), 1;
    Reading r = {7, 3.5};
    memcpy(loan.data, &r, sizeof r);
    uint64_t delivered = 0, loan_device = 0;
    check("a device pointer of an unpinned loan", iox_publisher_device_ptr(pub, loan.id, &loan_device),
          IOX_STATUS_NO_DEVICE_POINTER);
    check("send", iox_publisher_send(pub, loan.id, &delivered), IOX_STATUS_OK);
    check("a device pointer of a sent loan", iox_publisher_device_ptr(pub, loan.id, &loan_device),
          IOX_STATUS_STALE_HANDLE);
    check("the same loan sent twice", iox_publisher_send(pub, loan.id, &delivered), IOX_STATUS_STALE_HANDLE);
    check("a sent loan discarded", iox_publisher_discard(pub, loan.id), IOX_STATUS_STALE_HANDLE);
    check("an id that was never a loan", iox_publisher_discard(pub, 0), IOX_STATUS_STALE_HANDLE);
    {
        IoxPublisher* pub2 = NULL;
        IoxLoan other;
        check("a second publisher", iox_publisher_create(service, false, &pub2), IOX_STATUS_OK);
        check("its loan", iox_publisher_loan(pub2, sizeof(Reading), &other), IOX_STATUS_OK);
        check("a loan id sent through another publisher", iox_publisher_send(pub, other.id, NULL),
              IOX_STATUS_STALE_HANDLE);
        check("drop the second publisher", iox_publisher_drop(pub2), IOX_STATUS_OK);
    }

    IoxSample sample;
    bool got = false;
    check("receive", iox_subscriber_receive(sub, 0, &sample, &got), IOX_STATUS_OK);
    if (failed != 0) return printf("%d passed, %d failed (receive)\n", passed, failed), 1;
    if (!got || ((const Reading*)sample.data)->seq != 7) {
        printf("FAIL the sent reading did not arrive\n");
        failed++;
    }
    check("receive into NULL", iox_subscriber_receive(sub, 0, NULL, &got), IOX_STATUS_NULL_POINTER);
    uint64_t device = 0;
    check("a device pointer of an unpinned sample", iox_subscriber_device_ptr(sub, sample.id, &device),
          IOX_STATUS_NO_DEVICE_POINTER);
    IoxPoolInfo info;
    check("pool info", iox_subscriber_pool_info(sub, &info), IOX_STATUS_OK);
    const char* addr = info.base;
    if (info.len == 0 || info.memory_type != 0 || info.free_chunks >= info.total_chunks ||
        (const char*)sample.data < addr || (const char*)sample.data >= addr + info.len) {
        printf("FAIL the pool info does not hold the sample: base %p len %llu type %u free %llu of %llu\n", info.base,
               (unsigned long long)info.len, info.memory_type, (unsigned long long)info.free_chunks,
               (unsigned long long)info.total_chunks);
        failed++;
    }
    check("release", iox_subscriber_release(sub, sample.id), IOX_STATUS_OK);
    check("the same sample released twice", iox_subscriber_release(sub, sample.id), IOX_STATUS_STALE_HANDLE);

    struct other_thread t = {pub, IOX_STATUS_OK, ""};
    pthread_t thread;
    pthread_create(&thread, NULL, loan_from_other_thread, &t);
    pthread_join(thread, NULL);
    check("a publisher used from another thread", t.status, IOX_STATUS_WRONG_THREAD);
    if (strstr(t.message, "thread") == NULL) {
        printf("FAIL the other thread's message does not say why: %s\n", t.message);
        failed++;
    }

    /* A forked child's copy of a port is its parent's: refused with a message. */
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        IoxStatus st = iox_publisher_loan(pub, sizeof(Reading), &loan);
        printf("     (the forked child was told: %s)\n", iox_last_error());
        fflush(stdout);
        _exit(st == IOX_STATUS_LOAN_FAILED && strstr(iox_last_error(), "forked") != NULL ? 0 : 1);
    }
    int child_status = -1;
    waitpid(child, &child_status, 0);
    check("a publisher used in a forked child",
          WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0 ? IOX_STATUS_LOAN_FAILED : IOX_STATUS_OK,
          IOX_STATUS_LOAN_FAILED);

    IoxPubSubService* other = NULL;
    IoxPubSubOptions wrong;
    options(&wrong, argv[1]);
    wrong.payload.size = 24;
    check("the service opened as another type", iox_pubsub_open("ffi/misuse", IOX_OPEN, &wrong, &other),
          IOX_STATUS_OPEN_FAILED);
    if (strstr(iox_last_error(), READING_NAME) == NULL) {
        printf("FAIL the type mismatch message does not name the type: %s\n", iox_last_error());
        failed++;
    }
    check("a name that is not a service name", iox_pubsub_open("bad name!", IOX_OPEN_OR_CREATE, &o, &other),
          IOX_STATUS_INVALID_ARGUMENT);
    check("an unknown open mode", iox_pubsub_open("ffi/misuse", 7, &o, &other), IOX_STATUS_INVALID_ARGUMENT);
    check("NULL options", iox_pubsub_open("ffi/misuse", IOX_OPEN, NULL, &other), IOX_STATUS_NULL_POINTER);

    /* Declared field layouts: a malformed table is refused before anything is
     * recorded, naming what is wrong; a well-formed one is recorded, and an opener
     * whose fields differ is refused naming the field. */
    IoxField fields[2] = {
        {.name = "seq", .offset = offsetof(Reading, seq), .type_name = "u64"},
        {.name = "value", .offset = offsetof(Reading, value), .type_name = "f64"},
    };
    IoxPubSubOptions f;
    options(&f, argv[1]);
    f.payload.fields = fields;
    f.payload.field_count = 2;
    fields[1].type_name = "double";
    check("a field of a type Rust has no name for", iox_pubsub_open("ffi/fields", IOX_OPEN_OR_CREATE, &f, &other),
          IOX_STATUS_INVALID_ARGUMENT);
    fields[1].type_name = "f64";
    fields[1].offset = 4;
    check("overlapping fields", iox_pubsub_open("ffi/fields", IOX_OPEN_OR_CREATE, &f, &other),
          IOX_STATUS_INVALID_ARGUMENT);
    fields[1].offset = offsetof(Reading, value);
    f.payload.field_count = 1;
    check("a byte in no field of an any-bit-pattern type", iox_pubsub_open("ffi/fields", IOX_OPEN_OR_CREATE, &f, &other),
          IOX_STATUS_INVALID_ARGUMENT);
    f.payload.field_count = 2;
    fields[0].type_name = "bool";
    fields[0].count = 8;
    check("a bool in an any-bit-pattern type", iox_pubsub_open("ffi/fields", IOX_OPEN_OR_CREATE, &f, &other),
          IOX_STATUS_INVALID_ARGUMENT);
    fields[0].type_name = "u64";
    fields[0].count = 0;
    fields[1].name = "seq";
    check("two fields of one name", iox_pubsub_open("ffi/fields", IOX_OPEN_OR_CREATE, &f, &other),
          IOX_STATUS_INVALID_ARGUMENT);
    fields[1].name = "value";
    f.tensors = true;
    check("tensors of a struct", iox_pubsub_open("ffi/fields", IOX_OPEN_OR_CREATE, &f, &other),
          IOX_STATUS_OPEN_FAILED);
    f.tensors = false;
    fields[0].count = UINT64_MAX;
    check("an array too large to exist", iox_pubsub_open("ffi/fields", IOX_OPEN_OR_CREATE, &f, &other),
          IOX_STATUS_INVALID_ARGUMENT);
    fields[0].count = 0;
    /* A struct that contains itself (a table's mistake): refused, not followed forever. */
    IoxType looped = f.payload;
    IoxField inner = {.name = "inner", .offset = 0, .nested = &looped};
    looped.fields = &inner;
    looped.field_count = 1;
    IoxPubSubOptions l = f;
    l.payload = looped;
    check("a struct nested in itself", iox_pubsub_open("ffi/fields", IOX_OPEN_OR_CREATE, &l, &other),
          IOX_STATUS_INVALID_ARGUMENT);
    f.payload.fields = NULL;
    check("NULL fields with a count", iox_pubsub_open("ffi/fields", IOX_OPEN_OR_CREATE, &f, &other),
          IOX_STATUS_NULL_POINTER);
    f.payload.fields = fields;
    IoxPubSubService* described = NULL;
    check("a declared layout", iox_pubsub_open("ffi/fields", IOX_CREATE, &f, &described), IOX_STATUS_OK);
    fields[1].name = "reading";
    check("another layout of the type", iox_pubsub_open("ffi/fields", IOX_OPEN, &f, &other), IOX_STATUS_OPEN_FAILED);
    if (strstr(iox_last_error(), "`reading`") == NULL && strstr(iox_last_error(), "`value`") == NULL) {
        printf("FAIL the layout mismatch message does not name the field: %s\n", iox_last_error());
        failed++;
    }
    check("drop the described service", iox_pubsub_service_drop(described), IOX_STATUS_OK);

    /* Host tensor ports: only on a tensor service, which takes no plain publisher;
     * a tensor of another element type or larger than the service is refused. */
    IoxTensorPublisher* tpub = NULL;
    check("a tensor publisher of a plain service", iox_tensor_publisher_create(service, &tpub),
          IOX_STATUS_PORT_CREATE_FAILED);
    IoxPubSubOptions topts;
    iox_pubsub_options_init(&topts);
    topts.root = argv[1];
    topts.payload.name = "f32";
    topts.payload.size = 4;
    topts.payload.alignment = 4;
    topts.payload.any_bit_pattern = true;
    topts.payload.slice = true;
    topts.payload.max_slice_len = 16;
    topts.tensors = true;
    IoxPubSubService* tensors = NULL;
    check("a host tensor service", iox_pubsub_open("ffi/tensors", IOX_CREATE, &topts, &tensors), IOX_STATUS_OK);
    IoxPublisher* plain = NULL;
    check("a plain publisher of a tensor service", iox_publisher_create(tensors, false, &plain),
          IOX_STATUS_PORT_CREATE_FAILED);
    IoxTensorSubscriber* tsub = NULL;
    check("a tensor subscriber", iox_tensor_subscriber_create(tensors, &tsub), IOX_STATUS_OK);
    check("a tensor publisher", iox_tensor_publisher_create(tensors, &tpub), IOX_STATUS_OK);
    IoxTensor shape = {.element = IOX_ELEMENT_U8, .ndim = 2, .shape = {2, 3}, .strides = {3, 1}};
    IoxTensorLoan tl;
    check("a tensor of another element type", iox_tensor_publisher_loan(tpub, &shape, &tl), IOX_STATUS_INVALID_TENSOR);
    shape.element = IOX_ELEMENT_F32;
    shape.shape[0] = 6;
    check("a tensor larger than the service", iox_tensor_publisher_loan(tpub, &shape, &tl), IOX_STATUS_INVALID_TENSOR);
    shape.shape[0] = 2;
    check("a tensor loan", iox_tensor_publisher_loan(tpub, &shape, &tl), IOX_STATUS_OK);
    for (int k = 0; k < 6; k++) ((float*)tl.data)[k] = (float)k / 2;
    delivered = 0;
    check("a tensor sent", iox_tensor_publisher_send(tpub, tl.id, &delivered), IOX_STATUS_OK);
    check("a tensor loan sent twice", iox_tensor_publisher_send(tpub, tl.id, &delivered), IOX_STATUS_STALE_HANDLE);
    IoxTensorSample ts;
    got = false;
    check("a tensor received", iox_tensor_subscriber_receive(tsub, 0, &ts, &got), IOX_STATUS_OK);
    if (delivered != 1 || !got || ts.tensor.element != IOX_ELEMENT_F32 || ts.tensor.ndim != 2 ||
        ts.tensor.shape[0] != 2 || ts.tensor.shape[1] != 3 || ((const float*)ts.data)[5] != 2.5f) {
        printf("FAIL the tensor came back otherwise (delivered %llu, received %d)\n", (unsigned long long)delivered,
               (int)got);
        failed++;
    }
    check("a tensor sample released", iox_tensor_subscriber_release(tsub, ts.id), IOX_STATUS_OK);
    check("drop the tensor publisher", iox_tensor_publisher_drop(tpub), IOX_STATUS_OK);
    check("drop the tensor subscriber", iox_tensor_subscriber_drop(tsub), IOX_STATUS_OK);
    check("drop the tensor service", iox_pubsub_service_drop(tensors), IOX_STATUS_OK);

    /* A loan still out when its publisher goes is given back with it. */
    check("loan kept at drop", iox_publisher_loan(pub, sizeof(Reading), &loan), IOX_STATUS_OK);
    check("drop the publisher", iox_publisher_drop(pub), IOX_STATUS_OK);
    check("drop the subscriber", iox_subscriber_drop(sub), IOX_STATUS_OK);
    check("drop a NULL publisher", iox_publisher_drop(NULL), IOX_STATUS_NULL_POINTER);
    check("drop the service", iox_pubsub_service_drop(service), IOX_STATUS_OK);
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
