/* toolcall.c — see toolcall.h. The streaming part is a two-state machine (TEXT / CALL) over a
 * pending buffer; a complete envelope body is parsed in one go by toolcall_parse_body. */
#include "toolcall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char TC_OPEN[] = "<tool_call>";
static const char TC_CLOSE[] = "</tool_call>";
#define TC_OPEN_LEN (sizeof TC_OPEN - 1)
#define TC_CLOSE_LEN (sizeof TC_CLOSE - 1)

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static const char *mem_find(const char *h, size_t hn, const char *needle, size_t nn) {
    if (nn == 0) return h;
    if (hn < nn) return NULL;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == needle[0] && memcmp(h + i, needle, nn) == 0) return h + i;
    return NULL;
}

static int starts(const char *s, const char *end, const char *lit) {
    size_t n = strlen(lit);
    return (size_t)(end - s) >= n && memcmp(s, lit, n) == 0;
}

static const char *skip_ws(const char *s, const char *end) {
    while (s < end && is_ws(*s)) s++;
    return s;
}

/* ---- schema lookup ---- */

/* The parameters.properties object of tool `name`, or NULL. */
static const json_t *tool_properties(const json_t *tools, const char *name) {
    if (!json_is_array(tools)) return NULL;
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        const json_t *f = json_object_get(t, "function");
        if (!json_is_object(f)) f = t;
        const json_t *nm = json_object_get(f, "name");
        if (!json_is_string(nm) || strcmp(json_string_value(nm), name) != 0) continue;
        const json_t *params = json_object_get(f, "parameters");
        if (!json_is_object(params)) params = json_object_get(f, "input_schema");
        const json_t *props = json_object_get(params, "properties");
        return json_is_object(props) ? props : NULL;
    }
    return NULL;
}

/* How a parameter's value is typed: 1 keep as string, 0 decode JSON when valid. */
static int param_keeps_string(const json_t *props, const char *key) {
    const json_t *p = props ? json_object_get(props, key) : NULL;
    const json_t *ty = p ? json_object_get(p, "type") : NULL;
    if (json_is_string(ty)) return strcmp(json_string_value(ty), "string") == 0;
    if (json_is_array(ty)) {
        size_t i;
        const json_t *v;
        json_array_foreach(ty, i, v) if (json_is_string(v) && strcmp(json_string_value(v), "string") == 0) return 1;
        return 0;
    }
    if (p && json_is_array(json_object_get(p, "enum"))) {
        /* an enum of strings only: keep the text */
        size_t i;
        const json_t *v;
        int all_str = 1;
        json_array_foreach(json_object_get(p, "enum"), i, v) if (!json_is_string(v)) all_str = 0;
        return all_str;
    }
    return 0;
}

static json_t *typed_value(const json_t *props, const char *key, const char *v, size_t n) {
    if (!param_keeps_string(props, key)) {
        json_error_t je;
        json_t *j = json_loadb(v, n, JSON_DECODE_ANY, &je);
        if (j) return j;
    }
    return json_stringn(v, n);  /* NULL when v is not valid UTF-8 */
}

/* ---- one envelope body ---- */

static int parse_xml(const char *s, const char *end, const json_t *tools, char **name_out, json_t **args_out) {
    s = skip_ws(s, end);
    if (!starts(s, end, "<function=")) return -1;
    s += strlen("<function=");
    const char *gt = memchr(s, '>', (size_t)(end - s));
    if (!gt) return -1;
    const char *nb = s, *ne = gt;
    while (nb < ne && is_ws(*nb)) nb++;
    while (ne > nb && is_ws(ne[-1])) ne--;
    if (nb == ne) return -1;
    for (const char *c = nb; c < ne; c++)
        if (*c == '<' || *c == '\n' || *c == '"') return -1;
    char *name = strndup(nb, (size_t)(ne - nb));
    json_t *args = json_object();
    if (!name || !args) goto fail;
    const json_t *props = tool_properties(tools, name);
    s = skip_ws(gt + 1, end);
    if (s < end && *s == '{') {
        /* JSON object body: <function=NAME>{...}</function> */
        const char *fe = mem_find(s, (size_t)(end - s), "</function>", 11);
        if (!fe) goto fail;
        json_error_t je;
        json_decref(args);
        args = json_loadb(s, (size_t)(fe - s), 0, &je);
        if (!json_is_object(args)) goto fail;
        s = fe + 11;
    } else {
        for (;;) {
            s = skip_ws(s, end);
            if (starts(s, end, "</function>")) {
                s += 11;
                break;
            }
            if (!starts(s, end, "<parameter=")) goto fail;
            s += strlen("<parameter=");
            const char *kg = memchr(s, '>', (size_t)(end - s));
            if (!kg) goto fail;
            const char *kb = s, *ke = kg;
            while (kb < ke && is_ws(*kb)) kb++;
            while (ke > kb && is_ws(ke[-1])) ke--;
            if (kb == ke) goto fail;
            for (const char *c = kb; c < ke; c++)
                if (*c == '<' || *c == '\n') goto fail;
            const char *vb = kg + 1;
            const char *ve = mem_find(vb, (size_t)(end - vb), "</parameter>", 12);
            if (!ve) goto fail;
            s = ve + 12;
            if (vb < ve && *vb == '\n') vb++;
            if (ve > vb && ve[-1] == '\n') ve--;
            if (ve > vb && ve[-1] == '\r') ve--;
            char *key = strndup(kb, (size_t)(ke - kb));
            if (!key) goto fail;
            json_t *val = typed_value(props, key, vb, (size_t)(ve - vb));
            int dup = json_object_get(args, key) != NULL;
            int bad = !val || dup || json_object_set_new(args, key, val);
            if (bad && val && dup) json_decref(val);
            free(key);
            if (bad) goto fail;
        }
    }
    if (skip_ws(s, end) != end) goto fail;
    *name_out = name;
    *args_out = args;
    return 0;
fail:
    free(name);
    json_decref(args);
    return -1;
}

static int parse_json(const char *s, const char *end, char **name_out, json_t **args_out) {
    s = skip_ws(s, end);
    if (s == end || *s != '{') return -1;
    json_error_t je;
    json_t *o = json_loadb(s, (size_t)(end - s), 0, &je);  /* trailing whitespace is allowed */
    if (!json_is_object(o)) goto fail;
    json_t *f = json_object_get(o, "function");
    json_t *base = json_is_object(f) ? f : o;
    json_t *nm = json_object_get(base, "name");
    if (!json_is_string(nm) || json_string_length(nm) == 0) goto fail;
    json_t *a = json_object_get(base, "arguments");
    if (!a) a = json_object_get(base, "parameters");
    json_t *args;
    if (!a || json_is_null(a)) {
        args = json_object();
    } else if (json_is_object(a)) {
        args = json_incref(a);
    } else if (json_is_string(a)) {
        args = json_loadb(json_string_value(a), json_string_length(a), 0, &je);
        if (!json_is_object(args)) {
            json_decref(args);
            goto fail;
        }
    } else {
        goto fail;
    }
    char *name = strdup(json_string_value(nm));
    if (!name || !args) {
        free(name);
        json_decref(args);
        goto fail;
    }
    json_decref(o);
    *name_out = name;
    *args_out = args;
    return 0;
fail:
    json_decref(o);
    return -1;
}

int toolcall_parse_body(const char *body, size_t n, const json_t *tools, char **name, char **arguments) {
    const char *end = body + n;
    char *nm = NULL;
    json_t *args = NULL;
    const char *s = skip_ws(body, end);
    int rc = (s < end && *s == '{') ? parse_json(s, end, &nm, &args) : parse_xml(s, end, tools, &nm, &args);
    if (rc) return -1;
    char *text = json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(args);
    if (!text) {
        free(nm);
        return -1;
    }
    *name = nm;
    *arguments = text;
    return 0;
}

/* ---- streaming ---- */

void toolcall_init(toolcall_parser *t, const json_t *tools, uint64_t id_seed) {
    memset(t, 0, sizeof *t);
    t->tools = tools;
    t->id_state = id_seed ^ 0x9e3779b97f4a7c15ull;
    t->max_body = 1u << 20;
}

void toolcall_free(toolcall_parser *t) {
    sbuf_free(&t->pending);
    sbuf_free(&t->ws_hold);
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Content text: whitespace at the end of what we have is held until non-whitespace follows, so
 * that whitespace right before a call never becomes content; right after a call, leading
 * whitespace is dropped. */
static int emit_text(toolcall_parser *t, const char *s, size_t n, toolcall_text_fn on_text, void *user) {
    if (t->after_call) {
        while (n && is_ws(*s)) s++, n--;
        if (!n) return 0;
        t->after_call = 0;
    }
    size_t body = n;
    while (body && is_ws(s[body - 1])) body--;
    if (body) {
        int rc = 0;
        if (t->ws_hold.len) rc = on_text(user, t->ws_hold.p, t->ws_hold.len);
        sbuf_clear(&t->ws_hold);
        if (rc) return rc;
        if ((rc = on_text(user, s, body))) return rc;
    }
    if (body < n && sbuf_append(&t->ws_hold, s + body, n - body)) return -1;
    return 0;
}

static int emit_call(toolcall_parser *t, const char *body, size_t n, toolcall_text_fn on_text,
                     toolcall_call_fn on_call, void *user) {
    char *name = NULL, *args = NULL;
    if (toolcall_parse_body(body, n, t->tools, &name, &args) != 0) {
        /* malformed: the envelope goes out as content, verbatim */
        t->n_fallback++;
        int rc = emit_text(t, TC_OPEN, TC_OPEN_LEN, on_text, user);
        if (!rc) rc = emit_text(t, body, n, on_text, user);
        if (!rc) rc = emit_text(t, TC_CLOSE, TC_CLOSE_LEN, on_text, user);
        return rc;
    }
    sbuf_clear(&t->ws_hold);
    t->after_call = 1;
    tool_call c = {.index = t->n_calls, .name = name, .arguments = args};
    uint64_t a = splitmix(&t->id_state), b = splitmix(&t->id_state);
    snprintf(c.id, sizeof c.id, "call_%016llx%08llx", (unsigned long long)a, (unsigned long long)(b >> 32));
    t->n_calls++;
    int rc = on_call(user, &c);
    free(name);
    free(args);
    return rc;
}

/* Length of the longest suffix of s[0..n) that is a proper prefix of TC_OPEN. */
static size_t open_prefix_tail(const char *s, size_t n) {
    size_t k = n < TC_OPEN_LEN - 1 ? n : TC_OPEN_LEN - 1;
    for (; k > 0; k--)
        if (memcmp(s + n - k, TC_OPEN, k) == 0) return k;
    return 0;
}

static int process(toolcall_parser *t, toolcall_text_fn on_text, toolcall_call_fn on_call, void *user) {
    int rc = 0;
    for (;;) {
        const char *p = t->pending.p;
        size_t len = t->pending.len;
        if (!len) return 0;
        if (!t->in_call) {
            const char *o = mem_find(p, len, TC_OPEN, TC_OPEN_LEN);
            if (o) {
                size_t at = (size_t)(o - p);
                if ((rc = emit_text(t, p, at, on_text, user))) return rc;
                /* whitespace right before the call stays held: dropped if the call parses,
                 * emitted with the envelope if it falls back to content */
                sbuf_consume(&t->pending, at + TC_OPEN_LEN);
                t->in_call = 1;
                continue;
            }
            size_t keep = open_prefix_tail(p, len);
            if ((rc = emit_text(t, p, len - keep, on_text, user))) return rc;
            sbuf_consume(&t->pending, len - keep);
            return 0;
        }
        const char *c = mem_find(p, len, TC_CLOSE, TC_CLOSE_LEN);
        if (!c) {
            if (len <= t->max_body) return 0;
            /* runaway body: give up on it as a call */
            t->in_call = 0;
            t->n_fallback++;
            if ((rc = emit_text(t, TC_OPEN, TC_OPEN_LEN, on_text, user))) return rc;
            size_t keep = open_prefix_tail(p, len);
            rc = emit_text(t, p, len - keep, on_text, user);
            sbuf_consume(&t->pending, len - keep);
            if (rc) return rc;
            continue;
        }
        size_t at = (size_t)(c - p);
        t->in_call = 0;
        rc = emit_call(t, p, at, on_text, on_call, user);
        sbuf_consume(&t->pending, at + TC_CLOSE_LEN);
        if (rc) return rc;
    }
}

int toolcall_feed(toolcall_parser *t, const char *s, size_t n, toolcall_text_fn on_text,
                  toolcall_call_fn on_call, void *user) {
    if (!n) return 0;
    if (sbuf_append(&t->pending, s, n)) return -1;
    return process(t, on_text, on_call, user);
}

int toolcall_finish(toolcall_parser *t, toolcall_text_fn on_text, toolcall_call_fn on_call, void *user) {
    (void)on_call;
    int rc = 0;
    if (t->in_call) {
        /* unclosed call: content, verbatim */
        t->in_call = 0;
        t->n_fallback++;
        rc = emit_text(t, TC_OPEN, TC_OPEN_LEN, on_text, user);
    }
    if (!rc && t->pending.len) rc = emit_text(t, t->pending.p, t->pending.len, on_text, user);
    sbuf_clear(&t->pending);
    /* trailing whitespace: kept for a plain-text turn, dropped once the turn has calls */
    if (!rc && t->ws_hold.len && t->n_calls == 0) rc = on_text(user, t->ws_hold.p, t->ws_hold.len);
    sbuf_clear(&t->ws_hold);
    return rc;
}
