/* server.h — the OpenAI- and Anthropic-compatible HTTP server (libmicrohttpd, thread per
 * connection) in front of one model-owner worker thread.
 *
 * Requests are validated and tokenised on their HTTP thread, then queued FIFO (bounded) for the
 * worker, which runs one generation at a time and pushes the formatted output (SSE frames or the
 * final result) to the request's channel. A client that disconnects cancels its generation at the
 * next engine cycle. See docs/server.md for routes, limits and error shapes. */
#ifndef MTPLX_SERVER_SERVER_H
#define MTPLX_SERVER_SERVER_H

#include <stddef.h>

#include "../base/err.h"
#include "backend.h"

typedef struct {
    const char *host;         /* bind address (IPv4/IPv6 literal or name); loopback unless api_key */
    int         port;         /* 0 = any free port (see server_port) */
    const char *api_key;      /* NULL or "" = no authentication */
    int         max_queue;    /* waiting requests at most; more get 429 (> 0) */
    size_t      max_body;     /* request body bytes at most; more get 413 */
    int         depth;        /* default MTP depth; -1 = the backend's default */
    float       min_conf;     /* its adaptive threshold (draft_min_conf) for requests that set no depth; < 0:
                                 the backend's with its depth, 0 (a fixed depth) with a depth given here */
    int         ctx;          /* context tokens; 0 = the backend's */
    int         max_tokens;   /* completion tokens at most per request (a larger ask is lowered); 0 = no cap */
    float       temperature;  /* default temperature for requests that send none; < 0 = the model's */
    int         quiet;        /* 1: no per-request log lines on stderr */
    int         max_connections;        /* open client connections at most (one thread each); more wait in the listen backlog */
    int         max_connections_per_ip; /* per client address; 0 = no per-address limit */
    int         idle_timeout;           /* seconds a connection may stay silent (no bytes either way); 0 = none */
    const char *sse_trace;    /* a file for the delivery trace (internal.h, srv_trace); NULL = none;
                               * server_config_default takes $MTPLX_SSE_TRACE */
} srv_config;

/* Neutral defaults: 127.0.0.1:8000, no key, queue 128, body 8 MiB, depth -1, ctx 0, 1024 connections
 * (no per-address limit), 60 s idle timeout, the delivery trace from $MTPLX_SSE_TRACE. */
void server_config_default(srv_config *c);

/* 1 when host names a loopback address ("localhost", 127.x.y.z, ::1). */
int server_host_is_loopback(const char *host);

typedef struct srv_server srv_server;

/* Validate cfg, bind and start serving with backend be (borrowed; must outlive the server).
 * Refuses a non-loopback host without an API key (EINVAL). Returns 0 and *out, or an error. */
int server_start(const srv_config *cfg, srv_backend *be, srv_server **out, mtplx_err *err);
/* The bound TCP port. */
int server_port(const srv_server *s);

/* The depth and adaptive threshold (draft_min_conf, 0 = a fixed depth) of requests that set no depth,
 * as the server resolved them from its config and the backend's defaults. */
void server_default_depth(const srv_server *s, int *depth, float *min_conf);
/* Start a graceful shutdown: stop accepting connections (connects are refused) and answer new
 * requests on open connections with 503; requests already received run on. */
void server_drain_begin(srv_server *s);
/* Requests received and not yet completed (0 once a drain has finished). */
int server_inflight(srv_server *s);
/* Stop accepting, cancel queued and running generations, join all threads, free everything. */
void server_stop(srv_server *s);

#endif
