/* jinja_int.h — internals shared by the template engine's files (not for other layers).
 *
 * Memory: everything a parse or a render creates lives in an arena that is freed as a whole, so
 * values carry no reference counts and an error can unwind with longjmp without leaking. Errors
 * inside the engine call jx_fail(), which jumps back to jinja_parse/jinja_render.
 *
 * Values (jv) are small tagged unions passed by value. Strings are immutable byte spans (UTF-8);
 * lists and dicts are only mutated while being built (the sandbox forbids append/update), except
 * namespace() objects, whose attributes `{% set ns.x = ... %}` changes. */
#ifndef MTPLX_CHAT_JINJA_INT_H
#define MTPLX_CHAT_JINJA_INT_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "jinja.h"

/* ---- arena ---------------------------------------------------------------------------------- */

typedef struct arena_blk {
    struct arena_blk *next;
    size_t used, cap;      /* bytes */
    max_align_t data[];
} arena_blk;

typedef struct {
    arena_blk *head;
    size_t total;          /* bytes obtained from malloc so far */
    size_t limit;          /* refuse to grow past this many bytes */
} arena;

void *arena_alloc(arena *a, size_t n);   /* NULL when over the limit or out of memory */
void arena_free_all(arena *a);

/* ---- values --------------------------------------------------------------------------------- */

typedef enum {
    JV_UNDEF = 0, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_NS, JV_FUNC,
    JV_LOOP,
} jv_kind;

typedef struct jstr { size_t n; char p[]; } jstr;             /* n bytes + NUL */
typedef struct jlist { size_t n, cap; int tuple; struct jv *v; } jlist;
typedef struct jdict {
    size_t n, cap;         /* entries in insertion order */
    struct jv *keys, *vals;
    uint32_t *idx;         /* open-addressing index of entry+1 (0 = empty), built when n > 8 */
    size_t idx_cap;        /* slots, power of two */
} jdict;

struct jfunc;
struct jloop;

typedef struct jv {
    uint8_t k;             /* jv_kind */
    union {
        int b;
        int64_t i;
        double f;
        jstr *s;
        jlist *l;
        jdict *d;          /* JV_DICT and JV_NS */
        struct jfunc *fn;
        struct jloop *loop;
        const char *undef; /* JV_UNDEF: why it is undefined, for the error if it gets used */
    } u;
} jv;

/* ---- AST ------------------------------------------------------------------------------------ */

typedef enum {
    /* expressions */
    N_CONST, N_NAME, N_LIST, N_TUPLE, N_DICT, N_GETATTR, N_GETITEM, N_SLICE, N_CALL, N_FILTER,
    N_TEST, N_NOT, N_NEG, N_POS, N_BINOP, N_AND, N_OR, N_COMPARE, N_COND, N_KWARG,
    /* statements */
    N_DATA, N_PRINT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_NSATTR, N_MACRO, N_CALLBLOCK,
    N_FILTERBLOCK, N_BREAK, N_CONTINUE, N_WITH, N_BODY,
} node_type;

/* Binary and comparison operators (N_BINOP / N_COMPARE operands). */
enum {
    OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN,
};

typedef struct node node;
struct node {
    uint8_t type;          /* node_type */
    uint8_t op;            /* OP_* for N_BINOP; per operand for N_COMPARE (stored in kids[i]->op) */
    uint8_t flag;          /* N_FOR: 1 recursive, 2 body defines macros; N_MACRO/N_CALLBLOCK: 1 varargs, 2 kwargs */
    int line;              /* 1-based template line */
    int fid;               /* N_FILTER / N_TEST: builtin index */
    node *a, *b, *c, *d;   /* children, meaning per type (see jinja_parse.c) */
    node **kids;  int nkids;   /* list children: items, args, body, ... */
    node **kids2; int nkids2;  /* second list: kwargs, else-body, dict values, ... */
    const char *name;      /* N_NAME, N_GETATTR attr, N_FILTER/N_TEST name, N_KWARG, N_MACRO */
    jv val;                /* N_CONST, N_DATA (string) */
};

/* ---- render context ------------------------------------------------------------------------- */

typedef struct scope {
    struct scope *parent;
    const char **names;    /* variable names (AST, static or arena strings: outlive the render) */
    jv *vals;
    int n, cap;
} scope;

typedef struct {
    char *p;
    size_t n, cap;
} jbuf;  /* growable byte buffer in the arena */

typedef struct jctx {
    jmp_buf jmp;
    mtplx_err *err;
    arena ar;
    jinja_limits lim;
    size_t steps;
    int depth;              /* nested macro calls */
    int nest;               /* recursion guard for repr/json/compare of deep values */
    int ctl;                /* 0, CTL_BREAK, CTL_CONTINUE */
    int cur_line;           /* line of the node being evaluated, for builtin errors */
    jbuf *out;              /* where text goes now (swapped for set-blocks, macros) */
    size_t out_total;       /* bytes written to all buffers, against lim.max_output */
    scope *globals;
} jctx;

enum { CTL_BREAK = 1, CTL_CONTINUE = 2 };

_Noreturn void jx_fail(jctx *c, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void *jx_alloc(jctx *c, size_t n);
void jx_charge(jctx *c, size_t units);

/* constructors */
static inline jv jv_undef(const char *why) { jv v = {.k = JV_UNDEF}; v.u.undef = why; return v; }
static inline jv jv_none(void) { jv v = {.k = JV_NONE}; return v; }
static inline jv jv_bool(int b) { jv v = {.k = JV_BOOL}; v.u.b = b != 0; return v; }
static inline jv jv_int(int64_t i) { jv v = {.k = JV_INT}; v.u.i = i; return v; }
static inline jv jv_float(double f) { jv v = {.k = JV_FLOAT}; v.u.f = f; return v; }
jv jv_str(jctx *c, const char *p, size_t n);
static inline jv jv_cstr(jctx *c, const char *s) { return jv_str(c, s, __builtin_strlen(s)); }
jv jv_strf(jctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
jv jv_list(jctx *c, size_t cap, int tuple);
void jl_push(jctx *c, jv list, jv item);
jv jv_dict(jctx *c, size_t cap);
void jd_set(jctx *c, jdict *d, jv key, jv val);
int jd_find(jctx *c, const jdict *d, jv key);              /* entry index or -1 */
jv *jd_get_str(jctx *c, const jdict *d, const char *key);  /* NULL when missing */
jv jv_from_json(jctx *c, json_t *j);

/* Python semantics */
int jv_truthy(const jv *v);
const char *jv_type_name(const jv *v);        /* Python type name: 'str', 'int', 'dict', ... */
int jv_eq(jctx *c, jv a, jv b);
int jv_cmp(jctx *c, jv a, jv b, int line);      /* <0, 0, >0; errors on unorderable types */
void jv_hashable(jctx *c, jv k, int line);
void jb_put(jctx *c, jbuf *b, const char *p, size_t n);
static inline void jb_puts(jctx *c, jbuf *b, const char *s) { jb_put(c, b, s, __builtin_strlen(s)); }
void jv_write_str(jctx *c, jbuf *b, jv v);     /* str(v) */
void jv_write_repr(jctx *c, jbuf *b, jv v);    /* repr(v) */
jv jv_to_str(jctx *c, jv v);                   /* str(v) as a string value */
void fmt_pyfloat(double f, char out[40]);
/* json.dumps(v, ensure_ascii, indent, separators, sort_keys); indent NULL = no indent */
void jv_write_json(jctx *c, jbuf *b, jv v, int ensure_ascii, const char *indent, const char *item_sep,
                   const char *key_sep, int sort_keys, int line);

/* UTF-8 helpers (strings are valid UTF-8 by construction) */
size_t u8_len(const char *p, size_t n);                     /* code points */
size_t u8_offset(const char *p, size_t n, size_t cp);      /* byte offset of code point cp */
uint32_t u8_decode(const char *p, size_t n, size_t *adv);  /* one code point */
size_t u8_encode(uint32_t cp, char out[4]);
int u8_valid(const char *p, size_t n);
int py_isspace(uint32_t cp);

/* iteration: materialise any iterable as a list (dict -> keys, str -> chars, undefined -> []) */
jlist *jv_iterate(jctx *c, jv v, int line);

/* builtins (jinja_builtins.c) */
typedef struct {
    jv *pos; int npos;
    const char **kwn; jv *kwv; int nkw;
    uint32_t used;         /* bit i: kwarg i consumed */
} jargs;

int jx_filter_id(const char *name);   /* -1 when unknown */
int jx_test_id(const char *name);
jv jx_apply_filter(jctx *c, int fid, jv v, jargs *a, int line);
int jx_apply_test(jctx *c, int tid, jv v, jargs *a, int line);
jv jx_getattr(jctx *c, jv obj, const char *name, int line);
jv jx_getitem(jctx *c, jv obj, jv key, int line);
jv jx_call(jctx *c, jv fn, jargs *a, int line);
void jx_install_globals(jctx *c, scope *g);
void jx_scope_set(jctx *c, scope *s, const char *name, jv v);

/* evaluator entry points used by builtins (jinja_eval.c) */
jv jx_call_macro(jctx *c, struct jfunc *fn, jargs *a, int line);
jv jx_percent_format(jctx *c, jv fmt, jv args, int line);          /* Python: fmt % args */
jv jx_slice(jctx *c, jv obj, jv start, jv stop, jv step, int line); /* obj[start:stop:step] */

/* callables */
enum {
    FN_BUILTIN = 1,   /* global function: id = GF_* */
    FN_METHOD,        /* bound method: self + method name */
    FN_MACRO,         /* template macro */
    FN_CALLER,        /* the body of a {% call %} block */
    FN_JOINER,        /* joiner() instance */
    FN_LOOPCALL,      /* loop.cycle / loop.changed bound to a loop */
};

typedef struct jfunc {
    int kind;
    int id;                /* FN_BUILTIN: which; FN_LOOPCALL: 0 cycle, 1 changed */
    const char *name;      /* for messages and method dispatch */
    jv self;               /* FN_METHOD */
    const node *macro;     /* FN_MACRO: N_MACRO node; FN_CALLER: N_CALLBLOCK node */
    scope *closure;        /* FN_MACRO / FN_CALLER: defining scope */
    struct jfunc *caller;  /* FN_MACRO invoked from a call block */
    int joiner_used;       /* FN_JOINER state */
    jv sep;                /* FN_JOINER */
    struct jloop *loop;    /* FN_LOOPCALL */
} jfunc;

typedef struct jloop {
    jlist *items;
    size_t i;              /* index0 of the current item */
    int depth;             /* 1-based */
    int has_last_changed;
    jv last_changed;
} jloop;

jv jv_func(jctx *c, int kind, const char *name);


/* ---- lexer (jinja_lex.c) -------------------------------------------------------------------- */

typedef enum {
    T_EOF = 0, T_DATA, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STRING, T_INT,
    T_FLOAT, T_OP,
} tok_type;

/* Two-character operators get their own codes; single-character ones use the character. */
enum { OPC_FLOORDIV = 'F', OPC_POW = 'P', OPC_EQ = 'E', OPC_NE = 'N', OPC_GE = 'G', OPC_LE = 'L' };

typedef struct {
    uint8_t type;          /* tok_type */
    uint8_t op;            /* T_OP: the operator character or OPC_* */
    int line;
    const char *s;         /* T_DATA / T_STRING (decoded, arena) / T_NAME: bytes */
    size_t n;
    int64_t i;             /* T_INT */
    double f;              /* T_FLOAT */
} tok;

/* Tokenize src with HF's whitespace rules; sets *toks and *ntoks (arena). Fails through jx_fail. */
void jx_lex(jctx *c, const char *src, size_t len, tok **toks, size_t *ntoks);

#define JX_MAX_NEST 500

#endif
