/* fuzz_chat_request.c — libFuzzer harness for the whole way from a hostile request body to prompt
 * tokens, as `mtplx serve` takes it (src/server/http.c, handle_generate): the body is parsed by the
 * endpoint's parser (tools, tool calls, content parts, structured output), rendered with the
 * embedded model's chat template (srv_render_prompt, with the server's system-message fallback),
 * encoded with its tokenizer, checked by the backend, and structured output is attached. The
 * backend is the server's own (backend_model_open on models/qwen35-tiny-code, one slot, no prefix
 * cache), so the render and encode callbacks are the ones the server runs.
 *
 * Input: byte 0 picks the endpoint (bits 0-2: chat, messages, responses, count_tokens,
 * completions) and a string blow-up (bits 4-7 = s: when s > 0 every string of the body is repeated
 * up to s * 4 KiB, at most 256 KiB in all: huge contents, names and arguments from small inputs);
 * bytes 1.. are the JSON body. Deep nesting and odd Unicode come from the body itself.
 *
 * Checks: no crash, leak, UB, hang or runaway memory (the template engine's limits bound the work);
 * a refused request names a 4xx/5xx status and a message; an accepted one renders to valid UTF-8
 * text (or a clean template error) whose token ids lie inside the vocabulary. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "../../src/chat/reasoning.h"
#include "../../src/server/backend_model.h"
#include "../../src/server/internal.h"
#include "../../src/tokenizer/tokenizer.h"

#define BLOWUP_UNIT 4096          /* bytes per step of the string blow-up */
#define BLOWUP_TOTAL (256 << 10)  /* most bytes the blow-up adds to one body */

static srv_backend g_be;
static int g_vocab;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    srv_model_opts o = {.ctx = 4096, .max_seqs = 1, .kv_pages = 0, .cache_ram_mb = -1};
    mtplx_err err = {0};
    if (backend_model_open("models/qwen35-tiny-code", &o, &g_be, &err)) {
        fprintf(stderr, "fuzz_chat_request: %s (run from the repo root after `make model`)\n", err.msg);
        abort();
    }
    /* the ids' bound: the same tokenizer, loaded on its own */
    tokenizer *t = NULL;
    if (tok_load("models/qwen35-tiny-code", &t, &err)) abort();
    g_vocab = tok_vocab_size(t);
    tok_free(t);
    return 0;
}

static int valid_utf8(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (l <= 0) return 0;
        i += (size_t)l;
    }
    return 1;
}

/* Repeat every non-empty string of v (keys stay) up to `want` bytes while *budget lasts. */
static void blow_up(json_t *v, size_t want, size_t *budget, int depth) {
    if (depth > 64) return;
    if (json_is_string(v)) {
        size_t n = json_string_length(v);
        if (n == 0 || n >= want || *budget < want - n) return;
        char *s = malloc(want);
        if (!s) abort();
        size_t k = 0;
        while (k + n <= want) memcpy(s + k, json_string_value(v), n), k += n;
        if (json_string_setn_nocheck(v, s, k)) abort();
        *budget -= k - n;
        free(s);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) blow_up(x, want, budget, depth + 1);
    } else if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) blow_up(x, want, budget, depth + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int endpoint = (data[0] & 7) % 5, scale = data[0] >> 4;
    json_error_t je;
    json_t *body = json_loadb((const char *)data + 1, size - 1, 0, &je);
    if (!json_is_object(body)) {
        json_decref(body);
        return 0;
    }
    if (scale) {
        size_t budget = BLOWUP_TOTAL;
        blow_up(body, (size_t)scale * BLOWUP_UNIT, &budget, 0);
    }
    srv_job *j = job_new();
    if (!j) abort();
    g_be.default_params(g_be.impl, &j->params);
    j->params.max_tokens = 0;
    j->params.depth = -1;
    srv_reqerr e = {0};
    json_t *render_req = NULL;
    char *prompt = NULL;
    int think = -1, rc;
    if (endpoint == 0) rc = openai_parse_chat(body, &g_be, j, &render_req, &think, &e);
    else if (endpoint == 1) rc = anthropic_parse(body, &g_be, j, &render_req, &think, &e);
    else if (endpoint == 2) rc = responses_parse(body, &g_be, j, &render_req, &think, &e);
    else if (endpoint == 3) { /* count_tokens: the Messages body without max_tokens */
        if (!json_object_get(body, "max_tokens")) json_object_set_new(body, "max_tokens", json_integer(1));
        rc = anthropic_parse(body, &g_be, j, &render_req, &think, &e);
    } else rc = openai_parse_completion(body, &g_be, j, &prompt, &e);
    json_decref(body);
    if (rc) {
        if (e.status < 400 || e.status > 599 || !e.msg[0]) abort();
        json_decref(render_req);
        free(prompt);
        job_unref(j);
        return 0;
    }
    if ((endpoint == 4) != (render_req == NULL) || (endpoint == 4 && !prompt)) abort();
    mtplx_err err = {0};
    if (render_req) {
        rc = srv_render_prompt(&g_be, render_req, think, &prompt, &err);
        json_decref(render_req);
        if (rc) { /* a refused template or a limit: a clean error with a message, nothing returned */
            if (!err.msg[0] || prompt) abort();
            job_unref(j);
            return 0;
        }
        if (!prompt || !valid_utf8(prompt, strlen(prompt))) abort();
    }
    rc = g_be.encode(g_be.impl, prompt, strlen(prompt), &j->prompt, &j->n_prompt, &err);
    if (rc && valid_utf8(prompt, strlen(prompt))) abort(); /* the server answers 400 to text it cannot encode */
    for (int i = 0; !rc && i < j->n_prompt; i++)
        if (j->prompt[i] < 0 || j->prompt[i] >= g_vocab) abort();
    if (!rc && j->split_reasoning) j->start_in_reasoning = reasoning_prompt_opens_think(prompt);
    free(prompt);
    if (!rc && endpoint != 3 && j->n_prompt > 0 && j->n_prompt < g_be.ctx) {
        int room = g_be.ctx - j->n_prompt;
        if (j->params.max_tokens <= 0 || j->params.max_tokens > room) j->params.max_tokens = room;
        if (j->params.depth < 0) j->params.depth = g_be.default_depth;
        if (!g_be.validate(g_be.impl, &j->params, &err)) {
            if (structured_attach(&g_be, j, &err) && !err.msg[0]) abort();
        } else if (!err.msg[0]) {
            abort();
        }
    }
    job_unref(j);
    return 0;
}
