/* chat.c — chat templates of a model directory and the OpenAI-request -> template-variables
 * adaptation (HF apply_chat_template semantics with vLLM's message preprocessing). */
#include "chat.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/file.h"

#define MAX_NAMED 16

struct chat_template {
    int n;                          /* named templates */
    char *names[MAX_NAMED];         /* "default", "tool_use", ... (NULL name = the only template) */
    jinja_template *tpl[MAX_NAMED];
    json_t *special;                /* object: bos_token, eos_token, ..., additional_special_tokens */
};

void chat_template_free(chat_template *t) {
    if (!t) return;
    for (int i = 0; i < t->n; i++) {
        free(t->names[i]);
        jinja_free(t->tpl[i]);
    }
    json_decref(t->special);
    free(t);
}

static int add_template(chat_template *t, const char *name, const char *src, size_t len, const char *where,
                        mtplx_err *err) {
    if (t->n >= MAX_NAMED) return err_set(err, MTPLX_EUNSUPPORTED, "%s: more than %d named chat templates", where, MAX_NAMED);
    jinja_template *jt;
    int rc = jinja_parse(src, len, &jt, err);
    if (rc) {
        err_prefix(err, "%s%s%s%s", where, name ? " (template '" : "", name ? name : "", name ? "')" : "");
        return rc;
    }
    t->names[t->n] = name ? strdup(name) : NULL;
    t->tpl[t->n] = jt;
    t->n++;
    return 0;
}

/* Special-token strings: a string or an AddedToken object {"content": ...}. */
static json_t *token_content(json_t *v) {
    if (json_is_string(v)) return json_incref(v);
    if (json_is_object(v)) {
        json_t *c = json_object_get(v, "content");
        if (json_is_string(c)) return json_incref(c);
    }
    return NULL;
}

static json_t *special_tokens(json_t *cfg) {
    json_t *sp = json_object();
    if (!json_is_object(cfg)) return sp;
    static const char *keys[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                                 "mask_token"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *c = token_content(json_object_get(cfg, keys[i]));
        if (c) json_object_set_new(sp, keys[i], c);
    }
    json_t *extra = json_object_get(cfg, "additional_special_tokens");
    if (json_is_array(extra)) {
        json_t *l = json_array();
        size_t i;
        json_t *v;
        json_array_foreach(extra, i, v) {
            json_t *c = token_content(v);
            if (c) json_array_append_new(l, c);
        }
        json_object_set_new(sp, "additional_special_tokens", l);
    }
    return sp;
}

static int load_config_templates(chat_template *t, json_t *ct, const char *where, mtplx_err *err) {
    if (json_is_string(ct)) return add_template(t, NULL, json_string_value(ct), json_string_length(ct), where, err);
    if (json_is_array(ct)) {
        size_t i;
        json_t *e;
        json_array_foreach(ct, i, e) {
            json_t *name = json_object_get(e, "name"), *tpl = json_object_get(e, "template");
            if (!json_is_string(name) || !json_is_string(tpl))
                return err_set(err, MTPLX_EBADFILE, "%s: chat_template[%zu] needs string \"name\" and \"template\"", where, i);
            int rc = add_template(t, json_string_value(name), json_string_value(tpl), json_string_length(tpl), where, err);
            if (rc) return rc;
        }
        return 0;
    }
    if (ct && !json_is_null(ct))
        return err_set(err, MTPLX_EBADFILE, "%s: chat_template must be a string or a list of {name, template}", where);
    return 0;
}

int chat_template_from_source(const char *src, size_t len, json_t *cfg, chat_template **out, mtplx_err *err) {
    *out = NULL;
    chat_template *t = calloc(1, sizeof *t);
    if (!t) return err_set(err, MTPLX_ENOMEM, "out of memory");
    t->special = special_tokens(cfg);
    int rc = add_template(t, NULL, src, len, "chat template", err);
    if (rc) {
        chat_template_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

int chat_template_load(const char *dir, chat_template **out, mtplx_err *err) {
    *out = NULL;
    char path[4096];
    chat_template *t = calloc(1, sizeof *t);
    if (!t) return err_set(err, MTPLX_ENOMEM, "out of memory");
    json_t *cfg = NULL;
    int rc = 0;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (file_exists(path)) {
        json_error_t je;
        cfg = json_load_file(path, JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &je); /* model_max_length can be 1e30 */
        if (!cfg || !json_is_object(cfg)) {
            rc = err_set(err, MTPLX_EBADFILE, "%s: %s (line %d)", path, cfg ? "not a JSON object" : je.text, je.line);
            goto fail;
        }
    }
    t->special = special_tokens(cfg);
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    if (file_exists(path)) {
        size_t len;
        char *src = file_read_all(path, &len, err);
        if (!src) { rc = err ? err->code : MTPLX_EIO; goto fail; }
        rc = add_template(t, NULL, src, len, path, err);
        free(src);
        if (rc) goto fail;
    } else if (cfg) {
        snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
        rc = load_config_templates(t, json_object_get(cfg, "chat_template"), path, err);
        if (rc) goto fail;
    }
    /* additional_chat_templates/<name>.jinja */
    snprintf(path, sizeof path, "%s/additional_chat_templates", dir);
    DIR *d = opendir(path);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            size_t l = strlen(de->d_name);
            if (l <= 6 || strcmp(de->d_name + l - 6, ".jinja")) continue;
            char name[256], fp[4096 + 300];
            snprintf(name, sizeof name, "%.*s", (int)(l - 6), de->d_name);
            snprintf(fp, sizeof fp, "%s/%s", path, de->d_name);
            size_t len;
            char *src = file_read_all(fp, &len, err);
            if (!src) { rc = err ? err->code : MTPLX_EIO; closedir(d); goto fail; }
            if (t->n == 1 && !t->names[0]) t->names[0] = strdup("default");
            rc = add_template(t, name, src, len, fp, err);
            free(src);
            if (rc) { closedir(d); goto fail; }
        }
        closedir(d);
    }
    if (t->n == 0) {
        rc = err_set(err, MTPLX_EUNSUPPORTED, "%s: no chat template (neither chat_template.jinja nor a \"chat_template\" in tokenizer_config.json)", dir);
        goto fail;
    }
    json_decref(cfg);
    *out = t;
    return 0;
fail:
    json_decref(cfg);
    chat_template_free(t);
    return rc;
}

/* HF's choice: an unnamed template, else "tool_use" when tools were given, else "default". */
static const jinja_template *pick(const chat_template *t, int has_tools, mtplx_err *err) {
    if (t->n == 1 && !t->names[0]) return t->tpl[0];
    if (has_tools)
        for (int i = 0; i < t->n; i++)
            if (t->names[i] && !strcmp(t->names[i], "tool_use")) return t->tpl[i];
    for (int i = 0; i < t->n; i++)
        if (!t->names[i] || !strcmp(t->names[i], "default")) return t->tpl[i];
    err_set(err, MTPLX_EUNSUPPORTED, "the model has several chat templates and none is named \"default\"");
    return NULL;
}

/* ---- request adaptation (vLLM) -------------------------------------------------------------- */

/* Text of one content part, or NULL (skip). Sets err for parts we cannot use. */
static int part_text(json_t *part, size_t mi, size_t pi, const char **text, size_t *len, mtplx_err *err) {
    *text = NULL;
    if (json_is_string(part)) {
        *text = json_string_value(part);
        *len = json_string_length(part);
        return 0;
    }
    if (!json_is_object(part))
        return err_set(err, MTPLX_EINVAL, "messages[%zu].content[%zu]: a content part must be an object or a string", mi, pi);
    json_t *type = json_object_get(part, "type");
    if (!type || json_is_null(type)) return err_set(err, MTPLX_EINVAL, "messages[%zu].content[%zu]: missing 'type' field", mi, pi);
    if (!json_is_string(type)) return err_set(err, MTPLX_EINVAL, "messages[%zu].content[%zu]: invalid 'type' field", mi, pi);
    const char *ty = json_string_value(type);
    const char *key = NULL;
    if (!strcmp(ty, "text") || !strcmp(ty, "input_text") || !strcmp(ty, "output_text")) key = "text";
    else if (!strcmp(ty, "refusal")) key = "refusal";
    else if (!strcmp(ty, "thinking")) key = "thinking";
    else
        return err_set(err, MTPLX_EUNSUPPORTED, "messages[%zu].content[%zu]: content part type '%s' is not supported (text only)",
                       mi, pi, ty);
    json_t *v = json_object_get(part, key);
    if (!v || json_is_null(v)) {
        if (!strcmp(ty, "text") || !strcmp(ty, "refusal")) return 0; /* vLLM skips these */
        return err_set(err, MTPLX_EINVAL, "messages[%zu].content[%zu]: '%s' part without '%s'", mi, pi, ty, key);
    }
    if (!json_is_string(v)) return err_set(err, MTPLX_EINVAL, "messages[%zu].content[%zu].%s must be a string", mi, pi, key);
    *text = json_string_value(v);
    *len = json_string_length(v);
    return 0;
}

/* content -> "\n"-joined string, or a list of {"type": "text", "text": ...} when as_parts */
static json_t *adapt_content(json_t *content, size_t mi, int as_parts, mtplx_err *err) {
    if (!content || json_is_null(content)) return as_parts ? json_array() : json_string("");
    if (json_is_string(content)) {
        if (!as_parts) return json_incref(content);
        json_t *l = json_array(), *p = json_object();
        json_object_set_new(p, "type", json_string("text"));
        json_object_set(p, "text", content);
        json_array_append_new(l, p);
        return l;
    }
    if (!json_is_array(content)) {
        err_set(err, MTPLX_EINVAL, "messages[%zu].content must be a string, a list of content parts or null", mi);
        return NULL;
    }
    json_t *parts = json_array();
    size_t total = 0;
    size_t i;
    json_t *part;
    json_array_foreach(content, i, part) {
        const char *text;
        size_t len;
        if (part_text(part, mi, i, &text, &len, err)) {
            json_decref(parts);
            return NULL;
        }
        if (!text) continue;
        json_array_append_new(parts, json_stringn(text, len));
        total += len + 1;
    }
    if (as_parts) {
        json_t *l = json_array();
        json_array_foreach(parts, i, part) {
            json_t *p = json_object();
            json_object_set_new(p, "type", json_string("text"));
            json_object_set(p, "text", part);
            json_array_append_new(l, p);
        }
        json_decref(parts);
        return l;
    }
    char *buf = malloc(total + 1);
    if (!buf) {
        json_decref(parts);
        err_set(err, MTPLX_ENOMEM, "out of memory");
        return NULL;
    }
    size_t k = 0;
    json_array_foreach(parts, i, part) {
        if (i) buf[k++] = '\n';
        memcpy(buf + k, json_string_value(part), json_string_length(part));
        k += json_string_length(part);
    }
    json_t *s = json_stringn(buf, k);
    free(buf);
    json_decref(parts);
    return s;
}

static int adapt_tool_calls(json_t *msg, size_t mi, mtplx_err *err) {
    json_t *tcs = json_object_get(msg, "tool_calls");
    if (!json_is_array(tcs)) return 0;
    if (json_array_size(tcs) == 0) {
        json_object_del(msg, "tool_calls");
        return 0;
    }
    size_t i;
    json_t *tc;
    json_array_foreach(tcs, i, tc) {
        json_t *fn = json_is_object(tc) ? json_object_get(tc, "function") : NULL;
        if (!json_is_object(fn))
            return err_set(err, MTPLX_EINVAL, "messages[%zu].tool_calls[%zu]: missing \"function\" object", mi, i);
        json_t *args = json_object_get(fn, "arguments");
        if (json_is_string(args)) {
            json_error_t je;
            json_t *parsed = json_loadb(json_string_value(args), json_string_length(args),
                                        JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
            json_object_set_new(fn, "arguments", parsed ? parsed : json_object());
        } else if (!json_is_object(args) && !json_is_array(args)) {
            json_object_set_new(fn, "arguments", json_object());
        }
    }
    return 0;
}

json_t *chat_build_vars(const chat_template *t, json_t *req, mtplx_err *err) {
    if (!json_is_object(req)) {
        err_set(err, MTPLX_EINVAL, "the request must be a JSON object");
        return NULL;
    }
    json_t *messages = json_object_get(req, "messages");
    if (!json_is_array(messages)) {
        err_set(err, MTPLX_EINVAL, "request: \"messages\" must be a list");
        return NULL;
    }
    json_t *tools = json_object_get(req, "tools");
    int has_tools = tools && !json_is_null(tools);
    const jinja_template *jt = pick(t, has_tools, err);
    if (!jt) return NULL;
    int as_parts = jinja_wants_content_parts(jt);

    json_t *conv = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        if (!json_is_object(m)) {
            err_set(err, MTPLX_EINVAL, "messages[%zu] must be an object", i);
            goto fail;
        }
        json_t *role = json_object_get(m, "role");
        if (!json_is_string(role)) {
            err_set(err, MTPLX_EINVAL, "messages[%zu]: \"role\" must be a string", i);
            goto fail;
        }
        const char *r = json_string_value(role);
        json_t *out = json_object();
        json_object_set(out, "role", role);
        json_t *content = adapt_content(json_object_get(m, "content"), i, as_parts, err);
        if (!content) {
            json_decref(out);
            goto fail;
        }
        json_object_set_new(out, "content", content);
        if (!strcmp(r, "assistant")) {
            json_t *tc = json_object_get(m, "tool_calls");
            if (tc && !json_is_null(tc)) {
                if (!json_is_array(tc)) {
                    json_decref(out);
                    err_set(err, MTPLX_EINVAL, "messages[%zu].tool_calls must be a list", i);
                    goto fail;
                }
                json_object_set_new(out, "tool_calls", json_deep_copy(tc));
            }
            json_t *reasoning = json_object_get(m, "reasoning");
            if (!reasoning || json_is_null(reasoning)) reasoning = json_object_get(m, "reasoning_content");
            if (reasoning && !json_is_null(reasoning)) {
                json_object_set(out, "reasoning", reasoning);
                json_object_set(out, "reasoning_content", reasoning);
            }
        } else if (!strcmp(r, "tool")) {
            json_t *id = json_object_get(m, "tool_call_id");
            if (id) json_object_set(out, "tool_call_id", id);
        }
        json_t *name = json_object_get(m, "name");
        if (json_is_string(name)) json_object_set(out, "name", name);
        json_t *task = json_object_get(m, "task");
        if (json_is_string(task)) json_object_set(out, "task", task);
        if (!strcmp(r, "developer")) {
            json_t *dt = json_object_get(m, "tools");
            json_object_set(out, "tools", dt ? dt : json_null());
        }
        if (adapt_tool_calls(out, i, err)) {
            json_decref(out);
            goto fail;
        }
        json_array_append_new(conv, out);
    }

    json_t *agp = json_object_get(req, "add_generation_prompt");
    json_t *cfm = json_object_get(req, "continue_final_message");
    if (agp && !json_is_boolean(agp)) {
        err_set(err, MTPLX_EINVAL, "request: \"add_generation_prompt\" must be a boolean");
        goto fail;
    }
    if (cfm && !json_is_boolean(cfm)) {
        err_set(err, MTPLX_EINVAL, "request: \"continue_final_message\" must be a boolean");
        goto fail;
    }
    json_t *vars = json_object();
    json_object_update(vars, t->special);
    json_object_set_new(vars, "messages", conv);
    conv = NULL;
    json_object_set(vars, "tools", has_tools ? tools : json_null());
    json_t *docs = json_object_get(req, "documents");
    json_object_set(vars, "documents", docs ? docs : json_null());
    json_object_set_new(vars, "add_generation_prompt", json_boolean(agp ? json_is_true(agp) : 1));
    json_t *kw = json_object_get(req, "chat_template_kwargs");
    if (kw && !json_is_null(kw)) {
        if (!json_is_object(kw)) {
            json_decref(vars);
            err_set(err, MTPLX_EINVAL, "request: \"chat_template_kwargs\" must be an object");
            return NULL;
        }
        if (json_object_get(kw, "messages")) {
            json_decref(vars);
            err_set(err, MTPLX_EINVAL, "request: chat_template_kwargs may not set \"messages\"");
            return NULL;
        }
        json_object_update(vars, kw);
    }
    if (json_is_true(json_object_get(vars, "add_generation_prompt")) && cfm && json_is_true(cfm)) {
        json_decref(vars);
        err_set(err, MTPLX_EINVAL, "request: cannot set both continue_final_message and add_generation_prompt to true");
        return NULL;
    }
    return vars;
fail:
    json_decref(conv);
    return NULL;
}

/* HF's continue_final_message: cut the prompt right after the final message's content. */
static int continue_final(json_t *vars, char *prompt, size_t *len, mtplx_err *err) {
    json_t *msgs = json_object_get(vars, "messages");
    size_t n = json_array_size(msgs);
    if (!n) return err_set(err, MTPLX_EINVAL, "continue_final_message needs at least one message");
    json_t *content = json_object_get(json_array_get(msgs, n - 1), "content");
    const char *fm = NULL;
    size_t fl = 0;
    if (json_is_string(content)) {
        fm = json_string_value(content);
        fl = json_string_length(content);
    } else if (json_is_array(content)) {
        for (size_t k = json_array_size(content); k > 0; k--) {
            json_t *tx = json_object_get(json_array_get(content, k - 1), "text");
            if (json_is_string(tx)) {
                fm = json_string_value(tx);
                fl = json_string_length(tx);
                break;
            }
        }
    }
    if (!fm) return err_set(err, MTPLX_EINVAL, "continue_final_message: the final message has no text content");
    /* strip() / lstrip() of ASCII whitespace (enough for the cut; content is user text) */
    size_t a = 0, b = fl;
    while (a < b && fm[a] && strchr(" \t\n\r\f\v", fm[a])) a++;
    while (b > a && fm[b - 1] && strchr(" \t\n\r\f\v", fm[b - 1])) b--;
    const char *found = NULL;
    if (b > a) {
        for (size_t k = *len; k >= b - a; k--) {
            if (!memcmp(prompt + k - (b - a), fm + a, b - a)) { found = prompt + k - (b - a); break; }
            if (k == b - a) break;
        }
    } else found = prompt + *len;
    if (!found)
        return err_set(err, MTPLX_EINVAL, "continue_final_message is set but the final message does not appear in the rendered chat");
    size_t loc = (size_t)(found - prompt);
    size_t lstripped = fl - a;
    size_t cut;
    if (loc + lstripped <= *len && !memcmp(prompt + loc, fm + a, lstripped) && a == 0) cut = loc + lstripped;
    else cut = loc + (b - a);
    prompt[cut] = 0;
    *len = cut;
    return 0;
}

int chat_render(const chat_template *t, json_t *request, const jinja_limits *limits, char **prompt, size_t *len,
                mtplx_err *err) {
    *prompt = NULL;
    if (len) *len = 0;
    json_t *vars = chat_build_vars(t, request, err);
    if (!vars) return err && err->code ? err->code : MTPLX_EINVAL;
    json_t *tools = json_object_get(request, "tools");
    const jinja_template *jt = pick(t, tools && !json_is_null(tools), err);
    size_t n = 0;
    int rc = jinja_render(jt, vars, limits, prompt, &n, err);
    if (!rc) {
        json_t *cfm = json_object_get(request, "continue_final_message");
        if (cfm && json_is_true(cfm)) rc = continue_final(vars, *prompt, &n, err);
        if (rc) {
            free(*prompt);
            *prompt = NULL;
        }
    }
    json_decref(vars);
    if (!rc && len) *len = n;
    return rc;
}

int chat_render_json(const chat_template *t, const char *body, size_t body_len, const jinja_limits *limits,
                     char **prompt, size_t *len, mtplx_err *err) {
    *prompt = NULL;
    json_error_t je;
    json_t *req = json_loadb(body, body_len, JSON_ALLOW_NUL, &je);
    if (!req && strstr(je.text, "too big integer")) /* Python has big ints; keep them as floats */
        req = json_loadb(body, body_len, JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &je);
    if (!req) {
        int utf8 = strstr(je.text, "decode byte") || strstr(je.text, "UTF-8") || strstr(je.text, "Unicode");
        return err_set(err, MTPLX_EINVAL, "request JSON%s: %s (line %d, column %d)", utf8 ? " is not valid UTF-8" : "",
                       je.text, je.line, je.column);
    }
    int rc = chat_render(t, req, limits, prompt, len, err);
    json_decref(req);
    return rc;
}
