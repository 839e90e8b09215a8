/* The frames of the `camera` examples (examples/src/bin/camera.rs, camera.cpp): a
 * per-sample user header, `FrameHeader` (`iox_examples::FrameHeader` in Rust, the same
 * fields under the same name), in front of each frame's pixels, on the service
 * "examples/camera". Frame `i` has the header `camera_frame_header(i)` and the pixels
 * `camera_frame_pixel(i, j)`, so every side can check what another one sent. */
#ifndef IOX_EXAMPLES_CAMERA_H
#define IOX_EXAMPLES_CAMERA_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
typedef struct FrameHeader {
    uint64_t stamp_ns;
    uint32_t width;
    uint32_t height;
    uint32_t step;
    uint8_t encoding[12]; /* NUL-padded ASCII */
} FrameHeader;
/* The name the Rust derive records (`#[iox(type_name = "FrameHeader")]`): 32 bytes,
 * no padding, so every bit pattern is a value. The service's settings. */
#define FRAME_HEADER_NAME "FrameHeader"
#define CAMERA_SERVICE "examples/camera"
#define CAMERA_MAX_PIXELS (64 * 48)
#define CAMERA_BUFFER 8

/* Frame `i`'s header (i < 48): stamp 1000000 + i, 64 x (48 - i) pixels, mono8. */
static inline FrameHeader camera_frame_header(uint64_t i) {
    FrameHeader h;
    memset(&h, 0, sizeof h);
    h.stamp_ns = 1000000 + i;
    h.width = 64;
    h.height = 48 - (uint32_t)(i % 48);
    h.step = 64;
    memcpy(h.encoding, "mono8", 5);
    return h;
}

/* Pixel `j` of frame `i`. */
static inline uint8_t camera_frame_pixel(uint64_t i, size_t j) { return (uint8_t)(i + j); }
#endif
