/* gen_config.h — a model's generation defaults (generation_config.json) as gen_params. */
#ifndef MTPLX_ENGINE_GEN_CONFIG_H
#define MTPLX_ENGINE_GEN_CONFIG_H

#include "generate.h"

/* Start from gen_params_default, then apply <model dir>/generation_config.json when present
 * (temperature, top_p, top_k, min_p, repetition_penalty; do_sample false -> temperature 0) and set
 * the stop ids to the model's EOS ids. A value of the wrong type or out of range is EBADFILE naming
 * the file and field. Returns 0 or an error. */
int gen_params_from_model(const mtplx_model *m, gen_params *p, mtplx_err *err);

#endif
