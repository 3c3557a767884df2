/* knobs.c — storage of the kernels' tuning knobs (see knobs.h). */
#include "knobs.h"

#include "cpu.h"

#define KNOB_BYTES_MAX (1 << 20) /* prefetch distances: 0 .. 1 MiB */

static kern_knobs g_knobs = {-1, 0, 0, 1, 0, 9, 2048, -1, -1, -1, 1, -1, 1, 1, 1, 1};

/* qpack_pf / qpack_pf2 -1: chosen per CPU and call by kern_qpack_prefetch (matmul_qpack.c); bf16dp -1:
 * per CPU vendor (matmul.c, bf16dp_on) */
kern_knobs kern_knobs_default(void) { return (kern_knobs){-1, 0, 0, 1, 0, 9, 2048, -1, -1, -1, 1, -1, 1, 1, 1, 1}; }

/* Knobs a program set through their own setters (kern_matmul_set_qact_f32, cpu_isa_set): installing
 * settings later (a backend created after the override) keeps the program's value, as when the
 * kernels read the environment once and the setters overrode it. */
static int g_qact_pinned, g_isa_pinned;

void kern_knobs_pin_qact_f32(int on) {
    g_knobs.qact_f32 = on ? 1 : 0;
    g_qact_pinned = 1;
}

void kern_knobs_pin_isa(void) { g_isa_pinned = 1; }

static int clamp_bytes(int v, int def) { return v < 0 || v > KNOB_BYTES_MAX ? def : v; } /* -1 (auto) stays the default */

void kern_knobs_set(const kern_knobs *k) {
    kern_knobs d = kern_knobs_default(), n = *k;
    if (n.isa < -1 || n.isa > KERN_ISA_NEON_I8MM) n.isa = -1;
    if (n.threads < 0 || n.threads > 256) n.threads = 0;
    if (n.qamx_min < 1) n.qamx_min = 1;
    n.amx_pf = clamp_bytes(n.amx_pf, d.amx_pf);
    n.qpack_pf = clamp_bytes(n.qpack_pf, d.qpack_pf);
    n.qpack_pf2 = clamp_bytes(n.qpack_pf2, d.qpack_pf2);
    if (n.bf16dp < -1 || n.bf16dp > 1) n.bf16dp = -1;
    n.bf16_pf = n.bf16_pf ? 1 : 0;
    if (n.qpack_mix < -1 || n.qpack_mix > 1) n.qpack_mix = -1;
    n.mm_guided = n.mm_guided ? 1 : 0;
    n.qpack_pair = n.qpack_pair ? 1 : 0;
    n.avxvnni = n.avxvnni ? 1 : 0;
    n.bf16x = n.bf16x ? 1 : 0;
    if (g_qact_pinned) n.qact_f32 = g_knobs.qact_f32;
    g_knobs = n;
    if (!g_isa_pinned) cpu_knobs_changed(); /* a forced path applies now; cpu_isa_set's choice stays */
}

const kern_knobs *kern_knobs_get(void) { return &g_knobs; }
