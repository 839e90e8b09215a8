/* Huge-page pools from C (tests/huge_pages_c.rs), one program in two roles:
 * `c_huge_pages publish ROOT SERVICE LEN`: creates SERVICE, a service of u8 slices (up
 *   to 1 MiB) on 2 MiB huge pages (`page_size`, `page_size_set`) with the smallest
 *   limits, checks that its publisher's pool info says 2 MiB pages, prints
 *   "created LEN_OF_POOL PAGES", waits (up to 30 s) for a subscriber, sends one frame
 *   of LEN bytes (byte i is frame_byte(i)), prints "sent", and waits (up to 30 s) for
 *   the subscriber to leave.
 * `c_huge_pages refuse ROOT NEEDED`: the refusals: an IoxPageSize that is none
 *   (IOX_STATUS_INVALID_ARGUMENT; ignored while page_size_set is false), a pool of
 *   NEEDED 2 MiB pages, more than the machine may have (IOX_STATUS_NO_HUGE_PAGES, with
 *   the advice, in both creating modes; NEEDED 0: a kernel without 2 MiB hugetlb pages), huge pages of device memory
 *   (IOX_STATUS_OPEN_FAILED), and a 4 KiB service opened asking for 2 MiB pages
 *   (IOX_STATUS_OPEN_FAILED naming the page size; asking for base pages opens it);
 *   prints "refused".
 * Exit 0 on success; otherwise 1 with why on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "iox.h"

#define MIB2 (2ull << 20)

static int die(const char* what, IoxStatus s) {
    fprintf(stderr, "c_huge_pages: %s: %s: %s\n", what, iox_status_name(s), iox_last_error());
    return 1;
}

static int wrong(const char* what, IoxStatus s, IoxStatus expected) {
    fprintf(stderr, "c_huge_pages: %s: %s instead of %s: %s\n", what, iox_status_name(s), iox_status_name(expected),
            iox_last_error());
    return 1;
}

static int lacks(const char* what, const char* part) {
    fprintf(stderr, "c_huge_pages: %s: the message lacks \"%s\": %s\n", what, part, iox_last_error());
    return 1;
}

/* Byte i of the frame (what tests/programs/cpp_huge_pages.cpp checks). */
static uint8_t frame_byte(uint64_t i) { return (uint8_t)((i * 2654435761u) >> 13); }

/* Options of the service's u8 slices of up to `max_len` bytes under `root`. */
static IoxPubSubOptions options(const char* root, uint64_t max_len) {
    IoxPubSubOptions o;
    iox_pubsub_options_init(&o);
    o.root = root;
    o.payload.name = "u8";
    o.payload.size = 1;
    o.payload.alignment = 1;
    o.payload.any_bit_pattern = true;
    o.payload.slice = true;
    o.payload.max_slice_len = max_len;
    o.max_publishers = 1;
    o.max_subscribers = 1;
    o.subscriber_buffer = 1;
    o.max_loans = 1;
    o.max_held = 1;
    return o;
}

/* Waits (up to 30 s) until the service has `want` subscribers. */
static int await_subscribers(IoxPubSubService* service, uint64_t want) {
    uint64_t subscribers = want + 1;
    for (int waited = 0;; waited++) {
        IoxStatus s = iox_pubsub_port_counts(service, NULL, &subscribers);
        if (s != IOX_STATUS_OK) return die("counts", s);
        if (subscribers == want) return 0;
        if (waited == 30000) return fprintf(stderr, "c_huge_pages: not %llu subscribers within 30 s\n", (unsigned long long)want), 1;
        struct timespec t = {0, 1000000};
        nanosleep(&t, NULL);
    }
}

static int publish(const char* root, const char* name, uint64_t len) {
    IoxPubSubOptions o = options(root, 1u << 20);
    o.page_size = IOX_PAGE_SIZE_HUGE_2MIB;
    o.page_size_set = true;
    IoxPubSubService* service = NULL;
    IoxStatus s = iox_pubsub_open(name, IOX_CREATE, &o, &service);
    if (s != IOX_STATUS_OK) return die("create on 2 MiB pages", s);
    IoxPublisher* pub = NULL;
    if ((s = iox_publisher_create(service, false, &pub)) != IOX_STATUS_OK) return die("publisher", s);
    IoxPoolInfo info;
    if ((s = iox_publisher_pool_info(pub, &info)) != IOX_STATUS_OK) return die("pool info", s);
    if (info.page_size != IOX_PAGE_SIZE_HUGE_2MIB || info.page_bytes != MIB2 || info.len % MIB2 != 0)
        return fprintf(stderr, "c_huge_pages: pool info: page size %d, %llu bytes a page, %llu long\n", (int)info.page_size,
                       (unsigned long long)info.page_bytes, (unsigned long long)info.len),
               1;
    printf("created %llu %llu\n", (unsigned long long)info.len, (unsigned long long)(info.len / info.page_bytes));
    fflush(stdout);
    if (await_subscribers(service, 1)) return 1;
    IoxLoan loan;
    if ((s = iox_publisher_loan(pub, len, &loan)) != IOX_STATUS_OK) return die("loan", s);
    uint8_t* bytes = loan.data;
    for (uint64_t i = 0; i < len; i++) bytes[i] = frame_byte(i);
    uint64_t delivered = 0;
    if ((s = iox_publisher_send(pub, loan.id, &delivered)) != IOX_STATUS_OK) return die("send", s);
    if (delivered != 1) return fprintf(stderr, "c_huge_pages: sent to %llu subscribers\n", (unsigned long long)delivered), 1;
    printf("sent\n");
    fflush(stdout);
    if (await_subscribers(service, 0)) return 1;
    iox_publisher_drop(pub);
    iox_pubsub_service_drop(service);
    return 0;
}

static int refuse(const char* root, uint64_t needed) {
    IoxPubSubService* service = NULL;
    IoxStatus s;

    /* An IoxPageSize that is none: refused while set, ignored while not. */
    IoxPubSubOptions o = options(root, 4096);
    o.page_size = 7;
    o.page_size_set = true;
    if ((s = iox_pubsub_open("huge/unknown", IOX_OPEN_OR_CREATE, &o, &service)) != IOX_STATUS_INVALID_ARGUMENT)
        return wrong("page size 7", s, IOX_STATUS_INVALID_ARGUMENT);
    if (!strstr(iox_last_error(), "options.page_size is 7")) return lacks("page size 7", "options.page_size is 7");
    o.page_size_set = false;
    if ((s = iox_pubsub_open("huge/unknown", IOX_CREATE, &o, &service)) != IOX_STATUS_OK)
        return die("page size 7, not set", s);
    iox_pubsub_service_drop(service);

    /* More pages than the machine has reserved or may add, in both creating modes. */
    const int known = needed != 0;
    o = options(root, (known ? needed : 1) * MIB2);
    o.page_size = IOX_PAGE_SIZE_HUGE_2MIB;
    o.page_size_set = true;
    const uint32_t modes[2] = {IOX_CREATE, IOX_OPEN_OR_CREATE};
    for (int m = 0; m < 2; m++) {
        if ((s = iox_pubsub_open("huge/short", modes[m], &o, &service)) != IOX_STATUS_NO_HUGE_PAGES)
            return wrong("too many pages", s, IOX_STATUS_NO_HUGE_PAGES);
        /* NEEDED 0: this kernel has no 2 MiB hugetlb pages, whose advice is to boot with some. */
        if (known && !strstr(iox_last_error(), "nr_hugepages")) return lacks("too many pages", "nr_hugepages");
        if (!strstr(iox_last_error(), "hugepages=")) return lacks("too many pages", "hugepages=");
    }
    if (strcmp(iox_status_name(IOX_STATUS_NO_HUGE_PAGES), "IOX_STATUS_NO_HUGE_PAGES") != 0)
        return fprintf(stderr, "c_huge_pages: status 20 is named %s\n", iox_status_name(IOX_STATUS_NO_HUGE_PAGES)), 1;

    /* Device memory takes no host page size (refused before any driver is asked). */
    o = options(root, 4096);
    o.memory_type = 3;
    o.memory_type_set = true;
    o.page_size = IOX_PAGE_SIZE_HUGE_2MIB;
    o.page_size_set = true;
    if ((s = iox_pubsub_open("huge/device", IOX_CREATE, &o, &service)) != IOX_STATUS_OPEN_FAILED)
        return wrong("device memory on 2 MiB pages", s, IOX_STATUS_OPEN_FAILED);
    if (!strstr(iox_last_error(), "page size")) return lacks("device memory on 2 MiB pages", "page size");

    /* A 4 KiB service: opened asking for 2 MiB pages is refused, for base pages opens. */
    o = options(root, 4096);
    if ((s = iox_pubsub_open("huge/base", IOX_CREATE, &o, &service)) != IOX_STATUS_OK) return die("create on 4 KiB pages", s);
    IoxPubSubService* again = NULL;
    o.page_size = IOX_PAGE_SIZE_HUGE_2MIB;
    o.page_size_set = true;
    if ((s = iox_pubsub_open("huge/base", IOX_OPEN, &o, &again)) != IOX_STATUS_OPEN_FAILED)
        return wrong("a 4 KiB service opened for 2 MiB pages", s, IOX_STATUS_OPEN_FAILED);
    if (!strstr(iox_last_error(), "page size 4 KiB") || !strstr(iox_last_error(), "2 MiB"))
        return lacks("a 4 KiB service opened for 2 MiB pages", "page size 4 KiB ... 2 MiB");
    o.page_size = IOX_PAGE_SIZE_BASE;
    if ((s = iox_pubsub_open("huge/base", IOX_OPEN, &o, &again)) != IOX_STATUS_OK) return die("open for base pages", s);
    IoxSubscriber* sub = NULL;
    if ((s = iox_subscriber_create(again, false, &sub)) != IOX_STATUS_OK) return die("subscriber", s);
    IoxPoolInfo info;
    if ((s = iox_subscriber_pool_info(sub, &info)) != IOX_STATUS_OK) return die("pool info", s);
    if (info.page_size != IOX_PAGE_SIZE_BASE || info.page_bytes != 4096)
        return fprintf(stderr, "c_huge_pages: a 4 KiB pool says page size %d, %llu bytes\n", (int)info.page_size,
                       (unsigned long long)info.page_bytes),
               1;
    iox_subscriber_drop(sub);
    iox_pubsub_service_drop(again);
    iox_pubsub_service_drop(service);
    printf("refused\n");
    return 0;
}

int main(int argc, char** argv) {
    const char* role = argc > 1 ? argv[1] : "";
    if (strcmp(role, "publish") == 0 && argc == 5) return publish(argv[2], argv[3], strtoull(argv[4], NULL, 10));
    if (strcmp(role, "refuse") == 0 && argc == 4) return refuse(argv[2], strtoull(argv[3], NULL, 10));
    fprintf(stderr, "usage: c_huge_pages publish ROOT SERVICE LEN | c_huge_pages refuse ROOT NEEDED\n");
    return 2;
}
