/* A C blackboard: `c_blackboard ROOT` opens or creates "ffi/board", keys of type i16
 * (signed: -5 travels as its two's complement), key -5 a u64 (initially 11), key 300
 * an f32 (initially 0.5), two writers, recording the attribute owner=c_blackboard
 * (read back here). It checks the C API's refusals (a buffer of another size,
 * a key out of the i16 range, a key the board lacks, another value type on open),
 * updates key -5 to 42 and prints "updated", then waits (up to 10 s) on a change
 * listener until key 300 changes and prints "key 300 is V". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iox.h"

#define SECOND 1000000000ull

static int die(const char* what, IoxStatus s) {
    fprintf(stderr, "c_blackboard: %s: %s: %s\n", what, iox_status_name(s), iox_last_error());
    return 1;
}

/* Fails unless `s` is `want` and the last error mentions `text`. */
static int expect(const char* what, IoxStatus s, IoxStatus want, const char* text) {
    if (s != want || strstr(iox_last_error(), text) == NULL) {
        fprintf(stderr, "c_blackboard: %s: got %s (%s), wanted %s mentioning \"%s\"\n", what, iox_status_name(s),
                iox_last_error(), iox_status_name(want), text);
        return 1;
    }
    return 0;
}

static void entries(IoxBlackboardEntry e[2], const char* key300_type, uint64_t key300_size,
                    const uint64_t* speed, const float* ratio) {
    memset(e, 0, 2 * sizeof(IoxBlackboardEntry));
    e[0].key = (uint64_t)(int64_t)-5;
    e[0].value.name = "u64";
    e[0].value.size = sizeof(uint64_t);
    e[0].value.alignment = _Alignof(uint64_t);
    e[0].value.any_bit_pattern = true;
    e[0].initial = speed;
    e[1].key = 300;
    e[1].value.name = key300_type;
    e[1].value.size = key300_size;
    e[1].value.alignment = key300_size;
    e[1].value.any_bit_pattern = true;
    e[1].initial = ratio;
}

int main(int argc, char** argv) {
    if (argc != 2) return fprintf(stderr, "usage: c_blackboard ROOT\n"), 2;
    uint64_t initial = 11;
    float half = 0.5f;
    IoxBlackboardEntry e[2];
    entries(e, "f32", sizeof(float), &initial, &half);
    IoxBlackboardOptions o;
    iox_blackboard_options_init(&o);
    o.root = argv[1];
    o.key_type = IOX_KEY_I16;
    o.entries = e;
    o.entry_count = 2;
    o.max_writers = 2; /* this program's and its peer's */
    IoxAttribute owner = {"owner", "c_blackboard"};
    o.attributes = &owner; /* recorded when this program creates the board */
    o.attribute_count = 1;
    IoxBlackboard* board = NULL;
    IoxStatus s = iox_blackboard_open("ffi/board", IOX_OPEN_OR_CREATE, &o, &board);
    if (s != IOX_STATUS_OK) return die("open", s);

    /* Another value type for key 300: refused on open, naming both. */
    IoxBlackboardEntry other[2];
    double wide = 0.5;
    entries(other, "f64", sizeof(double), &initial, (const float*)&wide);
    IoxBlackboardOptions o2 = o;
    o2.entries = other;
    IoxBlackboard* wrong = NULL;
    if (expect("open with f64", iox_blackboard_open("ffi/board", IOX_OPEN, &o2, &wrong), IOX_STATUS_OPEN_FAILED, "f64"))
        return 1;
    o2.key_type = 99;
    if (expect("key type 99", iox_blackboard_open("ffi/board", IOX_OPEN, &o2, &wrong), IOX_STATUS_INVALID_ARGUMENT,
               "IOX_KEY_I64"))
        return 1;

    const char* recorded = NULL;
    if ((s = iox_blackboard_attribute_get(board, "owner", &recorded)) != IOX_STATUS_OK) return die("attribute", s);
    if (recorded == NULL || strcmp(recorded, "c_blackboard") != 0)
        return fprintf(stderr, "c_blackboard: attribute owner is %s\n", recorded ? recorded : "missing"), 1;
    size_t count = 0;
    if ((s = iox_blackboard_attribute_count(board, &count)) != IOX_STATUS_OK || count != 1)
        return fprintf(stderr, "c_blackboard: %zu attributes\n", count), 1;
    if ((s = iox_blackboard_key_count(board, &count)) != IOX_STATUS_OK) return die("key count", s);
    uint64_t bits = 0, size = 0;
    if ((s = iox_blackboard_key(board, 0, &bits, &size)) != IOX_STATUS_OK) return die("key 0", s);
    if (count != 2 || (int64_t)bits != -5 || size != 8)
        return fprintf(stderr, "c_blackboard: keys %zu, first %" PRId64 " of %" PRIu64 " bytes\n", count,
                       (int64_t)bits, size), 1;

    IoxBlackboardReader* reader = NULL;
    IoxBlackboardWriter* writer = NULL;
    IoxListener* listener = NULL;
    if ((s = iox_blackboard_reader_create(board, &reader)) != IOX_STATUS_OK) return die("reader", s);
    if ((s = iox_blackboard_writer_create(board, &writer)) != IOX_STATUS_OK) return die("writer", s);
    if ((s = iox_blackboard_listener_create(board, &listener)) != IOX_STATUS_OK) return die("listener", s);

    uint64_t value = 0, generation = 0;
    if ((s = iox_blackboard_reader_get(reader, (uint64_t)(int64_t)-5, &value, sizeof value, &generation)) != IOX_STATUS_OK)
        return die("get", s);
    if (value != 11 || generation != 1)
        return fprintf(stderr, "c_blackboard: key -5 is %" PRIu64 " (generation %" PRIu64 ")\n", value, generation), 1;
    uint32_t small = 0;
    if (expect("get into 4 bytes", iox_blackboard_reader_get(reader, (uint64_t)(int64_t)-5, &small, 4, NULL),
               IOX_STATUS_INVALID_ARGUMENT, "8-byte values"))
        return 1;
    if (expect("key 40000", iox_blackboard_reader_get(reader, 40000, &value, 8, NULL), IOX_STATUS_INVALID_ARGUMENT,
               "not a i16"))
        return 1;
    if (expect("key 99", iox_blackboard_reader_get(reader, 99, &value, 8, NULL), IOX_STATUS_INVALID_ARGUMENT,
               "no key 99"))
        return 1;

    uint64_t answer = 42;
    if ((s = iox_blackboard_writer_update(writer, (uint64_t)(int64_t)-5, &answer, sizeof answer, &generation)) !=
        IOX_STATUS_OK)
        return die("update", s);
    if (generation != 2) return fprintf(stderr, "c_blackboard: update published %" PRIu64 "\n", generation), 1;
    printf("updated\n");
    fflush(stdout);

    for (;;) {
        uint32_t id = 0;
        bool got = false;
        if ((s = iox_listener_wait(listener, 10 * SECOND, &id, &got)) != IOX_STATUS_OK) return die("wait", s);
        if (!got) return fprintf(stderr, "c_blackboard: no change within 10 s\n"), 1;
        bool changed = false;
        if ((s = iox_blackboard_reader_generation(reader, 300, &generation, &changed)) != IOX_STATUS_OK)
            return die("generation", s);
        if (id == 1 && changed) break; /* key 300 is the second key */
    }
    float ratio = 0;
    if ((s = iox_blackboard_reader_get(reader, 300, &ratio, sizeof ratio, NULL)) != IOX_STATUS_OK) return die("get", s);
    printf("key 300 is %g\n", ratio);
    iox_listener_drop(listener);
    iox_blackboard_writer_drop(writer);
    iox_blackboard_reader_drop(reader);
    return iox_blackboard_drop(board) == IOX_STATUS_OK ? 0 : 1;
}
