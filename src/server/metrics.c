/* metrics.c — server counters and their Prometheus text exposition (format 0.0.4). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/clock.h"
#include "internal.h"

static const char *EP_NAMES[EP_COUNT] = {"chat_completions", "completions", "messages", "count_tokens", "responses", "models", "health", "metrics", "other"};
static const int ERR_CODES[8] = {400, 401, 404, 405, 413, 429, 500, 503};

void metrics_init(srv_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    m->started = clock_now();
}

void metrics_request(srv_metrics *m, int endpoint) {
    pthread_mutex_lock(&m->mu);
    m->requests[endpoint >= 0 && endpoint < EP_COUNT ? endpoint : EP_OTHER]++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_status(srv_metrics *m, int status) {
    pthread_mutex_lock(&m->mu);
    if (status >= 200 && status < 600) m->status[status / 100]++;
    for (int i = 0; i < 8; i++)
        if (ERR_CODES[i] == status) m->errors_by_code[i]++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_generation(srv_metrics *m, const gen_stats *st, int cancelled, int stop_hit, int n_calls) {
    pthread_mutex_lock(&m->mu);
    m->generations++;
    m->cancelled += cancelled != 0;
    m->stop_hits += stop_hit != 0;
    m->tool_calls += (uint64_t)n_calls;
    m->prompt_tokens += (uint64_t)st->prompt_tokens;
    m->completion_tokens += (uint64_t)st->completion_tokens;
    m->cycles += (uint64_t)st->cycles;
    m->drafted += (uint64_t)st->drafted;
    m->accepted += (uint64_t)st->accepted;
    for (int d = 0; d < st->depth && d < GEN_MAX_DEPTH; d++) {
        m->accepted_pos[d] += (uint64_t)st->accepted_per_position[d];
        m->cycles_with_pos[d] += (uint64_t)st->cycles;
    }
    m->prefill_s += st->prefill_s;
    m->decode_s += st->decode_s;
    if (st->decode_tok_s > 0) m->last_decode_tok_s = st->decode_tok_s;
    if (st->prefill_tok_s > 0) m->last_prefill_tok_s = st->prefill_tok_s;
    pthread_mutex_unlock(&m->mu);
}

#define HDR(b, name, type, help) sbuf_printf(b, "# HELP " name " " help "\n# TYPE " name " " type "\n")

/* The scheduler's gauges and counters (src/engine/sched.h). */
static void metrics_render_sched(sbuf *b, srv_backend *be) {
    sched_stats st;
    be->sched_stats(be->impl, &st);
    HDR(b, "mtplx_sequences_running", "gauge", "Sequences admitted to the scheduler (generating).");
    sbuf_printf(b, "mtplx_sequences_running %d\n", st.running);
    HDR(b, "mtplx_sequences_waiting", "gauge", "Sequences waiting for a slot or KV pages.");
    sbuf_printf(b, "mtplx_sequences_waiting %d\n", st.waiting);
    HDR(b, "mtplx_sequence_slots", "gauge", "Sequences that may generate at once (--max-seqs).");
    sbuf_printf(b, "mtplx_sequence_slots %d\n", be->n_slots);
    HDR(b, "mtplx_forwards_total", "counter", "Merged forwards run (trunk and MTP).");
    sbuf_printf(b, "mtplx_forwards_total %llu\n", (unsigned long long)st.forwards);
    HDR(b, "mtplx_forward_rows_total", "counter", "Rows carried by merged forwards.");
    sbuf_printf(b, "mtplx_forward_rows_total %llu\n", (unsigned long long)st.rows);
    HDR(b, "mtplx_forward_sequences_total", "counter", "Sequence parts carried by merged forwards.");
    sbuf_printf(b, "mtplx_forward_sequences_total %llu\n", (unsigned long long)st.seq_parts);
    HDR(b, "mtplx_rows_per_forward", "gauge", "Mean rows per merged forward since start.");
    sbuf_printf(b, "mtplx_rows_per_forward %.3f\n", st.forwards ? (double)st.rows / (double)st.forwards : 0.0);
    HDR(b, "mtplx_kv_pages_used", "gauge", "KV cache pages held by sequences.");
    sbuf_printf(b, "mtplx_kv_pages_used %d\n", st.pages_used);
    HDR(b, "mtplx_kv_pages_free", "gauge", "KV cache pages free.");
    sbuf_printf(b, "mtplx_kv_pages_free %d\n", st.pages_total - st.pages_used);
    HDR(b, "mtplx_kv_pages_reserved", "gauge", "KV cache pages promised to running sequences (their worst case).");
    sbuf_printf(b, "mtplx_kv_pages_reserved %d\n", st.pages_reserved);
}

/* The prefix cache's counters and gauges (src/engine/prefix_cache.h). */
static void metrics_render_cache(sbuf *b, srv_backend *be) {
    prefix_cache_stats c;
    be->cache_stats(be->impl, &c);
    HDR(b, "mtplx_prefix_cache_lookups_total", "counter", "Requests that looked up the prefix cache.");
    sbuf_printf(b, "mtplx_prefix_cache_lookups_total %llu\n", (unsigned long long)c.lookups);
    HDR(b, "mtplx_prefix_cache_hits_total", "counter", "Requests that restored a cached prefix.");
    sbuf_printf(b, "mtplx_prefix_cache_hits_total %llu\n", (unsigned long long)c.hits);
    HDR(b, "mtplx_prefix_cache_hit_rate", "gauge", "Hits per lookup since start.");
    sbuf_printf(b, "mtplx_prefix_cache_hit_rate %.6f\n", c.lookups ? (double)c.hits / (double)c.lookups : 0.0);
    HDR(b, "mtplx_prefix_cache_prompt_tokens_total", "counter", "Prompt tokens of the requests that looked.");
    sbuf_printf(b, "mtplx_prefix_cache_prompt_tokens_total %llu\n", (unsigned long long)c.prompt_tokens);
    HDR(b, "mtplx_prefix_cache_cached_tokens_total", "counter", "Prompt tokens restored from the cache (prefill saved).");
    sbuf_printf(b, "mtplx_prefix_cache_cached_tokens_total %llu\n", (unsigned long long)c.cached_tokens);
    HDR(b, "mtplx_prefix_cache_entries", "gauge", "Checkpoints held.");
    sbuf_printf(b, "mtplx_prefix_cache_entries %d\n", c.entries);
    HDR(b, "mtplx_prefix_cache_evictions_total", "counter", "Checkpoints evicted (RAM budget or KV pages).");
    sbuf_printf(b, "mtplx_prefix_cache_evictions_total %llu\n", (unsigned long long)c.evictions);
    HDR(b, "mtplx_prefix_cache_bytes", "gauge", "Bytes held by tier: ram = recurrent-state copies, kv = KV pages referenced.");
    sbuf_printf(b, "mtplx_prefix_cache_bytes{tier=\"ram\"} %zu\n", c.ram_bytes);
    sbuf_printf(b, "mtplx_prefix_cache_bytes{tier=\"kv\"} %zu\n", (size_t)c.pages_held * c.page_bytes);
    if (c.disk) sbuf_printf(b, "mtplx_prefix_cache_bytes{tier=\"disk\"} %zu\n", c.disk_bytes);
    HDR(b, "mtplx_prefix_cache_budget_bytes", "gauge", "RAM budget of the recurrent-state copies (--cache-ram).");
    sbuf_printf(b, "mtplx_prefix_cache_budget_bytes %zu\n", c.ram_budget);
    HDR(b, "mtplx_prefix_cache_kv_pages_held", "gauge", "KV pages (trunk pool) the cache's checkpoints reference.");
    sbuf_printf(b, "mtplx_prefix_cache_kv_pages_held %d\n", c.pages_held);
    HDR(b, "mtplx_prefix_cache_kv_pages", "gauge", "KV pages the cache counts against --kv-pages (referenced or lent).");
    sbuf_printf(b, "mtplx_prefix_cache_kv_pages %d\n", c.pages_counted);
    if (c.disk) { /* the disk tier (--cache-dir) */
        HDR(b, "mtplx_prefix_cache_disk_on", "gauge", "1 while the disk tier works; 0 when --cache-dir could not be used or a write error turned it off.");
        sbuf_printf(b, "mtplx_prefix_cache_disk_on %d\n", c.disk_on);
        HDR(b, "mtplx_prefix_cache_disk_files", "gauge", "Checkpoint files in --cache-dir.");
        sbuf_printf(b, "mtplx_prefix_cache_disk_files %d\n", c.disk_files);
        HDR(b, "mtplx_prefix_cache_disk_marked", "gauge", "Conversations marked for disk, written once no request runs.");
        sbuf_printf(b, "mtplx_prefix_cache_disk_marked %d\n", c.disk_marked);
        HDR(b, "mtplx_prefix_cache_disk_budget_bytes", "gauge", "Byte budget of the files (--cache-disk).");
        sbuf_printf(b, "mtplx_prefix_cache_disk_budget_bytes %zu\n", c.disk_budget);
        HDR(b, "mtplx_prefix_cache_disk_hits_total", "counter", "Requests that restored a checkpoint from disk.");
        sbuf_printf(b, "mtplx_prefix_cache_disk_hits_total %llu\n", (unsigned long long)c.disk_hits);
        HDR(b, "mtplx_prefix_cache_disk_writes_total", "counter", "Checkpoint files written.");
        sbuf_printf(b, "mtplx_prefix_cache_disk_writes_total %llu\n", (unsigned long long)c.disk_writes);
        HDR(b, "mtplx_prefix_cache_disk_evictions_total", "counter", "Checkpoint files removed for the disk budget.");
        sbuf_printf(b, "mtplx_prefix_cache_disk_evictions_total %llu\n", (unsigned long long)c.disk_evictions);
        HDR(b, "mtplx_prefix_cache_disk_errors_total", "counter", "Write errors and corrupt, truncated or unreadable files.");
        sbuf_printf(b, "mtplx_prefix_cache_disk_errors_total %llu\n", (unsigned long long)c.disk_errors);
    }
}

char *metrics_render(srv_metrics *m, int queue_waiting, int queue_running, int queue_max) {
    sbuf b = {0};
    pthread_mutex_lock(&m->mu);
    HDR(&b, "mtplx_uptime_seconds", "gauge", "Seconds since the server started.");
    sbuf_printf(&b, "mtplx_uptime_seconds %.3f\n", clock_now() - m->started);
    HDR(&b, "mtplx_requests_total", "counter", "HTTP requests received, by endpoint.");
    for (int i = 0; i < EP_COUNT; i++) sbuf_printf(&b, "mtplx_requests_total{endpoint=\"%s\"} %llu\n", EP_NAMES[i], (unsigned long long)m->requests[i]);
    HDR(&b, "mtplx_responses_total", "counter", "HTTP responses sent, by status class.");
    for (int c = 2; c <= 5; c++) sbuf_printf(&b, "mtplx_responses_total{class=\"%dxx\"} %llu\n", c, (unsigned long long)m->status[c]);
    HDR(&b, "mtplx_errors_total", "counter", "Error responses, by HTTP status.");
    for (int i = 0; i < 8; i++) sbuf_printf(&b, "mtplx_errors_total{status=\"%d\"} %llu\n", ERR_CODES[i], (unsigned long long)m->errors_by_code[i]);
    HDR(&b, "mtplx_generations_total", "counter", "Generations run by the worker.");
    sbuf_printf(&b, "mtplx_generations_total %llu\n", (unsigned long long)m->generations);
    HDR(&b, "mtplx_generations_cancelled_total", "counter", "Generations cancelled because the client went away.");
    sbuf_printf(&b, "mtplx_generations_cancelled_total %llu\n", (unsigned long long)m->cancelled);
    HDR(&b, "mtplx_stop_sequence_hits_total", "counter", "Generations ended by a stop string.");
    sbuf_printf(&b, "mtplx_stop_sequence_hits_total %llu\n", (unsigned long long)m->stop_hits);
    HDR(&b, "mtplx_tool_calls_total", "counter", "Tool calls parsed from model output.");
    sbuf_printf(&b, "mtplx_tool_calls_total %llu\n", (unsigned long long)m->tool_calls);
    HDR(&b, "mtplx_prompt_tokens_total", "counter", "Prompt tokens prefilled.");
    sbuf_printf(&b, "mtplx_prompt_tokens_total %llu\n", (unsigned long long)m->prompt_tokens);
    HDR(&b, "mtplx_completion_tokens_total", "counter", "Completion tokens generated.");
    sbuf_printf(&b, "mtplx_completion_tokens_total %llu\n", (unsigned long long)m->completion_tokens);
    HDR(&b, "mtplx_decode_seconds_total", "counter", "Seconds spent decoding.");
    sbuf_printf(&b, "mtplx_decode_seconds_total %.6f\n", m->decode_s);
    HDR(&b, "mtplx_prefill_seconds_total", "counter", "Seconds spent in prefill.");
    sbuf_printf(&b, "mtplx_prefill_seconds_total %.6f\n", m->prefill_s);
    HDR(&b, "mtplx_decode_tokens_per_second", "gauge", "Decode speed of the last generation.");
    sbuf_printf(&b, "mtplx_decode_tokens_per_second %.3f\n", m->last_decode_tok_s);
    HDR(&b, "mtplx_prefill_tokens_per_second", "gauge", "Prefill speed of the last generation.");
    sbuf_printf(&b, "mtplx_prefill_tokens_per_second %.3f\n", m->last_prefill_tok_s);
    HDR(&b, "mtplx_verify_cycles_total", "counter", "Verify forwards (AR: decode steps).");
    sbuf_printf(&b, "mtplx_verify_cycles_total %llu\n", (unsigned long long)m->cycles);
    HDR(&b, "mtplx_draft_tokens_total", "counter", "MTP draft tokens proposed.");
    sbuf_printf(&b, "mtplx_draft_tokens_total %llu\n", (unsigned long long)m->drafted);
    HDR(&b, "mtplx_draft_accepted_total", "counter", "MTP draft tokens accepted.");
    sbuf_printf(&b, "mtplx_draft_accepted_total %llu\n", (unsigned long long)m->accepted);
    HDR(&b, "mtplx_draft_accepted_by_position_total", "counter", "Cycles whose draft at this depth position was accepted.");
    for (int d = 0; d < GEN_MAX_DEPTH; d++)
        if (m->cycles_with_pos[d])
            sbuf_printf(&b, "mtplx_draft_accepted_by_position_total{position=\"%d\"} %llu\n", d + 1, (unsigned long long)m->accepted_pos[d]);
    HDR(&b, "mtplx_acceptance_rate", "gauge", "Accepted fraction of cycles at each depth position, since start.");
    for (int d = 0; d < GEN_MAX_DEPTH; d++)
        if (m->cycles_with_pos[d])
            sbuf_printf(&b, "mtplx_acceptance_rate{position=\"%d\"} %.6f\n", d + 1, (double)m->accepted_pos[d] / (double)m->cycles_with_pos[d]);
    pthread_mutex_unlock(&m->mu);
    HDR(&b, "mtplx_queue_waiting", "gauge", "Requests waiting for the worker.");
    sbuf_printf(&b, "mtplx_queue_waiting %d\n", queue_waiting);
    HDR(&b, "mtplx_queue_running", "gauge", "Requests taken by a worker (generating or waiting for KV pages).");
    sbuf_printf(&b, "mtplx_queue_running %d\n", queue_running);
    HDR(&b, "mtplx_queue_capacity", "gauge", "Waiting requests allowed before 429.");
    sbuf_printf(&b, "mtplx_queue_capacity %d\n", queue_max);
    if (m->be && m->be->sched_stats) metrics_render_sched(&b, m->be);
    if (m->be && m->be->cache_stats) metrics_render_cache(&b, m->be);
    return sbuf_take(&b);
}
