/* The payload the iox_ffi tests share with their Rust side (tests/cross_language.rs,
 * `Reading` with #[iox(type_name = "ffi/Reading")]): two plain numbers, no padding. */
#ifndef READING_H
#define READING_H
#include <stdint.h>
typedef struct Reading {
    uint64_t seq;
    double value;
} Reading;
#define READING_NAME "ffi/Reading"
#endif
