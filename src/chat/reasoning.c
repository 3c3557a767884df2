/* reasoning.c — see reasoning.h. A two-state machine over a pending buffer: scan for '<', decide
 * whether it starts one of the two markers, hold it back while that is still undecided. */
#include "reasoning.h"

#include <string.h>

static const char OPEN[] = "<think>";
static const char CLOSE[] = "</think>";

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

void reasoning_init(reasoning_parser *r, int start_in_reasoning) {
    memset(r, 0, sizeof *r);
    r->in_reasoning = start_in_reasoning ? 1 : 0;
    r->seg_start = 1;
}

void reasoning_free(reasoning_parser *r) {
    sbuf_free(&r->pending);
    sbuf_free(&r->ws_hold);
}

static int emit_raw(reasoning_parser *r, const char *s, size_t n, reasoning_emit_fn emit, void *user) {
    if (!n) return 0;
    if (r->in_reasoning) r->n_reasoning += n;
    else r->n_content += n;
    return emit(user, r->in_reasoning, s, n);
}

/* Emit text belonging to the current segment, applying the whitespace rules. */
static int emit_text(reasoning_parser *r, const char *s, size_t n, reasoning_emit_fn emit, void *user) {
    if (r->seg_start) {
        while (n && is_ws(*s)) s++, n--;
        if (!n) return 0;
        r->seg_start = 0;
    }
    if (!r->in_reasoning) return emit_raw(r, s, n, emit, user);
    size_t body = n;
    while (body && is_ws(s[body - 1])) body--;
    if (body) {
        int rc = emit_raw(r, r->ws_hold.p, r->ws_hold.len, emit, user);
        sbuf_clear(&r->ws_hold);
        if (rc) return rc;
        if ((rc = emit_raw(r, s, body, emit, user))) return rc;
    }
    if (body < n && sbuf_append(&r->ws_hold, s + body, n - body)) return -1;
    return 0;
}

static void switch_mode(reasoning_parser *r, int to_reasoning) {
    r->in_reasoning = to_reasoning;
    r->seg_start = 1;
    sbuf_clear(&r->ws_hold);  /* trailing whitespace of the segment that just ended */
}

/* 1 when s[0..n) is a proper prefix of marker m. */
static int proper_prefix(const char *s, size_t n, const char *m) {
    size_t ml = strlen(m);
    return n < ml && memcmp(s, m, n) == 0;
}

static int process(reasoning_parser *r, int final, reasoning_emit_fn emit, void *user) {
    const char *p = r->pending.p;
    size_t len = r->pending.len, pos = 0;
    int rc = 0;
    while (pos < len) {
        const char *lt = memchr(p + pos, '<', len - pos);
        size_t at = lt ? (size_t)(lt - p) : len;
        if ((rc = emit_text(r, p + pos, at - pos, emit, user))) break;
        pos = at;
        if (pos == len) break;
        size_t rest = len - pos;
        if (rest >= sizeof CLOSE - 1 && memcmp(p + pos, CLOSE, sizeof CLOSE - 1) == 0) {
            switch_mode(r, 0);
            pos += sizeof CLOSE - 1;
        } else if (rest >= sizeof OPEN - 1 && memcmp(p + pos, OPEN, sizeof OPEN - 1) == 0) {
            if (!r->in_reasoning) switch_mode(r, 1);  /* inside reasoning a re-open is swallowed */
            pos += sizeof OPEN - 1;
        } else if (!final && (proper_prefix(p + pos, rest, OPEN) || proper_prefix(p + pos, rest, CLOSE))) {
            break;  /* undecided: keep for the next chunk */
        } else {
            if ((rc = emit_text(r, "<", 1, emit, user))) break;
            pos += 1;
        }
    }
    sbuf_consume(&r->pending, pos);
    return rc;
}

int reasoning_feed(reasoning_parser *r, const char *s, size_t n, reasoning_emit_fn emit, void *user) {
    if (!n) return 0;
    if (sbuf_append(&r->pending, s, n)) return -1;
    return process(r, 0, emit, user);
}

int reasoning_finish(reasoning_parser *r, reasoning_emit_fn emit, void *user) {
    int rc = process(r, 1, emit, user);
    sbuf_clear(&r->pending);
    sbuf_clear(&r->ws_hold);  /* trailing whitespace of the last reasoning segment */
    return rc;
}

int reasoning_prompt_opens_think(const char *prompt) {
    const char *open = NULL, *q = prompt;
    while ((q = strstr(q, OPEN))) open = q, q += sizeof OPEN - 1;
    if (!open) return 0;
    return strstr(open, CLOSE) == NULL;
}
