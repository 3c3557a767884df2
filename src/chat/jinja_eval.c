/* jinja_eval.c — renders a parsed template: expression evaluation with Python semantics, statement
 * execution with Jinja's scoping (each loop iteration, macro call and with-block gets its own scope;
 * `set` inside them does not leak out, which is why templates use namespace()), and the public
 * jinja_parse / jinja_render entry points that catch errors raised with jx_fail. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_int.h"

struct jinja_template {
    arena ar;              /* owns the AST */
    node *root;
    int wants_parts;       /* see jinja_wants_content_parts */
};

node *jx_parse_tokens(jctx *c, tok *toks, size_t ntoks);

_Noreturn void jx_fail(jctx *c, int line, const char *fmt, ...) {
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0) err_set(c->err, MTPLX_ETEMPLATE, "line %d: %s", line, msg);
    else err_set(c->err, MTPLX_ETEMPLATE, "%s", msg);
    longjmp(c->jmp, 1);
}

static scope *scope_new(jctx *c, scope *parent) {
    scope *s = jx_alloc(c, sizeof(scope));
    memset(s, 0, sizeof *s);
    s->parent = parent;
    return s;
}

static jv *scope_find(jctx *c, scope *s, const char *name) {
    (void)c;
    for (; s; s = s->parent)
        for (int i = s->n - 1; i >= 0; i--)
            if (s->names[i] == name || !strcmp(s->names[i], name)) return &s->vals[i];
    return NULL;
}

void jx_scope_set(jctx *c, scope *s, const char *name, jv v) {
    for (int i = 0; i < s->n; i++)
        if (s->names[i] == name || !strcmp(s->names[i], name)) {
            s->vals[i] = v;
            return;
        }
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 4;
        const char **nn = jx_alloc(c, (size_t)cap * sizeof(char *));
        jv *nv = jx_alloc(c, (size_t)cap * sizeof(jv));
        if (s->n) {
            memcpy(nn, s->names, (size_t)s->n * sizeof(char *));
            memcpy(nv, s->vals, (size_t)s->n * sizeof(jv));
        }
        s->names = nn;
        s->vals = nv;
        s->cap = cap;
    }
    s->names[s->n] = name;
    s->vals[s->n] = v;
    s->n++;
}
#define scope_set jx_scope_set

static void out_write(jctx *c, const char *p, size_t n) {
    c->out_total += n;
    if (c->out_total > c->lim.max_output)
        jx_fail(c, c->cur_line, "render exceeded its output budget (%zu bytes)", c->lim.max_output);
    jb_put(c, c->out, p, n);
}

static jv eval(jctx *c, scope *s, const node *n);
static void exec_list(jctx *c, scope *s, node **kids, int n);

static _Noreturn void fail_undef(jctx *c, int line, jv v) { jx_fail(c, line, "%s", v.u.undef); }

/* ---- arithmetic ----------------------------------------------------------------------------- */

static int is_num(const jv *v) { return v->k == JV_INT || v->k == JV_FLOAT || v->k == JV_BOOL; }
static int is_intlike(const jv *v) { return v->k == JV_INT || v->k == JV_BOOL; }
static int64_t iv(const jv *v) { return v->k == JV_INT ? v->u.i : v->u.b; }
static double fv(const jv *v) { return v->k == JV_FLOAT ? v->u.f : (double)iv(v); }

static const char *op_sym(int op) {
    static const char *s[] = {"?", "+", "-", "*", "/", "//", "%", "**", "~"};
    return op >= 1 && op <= 8 ? s[op] : "?";
}

static _Noreturn void bad_operands(jctx *c, int line, int op, jv a, jv b) {
    if (op == OP_ADD && a.k == JV_STR)
        jx_fail(c, line, "can only concatenate str (not \"%s\") to str", jv_type_name(&b));
    if (op == OP_ADD && a.k == JV_LIST && !a.u.l->tuple)
        jx_fail(c, line, "can only concatenate list (not \"%s\") to list", jv_type_name(&b));
    jx_fail(c, line, "unsupported operand type(s) for %s: '%s' and '%s'", op_sym(op), jv_type_name(&a), jv_type_name(&b));
}

static jv repeat(jctx *c, jv seq, int64_t times, int line) {
    if (times < 0) times = 0;
    if ((seq.k == JV_STR ? seq.u.s->n : seq.u.l->n) == 0) times = 0; /* '' * 10**13: no 10**13-step loop */
    if (seq.k == JV_STR) {
        size_t n = seq.u.s->n;
        if (n && (uint64_t)times > c->lim.max_memory / n) jx_fail(c, line, "string repetition too large");
        jbuf b = {0};
        for (int64_t i = 0; i < times; i++) jb_put(c, &b, seq.u.s->p, n);
        jx_charge(c, (size_t)times * (n / 64 + 1));
        return jv_str(c, b.p ? b.p : "", b.n);
    }
    size_t n = seq.u.l->n;
    if (n && (uint64_t)times > c->lim.max_memory / (n * sizeof(jv))) jx_fail(c, line, "list repetition too large");
    jv out = jv_list(c, n * (size_t)times, seq.u.l->tuple);
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < n; k++) jl_push(c, out, seq.u.l->v[k]);
    jx_charge(c, n * (size_t)times);
    return out;
}

/* Python's "%" string formatting, enough for templates: %s %r %d %i %f %x %% with flags/width. */
jv jx_percent_format(jctx *c, jv fmt, jv args, int line) {
    jlist *al = NULL;
    jv single = args;
    if (args.k == JV_LIST && args.u.l->tuple) al = args.u.l;
    size_t ai = 0;
    jbuf b = {0};
    const char *p = fmt.u.s->p;
    size_t n = fmt.u.s->n;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '%') { jb_put(c, &b, p + i, 1); continue; }
        if (++i >= n) jx_fail(c, line, "incomplete format");
        if (p[i] == '%') { jb_puts(c, &b, "%"); continue; }
        char spec[32];
        size_t k = 0;
        spec[k++] = '%';
        /* flags, width (<= 3 digits), precision (<= 2 digits): rebuilt, never copied blindly */
        while (i < n && p[i] && strchr("-+ #0", p[i])) {
            if (k < 8 && !memchr(spec + 1, p[i], k - 1)) spec[k++] = p[i];
            i++;
        }
        for (int d = 0; i < n && p[i] >= '0' && p[i] <= '9'; i++, d++)
            if (d < 3) spec[k++] = p[i];
            else jx_fail(c, line, "format width too large");
        if (i < n && p[i] == '.') {
            spec[k++] = p[i++];
            int d = 0;
            for (; i < n && p[i] >= '0' && p[i] <= '9'; i++, d++)
                if (d < 2) spec[k++] = p[i];
                else jx_fail(c, line, "format precision too large");
            if (d == 0) spec[k++] = '0';
        }
        if (i >= n) jx_fail(c, line, "incomplete format");
        char conv = p[i];
        jv a;
        if (al) {
            if (ai >= al->n) jx_fail(c, line, "not enough arguments for format string");
            a = al->v[ai++];
        } else {
            if (ai++ > 0) jx_fail(c, line, "not enough arguments for format string");
            a = single;
        }
        char tmp[1200];
        if (conv == 's' || conv == 'r') {
            /* padding and truncation by code points, done here (the text may be long) */
            jbuf sb = {0};
            if (conv == 's') jv_write_str(c, &sb, a);
            else jv_write_repr(c, &sb, a);
            spec[k] = 0;
            int left = strchr(spec, '-') != NULL;
            const char *dot = strchr(spec, '.');
            size_t width = 0, prec = (size_t)-1;
            for (const char *q = spec + 1; *q && q != dot; q++)
                if (*q >= '1' && *q <= '9') { width = (size_t)strtoul(q, NULL, 10); break; }
            if (dot) prec = (size_t)strtoul(dot + 1, NULL, 10);
            const char *sp = sb.p ? sb.p : "";
            size_t slen = sb.n, cps = u8_len(sp, slen);
            if (prec < cps) { slen = u8_offset(sp, slen, prec); cps = prec; }
            if (!left) for (size_t w = cps; w < width; w++) jb_puts(c, &b, " ");
            jb_put(c, &b, sp, slen);
            if (left) for (size_t w = cps; w < width; w++) jb_puts(c, &b, " ");
        } else if (conv && strchr("diouxX", conv)) {
            if (!is_num(&a)) jx_fail(c, line, "%%%c format: a real number is required, not %s", conv, jv_type_name(&a));
            spec[k++] = 'l';
            spec[k++] = 'l';
            spec[k++] = conv == 'i' || conv == 'u' ? 'd' : conv;
            spec[k] = 0;
            snprintf(tmp, sizeof tmp, spec, (long long)(a.k == JV_FLOAT ? (int64_t)a.u.f : iv(&a)));
            jb_puts(c, &b, tmp);
        } else if (conv && strchr("feEgG", conv)) {
            if (!is_num(&a)) jx_fail(c, line, "must be real number, not %s", jv_type_name(&a));
            spec[k++] = conv;
            spec[k] = 0;
            snprintf(tmp, sizeof tmp, spec, fv(&a));
            jb_puts(c, &b, tmp);
        } else {
            jx_fail(c, line, "unsupported format character '%c'", conv >= 0x20 && conv < 0x7f ? conv : '?');
        }
    }
    if (al ? ai < al->n : ai == 0) jx_fail(c, line, "not all arguments converted during string formatting");
    return jv_str(c, b.p ? b.p : "", b.n);
}

static jv binop(jctx *c, int op, jv a, jv b, int line) {
    if (op == OP_CONCAT) {
        jbuf buf = {0};
        jv_write_str(c, &buf, a);
        jv_write_str(c, &buf, b);
        return jv_str(c, buf.p ? buf.p : "", buf.n);
    }
    if (a.k == JV_UNDEF) fail_undef(c, line, a);
    if (b.k == JV_UNDEF) fail_undef(c, line, b);
    if (is_num(&a) && is_num(&b)) {
        int ints = is_intlike(&a) && is_intlike(&b);
        int64_t x = ints ? iv(&a) : 0, y = ints ? iv(&b) : 0, r;
        double fx = fv(&a), fy = fv(&b);
        switch (op) {
        case OP_ADD:
            if (ints) { if (__builtin_add_overflow(x, y, &r)) goto ovf; return jv_int(r); }
            return jv_float(fx + fy);
        case OP_SUB:
            if (ints) { if (__builtin_sub_overflow(x, y, &r)) goto ovf; return jv_int(r); }
            return jv_float(fx - fy);
        case OP_MUL:
            if (ints) { if (__builtin_mul_overflow(x, y, &r)) goto ovf; return jv_int(r); }
            return jv_float(fx * fy);
        case OP_DIV:
            if (fy == 0) jx_fail(c, line, "division by zero");
            return jv_float(fx / fy);
        case OP_FLOORDIV:
            if (ints) {
                if (y == 0) jx_fail(c, line, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) goto ovf;
                int64_t q = x / y;
                if ((x % y != 0) && ((x < 0) != (y < 0))) q--;
                return jv_int(q);
            }
            if (fy == 0) jx_fail(c, line, "float floor division by zero");
            return jv_float(floor(fx / fy));
        case OP_MOD:
            if (ints) {
                if (y == 0) jx_fail(c, line, "integer division or modulo by zero");
                if (y == -1) return jv_int(0);
                int64_t m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) m += y;
                return jv_int(m);
            }
            if (fy == 0) jx_fail(c, line, "float modulo");
            {
                double m = fmod(fx, fy);
                if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
                return jv_float(m);
            }
        case OP_POW:
            if (ints && y >= 0) {
                int64_t acc = 1, base = x;
                int64_t e = y;
                while (e > 0) {
                    if (e & 1) { if (__builtin_mul_overflow(acc, base, &acc)) goto ovf; }
                    e >>= 1;
                    if (e && __builtin_mul_overflow(base, base, &base)) goto ovf;
                }
                return jv_int(acc);
            }
            if (fx == 0 && fy < 0) jx_fail(c, line, "0.0 cannot be raised to a negative power");
            return jv_float(pow(fx, fy));
        }
    ovf:
        jx_fail(c, line, "integer overflow in '%s' (values beyond 64 bits are not supported)", op_sym(op));
    }
    switch (op) {
    case OP_ADD:
        if (a.k == JV_STR && b.k == JV_STR) {
            jbuf buf = {0};
            jb_put(c, &buf, a.u.s->p, a.u.s->n);
            jb_put(c, &buf, b.u.s->p, b.u.s->n);
            jx_charge(c, (a.u.s->n + b.u.s->n) / 256);
            return jv_str(c, buf.p ? buf.p : "", buf.n);
        }
        if (a.k == JV_LIST && b.k == JV_LIST && a.u.l->tuple == b.u.l->tuple) {
            jv out = jv_list(c, a.u.l->n + b.u.l->n, a.u.l->tuple);
            for (size_t i = 0; i < a.u.l->n; i++) jl_push(c, out, a.u.l->v[i]);
            for (size_t i = 0; i < b.u.l->n; i++) jl_push(c, out, b.u.l->v[i]);
            jx_charge(c, a.u.l->n + b.u.l->n);
            return out;
        }
        break;
    case OP_MUL:
        if ((a.k == JV_STR || a.k == JV_LIST) && is_intlike(&b)) return repeat(c, a, iv(&b), line);
        if ((b.k == JV_STR || b.k == JV_LIST) && is_intlike(&a)) return repeat(c, b, iv(&a), line);
        break;
    case OP_MOD:
        if (a.k == JV_STR) return jx_percent_format(c, a, b, line);
        break;
    }
    bad_operands(c, line, op, a, b);
}

/* `a in b` */
static int contains(jctx *c, jv item, jv seq, int line) {
    switch (seq.k) {
    case JV_STR:
        if (item.k == JV_UNDEF) fail_undef(c, line, item);
        if (item.k != JV_STR)
            jx_fail(c, line, "'in <string>' requires string as left operand, not %s", jv_type_name(&item));
        jx_charge(c, seq.u.s->n / 64);
        if (item.u.s->n == 0) return 1;
        return memmem(seq.u.s->p, seq.u.s->n, item.u.s->p, item.u.s->n) != NULL;
    case JV_LIST:
        jx_charge(c, seq.u.l->n);
        for (size_t i = 0; i < seq.u.l->n; i++)
            if (jv_eq(c, seq.u.l->v[i], item)) return 1;
        return 0;
    case JV_DICT:
        jv_hashable(c, item, line);
        return jd_find(c, seq.u.d, item) >= 0;
    case JV_UNDEF:
        return 0; /* Undefined iterates as empty */
    default:
        jx_fail(c, line, "argument of type '%s' is not iterable", jv_type_name(&seq));
    }
}

static int compare(jctx *c, int op, jv a, jv b, int line) {
    switch (op) {
    case OP_EQ: return jv_eq(c, a, b);
    case OP_NE: return !jv_eq(c, a, b);
    case OP_IN: return contains(c, a, b, line);
    case OP_NOTIN: return !contains(c, a, b, line);
    }
    if (a.k == JV_UNDEF) fail_undef(c, line, a);
    if (b.k == JV_UNDEF) fail_undef(c, line, b);
    static const char *names[] = {[OP_LT] = "<", [OP_LE] = "<=", [OP_GT] = ">", [OP_GE] = ">="};
    if (!((is_num(&a) && is_num(&b)) || (a.k == JV_STR && b.k == JV_STR) || (a.k == JV_LIST && b.k == JV_LIST)))
        jx_fail(c, line, "'%s' not supported between instances of '%s' and '%s'", names[op], jv_type_name(&a),
                jv_type_name(&b));
    if ((is_num(&a) && (a.k == JV_FLOAT && isnan(a.u.f))) || (is_num(&b) && b.k == JV_FLOAT && isnan(b.u.f))) return 0;
    int r = jv_cmp(c, a, b, line);
    switch (op) {
    case OP_LT: return r < 0;
    case OP_LE: return r <= 0;
    case OP_GT: return r > 0;
    default: return r >= 0;
    }
}

/* ---- slicing -------------------------------------------------------------------------------- */

static int64_t slice_arg(jctx *c, jv v, int line, int *present) {
    if (v.k == JV_NONE) { *present = 0; return 0; }
    if (!is_intlike(&v)) jx_fail(c, line, "slice indices must be integers or None");
    *present = 1;
    return iv(&v);
}

jv jx_slice(jctx *c, jv obj, jv vstart, jv vstop, jv vstep, int line) {
    if (obj.k == JV_UNDEF) fail_undef(c, line, obj);
    if (obj.k != JV_STR && obj.k != JV_LIST) return jv_undef("object is not sliceable");
    int hs, he, hp;
    int64_t start = slice_arg(c, vstart, line, &hs), stop = slice_arg(c, vstop, line, &he),
            step = slice_arg(c, vstep, line, &hp);
    if (!hp) step = 1;
    if (step == 0) jx_fail(c, line, "slice step cannot be zero");
    /* code point offsets for strings */
    size_t len;
    size_t *offs = NULL;
    if (obj.k == JV_STR) {
        const char *p = obj.u.s->p;
        size_t n = obj.u.s->n;
        len = u8_len(p, n);
        offs = jx_alloc(c, (len + 1) * sizeof(size_t));
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (((unsigned char)p[i] & 0xc0) != 0x80) offs[k++] = i;
        offs[len] = n;
        jx_charge(c, n / 64);
    } else len = obj.u.l->n;
    int64_t L = (int64_t)len, lower = step > 0 ? 0 : -1, upper = step > 0 ? L : L - 1;
    if (!hs) start = step < 0 ? upper : lower;
    else {
        if (start < 0) start += L;
        if (start < lower) start = lower;
        else if (start > upper) start = upper;
    }
    if (!he) stop = step < 0 ? lower : upper;
    else {
        if (stop < 0) stop += L;
        if (stop < lower) stop = lower;
        else if (stop > upper) stop = upper;
    }
    if (obj.k == JV_STR) {
        if (step == 1) {
            size_t a = start < stop ? offs[start] : 0, b = start < stop ? offs[stop] : 0;
            return jv_str(c, obj.u.s->p + a, b - a);
        }
        jbuf b = {0};
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
            jb_put(c, &b, obj.u.s->p + offs[i], offs[i + 1] - offs[i]);
        return jv_str(c, b.p ? b.p : "", b.n);
    }
    jv out = jv_list(c, 4, obj.u.l->tuple);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) jl_push(c, out, obj.u.l->v[i]);
    jx_charge(c, out.u.l->n);
    return out;
}

/* ---- calls ---------------------------------------------------------------------------------- */

static void build_args(jctx *c, scope *s, const node *n, jargs *a) {
    int np = n->nkids, nk = n->nkids2;
    jlist *star = NULL;
    jdict *dstar = NULL;
    if (n->b) {
        jv v = eval(c, s, n->b);
        star = jv_iterate(c, v, n->line);
        np += (int)star->n;
    }
    if (n->c) {
        jv v = eval(c, s, n->c);
        if (v.k != JV_DICT) jx_fail(c, n->line, "argument after ** must be a mapping, not %s", jv_type_name(&v));
        dstar = v.u.d;
        nk += (int)dstar->n;
    }
    if (nk > 32) jx_fail(c, n->line, "too many keyword arguments");
    a->pos = jx_alloc(c, (size_t)(np ? np : 1) * sizeof(jv));
    a->npos = 0;
    for (int i = 0; i < n->nkids; i++) a->pos[a->npos++] = eval(c, s, n->kids[i]);
    if (star)
        for (size_t i = 0; i < star->n; i++) a->pos[a->npos++] = star->v[i];
    a->kwn = jx_alloc(c, (size_t)(nk ? nk : 1) * sizeof(char *));
    a->kwv = jx_alloc(c, (size_t)(nk ? nk : 1) * sizeof(jv));
    a->nkw = 0;
    a->used = 0;
    for (int i = 0; i < n->nkids2; i++) {
        a->kwn[a->nkw] = n->kids2[i]->name;
        a->kwv[a->nkw++] = eval(c, s, n->kids2[i]->a);
    }
    if (dstar)
        for (size_t i = 0; i < dstar->n; i++) {
            if (dstar->keys[i].k != JV_STR) jx_fail(c, n->line, "keywords must be strings");
            a->kwn[a->nkw] = dstar->keys[i].u.s->p;
            a->kwv[a->nkw++] = dstar->vals[i];
        }
}

/* Render a body into a fresh buffer and return it as a string value. */
static jv capture(jctx *c, scope *s, node **kids, int n) {
    jbuf *saved = c->out;
    jbuf buf = {0};
    c->out = &buf;
    exec_list(c, s, kids, n);
    c->out = saved;
    c->ctl = 0;
    return jv_str(c, buf.p ? buf.p : "", buf.n);
}

static void assign(jctx *c, scope *s, const node *target, jv v, int line);

jv jx_call_macro(jctx *c, jfunc *fn, jargs *a, int line) {
    const node *m = fn->macro;
    if (++c->depth > c->lim.max_depth)
        jx_fail(c, line, "maximum macro call depth (%d) exceeded; recursive macro?", c->lim.max_depth);
    scope *ms = scope_new(c, fn->closure);
    const node *params = m;  /* N_MACRO or N_CALLBLOCK: kids = parameters */
    int np = params->nkids;
    jv varargs = jv_list(c, 4, 1);
    jv kwargs = jv_dict(c, 4);
    int *set = jx_alloc(c, (size_t)(np ? np : 1) * sizeof(int));
    memset(set, 0, (size_t)(np ? np : 1) * sizeof(int));
    for (int i = 0; i < a->npos; i++) {
        if (i < np) {
            scope_set(c, ms, params->kids[i]->name, a->pos[i]);
            set[i] = 1;
        } else if (m->flag & 1) {
            jl_push(c, varargs, a->pos[i]);
        } else {
            jx_fail(c, line, "macro '%s' takes not more than %d argument(s)", fn->name, np);
        }
    }
    for (int k = 0; k < a->nkw; k++) {
        int found = 0;
        for (int i = 0; i < np; i++)
            if (!strcmp(params->kids[i]->name, a->kwn[k])) {
                if (set[i]) jx_fail(c, line, "macro '%s' got multiple values for argument '%s'", fn->name, a->kwn[k]);
                scope_set(c, ms, params->kids[i]->name, a->kwv[k]);
                set[i] = 1;
                found = 1;
                break;
            }
        if (!found) {
            if (!(m->flag & 2)) jx_fail(c, line, "macro '%s' takes no keyword argument '%s'", fn->name, a->kwn[k]);
            jd_set(c, kwargs.u.d, jv_cstr(c, a->kwn[k]), a->kwv[k]);
        }
    }
    for (int i = 0; i < np; i++) {
        if (set[i]) continue;
        const node *pn = params->kids[i];
        if (pn->a) scope_set(c, ms, pn->name, eval(c, ms, pn->a));
        else scope_set(c, ms, pn->name, jv_undef("a macro parameter was not provided"));
    }
    scope_set(c, ms, "varargs", varargs);
    scope_set(c, ms, "kwargs", kwargs);
    if (fn->kind == FN_MACRO && fn->caller) {
        jv cv = {.k = JV_FUNC};
        cv.u.fn = fn->caller;
        scope_set(c, ms, "caller", cv);
    }
    const node *body = m->b;
    int saved_ctl = c->ctl;
    jv r = capture(c, ms, body->kids, body->nkids);
    c->ctl = saved_ctl;
    c->depth--;
    return r;
}

/* ---- expressions ---------------------------------------------------------------------------- */

static jv eval(jctx *c, scope *s, const node *n) {
    c->cur_line = n->line;
    jx_charge(c, 1);
    switch (n->type) {
    case N_CONST: return n->val;
    case N_NAME: {
        jv *v = scope_find(c, s, n->name);
        if (v) return *v;
        return jv_undef(jv_strf(c, "'%s' is undefined", n->name).u.s->p);
    }
    case N_LIST: case N_TUPLE: {
        jv l = jv_list(c, (size_t)n->nkids, n->type == N_TUPLE);
        for (int i = 0; i < n->nkids; i++) jl_push(c, l, eval(c, s, n->kids[i]));
        return l;
    }
    case N_DICT: {
        jv d = jv_dict(c, (size_t)n->nkids);
        for (int i = 0; i < n->nkids; i++) {
            jv k = eval(c, s, n->kids[i]);
            jv_hashable(c, k, n->line);
            jd_set(c, d.u.d, k, eval(c, s, n->kids2[i]));
        }
        return d;
    }
    case N_GETATTR: {
        jv obj = eval(c, s, n->a);
        return jx_getattr(c, obj, n->name, n->line);
    }
    case N_GETITEM: {
        jv obj = eval(c, s, n->a);
        if (n->b->type == N_SLICE) {
            const node *sl = n->b;
            jv a = sl->a ? eval(c, s, sl->a) : jv_none();
            jv b = sl->b ? eval(c, s, sl->b) : jv_none();
            jv st = sl->c ? eval(c, s, sl->c) : jv_none();
            return jx_slice(c, obj, a, b, st, n->line);
        }
        jv key = eval(c, s, n->b);
        return jx_getitem(c, obj, key, n->line);
    }
    case N_SLICE: jx_fail(c, n->line, "slice outside of a subscript");
    case N_CALL: {
        jv fn = eval(c, s, n->a);
        jargs a;
        build_args(c, s, n, &a);
        c->cur_line = n->line;
        return jx_call(c, fn, &a, n->line);
    }
    case N_FILTER: {
        jv v = eval(c, s, n->a);
        jargs a;
        build_args(c, s, n, &a);
        c->cur_line = n->line;
        return jx_apply_filter(c, n->fid, v, &a, n->line);
    }
    case N_TEST: {
        jv v = eval(c, s, n->a);
        jargs a;
        build_args(c, s, n, &a);
        c->cur_line = n->line;
        return jv_bool(jx_apply_test(c, n->fid, v, &a, n->line));
    }
    case N_NOT: {
        jv v = eval(c, s, n->a);
        return jv_bool(!jv_truthy(&v));
    }
    case N_NEG: case N_POS: {
        jv v = eval(c, s, n->a);
        if (v.k == JV_UNDEF) fail_undef(c, n->line, v);
        if (!is_num(&v)) jx_fail(c, n->line, "bad operand type for unary %c: '%s'", n->type == N_NEG ? '-' : '+', jv_type_name(&v));
        if (n->type == N_POS) return v.k == JV_BOOL ? jv_int(v.u.b) : v;
        if (v.k == JV_FLOAT) return jv_float(-v.u.f);
        if (iv(&v) == INT64_MIN) jx_fail(c, n->line, "integer overflow");
        return jv_int(-iv(&v));
    }
    case N_BINOP: {
        jv a = eval(c, s, n->a);
        jv b = eval(c, s, n->b);
        return binop(c, n->op, a, b, n->line);
    }
    case N_AND: {
        jv a = eval(c, s, n->a);
        return jv_truthy(&a) ? eval(c, s, n->b) : a;
    }
    case N_OR: {
        jv a = eval(c, s, n->a);
        return jv_truthy(&a) ? a : eval(c, s, n->b);
    }
    case N_COMPARE: {
        jv left = eval(c, s, n->a);
        for (int i = 0; i < n->nkids; i++) {
            jv right = eval(c, s, n->kids[i]->a);
            if (!compare(c, n->kids[i]->op, left, right, n->line)) return jv_bool(0);
            left = right;
        }
        return jv_bool(1);
    }
    case N_COND: {
        jv t = eval(c, s, n->a);
        if (jv_truthy(&t)) return eval(c, s, n->b);
        if (n->c) return eval(c, s, n->c);
        return jv_undef("the inline if-expression evaluated to false and had no else section");
    }
    default:
        jx_fail(c, n->line, "internal error: node %d is not an expression", n->type);
    }
}

/* ---- statements ----------------------------------------------------------------------------- */

static void assign(jctx *c, scope *s, const node *target, jv v, int line) {
    if (target->type == N_NAME) {
        scope_set(c, s, target->name, v);
        return;
    }
    if (target->type == N_TUPLE) {
        if (v.k == JV_UNDEF) fail_undef(c, line, v);
        jlist *items = jv_iterate(c, v, line);
        if (items->n != (size_t)target->nkids) {
            if (items->n > (size_t)target->nkids)
                jx_fail(c, line, "too many values to unpack (expected %d)", target->nkids);
            jx_fail(c, line, "not enough values to unpack (expected %d, got %zu)", target->nkids, items->n);
        }
        for (int i = 0; i < target->nkids; i++) assign(c, s, target->kids[i], items->v[i], line);
        return;
    }
    if (target->type == N_NSATTR) {
        jv *ns = scope_find(c, s, target->name);
        if (!ns || ns->k != JV_NS) jx_fail(c, line, "cannot assign attribute on non-namespace object");
        jd_set(c, ns->u.d, target->val, v);
        return;
    }
    jx_fail(c, line, "cannot assign to this target");
}

static jv apply_filter_chain(jctx *c, scope *s, const node *f, jv body) {
    if (!f) return body;
    jv v = f->a ? apply_filter_chain(c, s, f->a, body) : body;
    jargs a;
    build_args(c, s, f, &a);
    c->cur_line = f->line;
    return jx_apply_filter(c, f->fid, v, &a, f->line);
}

static void exec_for(jctx *c, scope *s, const node *n) {
    jv it = eval(c, s, n->b);
    jlist *items = jv_iterate(c, it, n->line);
    int reuse = !(n->flag & 2); /* no macro or call block in the body captures the iteration scope */
    if (n->c) {
        jv kept = jv_list(c, items->n, 0);
        scope *fs = NULL;
        for (size_t i = 0; i < items->n; i++) {
            if (!fs || !reuse) fs = scope_new(c, s);
            fs->n = 0;
            assign(c, fs, n->a, items->v[i], n->line);
            jv t = eval(c, fs, n->c);
            if (jv_truthy(&t)) jl_push(c, kept, items->v[i]);
        }
        items = kept.u.l;
    }
    if (items->n == 0) {
        scope *es = scope_new(c, s);
        exec_list(c, es, n->kids2, n->nkids2);
        return;
    }
    jloop *L = jx_alloc(c, sizeof(jloop));
    memset(L, 0, sizeof *L);
    L->items = items;
    L->depth = 1;
    jv lv = {.k = JV_LOOP};
    lv.u.loop = L;
    scope *is = NULL;
    for (size_t i = 0; i < items->n; i++) {
        L->i = i;
        if (!is || !reuse) is = scope_new(c, s);
        is->n = 0;
        assign(c, is, n->a, items->v[i], n->line);
        scope_set(c, is, "loop", lv);
        exec_list(c, is, n->kids, n->nkids);
        if (c->ctl == CTL_BREAK) { c->ctl = 0; break; }
        if (c->ctl == CTL_CONTINUE) c->ctl = 0;
    }
}

static void exec_node(jctx *c, scope *s, const node *n) {
    c->cur_line = n->line;
    jx_charge(c, 1);
    switch (n->type) {
    case N_DATA: out_write(c, n->val.u.s->p, n->val.u.s->n); return;
    case N_PRINT: {
        jv v = eval(c, s, n->a);
        if (v.k == JV_STR) out_write(c, v.u.s->p, v.u.s->n);
        else if (v.k != JV_UNDEF) {
            jbuf b = {0};
            jv_write_str(c, &b, v);
            out_write(c, b.p ? b.p : "", b.n);
        }
        return;
    }
    case N_IF: {
        jv t = eval(c, s, n->a);
        if (jv_truthy(&t)) exec_list(c, s, n->kids, n->nkids);
        else exec_list(c, s, n->kids2, n->nkids2);
        return;
    }
    case N_FOR: exec_for(c, s, n); return;
    case N_SET: assign(c, s, n->a, eval(c, s, n->b), n->line); return;
    case N_SETBLOCK: {
        jv body = capture(c, s, n->kids, n->nkids);
        assign(c, s, n->a, apply_filter_chain(c, s, n->b, body), n->line);
        return;
    }
    case N_MACRO: {
        jv f = jv_func(c, FN_MACRO, n->name);
        f.u.fn->macro = n;
        f.u.fn->closure = s;
        scope_set(c, s, n->name, f);
        return;
    }
    case N_CALLBLOCK: {
        const node *call = n->a;
        jv fn = eval(c, s, call->a);
        jargs a;
        build_args(c, s, call, &a);
        jv caller = jv_func(c, FN_CALLER, "caller");
        caller.u.fn->macro = n;
        caller.u.fn->closure = s;
        if (fn.k == JV_FUNC && fn.u.fn->kind == FN_MACRO) {
            jfunc *copy = jx_alloc(c, sizeof(jfunc));
            *copy = *fn.u.fn;
            copy->caller = caller.u.fn;
            fn.u.fn = copy;
        }
        jv r = jx_call(c, fn, &a, n->line);
        if (r.k == JV_STR) out_write(c, r.u.s->p, r.u.s->n);
        else if (r.k != JV_UNDEF) {
            jbuf b = {0};
            jv_write_str(c, &b, r);
            out_write(c, b.p ? b.p : "", b.n);
        }
        return;
    }
    case N_FILTERBLOCK: {
        jv body = capture(c, s, n->kids, n->nkids);
        jv r = apply_filter_chain(c, s, n->a, body);
        jbuf b = {0};
        jv_write_str(c, &b, r);
        out_write(c, b.p ? b.p : "", b.n);
        return;
    }
    case N_BREAK: c->ctl = CTL_BREAK; return;
    case N_CONTINUE: c->ctl = CTL_CONTINUE; return;
    case N_WITH: {
        scope *ws = scope_new(c, s);
        for (int i = 0; i < n->nkids; i++) assign(c, ws, n->kids[i], eval(c, s, n->kids2[i]), n->line);
        exec_list(c, ws, n->b->kids, n->b->nkids);
        return;
    }
    case N_BODY: exec_list(c, s, n->kids, n->nkids); return;
    default:
        jx_fail(c, n->line, "internal error: node %d is not a statement", n->type);
    }
}

static void exec_list(jctx *c, scope *s, node **kids, int n) {
    for (int i = 0; i < n; i++) {
        exec_node(c, s, kids[i]);
        if (c->ctl) return;
    }
}

/* Called by builtins for FN_CALLER values. */
jv jx_call_caller(jctx *c, jfunc *fn, jargs *a, int line);
jv jx_call_caller(jctx *c, jfunc *fn, jargs *a, int line) { return jx_call_macro(c, fn, a, line); }

/* ---- vLLM's content-format detection -------------------------------------------------------- */

typedef struct {
    const char **names;
    int n, cap;
} nameset;

static int ns_has(const nameset *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name)) return 1;
    return 0;
}

static void ns_add(jctx *c, nameset *s, const char *name) {
    if (ns_has(s, name)) return;
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 8;
        const char **nn = jx_alloc(c, (size_t)cap * sizeof(char *));
        if (s->n) memcpy(nn, s->names, (size_t)s->n * sizeof(char *));
        s->names = nn;
        s->cap = cap;
    }
    s->names[s->n++] = name;
}

/* node is `var`, `var[...slice]`, `var|filter`, `var is test`; with key: `var.key` / `var['key']` */
static int is_var_or_elems(const node *n, const char *var, const char *key) {
    if (!n) return 0;
    if (n->type == N_FILTER) return n->a && is_var_or_elems(n->a, var, key);
    if (n->type == N_TEST) return is_var_or_elems(n->a, var, key);
    if (n->type == N_GETITEM && n->b && n->b->type == N_SLICE) return is_var_or_elems(n->a, var, key);
    if (key) {
        if (n->type == N_GETATTR) return n->a->type == N_NAME && !strcmp(n->a->name, var) && !strcmp(n->name, key);
        if (n->type == N_GETITEM)
            return n->a->type == N_NAME && !strcmp(n->a->name, var) && n->b->type == N_CONST && n->b->val.k == JV_STR &&
                   !strcmp(n->b->val.u.s->p, key);
        return 0;
    }
    return n->type == N_NAME && !strcmp(n->name, var);
}

typedef void (*node_visit)(jctx *c, const node *n, void *ud);
static void walk(jctx *c, const node *n, node_visit f, void *ud, int depth) {
    if (!n || depth > 400) return;
    f(c, n, ud);
    walk(c, n->a, f, ud, depth + 1);
    walk(c, n->b, f, ud, depth + 1);
    walk(c, n->c, f, ud, depth + 1);
    walk(c, n->d, f, ud, depth + 1);
    for (int i = 0; i < n->nkids; i++) walk(c, n->kids[i], f, ud, depth + 1);
    for (int i = 0; i < n->nkids2; i++) walk(c, n->kids2[i], f, ud, depth + 1);
}

typedef struct {
    nameset *from, *to;
    const char *key;
    int changed;
} detect_state;

static void visit_assign(jctx *c, const node *n, void *ud) {
    detect_state *st = ud;
    if (n->type != N_SET || n->a->type != N_NAME) return;
    for (int i = 0; i < st->from->n; i++)
        if (is_var_or_elems(n->b, st->from->names[i], NULL) && !ns_has(st->from, n->a->name)) {
            ns_add(c, st->from, n->a->name);
            st->changed = 1;
        }
}

static void visit_for(jctx *c, const node *n, void *ud) {
    detect_state *st = ud;
    if (n->type != N_FOR || n->a->type != N_NAME) return;
    for (int i = 0; i < st->from->n; i++)
        if (is_var_or_elems(n->b, st->from->names[i], st->key)) {
            ns_add(c, st->to, n->a->name);
            return;
        }
}

static int detect_content_parts(jctx *c, const node *root) {
    nameset msgs = {0}, msg = {0}, parts = {0};
    ns_add(c, &msgs, "messages");
    detect_state st = {&msgs, NULL, NULL, 1};
    for (int iter = 0; st.changed && iter < 16; iter++) {
        st.changed = 0;
        walk(c, root, visit_assign, &st, 0);
    }
    detect_state fs = {&msgs, &msg, NULL, 0};
    walk(c, root, visit_for, &fs, 0);
    detect_state ps = {&msg, &parts, "content", 0};
    walk(c, root, visit_for, &ps, 0);
    return parts.n > 0;
}

/* ---- public API ----------------------------------------------------------------------------- */

int jinja_parse(const char *src, size_t len, jinja_template **out, mtplx_err *err) {
    *out = NULL;
    if (!src) return err_set(err, MTPLX_EINVAL, "no template source");
    if (!u8_valid(src, len)) return err_set(err, MTPLX_ETEMPLATE, "template source is not valid UTF-8");
    jinja_template *t = calloc(1, sizeof *t);
    if (!t) return err_set(err, MTPLX_ENOMEM, "out of memory parsing template");
    jctx *c = calloc(1, sizeof *c);
    if (!c) {
        free(t);
        return err_set(err, MTPLX_ENOMEM, "out of memory parsing template");
    }
    c->err = err;
    c->ar.limit = (size_t)256 << 20;
    c->lim.max_steps = (size_t)1 << 40;
    c->lim.max_memory = c->ar.limit;
    if (setjmp(c->jmp)) {
        arena_free_all(&c->ar);
        free(c);
        free(t);
        return err ? err->code : MTPLX_ETEMPLATE;
    }
    tok *toks;
    size_t ntoks;
    jx_lex(c, src, len, &toks, &ntoks);
    t->root = jx_parse_tokens(c, toks, ntoks);
    t->wants_parts = detect_content_parts(c, t->root);
    t->ar = c->ar;
    free(c);
    *out = t;
    return 0;
}

void jinja_free(jinja_template *t) {
    if (!t) return;
    arena_free_all(&t->ar);
    free(t);
}

int jinja_wants_content_parts(const jinja_template *t) { return t ? t->wants_parts : 0; }

int jinja_render(const jinja_template *t, json_t *vars, const jinja_limits *limits, char **out, size_t *out_len,
                 mtplx_err *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!t) return err_set(err, MTPLX_EINVAL, "no template");
    if (vars && !json_is_object(vars)) return err_set(err, MTPLX_EINVAL, "template variables must be a JSON object");
    jctx *c = calloc(1, sizeof *c);
    if (!c) return err_set(err, MTPLX_ENOMEM, "out of memory rendering template");
    c->err = err;
    c->lim.max_steps = limits && limits->max_steps ? limits->max_steps : 20000000;
    c->lim.max_output = limits && limits->max_output ? limits->max_output : (size_t)256 << 20;
    c->lim.max_memory = limits && limits->max_memory ? limits->max_memory : (size_t)1 << 30;
    c->lim.max_depth = limits && limits->max_depth ? limits->max_depth : 64;
    c->ar.limit = c->lim.max_memory;
    if (setjmp(c->jmp)) {
        arena_free_all(&c->ar);
        int code = err ? err->code : MTPLX_ETEMPLATE;
        free(c);
        return code ? code : MTPLX_ETEMPLATE;
    }
    scope *g = scope_new(c, NULL);
    jx_install_globals(c, g);
    scope *top = scope_new(c, g);
    if (vars) {
        const char *k;
        json_t *v;
        json_object_foreach(vars, k, v) scope_set(c, top, jv_cstr(c, k).u.s->p, jv_from_json(c, v));
    }
    c->globals = g;
    jbuf buf = {0};
    c->out = &buf;
    exec_list(c, top, t->root->kids, t->root->nkids);
    char *res = malloc(buf.n + 1);
    if (!res) {
        arena_free_all(&c->ar);
        free(c);
        return err_set(err, MTPLX_ENOMEM, "out of memory copying the rendered template");
    }
    if (buf.n) memcpy(res, buf.p, buf.n);
    res[buf.n] = 0;
    *out = res;
    if (out_len) *out_len = buf.n;
    arena_free_all(&c->ar);
    free(c);
    return 0;
}
