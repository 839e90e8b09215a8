/* The payload of the iox examples (examples/src/lib.rs, `iox_examples::Reading`): the C
 * and C++ examples share the Rust examples' service "examples/readings". */
#ifndef IOX_EXAMPLES_READING_H
#define IOX_EXAMPLES_READING_H
#include <stdint.h>
typedef struct Reading {
    uint64_t seq;
    double value;
} Reading;
/* The name the Rust derive records (its Rust type name) and the service's settings. */
#define READING_TYPE_NAME "iox_examples::Reading"
#define READINGS_SERVICE "examples/readings"
#define READINGS_BUFFER 16
#endif
