/* fuzz_grammar.c — libFuzzer harness for the structured-output grammar engine (src/grammar): the
 * schema compiler on hostile schemas and the runtime on random token streams.
 *
 * Input: a JSON Schema text, then a 0x00 byte, then a token stream (one byte per decision). The
 * schema is compiled (a refusal is fine; a crash, leak or unbounded time is not). When it compiles,
 * a matcher over a small synthetic vocabulary (every single byte, a few multi-byte JSON pieces and
 * partial UTF-8 characters, two stop ids) is driven by the stream: each byte picks one of the allowed
 * ids (or, when its top bit is set, rolls back a few steps). Checks, with abort() on violation:
 *   - a mask is never empty unless the sentence ended (no dead ends);
 *   - advancing an allowed id succeeds, a forbidden one fails and leaves the state unchanged;
 *   - rollback restores the mask bit for bit;
 *   - the bytes of an ended walk are accepted by grammar_accepts.
 * Without a 0x00 byte the whole input is the schema (compiler only). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/grammar/grammar.h"

static const char *const k_pieces[] = {"{\"", "\":", "\": ", "\", \"", "}", "},", "]", "[{", "true", "null", "\"\n",
                                       "\xc3", "\xa9", "\xe2\x82", "\xac\"", "12", "-0.", "e+", "\\u00", "\n  ",
                                       /* pattern / format strings: escapes, dates, addresses, 4-byte UTF-8 */
                                       "\\\\", "\\\"", "\\u20", "2024-", ":00Z\"", "@a.", "::", "\xf0\x9f", "\x98\x80"};
#define N_PIECES (int)(sizeof k_pieces / sizeof k_pieces[0])
#define V (256 + N_PIECES + 2)

static grammar_vocab *vocab(void) {
    static grammar_vocab *v;
    if (v) return v;
    static char bytes[256];
    const char *toks[V];
    size_t lens[V];
    uint8_t special[V];
    for (int i = 0; i < 256; i++) bytes[i] = (char)i, toks[i] = &bytes[i], lens[i] = 1, special[i] = 0;
    for (int i = 0; i < N_PIECES; i++) toks[256 + i] = k_pieces[i], lens[256 + i] = strlen(k_pieces[i]), special[256 + i] = 0;
    toks[V - 2] = "<eos>", lens[V - 2] = 5, special[V - 2] = 1;
    toks[V - 1] = "<eot>", lens[V - 1] = 5, special[V - 1] = 1;
    mtplx_err e;
    if (grammar_vocab_from_bytes(toks, lens, special, V, &v, &e)) abort();
    return v;
}

static int bit(const uint32_t *m, int id) { return (m[id >> 5] >> (id & 31)) & 1; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *z = memchr(data, 0, size);
    size_t slen = z ? (size_t)(z - data) : size;
    grammar *g = NULL;
    mtplx_err e;
    if (grammar_from_schema_text((const char *)data, slen, &g, &e)) return 0;
    if (!z) {
        grammar_free(g);
        return 0;
    }
    const int32_t stop[2] = {V - 2, V - 1};
    grammar_matcher *m;
    if (grammar_matcher_new(g, vocab(), stop, 2, NULL, &m, &e)) abort();
    const uint8_t *s = z + 1;
    size_t n = size - slen - 1;
    static uint32_t before[(V + 31) / 32];
    char text[4096];
    size_t tl = 0, lens[64];
    int depth = 0;
    for (size_t i = 0; i < n && i < 400; i++) {
        const uint32_t *mk = grammar_matcher_mask(m, &e);
        if (!mk) abort();
        int allowed[V], na = 0;
        for (int id = 0; id < V; id++)
            if (bit(mk, id)) allowed[na++] = id;
        if (na == 0) {
            if (!grammar_matcher_ended(m)) abort(); /* a dead end */
            break;
        }
        memcpy(before, mk, sizeof before);
        /* roll back up to 3 steps, then re-check one mask; the matcher keeps only the last 32
         * advances (grammar.h), so never more than it can undo, or text and state would part */
        int undo = grammar_matcher_history(m) < depth ? grammar_matcher_history(m) : depth;
        if ((s[i] & 0x80) && undo > 0) {
            int k = 1 + (s[i] & 3) % 3;
            if (k > undo) k = undo;
            grammar_matcher_rollback(m, k);
            depth -= k;
            for (int j = 0; j < k; j++) tl -= lens[depth + j];
            continue;
        }
        int forbidden = -1;
        for (int id = s[i] % V; id < V && forbidden < 0; id++)
            if (!bit(mk, id)) forbidden = id;
        if (forbidden >= 0) {
            if (!grammar_matcher_advance(m, forbidden, &e)) abort();
            const uint32_t *again = grammar_matcher_mask(m, &e);
            if (!again || memcmp(again, before, sizeof before)) abort(); /* a refused id changed the state */
        }
        int pick = allowed[s[i] % na];
        if (grammar_matcher_advance(m, pick, &e)) abort();
        if (pick >= V - 2) break; /* a stop id: the output is complete */
        const char *piece = pick < 256 ? (const char[]){(char)pick} : k_pieces[pick - 256];
        size_t pl = pick < 256 ? 1 : strlen(k_pieces[pick - 256]);
        if (depth == 64 || tl + pl > sizeof text) break;
        memcpy(text + tl, piece, pl);
        tl += pl;
        lens[depth++] = pl;
        if (depth == 30) { /* rollback restores the mask exactly */
            const uint32_t *cur = grammar_matcher_mask(m, &e);
            memcpy(before, cur, sizeof before);
            int32_t t = -1;
            for (int id = 0; id < V - 2 && t < 0; id++)
                if (bit(cur, id)) t = id;
            if (t >= 0 && !grammar_matcher_advance(m, t, &e)) {
                grammar_matcher_rollback(m, 1);
                if (memcmp(grammar_matcher_mask(m, &e), before, sizeof before)) abort();
            }
        }
        if (grammar_matcher_ended(m)) {
            if (!grammar_accepts(g, text, tl)) abort();
            break;
        }
    }
    grammar_matcher_free(m);
    grammar_free(g);
    return 0;
}
