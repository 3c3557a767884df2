/* line_edit.c — see line_edit.h. Raw-mode editing redraws the whole line on each key (prompt,
 * text, clear to end of line, then the cursor moved back); lines longer than the terminal wrap
 * and then redraw imperfectly, which is acceptable for chat input. Columns count UTF-8 code
 * points (a wide CJK character or emoji counts as one). */
#include "line_edit.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "../base/sbuf.h"

/* ---- history ---- */

static int hist_push(line_editor *le, const char *s) {
    if (le->n_hist == le->cap_hist) {
        int cap = le->cap_hist ? le->cap_hist * 2 : 64;
        char **h = realloc(le->hist, (size_t)cap * sizeof *h);
        if (!h) return -1;
        le->hist = h, le->cap_hist = cap;
    }
    char *d = strdup(s);
    if (!d) return -1;
    le->hist[le->n_hist++] = d;
    if (le->n_hist > le->max_hist) {
        free(le->hist[0]);
        memmove(le->hist, le->hist + 1, (size_t)(le->n_hist - 1) * sizeof *le->hist);
        le->n_hist--;
    }
    return 0;
}

/* One history file line back to its entry: \n -> newline, \\ -> backslash (in place). */
static void unescape(char *s) {
    char *o = s;
    for (; *s; s++) {
        if (*s == '\\' && (s[1] == 'n' || s[1] == '\\')) *o++ = *++s == 'n' ? '\n' : '\\';
        else *o++ = *s;
    }
    *o = 0;
}

int le_init(line_editor *le, const char *hist_path) {
    memset(le, 0, sizeof *le);
    le->max_hist = 1000;
    le->tty = isatty(0) && isatty(1);
    if (!hist_path) return 0;
    le->hist_path = strdup(hist_path);
    if (!le->hist_path) return -1;
    FILE *f = fopen(hist_path, "r");
    if (!f) return 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] == '\n') line[--n] = 0;
        unescape(line);
        if (*line && hist_push(le, line)) break;
    }
    free(line);
    fclose(f);
    return 0;
}

void le_free(line_editor *le) {
    for (int i = 0; i < le->n_hist; i++) free(le->hist[i]);
    free(le->hist);
    free(le->hist_path);
    memset(le, 0, sizeof *le);
}

/* Make the directories above path (mode 0700), ignoring failures: fopen reports them. */
static void make_parents(const char *path) {
    char d[4096];
    snprintf(d, sizeof d, "%s", path);
    for (char *p = d + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        mkdir(d, 0700);
        *p = '/';
    }
}

void le_history_add(line_editor *le, const char *entry) {
    if (!entry || !*entry) return;
    if (le->n_hist && !strcmp(le->hist[le->n_hist - 1], entry)) return;
    if (hist_push(le, entry)) return;
    if (!le->hist_path) return;
    make_parents(le->hist_path);
    FILE *f = fopen(le->hist_path, "a");
    if (!f) return;
    for (const char *s = entry; *s; s++) {
        if (*s == '\n') fputs("\\n", f);
        else if (*s == '\\') fputs("\\\\", f);
        else fputc(*s, f);
    }
    fputc('\n', f);
    fclose(f);
}

/* ---- plain input ---- */

static le_status read_plain(const char *prompt, char **line) {
    if (prompt && isatty(1)) fputs(prompt, stdout), fflush(stdout);
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n = getline(&buf, &cap, stdin);
    if (n < 0) {
        free(buf);
        return LE_EOF;
    }
    if (n && buf[n - 1] == '\n') buf[--n] = 0;
    if (n && buf[n - 1] == '\r') buf[--n] = 0;
    *line = buf;
    return LE_LINE;
}

/* ---- raw-mode editing ---- */

typedef struct {
    sbuf        buf;     /* the line's bytes */
    size_t      pos;     /* cursor, a byte offset at a code point boundary */
    const char *prompt;
} edit_state;

static size_t cols(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

static void refresh(const edit_state *e) {
    sbuf o = {0};
    sbuf_puts(&o, "\r");
    sbuf_puts(&o, e->prompt);
    sbuf_append(&o, e->buf.p ? e->buf.p : "", e->buf.len);
    sbuf_puts(&o, "\x1b[K\r");
    size_t c = cols(e->prompt, strlen(e->prompt)) + cols(e->buf.p ? e->buf.p : "", e->pos);
    if (c) sbuf_printf(&o, "\x1b[%zuC", c);
    if (o.p && write(1, o.p, o.len) < 0) { /* the terminal is gone: the next read fails */ }
    sbuf_free(&o);
}

static void set_text(edit_state *e, const char *s) {
    e->buf.len = 0;
    sbuf_puts(&e->buf, s);
    e->pos = e->buf.len;
}

static size_t prev_cp(const edit_state *e, size_t p) {
    while (p > 0 && ((unsigned char)e->buf.p[--p] & 0xC0) == 0x80) {}
    return p;
}

static size_t next_cp(const edit_state *e, size_t p) {
    if (p < e->buf.len) p++;
    while (p < e->buf.len && ((unsigned char)e->buf.p[p] & 0xC0) == 0x80) p++;
    return p;
}

static void delete_range(edit_state *e, size_t a, size_t b) {
    memmove(e->buf.p + a, e->buf.p + b, e->buf.len - b);
    e->buf.len -= b - a;
    e->buf.p[e->buf.len] = 0;
    e->pos = a;
}

static int insert(edit_state *e, const char *s, size_t n) {
    if (sbuf_append(&e->buf, s, n)) return -1; /* grow, then move the tail */
    memmove(e->buf.p + e->pos + n, e->buf.p + e->pos, e->buf.len - n - e->pos);
    memcpy(e->buf.p + e->pos, s, n);
    e->pos += n;
    return 0;
}

/* One byte from the terminal; -1 on EOF/error. With wait_ms >= 0, -2 when nothing came in time. */
static int read_byte(int wait_ms) {
    if (wait_ms >= 0) {
        struct pollfd p = {.fd = 0, .events = POLLIN};
        if (poll(&p, 1, wait_ms) <= 0) return -2;
    }
    unsigned char c;
    for (;;) {
        ssize_t n = read(0, &c, 1);
        if (n == 1) return c;
        if (n < 0 && errno == EINTR) continue;
        return -1;
    }
}

/* An escape sequence after ESC: returns a key code (below) or 0 to ignore. */
enum { K_LEFT = 1000, K_RIGHT, K_UP, K_DOWN, K_HOME, K_END, K_DEL, K_PASTE_ON, K_PASTE_OFF, K_ESC };
static int read_escape(void) {
    int c = read_byte(50);
    if (c == -2) return K_ESC;
    if (c != '[' && c != 'O') return 0;
    int d = read_byte(50);
    switch (d) {
    case 'A': return K_UP;
    case 'B': return K_DOWN;
    case 'C': return K_RIGHT;
    case 'D': return K_LEFT;
    case 'H': return K_HOME;
    case 'F': return K_END;
    default: break;
    }
    if (d < '0' || d > '9') return 0;
    int num = d - '0', e;
    while ((e = read_byte(50)) >= '0' && e <= '9') num = num * 10 + e - '0';
    if (e != '~') return 0;
    switch (num) {
    case 1: case 7: return K_HOME;
    case 4: case 8: return K_END;
    case 3: return K_DEL;
    case 200: return K_PASTE_ON;
    case 201: return K_PASTE_OFF;
    default: return 0;
    }
}

static le_status edit_loop(line_editor *le, edit_state *e) {
    int hidx = le->n_hist; /* le->n_hist: the line being typed */
    char *typed = NULL;    /* the line being typed while browsing history */
    le_status st = LE_ERROR;
    refresh(e);
    for (;;) {
        int c = read_byte(-1);
        if (c < 0) { st = e->buf.len ? LE_LINE : LE_EOF; break; }
        if (c == 27) c = read_escape();
        if (c == '\r' || c == '\n') {
            st = le->in_paste ? LE_CONTINUE : LE_LINE;
            break;
        }
        switch (c) {
        case 0: case K_ESC: break;
        case K_PASTE_ON: le->in_paste = 1; break;
        case K_PASTE_OFF: le->in_paste = 0; break;
        case 3: st = LE_INTERRUPT; goto done; /* Ctrl-C */
        case 4: /* Ctrl-D: end of input on an empty line, else delete */
            if (!e->buf.len) { st = LE_EOF; goto done; }
            /* fall through */
        case K_DEL:
            if (e->pos < e->buf.len) delete_range(e, e->pos, next_cp(e, e->pos));
            break;
        case 127: case 8: if (e->pos) delete_range(e, prev_cp(e, e->pos), e->pos); break;
        case 1: case K_HOME: e->pos = 0; break;          /* Ctrl-A */
        case 5: case K_END: e->pos = e->buf.len; break;  /* Ctrl-E */
        case 2: case K_LEFT: e->pos = prev_cp(e, e->pos); break;
        case 6: case K_RIGHT: e->pos = next_cp(e, e->pos); break;
        case 11: e->buf.len = e->pos; if (e->buf.p) e->buf.p[e->pos] = 0; break; /* Ctrl-K */
        case 21: delete_range(e, 0, e->pos); break;      /* Ctrl-U */
        case 23: {                                       /* Ctrl-W: the word before the cursor */
            size_t p = e->pos;
            while (p && e->buf.p[p - 1] == ' ') p--;
            while (p && e->buf.p[p - 1] != ' ') p--;
            delete_range(e, p, e->pos);
            break;
        }
        case 12: if (write(1, "\x1b[H\x1b[2J", 7) < 0) {} break; /* Ctrl-L */
        case 16: case K_UP: case 14: case K_DOWN: {     /* Ctrl-P / Ctrl-N */
            int up = c == 16 || c == K_UP, to = hidx + (up ? -1 : 1);
            if (to < 0 || to > le->n_hist) break;
            if (hidx == le->n_hist) { free(typed); typed = strdup(e->buf.p ? e->buf.p : ""); }
            hidx = to;
            set_text(e, hidx == le->n_hist ? (typed ? typed : "") : le->hist[hidx]);
            break;
        }
        case '\t': insert(e, "    ", 4); break;
        default:
            if (c >= 32 && c < 256) {
                char ch = (char)c;
                if (insert(e, &ch, 1)) goto done;
            }
        }
        refresh(e);
    }
done:
    free(typed);
    return st;
}

le_status le_read(line_editor *le, const char *prompt, char **line) {
    *line = NULL;
    if (!le->tty) return read_plain(prompt, line);
    struct termios old, raw;
    if (tcgetattr(0, &old)) return read_plain(prompt, line);
    raw = old;
    raw.c_iflag &= ~(unsigned)(BRKINT | ICRNL | INPCK | ISTRIP | IXON);
    raw.c_lflag &= ~(unsigned)(ECHO | ICANON | IEXTEN | ISIG);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(0, TCSANOW, &raw)) return read_plain(prompt, line);
    if (write(1, "\x1b[?2004h", 8) < 0) {} /* bracketed paste on */
    edit_state e = {.prompt = prompt ? prompt : ""};
    sbuf_puts(&e.buf, "");
    le_status st = edit_loop(le, &e);
    if (write(1, "\x1b[?2004l", 8) < 0) {}
    tcsetattr(0, TCSANOW, &old);
    if (st == LE_INTERRUPT) { if (write(1, "^C\r\n", 4) < 0) {} }
    else if (write(1, "\r\n", 2) < 0) {}
    if (st == LE_LINE || st == LE_CONTINUE) {
        *line = sbuf_take(&e.buf);
        if (!*line) st = LE_ERROR;
    }
    sbuf_free(&e.buf);
    return st;
}
