/* jinja_parse.c — tokens -> AST, following Jinja2's grammar and operator precedence:
 *
 *   expr     := or ('if' or ('else' expr)?)*          (ternary; a missing else gives undefined)
 *   or       := and ('or' and)*        and := not ('and' not)*      not := 'not' not | compare
 *   compare  := math1 (('=='|'!='|'<'|'<='|'>'|'>='|'in'|'not' 'in') math1)*
 *   math1    := concat (('+'|'-') concat)*           concat := math2 ('~' math2)*
 *   math2    := pow (('*'|'/'|'//'|'%') pow)*        pow := unary ('**' unary)*
 *   unary    := ('-'|'+') unary | primary postfix* (('|' filter) | ('is' test) | call)*
 *
 * Node field use per type (see node in jinja_int.h):
 *   N_CONST val | N_NAME name | N_LIST/N_TUPLE kids | N_DICT kids=keys kids2=values
 *   N_GETATTR a.name | N_GETITEM a[b] | N_SLICE a:b:c (NULL = omitted)
 *   N_CALL a(kids, kids2=N_KWARG{name,a}, *b, **c) | N_FILTER/N_TEST a|name(...) same args, fid
 *   N_NOT/N_NEG/N_POS a | N_BINOP a op b | N_AND/N_OR a b | N_COMPARE a, kids=operands{op,a}
 *   N_COND a=test b=then c=else | N_DATA val | N_PRINT a | N_IF a kids kids2=else
 *   N_FOR a=target b=iter c=filter kids kids2=else | N_SET a=target b=value
 *   N_NSATTR name.val (assignment target) | N_SETBLOCK a=target b=filter kids
 *   N_MACRO name kids=params{N_NAME, a=default} b=N_BODY | N_CALLBLOCK a=call kids=params b=N_BODY
 *   N_FILTERBLOCK a=filter chain (innermost a NULL) kids | N_WITH kids=targets kids2=values b=N_BODY
 *
 * Unknown filters and tests are rejected here, as Jinja does at compile time. */
#include <stdlib.h>
#include <string.h>

#include "jinja_int.h"

typedef struct {
    jctx *c;
    tok *t;
    size_t n, pos;
    int depth;        /* expression/statement nesting, bounded to protect the C stack */
    int loops;        /* enclosing for-loops, for break/continue */
} P;

typedef struct {
    node **v;
    int n, cap;
} nvec;

#define MAX_PARSE_DEPTH 200

static void nv_push(P *p, nvec *v, node *x) {
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 4;
        node **nv = jx_alloc(p->c, (size_t)cap * sizeof(node *));
        if (v->n) memcpy(nv, v->v, (size_t)v->n * sizeof(node *));
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = x;
}

static tok *cur(P *p) { return &p->t[p->pos]; }
static tok *look(P *p) { return p->pos + 1 < p->n ? &p->t[p->pos + 1] : &p->t[p->n - 1]; }
static tok *next_tok(P *p) {
    tok *t = &p->t[p->pos];
    if (p->pos + 1 < p->n) p->pos++;
    return t;
}

static int tok_is_name(const tok *t, const char *s) {
    return t->type == T_NAME && t->n == strlen(s) && !memcmp(t->s, s, t->n);
}
static int tok_is_op(const tok *t, int op) { return t->type == T_OP && t->op == op; }

static const char *describe(P *p, const tok *t) {
    switch (t->type) {
    case T_EOF: return "end of template";
    case T_DATA: return "template data";
    case T_VAR_BEGIN: return "'{{'";
    case T_VAR_END: return "end of print statement";
    case T_BLOCK_BEGIN: return "'{%'";
    case T_BLOCK_END: return "end of statement block";
    case T_STRING: return "string";
    case T_INT: return "integer";
    case T_FLOAT: return "float";
    case T_NAME: {
        char *s = jx_alloc(p->c, t->n + 3);
        s[0] = '\'';
        memcpy(s + 1, t->s, t->n);
        s[t->n + 1] = '\'';
        s[t->n + 2] = 0;
        return s;
    }
    case T_OP: {
        char *s = jx_alloc(p->c, 8);
        const char *two = t->op == OPC_FLOORDIV ? "//" : t->op == OPC_POW ? "**" : t->op == OPC_EQ ? "=="
                        : t->op == OPC_NE ? "!=" : t->op == OPC_GE ? ">=" : t->op == OPC_LE ? "<=" : NULL;
        if (two) snprintf(s, 8, "'%s'", two);
        else snprintf(s, 8, "'%c'", t->op);
        return s;
    }
    }
    return "token";
}

static char *tok_str(P *p, const tok *t) {
    char *s = jx_alloc(p->c, t->n + 1);
    memcpy(s, t->s, t->n);
    s[t->n] = 0;
    return s;
}

static void expect_op(P *p, int op, const char *what) {
    tok *t = cur(p);
    if (!tok_is_op(t, op)) jx_fail(p->c, t->line, "expected %s, got %s", what, describe(p, t));
    next_tok(p);
}

static void expect_name(P *p, const char *name) {
    tok *t = cur(p);
    if (!tok_is_name(t, name)) jx_fail(p->c, t->line, "expected '%s', got %s", name, describe(p, t));
    next_tok(p);
}

static void expect_block_end(P *p) {
    tok *t = cur(p);
    if (t->type != T_BLOCK_END) jx_fail(p->c, t->line, "expected end of statement block, got %s", describe(p, t));
    next_tok(p);
}

static node *mk(P *p, int type, int line) {
    node *n = jx_alloc(p->c, sizeof(node));
    memset(n, 0, sizeof *n);
    n->type = (uint8_t)type;
    n->line = line;
    return n;
}

static void enter(P *p, int line) {
    if (++p->depth > MAX_PARSE_DEPTH) jx_fail(p->c, line, "template nested too deeply (more than %d levels)", MAX_PARSE_DEPTH);
}
static void leave(P *p) { p->depth--; }

static node *parse_expr(P *p, int with_condexpr);
static node *parse_tuple(P *p, int simplified, int with_condexpr, const char *extra_end, int explicit_parens);
static node *parse_unary(P *p, int with_filter);
static node *parse_primary(P *p);
static node *parse_postfix(P *p, node *n);
static node *parse_filter_expr(P *p, node *n);
static node *parse_filter(P *p, node *n, int start_inline);

static const char *reserved_const(const tok *t) {
    static const char *names[] = {"true", "false", "True", "False", "none", "None"};
    for (size_t i = 0; i < 6; i++)
        if (tok_is_name(t, names[i])) return names[i];
    return NULL;
}

/* call arguments "( ... )" into n->kids / kids2 / b / c */
static void parse_call_args(P *p, node *n) {
    tok *open = cur(p);
    expect_op(p, '(', "'('");
    nvec args = {0}, kwargs = {0};
    int require_comma = 0;
    while (!tok_is_op(cur(p), ')')) {
        if (require_comma) {
            expect_op(p, ',', "','");
            if (tok_is_op(cur(p), ')')) break;
        }
        if (tok_is_op(cur(p), '*')) {
            if (n->b || n->c) jx_fail(p->c, open->line, "invalid syntax for function call expression");
            next_tok(p);
            n->b = parse_expr(p, 1);
        } else if (tok_is_op(cur(p), OPC_POW)) {
            if (n->c) jx_fail(p->c, open->line, "invalid syntax for function call expression");
            next_tok(p);
            n->c = parse_expr(p, 1);
        } else if (cur(p)->type == T_NAME && tok_is_op(look(p), '=')) {
            if (n->c) jx_fail(p->c, open->line, "invalid syntax for function call expression");
            node *kw = mk(p, N_KWARG, cur(p)->line);
            kw->name = tok_str(p, cur(p));
            next_tok(p);
            next_tok(p);
            kw->a = parse_expr(p, 1);
            nv_push(p, &kwargs, kw);
        } else {
            if (n->b || n->c || kwargs.n) jx_fail(p->c, open->line, "invalid syntax for function call expression");
            nv_push(p, &args, parse_expr(p, 1));
        }
        require_comma = 1;
    }
    expect_op(p, ')', "')'");
    n->kids = args.v;
    n->nkids = args.n;
    n->kids2 = kwargs.v;
    n->nkids2 = kwargs.n;
}

static node *parse_list(P *p) {
    node *n = mk(p, N_LIST, cur(p)->line);
    expect_op(p, '[', "'['");
    nvec items = {0};
    while (!tok_is_op(cur(p), ']')) {
        if (items.n) expect_op(p, ',', "','");
        if (tok_is_op(cur(p), ']')) break;
        nv_push(p, &items, parse_expr(p, 1));
    }
    expect_op(p, ']', "']'");
    n->kids = items.v;
    n->nkids = items.n;
    return n;
}

static node *parse_dict(P *p) {
    node *n = mk(p, N_DICT, cur(p)->line);
    expect_op(p, '{', "'{'");
    nvec keys = {0}, vals = {0};
    while (!tok_is_op(cur(p), '}')) {
        if (keys.n) expect_op(p, ',', "','");
        if (tok_is_op(cur(p), '}')) break;
        nv_push(p, &keys, parse_expr(p, 1));
        expect_op(p, ':', "':'");
        nv_push(p, &vals, parse_expr(p, 1));
    }
    expect_op(p, '}', "'}'");
    n->kids = keys.v;
    n->nkids = keys.n;
    n->kids2 = vals.v;
    n->nkids2 = vals.n;
    return n;
}

static node *parse_primary(P *p) {
    tok *t = cur(p);
    enter(p, t->line);
    node *n;
    if (t->type == T_NAME) {
        const char *r = reserved_const(t);
        if (r) {
            n = mk(p, N_CONST, t->line);
            n->val = (r[0] == 'n' || r[0] == 'N') ? jv_none() : jv_bool(r[0] == 't' || r[0] == 'T');
        } else {
            n = mk(p, N_NAME, t->line);
            n->name = tok_str(p, t);
        }
        next_tok(p);
    } else if (t->type == T_STRING) {
        /* adjacent string literals concatenate */
        jbuf b = {0};
        int line = t->line;
        while (cur(p)->type == T_STRING) {
            jb_put(p->c, &b, cur(p)->s, cur(p)->n);
            next_tok(p);
        }
        n = mk(p, N_CONST, line);
        n->val = jv_str(p->c, b.p ? b.p : "", b.n);
    } else if (t->type == T_INT || t->type == T_FLOAT) {
        n = mk(p, N_CONST, t->line);
        n->val = t->type == T_INT ? jv_int(t->i) : jv_float(t->f);
        next_tok(p);
    } else if (tok_is_op(t, '(')) {
        next_tok(p);
        n = parse_tuple(p, 0, 1, NULL, 1);
        expect_op(p, ')', "')'");
    } else if (tok_is_op(t, '[')) {
        n = parse_list(p);
    } else if (tok_is_op(t, '{')) {
        n = parse_dict(p);
    } else {
        jx_fail(p->c, t->line, "unexpected %s", describe(p, t));
    }
    leave(p);
    return n;
}

static node *parse_subscribed(P *p) {
    int line = cur(p)->line;
    node *args[3] = {NULL, NULL, NULL};
    if (tok_is_op(cur(p), ':')) {
        next_tok(p);
    } else {
        node *e = parse_expr(p, 1);
        if (!tok_is_op(cur(p), ':')) return e;
        next_tok(p);
        args[0] = e;
    }
    if (tok_is_op(cur(p), ':')) {
        /* no stop */
    } else if (!tok_is_op(cur(p), ']') && !tok_is_op(cur(p), ',')) {
        args[1] = parse_expr(p, 1);
    }
    if (tok_is_op(cur(p), ':')) {
        next_tok(p);
        if (!tok_is_op(cur(p), ']') && !tok_is_op(cur(p), ',')) args[2] = parse_expr(p, 1);
    }
    node *s = mk(p, N_SLICE, line);
    s->a = args[0];
    s->b = args[1];
    s->c = args[2];
    return s;
}

static node *parse_postfix(P *p, node *n) {
    for (;;) {
        tok *t = cur(p);
        if (tok_is_op(t, '.')) {
            next_tok(p);
            tok *a = cur(p);
            if (a->type == T_NAME) {
                node *g = mk(p, N_GETATTR, t->line);
                g->a = n;
                g->name = tok_str(p, a);
                next_tok(p);
                n = g;
            } else if (a->type == T_INT) {
                node *g = mk(p, N_GETITEM, t->line);
                g->a = n;
                g->b = mk(p, N_CONST, a->line);
                g->b->val = jv_int(a->i);
                next_tok(p);
                n = g;
            } else {
                jx_fail(p->c, a->line, "expected name or number after '.', got %s", describe(p, a));
            }
        } else if (tok_is_op(t, '[')) {
            next_tok(p);
            nvec args = {0};
            while (!tok_is_op(cur(p), ']')) {
                if (args.n) expect_op(p, ',', "','");
                nv_push(p, &args, parse_subscribed(p));
            }
            expect_op(p, ']', "']'");
            if (args.n == 0) jx_fail(p->c, t->line, "expected a subscript inside '[]'");
            node *g = mk(p, N_GETITEM, t->line);
            g->a = n;
            if (args.n == 1) g->b = args.v[0];
            else {
                g->b = mk(p, N_TUPLE, t->line);
                g->b->kids = args.v;
                g->b->nkids = args.n;
            }
            n = g;
        } else if (tok_is_op(t, '(')) {
            node *call = mk(p, N_CALL, t->line);
            call->a = n;
            parse_call_args(p, call);
            n = call;
        } else {
            return n;
        }
    }
}

static node *parse_filter(P *p, node *n, int start_inline) {
    while (tok_is_op(cur(p), '|') || start_inline) {
        if (!start_inline) next_tok(p);
        tok *t = cur(p);
        if (t->type != T_NAME) jx_fail(p->c, t->line, "expected a filter name, got %s", describe(p, t));
        char *name = tok_str(p, t);
        next_tok(p);
        while (tok_is_op(cur(p), '.')) {
            next_tok(p);
            tok *u = cur(p);
            if (u->type != T_NAME) jx_fail(p->c, u->line, "expected a name, got %s", describe(p, u));
            size_t l = strlen(name);
            char *nn = jx_alloc(p->c, l + u->n + 2);
            memcpy(nn, name, l);
            nn[l] = '.';
            memcpy(nn + l + 1, u->s, u->n);
            nn[l + 1 + u->n] = 0;
            name = nn;
            next_tok(p);
        }
        int fid = jx_filter_id(name);
        if (fid < 0) jx_fail(p->c, t->line, "no filter named '%s'", name);
        node *f = mk(p, N_FILTER, t->line);
        f->a = n;
        f->name = name;
        f->fid = fid;
        if (tok_is_op(cur(p), '(')) parse_call_args(p, f);
        n = f;
        start_inline = 0;
    }
    return n;
}

static node *parse_test(P *p, node *n) {
    tok *is = next_tok(p); /* 'is' */
    int negated = 0;
    if (tok_is_name(cur(p), "not")) {
        next_tok(p);
        negated = 1;
    }
    tok *t = cur(p);
    if (t->type != T_NAME) jx_fail(p->c, t->line, "expected a test name, got %s", describe(p, t));
    char *name = tok_str(p, t);
    next_tok(p);
    int tid = jx_test_id(name);
    if (tid < 0) jx_fail(p->c, t->line, "no test named '%s'", name);
    node *x = mk(p, N_TEST, is->line);
    x->a = n;
    x->name = name;
    x->fid = tid;
    tok *c = cur(p);
    if (tok_is_op(c, '(')) {
        parse_call_args(p, x);
    } else if ((c->type == T_NAME || c->type == T_STRING || c->type == T_INT || c->type == T_FLOAT ||
                tok_is_op(c, '(') || tok_is_op(c, '[') || tok_is_op(c, '{')) &&
               !tok_is_name(c, "else") && !tok_is_name(c, "or") && !tok_is_name(c, "and")) {
        if (tok_is_name(c, "is")) jx_fail(p->c, c->line, "you cannot chain multiple tests with is");
        node *arg = parse_postfix(p, parse_primary(p));
        x->kids = jx_alloc(p->c, sizeof(node *));
        x->kids[0] = arg;
        x->nkids = 1;
    }
    if (negated) {
        node *nn = mk(p, N_NOT, is->line);
        nn->a = x;
        return nn;
    }
    return x;
}

static node *parse_filter_expr(P *p, node *n) {
    for (;;) {
        tok *t = cur(p);
        if (tok_is_op(t, '|')) n = parse_filter(p, n, 0);
        else if (tok_is_name(t, "is")) n = parse_test(p, n);
        else if (tok_is_op(t, '(')) {
            node *call = mk(p, N_CALL, t->line);
            call->a = n;
            parse_call_args(p, call);
            n = call;
        } else return n;
    }
}

static node *parse_unary(P *p, int with_filter) {
    tok *t = cur(p);
    enter(p, t->line);
    node *n;
    if (tok_is_op(t, '-') || tok_is_op(t, '+')) {
        next_tok(p);
        n = mk(p, t->op == '-' ? N_NEG : N_POS, t->line);
        n->a = parse_unary(p, 0);
    } else {
        n = parse_primary(p);
    }
    n = parse_postfix(p, n);
    if (with_filter) n = parse_filter_expr(p, n);
    leave(p);
    return n;
}

static node *binop(P *p, int op, node *l, node *r, int line) {
    node *n = mk(p, N_BINOP, line);
    n->op = (uint8_t)op;
    n->a = l;
    n->b = r;
    return n;
}

static node *parse_pow(P *p) {
    int line = cur(p)->line;
    node *l = parse_unary(p, 1);
    while (tok_is_op(cur(p), OPC_POW)) {
        next_tok(p);
        l = binop(p, OP_POW, l, parse_unary(p, 1), line);
    }
    return l;
}

static node *parse_math2(P *p) {
    int line = cur(p)->line;
    node *l = parse_pow(p);
    for (;;) {
        tok *t = cur(p);
        int op = tok_is_op(t, '*') ? OP_MUL : tok_is_op(t, '/') ? OP_DIV : tok_is_op(t, OPC_FLOORDIV) ? OP_FLOORDIV
               : tok_is_op(t, '%') ? OP_MOD : 0;
        if (!op) return l;
        next_tok(p);
        l = binop(p, op, l, parse_pow(p), line);
    }
}

static node *parse_concat(P *p) {
    int line = cur(p)->line;
    node *l = parse_math2(p);
    while (tok_is_op(cur(p), '~')) {
        next_tok(p);
        l = binop(p, OP_CONCAT, l, parse_math2(p), line);
    }
    return l;
}

static node *parse_math1(P *p) {
    int line = cur(p)->line;
    node *l = parse_concat(p);
    for (;;) {
        tok *t = cur(p);
        int op = tok_is_op(t, '+') ? OP_ADD : tok_is_op(t, '-') ? OP_SUB : 0;
        if (!op) return l;
        next_tok(p);
        l = binop(p, op, l, parse_concat(p), line);
    }
}

static node *parse_compare(P *p) {
    int line = cur(p)->line;
    node *e = parse_math1(p);
    nvec ops = {0};
    for (;;) {
        tok *t = cur(p);
        int op = 0;
        if (t->type == T_OP) {
            switch (t->op) {
            case OPC_EQ: op = OP_EQ; break;
            case OPC_NE: op = OP_NE; break;
            case '<': op = OP_LT; break;
            case OPC_LE: op = OP_LE; break;
            case '>': op = OP_GT; break;
            case OPC_GE: op = OP_GE; break;
            }
            if (op) next_tok(p);
        } else if (tok_is_name(t, "in")) {
            op = OP_IN;
            next_tok(p);
        } else if (tok_is_name(t, "not") && tok_is_name(look(p), "in")) {
            op = OP_NOTIN;
            next_tok(p);
            next_tok(p);
        }
        if (!op) break;
        node *o = mk(p, N_KWARG, t->line);
        o->op = (uint8_t)op;
        o->a = parse_math1(p);
        nv_push(p, &ops, o);
    }
    if (!ops.n) return e;
    node *n = mk(p, N_COMPARE, line);
    n->a = e;
    n->kids = ops.v;
    n->nkids = ops.n;
    return n;
}

static node *parse_not(P *p) {
    tok *t = cur(p);
    if (tok_is_name(t, "not")) {
        enter(p, t->line);
        next_tok(p);
        node *n = mk(p, N_NOT, t->line);
        n->a = parse_not(p);
        leave(p);
        return n;
    }
    return parse_compare(p);
}

static node *parse_and(P *p) {
    int line = cur(p)->line;
    node *l = parse_not(p);
    while (tok_is_name(cur(p), "and")) {
        next_tok(p);
        node *n = mk(p, N_AND, line);
        n->a = l;
        n->b = parse_not(p);
        l = n;
    }
    return l;
}

static node *parse_or(P *p) {
    int line = cur(p)->line;
    node *l = parse_and(p);
    while (tok_is_name(cur(p), "or")) {
        next_tok(p);
        node *n = mk(p, N_OR, line);
        n->a = l;
        n->b = parse_and(p);
        l = n;
    }
    return l;
}

static node *parse_condexpr(P *p) {
    int line = cur(p)->line;
    node *e1 = parse_or(p);
    while (tok_is_name(cur(p), "if")) {
        next_tok(p);
        node *n = mk(p, N_COND, line);
        n->b = e1;
        n->a = parse_or(p);
        if (tok_is_name(cur(p), "else")) {
            next_tok(p);
            enter(p, line);
            n->c = parse_condexpr(p);
            leave(p);
        }
        e1 = n;
    }
    return e1;
}

static node *parse_expr(P *p, int with_condexpr) {
    enter(p, cur(p)->line);
    node *n = with_condexpr ? parse_condexpr(p) : parse_or(p);
    leave(p);
    return n;
}

static int is_tuple_end(P *p, const char *extra_end) {
    tok *t = cur(p);
    if (t->type == T_VAR_END || t->type == T_BLOCK_END || tok_is_op(t, ')')) return 1;
    if (extra_end && tok_is_name(t, extra_end)) return 1;
    return 0;
}

static node *parse_tuple(P *p, int simplified, int with_condexpr, const char *extra_end, int explicit_parens) {
    int line = cur(p)->line;
    nvec args = {0};
    int is_tuple = 0;
    for (;;) {
        if (args.n) expect_op(p, ',', "','");
        if (is_tuple_end(p, extra_end)) break;
        node *e = simplified ? parse_primary(p) : parse_expr(p, with_condexpr);
        nv_push(p, &args, e);
        if (tok_is_op(cur(p), ',')) is_tuple = 1;
        else break;
    }
    if (!is_tuple) {
        if (args.n) return args.v[0];
        if (!explicit_parens) jx_fail(p->c, cur(p)->line, "expected an expression, got %s", describe(p, cur(p)));
    }
    node *n = mk(p, N_TUPLE, line);
    n->kids = args.v;
    n->nkids = args.n;
    return n;
}

/* ---- statements ----------------------------------------------------------------------------- */

static void check_store_target(P *p, node *t) {
    if (t->type == N_NAME) {
        if (!strcmp(t->name, "loop")) jx_fail(p->c, t->line, "can't assign to special loop variable in for-loop target");
        return;
    }
    if (t->type == N_TUPLE) {
        for (int i = 0; i < t->nkids; i++) check_store_target(p, t->kids[i]);
        return;
    }
    jx_fail(p->c, t->line, "can't assign to %s", t->type == N_CONST ? "a constant" : "an expression");
}

static node *parse_assign_target(P *p, int with_namespace, const char *extra_end) {
    tok *t = cur(p);
    if (with_namespace && t->type == T_NAME && tok_is_op(look(p), '.')) {
        node *n = mk(p, N_NSATTR, t->line);
        n->name = tok_str(p, t);
        next_tok(p);
        next_tok(p);
        tok *a = cur(p);
        if (a->type != T_NAME) jx_fail(p->c, a->line, "expected an attribute name, got %s", describe(p, a));
        n->val = jv_str(p->c, a->s, a->n);
        next_tok(p);
        return n;
    }
    node *n = parse_tuple(p, 1, 1, extra_end, 0);
    check_store_target(p, n);
    return n;
}

static void subparse(P *p, const char **end_names, nvec *body, int open_line, const char *open_tag);

/* consumes block_end, parses a body up to one of end_names (left unconsumed) */
static void parse_statements(P *p, const char **end_names, nvec *body, int open_line, const char *tag) {
    if (tok_is_op(cur(p), ':')) next_tok(p);
    expect_block_end(p);
    subparse(p, end_names, body, open_line, tag);
}

static node *body_node(P *p, nvec *v, int line) {
    node *b = mk(p, N_BODY, line);
    b->kids = v->v;
    b->nkids = v->n;
    return b;
}

static node *parse_if(P *p, int line) {
    node *result = mk(p, N_IF, line), *n = result;
    static const char *ends[] = {"elif", "else", "endif", NULL};
    static const char *ends2[] = {"endif", NULL};
    for (;;) {
        n->a = parse_tuple(p, 0, 0, NULL, 0);
        nvec body = {0};
        parse_statements(p, ends, &body, line, "if");
        n->kids = body.v;
        n->nkids = body.n;
        tok *t = next_tok(p);
        if (tok_is_name(t, "elif")) {
            node *e = mk(p, N_IF, t->line);
            n->kids2 = jx_alloc(p->c, sizeof(node *));
            n->kids2[0] = e;
            n->nkids2 = 1;
            n = e;
            continue;
        }
        if (tok_is_name(t, "else")) {
            nvec eb = {0};
            parse_statements(p, ends2, &eb, line, "if");
            next_tok(p);
            n->kids2 = eb.v;
            n->nkids2 = eb.n;
        }
        break;
    }
    return result;
}

/* 1 when a macro or call block is defined anywhere below n (it would capture a loop's scope) */
static int defines_macro(const node *n, int depth) {
    if (!n || depth > 400) return 0;
    if (n->type == N_MACRO || n->type == N_CALLBLOCK) return 1;
    if (defines_macro(n->a, depth + 1) || defines_macro(n->b, depth + 1) || defines_macro(n->c, depth + 1) ||
        defines_macro(n->d, depth + 1))
        return 1;
    for (int i = 0; i < n->nkids; i++)
        if (defines_macro(n->kids[i], depth + 1)) return 1;
    for (int i = 0; i < n->nkids2; i++)
        if (defines_macro(n->kids2[i], depth + 1)) return 1;
    return 0;
}

static node *parse_for(P *p, int line) {
    node *n = mk(p, N_FOR, line);
    n->a = parse_assign_target(p, 0, "in");
    expect_name(p, "in");
    n->b = parse_tuple(p, 0, 0, "recursive", 0);
    if (tok_is_name(cur(p), "if")) {
        next_tok(p);
        n->c = parse_expr(p, 1);
    }
    if (tok_is_name(cur(p), "recursive")) {
        next_tok(p);
        n->flag = 1;
    }
    static const char *ends[] = {"endfor", "else", NULL};
    static const char *ends2[] = {"endfor", NULL};
    nvec body = {0};
    p->loops++;
    parse_statements(p, ends, &body, line, "for");
    p->loops--;
    n->kids = body.v;
    n->nkids = body.n;
    tok *t = next_tok(p);
    if (tok_is_name(t, "else")) {
        nvec eb = {0};
        parse_statements(p, ends2, &eb, line, "for");
        next_tok(p);
        n->kids2 = eb.v;
        n->nkids2 = eb.n;
    }
    for (int i = 0; i < n->nkids; i++)
        if (defines_macro(n->kids[i], 0)) n->flag |= 2;
    return n;
}

static node *parse_set(P *p, int line) {
    node *target = parse_assign_target(p, 1, NULL);
    if (tok_is_op(cur(p), '=')) {
        next_tok(p);
        node *n = mk(p, N_SET, line);
        n->a = target;
        n->b = parse_tuple(p, 0, 1, NULL, 0);
        return n;
    }
    node *n = mk(p, N_SETBLOCK, line);
    n->a = target;
    n->b = parse_filter(p, NULL, 0);
    static const char *ends[] = {"endset", NULL};
    nvec body = {0};
    parse_statements(p, ends, &body, line, "set");
    next_tok(p);
    n->kids = body.v;
    n->nkids = body.n;
    return n;
}

static void parse_signature(P *p, node *n) {
    expect_op(p, '(', "'('");
    nvec params = {0};
    int seen_default = 0;
    while (!tok_is_op(cur(p), ')')) {
        if (params.n) expect_op(p, ',', "','");
        if (tok_is_op(cur(p), ')')) break;
        tok *t = cur(p);
        if (t->type != T_NAME || reserved_const(t)) jx_fail(p->c, t->line, "expected a parameter name, got %s", describe(p, t));
        node *a = mk(p, N_NAME, t->line);
        a->name = tok_str(p, t);
        next_tok(p);
        if (tok_is_op(cur(p), '=')) {
            next_tok(p);
            a->a = parse_expr(p, 1);
            seen_default = 1;
        } else if (seen_default) {
            jx_fail(p->c, t->line, "non-default argument follows default argument");
        }
        nv_push(p, &params, a);
    }
    expect_op(p, ')', "')'");
    n->kids = params.v;
    n->nkids = params.n;
}

/* 1 when the subtree reads variable `name` (macros only accept extra arguments when their body
 * reads `varargs` / `kwargs`, as in Jinja) */
static int uses_name(const node *n, const char *name, int depth) {
    if (!n || depth > 400) return 0;
    if (n->type == N_NAME && !strcmp(n->name, name)) return 1;
    if (uses_name(n->a, name, depth + 1) || uses_name(n->b, name, depth + 1) || uses_name(n->c, name, depth + 1) ||
        uses_name(n->d, name, depth + 1))
        return 1;
    for (int i = 0; i < n->nkids; i++)
        if (uses_name(n->kids[i], name, depth + 1)) return 1;
    for (int i = 0; i < n->nkids2; i++)
        if (uses_name(n->kids2[i], name, depth + 1)) return 1;
    return 0;
}

static void mark_catches(node *n) {
    n->flag = (uint8_t)((uses_name(n->b, "varargs", 0) ? 1 : 0) | (uses_name(n->b, "kwargs", 0) ? 2 : 0));
}

static node *parse_macro(P *p, int line) {
    node *n = mk(p, N_MACRO, line);
    tok *t = cur(p);
    if (t->type != T_NAME || reserved_const(t)) jx_fail(p->c, t->line, "expected a macro name, got %s", describe(p, t));
    n->name = tok_str(p, t);
    next_tok(p);
    parse_signature(p, n);
    static const char *ends[] = {"endmacro", NULL};
    nvec body = {0};
    int saved = p->loops;
    p->loops = 0;
    parse_statements(p, ends, &body, line, "macro");
    p->loops = saved;
    next_tok(p);
    n->b = body_node(p, &body, line);
    mark_catches(n);
    return n;
}

static node *parse_call_block(P *p, int line) {
    node *n = mk(p, N_CALLBLOCK, line);
    if (tok_is_op(cur(p), '(')) parse_signature(p, n);
    node *call = parse_expr(p, 1);
    if (call->type != N_CALL) jx_fail(p->c, line, "expected a call after {%% call %%}");
    n->a = call;
    static const char *ends[] = {"endcall", NULL};
    nvec body = {0};
    int saved = p->loops;
    p->loops = 0;
    parse_statements(p, ends, &body, line, "call");
    p->loops = saved;
    next_tok(p);
    n->b = body_node(p, &body, line);
    mark_catches(n);
    return n;
}

static node *parse_statement(P *p) {
    tok *t = cur(p);
    if (t->type != T_NAME) jx_fail(p->c, t->line, "tag name expected, got %s", describe(p, t));
    int line = t->line;
    enter(p, line);
    char *name = tok_str(p, t);
    next_tok(p);
    node *n = NULL;
    if (!strcmp(name, "if")) n = parse_if(p, line);
    else if (!strcmp(name, "for")) n = parse_for(p, line);
    else if (!strcmp(name, "set")) n = parse_set(p, line);
    else if (!strcmp(name, "macro")) n = parse_macro(p, line);
    else if (!strcmp(name, "call")) n = parse_call_block(p, line);
    else if (!strcmp(name, "filter")) {
        n = mk(p, N_FILTERBLOCK, line);
        n->a = parse_filter(p, NULL, 1);
        static const char *ends[] = {"endfilter", NULL};
        nvec body = {0};
        parse_statements(p, ends, &body, line, "filter");
        next_tok(p);
        n->kids = body.v;
        n->nkids = body.n;
    } else if (!strcmp(name, "break") || !strcmp(name, "continue")) {
        if (!p->loops) jx_fail(p->c, line, "'%s' outside of a loop", name);
        n = mk(p, name[0] == 'b' ? N_BREAK : N_CONTINUE, line);
    } else if (!strcmp(name, "with")) {
        n = mk(p, N_WITH, line);
        nvec targets = {0}, values = {0};
        while (cur(p)->type != T_BLOCK_END) {
            if (targets.n) expect_op(p, ',', "','");
            nv_push(p, &targets, parse_assign_target(p, 0, NULL));
            expect_op(p, '=', "'='");
            nv_push(p, &values, parse_expr(p, 1));
        }
        n->kids = targets.v;
        n->nkids = targets.n;
        n->kids2 = values.v;
        n->nkids2 = values.n;
        static const char *ends[] = {"endwith", NULL};
        nvec body = {0};
        parse_statements(p, ends, &body, line, "with");
        next_tok(p);
        n->b = body_node(p, &body, line);
    } else if (!strcmp(name, "generation")) {
        /* HF's AssistantTracker tag: renders its body unchanged */
        static const char *ends[] = {"endgeneration", NULL};
        nvec body = {0};
        parse_statements(p, ends, &body, line, "generation");
        next_tok(p);
        n = body_node(p, &body, line);
    } else if (!strcmp(name, "include") || !strcmp(name, "extends") || !strcmp(name, "import") ||
               !strcmp(name, "from") || !strcmp(name, "block")) {
        jx_fail(p->c, line, "tag '%s' is not supported in chat templates (no template loader)", name);
    } else {
        jx_fail(p->c, line, "encountered unknown tag '%s'", name);
    }
    expect_block_end(p);
    leave(p);
    return n;
}

static int in_names(const tok *t, const char **names) {
    if (!names) return 0;
    for (int i = 0; names[i]; i++)
        if (tok_is_name(t, names[i])) return 1;
    return 0;
}

static void subparse(P *p, const char **end_names, nvec *body, int open_line, const char *open_tag) {
    for (;;) {
        tok *t = cur(p);
        if (t->type == T_EOF) {
            if (end_names)
            {
                const char *want = end_names[0];
                for (int k = 0; end_names[k]; k++)
                    if (!strncmp(end_names[k], "end", 3)) want = end_names[k];
                jx_fail(p->c, open_line, "unexpected end of template: the '%s' tag opened on line %d was never closed (expected '%s')",
                        open_tag, open_line, want);
            }
            return;
        }
        if (t->type == T_DATA) {
            node *n = mk(p, N_DATA, t->line);
            n->val = jv_str(p->c, t->s, t->n);
            nv_push(p, body, n);
            next_tok(p);
        } else if (t->type == T_VAR_BEGIN) {
            next_tok(p);
            node *n = mk(p, N_PRINT, t->line);
            n->a = parse_tuple(p, 0, 1, NULL, 0);
            tok *e = cur(p);
            if (e->type != T_VAR_END) jx_fail(p->c, e->line, "expected end of print statement, got %s", describe(p, e));
            next_tok(p);
            nv_push(p, body, n);
        } else if (t->type == T_BLOCK_BEGIN) {
            next_tok(p);
            if (in_names(cur(p), end_names)) return;
            tok *nt = cur(p);
            if (nt->type == T_NAME && nt->n >= 3 && !memcmp(nt->s, "end", 3)) {
                char *nm = tok_str(p, nt);
                if (end_names) {
                    const char *want = end_names[0];
                    for (int k = 0; end_names[k]; k++)
                        if (!strncmp(end_names[k], "end", 3)) want = end_names[k];
                    jx_fail(p->c, nt->line, "encountered unknown tag '%s'; expected '%s' to close the '%s' opened on line %d",
                            nm, want, open_tag, open_line);
                }
                jx_fail(p->c, nt->line, "encountered unknown tag '%s' (nothing to close)", nm);
            }
            nv_push(p, body, parse_statement(p));
        } else {
            jx_fail(p->c, t->line, "unexpected %s", describe(p, t));
        }
    }
}

node *jx_parse_tokens(jctx *c, tok *toks, size_t ntoks) {
    P p = {.c = c, .t = toks, .n = ntoks};
    nvec body = {0};
    subparse(&p, NULL, &body, 1, "");
    node *root = mk(&p, N_BODY, 1);
    root->kids = body.v;
    root->nkids = body.n;
    return root;
}
