/* grammar_int.h — the compiled grammar (nodes) and the automaton's runtime state (frames, stacks,
 * stack sets), shared by schema.c (compiler), match.c (byte steps) and matcher.c (masks).
 *
 * A grammar is a graph of nodes; a node matches one JSON value (object, array, string, number, a
 * set of literal texts) or combines others (anyOf, sequence, repetition, optional whitespace, raw
 * text up to a terminator). The runtime state is a stack of frames (one per open node, innermost
 * last); because anyOf branches may share a prefix, a state is a small SET of such stacks, each a
 * live parse. A byte maps each stack to zero or more successors; the state is dead when none are
 * left. Every state kept is viable: some continuation completes the sentence (the compiler refuses
 * empty languages and number bounds are checked on prefixes). */
#ifndef MTPLX_GRAMMAR_INT_H
#define MTPLX_GRAMMAR_INT_H

#include <stdint.h>

#include "grammar.h"

/* Limits that keep hostile schemas bounded in memory and time. */
#define GR_MAX_NODES 20000       /* nodes per grammar */
#define GR_MAX_SCHEMA_DEPTH 48   /* nesting of schema objects while compiling */
#define GR_MAX_PROPS 64          /* properties per object (a 64-bit used/required mask) */
#define GR_MAX_LITS 20000        /* enum values per node */
#define GR_MAX_LIT_BYTES (1 << 20) /* bytes of literal text per grammar */
#define GR_MAX_ALTS 64           /* anyOf branches after flattening */
#define GR_MAX_DEPTH 40          /* frames per stack: deeper parses die (bounded recursion) */
#define GR_MAX_STACKS 16         /* stacks per state: further ambiguous parses are dropped */
#define GR_MAX_INDENT 20         /* spaces after a newline between JSON tokens (match.c gap_ws) */
#define GR_MAX_DIGITS 15         /* integer / fraction digits of a number (exact in a double) */
#define GR_MAX_EXP_DIGITS 2
#define GR_MAX_DFA_BYTES (32L << 20) /* pattern / format automata and their viability tables */

/* A DFA over Unicode scalar values (regex.c): a string `pattern` or `format` with the string's length
 * bounds. State 0 is the start; every state with edges can still reach acceptance. */
typedef struct {
    uint32_t lo, hi;       /* code points lo..hi (never a surrogate) */
    int to;
} gr_edge;

typedef struct gr_dfa {
    int n;                 /* states */
    int *first;            /* [n + 1]: the edges of s are edges[first[s] .. first[s+1]), sorted by lo */
    gr_edge *edges;
    uint8_t *accept;       /* [n] */
    int min_len, max_len;  /* code points (max -1: none) */
    int cap;               /* the count of code points saturates here (max_len, else min_len) */
    uint8_t *viable;       /* [(cap + 1) * n]: an accepted completion within the length bounds exists */
} gr_dfa;

/* Compile `pattern` (len bytes, ECMAScript "u" syntax, the safe subset of regex.c) with the length
 * bounds; kw and path name the keyword in messages. Returns 0 and *out (gr_dfa_free),
 * MTPLX_EUNSUPPORTED naming the construct and the reason, or MTPLX_EINVAL for an empty language. */
int gr_dfa_compile(const char *pattern, size_t len, const char *kw, const char *path, int min_len, int max_len,
                   gr_dfa **out, mtplx_err *err);
void gr_dfa_free(gr_dfa *d);
/* The state after code point c from s, or -1. */
int gr_dfa_step(const gr_dfa *d, int s, uint32_t c);
/* 1 when state s after `count` code points can still complete within the bounds. */
int gr_dfa_viable(const gr_dfa *d, int count, int s);
/* 1 when some code point in [lo, hi] leads from s (after count code points) to a viable state. */
int gr_dfa_range_viable(const gr_dfa *d, int s, int count, uint32_t lo, uint32_t hi);
/* 1 when the UTF-8 string s[0..n) is accepted (with the length bounds). */
int gr_dfa_match(const gr_dfa *d, const char *s, size_t n);
/* The regular expression of a string format (date, time, ...) and the length bound it implies, or NULL. */
const char *gr_format_regex(const char *name, int *max_len);

typedef enum {
    GN_OBJECT, /* { "key": value, ... } */
    GN_ARRAY,  /* [ value, ... ] */
    GN_STRING, /* "..." with a length range in code points */
    GN_NUMBER, /* JSON number (or integer) with optional bounds */
    GN_LITS,   /* one of a sorted set of literal byte strings (enum, const, true/false/null, text) */
    GN_ANYOF,  /* any of kids (never nested: flattened at compile time) */
    GN_SEQ,    /* kids one after the other */
    GN_REPEAT, /* kid[0] min..max times, separated by kid[1] (-1: no separator) */
    GN_WS,     /* 0..max whitespace bytes */
    GN_TEXT,   /* any UTF-8 text not containing the terminator, then the terminator */
    GN_ANYTEXT,/* any UTF-8 text (free text after a bounded think block) */
} gn_kind;

typedef struct {
    gn_kind kind;
    int n;                 /* OBJECT: properties; LITS: literals; ANYOF/SEQ: kids; ARRAY: prefixItems */
    int *kids;             /* ANYOF/SEQ: [n] node ids; OBJECT: [n] value node per property (sorted
                              by name); REPEAT: [2] item, separator (-1 none); ARRAY: [n + 1] the
                              prefixItems, then the node of the later items (-1: none) */
    char **strs;           /* LITS: [n] sorted literal bytes; OBJECT: [n] keys as JSON text with quotes,
                              sorted; TEXT: [1] the terminator */
    int *lens;             /* [n] byte lengths of strs */
    uint64_t required;     /* OBJECT: bit i = property i (sorted order) is required */
    uint64_t *key_hash;    /* OBJECT: [n] hash of each key's bytes between the quotes */
    int additional;        /* OBJECT: value node of other keys, -1 = no other keys */
    int min, max;          /* ARRAY items, STRING code points, REPEAT counts, WS bytes; max -1 = none */
    int is_int;            /* NUMBER: integer only (no fraction or exponent) */
    int has_lo, has_hi;    /* NUMBER bounds */
    int lo_excl, hi_excl;
    double lo, hi;
    double multiple;       /* NUMBER: multipleOf (a positive integer), 0 = none */
    int unique;            /* ARRAY: uniqueItems over a LITS item node of at most 64 values */
    int min_props, max_props; /* OBJECT: minProperties, maxProperties (-1 none) */
    gr_dfa *dfa;           /* STRING: pattern / format (owned), NULL = any string */
    int avoid;             /* TEXT: 1 = the terminator never occurs and the text may end anywhere */
} gnode;

struct grammar {
    gnode *nodes;
    int n_nodes, cap_nodes;
    int root;
    long lit_bytes;        /* literal bytes so far (GR_MAX_LIT_BYTES) */
    long dfa_bytes;        /* memory of pattern / format automata so far (GR_MAX_DFA_BYTES) */
};

/* One open node of a parse. Zeroed before use so that states compare and hash byte for byte. */
typedef struct {
    int32_t node;          /* grammar node; KEY frames: the object node */
    uint8_t key;           /* 1: this frame matches an object key (of `node`) */
    uint8_t phase;         /* node-specific progress, 0 = nothing consumed */
    uint16_t ws;           /* whitespace state of the current gap (gap_ws); STRING: code points;
                              LITS/KEY: position; TEXT: terminator bytes matched; NUMBER: 1 = negative */
    int32_t a, b;          /* node-specific: literal range [a, b), UTF-8 / escape state, counters */
    union {
        double v;          /* NUMBER: the digits so far as an integer mantissa */
        uint64_t bits;     /* OBJECT: properties used; free KEY: hash of its bytes */
    } u;
} gframe;

typedef struct {
    int n;                        /* frames */
    gframe f[GR_MAX_DEPTH];
} gstack;

/* A state: live parses (0 = dead; one stack with n == 0 = the sentence is complete). */
typedef struct {
    int n;
    gstack s[GR_MAX_STACKS];
} gset;

/* Initial state of g. */
void gset_init(const grammar *g, gset *out);
/* out = the successors of `in` after byte c (out != in). Returns out->n. */
int gset_step(const grammar *g, const gset *in, int c, gset *out);
/* 1 when some stack of s can complete without more bytes. */
int gset_accepting(const grammar *g, const gset *s);
/* Bytes of the state's canonical serialization written to buf (cap >= sizeof(gset)). */
size_t gset_serialize(const gset *s, unsigned char *buf);

uint64_t gr_hash(const void *p, size_t n, uint64_t h);
#define GR_HASH_SEED 1469598103934665603ULL

#endif
