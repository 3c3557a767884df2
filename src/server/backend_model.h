/* backend_model.h — the server backend on a checkpoint directory (model, tokenizer, template). */
#ifndef MTPLX_SERVER_BACKEND_MODEL_H
#define MTPLX_SERVER_BACKEND_MODEL_H

#include "backend.h"

/* How many generations run at once and the memory they share (src/engine/sched.h). */
typedef struct {
    int ctx;             /* context tokens wanted (0 = min(checkpoint maximum, 8192)) */
    int max_seqs;        /* generations at once (0 = 4) */
    int max_batch_rows;  /* rows per merged forward (0 = the scheduler's default) */
    int kv_pages;        /* KV cache pages (0 = max_seqs sequences of the whole context) */
    int prefill_chunk;   /* prompt rows of one sequence per forward (0 = the scheduler's default) */
    int knee_rows;       /* the depth policy's knee (0 = the scheduler's default, sched.h) */
    long cache_ram_mb;   /* prefix cache RAM budget in MiB (0 = the default, < 0 = no prefix cache) */
    const char *cache_dir;   /* the prefix cache's disk tier (NULL = none) */
    size_t cache_disk_bytes; /* its byte budget (0 = the default) */
    int draft_vocab;     /* draft head over this many most common ids (tok_common_ids); 0 = full */
    const char *draft_quant; /* the draft's quantization, a --draft-quant spec (draft_quant_parse);
                                NULL = DRAFT_QUANT_DEFAULT, as run / chat / bench use */
} srv_model_opts;

/* Load dir (weights, tokenizer, chat template, generation_config) into *out, with a scheduler for
 * o->max_seqs concurrent generations. Returns 0 or an error naming what failed to load. */
int backend_model_open(const char *dir, const srv_model_opts *o, srv_backend *out, mtplx_err *err);
void backend_model_close(srv_backend *be);

#endif
