/* cpu_packcache.c — the CPU backend's on-disk cache of repacked quantized weights
 * (docs/architecture.md, "Pack cache").
 *
 * Why: the VNNI copy of a bench-2b q4 checkpoint is 1.3 GB of fresh anonymous memory; the kernel
 * zeroes every page before the repack writes it, and on a 2-core machine that plus the repack was
 * most of a ~9 s load (issue 17). A copy kept in a file is mapped from the page cache instead: no
 * zeroing, no repacking.
 *
 * A file holds one weight's copy: a 4 KiB header, then the kern_qpack_fill bytes. Its name is the
 * key: a 128-bit hash of the source weight's bytes (quantized values, scales, biases) and its
 * format, so any checkpoint holding the same matrix finds it, and a changed one cannot. The header
 * repeats the key, the kernel layout version (KERN_QPACK_VERSION) and the sizes, and carries a
 * hash of the payload, checked on every load: a truncated, stale or corrupt file is rebuilt and
 * rewritten (written to a temporary name, then renamed, so readers never see half a file). The
 * cache is best effort: any I/O failure falls back to the in-memory repack. */
#include <errno.h>
#include <fcntl.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../kernels/threadpool.h"
#include "cpu_backend.h"

#define PC_MAGIC "MTPLXQPK"
#define PC_HEADER 4096u
#define PC_MIN_BYTES ((size_t)1 << 20) /* smaller copies are cheap to rebuild: no file */
#define PC_CHUNK ((size_t)4 << 20)     /* hash chunk per pool task */

/* The header at the start of a cache file (the rest of the 4 KiB is zero). */
typedef struct {
    char magic[8];
    uint32_t version;          /* KERN_QPACK_VERSION */
    int32_t rows, cols, bits, group_size, scale_dtype;
    uint64_t payload_bytes;    /* kern_qpack_bytes */
    uint64_t key[2];           /* source hash (also the file name) */
    uint64_t sum[2];           /* payload hash */
    uint64_t count;            /* weights in the file: 0 (files written before groups) or 1 = one
                                * weight described above; n > 1 = a group (cpu_packcache_prepare_group:
                                * the copies one after another, each at a multiple of 64 bytes; the
                                * fields above then describe the first) */
} pc_header;

/* ---- hashing: an accumulate-and-scramble hash over 64-byte stripes (8 lanes of 64 bits: each
 * adds (d ^ k) lo32 × hi32 plus its neighbour's word, every 16 stripes the lanes are scrambled),
 * chunks on the pool, combined in order. Plain C and an AVX2 version of the same arithmetic. */

static const uint64_t k_lane[8] = {0xbe4ba423396cfeb8ull, 0x1cad21f72c81017cull, 0xdb979083e96dd4deull,
                                   0x1f67b3b7a4a44072ull, 0x78e5c0cc4ee679cbull, 0x2172ffcc7dd05a82ull,
                                   0x8e2443f7744608b8ull, 0x4c263a81e69035e0ull};
#define PC_PRIME32 0x9e3779b1ull

static inline uint64_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

/* Stripes [0, n) of p (n whole 64-byte stripes) into acc[8], plain C. */
static void stripes_c(uint64_t acc[8], const unsigned char *p, size_t n) {
    for (size_t s = 0; s < n; s++) {
        uint64_t d[8];
        memcpy(d, p + s * 64, 64);
        for (int l = 0; l < 8; l++) {
            uint64_t dk = d[l] ^ k_lane[l];
            acc[l] += d[l ^ 1] + (dk & 0xffffffffull) * (dk >> 32);
        }
        if ((s & 15) == 15)
            for (int l = 0; l < 8; l++) acc[l] = (acc[l] ^ (acc[l] >> 47) ^ k_lane[7 - l]) * PC_PRIME32;
    }
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) static void stripes_avx2(uint64_t acc[8], const unsigned char *p, size_t n) {
    __m256i a0 = _mm256_loadu_si256((const __m256i *)acc), a1 = _mm256_loadu_si256((const __m256i *)(acc + 4));
    const __m256i k0 = _mm256_loadu_si256((const __m256i *)k_lane), k1 = _mm256_loadu_si256((const __m256i *)(k_lane + 4));
    const __m256i r0 = _mm256_setr_epi64x((long long)k_lane[7], (long long)k_lane[6], (long long)k_lane[5], (long long)k_lane[4]);
    const __m256i r1 = _mm256_setr_epi64x((long long)k_lane[3], (long long)k_lane[2], (long long)k_lane[1], (long long)k_lane[0]);
    const __m256i pr = _mm256_set1_epi64x((long long)PC_PRIME32);
    for (size_t s = 0; s < n; s++) {
        __m256i d0 = _mm256_loadu_si256((const __m256i *)(p + s * 64)), d1 = _mm256_loadu_si256((const __m256i *)(p + s * 64 + 32));
        __m256i x0 = _mm256_xor_si256(d0, k0), x1 = _mm256_xor_si256(d1, k1);
        __m256i m0 = _mm256_mul_epu32(x0, _mm256_srli_epi64(x0, 32)), m1 = _mm256_mul_epu32(x1, _mm256_srli_epi64(x1, 32));
        a0 = _mm256_add_epi64(a0, _mm256_add_epi64(_mm256_shuffle_epi32(d0, 0x4e), m0)); /* lane l ^ 1 */
        a1 = _mm256_add_epi64(a1, _mm256_add_epi64(_mm256_shuffle_epi32(d1, 0x4e), m1));
        if ((s & 15) == 15) {
            a0 = _mm256_xor_si256(_mm256_xor_si256(a0, _mm256_srli_epi64(a0, 47)), r0);
            a1 = _mm256_xor_si256(_mm256_xor_si256(a1, _mm256_srli_epi64(a1, 47)), r1);
            /* × a 32-bit prime, mod 2^64: lo·p + (hi·p << 32) */
            a0 = _mm256_add_epi64(_mm256_mul_epu32(a0, pr), _mm256_slli_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a0, 32), pr), 32));
            a1 = _mm256_add_epi64(_mm256_mul_epu32(a1, pr), _mm256_slli_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a1, 32), pr), 32));
        }
    }
    _mm256_storeu_si256((__m256i *)acc, a0);
    _mm256_storeu_si256((__m256i *)(acc + 4), a1);
}
#endif

/* 128-bit hash of n bytes (a chunk). */
static void hash_bytes(const unsigned char *p, size_t n, uint64_t seed, uint64_t out[2]) {
    uint64_t acc[8];
    for (int l = 0; l < 8; l++) acc[l] = k_lane[l] ^ (seed * 0x9e3779b97f4a7c15ull + (uint64_t)l);
    size_t full = n / 64;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) stripes_avx2(acc, p, full);
    else
#endif
        stripes_c(acc, p, full);
    unsigned char tail[64] = {0};
    memcpy(tail, p + full * 64, n - full * 64);
    stripes_c(acc, tail, 1);
    uint64_t h0 = n, h1 = ~(uint64_t)n;
    for (int l = 0; l < 8; l++) h0 = mix(h0 ^ acc[l]), h1 = mix(h1 + acc[l] * (2 * (uint64_t)l + 1));
    out[0] = h0, out[1] = h1;
}

typedef struct {
    const unsigned char *p;
    size_t n;
    uint64_t (*sums)[2]; /* [chunks] */
} hash_job;

static void hash_task(void *ctx, int task, int n_tasks) {
    (void)n_tasks;
    const hash_job *j = ctx;
    size_t off = (size_t)task * PC_CHUNK, len = j->n - off < PC_CHUNK ? j->n - off : PC_CHUNK;
    hash_bytes(j->p + off, len, (uint64_t)task, j->sums[task]);
}

/* Hash of n bytes at p into h (folded in: h = mix(h, hash(p))), chunks hashed on the pool. */
static int hash_fold(uint64_t h[2], const void *p, size_t n) {
    int chunks = (int)((n + PC_CHUNK - 1) / PC_CHUNK);
    if (chunks < 1) chunks = 1;
    uint64_t(*sums)[2] = malloc(sizeof *sums * (size_t)chunks);
    if (!sums) return -1;
    hash_job j = {p, n, sums};
    if (chunks == 1) hash_task(&j, 0, 1);
    else tpool_run(tpool_global(), chunks, hash_task, &j);
    for (int i = 0; i < chunks; i++) {
        h[0] = mix(h[0] ^ sums[i][0]) + (uint64_t)n;
        h[1] = mix(h[1] ^ sums[i][1] ^ h[0]);
    }
    free(sums);
    return 0;
}

/* The cache key of w: its format and every source byte. */
static int weight_key(const kern_weight *w, uint64_t key[2]) {
    size_t qbytes = (size_t)w->rows * w->cols / 32 * w->bits * 4;
    size_t sbytes = (size_t)w->rows * (w->cols / w->group_size) * dtype_size(w->scale_dtype);
    int32_t fmt[6] = {KERN_QPACK_VERSION, w->rows, w->cols, w->bits, w->group_size, (int32_t)w->scale_dtype};
    key[0] = 0x6d74706c78717061ull, key[1] = 0x636b636163686531ull;
    if (hash_fold(key, fmt, sizeof fmt) || hash_fold(key, w->data, qbytes) || hash_fold(key, w->scales, sbytes) ||
        hash_fold(key, w->biases, sbytes))
        return -1;
    return 0;
}

/* ---- files */

/* Unmap a cache file given its payload: the header says how long the payload is (a group's release is
 * its first copy's, and that copy's size is not the file's). */
static void release_map(void *q, size_t bytes) {
    (void)bytes;
    unsigned char *base = (unsigned char *)q - PC_HEADER;
    pc_header h;
    memcpy(&h, base, sizeof h);
    munmap(base, PC_HEADER + h.payload_bytes);
}

static void release_none(void *q, size_t bytes) { (void)q, (void)bytes; } /* freed with its group's first copy */

static void release_heap(void *q, size_t bytes) { (void)bytes, free(q); }

/* Map the cache file at path if it holds the copies of the `count` weights starting with w, `bytes`
 * of payload in all (header and payload hash checked). Returns the payload or NULL. */
static void *cache_map(const char *path, const kern_weight *w, uint32_t count, const uint64_t key[2], size_t bytes) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    void *base = MAP_FAILED;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size == PC_HEADER + bytes)
        base = mmap(NULL, PC_HEADER + bytes, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd);
    if (base == MAP_FAILED) return NULL;
    pc_header h;
    memcpy(&h, base, sizeof h);
    uint64_t sum[2] = {0, 0};
    int ok = !memcmp(h.magic, PC_MAGIC, 8) && h.version == KERN_QPACK_VERSION && h.rows == w->rows &&
             h.cols == w->cols && h.bits == w->bits && h.group_size == w->group_size &&
             h.scale_dtype == (int32_t)w->scale_dtype && h.payload_bytes == bytes && h.key[0] == key[0] &&
             h.key[1] == key[1] && (h.count ? h.count : 1) == count &&
             hash_fold(sum, (unsigned char *)base + PC_HEADER, bytes) == 0 &&
             sum[0] == h.sum[0] && sum[1] == h.sum[1];
    if (!ok) {
        munmap(base, PC_HEADER + bytes);
        return NULL;
    }
    return (unsigned char *)base + PC_HEADER;
}

/* Write q (bytes: the copies of `count` weights starting with w) as their cache file at path: a
 * temporary file, then rename. Failures are ignored (the next load rebuilds). */
static void cache_write(const char *path, const kern_weight *w, uint32_t count, const uint64_t key[2], const void *q,
                        size_t bytes) {
    static unsigned counter;
    char tmp[CPU_CACHE_PATH_MAX + 48];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d.%u", path, (int)getpid(), __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
    unsigned char *hdr = calloc(1, PC_HEADER);
    if (!hdr) return;
    pc_header h = {.version = KERN_QPACK_VERSION, .rows = w->rows, .cols = w->cols, .bits = w->bits,
                   .group_size = w->group_size, .scale_dtype = (int32_t)w->scale_dtype, .payload_bytes = bytes,
                   .count = count};
    memcpy(h.magic, PC_MAGIC, 8);
    h.key[0] = key[0], h.key[1] = key[1];
    if (hash_fold(h.sum, q, bytes)) {
        free(hdr);
        return;
    }
    memcpy(hdr, &h, sizeof h);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int ok = fd >= 0;
    const unsigned char *parts[2] = {hdr, q};
    size_t lens[2] = {PC_HEADER, bytes};
    for (int k = 0; ok && k < 2; k++)
        for (size_t off = 0; ok && off < lens[k];) {
            ssize_t n = write(fd, parts[k] + off, lens[k] - off);
            if (n < 0 && errno == EINTR) continue;
            ok = n > 0;
            if (ok) off += (size_t)n;
        }
    if (fd >= 0) ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) unlink(tmp);
    free(hdr);
}

/* mkdir -p of dir (mode 0755). Returns 0 when it exists afterwards. */
static int mkdir_p(const char *dir) {
    char buf[CPU_CACHE_PATH_MAX];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof buf) return -1;
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++)
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
            buf[i] = c;
        }
    return 0;
}

/* The cache file's path for key in dir, into path[cap]. Returns 0, or -1 when it does not fit. */
static int cache_path(char *path, size_t cap, const char *dir, const uint64_t key[2]) {
    int n = snprintf(path, cap, "%s/%016llx%016llx.qpack", dir, (unsigned long long)key[0], (unsigned long long)key[1]);
    return n < 0 || (size_t)n >= cap - 8 ? -1 : 0;
}

/* bytes of 2 MiB-aligned heap marked for huge pages (decode streams the copy: huge pages save TLB
 * misses), or NULL. Freed with free(). */
static void *heap_huge(size_t bytes) {
    size_t huge = (size_t)2 << 20, alloc = (bytes + huge - 1) & ~(huge - 1);
    void *q = aligned_alloc(huge, alloc);
#ifdef MADV_HUGEPAGE
    if (q) (void)madvise(q, alloc, MADV_HUGEPAGE);
#endif
    return q;
}

int cpu_packcache_prepare(const char *dir, kern_pack_set **set, kern_weight *w, mtplx_err *err) {
    size_t bytes = kern_qpack_bytes(w);
    if (!dir || !*dir || w->packed || bytes < PC_MIN_BYTES) return 0;
    uint64_t key[2];
    char path[CPU_CACHE_PATH_MAX + 8];
    if (weight_key(w, key) || cache_path(path, sizeof path, dir, key)) return 0;
    void *q = cache_map(path, w, 1, key, bytes);
    if (q) return kern_pack_set_adopt(set, w, q, bytes, release_map, err) ? -1 : 1;
    /* miss: repack on the heap as kern_pack_set_add would, use that, and keep a copy on disk */
    if (!(q = heap_huge(bytes))) return 0;
    kern_qpack_fill(w, q);
    if (mkdir_p(dir) == 0) cache_write(path, w, 1, key, q, bytes);
    if (kern_pack_set_adopt(set, w, q, bytes, release_heap, err)) {
        free(q);
        return -1;
    }
    return 1;
}

/* ---- groups: many small copies (a MoE layer's routed experts) in one file */

typedef struct {
    kern_weight *const *ws;
    const size_t *off;   /* [n + 1]: each copy's offset in the group's payload, then the total */
    uint64_t (*keys)[2]; /* [n]: each weight's key (key_task) */
    unsigned char *q;    /* the payload being filled (fill_task) */
    int n, fail;
} group_job;

/* The keys of weights [n·task/n_tasks, n·(task+1)/n_tasks) (weight_key's pool calls run inline
 * inside a task). */
static void key_task(void *ctx, int task, int n_tasks) {
    group_job *j = ctx;
    for (int i = (int)((long)j->n * task / n_tasks); i < (int)((long)j->n * (task + 1) / n_tasks); i++)
        if (weight_key(j->ws[i], j->keys[i])) __atomic_store_n(&j->fail, 1, __ATOMIC_RELAXED);
}

/* The copies of a range of the group's weights, each at its offset (the padding after it zeroed, so
 * every byte of the file is defined). */
static void fill_task(void *ctx, int task, int n_tasks) {
    const group_job *j = ctx;
    for (int i = (int)((long)j->n * task / n_tasks); i < (int)((long)j->n * (task + 1) / n_tasks); i++) {
        size_t b = kern_qpack_bytes(j->ws[i]);
        kern_qpack_fill(j->ws[i], j->q + j->off[i]);
        memset(j->q + j->off[i] + b, 0, j->off[i + 1] - j->off[i] - b);
    }
}

/* The group's key: every weight's key, in order, and their number. */
static int group_key(group_job *j, uint64_t key[2]) {
    tpool *pool = tpool_global();
    tpool_run(pool, j->n < 4 * tpool_threads(pool) ? j->n : 4 * tpool_threads(pool), key_task, j);
    key[0] = 0x6d74706c78677270ull, key[1] = (uint64_t)j->n;
    return j->fail || hash_fold(key, j->keys, sizeof *j->keys * (size_t)j->n) ? -1 : 0;
}

/* Attach the group's payload q (bytes) to its weights: the first copy owns the memory (release:
 * release_map or release_heap frees all of it), the others release nothing. Returns 0 or -1; on -1
 * after the first copy the set owns q, before it the caller does (*owned says which). */
static int group_adopt(kern_pack_set **set, group_job *j, unsigned char *q, void (*release)(void *, size_t),
                       int *owned, mtplx_err *err) {
    *owned = 0;
    for (int i = 0; i < j->n; i++) {
        if (kern_pack_set_adopt(set, j->ws[i], q + j->off[i], kern_qpack_bytes(j->ws[i]), i ? release_none : release, err))
            return -1;
        *owned = 1;
    }
    return 0;
}

int cpu_packcache_prepare_group(const char *dir, kern_pack_set **set, kern_weight *const *ws, int n, mtplx_err *err) {
    if (!dir || !*dir || n < 2) return 0;
    size_t *off = malloc(sizeof *off * ((size_t)n + 1));
    uint64_t(*keys)[2] = malloc(sizeof *keys * (size_t)n);
    group_job j = {ws, off, keys, NULL, n, 0};
    int rc = 0, owned = 0;
    if (!off || !keys) goto done;
    off[0] = 0;
    for (int i = 0; i < n; i++) {
        size_t b = kern_qpack_bytes(ws[i]);
        if (!b || ws[i]->packed) goto done; /* every weight packs, none has its copy yet */
        off[i + 1] = off[i] + ((b + 63) & ~(size_t)63);
    }
    size_t bytes = off[n];
    uint64_t key[2];
    char path[CPU_CACHE_PATH_MAX + 8];
    if (bytes < PC_MIN_BYTES || group_key(&j, key) || cache_path(path, sizeof path, dir, key)) goto done;
    unsigned char *q = cache_map(path, ws[0], (uint32_t)n, key, bytes);
    if (q) {
        rc = group_adopt(set, &j, q, release_map, &owned, err) ? -1 : 1;
        if (rc < 0 && !owned) release_map(q, 0);
        goto done;
    }
    /* miss: every copy on one huge-page heap block, then the file */
    if (!(j.q = q = heap_huge(bytes))) goto done;
    tpool *pool = tpool_global();
    tpool_run(pool, n < 4 * tpool_threads(pool) ? n : 4 * tpool_threads(pool), fill_task, &j);
    if (mkdir_p(dir) == 0) cache_write(path, ws[0], (uint32_t)n, key, q, bytes);
    rc = group_adopt(set, &j, q, release_heap, &owned, err) ? -1 : 1;
    if (rc < 0 && !owned) free(q);
done:
    free(off), free(keys);
    return rc;
}
