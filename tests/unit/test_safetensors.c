/* test_safetensors.c — the safetensors reader/writer: round trip, the real checkpoints in the repo,
 * and every class of malformed file (crafted in a temp dir) giving the right code and a message that
 * names the file and the tensor. The ASan/UBSan build runs the same cases. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/model/safetensors.h"
#include "test.h"

static char g_tmp[256];

static void tmp_path(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", g_tmp, name); }

/* Write a raw safetensors file: 8-byte length, header text padded with spaces to a multiple of 8
 * (as real writers do, so data stays aligned), then `data_len` bytes of a pattern. */
static void write_raw(const char *path, const char *header, size_t data_len) {
    FILE *f = fopen(path, "wb");
    uint64_t n0 = strlen(header), n = (n0 + 7) & ~(uint64_t)7;
    unsigned char lb[8];
    for (int i = 0; i < 8; i++) lb[i] = (unsigned char)(n >> (8 * i));
    fwrite(lb, 1, 8, f);
    fwrite(header, 1, n0, f);
    for (uint64_t i = n0; i < n; i++) fputc(' ', f);
    for (size_t i = 0; i < data_len; i++) fputc((int)(i & 0xff), f);
    fclose(f);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
}

/* Open path expecting failure with `code`; the message must contain every non-NULL needle. */
static void expect_bad_file(const char *path, int code, const char *n1, const char *n2) {
    st_set *s = NULL;
    mtplx_err e;
    err_clear(&e);
    int rc = st_open_file(path, &s, &e);
    CHECK_MSG(rc == code, "%s: expected code %d, got %d (%s)", path, code, rc, e.msg);
    CHECK(s == NULL);
    CHECK_MSG(strstr(e.msg, path) != NULL, "message lacks the file: %s", e.msg);
    if (n1) CHECK_MSG(strstr(e.msg, n1) != NULL, "message lacks \"%s\": %s", n1, e.msg);
    if (n2) CHECK_MSG(strstr(e.msg, n2) != NULL, "message lacks \"%s\": %s", n2, e.msg);
    st_close(s);
}

static void expect_bad_dir(const char *dir, int code, const char *n1, const char *n2) {
    st_set *s = NULL;
    mtplx_err e;
    err_clear(&e);
    int rc = st_open_dir(dir, &s, &e);
    CHECK_MSG(rc == code, "%s: expected code %d, got %d (%s)", dir, code, rc, e.msg);
    CHECK(s == NULL);
    if (n1) CHECK_MSG(strstr(e.msg, n1) != NULL, "message lacks \"%s\": %s", n1, e.msg);
    if (n2) CHECK_MSG(strstr(e.msg, n2) != NULL, "message lacks \"%s\": %s", n2, e.msg);
}

/* A small valid file with mixed dtypes, written by st_write_file. */
static void write_sample(const char *path) {
    static float a[6] = {1, 2, 3, 4, 5, 6};
    static uint16_t b[3] = {0x3f80, 0x4000, 0x4040};
    static int64_t c[2] = {7, -8};
    static uint32_t d[4] = {1, 2, 3, 0xffffffffu};
    st_write_item it[4] = {
        {"b.bf16", DT_BF16, 1, {3}, b},
        {"a.f32", DT_F32, 2, {2, 3}, a},
        {"c.i64", DT_I64, 1, {2}, c},
        {"d.u32", DT_U32, 2, {2, 2}, d},
    };
    mtplx_err e;
    err_clear(&e);
    CHECK_INT(st_write_file(path, it, 4, "{\"format\":\"pt\"}", &e), 0);
}

TEST(test_write_then_read_round_trip) {
    char p[512];
    tmp_path(p, sizeof p, "rt.safetensors");
    write_sample(p);
    st_set *s;
    mtplx_err e;
    REQUIRE(st_open_file(p, &s, &e) == 0);
    CHECK_INT(st_count(s), 4);
    CHECK_STR(st_at(s, 0)->name, "a.f32"); /* sorted by name */
    CHECK_STR(st_at(s, 3)->name, "d.u32");
    const st_tensor *a = st_find(s, "a.f32");
    REQUIRE(a);
    CHECK_INT(a->dtype, DT_F32);
    CHECK_INT(a->ndim, 2);
    CHECK_INT(a->shape[1], 3);
    CHECK_INT(a->nbytes, 24);
    CHECK_NEAR(((const float *)a->data)[5], 6.0, 0);
    CHECK_INT(((uintptr_t)a->data) % 4, 0);
    const st_tensor *c = st_find(s, "c.i64");
    REQUIRE(c);
    CHECK_INT(((const int64_t *)c->data)[1], -8);
    CHECK_INT(((uintptr_t)c->data) % 8, 0);
    const st_tensor *b = st_find(s, "b.bf16");
    REQUIRE(b);
    CHECK_NEAR(bf16_to_f32(((const uint16_t *)b->data)[2]), 3.0, 0);
    CHECK_INT(st_total_bytes(s), 24 + 6 + 16 + 16);
    CHECK(st_find(s, "nope") == NULL);
    CHECK_STR(st_at(s, 0)->file, p);
    st_close(s);
}

TEST(test_writer_rejects_bad_items) {
    char p[512];
    tmp_path(p, sizeof p, "w.safetensors");
    float x = 1;
    mtplx_err e;
    st_write_item dup[2] = {{"x", DT_F32, 1, {1}, &x}, {"x", DT_F32, 1, {1}, &x}};
    CHECK_INT(st_write_file(p, dup, 2, NULL, &e), MTPLX_EINVAL);
    st_write_item neg[1] = {{"x", DT_F32, 1, {-1}, &x}};
    CHECK_INT(st_write_file(p, neg, 1, NULL, &e), MTPLX_EINVAL);
    st_write_item ok[1] = {{"x", DT_F32, 1, {1}, &x}};
    CHECK_INT(st_write_file(p, ok, 1, "{\"a\": 1}", &e), MTPLX_EINVAL);
    CHECK_INT(st_write_file(p, ok, 1, "[]", &e), MTPLX_EINVAL);
}

TEST(test_embedded_model_sharded_index) {
    const char *dir = "models/qwen35-tiny-code";
    st_set *s;
    mtplx_err e;
    err_clear(&e);
    int rc = st_open_dir(dir, &s, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc) return;
    /* model.safetensors.index.json: metadata.total_size */
    CHECK_INT(st_total_bytes(s), 46256256);
    int64_t emb[2] = {8192, 512};
    const st_tensor *t = st_require(s, "model.embed_tokens.weight", 2, emb, &e);
    REQUIRE(t);
    CHECK_INT(t->dtype, DT_BF16);
    CHECK(strstr(t->file, "model-00001-of-00004.safetensors") != NULL);
    CHECK(st_find(s, "mtp.fc.weight") != NULL);
    /* st_require errors */
    int64_t wrong[2] = {8192, 511};
    CHECK(st_require(s, "model.embed_tokens.weight", 2, wrong, &e) == NULL);
    CHECK_INT(e.code, MTPLX_EBADFILE);
    CHECK_STR(e.msg, "model-00001-of-00004.safetensors: tensor model.embed_tokens.weight: shape [8192, 512], "
                     "expected [8192, 511]");
    CHECK(st_require(s, "lm_head.weight", 2, emb, &e) == NULL);
    CHECK_STR(e.msg, "missing tensor lm_head.weight (looked in models/qwen35-tiny-code)");
    st_close(s);
}

TEST(test_golden_dir_prefers_model_safetensors) {
    st_set *s;
    mtplx_err e;
    err_clear(&e);
    int rc = st_open_dir("tests/data/goldens/qwen3_5_dense", &s, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc) return;
    CHECK(st_find(s, "logits") == NULL); /* golden.safetensors is not part of the checkpoint */
    int64_t emb[2] = {256, 64};
    CHECK(st_require(s, "model.embed_tokens.weight", 2, emb, &e) != NULL);
    st_close(s);
}

TEST(test_truncated_files_fail_cleanly) {
    char p[512], q[512];
    tmp_path(p, sizeof p, "full.safetensors");
    tmp_path(q, sizeof q, "cut.safetensors");
    write_sample(p);
    FILE *f = fopen(p, "rb");
    REQUIRE(f);
    unsigned char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    REQUIRE(n > 8 && n < sizeof buf);
    for (size_t cut = 0; cut < n; cut++) {
        FILE *g = fopen(q, "wb");
        fwrite(buf, 1, cut, g);
        fclose(g);
        st_set *s = NULL;
        mtplx_err e;
        err_clear(&e);
        int rc = st_open_file(q, &s, &e);
        CHECK_MSG(rc == MTPLX_EBADFILE, "cut at %zu: rc %d (%s)", cut, rc, e.msg);
        CHECK_MSG(strstr(e.msg, q) != NULL, "cut at %zu: message lacks the file: %s", cut, e.msg);
        st_close(s);
    }
}

TEST(test_header_errors) {
    char p[512];
    tmp_path(p, sizeof p, "h.safetensors");
    /* header length larger than the file */
    FILE *f = fopen(p, "wb");
    unsigned char lb[8] = {0xff, 0xff, 0, 0, 0, 0, 0, 0};
    fwrite(lb, 1, 8, f);
    fputs("{}", f);
    fclose(f);
    expect_bad_file(p, MTPLX_EBADFILE, "header length 65535 exceeds", NULL);
    /* absurd length (would overflow 8 + len) */
    f = fopen(p, "wb");
    unsigned char big[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    fwrite(big, 1, 8, f);
    fclose(f);
    expect_bad_file(p, MTPLX_EBADFILE, "exceeds", NULL);
    write_raw(p, "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]", 4);
    expect_bad_file(p, MTPLX_EBADFILE, "header JSON invalid", NULL);
    write_raw(p, "\x01\x02garbage\xff", 0);
    expect_bad_file(p, MTPLX_EBADFILE, "JSON", NULL);
    write_raw(p, "[1, 2]", 0);
    expect_bad_file(p, MTPLX_EBADFILE, "not an object", NULL);
    write_raw(p, "{\"__metadata__\": {\"format\": 1}}", 0);
    expect_bad_file(p, MTPLX_EBADFILE, "__metadata__", "format");
    write_raw(p, "{\"__metadata__\": [\"x\"]}", 0);
    expect_bad_file(p, MTPLX_EBADFILE, "__metadata__", NULL);
    write_raw(p, "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
                 "\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8);
    expect_bad_file(p, MTPLX_EBADFILE, "duplicate", NULL);
}

TEST(test_tensor_entry_errors) {
    char p[512];
    tmp_path(p, sizeof p, "t.safetensors");
    write_raw(p, "{\"blk.w\": {\"dtype\": \"F8_E4M3\", \"shape\": [4], \"data_offsets\": [0, 4]}}", 4);
    expect_bad_file(p, MTPLX_EUNSUPPORTED, "tensor blk.w", "unknown dtype \"F8_E4M3\"");
    write_raw(p, "{\"blk.w\": {\"dtype\": 3, \"shape\": [4], \"data_offsets\": [0, 4]}}", 4);
    expect_bad_file(p, MTPLX_EBADFILE, "tensor blk.w", "dtype");
    write_raw(p, "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 20]}}", 24);
    expect_bad_file(p, MTPLX_EBADFILE, "tensor blk.w", "24 bytes but data_offsets span 20");
    write_raw(p, "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", 4);
    expect_bad_file(p, MTPLX_EBADFILE, "tensor blk.w", "shape[0]");
    write_raw(p, "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", 4);
    expect_bad_file(p, MTPLX_EBADFILE, "tensor blk.w", "shape[0]");
    write_raw(p, "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 4]}}", 4);
    expect_bad_file(p, MTPLX_EUNSUPPORTED, "tensor blk.w", "9 dimensions");
    write_raw(p, "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [4611686018427387904, 8], \"data_offsets\": [0, 0]}}", 0);
    expect_bad_file(p, MTPLX_EBADFILE, "tensor blk.w", "overflows");
    write_raw(p, "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 4);
    expect_bad_file(p, MTPLX_EBADFILE, "tensor blk.w", "outside the data section");
    write_raw(p, "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [8, 4]}}", 8);
    expect_bad_file(p, MTPLX_EBADFILE, "tensor blk.w", "end before begin");
    write_raw(p, "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}", 4);
    expect_bad_file(p, MTPLX_EBADFILE, "tensor blk.w", "data_offsets");
    write_raw(p, "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, -4]}}", 4);
    expect_bad_file(p, MTPLX_EBADFILE, "tensor blk.w", "data_offsets");
    write_raw(p, "{\"blk.w\": [1, 2]}", 4);
    expect_bad_file(p, MTPLX_EBADFILE, "tensor blk.w", "not a JSON object");
    /* header of 2 bytes + "{...}": an F32 at data offset 2 lands at file offset 8+len+2 */
    write_raw(p, "{\"blk.w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [2, 6]}}", 8);
    expect_bad_file(p, MTPLX_EUNSUPPORTED, "tensor blk.w", "not aligned");
}

TEST(test_overlapping_spans_name_both_tensors) {
    char p[512];
    tmp_path(p, sizeof p, "o.safetensors");
    write_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},  "
                 "\"bb\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}}", 16);
    expect_bad_file(p, MTPLX_EBADFILE, "tensor bb", "overlap tensor a");
    /* touching spans and empty tensors are fine */
    write_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, \"e\": {\"dtype\": \"F32\", "
                 "\"shape\": [0], \"data_offsets\": [4, 4]}, \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}}     ",
              16);
    st_set *s;
    mtplx_err e;
    CHECK_MSG(st_open_file(p, &s, &e) == 0, "%s", e.msg);
    if (s) CHECK_INT(st_count(s), 3);
    st_close(s);
}

static void make_dir(char *buf, size_t cap, const char *name) {
    tmp_path(buf, cap, name);
    mkdir(buf, 0755);
}

static void shard_file(const char *dir, const char *name, const char *tensor) {
    char p[600], h[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    snprintf(h, sizeof h, "{\"%s\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", tensor);
    write_raw(p, h, 4);
}

TEST(test_sharded_index_errors) {
    char d[512], p[600];
    make_dir(d, sizeof d, "shards");
    shard_file(d, "m-1.safetensors", "layer.0.w");
    shard_file(d, "m-2.safetensors", "layer.1.w");
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", d);
    write_text(p, "{\"weight_map\": {\"layer.0.w\": \"m-1.safetensors\", \"layer.1.w\": \"m-2.safetensors\"}}");
    st_set *s;
    mtplx_err e;
    err_clear(&e);
    CHECK_MSG(st_open_dir(d, &s, &e) == 0, "%s", e.msg);
    if (s) CHECK_INT(st_count(s), 2);
    st_close(s);
    /* index names a shard that does not exist */
    write_text(p, "{\"weight_map\": {\"layer.0.w\": \"m-1.safetensors\", \"layer.1.w\": \"m-9.safetensors\"}}");
    expect_bad_dir(d, MTPLX_EIO, "tensor layer.1.w", "m-9.safetensors does not exist");
    /* index maps a tensor to a shard that lacks it */
    write_text(p, "{\"weight_map\": {\"layer.0.w\": \"m-1.safetensors\", \"layer.1.w\": \"m-2.safetensors\", "
                  "\"layer.2.w\": \"m-2.safetensors\"}}");
    expect_bad_dir(d, MTPLX_EBADFILE, "tensor layer.2.w", "not in that shard");
    /* index says the wrong shard */
    write_text(p, "{\"weight_map\": {\"layer.0.w\": \"m-2.safetensors\", \"layer.1.w\": \"m-2.safetensors\"}}");
    expect_bad_dir(d, MTPLX_EBADFILE, "tensor layer.0.w", NULL);
    /* shard holds a tensor the index does not list */
    write_text(p, "{\"weight_map\": {\"layer.0.w\": \"m-1.safetensors\"}}");
    shard_file(d, "m-1.safetensors", "layer.0.w");
    write_text(p, "{\"weight_map\": {\"layer.0.w\": \"m-1.safetensors\", \"layer.1.w\": \"m-1.safetensors\"}}");
    expect_bad_dir(d, MTPLX_EBADFILE, "tensor layer.1.w", NULL);
    /* path traversal and garbage */
    write_text(p, "{\"weight_map\": {\"layer.0.w\": \"../m-1.safetensors\"}}");
    expect_bad_dir(d, MTPLX_EBADFILE, "tensor layer.0.w", "not a plain file name");
    write_text(p, "{\"weight_map\": {\"layer.0.w\": 5}}");
    expect_bad_dir(d, MTPLX_EBADFILE, "tensor layer.0.w", NULL);
    write_text(p, "{\"weight_map\": ");
    expect_bad_dir(d, MTPLX_EBADFILE, "model.safetensors.index.json", "invalid JSON");
    /* a bad shard's error names the shard */
    write_text(p, "{\"weight_map\": {\"layer.0.w\": \"m-1.safetensors\", \"layer.1.w\": \"m-2.safetensors\"}}");
    char sp[600];
    snprintf(sp, sizeof sp, "%s/m-2.safetensors", d);
    write_raw(sp, "{\"layer.1.w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 8]}}", 4);
    expect_bad_dir(d, MTPLX_EBADFILE, "m-2.safetensors: tensor layer.1.w", "outside");
}

TEST(test_duplicate_tensor_across_files) {
    char d[512];
    make_dir(d, sizeof d, "dups");
    shard_file(d, "a.safetensors", "shared.w");
    shard_file(d, "b.safetensors", "shared.w");
    expect_bad_dir(d, MTPLX_EBADFILE, "tensor shared.w", "duplicate");
    char e1[512];
    make_dir(e1, sizeof e1, "empty");
    expect_bad_dir(e1, MTPLX_EIO, "no model.safetensors", NULL);
    expect_bad_dir("/nonexistent/dir", MTPLX_EIO, "not a directory", NULL);
}

TEST(test_open_buffer) {
    static const char img[] = "\x10\0\0\0\0\0\0\0{\"__metadata__\":{}}";
    /* header length 16 but text is 19 bytes: JSON is cut */
    st_set *s;
    mtplx_err e;
    CHECK_INT(st_open_buffer(img, sizeof img - 1, "mem", &s, &e), MTPLX_EBADFILE);
    CHECK(strstr(e.msg, "mem") != NULL);
    static const char ok[] = "\x08\0\0\0\0\0\0\0{}      ";
    CHECK_INT(st_open_buffer(ok, 16, "mem", &s, &e), 0);
    CHECK_INT(st_count(s), 0);
    st_close(s);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/mtplx_st_XXXXXX");
    if (!mkdtemp(g_tmp)) return 1;
    RUN(test_write_then_read_round_trip);
    RUN(test_writer_rejects_bad_items);
    RUN(test_embedded_model_sharded_index);
    RUN(test_golden_dir_prefers_model_safetensors);
    RUN(test_truncated_files_fail_cleanly);
    RUN(test_header_errors);
    RUN(test_tensor_entry_errors);
    RUN(test_overlapping_spans_name_both_tensors);
    RUN(test_sharded_index_errors);
    RUN(test_duplicate_tensor_across_files);
    RUN(test_open_buffer);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    return TEST_SUMMARY();
}
