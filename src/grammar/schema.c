/* schema.c — JSON Schema (and json_object, and forced tool calls) -> grammar nodes; see grammar.h
 * for the supported keywords and grammar_int.h for the nodes. Every refusal names the keyword and
 * the JSON path of the schema object it sits in ("#/properties/a/items"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"
#include "grammar_int.h"

typedef struct {
    char *ref;
    int node;
} ref_entry;

typedef struct {
    grammar *g;
    const json_t *root;   /* the document $ref resolves in */
    ref_entry *refs;
    int n_refs, cap_refs;
    int any;              /* node of "any JSON value", -1 until needed */
    mtplx_err *err;
} cctx;

static int node_new(cctx *cx, gn_kind k) {
    grammar *g = cx->g;
    if (g->n_nodes >= GR_MAX_NODES)
        return err_set(cx->err, MTPLX_EINVAL, "schema: the grammar needs more than %d nodes", GR_MAX_NODES);
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? 2 * g->cap_nodes : 64;
        gnode *n = realloc(g->nodes, (size_t)cap * sizeof *n);
        if (!n) return err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
        g->nodes = n;
        g->cap_nodes = cap;
    }
    gnode *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = k;
    n->additional = -1;
    n->max = -1;
    n->max_props = -1;
    return g->n_nodes++;
}

static int cmp_bytes(const char *a, int la, const char *b, int lb) {
    int m = la < lb ? la : lb, c = memcmp(a, b, (size_t)m);
    return c ? c : (la > lb) - (la < lb);
}

typedef struct {
    char *s;
    int len;
    int idx; /* original position */
} lit;

static int cmp_lit(const void *a, const void *b) {
    const lit *x = a, *y = b;
    return cmp_bytes(x->s, x->len, y->s, y->len);
}

/* A LITS node over the n byte strings (copied, sorted, duplicates dropped). */
static int lits_node(cctx *cx, char *const *strs, const int *lens, int n) {
    if (n <= 0) return err_set(cx->err, MTPLX_EINVAL, "schema: an empty set of values matches nothing");
    if (n > GR_MAX_LITS) return err_set(cx->err, MTPLX_EINVAL, "schema: more than %d enum values", GR_MAX_LITS);
    lit *v = calloc((size_t)n, sizeof *v);
    if (!v) return err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
    for (int i = 0; i < n; i++) v[i] = (lit){strs[i], lens[i], i};
    qsort(v, (size_t)n, sizeof *v, cmp_lit);
    int id = node_new(cx, GN_LITS);
    if (id < 0) {
        free(v);
        return id;
    }
    gnode *nd = &cx->g->nodes[id];
    nd->strs = calloc((size_t)n, sizeof *nd->strs);
    nd->lens = calloc((size_t)n, sizeof *nd->lens);
    if (!nd->strs || !nd->lens) {
        free(v);
        return err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m && !cmp_bytes(v[i].s, v[i].len, nd->strs[m - 1], nd->lens[m - 1])) continue;
        if (v[i].len == 0) continue;
        cx->g->lit_bytes += v[i].len;
        if (cx->g->lit_bytes > GR_MAX_LIT_BYTES) {
            free(v);
            return err_set(cx->err, MTPLX_EINVAL, "schema: more than %d bytes of enum/const text", GR_MAX_LIT_BYTES);
        }
        nd->strs[m] = malloc((size_t)v[i].len);
        if (!nd->strs[m]) {
            free(v);
            return err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
        }
        memcpy(nd->strs[m], v[i].s, (size_t)v[i].len);
        nd->lens[m++] = v[i].len;
    }
    nd->n = m;
    free(v);
    if (m == 0) return err_set(cx->err, MTPLX_EINVAL, "schema: an empty set of values matches nothing");
    return id;
}

static int text_node(cctx *cx, const char *s) {
    char *p = (char *)s;
    int l = (int)strlen(s);
    return lits_node(cx, &p, &l, 1);
}

/* A node with kids (ANYOF or SEQ); ANYOF kids that are ANYOF themselves are flattened. */
static int kids_node(cctx *cx, gn_kind k, const int *kids, int n) {
    int tmp[GR_MAX_ALTS], m = 0;
    const int *src = kids;
    if (k == GN_ANYOF) {
        for (int i = 0; i < n; i++) {
            const gnode *c = &cx->g->nodes[kids[i]];
            const int flat = c->kind == GN_ANYOF && c->kids; /* a $ref placeholder has no kids yet */
            int cn = flat ? c->n : 1;
            if (m + cn > GR_MAX_ALTS)
                return err_set(cx->err, MTPLX_EINVAL, "schema: more than %d anyOf/oneOf alternatives", GR_MAX_ALTS);
            for (int j = 0; j < cn; j++) tmp[m++] = flat ? c->kids[j] : kids[i];
        }
        src = tmp;
        n = m;
        if (n == 1) return src[0];
    }
    int id = node_new(cx, k);
    if (id < 0) return id;
    gnode *nd = &cx->g->nodes[id];
    nd->kids = malloc((size_t)(n ? n : 1) * sizeof *nd->kids);
    if (!nd->kids) return err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
    memcpy(nd->kids, src, (size_t)n * sizeof *src);
    nd->n = n;
    return id;
}

static int ws_node(cctx *cx, int max) {
    int id = node_new(cx, GN_WS);
    if (id >= 0) cx->g->nodes[id].max = max;
    return id;
}

/* Any JSON value (shared by every place that needs one). */
static int any_node(cctx *cx) {
    if (cx->any >= 0) return cx->any;
    int a = node_new(cx, GN_ANYOF);
    if (a < 0) return a;
    cx->any = a;
    int k[5];
    k[0] = node_new(cx, GN_OBJECT);
    if (k[0] < 0) return k[0];
    cx->g->nodes[k[0]].additional = a;
    k[1] = node_new(cx, GN_ARRAY);
    if (k[1] < 0) return k[1];
    cx->g->nodes[k[1]].kids = malloc(sizeof(int));
    if (!cx->g->nodes[k[1]].kids) return err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
    cx->g->nodes[k[1]].kids[0] = a;
    cx->g->nodes[k[1]].min = 0;
    k[2] = node_new(cx, GN_STRING);
    k[3] = node_new(cx, GN_NUMBER);
    char *lv[3] = {"true", "false", "null"};
    int ll[3] = {4, 5, 4};
    k[4] = lits_node(cx, lv, ll, 3);
    for (int i = 2; i < 5; i++)
        if (k[i] < 0) return k[i];
    gnode *nd = &cx->g->nodes[a];
    nd->kids = malloc(sizeof k);
    if (!nd->kids) return err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
    memcpy(nd->kids, k, sizeof k);
    nd->n = 5;
    return a;
}

static const char *const k_annotations[] = {"title", "description", "default", "examples", "$schema", "$id",
                                            "$comment", "deprecated", "readOnly", "writeOnly", "$defs",
                                            "definitions", "strict", "name", NULL};
static const char *const k_supported[] = {"type", "nullable", "properties", "required", "additionalProperties",
                                          "enum", "const", "anyOf", "oneOf", "allOf", "items", "minItems",
                                          "maxItems", "minLength", "maxLength", "minimum", "maximum",
                                          "exclusiveMinimum", "exclusiveMaximum", "$ref", "pattern", "format",
                                          "multipleOf", "minProperties", "maxProperties", "prefixItems",
                                          "uniqueItems", NULL};

static int in_list(const char *k, const char *const *l) {
    for (; *l; l++)
        if (!strcmp(k, *l)) return 1;
    return 0;
}

static int compile(cctx *cx, const json_t *sch, const char *path, int depth);

/* Resolve "#", "#/$defs/N" or "#/definitions/N" (one level; '~' escapes decoded). */
static int compile_ref(cctx *cx, const char *ref, const char *path, int depth) {
    for (int i = 0; i < cx->n_refs; i++)
        if (!strcmp(cx->refs[i].ref, ref)) return cx->refs[i].node;
    const json_t *target = NULL;
    if (!strcmp(ref, "#")) target = cx->root;
    else {
        const char *pre[2] = {"#/$defs/", "#/definitions/"};
        for (int k = 0; k < 2 && !target; k++) {
            size_t pl = strlen(pre[k]);
            if (strncmp(ref, pre[k], pl) || strchr(ref + pl, '/')) continue;
            char name[512];
            size_t o = 0;
            for (const char *p = ref + pl; *p && o + 1 < sizeof name; p++) {
                if (p[0] == '~' && p[1] == '0') name[o++] = '~', p++;
                else if (p[0] == '~' && p[1] == '1') name[o++] = '/', p++;
                else name[o++] = *p;
            }
            name[o] = 0;
            target = json_object_get(json_object_get(cx->root, k ? "definitions" : "$defs"), name);
        }
    }
    if (!target)
        return err_set(cx->err, MTPLX_EUNSUPPORTED, "schema: $ref '%s' at %s: only '#', '#/$defs/NAME' and "
                       "'#/definitions/NAME' in the same document are supported", ref, path);
    /* a placeholder first, so that recursive references find it */
    int id = node_new(cx, GN_ANYOF);
    if (id < 0) return id;
    if (cx->n_refs == cx->cap_refs) {
        int cap = cx->cap_refs ? 2 * cx->cap_refs : 8;
        ref_entry *r = realloc(cx->refs, (size_t)cap * sizeof *r);
        if (!r) return err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
        cx->refs = r;
        cx->cap_refs = cap;
    }
    cx->refs[cx->n_refs].ref = strdup(ref);
    if (!cx->refs[cx->n_refs].ref) return err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
    cx->refs[cx->n_refs++].node = id;
    int body = compile(cx, target, ref, depth + 1);
    if (body < 0) return body;
    gnode *nd = &cx->g->nodes[id];
    nd->kids = malloc(sizeof(int));
    if (!nd->kids) return err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
    nd->kids[0] = body;
    nd->n = 1;
    return id;
}

static int get_count(cctx *cx, const json_t *sch, const char *k, const char *path, int def, int *out) {
    const json_t *v = json_object_get(sch, k);
    *out = def;
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1000000)
        return err_set(cx->err, MTPLX_EINVAL, "schema: '%s' at %s must be an integer in [0, 1000000]", k, path);
    *out = (int)json_integer_value(v);
    return 0;
}

static int compile_object(cctx *cx, const json_t *sch, const char *path, int depth) {
    const json_t *props = json_object_get(sch, "properties"), *req = json_object_get(sch, "required"),
                 *add = json_object_get(sch, "additionalProperties");
    if (props && !json_is_object(props))
        return err_set(cx->err, MTPLX_EINVAL, "schema: 'properties' at %s must be an object", path);
    if (req && !json_is_array(req))
        return err_set(cx->err, MTPLX_EINVAL, "schema: 'required' at %s must be an array of names", path);
    int n = props ? (int)json_object_size(props) : 0;
    if (n > GR_MAX_PROPS)
        return err_set(cx->err, MTPLX_EUNSUPPORTED, "schema: 'properties' at %s has %d names; at most %d are supported",
                       path, n, GR_MAX_PROPS);
    lit keys[GR_MAX_PROPS];
    int rc = 0, i = 0;
    const char *k;
    json_t *v;
    memset(keys, 0, sizeof keys);
    json_object_foreach((json_t *)props, k, v) {
        char sub[1024];
        snprintf(sub, sizeof sub, "%s/properties/%s", path, k);
        int c = compile(cx, v, sub, depth + 1);
        if (c < 0) {
            rc = c;
            break;
        }
        json_t *js = json_string(k);
        keys[i].s = js ? json_dumps(js, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
        json_decref(js);
        if (!keys[i].s) {
            rc = err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
            break;
        }
        keys[i].len = (int)strlen(keys[i].s);
        keys[i].idx = c; /* the value node travels with the key through the sort */
        i++;
    }
    int addn = -1;
    if (!rc && add && !json_is_false(add)) {
        char sub[1024];
        snprintf(sub, sizeof sub, "%s/additionalProperties", path);
        addn = json_is_true(add) ? any_node(cx) : compile(cx, add, sub, depth + 1);
        if (addn < 0) rc = addn;
    }
    uint64_t required = 0;
    if (!rc) qsort(keys, (size_t)i, sizeof *keys, cmp_lit);
    for (size_t r = 0; !rc && req && r < json_array_size(req); r++) {
        const char *name = json_string_value(json_array_get(req, r));
        if (!name) {
            rc = err_set(cx->err, MTPLX_EINVAL, "schema: 'required' at %s must hold strings", path);
            break;
        }
        int found = -1;
        json_t *js = json_string(name);
        char *e = js ? json_dumps(js, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
        json_decref(js);
        for (int j = 0; e && j < i && found < 0; j++)
            if (!strcmp(e, keys[j].s)) found = j;
        free(e);
        if (found < 0)
            rc = err_set(cx->err, MTPLX_EUNSUPPORTED,
                         "schema: required property '%s' at %s is not in 'properties' (list it there)", name, path);
        else
            required |= 1ULL << found;
    }
    int mnp = 0, mxp = -1;
    if (!rc && !(rc = get_count(cx, sch, "minProperties", path, 0, &mnp)))
        rc = get_count(cx, sch, "maxProperties", path, -1, &mxp);
    if (!rc && mxp >= 0 && (mnp > mxp || __builtin_popcountll(required) > mxp))
        rc = err_set(cx->err, MTPLX_EINVAL, "schema: minProperties / required / maxProperties at %s leave no object", path);
    if (!rc && addn < 0 && mnp > i)
        rc = err_set(cx->err, MTPLX_EINVAL, "schema: minProperties %d at %s exceeds the %d properties allowed", mnp, path, i);
    int id = rc ? rc : node_new(cx, GN_OBJECT);
    if (id >= 0) {
        gnode *nd = &cx->g->nodes[id];
        nd->n = i;
        nd->min_props = mnp;
        nd->max_props = mxp;
        nd->required = required;
        nd->additional = addn;
        nd->kids = malloc((size_t)(i ? i : 1) * sizeof *nd->kids);
        nd->strs = calloc((size_t)(i ? i : 1), sizeof *nd->strs);
        nd->lens = malloc((size_t)(i ? i : 1) * sizeof *nd->lens);
        nd->key_hash = malloc((size_t)(i ? i : 1) * sizeof *nd->key_hash);
        if (!nd->kids || !nd->strs || !nd->lens || !nd->key_hash) id = err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
        for (int j = 0; id >= 0 && j < i; j++) {
            nd->kids[j] = keys[j].idx;
            nd->strs[j] = keys[j].s;
            keys[j].s = NULL;
            nd->lens[j] = keys[j].len;
            nd->key_hash[j] = gr_hash(nd->strs[j] + 1, (size_t)nd->lens[j] - 2, GR_HASH_SEED);
        }
    }
    for (int j = 0; j < i; j++) free(keys[j].s);
    return id;
}

/* prefixItems (the first positions), items (the later ones; false: none), min/maxItems, and
 * uniqueItems where it can be enforced exactly: items from a finite set of at most 64 JSON texts
 * (enum, const, boolean), tracked as a used-set in the array's frame, or maxItems <= 1. */
static int compile_array(cctx *cx, const json_t *sch, const char *path, int depth) {
    const json_t *items = json_object_get(sch, "items"), *pre = json_object_get(sch, "prefixItems"),
                 *uq = json_object_get(sch, "uniqueItems");
    int mn, mx, rc, np = 0, kids[GR_MAX_PROPS + 1];
    if ((rc = get_count(cx, sch, "minItems", path, 0, &mn)) || (rc = get_count(cx, sch, "maxItems", path, -1, &mx)))
        return rc;
    if (json_is_array(items))
        return err_set(cx->err, MTPLX_EUNSUPPORTED, "schema: 'items' at %s is an array (the draft-4 tuple form); "
                       "write it as 'prefixItems'", path);
    if (uq && !json_is_boolean(uq)) return err_set(cx->err, MTPLX_EINVAL, "schema: 'uniqueItems' at %s must be a boolean", path);
    if (pre) {
        if (!json_is_array(pre) || json_array_size(pre) > GR_MAX_PROPS)
            return err_set(cx->err, MTPLX_EUNSUPPORTED, "schema: 'prefixItems' at %s must be an array of at most %d schemas",
                           path, GR_MAX_PROPS);
        np = (int)json_array_size(pre);
        for (int i = 0; i < np; i++) {
            char sub[1024];
            snprintf(sub, sizeof sub, "%s/prefixItems/%d", path, i);
            if ((kids[i] = compile(cx, json_array_get(pre, (size_t)i), sub, depth + 1)) < 0) return kids[i];
        }
    }
    char sub[1024];
    snprintf(sub, sizeof sub, "%s/items", path);
    int it = json_is_false(items) ? -1 : items ? compile(cx, items, sub, depth + 1) : any_node(cx);
    if (it < -1 || (it == -1 && !json_is_false(items))) return it;
    if (it == -1 && (mx < 0 || mx > np)) mx = np; /* items: false: nothing after the prefix */
    if (mx >= 0 && mn > mx)
        return err_set(cx->err, MTPLX_EINVAL, "schema: minItems %d > maxItems %d at %s matches nothing", mn, mx, path);
    int unique = 0;
    if (json_is_true(uq) && (mx < 0 || mx > 1)) {
        const gnode *in = it >= 0 ? &cx->g->nodes[it] : NULL;
        if (np || !in || in->kind != GN_LITS || in->n > 64)
            return err_set(cx->err, MTPLX_EUNSUPPORTED, "schema: 'uniqueItems' at %s is enforced only when the items are "
                           "one of at most 64 fixed values (enum, const, boolean) and there are no prefixItems, or "
                           "maxItems <= 1", path);
        if (mn > in->n)
            return err_set(cx->err, MTPLX_EINVAL, "schema: minItems %d at %s exceeds the %d distinct values", mn, path, in->n);
        if (mx < 0 || mx > in->n) mx = in->n;
        unique = 1;
    }
    kids[np] = it;
    int id = node_new(cx, GN_ARRAY);
    if (id < 0) return id;
    gnode *nd = &cx->g->nodes[id];
    nd->kids = malloc((size_t)(np + 1) * sizeof(int));
    if (!nd->kids) return err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
    memcpy(nd->kids, kids, (size_t)(np + 1) * sizeof(int));
    nd->n = np;
    nd->min = mn;
    nd->max = mx;
    nd->unique = unique;
    return id;
}

/* Count d's memory against the grammar's budget (hostile schemas with many patterns). */
static int dfa_account(cctx *cx, const gr_dfa *d, const char *kw, const char *path) {
    cx->g->dfa_bytes += (long)((size_t)(d->cap + 1) * (size_t)d->n + (size_t)d->first[d->n] * sizeof(gr_edge) +
                               (size_t)d->n * (sizeof(int) + 1));
    if (cx->g->dfa_bytes > GR_MAX_DFA_BYTES)
        return err_set(cx->err, MTPLX_EUNSUPPORTED, "schema: '%s' at %s: the pattern/format automata of this schema "
                       "need more than %ld MiB", kw, path, GR_MAX_DFA_BYTES >> 20);
    return 0;
}

static int compile_string(cctx *cx, const json_t *sch, const char *path) {
    int mn, mx, rc;
    if ((rc = get_count(cx, sch, "minLength", path, 0, &mn)) || (rc = get_count(cx, sch, "maxLength", path, -1, &mx)))
        return rc;
    const json_t *pat = json_object_get(sch, "pattern"), *fmt = json_object_get(sch, "format");
    const char *rx = NULL, *kw = "pattern";
    size_t rl = 0;
    if (pat && !json_is_string(pat)) return err_set(cx->err, MTPLX_EINVAL, "schema: 'pattern' at %s must be a string", path);
    if (pat) rx = json_string_value(pat), rl = json_string_length(pat);
    if (fmt) {
        int fmax = -1;
        const char *frx = gr_format_regex(json_string_value(fmt), &fmax);
        if (frx && rx)
            return err_set(cx->err, MTPLX_EUNSUPPORTED, "schema: 'format' together with 'pattern' at %s is not supported "
                           "(write the format into the pattern)", path);
        if (frx) {
            rx = frx, rl = strlen(frx), kw = "format";
            if (fmax >= 0 && (mx < 0 || mx > fmax)) mx = fmax;
        }
    }
    if (mx >= 0 && mn > mx)
        return err_set(cx->err, MTPLX_EINVAL, "schema: minLength %d > maxLength %d at %s matches nothing", mn, mx, path);
    if (mn > 65000 || mx > 65000)
        return err_set(cx->err, MTPLX_EUNSUPPORTED, "schema: string lengths above 65000 at %s", path);
    gr_dfa *d = NULL;
    if (rx && (rc = gr_dfa_compile(rx, rl, kw, path, mn, mx, &d, cx->err))) return rc;
    if (d && (rc = dfa_account(cx, d, kw, path))) {
        gr_dfa_free(d);
        return rc;
    }
    int id = node_new(cx, GN_STRING);
    if (id < 0) {
        gr_dfa_free(d);
        return id;
    }
    cx->g->nodes[id].min = mn;
    cx->g->nodes[id].max = mx;
    cx->g->nodes[id].dfa = d;
    return id;
}

/* 'format' names one this compiler knows: the string formats of regex.c (applied to strings) and
 * the numeric int32 / int64 / float / double (applied to numbers). */
static int check_format(cctx *cx, const json_t *sch, const char *path) {
    const json_t *f = json_object_get(sch, "format");
    if (!f) return 0;
    const char *name = json_string_value(f);
    static const char *const num[] = {"int32", "int64", "float", "double", NULL};
    if (name && (gr_format_regex(name, NULL) || in_list(name, num))) return 0;
    return err_set(cx->err, MTPLX_EUNSUPPORTED, "schema: 'format' '%s' at %s is not supported (supported: date, time, "
                   "date-time, email, uuid, ipv4, ipv6, uri, hostname, int32, int64, float, double)",
                   name ? name : "(not a string)", path);
}

static int compile_type(cctx *cx, const json_t *sch, const char *type, const char *path, int depth) {
    if (!strcmp(type, "object")) return compile_object(cx, sch, path, depth);
    if (!strcmp(type, "array")) return compile_array(cx, sch, path, depth);
    if (!strcmp(type, "string")) return compile_string(cx, sch, path);
    if (!strcmp(type, "number") || !strcmp(type, "integer")) {
        int id = node_new(cx, GN_NUMBER);
        if (id < 0) return id;
        gnode nd = cx->g->nodes[id];
        nd.is_int = type[0] == 'i';
        const char *names[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
        for (int i = 0; i < 4; i++) {
            const json_t *v = json_object_get(sch, names[i]);
            if (!v) continue;
            if (!json_is_number(v))
                return err_set(cx->err, MTPLX_EUNSUPPORTED, "schema: '%s' at %s must be a number (the draft-4 boolean "
                               "form is not supported)", names[i], path);
            double x = json_number_value(v);
            if (!isfinite(x) || fabs(x) > 1e15)
                return err_set(cx->err, MTPLX_EUNSUPPORTED, "schema: '%s' at %s: bounds beyond 1e15 are not supported",
                               names[i], path);
            if (i < 2 && (!nd.has_lo || x > nd.lo || (x == nd.lo && i == 1))) nd.has_lo = 1, nd.lo = x, nd.lo_excl = i == 1;
            if (i >= 2 && (!nd.has_hi || x < nd.hi || (x == nd.hi && i == 3))) nd.has_hi = 1, nd.hi = x, nd.hi_excl = i == 3;
        }
        const char *fmt = json_string_value(json_object_get(sch, "format"));
        if (fmt && !strcmp(fmt, "int32")) { /* a 32-bit integer */
            nd.is_int = 1;
            if (!nd.has_lo || nd.lo < -2147483648.0) nd.has_lo = 1, nd.lo = -2147483648.0, nd.lo_excl = 0;
            if (!nd.has_hi || nd.hi > 2147483647.0) nd.has_hi = 1, nd.hi = 2147483647.0, nd.hi_excl = 0;
        }
        const json_t *mo = json_object_get(sch, "multipleOf");
        if (mo) {
            double m = json_is_number(mo) ? json_number_value(mo) : -1;
            if (!(m > 0) || !isfinite(m))
                return err_set(cx->err, MTPLX_EINVAL, "schema: 'multipleOf' at %s must be a number > 0", path);
            if (m != floor(m) || m > 1e15)
                return err_set(cx->err, MTPLX_EUNSUPPORTED, "schema: 'multipleOf' %g at %s: only integer divisors up to "
                               "1e15 are supported (a decimal divisor is not exact in binary floating point)", m, path);
            nd.multiple = m;
            nd.is_int = 1; /* a multiple of an integer is an integer: written without fraction or exponent */
        }
        if (nd.has_lo && nd.has_hi) {
            int empty;
            if (nd.is_int) {
                double lo = nd.lo_excl ? floor(nd.lo) + 1 : ceil(nd.lo), hi = nd.hi_excl ? ceil(nd.hi) - 1 : floor(nd.hi);
                empty = lo > hi;
            } else
                empty = nd.lo > nd.hi || (nd.lo == nd.hi && (nd.lo_excl || nd.hi_excl));
            if (!empty && nd.multiple > 0) {
                double lo = nd.lo_excl ? floor(nd.lo) + 1 : ceil(nd.lo), hi = nd.hi_excl ? ceil(nd.hi) - 1 : floor(nd.hi);
                empty = ceil(lo / nd.multiple) * nd.multiple > hi;
            }
            if (empty) return err_set(cx->err, MTPLX_EINVAL, "schema: the bounds at %s leave no %s", path, type);
        }
        cx->g->nodes[id] = nd;
        return id;
    }
    if (!strcmp(type, "boolean")) {
        char *lv[2] = {"true", "false"};
        int ll[2] = {4, 5};
        return lits_node(cx, lv, ll, 2);
    }
    if (!strcmp(type, "null")) return text_node(cx, "null");
    return err_set(cx->err, MTPLX_EINVAL, "schema: unknown type '%s' at %s", type, path);
}

/* 1 when JSON value v has JSON Schema type t. */
static int has_type(const json_t *v, const char *t) {
    if (!strcmp(t, "object")) return json_is_object(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "integer")) return json_is_integer(v) || (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    return 0;
}

/* The types a schema allows (from "type" and "nullable"); *n = 0 when it names none. */
static int schema_types(cctx *cx, const json_t *sch, const char *path, const char **types, int *n) {
    const json_t *t = json_object_get(sch, "type");
    *n = 0;
    if (json_is_string(t)) types[(*n)++] = json_string_value(t);
    else if (json_is_array(t)) {
        if (json_array_size(t) > 7) return err_set(cx->err, MTPLX_EINVAL, "schema: 'type' at %s lists too many types", path);
        for (size_t i = 0; i < json_array_size(t); i++) {
            const char *s = json_string_value(json_array_get(t, i));
            if (!s) return err_set(cx->err, MTPLX_EINVAL, "schema: 'type' at %s must hold strings", path);
            types[(*n)++] = s;
        }
    } else if (t)
        return err_set(cx->err, MTPLX_EINVAL, "schema: 'type' at %s must be a string or an array", path);
    if (json_is_true(json_object_get(sch, "nullable")) && *n) types[(*n)++] = "null";
    return 0;
}

/* For enum/const: *out = a DFA of the string constraints next to them (pattern or format, and
 * minLength / maxLength), NULL when there are none. */
static int string_filter(cctx *cx, const json_t *sch, const char *path, gr_dfa **out, int *none) {
    *out = NULL;
    *none = 0;
    const json_t *pat = json_object_get(sch, "pattern"), *fmt = json_object_get(sch, "format");
    int mn, mx, rc, fmax = -1;
    if ((rc = get_count(cx, sch, "minLength", path, 0, &mn)) || (rc = get_count(cx, sch, "maxLength", path, -1, &mx)))
        return rc;
    const char *rx = json_string_value(pat), *frx = fmt ? gr_format_regex(json_string_value(fmt), &fmax) : NULL;
    if (!rx && frx) rx = frx;
    if (fmax >= 0 && (mx < 0 || mx > fmax)) mx = fmax;
    if (!rx && !mn && mx < 0) return 0;
    if (*none) return 0;
    if (mx >= 0 && mn > mx) *none = 1; /* no string fits: none of the values is kept */
    if (mx > 65000 || mn > 65000) return err_set(cx->err, MTPLX_EUNSUPPORTED, "schema: string lengths above 65000 at %s", path);
    if (!rx) rx = "^[\\s\\S]*$";
    rc = gr_dfa_compile(rx, strlen(rx), pat ? "pattern" : "format", path, mn, mx, out, cx->err);
    if (rc == MTPLX_EINVAL) { /* an empty language: no string value is kept */
        err_clear(cx->err);
        *none = 1;
        return 0;
    }
    return rc;
}

static int compile_enum(cctx *cx, const json_t *sch, const char *path, const char **types, int nt) {
    const json_t *e = json_object_get(sch, "enum"), *c = json_object_get(sch, "const");
    json_t *vals = json_array();
    if (!vals) return err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
    if (c) json_array_append((json_t *)vals, (json_t *)c);
    else if (json_is_array(e)) json_array_extend(vals, (json_t *)e);
    else {
        json_decref(vals);
        return err_set(cx->err, MTPLX_EINVAL, "schema: 'enum' at %s must be an array", path);
    }
    size_t n = json_array_size(vals);
    if (n > GR_MAX_LITS) {
        json_decref(vals);
        return err_set(cx->err, MTPLX_EINVAL, "schema: 'enum' at %s has more than %d values", path, GR_MAX_LITS);
    }
    gr_dfa *sd = NULL; /* the string constraints (pattern, format, lengths) the string values must meet */
    int none, rc = string_filter(cx, sch, path, &sd, &none);
    if (rc) {
        json_decref(vals);
        return rc;
    }
    char **s = calloc(n ? n : 1, sizeof *s);
    int *l = calloc(n ? n : 1, sizeof *l), m = 0;
    for (size_t i = 0; s && l && i < n; i++) {
        json_t *v = json_array_get(vals, i);
        int ok = nt == 0;
        for (int t = 0; t < nt && !ok; t++) ok = has_type(v, types[t]);
        if (ok && json_is_string(v)) ok = !none && (!sd || gr_dfa_match(sd, json_string_value(v), json_string_length(v)));
        if (!ok) continue;
        s[m] = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
        if (!s[m]) break;
        l[m] = (int)strlen(s[m]);
        m++;
    }
    if (!s || !l) rc = err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
    else if (m == 0) rc = err_set(cx->err, MTPLX_EINVAL, "schema: no value of 'enum'/'const' at %s fits its 'type'", path);
    else rc = lits_node(cx, s, l, m);
    for (int i = 0; s && i < m; i++) free(s[i]);
    free(s);
    free(l);
    gr_dfa_free(sd);
    json_decref(vals);
    return rc;
}

static int compile(cctx *cx, const json_t *sch, const char *path, int depth) {
    if (depth > GR_MAX_SCHEMA_DEPTH)
        return err_set(cx->err, MTPLX_EINVAL, "schema: nested deeper than %d levels at %s", GR_MAX_SCHEMA_DEPTH, path);
    if (json_is_true(sch)) return any_node(cx);
    if (json_is_false(sch)) return err_set(cx->err, MTPLX_EINVAL, "schema: 'false' at %s matches nothing", path);
    if (!json_is_object(sch)) return err_set(cx->err, MTPLX_EINVAL, "schema: %s must be an object or a boolean", path);
    const char *k;
    json_t *v;
    int constraining = 0;
    json_object_foreach((json_t *)sch, k, v) {
        if (in_list(k, k_annotations)) continue;
        if (!in_list(k, k_supported)) {
            return err_set(cx->err, MTPLX_EUNSUPPORTED, "schema: unsupported JSON Schema keyword '%s' at %s", k, path);
        }
        if (strcmp(k, "$ref") && strcmp(k, "anyOf") && strcmp(k, "oneOf") && strcmp(k, "allOf")) constraining = 1;
    }
    const json_t *ref = json_object_get(sch, "$ref"), *any = json_object_get(sch, "anyOf"),
                 *one = json_object_get(sch, "oneOf"), *all = json_object_get(sch, "allOf");
    int combos = !!ref + !!any + !!one + !!all;
    if (combos > 1 || (combos && constraining))
        return err_set(cx->err, MTPLX_EUNSUPPORTED, "schema: '%s' at %s combined with other constraining keywords",
                       ref ? "$ref" : any ? "anyOf" : one ? "oneOf" : "allOf", path);
    if (ref) {
        if (!json_is_string(ref)) return err_set(cx->err, MTPLX_EINVAL, "schema: '$ref' at %s must be a string", path);
        return compile_ref(cx, json_string_value(ref), path, depth);
    }
    if (all) {
        if (!json_is_array(all) || json_array_size(all) != 1)
            return err_set(cx->err, MTPLX_EUNSUPPORTED, "schema: 'allOf' at %s: only one schema is supported", path);
        char sub[1024];
        snprintf(sub, sizeof sub, "%s/allOf/0", path);
        return compile(cx, json_array_get(all, 0), sub, depth + 1);
    }
    if (any || one) {
        const json_t *arr = any ? any : one;
        size_t n = json_array_size(arr);
        if (!json_is_array(arr) || n == 0)
            return err_set(cx->err, MTPLX_EINVAL, "schema: '%s' at %s must be a non-empty array", any ? "anyOf" : "oneOf", path);
        if (n > GR_MAX_ALTS)
            return err_set(cx->err, MTPLX_EINVAL, "schema: '%s' at %s has more than %d alternatives",
                           any ? "anyOf" : "oneOf", path, GR_MAX_ALTS);
        int kids[GR_MAX_ALTS];
        for (size_t i = 0; i < n; i++) {
            char sub[1024];
            snprintf(sub, sizeof sub, "%s/%s/%zu", path, any ? "anyOf" : "oneOf", i);
            kids[i] = compile(cx, json_array_get(arr, i), sub, depth + 1);
            if (kids[i] < 0) return kids[i];
        }
        return kids_node(cx, GN_ANYOF, kids, (int)n);
    }
    const char *types[8];
    int nt, rc = schema_types(cx, sch, path, types, &nt);
    if (rc || (rc = check_format(cx, sch, path))) return rc;
    if (json_object_get(sch, "enum") || json_object_get(sch, "const")) return compile_enum(cx, sch, path, types, nt);
    if (nt == 0) { /* no type: inferred from the keywords, else any value */
        if (json_object_get(sch, "properties") || json_object_get(sch, "required") ||
            json_object_get(sch, "additionalProperties") || json_object_get(sch, "minProperties") ||
            json_object_get(sch, "maxProperties"))
            types[nt++] = "object";
        else if (json_object_get(sch, "items") || json_object_get(sch, "minItems") || json_object_get(sch, "maxItems") ||
                 json_object_get(sch, "prefixItems") || json_object_get(sch, "uniqueItems"))
            types[nt++] = "array";
        else if (json_object_get(sch, "minLength") || json_object_get(sch, "maxLength") ||
                 json_object_get(sch, "pattern") || json_object_get(sch, "format"))
            types[nt++] = "string";
        else if (json_object_get(sch, "multipleOf") || json_object_get(sch, "minimum") || json_object_get(sch, "maximum") ||
                 json_object_get(sch, "exclusiveMinimum") || json_object_get(sch, "exclusiveMaximum"))
            types[nt++] = "number";
        else
            return any_node(cx);
    }
    int kids[8];
    for (int i = 0; i < nt; i++) {
        kids[i] = compile_type(cx, sch, types[i], path, depth);
        if (kids[i] < 0) return kids[i];
    }
    return kids_node(cx, GN_ANYOF, kids, nt);
}

void grammar_free(grammar *g) {
    if (!g) return;
    for (int i = 0; i < g->n_nodes; i++) {
        gnode *n = &g->nodes[i];
        if (n->strs && (n->kind == GN_LITS || n->kind == GN_OBJECT || n->kind == GN_TEXT))
            for (int j = 0; j < (n->kind == GN_TEXT ? 1 : n->n); j++) free(n->strs[j]);
        free(n->strs);
        free(n->lens);
        free(n->kids);
        free(n->key_hash);
        gr_dfa_free(n->dfa);
    }
    free(g->nodes);
    free(g);
}

static void cctx_done(cctx *cx) {
    for (int i = 0; i < cx->n_refs; i++) free(cx->refs[i].ref);
    free(cx->refs);
}

/* Wrap a value node: up to 4 whitespace bytes before it (after a closed think block the model
 * writes "\n\n"). */
static int root_value(cctx *cx, int value) {
    int w = ws_node(cx, 4);
    if (w < 0) return w;
    int k[2] = {w, value};
    return kids_node(cx, GN_SEQ, k, 2);
}

static int begin(grammar **out, cctx *cx, mtplx_err *err) {
    *out = NULL;
    memset(cx, 0, sizeof *cx);
    cx->g = mem_zalloc(1, sizeof(grammar), "grammar", err);
    cx->any = -1;
    cx->err = err;
    return cx->g ? 0 : MTPLX_ENOMEM;
}

/* Node i can produce a finite sentence, given the current guesses prod[] (fixpoint step). */
static int productive_now(const grammar *g, const uint8_t *prod, int i) {
    const gnode *n = &g->nodes[i];
    switch (n->kind) {
    case GN_OBJECT: {
        int avail = 0;
        for (int k = 0; k < n->n; k++) {
            if (((n->required >> k) & 1) && !prod[n->kids[k]]) return 0;
            avail += prod[n->kids[k]];
        }
        return avail >= n->min_props || (n->additional >= 0 && prod[n->additional]);
    }
    case GN_ARRAY:
        for (int k = 0; k < n->min && k <= n->n; k++) {
            int it = n->kids[k < n->n ? k : n->n];
            if (it < 0 || !prod[it]) return 0;
        }
        return 1;
    case GN_ANYOF:
        for (int k = 0; k < n->n; k++)
            if (prod[n->kids[k]]) return 1;
        return 0;
    case GN_SEQ:
        for (int k = 0; k < n->n; k++)
            if (!prod[n->kids[k]]) return 0;
        return 1;
    case GN_REPEAT: return n->min == 0 || (prod[n->kids[0]] && (n->min < 2 || n->kids[1] < 0 || prod[n->kids[1]]));
    default: return n->kind != GN_LITS || n->n > 0;
    }
}

/* Make every parse completable: find the nodes that can produce a finite sentence (a least fixpoint:
 * a $ref cycle with no way out produces nothing), then cut what cannot — anyOf branches, optional
 * properties, array items and repetitions whose node is not productive — so that no allowed token
 * leads into a dead end. Returns 0, or EINVAL when the root itself produces nothing. */
static int prune(cctx *cx, int root) {
    grammar *g = cx->g;
    uint8_t *prod = calloc((size_t)g->n_nodes, 1);
    if (!prod) return err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < g->n_nodes; i++)
            if (!prod[i] && productive_now(g, prod, i)) prod[i] = 1, changed = 1;
    }
    if (!prod[root]) {
        free(prod);
        return err_set(cx->err, MTPLX_EINVAL, "schema: it matches no finite document (a $ref cycle with no way out?)");
    }
    for (int i = 0; i < g->n_nodes; i++) {
        gnode *n = &g->nodes[i];
        if (n->kind == GN_ANYOF) {
            int m = 0;
            for (int k = 0; k < n->n; k++)
                if (prod[n->kids[k]]) n->kids[m++] = n->kids[k];
            n->n = m;
        } else if (n->kind == GN_OBJECT) {
            int m = 0;
            uint64_t req = 0;
            for (int k = 0; k < n->n; k++) {
                if (!prod[n->kids[k]]) { /* optional (a required one would make the object unproductive) */
                    free(n->strs[k]);
                    continue;
                }
                if ((n->required >> k) & 1) req |= 1ULL << m;
                n->kids[m] = n->kids[k], n->strs[m] = n->strs[k], n->lens[m] = n->lens[k], n->key_hash[m] = n->key_hash[k];
                m++;
            }
            n->n = m;
            n->required = req;
            if (n->additional >= 0 && !prod[n->additional]) n->additional = -1;
        } else if (n->kind == GN_ARRAY) { /* no more items than the first unproductive position */
            for (int k = 0; k <= n->n && (n->max < 0 || k < n->max); k++) {
                int it = n->kids[k];
                if (it < 0 || !prod[it]) {
                    n->max = k;
                    break;
                }
            }
        } else if (n->kind == GN_REPEAT && !prod[n->kids[0]])
            n->max = 0;
    }
    free(prod);
    return 0;
}

static int finish(grammar **out, cctx *cx, int root) {
    cctx_done(cx);
    if (root < 0) {
        grammar_free(cx->g);
        return root;
    }
    int rc = prune(cx, root);
    if (rc) {
        grammar_free(cx->g);
        return rc;
    }
    cx->g->root = root;
    *out = cx->g;
    return 0;
}

int grammar_from_schema(const json_t *schema, grammar **out, mtplx_err *err) {
    cctx cx;
    if (begin(out, &cx, err)) return MTPLX_ENOMEM;
    cx.root = schema;
    int r = compile(&cx, schema, "#", 0);
    if (r >= 0) r = root_value(&cx, r);
    return finish(out, &cx, r);
}

int grammar_from_schema_text(const char *text, size_t n, grammar **out, mtplx_err *err) {
    json_error_t je;
    json_t *j = json_loadb(text, n, JSON_DECODE_ANY, &je);
    if (!j) {
        *out = NULL;
        return err_set(err, MTPLX_EINVAL, "schema: invalid JSON at line %d column %d: %s", je.line, je.column, je.text);
    }
    int rc = grammar_from_schema(j, out, err);
    json_decref(j);
    return rc;
}

int grammar_json_object(grammar **out, mtplx_err *err) {
    cctx cx;
    if (begin(out, &cx, err)) return MTPLX_ENOMEM;
    int a = any_node(&cx), r = a;
    if (a >= 0) r = cx.g->nodes[a].kids[0]; /* the object branch of "any value" */
    if (r >= 0) r = root_value(&cx, r);
    return finish(out, &cx, r);
}

int grammar_free_text(grammar **out, mtplx_err *err) {
    cctx cx;
    if (begin(out, &cx, err)) return MTPLX_ENOMEM;
    return finish(out, &cx, node_new(&cx, GN_ANYTEXT));
}

/* ---- forced tool calls ---- */

/* The schema of a tool's arguments and its name, from an OpenAI {"type":"function","function":{…}}
 * item, a bare {"name","parameters"} or Anthropic {"name","input_schema"}. */
static const json_t *tool_fields(const json_t *t, const char **name) {
    const json_t *f = json_object_get(t, "function");
    if (json_is_object(f)) t = f;
    *name = json_string_value(json_object_get(t, "name"));
    const json_t *p = json_object_get(t, "parameters");
    return p ? p : json_object_get(t, "input_schema");
}

/* XML parameters: <parameter=K>\nV\n</parameter>\n for each property, in the schema's order;
 * optional ones may be left out. Values whose schema allows a string are raw text up to the
 * closing tag (as the template writes them); others are JSON. */
static int xml_params(cctx *cx, const json_t *params, const char *path, int *out) {
    const json_t *props = json_object_get(params, "properties"), *req = json_object_get(params, "required");
    const char *k;
    json_t *v;
    int parts[GR_MAX_PROPS + 1], n = 0;
    if (json_object_size(props) > GR_MAX_PROPS)
        return err_set(cx->err, MTPLX_EUNSUPPORTED, "schema: more than %d parameters at %s", GR_MAX_PROPS, path);
    json_object_foreach((json_t *)props, k, v) {
        char sub[1024], open[600];
        snprintf(sub, sizeof sub, "%s/properties/%s", path, k);
        if (strlen(k) > 500) return err_set(cx->err, MTPLX_EUNSUPPORTED, "schema: parameter name too long at %s", sub);
        snprintf(open, sizeof open, "<parameter=%s>\n", k);
        const char *types[8];
        int nt, rc = schema_types(cx, v, sub, types, &nt), is_str = 0;
        if (rc) return rc;
        for (int i = 0; i < nt; i++) is_str |= !strcmp(types[i], "string");
        int seq[3], val;
        seq[0] = text_node(cx, open);
        if (seq[0] < 0) return seq[0];
        if (is_str && !json_object_get(v, "enum") && !json_object_get(v, "const")) {
            const json_t *fm = json_object_get(v, "format");
            if (json_object_get(v, "pattern") || (fm && gr_format_regex(json_string_value(fm), NULL)))
                return err_set(cx->err, MTPLX_EUNSUPPORTED, "schema: '%s' at %s: a string parameter of the model's XML "
                               "tool-call format is raw text, where pattern/format are not enforced",
                               json_object_get(v, "pattern") ? "pattern" : "format", sub);
            val = node_new(cx, GN_TEXT);
            if (val < 0) return val;
            gnode *nd = &cx->g->nodes[val];
            nd->strs = calloc(1, sizeof *nd->strs);
            nd->lens = malloc(sizeof *nd->lens);
            if (!nd->strs || !nd->lens || !(nd->strs[0] = strdup("\n</parameter>\n")))
                return err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
            nd->lens[0] = (int)strlen(nd->strs[0]);
            nd->n = 1;
            seq[1] = val;
            val = kids_node(cx, GN_SEQ, seq, 2);
        } else {
            if (json_object_get(v, "enum") && is_str) { /* raw enum text: the strings without quotes */
                const json_t *e = json_object_get(v, "enum");
                size_t ne = json_array_size(e);
                char **s = calloc(ne ? ne : 1, sizeof *s);
                int *l = calloc(ne ? ne : 1, sizeof *l), m = 0;
                if (!s || !l) return err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
                for (size_t i = 0; i < ne; i++) {
                    const char *es = json_string_value(json_array_get(e, i));
                    if (es && strlen(es) < 4000 && !strstr(es, "</parameter>") && (s[m] = malloc(strlen(es) + 16))) {
                        sprintf(s[m], "%s\n</parameter>\n", es);
                        l[m] = (int)strlen(s[m]);
                        m++;
                    }
                }
                val = m ? lits_node(cx, s, l, m)
                        : err_set(cx->err, MTPLX_EINVAL, "schema: no usable enum string at %s", sub);
                for (int i = 0; i < m; i++) free(s[i]);
                free(s);
                free(l);
                if (val < 0) return val;
                seq[1] = val;
                val = kids_node(cx, GN_SEQ, seq, 2);
            } else {
                seq[1] = compile(cx, v, sub, 1);
                if (seq[1] < 0) return seq[1];
                seq[2] = text_node(cx, "\n</parameter>\n");
                if (seq[2] < 0) return seq[2];
                val = kids_node(cx, GN_SEQ, seq, 3);
            }
        }
        if (val < 0) return val;
        int required = 0;
        for (size_t i = 0; i < json_array_size(req); i++)
            if (json_string_value(json_array_get(req, i)) && !strcmp(json_string_value(json_array_get(req, i)), k))
                required = 1;
        if (!required) { /* zero or one time */
            int r = node_new(cx, GN_REPEAT);
            if (r < 0) return r;
            gnode *nd = &cx->g->nodes[r];
            nd->kids = malloc(2 * sizeof(int));
            if (!nd->kids) return err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
            nd->kids[0] = val;
            nd->kids[1] = -1;
            nd->min = 0;
            nd->max = 1;
            val = r;
        }
        parts[n++] = val;
    }
    if (n == 0) {
        *out = -1;
        return 0;
    }
    *out = kids_node(cx, GN_SEQ, parts, n);
    return *out < 0 ? *out : 0;
}

/* A GN_TEXT node: text up to `term` (avoid = 0), or text that never contains it and may end (avoid = 1). */
static int text_until(cctx *cx, const char *term, int avoid) {
    int id = node_new(cx, GN_TEXT);
    if (id < 0) return id;
    gnode *nd = &cx->g->nodes[id];
    nd->strs = calloc(1, sizeof *nd->strs);
    nd->lens = malloc(sizeof *nd->lens);
    if (!nd->strs || !nd->lens || !(nd->strs[0] = strdup(term))) return err_set(cx->err, MTPLX_ENOMEM, "schema: out of memory");
    nd->lens[0] = (int)strlen(term);
    nd->n = 1;
    nd->avoid = avoid;
    return id;
}

/* skip_open: the call's text without its leading "<tool_call>" (grammar_tool_calls_auto). */
static int one_tool_body(cctx *cx, const json_t *tool, grammar_tool_dialect d, int skip_open, int *out);

static int one_tool(cctx *cx, const json_t *tool, grammar_tool_dialect d, int *out) {
    return one_tool_body(cx, tool, d, 0, out);
}

static int one_tool_body(cctx *cx, const json_t *tool, grammar_tool_dialect d, int skip_open, int *out) {
    const char *name;
    const json_t *params = tool_fields(tool, &name);
    if (!name || strlen(name) > 200 || strpbrk(name, "<>\"\\\n"))
        return err_set(cx->err, MTPLX_EINVAL, "tools: a tool needs a plain 'name' (no quotes, brackets or newlines)");
    static const char empty_schema[] = "{\"type\":\"object\",\"properties\":{}}";
    json_t *dflt = NULL;
    if (!params || (json_is_object(params) && json_object_size(params) == 0)) params = dflt = json_loads(empty_schema, 0, NULL);
    char head[400];
    int rc = 0, seq[4], ns = 0;
    cx->root = params;
    cx->n_refs = 0; /* $ref resolves per tool */
    if (d == GRAMMAR_TOOLS_JSON) {
        snprintf(head, sizeof head, "%s\n{\"name\": \"%s\", \"arguments\": ", skip_open ? "" : "<tool_call>", name);
        seq[ns++] = text_node(cx, head);
        seq[ns++] = compile(cx, params, "#", 0);
        seq[ns++] = text_node(cx, "}\n</tool_call>");
    } else {
        snprintf(head, sizeof head, "%s\n<function=%s>\n", skip_open ? "" : "<tool_call>", name);
        seq[ns++] = text_node(cx, head);
        int p = 0;
        if (!json_is_object(params) || (json_object_get(params, "type") && strcmp(json_string_value(json_object_get(params, "type")) ? json_string_value(json_object_get(params, "type")) : "", "object")))
            rc = err_set(cx->err, MTPLX_EUNSUPPORTED, "tools: parameters of '%s' must be an object schema", name);
        else
            rc = xml_params(cx, params, "#", &p);
        if (!rc && p >= 0) seq[ns++] = p;
        seq[ns++] = text_node(cx, "</function>\n</tool_call>");
    }
    for (int i = 0; i < ns && !rc; i++)
        if (seq[i] < 0) rc = seq[i];
    if (!rc) {
        *out = kids_node(cx, GN_SEQ, seq, ns);
        if (*out < 0) rc = *out;
    }
    for (int i = 0; i < cx->n_refs; i++) free(cx->refs[i].ref);
    cx->n_refs = 0;
    json_decref(dflt);
    if (rc) err_prefix(cx->err, "tool '%s'", name);
    return rc;
}

int grammar_tool_calls(const json_t *tools, const char *only, int parallel, grammar_tool_dialect dialect,
                       grammar **out, mtplx_err *err) {
    cctx cx;
    if (begin(out, &cx, err)) return MTPLX_ENOMEM;
    int alts[GR_MAX_ALTS], na = 0, rc = 0;
    if (!json_is_array(tools) || json_array_size(tools) == 0)
        rc = err_set(err, MTPLX_EINVAL, "tools: a forced tool call needs a non-empty tools array");
    for (size_t i = 0; !rc && i < json_array_size(tools); i++) {
        const char *name;
        tool_fields(json_array_get(tools, i), &name);
        if (only && (!name || strcmp(name, only))) continue;
        if (na == GR_MAX_ALTS) {
            rc = err_set(err, MTPLX_EUNSUPPORTED, "tools: more than %d tools for a forced call", GR_MAX_ALTS);
            break;
        }
        rc = one_tool(&cx, json_array_get(tools, i), dialect, &alts[na]);
        if (!rc) na++;
    }
    if (!rc && na == 0) rc = err_set(err, MTPLX_EINVAL, "tools: no tool named '%s'", only ? only : "");
    int r = rc;
    if (!rc) r = kids_node(&cx, GN_ANYOF, alts, na);
    int sep = -1;
    if (r >= 0 && dialect == GRAMMAR_TOOLS_JSON) {
        sep = text_node(&cx, "\n");
        if (sep < 0) r = sep;
    }
    if (r >= 0) {
        int rep = node_new(&cx, GN_REPEAT);
        if (rep >= 0) {
            gnode *nd = &cx.g->nodes[rep];
            nd->kids = malloc(2 * sizeof(int));
            if (!nd->kids) rep = err_set(err, MTPLX_ENOMEM, "schema: out of memory");
            else {
                nd->kids[0] = r;
                nd->kids[1] = sep;
                nd->min = 1;
                nd->max = parallel ? -1 : 1;
            }
        }
        r = rep;
    }
    return finish(out, &cx, r);
}

/* ---- strict tools under tool_choice "auto" ---- */

int grammar_tool_is_strict(const json_t *tool) {
    const json_t *f = json_object_get(tool, "function");
    return json_is_true(json_object_get(json_is_object(f) ? f : tool, "strict"));
}

int grammar_tool_calls_auto(const json_t *tools, grammar_tool_dialect dialect, grammar **out, mtplx_err *err) {
    cctx cx;
    if (begin(out, &cx, err)) return MTPLX_ENOMEM;
    int alts[GR_MAX_ALTS], na = 0, rc = 0, nfree = 0;
    size_t nt = json_array_size(tools);
    char **fl = calloc(nt ? nt : 1, sizeof *fl);
    int *fn = calloc(nt ? nt : 1, sizeof *fn);
    if (!fl || !fn) rc = err_set(err, MTPLX_ENOMEM, "schema: out of memory");
    for (size_t i = 0; !rc && i < nt; i++) {
        const json_t *t = json_array_get(tools, i);
        const char *name;
        tool_fields(t, &name);
        if (!name || strlen(name) > 200 || strpbrk(name, "<>\"\\\n")) {
            rc = err_set(err, MTPLX_EINVAL, "tools: a tool needs a plain 'name' (no quotes, brackets or newlines)");
            break;
        }
        if (!grammar_tool_is_strict(t)) { /* its call: the name, then free text up to the closing tag */
            fl[nfree] = malloc(strlen(name) + 32);
            if (!fl[nfree]) {
                rc = err_set(err, MTPLX_ENOMEM, "schema: out of memory");
                break;
            }
            sprintf(fl[nfree], dialect == GRAMMAR_TOOLS_JSON ? "\n{\"name\": \"%s\"" : "\n<function=%s>", name);
            fn[nfree] = (int)strlen(fl[nfree]);
            nfree++;
            continue;
        }
        if (na == GR_MAX_ALTS - 1) {
            rc = err_set(err, MTPLX_EUNSUPPORTED, "tools: more than %d strict tools", GR_MAX_ALTS - 1);
            break;
        }
        rc = one_tool_body(&cx, t, dialect, 1, &alts[na]);
        if (!rc) na++;
    }
    if (!rc && nfree) {
        int seq[2] = {lits_node(&cx, fl, fn, nfree), text_until(&cx, "</tool_call>", 0)};
        rc = seq[0] < 0 ? seq[0] : seq[1] < 0 ? seq[1] : 0;
        if (!rc && (alts[na] = kids_node(&cx, GN_SEQ, seq, 2)) < 0) rc = alts[na];
        if (!rc) na++;
    }
    for (int i = 0; i < nfree; i++) free(fl[i]);
    free(fl);
    free(fn);
    if (!rc && na == 0) rc = err_set(err, MTPLX_EINVAL, "tools: no tools");
    int r = rc;
    if (!rc) { /* (text "<tool_call>" call)* then text without "<tool_call>" */
        int call[2] = {text_until(&cx, "<tool_call>", 0), kids_node(&cx, GN_ANYOF, alts, na)}, tail = -1, rep = -1;
        r = call[0] < 0 ? call[0] : call[1];
        int body = r >= 0 ? kids_node(&cx, GN_SEQ, call, 2) : r;
        if (body >= 0) r = rep = node_new(&cx, GN_REPEAT);
        else r = body;
        if (r >= 0) {
            gnode *nd = &cx.g->nodes[rep];
            nd->kids = malloc(2 * sizeof(int));
            if (!nd->kids) r = err_set(err, MTPLX_ENOMEM, "schema: out of memory");
            else nd->kids[0] = body, nd->kids[1] = -1, nd->min = 0, nd->max = -1;
        }
        if (r >= 0) r = tail = text_until(&cx, "<tool_call>", 1);
        if (r >= 0) {
            int k[2] = {rep, tail};
            r = kids_node(&cx, GN_SEQ, k, 2);
        }
    }
    return finish(out, &cx, r);
}
