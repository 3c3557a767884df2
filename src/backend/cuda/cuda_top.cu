/* cuda_top.cu — the sampler's top logits on the GPU (be_ops.logits_top; docs/architecture.md, "The
 * CUDA backend"; docs/speculative.md, "Rows as lists").
 *
 * A row's k best logits (larger value first, lower id on ties) and its first NaN / +inf, in the
 * layout of backend.h: ids[k], value bits[k], then the first bad index and its bits (-1 / 0: none).
 *
 * Each logit and its id become one 64-bit key that orders like the sampler's rank, so the k best are
 * the k largest keys, and keys are distinct: the answer is one set whatever order the keys are met in
 * and however the row is cut. The row is cut into slices of TOP_SLICE ids, one block each (a 248,320-id
 * row is 61 blocks, so the GPU reads it at full width; one block a row walked it in ~0.65 ms); a block
 * keeps its slice's k largest keys, then one block a row selects the k largest of the slices' lists
 * (a second level of merges first when those lists hold more than TOP_SLICE keys); a row of at most
 * 2 · TOP_SLICE ids (a tiny model's 8,192) is one block of 16 keys a thread instead, one launch where a
 * draft step's chain had two (k_top_row). A block selects by radix select over the keys' bytes, from
 * the top (top_select). Bits and order of the result do not depend on the rows beside it, the slice
 * size or the launch (DESIGN.md §3). */
#include "cuda_internal.cuh"

#include <limits.h>
#include <math.h>
#include <string.h>

#define TOP_THREADS 512
#define TOP_PER 8                         /* keys a thread holds */
#define TOP_SLICE (TOP_THREADS * TOP_PER) /* keys a block selects from: 4,096 */

/* A logit and its id as one key that orders like the sampler's rank (larger value first, lower id on
 * ties; -0 ties with +0 as in a float compare): the value's bits mapped to an unsigned order above,
 * the complemented id below. Never 0 (0 marks "no key"). */
__device__ __forceinline__ unsigned long long top_key(float v, int id) {
    unsigned u = v == 0.0f ? 0u : __float_as_uint(v);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((unsigned long long)u << 32) | (unsigned)~(unsigned)id;
}

/* The id of a nonzero key. */
__device__ __forceinline__ int top_id(unsigned long long key) { return (int)~(unsigned)(key & 0xffffffffull); }

/* What a block's threads share while they select. */
struct top_shared {
    unsigned hist[256];                 /* keys matching the prefix, by their next byte */
    unsigned long long sel[BE_TOP_MAX]; /* the selected keys, unordered */
    unsigned before, inbin;             /* keys in the bins above the chosen one / in it */
    int bin;                            /* the chosen bin; -1: fewer keys than wanted */
    int n;                              /* keys in sel */
    int bad;                            /* the first NaN / +inf index seen (INT_MAX: none) */
};

/* One pass of top_select: counts the keys matching pre under mask by their byte at shift, then warp 0
 * finds the bin holding the need-th largest (lane l scans bins 255 - 8l down to 248 - 8l, a warp
 * prefix sum orders the lanes). */
template <int PER>
__device__ void top_pass(const unsigned long long key[PER], unsigned long long pre, unsigned long long mask, int shift,
                         int need, top_shared &s) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) s.hist[i] = 0;
    __syncthreads();
#pragma unroll
    for (int u = 0; u < PER; u++)
        if (key[u] && (key[u] & mask) == pre) atomicAdd(&s.hist[(key[u] >> shift) & 255], 1u);
    __syncthreads();
    if (threadIdx.x < 32) {
        int lane = threadIdx.x;
        unsigned c[8], sum = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) sum += c[i] = s.hist[255 - 8 * lane - i];
        unsigned incl = sum;
        for (int off = 1; off < 32; off <<= 1) {
            unsigned y = __shfl_up_sync(0xffffffffu, incl, off);
            if (lane >= off) incl += y;
        }
        unsigned above = incl - sum, want = (unsigned)need;
        if (above < want && want <= incl) { /* one lane: the bin is in its eight */
            for (int i = 0; i < 8; i++) {
                if (above + c[i] >= want) {
                    s.bin = 255 - 8 * lane - i, s.before = above, s.inbin = c[i];
                    break;
                }
                above += c[i];
            }
        }
        if (lane == 31 && incl < want) s.bin = -1;
    }
    __syncthreads();
}

/* The k largest nonzero keys among the block's TOP_THREADS · PER (key[] of each thread; 0 = none), sorted
 * descending into out[0..k) (shared or global), 0 past the last when fewer than k are nonzero. Radix
 * select: a pass fixes the next byte of the k-th largest key (top_pass); it stops when the bin
 * holding it is taken whole, at the latest after 8 passes (a bin of one key). Then every key at or
 * above the prefix is one of the k, and each is ranked by counting the larger ones. */
template <int PER>
__device__ void top_select(const unsigned long long key[PER], int k, unsigned long long *out, top_shared &s) {
    unsigned long long pre = 0, mask = 0;
    int need = k; /* keys still to take among those matching pre under mask */
    for (int shift = 56; shift >= 0; shift -= 8) {
        top_pass<PER>(key, pre, mask, shift, need, s);
        int bin = s.bin;
        if (bin < 0) break; /* fewer than k keys in all (only the first pass): take them all */
        need -= (int)s.before;
        pre |= (unsigned long long)bin << shift;
        mask |= 255ull << shift;
        if ((int)s.inbin == need) break;
    }
    if (threadIdx.x == 0) s.n = 0;
    __syncthreads();
#pragma unroll
    for (int u = 0; u < PER; u++)
        if (key[u] && (key[u] & mask) >= pre) s.sel[atomicAdd(&s.n, 1)] = key[u];
    __syncthreads();
    int n = s.n;
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
        if (i >= n) {
            out[i] = 0;
            continue;
        }
        unsigned long long me = s.sel[i];
        int r = 0;
        for (int j = 0; j < n; j++) r += s.sel[j] > me;
        out[r] = me;
    }
}

/* The smallest of the block's `mine` into s.bad (s.bad already INT_MAX and a barrier since). */
__device__ void top_bad_min(int mine, top_shared &s) {
    for (int off = 16; off > 0; off >>= 1) mine = min(mine, __shfl_xor_sync(0xffffffffu, mine, off));
    if ((threadIdx.x & 31) == 0 && mine != INT_MAX) atomicMin(&s.bad, mine);
}

/* This thread's PER keys of logits [base, base + TOP_THREADS · PER) of row v (V ids; 0 past V or for a
 * NaN), and the smallest NaN / +inf index it met into *bad. Every logit is loaded before any is keyed. */
template <int PER>
__device__ __forceinline__ void top_keys(unsigned long long key[PER], int *bad, const float *v, int base, int V) {
    float f[PER];
#pragma unroll
    for (int u = 0; u < PER; u++) {
        int j = base + u * TOP_THREADS + threadIdx.x;
        f[u] = j < V ? v[j] : 0.f;
    }
#pragma unroll
    for (int u = 0; u < PER; u++) {
        int j = base + u * TOP_THREADS + threadIdx.x;
        key[u] = 0;
        if (j >= V) continue;
        if (!(f[u] < INFINITY) && j < *bad) *bad = j;
        if (!isnan(f[u])) key[u] = top_key(f[u], j);
    }
}

/* A row's answer from its k best keys (sorted, 0 past the last) and its first bad index (INT_MAX: none):
 * o[0..k) ids (-1 past the last), o[k..2k) their logits' bits read from v, o[2k], o[2k + 1] the bad
 * index and its bits (-1 / 0: none). */
__device__ __forceinline__ void top_answer(int32_t *o, const unsigned long long *best, int k, const float *v, int b) {
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
        int id = best[i] ? top_id(best[i]) : -1;
        o[i] = id;
        o[k + i] = id >= 0 ? __float_as_int(v[id]) : 0;
    }
    if (threadIdx.x == 0) {
        o[2 * k] = b == INT_MAX ? -1 : b;
        o[2 * k + 1] = b == INT_MAX ? 0 : __float_as_int(v[b]);
    }
}

/* The answer row o (2k + 2 words, just written by this block's threads) also into the mapped host
 * row m, then flag = seq once every word is there: each thread fences its own writes to the system
 * before the barrier, so thread 0's flag store is ordered after all of them (top_mirror). */
__device__ __forceinline__ void top_mirror_row(int32_t *m, unsigned *flag, unsigned seq, const int32_t *o, int k) {
    __syncthreads(); /* o's words written by the block */
    for (int i = threadIdx.x; i < 2 * k + 2; i += blockDim.x) m[i] = o[i];
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) *(volatile unsigned *)flag = seq;
}

/* Block (c, t): slice c of row t — its k largest keys into part[(t·nsl + c)·k ..], its first NaN /
 * +inf index into pbad[t·nsl + c] (INT_MAX: none). A thread loads its TOP_PER logits before it keys any. */
__global__ void __launch_bounds__(TOP_THREADS)
    k_top_slices(unsigned long long *part, int *pbad, const float *x, int ldx, int V, int k, int nsl) {
    CU_PDL_ENTRY();
    __shared__ top_shared s;
    if (threadIdx.x == 0) s.bad = INT_MAX;
    const float *v = x + (size_t)blockIdx.y * ldx;
    int bad = INT_MAX;
    unsigned long long key[TOP_PER];
    top_keys<TOP_PER>(key, &bad, v, blockIdx.x * TOP_SLICE, V);
    __syncthreads(); /* s.bad set */
    top_bad_min(bad, s);
    size_t slot = (size_t)blockIdx.y * nsl + blockIdx.x;
    top_select<TOP_PER>(key, k, part + slot * k, s); /* its barriers order the atomicMin before the read */
    if (threadIdx.x == 0) pbad[slot] = s.bad;
}

/* Block (b, t): the k largest of keys [b·TOP_SLICE, (b + 1)·TOP_SLICE) of row t's n in src (rows n
 * apart). With out == NULL they go to dst[(t·nblk + b)·k ..] as a list for the next level; otherwise
 * (one block a row) they are row t's answer: out[t·(2k + 2) ..] gets the ids, the logits' bits read
 * from x, and the first NaN / +inf of the row's nbad slices in pbad. */
__global__ void __launch_bounds__(TOP_THREADS)
    k_top_merge(unsigned long long *dst, const unsigned long long *src, int n, int k, int nblk, int32_t *out,
                const float *x, int ldx, const int *pbad, int nbad, int32_t *mir, unsigned *flags, unsigned seq) {
    CU_PDL_ENTRY();
    __shared__ top_shared s;
    __shared__ unsigned long long best[BE_TOP_MAX];
    if (threadIdx.x == 0) s.bad = INT_MAX;
    const unsigned long long *r = src + (size_t)blockIdx.y * n;
    unsigned long long key[TOP_PER];
#pragma unroll
    for (int u = 0; u < TOP_PER; u++) {
        int j = blockIdx.x * TOP_SLICE + u * TOP_THREADS + threadIdx.x;
        key[u] = j < n ? r[j] : 0ull;
    }
    if (!out) {
        top_select<TOP_PER>(key, k, dst + ((size_t)blockIdx.y * nblk + blockIdx.x) * k, s);
        return;
    }
    int bad = INT_MAX;
    for (int i = threadIdx.x; i < nbad; i += blockDim.x) bad = min(bad, pbad[(size_t)blockIdx.y * nbad + i]);
    __syncthreads(); /* s.bad set */
    top_bad_min(bad, s);
    top_select<TOP_PER>(key, k, best, s);
    __syncthreads();
    const size_t at = (size_t)blockIdx.y * (2 * k + 2);
    top_answer(out + at, best, k, x + (size_t)blockIdx.y * ldx, s.bad);
    if (mir) top_mirror_row(mir + at, flags + blockIdx.y, seq, out + at, k);
}

/* Block t: the whole of row t (V <= TOP_THREADS · PER) in one block, its answer written as k_top_merge's
 * final level writes it — one launch instead of slices and a merge for a small vocabulary (8,192 ids:
 * PER 16), so a tiny model's head is one link shorter. The same set of keys, so the same answer. */
template <int PER>
__global__ void __launch_bounds__(TOP_THREADS)
    k_top_row(int32_t *out, const float *x, int ldx, int V, int k, int32_t *mir, unsigned *flags, unsigned seq) {
    CU_PDL_ENTRY();
    __shared__ top_shared s;
    __shared__ unsigned long long best[BE_TOP_MAX];
    if (threadIdx.x == 0) s.bad = INT_MAX;
    const float *v = x + (size_t)blockIdx.y * ldx;
    int bad = INT_MAX;
    unsigned long long key[PER];
    top_keys<PER>(key, &bad, v, 0, V);
    __syncthreads(); /* s.bad set */
    top_bad_min(bad, s);
    top_select<PER>(key, k, best, s);
    __syncthreads();
    const size_t at = (size_t)blockIdx.y * (2 * k + 2);
    top_answer(out + at, best, k, v, s.bad);
    if (mir) top_mirror_row(mir + at, flags + blockIdx.y, seq, out + at, k);
}

/* Per-thread device buffer of the slices' lists and bad indexes (grown as needed). */
static void *top_buf(size_t bytes) {
    static thread_local void *buf = NULL;
    static thread_local size_t cap = 0;
    cu_scratch_grow(&buf, &cap, bytes, (size_t)1 << 20, "logits top lists");
    return buf;
}

/* ------------------------------------------------------------------ the mapped answer
 *
 * A draft step's chain ends with this op and a download of its few hundred bytes, and the host waits
 * on that download before it can draw the token that starts the next step. A copy-engine download
 * after the kernel and a stream synchronize add their own latency to that wait; instead, with
 * $MTPLX_CUDA_TOP_MAPPED (default on), the final-level kernel also writes the answer into pinned
 * host memory mapped into the device, and a flag a row (the call's sequence number) after it. The
 * download that follows (cu_download -> cu_top_mirror_take) spins on the flags, then copies the rows
 * out of that memory: the same bytes the device buffer holds. The copy is taken only by the first
 * download after the op, of the op's output, with no launch between (anything else: the usual path). */
#define TOP_MIRROR_BYTES ((size_t)64 << 10)          /* answers of at most this many bytes are mirrored */
#define TOP_MIRROR_ROWS ((int)(TOP_MIRROR_BYTES / 16)) /* rows it can hold (k = 1: 16 bytes a row) */

/* The calling thread's mapped answer. */
typedef struct {
    int32_t *h, *d;         /* answers: host address, and the device's address of the same memory */
    unsigned *hflag, *dflag; /* [TOP_MIRROR_ROWS] row flags, host / device address */
    int have;               /* 1: allocated; -1: mapped memory could not be had (never mirror) */
    unsigned seq;           /* the flag value of the last mirrored call */
    const int32_t *out;     /* that call's device output; NULL: nothing pending */
    size_t bytes;           /* its bytes */
    int rows;               /* its rows */
    long launches;          /* cu_launch_count() right after its launch */
} top_mirror;
static thread_local top_mirror t_mir;

/* Records that the call just launched mirrors its R rows of k at out (m NULL: not mirrored). */
static void top_mirror_note(top_mirror *m, const int32_t *out, int R, int k) {
    if (!m) return;
    m->out = out, m->rows = R, m->bytes = (size_t)R * (2 * k + 2) * 4;
    m->launches = cu_launch_count();
}

/* The mapped memory for an answer of R rows of k, or NULL (off, too large, or not available). */
static top_mirror *top_mirror_for(int R, int k) {
    top_mirror *m = &t_mir;
    m->out = NULL;
    if (!cu_set.top_mapped || (size_t)R * (2 * k + 2) * 4 > TOP_MIRROR_BYTES || m->have < 0) return NULL;
    if (!m->have) {
        void *h = NULL, *d = NULL;
        size_t fb = sizeof(unsigned) * TOP_MIRROR_ROWS;
        if (cudaHostAlloc(&h, TOP_MIRROR_BYTES + fb, cudaHostAllocMapped) != cudaSuccess ||
            cudaHostGetDevicePointer(&d, h, 0) != cudaSuccess) {
            cudaGetLastError();
            if (h) cudaFreeHost(h);
            m->have = -1;
            return NULL;
        }
        memset(h, 0, TOP_MIRROR_BYTES + fb);
        m->h = (int32_t *)h, m->d = (int32_t *)d;
        m->hflag = (unsigned *)((char *)h + TOP_MIRROR_BYTES), m->dflag = (unsigned *)((char *)d + TOP_MIRROR_BYTES);
        m->have = 1;
    }
    if (++m->seq == 0) m->seq = 1; /* 0 is the flags' initial value */
    return m;
}

int cu_top_mirror_take(void *dst, const void *src, size_t n) {
    top_mirror *m = &t_mir;
    const int32_t *out = m->out;
    m->out = NULL; /* the first download after the op takes it or drops it */
    if (!out || src != (const void *)out || n > m->bytes || cu_launch_count() != m->launches) return 0;
    for (long spins = 0;; spins++) {
        int r = 0;
        while (r < m->rows && ((volatile unsigned *)m->hflag)[r] == m->seq) r++;
        if (r == m->rows) break;
        if ((spins & 1023) == 1023) { /* a failed kernel never sets its flags: the stream says so */
            cudaError_t e = cudaStreamQuery(CU_STREAM);
            if (e == cudaErrorNotReady) continue;
            cu_check(e, "logits top (mapped answer)");
            for (r = 0; r < m->rows && ((volatile unsigned *)m->hflag)[r] == m->seq; r++) {
            }
            if (r < m->rows) cu_check(cudaErrorUnknown, "logits top (mapped answer): stream done, a row's flag unset");
            break;
        }
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    memcpy(dst, m->h, n);
    return 1;
}

/* Rows [t0, t0 + R) (R <= 65,535) of cu_logits_top: the slices, the merge levels while the lists
 * hold more than TOP_SLICE keys a row, the final merge. */
static void top_rows(int32_t *out, const float *x, int ldx, int R, int V, int k) {
    top_mirror *m = top_mirror_for(R, k);
    int32_t *mir = m ? m->d : NULL;
    unsigned *flags = m ? m->dflag : NULL, seq = m ? m->seq : 0;
    if (V <= 2 * TOP_SLICE && cu_set.top_row) { /* one block a row: $MTPLX_CUDA_TOP_ROW=0 keeps two levels */
        if (V <= TOP_SLICE)
            cu_launch(k_top_row<TOP_PER>, dim3(1, R), TOP_THREADS, 0, out, x, ldx, V, k, mir, flags, seq);
        else cu_launch(k_top_row<2 * TOP_PER>, dim3(1, R), TOP_THREADS, 0, out, x, ldx, V, k, mir, flags, seq);
        CU_LAUNCHED("logits top");
        top_mirror_note(m, out, R, k);
        return;
    }
    int nsl = (V + TOP_SLICE - 1) / TOP_SLICE;
    size_t n1 = (size_t)nsl * k, n2 = ((n1 + TOP_SLICE - 1) / TOP_SLICE) * (size_t)k;
    size_t keys = (size_t)R * (n1 + (n1 > TOP_SLICE ? n2 : 0));
    char *buf = (char *)top_buf(keys * sizeof(unsigned long long) + (size_t)R * nsl * sizeof(int));
    unsigned long long *a = (unsigned long long *)buf, *b = a + (size_t)R * n1;
    int *pbad = (int *)(buf + keys * sizeof(unsigned long long));
    cu_launch(k_top_slices, dim3(nsl, R), TOP_THREADS, 0, a, pbad, x, ldx, V, k, nsl);
    CU_LAUNCHED("logits top slices");
    int n = (int)n1;
    while (n > TOP_SLICE) { /* each level divides the keys by TOP_SLICE / k >= 64: never more than n2 */
        int nblk = (n + TOP_SLICE - 1) / TOP_SLICE;
        cu_launch(k_top_merge, dim3(nblk, R), TOP_THREADS, 0, b, (const unsigned long long *)a, n, k, nblk,
                  (int32_t *)NULL, x, ldx, (const int *)pbad, nsl, (int32_t *)NULL, (unsigned *)NULL, 0u);
        CU_LAUNCHED("logits top merge level");
        unsigned long long *t = a;
        a = b, b = t, n = nblk * k;
    }
    cu_launch(k_top_merge, dim3(1, R), TOP_THREADS, 0, (unsigned long long *)NULL, (const unsigned long long *)a,
              n, k, 1, out, x, ldx, (const int *)pbad, nsl, mir, flags, seq);
    CU_LAUNCHED("logits top");
    top_mirror_note(m, out, R, k);
}

void cu_logits_top(be_backend *be, int32_t *out, const float *x, int ldx, int R, int V, int k) {
    (void)be;
    CU_PROF("logits_top"); /* first: every op of the table opens one (cuda_internal.cuh) */
    if (R <= 0) return;
    if (k < 1 || k > BE_TOP_MAX || k >= V) cu_check(cudaErrorInvalidValue, "logits_top: k outside [1, 64] or >= V");
    for (int t0 = 0; t0 < R; t0 += 65535) {
        int r = R - t0 < 65535 ? R - t0 : 65535;
        top_rows(out + (size_t)t0 * (2 * k + 2), x + (size_t)t0 * ldx, ldx, r, V, k);
    }
}
