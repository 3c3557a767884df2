/* gen_cli.h — argument parsing and prompt helpers shared by `mtplx run`, `bench` and `tune`. */
#ifndef MTPLX_CLI_GEN_CLI_H
#define MTPLX_CLI_GEN_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "../engine/generate.h"
#include "../tokenizer/tokenizer.h"

/* Strict number parsing of flag values; on failure print "mtplx <cmd>: <flag> ..." and return -1. */
int cli_parse_long(const char *cmd, const char *flag, const char *s, long lo, long hi, long *out);
int cli_parse_float(const char *cmd, const char *flag, const char *s, float *out);
int cli_parse_u64(const char *cmd, const char *flag, const char *s, uint64_t *out);

/* "1,2,3" -> heap ids (caller frees). Returns 0 or -1 with a message. */
int cli_parse_ids(const char *cmd, const char *flag, const char *s, int32_t **ids, int *n);

/* Sampler/length flags common to run, bench and tune (--temperature, --top-p, --top-k, --min-p,
 * --presence-penalty, --frequency-penalty, --repetition-penalty, --max-tokens, --draft-min-conf). If argv[*i] is one
 * of them, parse its value into p (advancing *i), mark it in *set (CLI_SET_* bits; may be NULL) and
 * return 1; return 0 when it is not one; -1 on a bad value (message printed). */
enum {
    CLI_SET_TEMPERATURE = 1 << 0, CLI_SET_TOP_P = 1 << 1, CLI_SET_TOP_K = 1 << 2, CLI_SET_MIN_P = 1 << 3,
    CLI_SET_PRESENCE = 1 << 4, CLI_SET_FREQUENCY = 1 << 5, CLI_SET_REPETITION = 1 << 6, CLI_SET_MAX_TOKENS = 1 << 7,
    CLI_SET_DRAFT_MIN_CONF = 1 << 8
};
int cli_sampler_flag(const char *cmd, int argc, char **argv, int *i, gen_params *p, unsigned *set);
/* Copy into dst the fields of flags that the user typed (the bits of set), whatever their value: a
 * flag equal to the built-in default still overrides the model's generation_config. */
void cli_sampler_apply(gen_params *dst, const gen_params *flags, unsigned set);

/* One entry "D" or "D@X" of a depth list at *p (D in 0..GEN_MAX_DEPTH; X, an adaptive depth's
 * draft_min_conf, in [0, 1)), *p then past it and one following comma. Returns 0 with *depth, *conf (0
 * without @X) and *adaptive (1 with @X); 1 for a bad D, 2 for a bad X, 3 for a stray character (*p at it).
 * `bench --depths` and `tune --adaptive` read their lists with it and word their own errors. */
int cli_depth_entry(const char **p, int *depth, float *conf, int *adaptive);

/* The depth for a generation when the user typed none (*depth < 0): `mtplx tune`'s saved choice for this
 * model and device (with its adaptive threshold), else the engine's default (GEN_DEFAULT_DEPTH with
 * GEN_DEFAULT_MIN_CONF, generate.h); 0 for a model without an MTP head. The threshold goes into
 * p->draft_min_conf unless --draft-min-conf was typed (set & CLI_SET_DRAFT_MIN_CONF). A typed --depth is
 * kept as it is (a fixed depth unless the flag says). */
void cli_depth_default(const char *model_dir, int has_mtp, unsigned set, int *depth, gen_params *p);
#define CLI_SAMPLER_HELP                                                                              \
    "  --max-tokens N            completion tokens at most\n"                                        \
    "  --temperature T           0 = greedy (default: generation_config.json, else 1)\n"            \
    "  --top-p P                 nucleus, in (0, 1]\n"                                              \
    "  --top-k K                 0 = off\n"                                                         \
    "  --min-p P                 in [0, 1), 0 = off\n"                                              \
    "  --presence-penalty X      in [-2, 2] (OpenAI formula over completion tokens)\n"              \
    "  --frequency-penalty X     in [-2, 2]\n"                                                      \
    "  --repetition-penalty X    > 0, 1 = off (prompt and completion tokens)\n"                     \
    "  --draft-min-conf X        in [0, 1), 0 = off: adaptive depth, stop drafting a cycle once the\n" \
    "                            product of the drafts' own probabilities q(y) falls below X\n"

/* n prompts of about `target_tokens` tokens cut at line starts spread evenly through a text: `file`
 * (--prompts-file) when not NULL, else <model_dir>/val_code.txt, else (a checkpoint that ships none,
 * said on stderr) the embedded model's val_code.txt installed beside the binary. The path used goes
 * to src_path (n bytes) when not NULL. *prompts[i] heap arrays (free with cli_free_prompts). Returns 0
 * or -1 with a message. */
int cli_bench_prompts(const char *cmd, const char *model_dir, const char *file, const tokenizer *tok, int n,
                      int target_tokens, int32_t ***prompts, int **lens, char *src_path, size_t src_n);
#define CLI_PROMPTS_FILE_HELP                                                                        \
    "  --prompts-file F  text the prompts are cut from (default: the model directory's\n"            \
    "                    val_code.txt, else the embedded model's code sample)\n"
void cli_free_prompts(int32_t **prompts, int *lens, int n);

/* --draft-quant SPEC: "q4" (default: q4 group 64 LM head + MTP layer), "q8", "q4-head", "q8-head"
 * (head only) or "none"; a ":32", ":64" or ":128" suffix sets the group size. Applies model_quantize_draft to m when it has an MTP head. Returns 0, or
 * -1 with a message (2 = usage error, 1 = runtime error in *code). */
int cli_draft_quant(const char *cmd, mtplx_model *m, const char *spec, int *code);
/* Prints the model's load note (model_load_note), when it has one, as "mtplx CMD: note: ..." on stderr. */
void cli_load_note(const char *cmd, const mtplx_model *m);
#define CLI_DRAFT_QUANT_HELP                                                                         \
    "  --draft-quant Q           draft-only copy: q4 (default: LM head + MTP layer, group 64), q8,\n" \
    "                            q4-head, q8-head (LM head only) or none; :32/:64/:128 sets the\n"  \
    "                            group size (q4:128); p is never quantized\n"

/* --draft-vocab N: the draft head covers only the N ids the tokenizer ranks most common
 * (tok_common_ids: added tokens, byte alphabet, merges by rank), so q = 0 elsewhere and a draft step
 * reads N instead of V rows of the LM head; 0 (or N >= V) = the full vocabulary. spec NULL = the
 * default. Loads <model_dir>/tokenizer.json for the ranking (without one: ids 0..N-1, with a note).
 * Apply BEFORE cli_draft_quant (which then quantizes only the subset). Returns 0 or -1 with a message (*code 2 = usage, 1 = runtime error). */
#define CLI_DRAFT_VOCAB_DEFAULT "0"
int cli_draft_vocab(const char *cmd, mtplx_model *m, const char *model_dir, const char *spec, int *code);
#define CLI_DRAFT_VOCAB_HELP                                                                         \
    "  --draft-vocab N           draft head over the N most common token ids only (merge order of\n" \
    "                            tokenizer.json; q = 0 outside, output law unchanged); 0 = full\n"   \
    "                            vocabulary (default " CLI_DRAFT_VOCAB_DEFAULT ")\n"

/* The commit this binary was built from, as `git describe --always --dirty` gave it at build time
 * ("unknown" when built outside a git checkout): a static string (version.c). */
const char *cli_build_commit(void);

#endif
