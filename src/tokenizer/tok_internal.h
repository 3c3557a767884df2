/* tok_internal.h — the tokenizer's internal types, shared by the files of src/tokenizer only.
 *
 * A tokenizer is a pipeline read from tokenizer.json: added tokens, normalizer, pre-tokenizer, BPE
 * model and decoder. Each stage is a small tagged struct; Sequence stages hold arrays of stages.
 * All strings live in heap blocks owned by the tokenizer and are freed by tok_free. */
#ifndef MTPLX_TOKENIZER_INTERNAL_H
#define MTPLX_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/err.h"
#include "tokenizer.h"

/* ---- growable byte buffer and string/int hash maps (tok_util.c) ---- */

typedef struct {
    char  *p;     /* bytes, NUL-terminated after every append */
    size_t len;   /* bytes used (excluding the NUL) */
    size_t cap;   /* bytes allocated */
} tbuf;

int  tbuf_reserve(tbuf *b, size_t extra);           /* 0 or MTPLX_ENOMEM */
int  tbuf_put(tbuf *b, const void *s, size_t n);    /* append n bytes */
int  tbuf_putc(tbuf *b, int c);
int  tbuf_put_cp(tbuf *b, uint32_t cp);              /* append one code point as UTF-8 */
void tbuf_free(tbuf *b);

/* string -> int32 map; keys are copied into the map's own arena. */
typedef struct {
    uint32_t *hash;   /* [cap] 0 = empty slot (real hashes are forced non-zero) */
    uint32_t *klen;   /* [cap] key length in bytes */
    size_t   *koff;   /* [cap] key offset in keys */
    int32_t  *val;    /* [cap] */
    size_t    cap;    /* power of two */
    size_t    n;      /* used slots */
    tbuf      keys;   /* all key bytes */
} strmap;

uint32_t strmap_hash(const char *s, size_t n);
int  strmap_init(strmap *m, size_t expect);
int  strmap_put(strmap *m, const char *s, size_t n, int32_t v);   /* insert or overwrite */
int32_t strmap_get(const strmap *m, const char *s, size_t n);       /* -1 when absent */
void strmap_free(strmap *m);

/* (id, id) -> (rank, new id) for BPE merges; one 16-byte slot per entry so a lookup touches one
 * cache line. */
typedef struct {
    uint64_t key;     /* (a << 32 | b), UINT64_MAX = empty */
    int32_t  rank;    /* position in the merges list */
    int32_t  out;     /* id of the merged token */
} pair_slot_t;

typedef struct {
    pair_slot_t *slot; /* [cap] */
    size_t       cap, n;
} pairmap;

int  pairmap_init(pairmap *m, size_t expect);
void pairmap_put(pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t out); /* overwrite */
bool pairmap_get(const pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *out);
void pairmap_free(pairmap *m);

/* ---- UTF-8 helpers (tok_util.c) ---- */

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if invalid/truncated. *cp gets the code point. */
int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
/* Offset of the first invalid byte of s[0..n), or n when all of it is valid UTF-8. */
size_t utf8_first_invalid(const unsigned char *s, size_t n);
/* Append s[0..n) to out replacing invalid sequences with U+FFFD the way Rust's
 * String::from_utf8_lossy does (one U+FFFD per maximal invalid subpart). */
int utf8_lossy_append(tbuf *out, const unsigned char *s, size_t n);
bool uc_is_whitespace(uint32_t cp);   /* Unicode White_Space (Rust char::is_whitespace) */
bool uc_is_alnum_word(uint32_t cp);   /* letters, marks, decimal digits, Pc, join controls */
bool uc_is_numeric(uint32_t cp);      /* Nd, Nl, No (Rust char::is_numeric) */

/* ---- regex (PCRE2, UTF + UCP, JIT) ---- */

typedef struct {
    pcre2_code *code;
    char       *src;     /* the pattern as written, for messages */
} tregex;

int  tregex_compile(tregex *r, const char *pattern, size_t len, mtplx_err *err);
/* Next match of r in s[0..n) at or after start; returns 1 and [*ms, *me), 0 when none, <0 on a
 * matcher failure (err set). md is a match-data block owned by the caller. */
int  tregex_next(const tregex *r, const char *s, size_t n, size_t start, pcre2_match_data *md, size_t *ms,
                 size_t *me, mtplx_err *err);
void tregex_free(tregex *r);

/* ---- pipeline stages ---- */

typedef enum { PAT_STRING, PAT_REGEX } pattern_kind;

typedef struct {
    pattern_kind kind;
    char  *str;       /* PAT_STRING: the literal */
    size_t str_len;
    tregex re;        /* PAT_REGEX */
} tpattern;

typedef enum {
    NORM_NFC, NORM_NFD, NORM_NFKC, NORM_NFKD, NORM_LOWERCASE, NORM_REPLACE, NORM_PREPEND, NORM_STRIP,
    NORM_SEQUENCE,
} norm_kind;

typedef struct normalizer {
    norm_kind kind;
    tpattern  pat;               /* REPLACE */
    char     *content;           /* REPLACE: replacement; PREPEND: prefix */
    size_t    content_len;
    bool      strip_left, strip_right; /* STRIP */
    struct normalizer *seq;      /* SEQUENCE: [n_seq] */
    int       n_seq;
} normalizer;

typedef enum { SPLIT_REMOVED, SPLIT_ISOLATED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS } split_behavior;
typedef enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER } prepend_scheme;

typedef enum {
    PRE_SPLIT, PRE_BYTELEVEL, PRE_METASPACE, PRE_DIGITS, PRE_WHITESPACE, PRE_WHITESPACE_SPLIT,
    PRE_SEQUENCE,
} pre_kind;

typedef struct pretok {
    pre_kind kind;
    tpattern pat;                /* SPLIT (WHITESPACE / WHITESPACE_SPLIT use a fixed regex here) */
    split_behavior behavior;     /* SPLIT */
    bool     invert;             /* SPLIT */
    bool     add_prefix_space;   /* BYTELEVEL */
    bool     use_regex;          /* BYTELEVEL: split with the GPT-2 pattern first */
    uint32_t replacement;        /* METASPACE: the code point that stands for ' ' */
    prepend_scheme prepend;      /* METASPACE */
    bool     split;              /* METASPACE */
    bool     individual_digits;  /* DIGITS */
    struct pretok *seq;          /* SEQUENCE: [n_seq] */
    int      n_seq;
} pretok;

typedef enum { DEC_BYTELEVEL, DEC_METASPACE, DEC_BYTEFALLBACK, DEC_FUSE, DEC_STRIP, DEC_REPLACE, DEC_BPE, DEC_SEQUENCE } dec_kind;

typedef struct decoder {
    dec_kind kind;
    tpattern pat;                /* REPLACE */
    char    *content;            /* REPLACE: replacement; STRIP: the character (UTF-8); BPE: suffix */
    size_t   content_len;
    int      strip_start, strip_stop; /* STRIP: how many leading / trailing copies to remove */
    uint32_t replacement;        /* METASPACE */
    prepend_scheme prepend;      /* METASPACE */
    struct decoder *seq;         /* SEQUENCE: [n_seq] */
    int      n_seq;
} decoder;

/* One entry of added_tokens. */
typedef struct {
    int32_t id;
    char   *content;       /* UTF-8, NUL-terminated */
    size_t  len;
    bool    special, normalized, lstrip, rstrip, single_word;
} added_token;

/* Byte trie over added-token contents for leftmost-longest matching. */
typedef struct {
    int32_t *tok;          /* [n_nodes] index into added[] ending here, -1 if none */
    pairmap  edges;        /* (node, byte) -> child node, in the `out` field */
    int      n_nodes, cap_nodes;
    uint8_t  first[32];    /* bitmap of possible first bytes */
} trie;

/* BPE word cache entry values live in ids_pool. */
typedef struct {
    strmap   map;          /* word bytes -> entry index */
    int32_t *ent_off;      /* [n_ent] offset into pool */
    int32_t *ent_len;      /* [n_ent] number of ids */
    int      n_ent, cap_ent;
    int32_t *pool;         /* ids */
    size_t   pool_len, pool_cap;
    pthread_mutex_t mu;
} word_cache;

struct tokenizer {
    /* model vocabulary (BPE): id -> string, string -> id */
    int32_t  n_model;        /* one past the largest model id */
    char   **model_str;      /* [n_model] NUL-terminated, NULL for holes */
    uint32_t *model_len;     /* [n_model] */
    strmap   model_map;
    pairmap  merges;
    /* (last code point of a, first code point of b) for every merge (a, b): two neighbouring
     * characters not in this set can never end up in one token, so a long word is merged as
     * independent segments (same result, cache-friendly). Empty when a subword prefix/suffix is set. */
    pairmap  joinable;
    bool     ignore_merges;
    bool     byte_fallback;
    bool     fuse_unk;
    int32_t  unk_id;         /* -1: unknown characters are dropped */
    char    *cont_prefix;    /* continuing_subword_prefix, NULL when absent/empty */
    char    *end_suffix;     /* end_of_word_suffix, NULL when absent/empty */
    int32_t  byte_fallback_id[256]; /* id of "<0xNN>", -1 if absent */

    /* added tokens */
    added_token *added;      /* [n_added] */
    int      n_added;
    int32_t *added_of_id;    /* [n_ids] index into added, -1 */
    strmap   added_map;      /* content -> id */
    trie     trie_raw;       /* non-normalized contents, matched on raw text */
    trie     trie_norm;      /* normalized contents, matched on normalized text */

    int32_t  n_ids;          /* one past the largest id of either kind */

    normalizer *norm;        /* NULL: none */
    pretok     *pre;         /* NULL: none */
    decoder    *dec;         /* NULL: tokens joined with " " */

    /* Byte-level fast path: the pre-tokenizer ends with ByteLevel and there is no subword prefix /
     * suffix, so words stay raw bytes and BPE starts from byte_sym[b]. */
    bool     bytelevel_last;
    tregex   gpt2_re;        /* ByteLevel use_regex pattern, compiled when some stage needs it */
    tregex   ws_re;          /* Whitespace pre-tokenizer pattern \w+|[^\w\s]+ */
    /* Fast path: the pre-tokenizer only cuts with one regex, keeping every match and gap as a word
     * (Split Isolated, optionally followed by a plain ByteLevel, or ByteLevel with its GPT-2
     * pattern). NULL when the pipeline is anything else. */
    const tregex *fast_split;
    int32_t  byte_sym[256];  /* model id of the byte-level character of byte b, -1 if absent */
    char     byte_char[256][3]; /* UTF-8 of the byte-level character for byte b */
    uint8_t  byte_char_len[256];
    int16_t  char_byte[0x180];  /* inverse: code point (< 0x180) -> byte, -1 if not a byte char */

    /* decode fast path: decoder is exactly ByteLevel; dec_bytes[id] = raw bytes of the token */
    bool     dec_bytelevel_only;
    char   **dec_bytes;      /* [n_ids] */
    uint32_t *dec_len;       /* [n_ids] */

    bool     nul_remap;      /* tokenizer.json had "\u0000": it was read as U+FDD0 (see tokenizer.c) */
    word_cache cache;
    tok_config cfg;
    char      *cfg_strings;  /* owned storage behind cfg's strings (freed one by one) */
    char      *cfg_own[8];
    int        n_cfg_own;
};

/* ---- stages (normalize.c, pretok.c, bpe.c, added.c, decode.c) ---- */

/* A list of text pieces inside one buffer. */
typedef struct {
    size_t off, len;     /* bytes in the owning buffer */
    bool   at_origin;    /* starts at byte 0 of the original input (Metaspace "first") */
} piece;

typedef struct {
    tbuf   text;
    piece *v;
    int    n, cap;
} piece_list;

int  plist_push(piece_list *l, size_t off, size_t len, bool at_origin);
void plist_clear(piece_list *l);
void plist_free(piece_list *l);

/* Scratch memory for one encode call. */
typedef struct {
    pcre2_match_data *md;
    piece_list a, b;          /* pre-tokenizer double buffer */
    tbuf       norm;          /* normalizer output */
    tbuf       tmp;
    piece_list c, d;          /* Sequence stage buffers */
    size_t    *seg_a, *seg_b; /* split segments [seg_cap]: byte ranges ... */
    bool      *seg_m;         /* ... and whether each one is a pattern match */
    int        seg_cap;
    /* BPE */
    struct bpe_sym *sym;      /* [sym_cap] symbols of the word being merged (bpe.c) */
    int        sym_cap;
    int32_t   *cut;           /* [cut_cap] symbol indices where no merge can cross */
    int        n_cut, cut_cap;
    void      *heap;          /* BPE merge candidates (bpe.c's merge_cand) [heap_cap] */
    int        heap_cap;
    /* output */
    int32_t   *ids;
    int        n_ids, cap_ids;
} enc_scratch;

int  scratch_init(enc_scratch *s, mtplx_err *err);
void scratch_free(enc_scratch *s);
int  out_push(enc_scratch *s, int32_t id);

int  normalizer_apply(const normalizer *nz, const char *in, size_t n, tbuf *out, enc_scratch *s, bool *shifted,
                      mtplx_err *err);
int  pretok_apply(const tokenizer *t, const pretok *p, piece_list *in, piece_list *out, enc_scratch *s, mtplx_err *err);
int  bpe_encode_word(const tokenizer *t, const char *w, size_t n, bool raw_bytes, enc_scratch *s, mtplx_err *err);

void trie_init(trie *tr);
int  trie_add(trie *tr, const char *s, size_t n, int32_t tok_index);
void trie_free(trie *tr);
/* Longest added token starting at text[i]; returns its index in added[] and *end, or -1. */
int  trie_match(const trie *tr, const char *text, size_t n, size_t i, size_t *end);

int  decode_tokens(const tokenizer *t, const int32_t *ids, int n, int skip_special, tbuf *out, mtplx_err *err);

void normalizer_free(normalizer *nz);
void pretok_free(pretok *p);
void decoder_free(decoder *d);
void tpattern_free(tpattern *p);

#endif
