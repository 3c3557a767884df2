/* tokenizer.h — Hugging Face `tokenizer.json` BPE tokenizer: text <-> token ids, and a streaming
 * detokenizer that only ever emits complete UTF-8.
 *
 * What "exact" means here: encode gives the ids that HF transformers 5.x
 * `AutoTokenizer.from_pretrained(dir).encode(text, add_special_tokens=False)` gives, and decode the
 * text of its `decode(ids, skip_special_tokens=...)`. transformers 5 rebuilds the pipeline of some
 * tokenizer classes named in tokenizer_config.json (`Qwen2Tokenizer`, `LlamaTokenizer[Fast]`, ...)
 * from the class instead of the file; tok_load does the same by default (docs/tokenizer.md lists
 * which). TOK_LOAD_FILE_ONLY uses tokenizer.json exactly as the `tokenizers` library reads it.
 *
 * Pipeline: added tokens are matched first on the raw text (longest match, lstrip/rstrip/
 * single_word/normalized flags), the rest is normalised (NFC, ...), pre-tokenised (regex Split,
 * ByteLevel, Metaspace, Digits, ...), and each piece is BPE-merged by rank.
 *
 * A loaded tokenizer is immutable except for an internal word cache guarded by a mutex, so one
 * tokenizer may be shared by several threads. Nothing here knows about models. */
#ifndef MTPLX_TOKENIZER_TOKENIZER_H
#define MTPLX_TOKENIZER_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "../base/err.h"

typedef struct tokenizer tokenizer;

enum {
    TOK_LOAD_FILE_ONLY = 1u << 0, /* ignore tokenizer_class overrides; tokenizer.json as written */
};

/* Load dir/tokenizer.json and (when present) dir/tokenizer_config.json and dir/chat_template.jinja.
 * Returns 0 and *out (free with tok_free), or an error code with err naming the file and field. */
int tok_load(const char *dir, tokenizer **out, mtplx_err *err);
int tok_load_ex(const char *dir, unsigned flags, tokenizer **out, mtplx_err *err);
void tok_free(tokenizer *t);

/* Encode UTF-8 text (len bytes, need not be NUL-terminated) without inserting special tokens, like
 * HF `encode(text, add_special_tokens=False)`. Special/added tokens written in the text are matched.
 * *ids is malloc'd (caller frees; NULL when *n == 0 is allowed), *n its length.
 * Invalid UTF-8 gives MTPLX_EINVAL naming the byte offset. */
int tok_encode(const tokenizer *t, const char *text, size_t len, int32_t **ids, int *n, mtplx_err *err);

/* Decode ids to text like HF `decode(ids, skip_special_tokens)`. *text is malloc'd and
 * NUL-terminated (caller frees), *len its byte length (may be NULL). An id outside
 * [0, tok_vocab_size) gives MTPLX_ERANGE. Invalid UTF-8 produced by byte tokens becomes U+FFFD. */
int tok_decode(const tokenizer *t, const int32_t *ids, int n, int skip_special, char **text, size_t *len,
               mtplx_err *err);

/* One past the largest id (model vocab and added tokens; after tok_cover_vocab, at least its V). */
int tok_vocab_size(const tokenizer *t);
/* Let the tokenizer accept every id of a model vocabulary of V ids. Real checkpoints pad their
 * embedding past the tokenizer (Qwen3.5: 248,320 rows, 248,077 ids), and the model can sample a
 * padding id; like HF `decode`, such ids (and holes between ids) then decode to no text instead of
 * ERANGE (docs/tokenizer.md, "Ids past the tokenizer"). V <= tok_vocab_size changes nothing.
 * Returns 0 or ENOMEM (t unchanged). */
int tok_cover_vocab(tokenizer *t, int32_t V, mtplx_err *err);
/* Id of the token spelled exactly `s` (len bytes; added tokens first, then the model vocab), or -1. */
int32_t tok_token_to_id(const tokenizer *t, const char *s, size_t len);
/* The token string of id (NUL-terminated, owned by t), or NULL for an unknown id. */
const char *tok_id_to_token(const tokenizer *t, int32_t id);
/* 1 if id is an added token marked "special" (skipped by decode with skip_special), else 0. */
int tok_is_special(const tokenizer *t, int32_t id);
/* 1 if id is any added token (special or not). */
int tok_is_added(const tokenizer *t, int32_t id);
/* The n ids of [0, V) the tokenizer ranks as most common, ascending, into ids[n] (1 <= n <= V): the
 * added tokens (control tokens: end of turn, tool-call and thinking tags) first, then the base
 * alphabet (vocabulary tokens no merge produces), then merged tokens by the rank of the first merge
 * that produces them (BPE learns merges in order of frequency in its training data), then the rest
 * by id. The draft head's vocabulary subset (docs/speculative.md). Returns 0, EINVAL or ENOMEM. */
int tok_common_ids(const tokenizer *t, int V, int n, int32_t *ids, mtplx_err *err);
/* The raw bytes id decodes to (byte-level tokenizers: each vocab character mapped back to its byte;
 * added tokens: their content), owned by t. Returns 1, or 0 when the tokenizer's decoder is not
 * exactly ByteLevel (the bytes of a token are then not defined on their own) or id is unknown. */
int tok_token_bytes(const tokenizer *t, int32_t id, const char **bytes, size_t *len);

/* Fields of tokenizer_config.json the chat layer needs; strings owned by t, NULL when absent. */
typedef struct {
    const char *bos_token;      /* content of bos_token (string or {"content": ...}) */
    const char *eos_token;
    const char *pad_token;
    const char *unk_token;
    int32_t bos_id, eos_id, pad_id, unk_id; /* -1 when absent or not in the vocab */
    const char *chat_template;  /* chat_template string, the "default" entry of a list of named
                                   templates, or chat_template.jinja next to the files */
    const char *tokenizer_class;/* as written, e.g. "Qwen2Tokenizer" */
    const char *config_json;    /* the whole tokenizer_config.json text, "{}" when absent */
} tok_config;

const tok_config *tok_get_config(const tokenizer *t);

/* Streaming detokenizer: push ids one at a time and get back only text that is final — a
 * multi-byte character split across tokens is held until complete. The concatenation of all pieces
 * (including tok_stream_flush) equals tok_decode of all pushed ids. */
typedef struct tok_stream tok_stream;

int tok_stream_new(const tokenizer *t, int skip_special, tok_stream **out, mtplx_err *err);
/* Push one id. *text points into s's buffer (valid until the next call on s; NUL-terminated),
 * *len may be 0 when nothing is final yet. Returns 0 or an error (bad id: MTPLX_ERANGE). */
int tok_stream_push(tok_stream *s, int32_t id, const char **text, size_t *len, mtplx_err *err);
/* Emit whatever is held (an incomplete character becomes U+FFFD as in decode) and reset the
 * stream for a new sequence. Same buffer rules as push. */
int tok_stream_flush(tok_stream *s, const char **text, size_t *len, mtplx_err *err);
void tok_stream_free(tok_stream *s);

#endif
