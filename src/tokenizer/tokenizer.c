/* tokenizer.c — loading a tokenizer directory (tokenizer.json, tokenizer_config.json,
 * chat_template.jinja) into the pipeline of tok_internal.h, the transformers 5.x class overrides,
 * and the small accessors of tokenizer.h.
 *
 * Every field read from the files is checked: a wrong type, an id out of range, a merge naming a
 * token that is not in the vocab or an unsupported component gives an error naming it. */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/file.h"
#include "../base/mem.h"
#include "tok_internal.h"

#define MAX_TOKEN_ID (1 << 24)   /* ids above this are refused as malformed */
#define MAX_DEPTH 8              /* nesting of Sequence components */

/* The GPT-2 pre-tokenizer pattern (ByteLevel with use_regex) and transformers' class patterns. */
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char QWEN2_PATTERN[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char QWEN3_5_PATTERN[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char WHITESPACE_PATTERN[] = "\\w+|[^\\w\\s]+";

static char *dup_n(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* ---- freeing ---- */

void tpattern_free(tpattern *p) {
    free(p->str);
    tregex_free(&p->re);
    memset(p, 0, sizeof *p);
}

static void normalizer_clear(normalizer *nz) {
    tpattern_free(&nz->pat);
    free(nz->content);
    for (int i = 0; i < nz->n_seq; i++) normalizer_clear(&nz->seq[i]);
    free(nz->seq);
}

void normalizer_free(normalizer *nz) {
    if (!nz) return;
    normalizer_clear(nz);
    free(nz);
}

static void pretok_clear(pretok *p) {
    tpattern_free(&p->pat);
    for (int i = 0; i < p->n_seq; i++) pretok_clear(&p->seq[i]);
    free(p->seq);
}

void pretok_free(pretok *p) {
    if (!p) return;
    pretok_clear(p);
    free(p);
}

static void decoder_clear(decoder *d) {
    tpattern_free(&d->pat);
    free(d->content);
    for (int i = 0; i < d->n_seq; i++) decoder_clear(&d->seq[i]);
    free(d->seq);
}

void decoder_free(decoder *d) {
    if (!d) return;
    decoder_clear(d);
    free(d);
}

void tok_free(tokenizer *t) {
    if (!t) return;
    if (t->model_str) {
        for (int32_t i = 0; i < t->n_model; i++) free(t->model_str[i]);
        free(t->model_str);
    }
    free(t->model_len);
    strmap_free(&t->model_map);
    pairmap_free(&t->merges);
    pairmap_free(&t->joinable);
    free(t->cont_prefix);
    free(t->end_suffix);
    for (int i = 0; i < t->n_added; i++) free(t->added[i].content);
    free(t->added);
    free(t->added_of_id);
    strmap_free(&t->added_map);
    trie_free(&t->trie_raw);
    trie_free(&t->trie_norm);
    normalizer_free(t->norm);
    pretok_free(t->pre);
    decoder_free(t->dec);
    tregex_free(&t->gpt2_re);
    tregex_free(&t->ws_re);
    if (t->dec_bytes) {
        for (int32_t i = 0; i < t->n_ids; i++) free(t->dec_bytes[i]);
        free(t->dec_bytes);
    }
    free(t->dec_len);
    strmap_free(&t->cache.map);
    free(t->cache.ent_off);
    free(t->cache.ent_len);
    free(t->cache.pool);
    pthread_mutex_destroy(&t->cache.mu);
    for (int i = 0; i < t->n_cfg_own; i++) free(t->cfg_own[i]);
    free(t);
}

/* ---- JSON helpers ---- */

static int get_bool(json_t *o, const char *key, bool dflt, bool *out, const char *what, mtplx_err *err) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) { *out = dflt; return 0; }
    if (!json_is_boolean(v)) return err_set(err, MTPLX_EBADFILE, "%s: \"%s\" must be a boolean", what, key);
    *out = json_is_true(v);
    return 0;
}

static int get_string(json_t *o, const char *key, const char **out, size_t *len, const char *what, mtplx_err *err) {
    json_t *v = json_object_get(o, key);
    if (!v || !json_is_string(v)) return err_set(err, MTPLX_EBADFILE, "%s: \"%s\" must be a string", what, key);
    *out = json_string_value(v);
    if (len) *len = json_string_length(v);
    return 0;
}

/* One code point from a JSON string field (Metaspace replacement). */
static int get_char(json_t *o, const char *key, uint32_t dflt, uint32_t *out, const char *what, mtplx_err *err) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) { *out = dflt; return 0; }
    if (!json_is_string(v)) return err_set(err, MTPLX_EBADFILE, "%s: \"%s\" must be a string", what, key);
    const unsigned char *s = (const unsigned char *)json_string_value(v);
    size_t n = json_string_length(v);
    uint32_t cp;
    int l = utf8_decode(s, n, &cp);
    if (!l || (size_t)l != n) return err_set(err, MTPLX_EBADFILE, "%s: \"%s\" must be exactly one character", what, key);
    *out = cp;
    return 0;
}

static int parse_pattern(json_t *o, tpattern *p, const char *what, mtplx_err *err) {
    json_t *pat = json_object_get(o, "pattern");
    if (!json_is_object(pat)) return err_set(err, MTPLX_EBADFILE, "%s: \"pattern\" must be an object", what);
    json_t *s = json_object_get(pat, "String"), *r = json_object_get(pat, "Regex");
    if (json_is_string(s)) {
        p->kind = PAT_STRING;
        p->str_len = json_string_length(s);
        p->str = dup_n(json_string_value(s), p->str_len);
        return p->str ? 0 : err_set(err, MTPLX_ENOMEM, "%s: out of memory", what);
    }
    if (json_is_string(r)) {
        p->kind = PAT_REGEX;
        int rc = tregex_compile(&p->re, json_string_value(r), json_string_length(r), err);
        return rc ? err_prefix(err, "%s", what) : 0;
    }
    return err_set(err, MTPLX_EBADFILE, "%s: pattern needs a \"String\" or \"Regex\" string", what);
}

static int parse_prepend_scheme(json_t *o, prepend_scheme *out, const char *what, mtplx_err *err) {
    json_t *ps = json_object_get(o, "prepend_scheme");
    if (json_is_string(ps)) {
        const char *s = json_string_value(ps);
        if (!strcmp(s, "always")) *out = PREPEND_ALWAYS;
        else if (!strcmp(s, "first")) *out = PREPEND_FIRST;
        else if (!strcmp(s, "never")) *out = PREPEND_NEVER;
        else return err_set(err, MTPLX_EBADFILE, "%s: unknown prepend_scheme \"%s\"", what, s);
        return 0;
    }
    bool aps = true;
    int rc = get_bool(o, "add_prefix_space", true, &aps, what, err);
    *out = aps ? PREPEND_ALWAYS : PREPEND_NEVER;
    return rc;
}

static const char *type_of(json_t *o) {
    json_t *t = json_object_get(o, "type");
    return json_is_string(t) ? json_string_value(t) : NULL;
}

/* ---- components ---- */

static int parse_normalizer(json_t *o, normalizer *nz, int depth, mtplx_err *err) {
    memset(nz, 0, sizeof *nz);
    const char *ty = type_of(o);
    if (!json_is_object(o) || !ty) return err_set(err, MTPLX_EBADFILE, "normalizer: needs an object with a \"type\"");
    if (depth > MAX_DEPTH) return err_set(err, MTPLX_EBADFILE, "normalizer: nested too deeply");
    if (!strcmp(ty, "NFC")) nz->kind = NORM_NFC;
    else if (!strcmp(ty, "NFD")) nz->kind = NORM_NFD;
    else if (!strcmp(ty, "NFKC")) nz->kind = NORM_NFKC;
    else if (!strcmp(ty, "NFKD")) nz->kind = NORM_NFKD;
    else if (!strcmp(ty, "Lowercase")) nz->kind = NORM_LOWERCASE;
    else if (!strcmp(ty, "Replace")) {
        nz->kind = NORM_REPLACE;
        const char *c;
        size_t cl;
        if (parse_pattern(o, &nz->pat, "normalizer Replace", err) || get_string(o, "content", &c, &cl, "normalizer Replace", err))
            return err->code;
        nz->content = dup_n(c, cl);
        nz->content_len = cl;
        if (!nz->content) return err_set(err, MTPLX_ENOMEM, "normalizer: out of memory");
    } else if (!strcmp(ty, "Prepend")) {
        nz->kind = NORM_PREPEND;
        const char *c;
        size_t cl;
        if (get_string(o, "prepend", &c, &cl, "normalizer Prepend", err)) return err->code;
        nz->content = dup_n(c, cl);
        nz->content_len = cl;
        if (!nz->content) return err_set(err, MTPLX_ENOMEM, "normalizer: out of memory");
    } else if (!strcmp(ty, "Strip")) {
        nz->kind = NORM_STRIP;
        if (get_bool(o, "strip_left", true, &nz->strip_left, "normalizer Strip", err) ||
            get_bool(o, "strip_right", true, &nz->strip_right, "normalizer Strip", err))
            return err->code;
    } else if (!strcmp(ty, "Sequence")) {
        nz->kind = NORM_SEQUENCE;
        json_t *arr = json_object_get(o, "normalizers");
        if (!json_is_array(arr)) return err_set(err, MTPLX_EBADFILE, "normalizer Sequence: \"normalizers\" must be an array");
        nz->seq = mem_zalloc(json_array_size(arr) + 1, sizeof *nz->seq, "normalizer", err);
        if (!nz->seq) return MTPLX_ENOMEM;
        for (size_t i = 0; i < json_array_size(arr); i++) {
            nz->n_seq++;
            if (parse_normalizer(json_array_get(arr, i), &nz->seq[i], depth + 1, err)) return err->code;
        }
    } else
        return err_set(err, MTPLX_EUNSUPPORTED, "normalizer type \"%s\" is not supported", ty);
    return 0;
}

static int parse_pretok(json_t *o, pretok *p, int depth, mtplx_err *err) {
    memset(p, 0, sizeof *p);
    const char *ty = type_of(o);
    if (!json_is_object(o) || !ty) return err_set(err, MTPLX_EBADFILE, "pre_tokenizer: needs an object with a \"type\"");
    if (depth > MAX_DEPTH) return err_set(err, MTPLX_EBADFILE, "pre_tokenizer: nested too deeply");
    if (!strcmp(ty, "Split")) {
        p->kind = PRE_SPLIT;
        const char *b = "";
        if (parse_pattern(o, &p->pat, "pre_tokenizer Split", err) || get_string(o, "behavior", &b, NULL, "pre_tokenizer Split", err) ||
            get_bool(o, "invert", false, &p->invert, "pre_tokenizer Split", err))
            return err->code;
        if (!strcmp(b, "Isolated")) p->behavior = SPLIT_ISOLATED;
        else if (!strcmp(b, "Removed")) p->behavior = SPLIT_REMOVED;
        else if (!strcmp(b, "MergedWithPrevious")) p->behavior = SPLIT_MERGED_PREV;
        else if (!strcmp(b, "MergedWithNext")) p->behavior = SPLIT_MERGED_NEXT;
        else if (!strcmp(b, "Contiguous")) p->behavior = SPLIT_CONTIGUOUS;
        else return err_set(err, MTPLX_EBADFILE, "pre_tokenizer Split: unknown behavior \"%s\"", b);
    } else if (!strcmp(ty, "ByteLevel")) {
        p->kind = PRE_BYTELEVEL;
        if (get_bool(o, "add_prefix_space", true, &p->add_prefix_space, "pre_tokenizer ByteLevel", err) ||
            get_bool(o, "use_regex", true, &p->use_regex, "pre_tokenizer ByteLevel", err))
            return err->code;
    } else if (!strcmp(ty, "Metaspace")) {
        p->kind = PRE_METASPACE;
        if (get_char(o, "replacement", 0x2581, &p->replacement, "pre_tokenizer Metaspace", err) ||
            parse_prepend_scheme(o, &p->prepend, "pre_tokenizer Metaspace", err) ||
            get_bool(o, "split", true, &p->split, "pre_tokenizer Metaspace", err))
            return err->code;
    } else if (!strcmp(ty, "Digits")) {
        p->kind = PRE_DIGITS;
        if (get_bool(o, "individual_digits", false, &p->individual_digits, "pre_tokenizer Digits", err)) return err->code;
    } else if (!strcmp(ty, "Whitespace")) {
        p->kind = PRE_WHITESPACE;
        p->pat.kind = PAT_REGEX;
        if (tregex_compile(&p->pat.re, WHITESPACE_PATTERN, strlen(WHITESPACE_PATTERN), err)) return err->code;
    } else if (!strcmp(ty, "WhitespaceSplit")) {
        p->kind = PRE_WHITESPACE_SPLIT;
    } else if (!strcmp(ty, "Sequence")) {
        p->kind = PRE_SEQUENCE;
        json_t *arr = json_object_get(o, "pretokenizers");
        if (!json_is_array(arr)) return err_set(err, MTPLX_EBADFILE, "pre_tokenizer Sequence: \"pretokenizers\" must be an array");
        p->seq = mem_zalloc(json_array_size(arr) + 1, sizeof *p->seq, "pre_tokenizer", err);
        if (!p->seq) return MTPLX_ENOMEM;
        for (size_t i = 0; i < json_array_size(arr); i++) {
            p->n_seq++;
            if (parse_pretok(json_array_get(arr, i), &p->seq[i], depth + 1, err)) return err->code;
        }
    } else
        return err_set(err, MTPLX_EUNSUPPORTED, "pre_tokenizer type \"%s\" is not supported", ty);
    return 0;
}

static int parse_decoder(json_t *o, decoder *d, int depth, mtplx_err *err) {
    memset(d, 0, sizeof *d);
    const char *ty = type_of(o);
    if (!json_is_object(o) || !ty) return err_set(err, MTPLX_EBADFILE, "decoder: needs an object with a \"type\"");
    if (depth > MAX_DEPTH) return err_set(err, MTPLX_EBADFILE, "decoder: nested too deeply");
    if (!strcmp(ty, "ByteLevel")) d->kind = DEC_BYTELEVEL;
    else if (!strcmp(ty, "ByteFallback")) d->kind = DEC_BYTEFALLBACK;
    else if (!strcmp(ty, "Fuse")) d->kind = DEC_FUSE;
    else if (!strcmp(ty, "Metaspace")) {
        d->kind = DEC_METASPACE;
        if (get_char(o, "replacement", 0x2581, &d->replacement, "decoder Metaspace", err) ||
            parse_prepend_scheme(o, &d->prepend, "decoder Metaspace", err))
            return err->code;
    } else if (!strcmp(ty, "Strip")) {
        d->kind = DEC_STRIP;
        const char *c;
        size_t cl;
        if (get_string(o, "content", &c, &cl, "decoder Strip", err)) return err->code;
        json_t *st = json_object_get(o, "start"), *sp = json_object_get(o, "stop");
        if (!json_is_integer(st) || !json_is_integer(sp) || json_integer_value(st) < 0 || json_integer_value(sp) < 0 ||
            json_integer_value(st) > 1 << 20 || json_integer_value(sp) > 1 << 20)
            return err_set(err, MTPLX_EBADFILE, "decoder Strip: \"start\"/\"stop\" must be small non-negative integers");
        d->strip_start = (int)json_integer_value(st);
        d->strip_stop = (int)json_integer_value(sp);
        d->content = dup_n(c, cl);
        d->content_len = cl;
        if (!d->content) return err_set(err, MTPLX_ENOMEM, "decoder: out of memory");
    } else if (!strcmp(ty, "Replace")) {
        d->kind = DEC_REPLACE;
        const char *c;
        size_t cl;
        if (parse_pattern(o, &d->pat, "decoder Replace", err) || get_string(o, "content", &c, &cl, "decoder Replace", err))
            return err->code;
        d->content = dup_n(c, cl);
        d->content_len = cl;
        if (!d->content) return err_set(err, MTPLX_ENOMEM, "decoder: out of memory");
    } else if (!strcmp(ty, "BPEDecoder")) {
        d->kind = DEC_BPE;
        const char *c = "</w>";
        size_t cl = 4;
        if (json_object_get(o, "suffix") && get_string(o, "suffix", &c, &cl, "decoder BPEDecoder", err)) return err->code;
        d->content = dup_n(c, cl);
        d->content_len = cl;
        if (!d->content) return err_set(err, MTPLX_ENOMEM, "decoder: out of memory");
    } else if (!strcmp(ty, "Sequence")) {
        d->kind = DEC_SEQUENCE;
        json_t *arr = json_object_get(o, "decoders");
        if (!json_is_array(arr)) return err_set(err, MTPLX_EBADFILE, "decoder Sequence: \"decoders\" must be an array");
        d->seq = mem_zalloc(json_array_size(arr) + 1, sizeof *d->seq, "decoder", err);
        if (!d->seq) return MTPLX_ENOMEM;
        for (size_t i = 0; i < json_array_size(arr); i++) {
            d->n_seq++;
            if (parse_decoder(json_array_get(arr, i), &d->seq[i], depth + 1, err)) return err->code;
        }
    } else
        return err_set(err, MTPLX_EUNSUPPORTED, "decoder type \"%s\" is not supported", ty);
    return 0;
}

/* ---- NUL inside JSON strings ----
 * jansson cannot hold NUL in an object key, but a vocab may have the token "\u0000". Before
 * parsing, every escaped \u0000 is rewritten to \uFDD0 (a noncharacter, same length), and the
 * strings that may hold it (vocab keys, merges, added tokens) are mapped back. */

static bool escape_nul(char *text, size_t n) {
    bool any = false;
    for (size_t i = 0; i + 6 <= n; i++) {
        if (text[i] != '\\' || memcmp(text + i, "\\u0000", 6)) continue;
        size_t k = i, bs = 0;
        while (k > 0 && text[k - 1] == '\\') { k--; bs++; }
        if (bs % 2) continue; /* the backslash is itself escaped */
        memcpy(text + i, "\\uFDD0", 6);
        any = true;
    }
    return any;
}

/* s with U+FDD0 turned back into NUL when t->nul_remap; may return s itself or tmp's bytes. */
static const char *unmap_nul(const tokenizer *t, const char *s, size_t n, tbuf *tmp, size_t *out_n) {
    *out_n = n;
    if (!t->nul_remap || !memmem(s, n, "\xEF\xB7\x90", 3)) return s;
    tmp->len = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 3 <= n && !memcmp(s + i, "\xEF\xB7\x90", 3)) {
            if (tbuf_putc(tmp, 0)) return NULL;
            i += 2;
        } else if (tbuf_putc(tmp, s[i])) return NULL;
    }
    *out_n = tmp->len;
    return tmp->p;
}

/* ---- model ---- */

static int parse_vocab(tokenizer *t, json_t *vocab, mtplx_err *err) {
    if (!json_is_object(vocab)) return err_set(err, MTPLX_EBADFILE, "model.vocab must be an object");
    size_t n = json_object_size(vocab);
    int32_t max_id = -1;
    const char *k;
    json_t *v;
    json_object_foreach(vocab, k, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= MAX_TOKEN_ID)
            return err_set(err, MTPLX_EBADFILE, "model.vocab[\"%.80s\"]: id must be an integer in [0, %d)", k, MAX_TOKEN_ID);
        if (json_integer_value(v) > max_id) max_id = (int32_t)json_integer_value(v);
    }
    t->n_model = max_id + 1;
    t->model_str = mem_zalloc((size_t)t->n_model + 1, sizeof *t->model_str, "vocab", err);
    t->model_len = mem_zalloc((size_t)t->n_model + 1, sizeof *t->model_len, "vocab", err);
    if (!t->model_str || !t->model_len || strmap_init(&t->model_map, n))
        return err_set(err, MTPLX_ENOMEM, "vocab: out of memory");
    void *iter = json_object_iter(vocab);
    tbuf fix = {0};
    while (iter) {
        size_t kl;
        const char *key = unmap_nul(t, json_object_iter_key(iter), json_object_iter_key_len(iter), &fix, &kl);
        if (!key) { tbuf_free(&fix); return err_set(err, MTPLX_ENOMEM, "vocab: out of memory"); }
        int32_t id = (int32_t)json_integer_value(json_object_iter_value(iter));
        if (strmap_put(&t->model_map, key, kl, id)) { tbuf_free(&fix); return err_set(err, MTPLX_ENOMEM, "vocab: out of memory"); }
        if (!t->model_str[id]) { /* two strings with one id: the first keeps id -> string */
            t->model_str[id] = dup_n(key, kl);
            t->model_len[id] = (uint32_t)kl;
            if (!t->model_str[id]) { tbuf_free(&fix); return err_set(err, MTPLX_ENOMEM, "vocab: out of memory"); }
        }
        iter = json_object_iter_next(vocab, iter);
    }
    tbuf_free(&fix);
    return 0;
}

static int merge_id(tokenizer *t, const char *s, size_t n, size_t rank, mtplx_err *err, int32_t *id) {
    *id = strmap_get(&t->model_map, s, n);
    if (*id < 0) return err_set(err, MTPLX_EBADFILE, "model.merges[%zu]: token \"%.80s\" is not in the vocab", rank, s);
    return 0;
}

static int parse_merges(tokenizer *t, json_t *merges, mtplx_err *err) {
    if (!merges || json_is_null(merges)) return pairmap_init(&t->merges, 16) ? err_set(err, MTPLX_ENOMEM, "merges: out of memory") : 0;
    if (!json_is_array(merges)) return err_set(err, MTPLX_EBADFILE, "model.merges must be an array");
    size_t n = json_array_size(merges);
    if (pairmap_init(&t->merges, n) || pairmap_init(&t->joinable, 4096)) return err_set(err, MTPLX_ENOMEM, "merges: out of memory");
    size_t pl = t->cont_prefix ? strlen(t->cont_prefix) : 0;
    tbuf cat = {0};
    bool join_all = true; /* every merge is in t->joinable; else the table is dropped */
    for (size_t r = 0; r < n; r++) {
        json_t *m = json_array_get(merges, r);
        const char *a, *b;
        size_t al, bl;
        char *split_copy = NULL;
        if (json_is_string(m)) {
            const char *s = json_string_value(m);
            size_t sl = json_string_length(m);
            const char *sp = memchr(s, ' ', sl);
            if (!sp || memchr(sp + 1, ' ', sl - (size_t)(sp + 1 - s))) {
                tbuf_free(&cat);
                return err_set(err, MTPLX_EBADFILE, "model.merges[%zu]: \"%.80s\" is not two tokens separated by one space", r, s);
            }
            a = s; al = (size_t)(sp - s);
            b = sp + 1; bl = sl - al - 1;
            split_copy = dup_n(a, al);
            if (!split_copy) { tbuf_free(&cat); return err_set(err, MTPLX_ENOMEM, "merges: out of memory"); }
            a = split_copy;
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0)); al = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1)); bl = json_string_length(json_array_get(m, 1));
        } else {
            tbuf_free(&cat);
            return err_set(err, MTPLX_EBADFILE, "model.merges[%zu]: must be \"a b\" or [\"a\", \"b\"]", r);
        }
        tbuf fa = {0}, fb = {0};
        a = unmap_nul(t, a, al, &fa, &al);
        b = unmap_nul(t, b, bl, &fb, &bl);
        if (!a || !b) { tbuf_free(&fa); tbuf_free(&fb); free(split_copy); tbuf_free(&cat); return err_set(err, MTPLX_ENOMEM, "merges: out of memory"); }
        uint32_t ca = 0, cb = 0; /* last character of a, first of b */
        bool join_ok = !t->cont_prefix && !t->end_suffix && al && bl;
        if (join_ok) {
            size_t k = al - 1;
            while (k > 0 && ((unsigned char)a[k] & 0xC0) == 0x80) k--;
            join_ok = utf8_decode((const unsigned char *)a + k, al - k, &ca) && utf8_decode((const unsigned char *)b, bl, &cb);
        }
        int32_t ia, ib, io;
        cat.len = 0;
        size_t skip = (pl && bl >= pl && !memcmp(b, t->cont_prefix, pl)) ? pl : 0;
        int rc = merge_id(t, a, al, r, err, &ia);
        if (!rc) rc = merge_id(t, b, bl, r, err, &ib);
        if (!rc && (tbuf_put(&cat, a, al) || tbuf_put(&cat, b + skip, bl - skip))) rc = err_set(err, MTPLX_ENOMEM, "merges: out of memory");
        if (!rc) rc = merge_id(t, cat.p, cat.len, r, err, &io);
        free(split_copy);
        tbuf_free(&fa);
        tbuf_free(&fb);
        if (rc) { tbuf_free(&cat); return rc; }
        pairmap_put(&t->merges, ia, ib, (int32_t)r, io);
        if (join_ok) pairmap_put(&t->joinable, (int32_t)ca, (int32_t)cb, 0, 0);
        else join_all = false;
    }
    tbuf_free(&cat);
    if (t->merges.n == 0 && n) return err_set(err, MTPLX_ENOMEM, "merges: out of memory");
    if (!join_all) {
        pairmap_free(&t->joinable); /* n == 0: no cuts */
        if (pairmap_init(&t->joinable, 16)) return err_set(err, MTPLX_ENOMEM, "merges: out of memory");
    }
    return 0;
}

static int opt_string(json_t *o, const char *key, char **out, const char *what, mtplx_err *err) {
    json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v)) return err_set(err, MTPLX_EBADFILE, "%s: \"%s\" must be a string or null", what, key);
    if (!json_string_length(v)) return 0;
    *out = dup_n(json_string_value(v), json_string_length(v));
    return *out ? 0 : err_set(err, MTPLX_ENOMEM, "%s: out of memory", what);
}

static int parse_model(tokenizer *t, json_t *m, mtplx_err *err) {
    if (!json_is_object(m)) return err_set(err, MTPLX_EBADFILE, "\"model\" must be an object");
    const char *ty = type_of(m);
    if (ty && strcmp(ty, "BPE")) return err_set(err, MTPLX_EUNSUPPORTED, "model type \"%s\" is not supported (only BPE)", ty);
    if (!ty && !json_object_get(m, "merges")) return err_set(err, MTPLX_EUNSUPPORTED, "model without a type is not BPE");
    if (get_bool(m, "ignore_merges", false, &t->ignore_merges, "model", err) ||
        get_bool(m, "byte_fallback", false, &t->byte_fallback, "model", err) ||
        get_bool(m, "fuse_unk", false, &t->fuse_unk, "model", err) ||
        opt_string(m, "continuing_subword_prefix", &t->cont_prefix, "model", err) ||
        opt_string(m, "end_of_word_suffix", &t->end_suffix, "model", err))
        return err->code;
    if (parse_vocab(t, json_object_get(m, "vocab"), err)) return err->code;
    if (parse_merges(t, json_object_get(m, "merges"), err)) return err->code;
    t->unk_id = -1;
    json_t *unk = json_object_get(m, "unk_token");
    if (json_is_string(unk)) {
        t->unk_id = strmap_get(&t->model_map, json_string_value(unk), json_string_length(unk));
        if (t->unk_id < 0)
            return err_set(err, MTPLX_EBADFILE, "model.unk_token \"%.80s\" is not in the vocab", json_string_value(unk));
    } else if (unk && !json_is_null(unk))
        return err_set(err, MTPLX_EBADFILE, "model.unk_token must be a string or null");
    return 0;
}

static int parse_added(tokenizer *t, json_t *arr, mtplx_err *err) {
    if (!arr || json_is_null(arr)) return 0;
    if (!json_is_array(arr)) return err_set(err, MTPLX_EBADFILE, "\"added_tokens\" must be an array");
    size_t n = json_array_size(arr);
    t->added = mem_zalloc(n + 1, sizeof *t->added, "added tokens", err);
    if (!t->added) return MTPLX_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        char what[64];
        snprintf(what, sizeof what, "added_tokens[%zu]", i);
        if (!json_is_object(o)) return err_set(err, MTPLX_EBADFILE, "%s must be an object", what);
        json_t *id = json_object_get(o, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= MAX_TOKEN_ID)
            return err_set(err, MTPLX_EBADFILE, "%s: \"id\" must be an integer in [0, %d)", what, MAX_TOKEN_ID);
        const char *c;
        size_t cl;
        added_token *a = &t->added[t->n_added];
        if (get_string(o, "content", &c, &cl, what, err) || get_bool(o, "special", false, &a->special, what, err) ||
            get_bool(o, "normalized", !a->special, &a->normalized, what, err) ||
            get_bool(o, "lstrip", false, &a->lstrip, what, err) || get_bool(o, "rstrip", false, &a->rstrip, what, err) ||
            get_bool(o, "single_word", false, &a->single_word, what, err))
            return err->code;
        if (utf8_first_invalid((const unsigned char *)c, cl) != cl)
            return err_set(err, MTPLX_EBADFILE, "%s: content is not valid UTF-8", what);
        tbuf fix = {0};
        c = unmap_nul(t, c, cl, &fix, &cl);
        a->id = (int32_t)json_integer_value(id);
        a->content = c ? dup_n(c, cl) : NULL;
        a->len = cl;
        tbuf_free(&fix);
        if (!a->content) return err_set(err, MTPLX_ENOMEM, "added tokens: out of memory");
        t->n_added++;
    }
    return 0;
}

/* ---- transformers 5.x class overrides ---- */

static int set_single_pretok_split_bytelevel(tokenizer *t, const char *pattern, bool add_prefix_space, mtplx_err *err) {
    pretok *p = mem_zalloc(1, sizeof *p, "pre_tokenizer", err);
    if (!p) return MTPLX_ENOMEM;
    p->kind = PRE_SEQUENCE;
    p->seq = mem_zalloc(2, sizeof *p->seq, "pre_tokenizer", err);
    if (!p->seq) { free(p); return MTPLX_ENOMEM; }
    p->n_seq = 2;
    p->seq[0].kind = PRE_SPLIT;
    p->seq[0].behavior = SPLIT_ISOLATED;
    p->seq[0].pat.kind = PAT_REGEX;
    p->seq[1].kind = PRE_BYTELEVEL;
    p->seq[1].add_prefix_space = add_prefix_space;
    p->seq[1].use_regex = false;
    pretok_free(t->pre);
    t->pre = p;
    return tregex_compile(&p->seq[0].pat.re, pattern, strlen(pattern), err);
}

static bool cfg_bool(json_t *cfg, const char *key, bool dflt) {
    json_t *v = json_object_get(cfg, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

/* transformers 5 builds these classes' pipelines in their __init__ and keeps only vocab, merges
 * and added tokens from tokenizer.json (tokenization_utils_tokenizers.convert_to_native_format). */
static int apply_class_override(tokenizer *t, json_t *cfg, const char *cls_in, mtplx_err *err) {
    char cls[128];
    snprintf(cls, sizeof cls, "%s", cls_in);
    size_t l = strlen(cls);
    if (l > 4 && !strcmp(cls + l - 4, "Fast")) cls[l - 4] = 0;
    bool qwen2 = !strcmp(cls, "Qwen2Tokenizer"), qwen35 = !strcmp(cls, "Qwen3_5Tokenizer");
    if (qwen2 || qwen35) {
        t->unk_id = -1;
        t->byte_fallback = false;
        t->fuse_unk = false;
        t->ignore_merges = false;
        free(t->cont_prefix); t->cont_prefix = NULL;
        free(t->end_suffix); t->end_suffix = NULL;
        normalizer_free(t->norm);
        t->norm = mem_zalloc(1, sizeof *t->norm, "normalizer", err);
        if (!t->norm) return MTPLX_ENOMEM;
        t->norm->kind = NORM_NFC;
        if (set_single_pretok_split_bytelevel(t, qwen35 ? QWEN3_5_PATTERN : QWEN2_PATTERN, cfg_bool(cfg, "add_prefix_space", false), err))
            return err->code;
        decoder_free(t->dec);
        t->dec = mem_zalloc(1, sizeof *t->dec, "decoder", err);
        if (!t->dec) return MTPLX_ENOMEM;
        t->dec->kind = DEC_BYTELEVEL;
        return 0;
    }
    if (!strcmp(cls, "LlamaTokenizer")) {
        bool add_prefix_space = cfg_bool(cfg, "add_prefix_space", true);
        bool legacy = cfg_bool(cfg, "legacy", false);
        t->unk_id = -1; /* BPE(...) is built without unk_token */
        t->byte_fallback = true;
        t->fuse_unk = true;
        t->ignore_merges = false;
        free(t->cont_prefix); t->cont_prefix = NULL;
        free(t->end_suffix); t->end_suffix = NULL;
        normalizer_free(t->norm);
        t->norm = NULL;
        pretok_free(t->pre);
        t->pre = mem_zalloc(1, sizeof *t->pre, "pre_tokenizer", err);
        if (!t->pre) return MTPLX_ENOMEM;
        t->pre->kind = PRE_METASPACE;
        t->pre->replacement = 0x2581;
        t->pre->prepend = add_prefix_space ? (legacy ? PREPEND_ALWAYS : PREPEND_FIRST) : PREPEND_NEVER;
        t->pre->split = false;
        decoder_free(t->dec);
        decoder *d = mem_zalloc(1, sizeof *d, "decoder", err);
        if (!d) return MTPLX_ENOMEM;
        t->dec = d;
        d->kind = DEC_SEQUENCE;
        d->seq = mem_zalloc(4, sizeof *d->seq, "decoder", err);
        if (!d->seq) return MTPLX_ENOMEM;
        d->seq[0].kind = DEC_REPLACE;
        d->seq[0].pat.kind = PAT_STRING;
        d->seq[0].pat.str = dup_n("\xE2\x96\x81", 3);
        d->seq[0].pat.str_len = 3;
        d->seq[0].content = dup_n(" ", 1);
        d->seq[0].content_len = 1;
        d->seq[1].kind = DEC_BYTEFALLBACK;
        d->seq[2].kind = DEC_FUSE;
        d->n_seq = 3;
        if (add_prefix_space) {
            d->seq[3].kind = DEC_STRIP;
            d->seq[3].content = dup_n(" ", 1);
            d->seq[3].content_len = 1;
            d->seq[3].strip_start = 1;
            d->n_seq = 4;
        }
        if (!d->seq[0].pat.str || !d->seq[0].content || (add_prefix_space && !d->seq[3].content))
            return err_set(err, MTPLX_ENOMEM, "decoder: out of memory");
        return 0;
    }
    return 0;
}

/* ---- derived tables ---- */

static void build_byte_tables(tokenizer *t) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        uint32_t cp;
        if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) cp = (uint32_t)b;
        else cp = 256 + (uint32_t)n++;
        tbuf tmp = {0};
        tbuf_put_cp(&tmp, cp);
        memcpy(t->byte_char[b], tmp.p, tmp.len);
        t->byte_char_len[b] = (uint8_t)tmp.len;
        tbuf_free(&tmp);
    }
    for (int c = 0; c < 0x180; c++) t->char_byte[c] = -1;
    n = 0;
    for (int b = 0; b < 256; b++) {
        uint32_t cp;
        if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) cp = (uint32_t)b;
        else cp = 256 + (uint32_t)n++;
        t->char_byte[cp] = (int16_t)b;
    }
    for (int b = 0; b < 256; b++) {
        t->byte_sym[b] = strmap_get(&t->model_map, t->byte_char[b], t->byte_char_len[b]);
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_fallback_id[b] = strmap_get(&t->model_map, name, 6);
    }
}

/* Count ByteLevel stages; *last = the pipeline's final stage is ByteLevel. */
static int count_bytelevel(const pretok *p, bool *needs_gpt2) {
    if (!p) return 0;
    if (p->kind == PRE_BYTELEVEL) { if (p->use_regex) *needs_gpt2 = true; return 1; }
    int n = 0;
    if (p->kind == PRE_SEQUENCE)
        for (int i = 0; i < p->n_seq; i++) n += count_bytelevel(&p->seq[i], needs_gpt2);
    return n;
}

static bool last_is_bytelevel(const pretok *p) {
    if (!p) return false;
    if (p->kind == PRE_BYTELEVEL) return true;
    if (p->kind == PRE_SEQUENCE && p->n_seq > 0) return last_is_bytelevel(&p->seq[p->n_seq - 1]);
    return false;
}

static int finish(tokenizer *t, mtplx_err *err) {
    build_byte_tables(t);
    bool needs_gpt2 = false;
    int nbl = count_bytelevel(t->pre, &needs_gpt2);
    t->bytelevel_last = nbl == 1 && last_is_bytelevel(t->pre) && !t->cont_prefix && !t->end_suffix;
    if (needs_gpt2 && tregex_compile(&t->gpt2_re, GPT2_PATTERN, strlen(GPT2_PATTERN), err)) return err->code;
    const pretok *p = t->pre;
    bool isolated_regex = p && p->kind == PRE_SPLIT && p->pat.kind == PAT_REGEX && p->behavior == SPLIT_ISOLATED && !p->invert;
    if (isolated_regex && nbl == 0) t->fast_split = &p->pat.re;
    if (p && p->kind == PRE_SEQUENCE && p->n_seq == 2 && t->bytelevel_last && !p->seq[1].add_prefix_space && !p->seq[1].use_regex) {
        const pretok *q = &p->seq[0];
        if (q->kind == PRE_SPLIT && q->pat.kind == PAT_REGEX && q->behavior == SPLIT_ISOLATED && !q->invert) t->fast_split = &q->pat.re;
    }
    if (p && p->kind == PRE_BYTELEVEL && t->bytelevel_last && !p->add_prefix_space && p->use_regex) t->fast_split = &t->gpt2_re;

    /* ids */
    t->n_ids = t->n_model;
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].id + 1 > t->n_ids) t->n_ids = t->added[i].id + 1;
    t->added_of_id = mem_alloc((size_t)t->n_ids + 1, sizeof *t->added_of_id, "added tokens", err);
    if (!t->added_of_id || strmap_init(&t->added_map, (size_t)t->n_added + 1)) return err_set(err, MTPLX_ENOMEM, "added tokens: out of memory");
    for (int32_t i = 0; i < t->n_ids; i++) t->added_of_id[i] = -1;
    trie_init(&t->trie_raw);
    trie_init(&t->trie_norm);
    enc_scratch sc;
    if (scratch_init(&sc, err)) return err->code;
    for (int i = 0; i < t->n_added; i++) {
        added_token *a = &t->added[i];
        t->added_of_id[a->id] = i; /* a later entry with the same id wins, as in a map */
        if (strmap_put(&t->added_map, a->content, a->len, a->id)) { scratch_free(&sc); return err_set(err, MTPLX_ENOMEM, "added tokens: out of memory"); }
        int rc;
        if (a->normalized && t->norm) {
            tbuf nb = {0};
            bool shifted = false;
            rc = normalizer_apply(t->norm, a->content, a->len, &nb, &sc, &shifted, err);
            if (!rc) rc = trie_add(&t->trie_norm, nb.p ? nb.p : "", nb.len, i);
            tbuf_free(&nb);
        } else rc = trie_add(a->normalized ? &t->trie_norm : &t->trie_raw, a->content, a->len, i);
        if (rc) { scratch_free(&sc); return err->code ? err->code : err_set(err, MTPLX_ENOMEM, "added tokens: out of memory"); }
    }
    scratch_free(&sc);

    /* decode fast path */
    t->dec_bytelevel_only = t->dec && t->dec->kind == DEC_BYTELEVEL;
    if (t->dec_bytelevel_only) {
        t->dec_bytes = mem_zalloc((size_t)t->n_ids + 1, sizeof *t->dec_bytes, "decoder", err);
        t->dec_len = mem_zalloc((size_t)t->n_ids + 1, sizeof *t->dec_len, "decoder", err);
        if (!t->dec_bytes || !t->dec_len) return MTPLX_ENOMEM;
        for (int32_t id = 0; id < t->n_ids; id++) {
            const char *s = NULL;
            size_t n = 0;
            if (t->added_of_id[id] >= 0) { s = t->added[t->added_of_id[id]].content; n = t->added[t->added_of_id[id]].len; }
            else if (id < t->n_model && t->model_str[id]) { s = t->model_str[id]; n = t->model_len[id]; }
            if (!s) continue;
            tbuf b = {0};
            const unsigned char *u = (const unsigned char *)s;
            size_t i = 0;
            bool all = true;
            while (i < n) {
                uint32_t cp;
                int l = utf8_decode(u + i, n - i, &cp);
                if (!l || cp >= 0x180 || t->char_byte[cp] < 0) { all = false; break; }
                tbuf_putc(&b, t->char_byte[cp]);
                i += (size_t)l;
            }
            if (!all) { b.len = 0; tbuf_put(&b, s, n); }
            if (tbuf_reserve(&b, 0)) return err_set(err, MTPLX_ENOMEM, "decoder: out of memory");
            t->dec_bytes[id] = b.p;
            t->dec_len[id] = (uint32_t)b.len;
        }
    }
    if (strmap_init(&t->cache.map, 4096)) return err_set(err, MTPLX_ENOMEM, "tokenizer: out of memory");
    return 0;
}

/* ---- config ---- */

static char *own(tokenizer *t, char *s) {
    if (!s) return NULL;
    if (t->n_cfg_own == (int)(sizeof t->cfg_own / sizeof t->cfg_own[0])) { free(s); return NULL; }
    t->cfg_own[t->n_cfg_own++] = s;
    return s;
}

/* "<s>" or {"content": "<s>", ...} -> copy owned by t, NULL otherwise. */
static const char *token_field(tokenizer *t, json_t *cfg, const char *key) {
    json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (!json_is_string(v)) return NULL;
    return own(t, dup_n(json_string_value(v), json_string_length(v)));
}

static int load_config(tokenizer *t, const char *dir, json_t *cfg, mtplx_err *err) {
    tok_config *c = &t->cfg;
    c->bos_id = c->eos_id = c->pad_id = c->unk_id = -1;
    c->bos_token = token_field(t, cfg, "bos_token");
    c->eos_token = token_field(t, cfg, "eos_token");
    c->pad_token = token_field(t, cfg, "pad_token");
    c->unk_token = token_field(t, cfg, "unk_token");
    if (c->bos_token) c->bos_id = tok_token_to_id(t, c->bos_token, strlen(c->bos_token));
    if (c->eos_token) c->eos_id = tok_token_to_id(t, c->eos_token, strlen(c->eos_token));
    if (c->pad_token) c->pad_id = tok_token_to_id(t, c->pad_token, strlen(c->pad_token));
    if (c->unk_token) c->unk_id = tok_token_to_id(t, c->unk_token, strlen(c->unk_token));
    json_t *cls = json_object_get(cfg, "tokenizer_class");
    if (json_is_string(cls)) c->tokenizer_class = own(t, dup_n(json_string_value(cls), json_string_length(cls)));

    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    if (file_exists(path)) {
        size_t n;
        char *s = file_read_all(path, &n, err);
        if (!s) return err->code;
        c->chat_template = own(t, s);
    } else {
        json_t *ct = json_object_get(cfg, "chat_template");
        if (json_is_string(ct)) c->chat_template = own(t, dup_n(json_string_value(ct), json_string_length(ct)));
        else if (json_is_array(ct)) {
            json_t *pick = NULL, *e;
            size_t i;
            json_array_foreach(ct, i, e) {
                json_t *nm = json_object_get(e, "name");
                if (json_is_string(nm) && !strcmp(json_string_value(nm), "default")) pick = e;
            }
            json_t *tpl = pick ? json_object_get(pick, "template") : NULL;
            if (json_is_string(tpl)) c->chat_template = own(t, dup_n(json_string_value(tpl), json_string_length(tpl)));
        }
    }
    return 0;
}

int tok_load_ex(const char *dir, unsigned flags, tokenizer **out, mtplx_err *err) {
    *out = NULL;
    if (!dir) return err_set(err, MTPLX_EINVAL, "tok_load: no directory");
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (!file_exists(path)) return err_set(err, MTPLX_EIO, "%s: no tokenizer.json in this directory", dir);
    size_t n;
    char *text = file_read_all(path, &n, err);
    if (!text) return err->code;
    json_error_t je;
    bool nul_remap = escape_nul(text, n);
    json_t *root = json_loadb(text, n, JSON_ALLOW_NUL, &je);
    free(text);
    if (!root) return err_set(err, MTPLX_EBADFILE, "%s: line %d: %s", path, je.line, je.text);

    char cpath[PATH_MAX];
    snprintf(cpath, sizeof cpath, "%s/tokenizer_config.json", dir);
    json_t *cfg = NULL;
    char *cfg_text = NULL;
    if (file_exists(cpath)) {
        size_t cn;
        cfg_text = file_read_all(cpath, &cn, err);
        if (!cfg_text) { json_decref(root); return err->code; }
        cfg = json_loadb(cfg_text, cn, JSON_DECODE_INT_AS_REAL, &je); /* model_max_length may be 1e30 */
        if (!cfg || !json_is_object(cfg)) {
            json_decref(root);
            json_decref(cfg);
            free(cfg_text);
            return err_set(err, MTPLX_EBADFILE, "%s: line %d: %s", cpath, je.line, cfg ? "not a JSON object" : je.text);
        }
    } else {
        cfg = json_object();
        cfg_text = dup_n("{}", 2);
    }

    tokenizer *t = mem_zalloc(1, sizeof *t, "tokenizer", err);
    int rc = t ? 0 : MTPLX_ENOMEM;
    if (t) {
        pthread_mutex_init(&t->cache.mu, NULL);
        t->nul_remap = nul_remap;
    }
    if (!rc && !json_is_object(root)) rc = err_set(err, MTPLX_EBADFILE, "top level is not an object");
    if (!rc) rc = parse_model(t, json_object_get(root, "model"), err);
    if (!rc) rc = parse_added(t, json_object_get(root, "added_tokens"), err);
    json_t *jn = json_object_get(root, "normalizer"), *jp = json_object_get(root, "pre_tokenizer"),
           *jd = json_object_get(root, "decoder");
    if (!rc && jn && !json_is_null(jn)) {
        t->norm = mem_zalloc(1, sizeof *t->norm, "normalizer", err);
        rc = t->norm ? parse_normalizer(jn, t->norm, 0, err) : MTPLX_ENOMEM;
    }
    if (!rc && jp && !json_is_null(jp)) {
        t->pre = mem_zalloc(1, sizeof *t->pre, "pre_tokenizer", err);
        rc = t->pre ? parse_pretok(jp, t->pre, 0, err) : MTPLX_ENOMEM;
    }
    if (!rc && jd && !json_is_null(jd)) {
        t->dec = mem_zalloc(1, sizeof *t->dec, "decoder", err);
        rc = t->dec ? parse_decoder(jd, t->dec, 0, err) : MTPLX_ENOMEM;
    }
    json_t *cls = json_object_get(cfg, "tokenizer_class");
    if (!rc && !(flags & TOK_LOAD_FILE_ONLY) && json_is_string(cls))
        rc = apply_class_override(t, cfg, json_string_value(cls), err);
    if (!rc) rc = finish(t, err);
    if (!rc) rc = load_config(t, dir, cfg, err);
    if (!rc) {
        t->cfg.config_json = own(t, cfg_text);
        cfg_text = NULL;
    }
    json_decref(root);
    json_decref(cfg);
    free(cfg_text);
    if (rc) {
        if (err && err->code) err_prefix(err, "%s", path);
        tok_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

int tok_load(const char *dir, tokenizer **out, mtplx_err *err) {
    return tok_load_ex(dir, 0, out, err);
}

/* ---- accessors ---- */

int tok_vocab_size(const tokenizer *t) {
    return t ? t->n_ids : 0;
}

/* Grows *a (elements of size sz, n + 1 of them) to V + 1, the new ones zeroed. Returns 0 or -1. */
static int grow_ids(void **a, size_t sz, int32_t n, int32_t V) {
    void *p = realloc(*a, ((size_t)V + 1) * sz);
    if (!p) return -1;
    memset((char *)p + ((size_t)n + 1) * sz, 0, (size_t)(V - n) * sz);
    *a = p;
    return 0;
}

int tok_cover_vocab(tokenizer *t, int32_t V, mtplx_err *err) {
    if (!t || V <= t->n_ids) return 0;
    if (grow_ids((void **)&t->added_of_id, sizeof *t->added_of_id, t->n_ids, V) ||
        (t->dec_bytes && grow_ids((void **)&t->dec_bytes, sizeof *t->dec_bytes, t->n_ids, V)) ||
        (t->dec_len && grow_ids((void **)&t->dec_len, sizeof *t->dec_len, t->n_ids, V)))
        return err_set(err, MTPLX_ENOMEM, "tokenizer: out of memory covering %d ids", (int)V);
    for (int32_t i = t->n_ids; i < V; i++) t->added_of_id[i] = -1;
    t->n_ids = V;
    return 0;
}

int32_t tok_token_to_id(const tokenizer *t, const char *s, size_t len) {
    if (!t || !s) return -1;
    int32_t id = strmap_get(&t->added_map, s, len);
    return id >= 0 ? id : strmap_get(&t->model_map, s, len);
}

const char *tok_id_to_token(const tokenizer *t, int32_t id) {
    if (!t || id < 0 || id >= t->n_ids) return NULL;
    if (t->added_of_id[id] >= 0) return t->added[t->added_of_id[id]].content;
    return id < t->n_model ? t->model_str[id] : NULL;
}

int tok_is_special(const tokenizer *t, int32_t id) {
    if (!t || id < 0 || id >= t->n_ids || t->added_of_id[id] < 0) return 0;
    return t->added[t->added_of_id[id]].special;
}

int tok_is_added(const tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->n_ids && t->added_of_id[id] >= 0;
}

const tok_config *tok_get_config(const tokenizer *t) {
    return t ? &t->cfg : NULL;
}

typedef struct {
    int64_t key; /* sort key: class << 32 | rank */
    int32_t id;
} rank_entry;

static int rank_entry_cmp(const void *a, const void *b) {
    const rank_entry *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int id_cmp(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int tok_common_ids(const tokenizer *t, int V, int n, int32_t *ids, mtplx_err *err) {
    if (!t || V < 1 || n < 1 || n > V) return err_set(err, MTPLX_EINVAL, "tok_common_ids: %d of %d ids", n, V);
    int32_t *rank = malloc(sizeof(int32_t) * (size_t)V);
    rank_entry *e = malloc(sizeof(rank_entry) * (size_t)V);
    if (!rank || !e) {
        free(rank);
        free(e);
        return err_set(err, MTPLX_ENOMEM, "tok_common_ids: out of memory");
    }
    for (int i = 0; i < V; i++) rank[i] = INT32_MAX;
    for (size_t s = 0; s < t->merges.cap; s++) {
        const pair_slot_t *sl = &t->merges.slot[s];
        if (sl->key != UINT64_MAX && sl->out >= 0 && sl->out < V && sl->rank < rank[sl->out]) rank[sl->out] = sl->rank;
    }
    for (int i = 0; i < V; i++) {
        int64_t cls;
        if (tok_is_added(t, i)) cls = 0;
        else if (i < t->n_model && t->model_str[i] && rank[i] == INT32_MAX) cls = 1; /* alphabet */
        else if (rank[i] != INT32_MAX) cls = 2;
        else cls = 3; /* holes, padding rows past the tokenizer */
        e[i] = (rank_entry){cls << 32 | (cls == 2 ? rank[i] : 0), i};
    }
    qsort(e, (size_t)V, sizeof *e, rank_entry_cmp);
    for (int i = 0; i < n; i++) ids[i] = e[i].id;
    qsort(ids, (size_t)n, sizeof *ids, id_cmp);
    free(rank);
    free(e);
    return 0;
}
