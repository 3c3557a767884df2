/* test_hub.c — SHA-256 against the FIPS 180-4 / NIST example vectors (one-shot and streamed in odd
 * pieces), repository reference parsing, and the hub cache: resolving refs, listing, and `rm` of one
 * snapshot keeping the blobs another snapshot still links to. The network side is tested end to end
 * against a fake hub in tests/integration/pull.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/base/sha256.h"
#include "../../src/hub/hub.h"
#include "test.h"

static void hex_of(const void *data, size_t len, char hex[65]) {
    sha256_ctx c;
    unsigned char d[32];
    sha256_init(&c);
    sha256_update(&c, data, len);
    sha256_final(&c, d);
    sha256_hex(d, hex);
}

/* NIST CSRC "Examples with intermediate values" for SHA-256 and the FIPS 180-2 appendix vectors */
TEST(test_sha256_nist_vectors) {
    char h[65];
    hex_of("abc", 3, h);
    CHECK_STR(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    hex_of("", 0, h);
    CHECK_STR(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *m2 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 448 bits: padding spills */
    hex_of(m2, strlen(m2), h);
    CHECK_STR(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *a = malloc(1000000);
    REQUIRE(a);
    memset(a, 'a', 1000000);
    hex_of(a, 1000000, h);
    CHECK_STR(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(a);
}

/* Streaming in pieces of every size 1..130 gives the one-shot digest (block boundary handling). */
TEST(test_sha256_streamed_equals_one_shot) {
    unsigned char buf[3000];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)(i * 131 + 7);
    char want[65], got[65];
    hex_of(buf, sizeof buf, want);
    for (size_t piece = 1; piece <= 130; piece++) {
        sha256_ctx c;
        unsigned char d[32];
        sha256_init(&c);
        for (size_t off = 0; off < sizeof buf; off += piece)
            sha256_update(&c, buf + off, off + piece <= sizeof buf ? piece : sizeof buf - off);
        sha256_final(&c, d);
        sha256_hex(d, got);
        CHECK_MSG(!strcmp(got, want), "piece %zu: %s != %s", piece, got, want);
    }
}

TEST(test_parse_ref) {
    hub_ref r;
    mtplx_err err;
    CHECK_INT(hub_parse_ref("Qwen/Qwen3.5-2B", &r, &err), 0);
    CHECK_STR(r.repo, "Qwen/Qwen3.5-2B");
    CHECK_STR(r.revision, "main");
    CHECK_INT(r.has_revision, 0);
    CHECK_INT(hub_parse_ref("mlx-community/Qwen3-4B-4bit@refs/pr/1", &r, &err), 0);
    CHECK_STR(r.repo, "mlx-community/Qwen3-4B-4bit");
    CHECK_STR(r.revision, "refs/pr/1");
    CHECK_INT(r.has_revision, 1);
    const char *bad[] = {"noslash", "a/b/c", "/b", "a/", "../x", "a/..", "a/b@", "a/b@../x", "a/b@x y", "a b/c",
                         "models/qwen35-tiny-code/", "./a", "a/.b", "a/b@/x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(hub_parse_ref(bad[i], &r, &err) == MTPLX_EINVAL, "'%s' accepted", bad[i]);
    CHECK_INT(hub_looks_like_ref("org/name@v1.0"), 1);
    CHECK_INT(hub_looks_like_ref("/abs/path"), 0);
}

TEST(test_cache_dir_env_order) {
    char d[HUB_PATH_MAX];
    setenv("HF_HUB_CACHE", "/x/hub-cache", 1);
    setenv("HF_HOME", "/y/home", 1);
    CHECK_INT(hub_cache_dir(d, sizeof d, NULL), 0);
    CHECK_STR(d, "/x/hub-cache");
    unsetenv("HF_HUB_CACHE");
    unsetenv("HUGGINGFACE_HUB_CACHE");
    CHECK_INT(hub_cache_dir(d, sizeof d, NULL), 0);
    CHECK_STR(d, "/y/home/hub");
    unsetenv("HF_HOME");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/z", 1);
    CHECK_INT(hub_cache_dir(d, sizeof d, NULL), 0);
    CHECK_STR(d, "/z/.cache/huggingface/hub");
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

#define C1 "1111111111111111111111111111111111111111"
#define C2 "2222222222222222222222222222222222222222"

/* A cache by hand: models--org--m with two snapshots; C1 (refs/main) links blobs a and shared, C2
 * (refs/v2) links b and shared. */
static void make_cache(const char *root) {
    char p[512];
    const char *dirs[] = {"", "/models--org--m", "/models--org--m/blobs", "/models--org--m/refs",
                          "/models--org--m/snapshots", "/models--org--m/snapshots/" C1,
                          "/models--org--m/snapshots/" C2, "/models--org--m/snapshots/" C2 "/sub"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(p, sizeof p, "%s%s", root, dirs[i]);
        mkdir(p, 0755);
    }
    const char *blobs[][2] = {{"aaaa", "12345"}, {"bbbb", "1234567"}, {"shared", "123"}};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/models--org--m/blobs/%s", root, blobs[i][0]);
        write_file(p, blobs[i][1]);
    }
    snprintf(p, sizeof p, "%s/models--org--m/refs/main", root);
    write_file(p, C1 "\n");
    snprintf(p, sizeof p, "%s/models--org--m/refs/v2", root);
    write_file(p, C2);
    snprintf(p, sizeof p, "%s/models--org--m/snapshots/" C1 "/a.bin", root);
    CHECK_INT(symlink("../../blobs/aaaa", p), 0);
    snprintf(p, sizeof p, "%s/models--org--m/snapshots/" C1 "/config.json", root);
    CHECK_INT(symlink("../../blobs/shared", p), 0);
    snprintf(p, sizeof p, "%s/models--org--m/snapshots/" C2 "/sub/b.bin", root);
    CHECK_INT(symlink("../../../blobs/bbbb", p), 0);
    snprintf(p, sizeof p, "%s/models--org--m/snapshots/" C2 "/config.json", root);
    CHECK_INT(symlink("../../blobs/shared", p), 0);
}

static int exists(const char *root, const char *rel) {
    char p[512];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", root, rel);
    return lstat(p, &st) == 0;
}

TEST(test_cache_resolve_list_remove) {
    char root[] = "/tmp/mtplx_test_hub.XXXXXX";
    REQUIRE(mkdtemp(root));
    make_cache(root);
    hub_ref r;
    char dir[HUB_PATH_MAX], commit[41];
    mtplx_err err;
    /* resolve: a branch through refs/, a commit directly, unknown -> a message naming `mtplx pull` */
    CHECK_INT(hub_parse_ref("org/m", &r, &err), 0);
    CHECK_INT(hub_resolve(root, &r, dir, sizeof dir, commit, &err), 0);
    CHECK_STR(commit, C1);
    CHECK_INT(hub_parse_ref("org/m@" C2, &r, &err), 0);
    CHECK_INT(hub_resolve(root, &r, dir, sizeof dir, commit, &err), 0);
    CHECK_STR(commit, C2);
    CHECK_INT(hub_parse_ref("org/m@v3", &r, &err), 0);
    CHECK_INT(hub_resolve(root, &r, dir, sizeof dir, NULL, &err), MTPLX_EIO);
    CHECK(strstr(err.msg, "mtplx pull org/m@v3") != NULL);

    /* list: two snapshots, sizes of what they link, refs named */
    hub_snapshot *s;
    int n;
    CHECK_INT(hub_list(root, &s, &n, &err), 0);
    REQUIRE(n == 2);
    CHECK_STR(s[0].repo, "org/m");
    CHECK_STR(s[0].commit, C1);
    CHECK_STR(s[0].refs, "main");
    CHECK_INT(s[0].bytes, 5 + 3);
    CHECK_INT(s[0].files, 2);
    CHECK_STR(s[1].refs, "v2");
    CHECK_INT(s[1].bytes, 7 + 3);
    CHECK_INT(s[1].incomplete, 0);
    free(s);

    /* rm org/m@v2: its snapshot, ref and own blob go; the shared blob and main stay */
    uint64_t freed = 0;
    CHECK_INT(hub_parse_ref("org/m@v2", &r, &err), 0);
    CHECK_INT(hub_remove(root, &r, &freed, &err), 0);
    CHECK_INT(freed, 7);
    CHECK(!exists(root, "models--org--m/snapshots/" C2));
    CHECK(!exists(root, "models--org--m/refs/v2"));
    CHECK(!exists(root, "models--org--m/blobs/bbbb"));
    CHECK(exists(root, "models--org--m/blobs/shared"));
    CHECK(exists(root, "models--org--m/blobs/aaaa"));
    CHECK(exists(root, "models--org--m/refs/main"));

    /* rm org/m: everything */
    CHECK_INT(hub_parse_ref("org/m", &r, &err), 0);
    CHECK_INT(hub_remove(root, &r, &freed, &err), 0);
    CHECK_INT(freed, 5 + 3);
    CHECK(!exists(root, "models--org--m"));
    CHECK_INT(hub_remove(root, &r, NULL, &err), MTPLX_EIO);
    CHECK_INT(hub_list(root, &s, &n, &err), 0);
    CHECK_INT(n, 0);
    rmdir(root);
}

int main(void) {
    RUN(test_sha256_nist_vectors);
    RUN(test_sha256_streamed_equals_one_shot);
    RUN(test_parse_ref);
    RUN(test_cache_dir_env_order);
    RUN(test_cache_resolve_list_remove);
    return TEST_SUMMARY();
}
