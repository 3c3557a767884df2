/* internal.h — types shared by the server's files (not a public interface). */
#ifndef MTPLX_SERVER_INTERNAL_H
#define MTPLX_SERVER_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "../base/sbuf.h"
#include "../chat/reasoning.h"
#include "../chat/toolcall.h"
#include "../engine/constraint.h"
#include "server.h"

#define SRV_MAX_STOPS 4

typedef enum { API_CHAT = 0, API_COMPLETIONS, API_MESSAGES, API_RESPONSES } srv_api;

/* ---- metrics (metrics.c) ---- */

enum { EP_CHAT, EP_COMPLETIONS, EP_MESSAGES, EP_COUNT_TOKENS, EP_RESPONSES, EP_MODELS, EP_HEALTH, EP_METRICS, EP_OTHER, EP_COUNT };

typedef struct {
    pthread_mutex_t mu;
    double   started;                       /* clock_now() at start */
    uint64_t requests[EP_COUNT];            /* requests received per endpoint */
    uint64_t status[6];                     /* responses by status class: [2]=2xx ... [5]=5xx */
    uint64_t errors_by_code[8];             /* 400 401 404 405 413 429 500 503 */
    uint64_t generations, cancelled, stop_hits, tool_calls;
    uint64_t prompt_tokens, completion_tokens;
    uint64_t cycles, drafted, accepted;
    uint64_t accepted_pos[GEN_MAX_DEPTH];   /* cycles whose draft at position d+1 was accepted */
    uint64_t cycles_with_pos[GEN_MAX_DEPTH];/* cycles that drafted a token at position d+1 */
    double   prefill_s, decode_s;           /* summed over generations */
    double   last_decode_tok_s, last_prefill_tok_s;
    srv_backend *be;                        /* for the scheduler's gauges (set by queue_start) */
} srv_metrics;

void metrics_init(srv_metrics *m);
void metrics_request(srv_metrics *m, int endpoint);
void metrics_status(srv_metrics *m, int status);
void metrics_generation(srv_metrics *m, const gen_stats *st, int cancelled, int stop_hit, int n_calls);
/* Prometheus text exposition (caller frees). */
char *metrics_render(srv_metrics *m, int queue_waiting, int queue_running, int queue_max);

/* ---- one request ---- */

typedef struct srv_job srv_job;

/* The delivery trace ($MTPLX_SSE_TRACE, srv_config.sse_trace): one line per stream event, "t_ms kind job
 * bytes", t_ms = clock_now() in ms (the clock of the scheduler's step trace, whose header gives its own
 * origin), kind 'f' when the worker hands a stream's bytes to its HTTP thread, 'w' when that thread
 * gives them to the socket; job: the request's number in this server. Tells a client's delivery
 * gap apart: no step (the step trace), the worker's hand-off ('f'), or the socket and the client ('w').
 * One sink per server; NULL fp: off. */
typedef struct {
    FILE           *fp;
    pthread_mutex_t mu; /* one line at a time */
} srv_trace;

/* Appends one event line to t (no-op when t or t->fp is NULL). */
void srv_trace_event(srv_trace *t, char kind, unsigned long job, size_t bytes);

typedef struct {
    char  *id;            /* tool call id */
    char  *name;
    char  *arguments;     /* compact JSON object text */
} srv_call;

struct srv_job {
    /* set by the HTTP thread before queueing; read-only afterwards */
    srv_api     api;
    int         stream;
    int         include_usage;    /* OpenAI stream_options.include_usage */
    int         start_in_reasoning;
    int         split_reasoning;  /* chat/messages: 1; completions: 0 */
    int         hide_reasoning;   /* Anthropic thinking.display "omitted": thinking blocks without text */
    json_t     *tools;            /* OpenAI-shape tools (owned) or NULL: enables tool-call parsing */
    char       *stops[SRV_MAX_STOPS];
    int         n_stops;
    int32_t    *prompt;
    int         n_prompt;
    gen_params  params;
    char        id[64];           /* chatcmpl-… / cmpl-… / msg_… */
    long long   created;
    const char *model_id;
    int         conn_fd;          /* client socket, polled for hang-up; -1 unknown */
    srv_trace  *trace;            /* the server's delivery trace (borrowed), or NULL */
    unsigned long trace_id;       /* this request's number in the trace */
    grammar    *grammar;          /* structured output (structured.c), owned; NULL = unconstrained */
    int         think_budget;     /* thinking tokens before the answer is forced; -1 = no budget */
    grammar_matcher *matcher;     /* per-request automaton state; params.constraint points at con */
    gen_constraint con;

    /* worker-only state while generating */
    void             *decoder;
    reasoning_parser  rp;
    toolcall_parser   tp;
    sbuf              utf8_hold;  /* incomplete trailing UTF-8 sequence */
    sbuf              stop_hold;  /* content that could still be the start of a stop string */
    int               stop_hit;   /* index+1 of the matched stop string, 0 = none */
    int               role_sent;
    int               block_open; /* Anthropic: type of the open block: 0 none, 1 thinking, 2 text */
    int               n_blocks;   /* Anthropic: blocks opened so far; Responses: output items */
    int               resp_seq;   /* Responses: next sequence_number */
    char              resp_item_id[96]; /* Responses: id of the open reasoning/message item */
    sbuf              resp_text;  /* Responses: text of the open item so far */
    json_t           *resp_items; /* Responses stream: the finished output items, as streamed (or NULL) */
    sbuf              stage;      /* formatted bytes produced during one callback */
    int               n_completion;

    /* result (non-stream responses, and finish data for streams) */
    sbuf        content, reasoning;
    srv_call   *calls;
    int         n_calls, cap_calls;
    gen_stats   stats;
    const char *finish;           /* API-neutral: "stop", "length", "tool_calls", "error" */
    mtplx_err   err;              /* set when generation failed */
    int         failed;

    /* channel between worker and HTTP thread */
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    sbuf        out;              /* bytes ready to send (stream) */
    int         started;          /* worker picked it up */
    int         done;             /* worker finished; result complete */
    int         cancelled;        /* client gone or server stopping */
    int         cancelled_before_done; /* cancelled was set before the worker finished (a real cancel) */
    int         refs;             /* HTTP side + queue/worker */
    srv_job    *next;             /* queue link */
};

srv_job *job_new(void);
void job_unref(srv_job *j);      /* frees at zero */
void job_cancel(srv_job *j);

/* ---- the worker and its queue (queue.c) ---- */

typedef struct srv_queue srv_queue;

/* One worker thread: it runs the jobs it takes as generation slot `slot`. */
typedef struct {
    srv_queue *q;
    int        slot;
    pthread_t  thread;
    int        started;
    srv_job   *current;           /* the job it runs (for cancel on stop), or NULL */
} srv_worker;

struct srv_queue {
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    srv_job   *head, *tail;
    int        waiting;           /* jobs queued, not yet started */
    int        running;           /* jobs taken by a worker (0..n_workers) */
    int        max;
    int        stopping;
    srv_worker *workers;          /* [n_workers], one per generation slot of the backend */
    int        n_workers;
    srv_backend *be;
    srv_metrics *metrics;
    int        quiet;
};

int queue_start(srv_queue *q, srv_backend *be, srv_metrics *m, int max, int quiet, mtplx_err *err);
/* Queue j (takes a reference). Returns 0, or -1 when the queue is full or stopping. */
int queue_push(srv_queue *q, srv_job *j);
void queue_stop(srv_queue *q);
void queue_counts(srv_queue *q, int *waiting, int *running);

/* ---- output pipeline (pipeline.c): tokens -> text -> reasoning/content -> stop -> tools ---- */

/* Run the whole generation of j on worker `slot`'s thread; formats output into j's channel. */
void pipeline_run(srv_job *j, srv_backend *be, int slot);

/* ---- formatting (openai.c / anthropic.c) ---- */

/* Streaming events: append formatted frames to j->stage. */
int fmt_begin(srv_job *j);
int fmt_reasoning(srv_job *j, const char *s, size_t n);
int fmt_content(srv_job *j, const char *s, size_t n);
int fmt_tool_call(srv_job *j, const srv_call *c, int index);
int fmt_end(srv_job *j);

int openai_begin(srv_job *j);
int openai_delta(srv_job *j, int is_reasoning, const char *s, size_t n);
int openai_tool_call(srv_job *j, const srv_call *c, int index);
int openai_end(srv_job *j);
int anthropic_begin(srv_job *j);
int anthropic_delta(srv_job *j, int is_reasoning, const char *s, size_t n);
int anthropic_tool_call(srv_job *j, const srv_call *c, int index);
int anthropic_end(srv_job *j);
int responses_begin(srv_job *j);
int responses_delta(srv_job *j, int is_reasoning, const char *s, size_t n);
int responses_tool_call(srv_job *j, const srv_call *c, int index);
int responses_end(srv_job *j);

/* Non-stream bodies from a finished job (caller frees). */
char *openai_chat_body(const srv_job *j);
char *openai_completion_body(const srv_job *j);
char *anthropic_body(const srv_job *j);
char *responses_body(const srv_job *j);
/* usage / stats objects (new references) */
json_t *job_usage_json(const srv_job *j);
json_t *job_stats_json(const srv_job *j);

/* Request parsing: fill j (params, stops, tools, prompt text) from a validated body. On a bad
 * request returns -1 with msg (and *param naming the field). */
typedef struct {
    int  status;          /* HTTP status for the error */
    char msg[512];
    char param[96];
} srv_reqerr;

int openai_parse_chat(const json_t *body, srv_backend *be, srv_job *j, json_t **render_req, int *enable_thinking,
                      srv_reqerr *e);
int openai_parse_completion(const json_t *body, srv_backend *be, srv_job *j, char **prompt_text, srv_reqerr *e);
int anthropic_parse(const json_t *body, srv_backend *be, srv_job *j, json_t **render_req, int *enable_thinking,
                    srv_reqerr *e);
int responses_parse(const json_t *body, srv_backend *be, srv_job *j, json_t **render_req, int *enable_thinking,
                    srv_reqerr *e);
/* structured output (structured.c): parse the request's response format / forced tool choice /
 * thinking budget into j (after j->api and j->tools are set); 0 or -1 with e. Then, once the prompt
 * is rendered (start_in_reasoning known) and j->params are final, attach the matcher: 0 or an error. */
int structured_parse(const json_t *body, srv_backend *be, srv_job *j, srv_reqerr *e);
int structured_attach(srv_backend *be, srv_job *j, mtplx_err *err);
/* Render a parsed chat request (render_req of the parsers above) to prompt text with be's chat
 * template, retrying with later system messages as user turns when the template refuses them
 * (http.c). *prompt malloc'd (caller frees). Returns 0, MTPLX_ETEMPLATE or another error. */
int srv_render_prompt(srv_backend *be, json_t *req, int enable_thinking, char **prompt, mtplx_err *err);
/* shared sampler fields (temperature, top_p, top_k, min_p, penalties, seed, depth) */
int parse_sampling(const json_t *body, srv_backend *be, gen_params *p, srv_reqerr *e);
int reqerr(srv_reqerr *e, int status, const char *param, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Random hex for ids. */
void srv_random_hex(char *out, int n_hex);

#endif
