/* A reader of a service with an access policy, run as a user the policy lists as a
 * reader (tests/access_c.rs): `c_access_reader ROOT SERVICE READER_UID EXPECTED`
 * opens the u64 service SERVICE (which the Rust side created with the policy
 * "read: uid READER_UID"), checks that
 * - an open that requires another policy fails (IOX_STATUS_OPEN_FAILED, naming where
 *   C sets it) and one that requires the same rules succeeds,
 * - the service's policy reads back as text naming READER_UID as a reader,
 * - its publisher is refused with IOX_STATUS_NOT_A_PUBLISHER and a message that names
 *   the access policy,
 * then subscribes, prints "subscribed", and receives (polling, 30 s at most) one value,
 * which must be EXPECTED. Exit 0 on success; otherwise 1 with why on stderr. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iox.h"

static int die(const char* what, IoxStatus s) {
    fprintf(stderr, "c_access_reader: %s: %s: %s\n", what, iox_status_name(s), iox_last_error());
    return 1;
}

/* The u64 service SERVICE under ROOT, opened (not created) requiring `access` (NULL:
 * none). */
static IoxStatus open_u64(const char* root, const char* name, const IoxAccessPolicy* access, IoxPubSubService** out) {
    IoxPubSubOptions o;
    iox_pubsub_options_init(&o);
    o.root = root;
    o.payload.name = "u64";
    o.payload.size = sizeof(uint64_t);
    o.payload.alignment = _Alignof(uint64_t);
    o.payload.any_bit_pattern = true;
    o.access = access;
    return iox_pubsub_open(name, IOX_OPEN, &o, out);
}

int main(int argc, char** argv) {
    if (argc != 5) return fprintf(stderr, "usage: c_access_reader ROOT SERVICE READER_UID EXPECTED\n"), 2;
    const char* root = argv[1];
    const char* name = argv[2];
    uint32_t reader = (uint32_t)strtoul(argv[3], NULL, 10);
    uint64_t expected = strtoull(argv[4], NULL, 10);

    /* Another policy than the service's is refused, saying where C sets it. */
    uint32_t other = reader + 1;
    IoxAccessPolicy wrong = {0};
    wrong.read_uids = &other;
    wrong.read_uid_count = 1;
    IoxPubSubService* service = NULL;
    IoxStatus s = open_u64(root, name, &wrong, &service);
    if (s != IOX_STATUS_OPEN_FAILED || strstr(iox_last_error(), "IoxPubSubOptions.access") == NULL)
        return die("an open requiring another access policy was not refused as expected", s);

    /* The same rules, but another creator required: refused too. */
    IoxAccessPolicy same = {0};
    same.read_uids = &reader;
    same.read_uid_count = 1;
    same.created_by = &reader;
    s = open_u64(root, name, &same, &service);
    if (s != IOX_STATUS_OPEN_FAILED || strstr(iox_last_error(), "(creator)") == NULL)
        return die("an open requiring another creator was not refused as expected", s);

    uint32_t root_uid = 0; /* the test creates the service as root */
    same.created_by = &root_uid;
    if ((s = open_u64(root, name, &same, &service)) != IOX_STATUS_OK) return die("open as a reader", s);

    const char* policy = NULL;
    if ((s = iox_pubsub_access_policy(service, &policy)) != IOX_STATUS_OK) return die("access policy", s);
    char want[64];
    snprintf(want, sizeof want, "read: uid %" PRIu32, reader);
    if (policy == NULL || strstr(policy, want) == NULL) {
        fprintf(stderr, "c_access_reader: the policy reads \"%s\", without \"%s\"\n", policy ? policy : "(none)",
                want);
        return 1;
    }

    IoxPublisher* pub = NULL;
    s = iox_publisher_create(service, false, &pub);
    if (s != IOX_STATUS_NOT_A_PUBLISHER) return die("a reader's publisher was not refused as not a publisher", s);
    if (strstr(iox_last_error(), "access policy") == NULL) return die("the refusal does not name the access policy", s);

    IoxSubscriber* sub = NULL;
    if ((s = iox_subscriber_create(service, false, &sub)) != IOX_STATUS_OK) return die("subscriber", s);
    printf("subscribed\n");
    fflush(stdout);

    /* Bounded: 300 receives of up to 100 ms each. */
    IoxSample sample;
    bool got = false;
    for (int i = 0; i < 300 && !got; i++) {
        if ((s = iox_subscriber_receive(sub, 100ull * 1000 * 1000, &sample, &got)) != IOX_STATUS_OK)
            return die("receive", s);
    }
    if (!got) return fprintf(stderr, "c_access_reader: nothing received within 30 s\n"), 1;
    uint64_t value = *(const uint64_t*)sample.data;
    if (sample.len_bytes != sizeof(uint64_t) || value != expected) {
        fprintf(stderr, "c_access_reader: received %" PRIu64 " (%" PRIu64 " bytes), expected %" PRIu64 "\n", value,
                sample.len_bytes, expected);
        return 1;
    }
    if ((s = iox_subscriber_release(sub, sample.id)) != IOX_STATUS_OK) return die("release", s);
    if ((s = iox_subscriber_drop(sub)) != IOX_STATUS_OK) return die("drop subscriber", s);
    if ((s = iox_pubsub_service_drop(service)) != IOX_STATUS_OK) return die("drop service", s);
    printf("received %" PRIu64 "\n", value);
    return 0;
}
