/* dtype.c — see dtype.h. */
#include "dtype.h"

static const struct { const char *name; size_t size; } k_types[DT_COUNT] = {
    [DT_F32] = {"F32", 4}, [DT_F16] = {"F16", 2}, [DT_BF16] = {"BF16", 2},
    [DT_I32] = {"I32", 4}, [DT_I64] = {"I64", 8}, [DT_U32] = {"U32", 4},
    [DT_U8] = {"U8", 1},   [DT_I8] = {"I8", 1},   [DT_BOOL] = {"BOOL", 1},
    [DT_F64] = {"F64", 8},
};

size_t dtype_size(mtplx_dtype t) { return (unsigned)t < DT_COUNT ? k_types[t].size : 0; }

const char *dtype_name(mtplx_dtype t) { return (unsigned)t < DT_COUNT ? k_types[t].name : "?"; }

int dtype_parse(const char *s, mtplx_dtype *out) {
    for (int i = 0; i < DT_COUNT; i++)
        if (strcmp(s, k_types[i].name) == 0) {
            *out = (mtplx_dtype)i;
            return 0;
        }
    return -1;
}

float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do { man <<= 1; e++; } while (!(man & 0x400));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000;
    int32_t exp = (int32_t)((u >> 23) & 0xff) - 127 + 15;
    uint32_t man = u & 0x7fffff;
    if (((u >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return (uint16_t)h;
}
