/* backend.h — the boundary between the model layer and the hardware: memory and the ops a forward
 * needs, as one table of functions per backend (docs/architecture.md, "The backend interface").
 *
 * The model layer decides *what* to compute (which op for which layer, in which order, on which
 * rows); a backend decides *how* (kernels, threads, scratch, repacked weights, tuning knobs). The
 * model layer never calls a CPU kernel and never dereferences backend memory: it allocates buffers
 * here, passes their addresses (be_buf_addr) to ops, and moves bytes in and out with upload /
 * download. Today the CPU backend (src/backend/cpu/) is the only one; its memory is host memory
 * (caps.host_memory = 1), which lets the model layer hand caller-owned host arrays (logits, hidden
 * rows) straight to ops instead of staging them.
 *
 * Every op works on R rows and guarantees row invariance: row t's result depends only on row t's
 * inputs (and, for attention / GDN, on its sequence's earlier positions), with the same arithmetic
 * whatever R is and whatever other rows share the call. That is what makes prefill ≡ decode and,
 * later, a batch ≡ its sequences run alone (DESIGN.md §3, tests/unit/test_rows.c). */
#ifndef MTPLX_BACKEND_BACKEND_H
#define MTPLX_BACKEND_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "../base/err.h"
#include "weight.h"

typedef struct be_backend be_backend;
typedef struct be_buf be_buf;             /* opaque: memory owned by one backend */
typedef struct be_moe_scratch be_moe_scratch; /* opaque: a backend's MoE working buffers */

/* What a backend offers; read by the model layer to choose between equivalent code paths. */
typedef struct {
    int host_memory;   /* 1: backend addresses are host addresses, and ops may read/write
                          caller-owned host arrays directly (the CPU backend) */
    int logits_top;    /* 1: a forward whose caller needs only each row's best logits
                          (fwd_request.logits_top) selects them with the logits_top op and downloads
                          those (a device backend); 0: it returns whole rows */
    int logits_top_min_vocab; /* with logits_top: only for vocabularies of at least this many ids (under
                                 it, selecting costs more than downloading whole rows) */
    int prefill_rows;  /* rows of a prefill chunk in a standalone model state (run, bench, logits):
                          its scratch holds this many rows; and the scheduler's default chunk for a
                          lone prompt (serve). Chunking never changes a row's bits */
} be_caps;

/* One product of be_matmul_n: y[t·ldy + r] = Σ_c x[t·ldx + c] · w[r][c]. */
typedef struct {
    float *y;
    int ldy;
    const be_weight *w;
} be_mm_out;

#define BE_MM_N_MAX 8

/* The most logits per row be_ops.logits_top selects (fwd_request.logits_top). */
#define BE_TOP_MAX 64

/* Positions of one sequence in one attention layer's KV cache, in pages of page_size positions.
 * k and v are the layer's page pools in backend memory: page p, head h starts at
 * k + ((size_t)p · heads + h) · page_size · k_width (v likewise with v_width); pages[i] (a HOST array,
 * a device backend uploads it) is the pool page holding positions i·page_size .. (i+1)·page_size - 1.
 * A page may be shared with other sequences for reading; the model layer makes every page an op
 * writes into private first (docs/architecture.md, "The sequence pool"). */
typedef struct {
    float *k, *v;
    const int32_t *pages;
    int n_pages;       /* entries of pages; positions < n_pages · page_size are addressable */
    int page_size;     /* a power of two, a multiple of 4 */
} be_seq_kv;

/* Gated full attention of R rows (Qwen3.5 / Qwen3 / Llama). The projections are already in `big`:
 * row t at big + t·ldb holds q (nH heads of q_stride floats: Dh of query, then Dh of gate when
 * gated) at 0, k (nKV·Dh) at k_off, v (nKV·Dh) at v_off; the op writes row t's attention output
 * (nH·Dh, gated when `gated`) at att_off. Steps: per-head RMSNorm of q and k (when q_norm / k_norm),
 * RoPE of the first rotary_dim dims (NeoX halves, cos/sin multiplied by rope_factor), K/V of every row
 * written at positions pos0..pos0+R-1, then row t attends causally to positions 0..pos0+t. The query
 * and key parts of `big` are unspecified afterwards (normalised and rotated in place, or left as they
 * were when a backend does that in its own memory); v and the gates are left as they were. */
typedef struct {
    float *big;
    int ldb, q_stride, k_off, v_off, att_off;
    int n_heads, n_kv_heads, head_dim, rotary_dim, gated;
    const float *inv_freq;   /* [rotary_dim/2] */
    float rope_factor;       /* YaRN attention factor (1 = none) */
    const float *q_norm, *k_norm; /* [Dh] or NULL */
    float eps, scale;
} be_attn_args;

/* DeepSeek-V3 multi-head latent attention of R rows after its projections. Row t of `rows` (stride
 * ldr) holds the queries at q_off (nH heads of Dn+Dr), the compressed kv at ckv_off (its last Dr
 * floats are the shared rope key), kv_b's output at kvb_off (per head Dn nope-key then Dv value);
 * the op writes nH·Dv outputs at att_off. RoPE (interleaved pairs when `interleave`) on the rope
 * parts, K/V written at pos0.., causal attention with `scale`. */
typedef struct {
    float *rows;
    int ldr, q_off, ckv_off, kvb_off, att_off;
    int n_heads, nope_dim, rope_dim, v_dim, kv_lora, interleave;
    const float *inv_freq;
    float rope_factor, scale;
} be_mla_args;

/* Gated DeltaNet recurrence of R rows of one layer, after the input projections and the causal conv.
 * Row t of `big` (stride ldb) holds z (Hv·Dv) at 0, b (Hv) at b_off, a (Hv) at a_off, the conv
 * output u = [q | k | v] at u_off; the op writes the gated-RMSNorm output y (Hv·Dv) at y_off. Per
 * row: q, k L2-normalised (q also × Dk^-½) into qn / kn ([R][Hk·Dk]); per value head
 * beta = sigmoid(b), g = exp(neg_A · softplus(a + dt_bias)), the delta rule S <- g·S + β(v − g·S k)kᵀ,
 * y = S q, then y = rmsnorm(y)·norm·silu(z). The start state is src, the rows' states go to dst
 * (may equal src). With tape_g / tape_d non-NULL, every row's decay and innovation are recorded
 * for be_gdn_replay (kn is then the key tape). */
typedef struct {
    float *big;
    int ldb, b_off, a_off, u_off, y_off;
    int Hk, Hv, Dk, Dv;
    const float *neg_A, *dt_bias, *norm; /* [Hv], [Hv], [Dv] */
    float eps;
    const float *src;        /* [Hv][Dv][Dk] start state */
    float *dst;              /* [Hv][Dv][Dk] */
    float *qn, *kn;          /* [R][Hk·Dk] */
    float *tape_g;           /* [R][Hv] or NULL */
    float *tape_d;           /* [R][Hv·Dv] or NULL */
} be_gdn_args;

/* One sequence's rows in a batched attention call (be_ops.attention_seqs): rows r0 .. r0+R-1 of the
 * call's `big` are its positions pos0 .. pos0+R-1, its K/V live in kv. */
typedef struct {
    be_seq_kv kv;
    int pos0, r0, R;
} be_attn_seq;

/* The causal conv in front of a batched Gated DeltaNet call (be_ops.gdn_seqs): depthwise, kernel kc
 * over C = 2·Hk·Dk + Hv·Dv channels (the pre-conv q | k | v), then SiLU. */
typedef struct {
    const float *w;          /* [C][kc] */
    int C, kc;
    int rows_in_win;         /* 1: each sequence's R pre-conv rows already sit in its window after the
                                conv state (stride C); 0: they are at big + (r0+t)·ldb + u_off */
} be_conv_args;

/* One sequence's rows in a batched Gated DeltaNet call: the per-sequence fields of be_gdn_args
 * (start / end state, q / k rows, tapes), its rows, its conv state and window. */
typedef struct {
    int r0, R;               /* its rows of the call's `big` */
    float *conv;             /* [kc-1][C] conv state (the last kc-1 pre-conv rows), advanced by R rows */
    float *win;              /* [(kc-1) + R][C] conv window: conv state, then the R pre-conv rows */
    int keep_win;            /* 1: win must hold the whole window afterwards (a capture tape); 0: win is
                                scratch, possibly shared by several sequences of the call */
    const float *src;        /* [Hv][Dv][Dk] start state */
    float *dst;              /* [Hv][Dv][Dk] (may equal src) */
    float *qn, *kn;          /* [R][Hk·Dk] */
    float *tape_g, *tape_d;  /* [R][Hv], [R][Hv·Dv] or NULL */
} be_gdn_seq;

/* One sequence's GDN layer in a batched commit (be_ops.gdn_commit): after a capturing gdn / gdn_seqs
 * call of more rows than the sequence keeps, its conv state and recurrent state of the first `keep`
 * rows. */
typedef struct {
    float *conv;             /* [kc-1][C] conv state, overwritten with conv_src */
    const float *conv_src;   /* [kc-1][C]: the capture's window from row keep on */
    float *dst;              /* [Hv][Dv][Dk] state after all rows, overwritten (gdn_replay's dst) */
    const float *start;      /* [Hv][Dv][Dk] state before the call */
    const float *tape_k, *tape_g, *tape_d; /* the call's tapes: [R][Hk·Dk], [R][Hv], [R][Hv·Dv] */
    int keep;                /* rows kept, >= 1 */
} be_gdn_commit;

/* The ops table. Each backend fills one (src/backend/<name>/); unused ops may not be NULL. Sizes
 * are in floats unless named bytes. Op arguments that are float * point into this backend's memory
 * (be_buf_addr), except where a comment says host. */
typedef struct {
    const char *name;
    void (*destroy)(be_backend *be);                      /* frees the backend and all it owns */

    /* ---- memory ---- */
    /* A buffer of `bytes` (zeroed when zero != 0). Returns 0 and *out, or an error naming `what`. */
    int (*buf_alloc)(be_backend *be, size_t bytes, int zero, const char *what, be_buf **out, mtplx_err *err);
    void (*buf_free)(be_backend *be, be_buf *b);          /* NULL is fine */
    void *(*buf_addr)(const be_buf *b);                   /* backend address of byte 0 */
    void (*upload)(be_backend *be, void *dst, const void *host_src, size_t bytes);
    void (*download)(be_backend *be, void *host_dst, const void *src, size_t bytes);
    void (*copy)(be_backend *be, void *dst, const void *src, size_t bytes);  /* within backend memory */
    void (*fill_zero)(be_backend *be, void *dst, size_t bytes);

    /* ---- load time ---- */
    /* Derive this backend's copy of w (repack / upload); w's private fields point at it. The copy is
     * owned by the backend and freed with it. Returns 0 or an error. */
    int (*weight_prepare)(be_backend *be, be_weight *w, mtplx_err *err);
    /* weight_prepare of n weights that belong together (a MoE layer's routed experts), which a
     * backend may keep as one unit (the CPU: one pack-cache file). NULL: weight_prepare each. */
    int (*weights_prepare)(be_backend *be, be_weight *const *ws, int n, mtplx_err *err);
    /* Whether to prepare (weight_prepare) a checkpoint's routed experts too: quant_bytes of them
     * MLX-quantized (values, scales, biases), dense_bytes bf16/f16/f32, in file_bytes of tensors. A
     * copy of every expert doubles what a MoE checkpoint occupies; 0 leaves them in the checkpoint's
     * layout (slower kernels) and writes the reason, for the user, into note[note_cap]. NULL: always. */
    int (*routed_copies)(be_backend *be, uint64_t quant_bytes, uint64_t dense_bytes, uint64_t file_bytes, char *note,
                         size_t note_cap);
    size_t (*weight_bytes)(const be_backend *be);        /* bytes held by prepared copies */
    /* Make every forward of up to `rows` rows through weights of at most max_cols inputs that the
     * calling thread runs allocation-free (thread-local kernel scratch). Called at state creation;
     * fails here rather than in a forward. */
    int (*reserve_rows)(be_backend *be, int rows, int max_cols, mtplx_err *err);
    /* Floats of attention scratch a state with `capacity` positions and RoPE tables of rotary_dim
     * floats passes to attention / mla. */
    size_t (*attn_scratch_floats)(const be_backend *be, int capacity, int rotary_dim);
    int (*moe_scratch_new)(be_backend *be, int rows, int hidden, int inter, int n_experts, int top_k,
                           be_moe_scratch **out, mtplx_err *err);
    void (*moe_scratch_free)(be_backend *be, be_moe_scratch *s);

    /* ---- row ops ---- */
    /* y = x · Wᵀ for R rows (y may be host memory when caps.host_memory). Row-invariant. */
    void (*matmul)(be_backend *be, float *y, int ldy, const float *x, int ldx, int R, const be_weight *w);
    /* n <= BE_MM_N_MAX products of the same x, bit-identical to n matmul calls. */
    void (*matmul_n)(be_backend *be, const be_mm_out *outs, int n, const float *x, int ldx, int R);
    /* Row tokens[t] (host array) of w, dequantized, into y + t·ldy. */
    void (*embed_rows)(be_backend *be, float *y, int ldy, const be_weight *w, const int32_t *tokens, int R);
    /* y_t = x_t / sqrt(mean(x_t²) + eps) ⊙ w over n dims (w as stored: callers fold 1 + w at load). */
    void (*rmsnorm_rows)(be_backend *be, float *y, int ldy, const float *x, int ldx, const float *w, int n, int R,
                         float eps);
    void (*add)(be_backend *be, float *x, const float *o, size_t n);   /* x += o */
    /* y_t = silu(g_t) ⊙ u_t over n dims (rows of stride ld; y may equal g). */
    void (*swiglu_rows)(be_backend *be, float *y, const float *g, const float *u, int ld, int n, int R);
    /* Causal depthwise conv of kernel kc + SiLU: y_t = silu(Σ_j w[c][j] · x[t + j][c]) where x holds
     * kc-1 rows of history then the R new rows (stride ldx), C channels. */
    void (*conv1d_silu)(be_backend *be, float *y, int ldy, const float *x, int ldx, const float *w, int C, int kc,
                        int R);

    /* ---- fused row ops: OPTIONAL (NULL: the wrappers be_add_rmsnorm_rows / be_rmsnorm_matmul_n /
     * be_swiglu_matmul / be_embed_norm_pair_rows below run their steps as the separate ops above). Bit-identical to those steps;
     * a backend fuses them to save passes over the rows and hand-offs (a prefill chunk's row ops are
     * memory-bound). ---- */
    /* x += o (o NULL: no add), then y = rmsnorm(x) ⊙ w: add, then rmsnorm_rows; R rows of n floats,
     * all strides n. */
    void (*add_rmsnorm_rows)(be_backend *be, float *x, const float *o, float *y, const float *w, int n, int R,
                             float eps);
    /* add_rmsnorm_rows(x, o, a, w, H, R, eps), then matmul_n(outs, n_out, a, H, R). */
    void (*rmsnorm_matmul_n)(be_backend *be, const be_mm_out *outs, int n_out, float *x, const float *o, float *a,
                             const float *w, int H, int R, float eps);
    /* swiglu_rows(g, g, u, ld, n, R), then matmul(y, ldy, g, ld, R, w). */
    void (*swiglu_matmul)(be_backend *be, float *y, int ldy, float *g, const float *u, int ld, int n, int R,
                          const be_weight *w);
    /* An MTP layer's input, y_t = [rmsnorm(embedding of tokens[t]) ⊙ we | rmsnorm(h_t) ⊙ wh] (y rows ldy
     * apart, 2n wide; h rows ldh apart): embed_rows(a, n, emb, tokens, R), then rmsnorm_rows(y, ldy, a,
     * n, we, n, R) and rmsnorm_rows(y + n, ldy, h, ldh, wh, n, R). tokens: host array; a: R rows of n
     * floats the embeddings may be staged in (their contents after the call are unspecified). */
    void (*embed_norm_pair_rows)(be_backend *be, float *y, int ldy, float *a, const be_weight *emb,
                                 const int32_t *tokens, const float *h, int ldh, const float *we, const float *wh,
                                 int n, int R, float eps);

    /* ---- sequence ops ---- */
    void (*attention)(be_backend *be, const be_attn_args *a, const be_seq_kv *kv, int pos0, int R, float *scratch);
    void (*mla)(be_backend *be, const be_mla_args *a, const be_seq_kv *kv, int pos0, int R, float *scratch);
    void (*gdn)(be_backend *be, const be_gdn_args *a, int R);
    /* The attention of n sequences' rows of one layer, bit-identical to one `attention` call per
     * sequence in its outputs and K/V (a->big is row 0 of the call; seqs[i] says where sequence i's rows
     * and KV are; big's queries and keys unspecified afterwards, as attention's). A device
     * backend runs it as a fixed number of launches whatever n is. */
    void (*attention_seqs)(be_backend *be, const be_attn_args *a, const be_attn_seq *seqs, int n, float *scratch);
    /* `mla` for n sequences' rows of one layer, as attention_seqs (a->rows is row 0 of the call). */
    void (*mla_seqs)(be_backend *be, const be_mla_args *a, const be_attn_seq *seqs, int n, float *scratch);
    /* The Gated DeltaNet of n sequences' rows of one layer: per sequence, its conv window assembled
     * (conv state, then its pre-conv rows), conv1d + SiLU into u at big + (r0+t)·ldb + u_off, the conv
     * state advanced by R rows, then the recurrence as `gdn` with the sequence's states and tapes
     * (a's per-sequence fields src .. tape_d are not read). Bit-identical to the per-sequence calls
     * (copy, conv1d_silu, copy, gdn); a device backend runs it as a fixed number of launches. */
    void (*gdn_seqs)(be_backend *be, const be_gdn_args *a, const be_conv_args *cv, const be_gdn_seq *seqs, int n);
    /* Rebuild the state after the first `keep` rows of a capturing gdn call: dst starts as the state
     * after all rows and is overwritten from start (the state before the call) with the taped
     * decays / innovations / keys — bit-identical to a gdn call of `keep` rows. */
    void (*gdn_replay)(be_backend *be, float *dst, const float *start, const float *tape_k, const float *tape_g,
                       const float *tape_d, int keep, int Hk, int Hv, int Dk, int Dv);
    /* n GDN commits (items of any sequences and layers of one model: each names its own states and
     * tapes): per item, copy conv_floats floats conv_src -> conv, then gdn_replay(dst, start, tapes,
     * keep). Bit-identical to those calls (be_gdn_commit_loop); a device backend runs it as one launch
     * whatever n is (docs/architecture.md, "The sequence pool"). */
    void (*gdn_commit)(be_backend *be, const be_gdn_commit *items, int n, size_t conv_floats, int Hk, int Hv, int Dk,
                       int Dv);
    /* The k (1..BE_TOP_MAX, k < V) best-ranked logits of each of R rows (row t at x + t·ldx, V floats;
     * larger first, lower id on ties; NaN never ranked) into out + t·(2k+2) int32 (backend memory):
     * k ids (-1 past the ranked ones), k values (float bits), then the row's first index holding NaN
     * or +inf (-1: none) and that value's bits. What a sampler with top_k k (greedy: 1) and no
     * penalties needs of a row, so a device backend downloads 2k+2 words, not V floats. */
    void (*logits_top)(be_backend *be, int32_t *out, const float *x, int ldx, int R, int V, int k);
    /* Routed MoE block (router, top-k, experts, shared expert): out[R][H] from x[R][H]. */
    void (*moe)(be_backend *be, float *out, int ldo, const float *x, int ldx, int R, const moe_weights *w,
                be_moe_scratch *s);
} be_ops;

/* A backend instance: its ops, capabilities and private state. */
struct be_backend {
    const be_ops *ops;
    be_caps caps;
    void *impl;        /* the backend's own context */
};

/* Create the backend named `name` ("cpu"; NULL = the default) with settings from the environment,
 * read once here (docs/architecture.md, "Knobs"). Returns 0 and *out, or an error. */
int be_create(const char *name, be_backend **out, mtplx_err *err);
void be_free(be_backend *be);

/* attention_seqs, mla_seqs and gdn_seqs as a loop over the backend's per-sequence ops (attention;
 * mla; copy, conv1d_silu, gdn): the CPU backend's implementation, and a device backend's reference path. */
void be_attention_seqs_loop(be_backend *be, const be_attn_args *a, const be_attn_seq *seqs, int n, float *scratch);
void be_mla_seqs_loop(be_backend *be, const be_mla_args *a, const be_attn_seq *seqs, int n, float *scratch);
void be_gdn_seqs_loop(be_backend *be, const be_gdn_args *a, const be_conv_args *cv, const be_gdn_seq *seqs, int n);
/* logits_top on host memory (the CPU backend's, and the reference of a device backend's). */
void be_logits_top_host(be_backend *be, int32_t *out, const float *x, int ldx, int R, int V, int k);
/* gdn_commit as a loop over copy and gdn_replay: the CPU backend's implementation. */
void be_gdn_commit_loop(be_backend *be, const be_gdn_commit *items, int n, size_t conv_floats, int Hk, int Hv, int Dk,
                        int Dv);

/* The fused row ops (be_ops.add_rmsnorm_rows, rmsnorm_matmul_n, swiglu_matmul, embed_norm_pair_rows):
 * the backend's op, or its steps as separate ops when the backend has none. */
void be_add_rmsnorm_rows(be_backend *be, float *x, const float *o, float *y, const float *w, int n, int R, float eps);
void be_rmsnorm_matmul_n(be_backend *be, const be_mm_out *outs, int n_out, float *x, const float *o, float *a,
                         const float *w, int H, int R, float eps);
void be_swiglu_matmul(be_backend *be, float *y, int ldy, float *g, const float *u, int ld, int n, int R,
                      const be_weight *w);
void be_embed_norm_pair_rows(be_backend *be, float *y, int ldy, float *a, const be_weight *emb, const int32_t *tokens,
                             const float *h, int ldh, const float *we, const float *wh, int n, int R, float eps);

/* Check a router description for impossible values (K > E, E not divisible by n_group, ...), the
 * same for every backend. Returns 0 or MTPLX_EINVAL with a message. */
int be_moe_router_check(const moe_router *r, mtplx_err *err);
/* The CPU backend's directory of repacked quantized weights (MTPLX_PACK_CACHE, else
 * $XDG_CACHE_HOME/mtplx/qpack or ~/.cache/mtplx/qpack) into out[cap]; "" when it is off. */
void be_cpu_pack_cache_dir(char *out, size_t cap);
/* Check the backends' settings in the environment (MTPLX_DEVICE and the CPU backend's knobs) as
 * be_create would read them, without making a backend. Returns 0, or MTPLX_EINVAL naming the first
 * variable whose value is not of its kind. */
int be_env_check(mtplx_err *err);
/* ops->weights_prepare, or weight_prepare of each where the backend has none. Returns 0 or an error. */
int be_weights_prepare(be_backend *be, be_weight *const *ws, int n, mtplx_err *err);

/* Thin inline wrappers so model code reads like the math. */
static inline void *be_buf_addr(const be_backend *be, const be_buf *b) { return be->ops->buf_addr(b); }
static inline void be_matmul(be_backend *be, float *y, int ldy, const float *x, int ldx, int R, const be_weight *w) {
    be->ops->matmul(be, y, ldy, x, ldx, R, w);
}
static inline void be_matmul_n(be_backend *be, const be_mm_out *o, int n, const float *x, int ldx, int R) {
    be->ops->matmul_n(be, o, n, x, ldx, R);
}
static inline void be_rmsnorm_rows(be_backend *be, float *y, int ldy, const float *x, int ldx, const float *w,
                                   int n, int R, float eps) {
    be->ops->rmsnorm_rows(be, y, ldy, x, ldx, w, n, R, eps);
}
static inline void be_add(be_backend *be, float *x, const float *o, size_t n) { be->ops->add(be, x, o, n); }
static inline void be_copy(be_backend *be, void *dst, const void *src, size_t bytes) {
    be->ops->copy(be, dst, src, bytes);
}

#endif
