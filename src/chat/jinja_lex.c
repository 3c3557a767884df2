/* jinja_lex.c — template source -> tokens, with Jinja2's whitespace rules as HF configures them.
 *
 * Newlines are normalised to "\n" and one trailing newline is dropped (keep_trailing_newline=False).
 * Around tags: `{%-`/`{{-`/`{#-` strip all whitespace before the tag, `-%}`/`-}}`/`-#}` all
 * whitespace after it; trim_blocks removes the first newline after a block or comment tag (`+%}`
 * keeps it); lstrip_blocks removes spaces/tabs between the start of a line and a block or comment
 * tag (`{%+` keeps them). `{% raw %}...{% endraw %}` passes its body through as data. Inside a tag,
 * tokens are names, numbers, strings (Python escapes) and operators; a closing delimiter only ends
 * the tag when brackets are balanced, as in Jinja. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_int.h"

typedef struct {
    jctx *c;
    const char *s;
    size_t n, pos;
    int line;
    tok *t;
    size_t nt, cap;
    int line_starting;     /* the previous match ended with a newline (Jinja's lstrip rule) */
} lexer;

static void emit(lexer *L, tok t) {
    if (L->nt == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        tok *nt = jx_alloc(L->c, cap * sizeof(tok));
        if (L->nt) memcpy(nt, L->t, L->nt * sizeof(tok));
        L->t = nt;
        L->cap = cap;
    }
    L->t[L->nt++] = t;
}

static int count_nl(const char *p, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += p[i] == '\n';
    return k;
}

/* Python-style whitespace at s[i] (ASCII fast path); returns its byte length or 0. */
static size_t ws_at(const char *s, size_t n, size_t i) {
    unsigned char ch = (unsigned char)s[i];
    if (ch < 0x80) return py_isspace(ch) ? 1 : 0;
    size_t adv;
    uint32_t cp = u8_decode(s + i, n - i, &adv);
    return py_isspace(cp) ? adv : 0;
}

/* Length of text after stripping trailing whitespace (str.rstrip()). */
static size_t rstrip_len(const char *s, size_t n) {
    size_t end = n;
    while (end > 0) {
        size_t st = end - 1;
        while (st > 0 && ((unsigned char)s[st] & 0xc0) == 0x80) st--;
        if (!ws_at(s, end, st)) break;
        end = st;
    }
    return end;
}

static size_t skip_ws(const char *s, size_t n, size_t i) {
    size_t w;
    while (i < n && (w = ws_at(s, n, i))) i += w;
    return i;
}

static void emit_data(lexer *L, const char *p, size_t n, int line) {
    if (n == 0) return;
    tok t = {.type = T_DATA, .line = line, .s = p, .n = n};
    emit(L, t);
}

/* Apply `{%-` stripping or lstrip_blocks to the data before a tag; returns the kept length. */
static size_t strip_before(lexer *L, const char *text, size_t n, char sign, int lstrip_applies) {
    if (sign == '-') return rstrip_len(text, n);
    if (sign != '+' && lstrip_applies) {
        size_t l_pos = 0;
        for (size_t i = n; i > 0; i--)
            if (text[i - 1] == '\n') { l_pos = i; break; }
        if (l_pos > 0 || L->line_starting) {
            size_t i = l_pos;
            if (i < n) {
                size_t j = skip_ws(text, n, i);
                if (j == n) return l_pos;
            }
        }
    }
    return n;
}

/* Decode a Python string literal body (between the quotes) with unicode-escape semantics. */
static void decode_string(lexer *L, const char *p, size_t n, int line, tok *out) {
    char *o = jx_alloc(L->c, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '\\' || i + 1 >= n) { o[k++] = p[i]; continue; }
        char e = p[++i];
        uint32_t cp = 0;
        int hex = 0;
        switch (e) {
        case '\n': continue;
        case '\\': o[k++] = '\\'; continue;
        case '\'': o[k++] = '\''; continue;
        case '"': o[k++] = '"'; continue;
        case 'a': o[k++] = '\a'; continue;
        case 'b': o[k++] = '\b'; continue;
        case 'f': o[k++] = '\f'; continue;
        case 'n': o[k++] = '\n'; continue;
        case 'r': o[k++] = '\r'; continue;
        case 't': o[k++] = '\t'; continue;
        case 'v': o[k++] = '\v'; continue;
        case 'x': hex = 2; break;
        case 'u': hex = 4; break;
        case 'U': hex = 8; break;
        default:
            if (e >= '0' && e <= '7') {
                int d = 0;
                while (d < 3 && i < n && p[i] >= '0' && p[i] <= '7') { cp = cp * 8 + (uint32_t)(p[i] - '0'); i++; d++; }
                i--;
                k += u8_encode(cp, o + k);
                continue;
            }
            o[k++] = '\\';
            o[k++] = e;
            continue;
        }
        for (int d = 0; d < hex; d++) {
            char h = i + 1 < n ? p[i + 1] : 0;
            int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (v < 0) jx_fail(L->c, line, "truncated \\%c escape in string literal", e);
            cp = cp * 16 + (uint32_t)v;
            i++;
        }
        if (cp > 0x10ffff) jx_fail(L->c, line, "illegal Unicode character in string literal");
        if (cp >= 0xd800 && cp <= 0xdfff) jx_fail(L->c, line, "string literal contains a lone surrogate \\u%04x", cp);
        k += u8_encode(cp, o + k);
    }
    o[k] = 0;
    out->s = o;
    out->n = k;
}

static int is_digit(char ch) { return ch >= '0' && ch <= '9'; }
static int is_name_start(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_'; }

/* digits with single underscores between them: returns end index, or i if none */
static size_t scan_digits(const char *s, size_t n, size_t i) {
    if (i >= n || !is_digit(s[i])) return i;
    while (i < n) {
        if (is_digit(s[i])) i++;
        else if (s[i] == '_' && i + 1 < n && is_digit(s[i + 1])) i++;
        else break;
    }
    return i;
}

static void number_value(lexer *L, const char *p, size_t n, int line, tok *t, int is_float) {
    char buf[128];
    size_t k = 0;
    for (size_t i = 0; i < n && k < sizeof buf - 1; i++)
        if (p[i] != '_') buf[k++] = p[i];
    buf[k] = 0;
    if (n >= sizeof buf) jx_fail(L->c, line, "number literal too long");
    if (is_float) {
        t->type = T_FLOAT;
        t->f = strtod(buf, NULL);
        return;
    }
    t->type = T_INT;
    int base = 10;
    const char *d = buf;
    if (k > 1 && buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X')) { base = 16; d += 2; }
    else if (k > 1 && buf[0] == '0' && (buf[1] == 'o' || buf[1] == 'O')) { base = 8; d += 2; }
    else if (k > 1 && buf[0] == '0' && (buf[1] == 'b' || buf[1] == 'B')) { base = 2; d += 2; }
    errno = 0;
    unsigned long long v = strtoull(d, NULL, base);
    if (errno == ERANGE || v > (unsigned long long)INT64_MAX)
        jx_fail(L->c, line, "integer literal %s is too large", buf);
    t->i = (int64_t)v;
}

/* Tokens inside a {{ }} or {% %} tag, up to and including its end. */
static void lex_tag(lexer *L, int is_block, int begin_line) {
    const char *s = L->s;
    size_t n = L->n;
    char stack[256];
    int depth = 0;
    for (;;) {
        size_t i = L->pos;
        if (i >= n)
            jx_fail(L->c, begin_line, "unexpected end of template: %s tag opened here was never closed",
                    is_block ? "{%" : "{{");
        /* end of tag (only when brackets are balanced) */
        if (depth == 0) {
            if (is_block) {
                if (i + 3 <= n && !strncmp(s + i, "+%}", 3)) {
                    tok t = {.type = T_BLOCK_END, .line = L->line};
                    emit(L, t);
                    L->pos = i + 3;
                    L->line_starting = 0;
                    return;
                }
                if (i + 3 <= n && !strncmp(s + i, "-%}", 3)) {
                    tok t = {.type = T_BLOCK_END, .line = L->line};
                    emit(L, t);
                    size_t j = skip_ws(s, n, i + 3);
                    L->line += count_nl(s + i, j - i);
                    L->line_starting = j > i + 3 && s[j - 1] == '\n';
                    L->pos = j;
                    return;
                }
                if (i + 2 <= n && !strncmp(s + i, "%}", 2)) {
                    tok t = {.type = T_BLOCK_END, .line = L->line};
                    emit(L, t);
                    size_t j = i + 2;
                    if (j < n && s[j] == '\n') { j++; L->line++; L->line_starting = 1; }
                    else L->line_starting = 0;
                    L->pos = j;
                    return;
                }
            } else {
                if (i + 3 <= n && !strncmp(s + i, "-}}", 3)) {
                    tok t = {.type = T_VAR_END, .line = L->line};
                    emit(L, t);
                    size_t j = skip_ws(s, n, i + 3);
                    L->line += count_nl(s + i, j - i);
                    L->line_starting = j > i + 3 && s[j - 1] == '\n';
                    L->pos = j;
                    return;
                }
                if (i + 2 <= n && !strncmp(s + i, "}}", 2)) {
                    tok t = {.type = T_VAR_END, .line = L->line};
                    emit(L, t);
                    L->pos = i + 2;
                    L->line_starting = 0;
                    return;
                }
            }
        }
        size_t w = ws_at(s, n, i);
        if (w) {
            size_t j = skip_ws(s, n, i);
            L->line += count_nl(s + i, j - i);
            L->pos = j;
            continue;
        }
        char ch = s[i];
        tok t = {.line = L->line};
        if (is_digit(ch)) {
            size_t j = scan_digits(s, n, i);
            int is_float = 0;
            int prev_dot = i > 0 && s[i - 1] == '.';
            size_t fend = j;
            if (!prev_dot) {
                if (fend + 1 < n && s[fend] == '.' && is_digit(s[fend + 1])) { fend = scan_digits(s, n, fend + 1); is_float = 1; }
                if (fend < n && (s[fend] == 'e' || s[fend] == 'E')) {
                    size_t k = fend + 1;
                    if (k < n && (s[k] == '+' || s[k] == '-')) k++;
                    size_t e = scan_digits(s, n, k);
                    if (e > k) { fend = e; is_float = 1; }
                }
            }
            if (is_float) {
                number_value(L, s + i, fend - i, L->line, &t, 1);
                L->pos = fend;
            } else {
                /* integer: 0x / 0o / 0b prefixes, or a decimal without a leading zero */
                size_t k = i;
                if (ch == '0' && i + 1 < n && strchr("xXoObB", s[i + 1]) && s[i + 1]) {
                    char kind = (char)(s[i + 1] | 0x20);
                    k = i + 2;
                    while (k < n) {
                        char d = s[k];
                        int ok = kind == 'x' ? ((d >= '0' && d <= '9') || ((d | 0x20) >= 'a' && (d | 0x20) <= 'f'))
                                 : kind == 'o' ? (d >= '0' && d <= '7') : (d == '0' || d == '1');
                        if (ok || (d == '_' && k + 1 < n)) k++;
                        else break;
                    }
                    if (k == i + 2) k = i + 1; /* just "0" */
                } else if (ch == '0') {
                    k = i + 1;
                    while (k < n && (s[k] == '0' || (s[k] == '_' && k + 1 < n && s[k + 1] == '0'))) k++;
                } else {
                    k = j;
                }
                number_value(L, s + i, k - i, L->line, &t, 0);
                L->pos = k;
            }
            emit(L, t);
            continue;
        }
        if (is_name_start(ch)) {
            size_t j = i + 1;
            while (j < n && (is_name_start(s[j]) || is_digit(s[j]))) j++;
            t.type = T_NAME;
            t.s = s + i;
            t.n = j - i;
            emit(L, t);
            L->pos = j;
            continue;
        }
        if (ch == '\'' || ch == '"') {
            size_t j = i + 1;
            while (j < n && s[j] != ch) {
                if (s[j] == '\\' && j + 1 < n) j++;
                j++;
            }
            if (j >= n) jx_fail(L->c, L->line, "unterminated string literal");
            t.type = T_STRING;
            decode_string(L, s + i + 1, j - i - 1, L->line, &t);
            emit(L, t);
            L->line += count_nl(s + i, j - i);
            L->pos = j + 1;
            continue;
        }
        /* operators */
        static const struct { const char *s; char op; } two[] = {
            {"//", OPC_FLOORDIV}, {"**", OPC_POW}, {"==", OPC_EQ}, {"!=", OPC_NE}, {">=", OPC_GE}, {"<=", OPC_LE},
        };
        int matched = 0;
        for (size_t k = 0; k < sizeof two / sizeof two[0]; k++)
            if (i + 2 <= n && s[i] == two[k].s[0] && s[i + 1] == two[k].s[1]) {
                t.type = T_OP;
                t.op = (uint8_t)two[k].op;
                L->pos = i + 2;
                matched = 1;
                break;
            }
        if (!matched) {
            if (!strchr("+-/*%~[](){}><=.:|,;", ch) || ch == 0)
                jx_fail(L->c, L->line, "unexpected character '%c' in tag", (ch >= 0x20 && ch < 0x7f) ? ch : '?');
            t.type = T_OP;
            t.op = (uint8_t)ch;
            L->pos = i + 1;
            if (ch == '(' || ch == '[' || ch == '{') {
                if (depth >= (int)sizeof stack) jx_fail(L->c, L->line, "brackets nested too deeply");
                stack[depth++] = ch == '(' ? ')' : ch == '[' ? ']' : '}';
            } else if (ch == ')' || ch == ']' || ch == '}') {
                if (depth == 0) jx_fail(L->c, L->line, "unexpected '%c'", ch);
                if (stack[depth - 1] != ch)
                    jx_fail(L->c, L->line, "unexpected '%c', expected '%c'", ch, stack[depth - 1]);
                depth--;
            }
        }
        emit(L, t);
    }
}

void jx_lex(jctx *c, const char *src, size_t len, tok **toks, size_t *ntoks) {
    /* normalise newlines and drop one trailing newline */
    char *s = jx_alloc(c, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else s[n++] = src[i];
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = 0;

    lexer L = {.c = c, .s = s, .n = n, .line = 1, .line_starting = 1};
    while (L.pos < n) {
        /* find the next tag start */
        size_t i = L.pos, found = n;
        char kind = 0;
        while (i + 1 < n) {
            const char *q = memchr(s + i, '{', n - i - 1);
            if (!q) break;
            i = (size_t)(q - s);
            char k2 = s[i + 1];
            if (k2 == '{' || k2 == '%' || k2 == '#') { found = i; kind = k2; break; }
            i++;
        }
        const char *text = s + L.pos;
        size_t tlen = found - L.pos;
        int text_line = L.line;
        if (found == n) {
            emit_data(&L, text, tlen, text_line);
            L.line += count_nl(text, tlen);
            L.pos = n;
            break;
        }
        size_t after = found + 2;
        char sign = (after < n && (s[after] == '-' || s[after] == '+')) ? s[after] : 0;
        size_t body = after + (sign ? 1 : 0);

        /* raw block? */
        int is_raw = 0;
        size_t raw_end_tag = 0;
        if (kind == '%') {
            size_t j = skip_ws(s, n, body);
            if (j + 3 <= n && !strncmp(s + j, "raw", 3)) {
                size_t k = skip_ws(s, n, j + 3);
                if (k + 3 <= n && !strncmp(s + k, "-%}", 3)) { is_raw = 1; raw_end_tag = skip_ws(s, n, k + 3); }
                else if (k + 2 <= n && !strncmp(s + k, "%}", 2)) { is_raw = 1; raw_end_tag = k + 2; }
            }
        }
        size_t keep = strip_before(&L, text, tlen, sign, kind != '{');
        emit_data(&L, text, keep, text_line);
        L.line += count_nl(text, tlen);
        int tag_line = L.line;

        if (kind == '#') {
            /* comment: find "#}" */
            size_t j = body;
            const char *q = NULL;
            while (j + 1 < n) {
                q = memchr(s + j, '#', n - j - 1);
                if (!q) break;
                if (q[1] == '}') break;
                j = (size_t)(q - s) + 1;
                q = NULL;
            }
            if (!q || (size_t)(q - s) + 1 >= n) jx_fail(c, tag_line, "missing end of comment tag");
            size_t e = (size_t)(q - s);
            size_t endpos = e + 2;
            L.line += count_nl(s + body, e - body);
            if (e > body && s[e - 1] == '-') {
                size_t k = skip_ws(s, n, endpos);
                L.line += count_nl(s + endpos, k - endpos);
                L.line_starting = k > endpos && s[k - 1] == '\n';
                endpos = k;
            } else if (e > body && s[e - 1] == '+') {
                L.line_starting = 0;
            } else if (endpos < n && s[endpos] == '\n') {
                endpos++;
                L.line++;
                L.line_starting = 1;
            } else L.line_starting = 0;
            L.pos = endpos;
            continue;
        }
        if (is_raw) {
            L.line += count_nl(s + found, raw_end_tag - found);
            L.line_starting = raw_end_tag > found && s[raw_end_tag - 1] == '\n';
            /* find {%[-+]? endraw [-+]?%} */
            size_t j = raw_end_tag;
            for (;;) {
                const char *q = j < n ? memmem(s + j, n - j, "{%", 2) : NULL;
                if (!q) jx_fail(c, tag_line, "missing end of raw directive");
                size_t st = (size_t)(q - s);
                size_t k = st + 2;
                char esign = (k < n && (s[k] == '-' || s[k] == '+')) ? s[k] : 0;
                if (esign) k++;
                k = skip_ws(s, n, k);
                if (k + 6 <= n && !strncmp(s + k, "endraw", 6)) {
                    size_t m = skip_ws(s, n, k + 6);
                    size_t endpos = 0;
                    int ls = 0;
                    if (m + 3 <= n && !strncmp(s + m, "+%}", 3)) endpos = m + 3;
                    else if (m + 3 <= n && !strncmp(s + m, "-%}", 3)) {
                        endpos = skip_ws(s, n, m + 3);
                        ls = endpos > m + 3 && s[endpos - 1] == '\n';
                    } else if (m + 2 <= n && !strncmp(s + m, "%}", 2)) {
                        endpos = m + 2;
                        if (endpos < n && s[endpos] == '\n') { endpos++; ls = 1; }
                    }
                    if (endpos) {
                        const char *rt = s + raw_end_tag;
                        size_t rlen = st - raw_end_tag;
                        size_t rkeep = strip_before(&L, rt, rlen, esign, 1);
                        emit_data(&L, rt, rkeep, L.line);
                        L.line += count_nl(s + raw_end_tag, endpos - raw_end_tag);
                        L.line_starting = ls;
                        L.pos = endpos;
                        break;
                    }
                }
                j = st + 2;
            }
            continue;
        }
        tok t = {.type = kind == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN, .line = tag_line};
        emit(&L, t);
        L.pos = body;
        lex_tag(&L, kind == '%', tag_line);
    }
    tok e = {.type = T_EOF, .line = L.line};
    emit(&L, e);
    *toks = L.t;
    *ntoks = L.nt;
}
