/* test_base.c — error plumbing and dtype conversions. */
#include "../../src/base/dtype.h"
#include "../../src/base/err.h"
#include "../../src/base/mem.h"
#include "test.h"

TEST(test_err_set_and_prefix) {
    mtplx_err e;
    err_clear(&e);
    CHECK_INT(err_set(&e, MTPLX_EBADFILE, "tensor %s: bad shape", "w"), MTPLX_EBADFILE);
    err_prefix(&e, "%s", "model.safetensors");
    CHECK_STR(e.msg, "model.safetensors: tensor w: bad shape");
    CHECK_INT(e.code, MTPLX_EBADFILE);
}

TEST(test_bf16_round_trip_and_rounding) {
    for (int i = 0; i < 65536; i += 7) {
        uint16_t h = (uint16_t)i;
        float f = bf16_to_f32(h);
        if (f != f) continue; /* NaN payloads may change */
        CHECK_INT(f32_to_bf16(f), h);
    }
    /* 1 + 2^-8 is exactly half-way between two bf16 values: ties to even (1.0). */
    CHECK_INT(f32_to_bf16(1.00390625f), 0x3f80);
    CHECK_INT(f32_to_bf16(1.01171875f), 0x3f82); /* tie, rounds up to even 0x3f82 */
}

TEST(test_f16_round_trip) {
    for (int i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* NaN */
        CHECK_INT(f32_to_f16(f16_to_f32(h)), h);
    }
    CHECK_NEAR(f16_to_f32(0x3c00), 1.0, 0);
    CHECK_NEAR(f16_to_f32(0x0001), 5.960464477539063e-08, 1e-15);
}

TEST(test_mem_overflow_reports) {
    mtplx_err e;
    err_clear(&e);
    void *p = mem_alloc((size_t)-1, 16, "huge", &e);
    CHECK(p == NULL);
    CHECK_INT(e.code, MTPLX_ENOMEM);
}

int main(void) {
    RUN(test_err_set_and_prefix);
    RUN(test_bf16_round_trip_and_rounding);
    RUN(test_f16_round_trip);
    RUN(test_mem_overflow_reports);
    return TEST_SUMMARY();
}
