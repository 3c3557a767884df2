/* backend_model.h — the server backend on a checkpoint directory (model, tokenizer, template). */
#ifndef MTPLX_SERVER_BACKEND_MODEL_H
#define MTPLX_SERVER_BACKEND_MODEL_H

#include "backend.h"

/* Load dir (weights, tokenizer, chat template, generation_config) into *out. ctx: context tokens
 * wanted (0 = min(checkpoint maximum, 8192)); never more than the checkpoint's maximum. Returns 0
 * or an error naming what failed to load. */
int backend_model_open(const char *dir, int ctx, srv_backend *out, mtplx_err *err);
void backend_model_close(srv_backend *be);

#endif
