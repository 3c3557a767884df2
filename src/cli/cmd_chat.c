/* cmd_chat.c — `mtplx chat`: a multi-turn chat in the terminal over the engine in this process
 * (no server). Each turn renders the whole conversation with the model's chat template, encodes
 * it and generates with gen_session_run; committed tokens are decoded as they come and split into
 * reasoning (printed dimmed, or hidden) and the answer. Ctrl-C stops the answer (the engine's
 * token callback returns non-zero, finish_reason "cancel") and returns to the prompt. When stdin
 * or stdout is not a terminal the output is plain: answers only on stdout, everything else on
 * stderr, no colours, no line editing. docs/cli.md describes the commands. */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/clock.h"
#include "../base/sbuf.h"
#include "../chat/chat.h"
#include "../chat/reasoning.h"
#include "../engine/gen_config.h"
#include "../engine/generate.h"
#include "../engine/rng.h"
#include "../tokenizer/tokenizer.h"
#include "commands.h"
#include "gen_cli.h"
#include "line_edit.h"
#include "progress.h"

#define CHAT_DEFAULT_CTX 8192  /* as `mtplx serve` */

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtplx chat [--model DIR] [--system TEXT] [--depth N] [--seed S] [--ctx N]\n"
            "                  [--hide-thinking] [--no-thinking] [--history FILE | --no-history] [sampler flags]\n"
            "\n"
            "Chat with a model in the terminal (the engine runs in this process; no server needed).\n"
            "Enter sends; end a line with \\ to continue on the next one, or type \"\"\" to start and\n"
            "end a block of several lines (a pasted text with newlines stays one message). Up/Down\n"
            "recall earlier inputs, kept across runs in the history file. Ctrl-C stops the answer\n"
            "being generated (or clears the line); Ctrl-D or /quit leaves.\n"
            "\n"
            "Commands:\n"
            "  /reset                    forget the conversation (the system prompt stays)\n"
            "  /system [TEXT]            set the system prompt (no TEXT: remove it)\n"
            "  /set [NAME VALUE]         temperature, top_p, top_k, min_p, max_tokens, seed,\n"
            "                            presence_penalty, frequency_penalty, repetition_penalty,\n"
            "                            thinking on|off, depth, draft_min_conf; no argument: show the\n"
            "                            values\n"
            "  /depth N                  MTP drafts per cycle, 0 = plain AR (a fixed depth: draft_min_conf 0;\n"
            "                            /set draft_min_conf X after it for the adaptive depth)\n"
            "  /save FILE, /load FILE    the conversation as JSON {system, messages}\n"
            "  /help, /quit\n"
            "\n"
            "  --model DIR               checkpoint directory (default: the embedded model)\n"
            "  --system TEXT             system prompt\n"
            "  --depth N                 MTP drafts per cycle (default: what `mtplx tune` saved, else %d\n"
            "                            with --draft-min-conf %g)\n"
            "  --seed S                  seed of the first answer (then S+1, ...; default: random)\n"
            "  --ctx N                   context length in tokens (default: the model's, at most %d)\n"
            "  --hide-thinking           do not print the model's reasoning (it is shown dimmed)\n"
            "  --no-thinking             ask the template for no reasoning (enable_thinking=false)\n"
            "  --history FILE            input history file (default:\n"
            "                            $XDG_STATE_HOME/mtplx/chat_history or ~/.local/state/mtplx/chat_history)\n"
            "  --no-history              keep no history file\n"
            CLI_DRAFT_QUANT_HELP CLI_DRAFT_VOCAB_HELP CLI_SAMPLER_HELP
            "\n"
            "After each answer a stats line: tokens, prefill and decode speed, MTP acceptance,\n"
            "tokens per verify, finish reason. When stdin or stdout is not a terminal, answers go to\n"
            "stdout (reasoning is not printed) and prompts, stats and messages to stderr.\n",
            GEN_DEFAULT_DEPTH, (double)GEN_DEFAULT_MIN_CONF, CHAT_DEFAULT_CTX);
}

/* One chat: the loaded model and the conversation so far. */
typedef struct {
    mtplx_model   *m;
    tokenizer     *tok;
    chat_template *ct;
    gen_session   *s;
    json_t        *messages;      /* [{role, content[, reasoning_content]}] without the system prompt */
    char          *system;        /* system prompt (heap) or NULL */
    gen_params     p;             /* sampler values for the next answer; p.depth included */
    int            max_tokens_set;/* 1: p.max_tokens was set by the user; else the room left in ctx */
    int            seed_set;      /* 1: next answer uses p.seed, then p.seed + 1 */
    int            thinking;      /* enable_thinking for the template */
    int            hide_thinking; /* reasoning is not printed */
    int            tty;           /* stdin and stdout are terminals: colours, editing, prompts */
    int            ctx;           /* tokens, prompt + completion */
    int            vocab;
    FILE          *info;          /* where messages go: stdout on a terminal, else stderr */
} chat_state;

static volatile sig_atomic_t g_interrupted;
static void on_sigint(int sig) { (void)sig; g_interrupted = 1; }

/* ---- one answer ---- */

typedef struct {
    chat_state      *cs;
    tok_stream      *ts;
    reasoning_parser rp;
    sbuf             content, reasoning;
    int              dim_open;     /* the dim attribute is on (reasoning being printed) */
    int              shown;        /* something was printed for this answer */
} turn_ctx;

static int on_piece(void *user, int is_reasoning, const char *s, size_t n) {
    turn_ctx *t = user;
    if (sbuf_append(is_reasoning ? &t->reasoning : &t->content, s, n)) return -1;
    if (is_reasoning && (t->cs->hide_thinking || !t->cs->tty)) return 0;
    if (is_reasoning && !t->dim_open) fputs("\x1b[2m", stdout), t->dim_open = 1;
    if (!is_reasoning && t->dim_open) fputs("\x1b[0m\n\n", stdout), t->dim_open = 0;
    fwrite(s, 1, n, stdout);
    fflush(stdout);
    t->shown = 1;
    return 0;
}

static int on_tokens(void *user, const int32_t *toks, int n) {
    turn_ctx *t = user;
    if (g_interrupted) return 1;
    for (int i = 0; i < n; i++) {
        const char *txt;
        size_t len;
        mtplx_err e;
        if (tok_stream_push(t->ts, toks[i], &txt, &len, &e)) return 1;
        if (len && reasoning_feed(&t->rp, txt, len, on_piece, t)) return 1;
    }
    return g_interrupted != 0;
}

static void print_stats(const chat_state *cs, const gen_stats *st) {
    FILE *f = cs->tty ? stdout : stderr;
    if (cs->tty) fputs("\x1b[2m", f);
    fprintf(f, "[%d tok, prefill %d tok %.0f ms, decode %.1f tok/s", st->completion_tokens, st->prompt_tokens,
            st->prefill_s * 1e3, st->decode_tok_s);
    if (st->depth > 0) {
        fprintf(f, ", depth %d, acceptance %.2f [", st->depth, st->acceptance_rate);
        for (int d = 0; d < st->depth && d < GEN_MAX_DEPTH; d++)
            fprintf(f, d ? " %.2f" : "%.2f", st->cycles ? (double)st->accepted_per_position[d] / st->cycles : 0);
        fprintf(f, "], %.2f tok/verify", st->tokens_per_verify);
    }
    fprintf(f, ", %s, seed %llu]", !strcmp(st->finish_reason, "cancel") ? "stopped" : st->finish_reason,
            (unsigned long long)st->seed);
    if (cs->tty) fputs("\x1b[0m", f);
    fputc('\n', f);
    fflush(f);
}

/* The conversation as a template request (new reference). */
static json_t *build_request(const chat_state *cs) {
    json_t *msgs = json_array();
    if (cs->system) json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "system", "content", cs->system));
    size_t i;
    json_t *m;
    json_array_foreach(cs->messages, i, m) json_array_append(msgs, m);
    return json_pack("{s:o,s:{s:b}}", "messages", msgs, "chat_template_kwargs", "enable_thinking", cs->thinking);
}

/* Answer the conversation's last user message; appends the assistant message. Returns 0, or -1
 * after printing why (the user message is then removed). */
static int answer(chat_state *cs) {
    mtplx_err err = {0};
    json_t *req = build_request(cs);
    char *prompt = NULL;
    size_t plen = 0;
    int32_t *ids = NULL;
    int n_ids = 0, rc = -1;
    turn_ctx t = {.cs = cs};
    if (!req || chat_render(cs->ct, req, NULL, &prompt, &plen, &err) || tok_encode(cs->tok, prompt, plen, &ids, &n_ids, &err)) {
        fprintf(stderr, "mtplx chat: %s\n", req ? err.msg : "out of memory");
        goto out;
    }
    if (n_ids >= cs->ctx) {
        fprintf(stderr, "mtplx chat: the conversation is %d tokens and the context is %d: /reset to start over "
                        "(or a larger --ctx)\n", n_ids, cs->ctx);
        goto out;
    }
    gen_params p = cs->p;
    int room = cs->ctx - n_ids;
    if (!cs->max_tokens_set || p.max_tokens > room) p.max_tokens = room;
    p.seed_set = cs->seed_set;
    if (!cs->seed_set) p.seed = rng_fresh_seed();
    if (tok_stream_new(cs->tok, 1, &t.ts, &err)) {
        fprintf(stderr, "mtplx chat: %s\n", err.msg);
        goto out;
    }
    reasoning_init(&t.rp, reasoning_prompt_opens_think(prompt));
    struct sigaction sa = {.sa_handler = on_sigint}, old;
    sigemptyset(&sa.sa_mask);
    g_interrupted = 0;
    sigaction(SIGINT, &sa, &old);
    gen_stats st;
    int grc = gen_session_run(cs->s, ids, n_ids, &p, on_tokens, &t, NULL, NULL, &st, &err);
    sigaction(SIGINT, &old, NULL);
    if (grc) {
        if (t.dim_open) fputs("\x1b[0m", stdout);
        fprintf(stderr, "\nmtplx chat: %s\n", err.msg);
        goto out;
    }
    const char *txt;
    size_t len;
    if (tok_stream_flush(t.ts, &txt, &len, &err) == 0 && len) reasoning_feed(&t.rp, txt, len, on_piece, &t);
    reasoning_finish(&t.rp, on_piece, &t);
    if (t.dim_open) fputs("\x1b[0m", stdout);
    if (t.shown || !cs->tty) fputc('\n', stdout);
    if (g_interrupted && cs->tty) fputs("\x1b[2m[stopped]\x1b[0m\n", stdout);
    fflush(stdout);
    print_stats(cs, &st);
    if (cs->seed_set) cs->p.seed++;
    /* what was generated stays in the conversation, also when stopped */
    json_t *msg = json_pack("{s:s,s:s%}", "role", "assistant", "content", t.content.p ? t.content.p : "", t.content.len);
    if (msg && t.reasoning.len) json_object_set_new(msg, "reasoning_content", json_stringn(t.reasoning.p, t.reasoning.len));
    if (msg) json_array_append_new(cs->messages, msg);
    rc = 0;
out:
    if (rc) json_array_remove(cs->messages, json_array_size(cs->messages) - 1);
    if (t.ts) tok_stream_free(t.ts);
    reasoning_free(&t.rp);
    sbuf_free(&t.content);
    sbuf_free(&t.reasoning);
    free(ids);
    free(prompt);
    json_decref(req);
    return rc;
}

/* ---- commands ---- */

static void show_settings(const chat_state *cs) {
    const gen_params *p = &cs->p;
    fprintf(cs->info,
            "temperature %g, top_p %g, top_k %d, min_p %g, presence_penalty %g, frequency_penalty %g, "
            "repetition_penalty %g, max_tokens %s%d, seed %s, thinking %s, depth %d, draft_min_conf %g, ctx %d\n",
            p->temperature, p->top_p, p->top_k, p->min_p, p->presence_penalty, p->frequency_penalty,
            p->repetition_penalty, cs->max_tokens_set ? "" : "up to ", cs->max_tokens_set ? p->max_tokens : cs->ctx,
            cs->seed_set ? "set" : "random", cs->thinking ? "on" : "off", p->depth, p->draft_min_conf, cs->ctx);
    if (cs->system) fprintf(cs->info, "system: %s\n", cs->system);
}

/* /set NAME VALUE. Returns 0 or -1 after printing why (nothing changed). */
static int cmd_set(chat_state *cs, const char *name, const char *val) {
    gen_params p = cs->p;
    float f;
    long l;
    uint64_t u;
    char *end = NULL;
    if (!strcmp(name, "thinking")) {
        if (strcmp(val, "on") && strcmp(val, "off")) return fprintf(stderr, "mtplx chat: thinking is on or off\n"), -1;
        cs->thinking = !strcmp(val, "on");
        return 0;
    }
    float *fp = !strcmp(name, "temperature") ? &p.temperature : !strcmp(name, "top_p") ? &p.top_p
              : !strcmp(name, "min_p") ? &p.min_p : !strcmp(name, "presence_penalty") ? &p.presence_penalty
              : !strcmp(name, "frequency_penalty") ? &p.frequency_penalty
              : !strcmp(name, "repetition_penalty") ? &p.repetition_penalty
              : !strcmp(name, "draft_min_conf") ? &p.draft_min_conf : NULL;
    int *ip = !strcmp(name, "top_k") ? &p.top_k : !strcmp(name, "max_tokens") ? &p.max_tokens
            : !strcmp(name, "depth") ? &p.depth : NULL;
    if (fp) {
        f = strtof(val, &end);
        if (end == val || *end) return fprintf(stderr, "mtplx chat: %s needs a number, not '%s'\n", name, val), -1;
        *fp = f;
    } else if (ip) {
        l = strtol(val, &end, 10);
        if (end == val || *end || l < 0 || l > 1 << 30) return fprintf(stderr, "mtplx chat: %s needs a whole number >= 0, not '%s'\n", name, val), -1;
        *ip = (int)l;
        if (ip == &p.depth) p.draft_min_conf = 0; /* a depth typed is a fixed depth, as --depth is */
    } else if (!strcmp(name, "seed")) {
        if (!strcmp(val, "random")) {
            cs->seed_set = 0;
            return 0;
        }
        u = strtoull(val, &end, 10);
        if (end == val || *end || u > (1ull << 63) - 1) return fprintf(stderr, "mtplx chat: seed is a number < 2^63 or 'random'\n"), -1;
        p.seed = u;
    } else {
        return fprintf(stderr, "mtplx chat: unknown setting '%s' (see /help)\n", name), -1;
    }
    if (!strcmp(name, "depth") && p.depth > 0 && !model_has_mtp(cs->m))
        return fprintf(stderr, "mtplx chat: this model has no MTP head: depth must be 0\n"), -1;
    if (!strcmp(name, "max_tokens") && p.max_tokens == 0) return fprintf(stderr, "mtplx chat: max_tokens must be > 0\n"), -1;
    mtplx_err err = {0};
    if (gen_params_validate(&p, cs->vocab, &err)) return fprintf(stderr, "mtplx chat: %s\n", err.msg), -1;
    cs->p = p;
    if (!strcmp(name, "max_tokens")) cs->max_tokens_set = 1;
    if (!strcmp(name, "seed")) cs->seed_set = 1;
    return 0;
}

static int cmd_save(chat_state *cs, const char *path) {
    json_t *o = json_pack("{s:s?,s:O}", "system", cs->system, "messages", cs->messages);
    int rc = o ? json_dump_file(o, path, JSON_INDENT(1)) : -1;
    json_decref(o);
    if (rc) fprintf(stderr, "mtplx chat: cannot write %s\n", path);
    else fprintf(cs->info, "saved %zu messages to %s\n", json_array_size(cs->messages), path);
    return rc;
}

static int cmd_load(chat_state *cs, const char *path) {
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    json_t *msgs = o ? json_object_get(o, "messages") : NULL, *sys = o ? json_object_get(o, "system") : NULL;
    size_t i;
    json_t *m;
    int ok = json_is_array(msgs) && (!sys || json_is_string(sys) || json_is_null(sys));
    json_array_foreach(msgs, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!role || (strcmp(role, "user") && strcmp(role, "assistant")) || !json_is_string(json_object_get(m, "content"))) ok = 0;
    }
    if (!ok) {
        fprintf(stderr, "mtplx chat: %s: %s\n", path,
                o ? "not a saved chat (an object with \"messages\": [{role user|assistant, content}])" : je.text);
        json_decref(o);
        return -1;
    }
    json_decref(cs->messages);
    cs->messages = json_incref(msgs);
    free(cs->system);
    cs->system = json_is_string(sys) ? strdup(json_string_value(sys)) : NULL;
    json_decref(o);
    fprintf(cs->info, "loaded %zu messages from %s\n", json_array_size(cs->messages), path);
    return 0;
}

/* Run a "/..." line. Returns 1 to quit, else 0. */
static int run_command(chat_state *cs, char *line) {
    char *cmd = line + 1, *arg = cmd + strcspn(cmd, " \t");
    if (*arg) *arg++ = 0;
    arg += strspn(arg, " \t");
    size_t al = strlen(arg);
    while (al && (arg[al - 1] == ' ' || arg[al - 1] == '\t')) arg[--al] = 0;
    if (!strcmp(cmd, "quit") || !strcmp(cmd, "exit") || !strcmp(cmd, "q")) return 1;
    if (!strcmp(cmd, "help")) usage(cs->info);
    else if (!strcmp(cmd, "reset")) {
        json_array_clear(cs->messages);
        fprintf(cs->info, "conversation cleared\n");
    } else if (!strcmp(cmd, "system")) {
        free(cs->system);
        cs->system = *arg ? strdup(arg) : NULL;
        fprintf(cs->info, cs->system ? "system prompt set\n" : "system prompt removed\n");
    } else if (!strcmp(cmd, "set")) {
        char *name = arg, *val = arg + strcspn(arg, " \t");
        if (*val) *val++ = 0;
        val += strspn(val, " \t");
        if (!*name) show_settings(cs);
        else if (!*val) fprintf(stderr, "mtplx chat: /set %s needs a value\n", name);
        else if (!cmd_set(cs, name, val)) fprintf(cs->info, "%s = %s\n", name, val);
    } else if (!strcmp(cmd, "depth")) {
        if (!*arg) fprintf(cs->info, "depth %d, draft_min_conf %g\n", cs->p.depth, cs->p.draft_min_conf);
        else if (!cmd_set(cs, "depth", arg))
            fprintf(cs->info, "depth = %d, draft_min_conf = %g\n", cs->p.depth, cs->p.draft_min_conf);
    } else if (!strcmp(cmd, "save") || !strcmp(cmd, "load")) {
        if (!*arg) fprintf(stderr, "mtplx chat: /%s needs a file name\n", cmd);
        else if (cmd[0] == 's') cmd_save(cs, arg);
        else cmd_load(cs, arg);
    } else {
        fprintf(stderr, "mtplx chat: unknown command /%s (see /help)\n", cmd);
    }
    return 0;
}

/* ---- input ---- */

/* Read one message: lines joined while they end with '\', inside a """ block, or inside a paste.
 * Returns a heap string, or NULL at end of input; *interrupted is set for Ctrl-C (NULL returned). */
static char *read_message(line_editor *le, int tty, int *interrupted) {
    sbuf msg = {0};
    int block = 0, cont = 0;
    *interrupted = 0;
    for (;;) {
        char *line = NULL;
        le_status st = le_read(le, !tty ? NULL : (cont || block) ? "... " : "> ", &line);
        if (st == LE_INTERRUPT) {
            *interrupted = 1;
            break;
        }
        if (st == LE_EOF || st == LE_ERROR) {
            if (msg.len) { /* end of input after a partial message: send what there is */
                free(line);
                return sbuf_take(&msg);
            }
            break;
        }
        size_t n = strlen(line);
        if (!strcmp(line, "\"\"\"")) {
            free(line);
            if (block) return sbuf_take(&msg);
            block = 1;
            continue;
        }
        cont = st == LE_CONTINUE;
        if (!block && !cont && n && line[n - 1] == '\\') line[--n] = 0, cont = 1;
        if (msg.len || block || cont) {
            if (msg.p && msg.len) sbuf_puts(&msg, "\n");
        }
        sbuf_append(&msg, line, n);
        free(line);
        if (!block && !cont) return sbuf_take(&msg);
    }
    sbuf_free(&msg);
    return NULL;
}

static void default_history(char *out, size_t n) {
    const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg) snprintf(out, n, "%s/mtplx/chat_history", xdg);
    else if (home && *home) snprintf(out, n, "%s/.local/state/mtplx/chat_history", home);
    else out[0] = 0;
}

static void add_stop(gen_params *p, int id) {
    if (id < 0 || p->n_stop_ids >= GEN_MAX_STOP_IDS) return;
    for (int i = 0; i < p->n_stop_ids; i++)
        if (p->stop_ids[i] == id) return;
    p->stop_ids[p->n_stop_ids++] = id;
}

int cmd_chat(int argc, char **argv) {
    const char *model = NULL, *system = NULL, *hist = NULL, *dq = NULL, *dv = NULL;
    int depth = -1, hide = 0, no_thinking = 0, no_hist = 0, seed_set = 0;
    long ctx = 0, l;
    uint64_t seed = 0;
    gen_params flags;
    gen_params_default(&flags);
    unsigned set = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int r = cli_sampler_flag("chat", argc, argv, &i, &flags, &set);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--hide-thinking")) hide = 1;
        else if (!strcmp(a, "--no-thinking")) no_thinking = 1;
        else if (!strcmp(a, "--no-history")) no_hist = 1;
        else if (v && !strcmp(a, "--model")) model = argv[++i];
        else if (v && !strcmp(a, "--system")) system = argv[++i];
        else if (v && !strcmp(a, "--history")) hist = argv[++i];
        else if (v && !strcmp(a, "--draft-quant")) dq = argv[++i];
        else if (v && !strcmp(a, "--draft-vocab")) dv = argv[++i];
        else if (!strcmp(a, "--depth")) {
            if (cli_parse_long("chat", a, v, 0, GEN_MAX_DEPTH, &l)) return 2;
            depth = (int)l, i++;
        } else if (!strcmp(a, "--ctx")) {
            if (cli_parse_long("chat", a, v, 2, 1 << 24, &ctx)) return 2;
            i++;
        } else if (!strcmp(a, "--seed")) {
            if (cli_parse_u64("chat", a, v, &seed)) return 2;
            if (seed > (1ull << 63) - 1) {
                cli_error("chat", "--seed must be < 2^63");
                return 2;
            }
            seed_set = 1, i++;
        } else {
            cli_error("chat", "unknown or incomplete option '%s' (see mtplx chat --help)", a);
            return 2;
        }
    }
    if (!model) model = cli_default_model();

    chat_state cs = {.thinking = !no_thinking, .hide_thinking = hide, .tty = isatty(0) && isatty(1), .seed_set = seed_set};
    cs.info = cs.tty ? stdout : stderr;
    mtplx_err err = {0};
    int rc = 1;
    line_editor le = {0};
    cli_progress pr;
    cli_progress_start(&pr, "load", "layers", 1.0, 1);
    progress_sink sink = cli_progress_sink(&pr);
    int lrc = model_load_progress(model, &sink, &cs.m, &err);
    cli_progress_finish(&pr, lrc == 0);
    if (lrc) {
        cli_error("chat", "%s", err.msg);
        return 1;
    }
    cli_load_note("chat", cs.m);
    if (cli_draft_vocab("chat", cs.m, model, dv, &rc) || cli_draft_quant("chat", cs.m, dq, &rc)) goto out;
    rc = 1;
    if (tok_load(model, &cs.tok, &err) || tok_cover_vocab(cs.tok, model_config_of(cs.m)->vocab_size, &err) ||
        chat_template_load(model, &cs.ct, &err) || gen_params_from_model(cs.m, &cs.p, &err) ||
        gen_session_new(cs.m, &cs.s, &err)) {
        cli_error("chat", "%s", err.msg);
        goto out;
    }
    cli_sampler_apply(&cs.p, &flags, set);
    cs.max_tokens_set = (set & CLI_SET_MAX_TOKENS) != 0;
    const tok_config *tc = tok_get_config(cs.tok);
    add_stop(&cs.p, tc->eos_id);
    add_stop(&cs.p, tok_token_to_id(cs.tok, "<|im_end|>", 10));
    add_stop(&cs.p, tok_token_to_id(cs.tok, "<|endoftext|>", 13));
    cli_depth_default(model, model_has_mtp(cs.m), set, &depth, &cs.p);
    if (depth > 0 && !model_has_mtp(cs.m)) {
        cli_error("chat", "--depth %d needs a model with an MTP head; this one has none (use --depth 0)", depth);
        rc = 2;
        goto out;
    }
    cs.p.depth = depth;
    cs.p.seed = seed;
    const model_config *mc = model_config_of(cs.m);
    cs.vocab = mc->vocab_size;
    int trained = mc->max_position_embeddings > 0 ? mc->max_position_embeddings : CHAT_DEFAULT_CTX;
    cs.ctx = ctx ? (int)ctx : trained < CHAT_DEFAULT_CTX ? trained : CHAT_DEFAULT_CTX;
    gen_session_set_context(cs.s, cs.ctx);
    gen_params probe = cs.p;
    if (!cs.max_tokens_set) probe.max_tokens = 1;
    if (gen_params_validate(&probe, cs.vocab, &err)) {
        cli_error("chat", "%s", err.msg);
        rc = 2;
        goto out;
    }
    cs.messages = json_array();
    cs.system = system ? strdup(system) : NULL;
    char hpath[4096] = "";
    if (!no_hist) {
        if (hist) snprintf(hpath, sizeof hpath, "%s", hist);
        else default_history(hpath, sizeof hpath);
    }
    if (le_init(&le, hpath[0] ? hpath : NULL)) {
        cli_error("chat", "out of memory");
        goto out;
    }
    if (cs.tty)
        printf("mtplx chat — %s (depth %d, ctx %d). /help lists commands; Ctrl-C stops an answer, Ctrl-D quits.\n",
               model, cs.p.depth, cs.ctx);
    for (;;) {
        int intr;
        char *msg = read_message(&le, cs.tty, &intr);
        if (!msg) {
            if (intr) continue;
            break;
        }
        size_t n = strspn(msg, " \t\n");
        if (!msg[n]) {
            free(msg);
            continue;
        }
        le_history_add(&le, msg);
        if (msg[0] == '/' && !strchr(msg, '\n')) {
            int quit = run_command(&cs, msg);
            free(msg);
            if (quit) break;
            continue;
        }
        json_array_append_new(cs.messages, json_pack("{s:s,s:s}", "role", "user", "content", msg));
        free(msg);
        answer(&cs);
    }
    rc = 0;
out:
    le_free(&le);
    json_decref(cs.messages);
    free(cs.system);
    gen_session_free(cs.s);
    if (cs.ct) chat_template_free(cs.ct);
    if (cs.tok) tok_free(cs.tok);
    if (cs.m) model_free(cs.m);
    return rc;
}
