/* doctor.c — see doctor.h. */
#include "doctor.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../base/file.h"
#include "../backend/backend.h"
#include "../base/sha256.h"
#include "../hub/hub.h"
#include "../kernels/cpu.h"
#include "../kernels/knobs.h"
#include "../model/safetensors.h"

const char *doctor_status_name(doctor_status s) { return s == DOC_OK ? "ok" : s == DOC_WARN ? "warn" : "fail"; }

/* Append a check with a printf-formatted detail; set_fix adds what to do. */
static doctor_check *add(doctor_report *r, const char *name, doctor_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static doctor_check *add(doctor_report *r, const char *name, doctor_status st, const char *fmt, ...) {
    doctor_check *c = &r->checks[r->n < DOCTOR_MAX_CHECKS ? r->n++ : DOCTOR_MAX_CHECKS - 1];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->status = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->detail, sizeof c->detail, fmt, ap);
    va_end(ap);
    return c;
}

static void set_fix(doctor_check *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_fix(doctor_check *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->fix, sizeof c->fix, fmt, ap);
    va_end(ap);
}

static int cpus_allowed(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void check_cpu(doctor_report *r) {
    const cpu_features *f = cpu_get_features();
    /* the path a backend made now would run: MTPLX_KERNEL if this CPU runs it, else the best */
    const char *ke = getenv("MTPLX_KERNEL");
    kern_isa want, isa = cpu_isa();
    int forced = ke && *ke && cpu_isa_parse(ke, &want) == 0, runs = forced && cpu_isa_supported(want);
    if (forced) isa = runs ? want : cpu_best_isa();
    /* the AVX2 path says when its packed integer kernel takes AVX-VNNI (MTPLX_AVXVNNI, on by default) */
    const char *av = getenv("MTPLX_AVXVNNI"), *path = cpu_path_label(isa, !(av && !strcmp(av, "0")));
    doctor_check *c = add(r, "cpu", isa == KERN_ISA_PORTABLE || (forced && !runs) ? DOC_WARN : DOC_OK,
                          "kernel path %s (best this CPU runs: %s); features:%s%s%s%s%s%s%s%s", path,
                          cpu_isa_name(cpu_best_isa()), f->avx2 ? " avx2" : "", f->fma ? " fma" : "", f->avx512f ? " avx512f" : "",
                          f->avx512bw ? " avx512bw" : "", f->avx512vnni ? " avx512vnni" : "", f->avx512bf16 ? " avx512bf16" : "",
                          f->avxvnni ? " avxvnni" : "", f->amx_tile ? " amx" : "");
    if (isa == KERN_ISA_PORTABLE)
        set_fix(c, "no AVX2: the plain C kernels run (several times slower); use a CPU with AVX2+FMA%s",
                getenv("MTPLX_KERNEL") ? ", or unset MTPLX_KERNEL" : "");
    else if (forced && !runs)
        set_fix(c, "MTPLX_KERNEL=%s is a path this CPU cannot run, so %s runs; unset it or name a path it has", ke,
                cpu_isa_name(isa));
    else if (isa != cpu_best_isa())
        set_fix(c, "MTPLX_KERNEL forces %s; unset it to use %s", cpu_isa_name(isa), cpu_isa_name(cpu_best_isa()));
}

/* kB value of `key` in /proc/meminfo, -1 when absent. */
static long long meminfo_kb(const char *key) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    long long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            v = atoll(line + kl + 1);
            break;
        }
    fclose(f);
    return v;
}

/* Bytes of the model's weight files (*.safetensors in dir), 0 when none. */
static unsigned long long model_bytes(const char *dir) {
    DIR *d = dir ? opendir(dir) : NULL;
    if (!d) return 0;
    unsigned long long sum = 0;
    struct dirent *e;
    char p[PATH_MAX];
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 12 || strcmp(e->d_name + n - 12, ".safetensors")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(p, &st) == 0) sum += (unsigned long long)st.st_size;
    }
    closedir(d);
    return sum;
}

static void check_memory(doctor_report *r, const char *model_dir) {
    long long total = meminfo_kb("MemTotal"), avail = meminfo_kb("MemAvailable");
    if (total < 0 || avail < 0) {
        doctor_check *c = add(r, "memory", DOC_WARN, "cannot read /proc/meminfo");
        set_fix(c, "run on Linux with /proc mounted");
        return;
    }
    double gib = avail / (1024.0 * 1024.0);
    /* weights take ~2 bytes/param in bf16, ~1.06 at q8 and ~0.56 at q4 (MLX affine, group 64, bf16
     * scales and biases); keep a quarter of the free memory for the KV cache and scratch */
    double usable = avail * 1024.0 * 0.75;
    unsigned long long mb = model_bytes(model_dir);
    doctor_status st = mb && mb > (unsigned long long)(avail * 1024.0) ? DOC_FAIL : mb && mb > usable ? DOC_WARN : DOC_OK;
    doctor_check *c = add(r, "memory", st,
                          "%.1f GiB total, %.1f GiB available; largest model that fits: about %.1fB parameters in "
                          "bf16, %.1fB at q8, %.1fB at q4",
                          total / (1024.0 * 1024.0), gib, usable / 2.0 / 1e9, usable / 1.0625 / 1e9, usable / 0.5625 / 1e9);
    if (mb) {
        size_t l = strlen(c->detail);
        snprintf(c->detail + l, sizeof c->detail - l, "; the model's weights: %.2f GiB", mb / (1024.0 * 1024.0 * 1024.0));
    }
    if (st != DOC_OK)
        set_fix(c, "the weights (%.1f GiB) %s the available memory: close other programs, or use a quantized copy "
                   "(mtplx convert --q-bits 4)",
                mb / (1024.0 * 1024.0 * 1024.0), st == DOC_FAIL ? "exceed" : "leave little room beside");
}

static void check_huge_pages(doctor_report *r) {
    char buf[256] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) {
        if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = 0;
    long long hp = meminfo_kb("HugePages_Total");
    if (!buf[0]) {
        doctor_check *c = add(r, "huge_pages", DOC_WARN, "transparent huge pages: unknown (no sysfs entry)");
        set_fix(c, "none needed, but weights mapped with 2 MiB pages take fewer TLB misses");
        return;
    }
    int never = strstr(buf, "[never]") != NULL;
    doctor_check *c = add(r, "huge_pages", never ? DOC_WARN : DOC_OK, "transparent huge pages: %s; reserved huge pages: %lld", buf,
                          hp < 0 ? 0 : hp);
    if (never)
        set_fix(c, "echo madvise | sudo tee /sys/kernel/mm/transparent_hugepage/enabled (fewer TLB misses on large weights)");
}

/* The backends' knobs (MTPLX_DEVICE, MTPLX_THREADS, MTPLX_KERNEL, ...): a value that is not of its
 * kind stops every command that loads a model, so doctor names it first. */
static void check_env(doctor_report *r) {
    mtplx_err e;
    err_clear(&e);
    if (!be_env_check(&e)) {
        add(r, "env", DOC_OK, "the MTPLX_* settings that are set hold valid values");
        return;
    }
    doctor_check *c = add(r, "env", DOC_FAIL, "%s", e.msg);
    set_fix(c, "correct the variable or unset it (docs/architecture.md, \"Knobs\", lists them)");
}

static void check_threads(doctor_report *r) {
    int cpus = cpus_allowed();
    const char *env = getenv("MTPLX_THREADS");
    int want = env && *env ? atoi(env) : 0;
    if (want > cpus) {
        doctor_check *c = add(r, "threads", DOC_WARN, "MTPLX_THREADS=%d but this process may run on %d CPUs", want, cpus);
        set_fix(c, "set MTPLX_THREADS to %d or less (more threads than cores spin against each other)", cpus);
    } else {
        add(r, "threads", DOC_OK, "%d threads on %d CPUs%s", want ? want : cpus, cpus, want ? " (MTPLX_THREADS)" : " (all allowed CPUs)");
    }
}

/* 1 when s is 64 lower-case hex digits (an HF cache blob name = the file's sha256). */
static int is_sha256_name(const char *s) {
    if (strlen(s) != 64) return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) return 0;
    return 1;
}

/* sha256 of a file into hex[65]; 0 or -1. */
static int file_sha256(const char *path, char hex[65]) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    sha256_ctx c;
    sha256_init(&c);
    static __thread unsigned char buf[1 << 16];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) sha256_update(&c, buf, (size_t)n);
    close(fd);
    if (n < 0) return -1;
    unsigned char d[32];
    sha256_final(&c, d);
    sha256_hex(d, hex);
    return 0;
}

/* Verify the HF-cache blobs the model's files link to; appends findings to detail. Returns the
 * number of mismatches, -1 when none could be checked. */
static int verify_blobs(const char *dir, int *checked, char *bad, size_t badn) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int mism = 0;
    *checked = 0;
    struct dirent *e;
    char p[PATH_MAX], target[PATH_MAX], hex[65];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        ssize_t n = readlink(p, target, sizeof target - 1);
        if (n <= 0) continue;
        target[n] = 0;
        const char *base = strrchr(target, '/');
        base = base ? base + 1 : target;
        if (!is_sha256_name(base)) continue; /* small files are named by their git blob sha1 instead */
        (*checked)++;
        if (file_sha256(p, hex) || strcmp(hex, base)) {
            mism++;
            size_t l = strlen(bad);
            snprintf(bad + l, badn - l, "%s%.100s", l ? ", " : "", e->d_name);
        }
    }
    closedir(d);
    return mism;
}

static void check_model(doctor_report *r, const char *dir, int checksums) {
    if (!dir) return;
    if (!file_is_dir(dir)) {
        doctor_check *c = add(r, "model", DOC_FAIL, "%s is not a directory", dir);
        set_fix(c, "pass --model DIR, or fetch one with mtplx pull ORG/NAME");
        return;
    }
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/config.json", dir);
    json_error_t je;
    json_t *cfg = json_load_file(p, 0, &je);
    if (!cfg || !json_is_object(cfg)) {
        json_decref(cfg);
        doctor_check *c = add(r, "model", DOC_FAIL, "%s: %s", p, cfg ? "not a JSON object" : je.text);
        set_fix(c, "the checkpoint is incomplete or damaged: download it again (mtplx pull)");
        return;
    }
    const char *mt = json_string_value(json_object_get(cfg, "model_type"));
    char mtype[64];
    snprintf(mtype, sizeof mtype, "%.60s", mt ? mt : "?");
    json_decref(cfg);
    st_set *s = NULL;
    mtplx_err err = {0};
    if (st_open_dir(dir, &s, &err)) {
        doctor_check *c = add(r, "model", DOC_FAIL, "%s", err.msg);
        set_fix(c, "a weight file is truncated or damaged: download the checkpoint again (mtplx pull)");
        return;
    }
    int nt = st_count(s);
    double gib = st_total_bytes(s) / (1024.0 * 1024.0 * 1024.0);
    st_close(s);
    int checked = 0;
    char bad[256] = "";
    int mism = checksums ? verify_blobs(dir, &checked, bad, sizeof bad) : -1;
    if (mism > 0) {
        doctor_check *c = add(r, "model", DOC_FAIL, "%s (%s): %d of %d files differ from their sha256: %s", dir, mtype, mism, checked, bad);
        set_fix(c, "delete the damaged blobs and pull again (mtplx models rm, then mtplx pull)");
        return;
    }
    add(r, "model", DOC_OK, "%s (%s): config.json and %d tensors in valid safetensors headers, %.2f GiB%s", dir, mtype, nt, gib,
        !checksums ? "; checksums not verified (--no-checksums)"
        : checked ? "; sha256 of every hub blob matches"
                  : "; no checksum source (not an HF-cache snapshot)");
    if (checked) {
        doctor_check *c = &r->checks[r->n - 1];
        size_t l = strlen(c->detail);
        snprintf(c->detail + l, sizeof c->detail - l, " (%d files)", checked);
    }
}

static void check_port(doctor_report *r, int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        add(r, "port", DOC_WARN, "cannot create a socket: %s", strerror(errno));
        return;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* as serve binds (TIME_WAIT is no conflict) */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc = bind(fd, (struct sockaddr *)&a, sizeof a), e = errno;
    close(fd);
    if (rc == 0) {
        add(r, "port", DOC_OK, "127.0.0.1:%d is free", port);
    } else {
        doctor_check *c = add(r, "port", DOC_WARN, "127.0.0.1:%d: %s", port, strerror(e));
        set_fix(c, e == EADDRINUSE ? "another program listens there (ss -ltnp 'sport = :%d'); stop it or use serve --port N" : "use serve --port N",
                port);
    }
}

/* The nearest existing directory at or above path, into p[cap]. Returns 1 when that is path itself. */
static int nearest_dir(char *p, size_t cap, const char *path) {
    snprintf(p, cap, "%s", path);
    int exists = file_is_dir(p);
    while (!file_is_dir(p)) {
        char *sl = strrchr(p, '/');
        if (!sl || sl == p) {
            snprintf(p, cap, "/");
            break;
        }
        *sl = 0;
    }
    return exists;
}

/* The CPU backend's cache of repacked q4 / q8 weights: where, how much it holds (it grows by about a
 * quantized checkpoint's size per model and is never trimmed), whether a load can write it. */
static void check_pack_cache(doctor_report *r) {
    char dir[PATH_MAX], p[PATH_MAX];
    be_cpu_pack_cache_dir(dir, sizeof dir);
    if (!dir[0]) {
        add(r, "pack_cache", DOC_OK, "off (MTPLX_PACK_CACHE=0): every load repacks q4 / q8 weights");
        return;
    }
    int exists = nearest_dir(p, sizeof p, dir), files = 0;
    double bytes = 0;
    DIR *d = exists ? opendir(dir) : NULL;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        struct stat st;
        char f[PATH_MAX + 256];
        snprintf(f, sizeof f, "%s/%s", dir, e->d_name);
        if (n > 6 && !strcmp(e->d_name + n - 6, ".qpack") && stat(f, &st) == 0) files++, bytes += (double)st.st_size;
    }
    if (d) closedir(d);
    int writable = access(p, W_OK | X_OK) == 0;
    doctor_check *c = add(r, "pack_cache", writable ? DOC_OK : DOC_WARN,
                          "%s%s: %d files, %.*f %s of repacked q4 / q8 weights, %s", dir, exists ? "" : " (not created yet)",
                          files, bytes < 1e9 ? 0 : 2, bytes < 1e9 ? bytes / 1e6 : bytes / 1e9, bytes < 1e9 ? "MB" : "GB",
                          writable ? "writable (deleting it only makes the next loads repack; MTPLX_PACK_CACHE=0 turns it off)"
                                   : "not writable");
    if (!writable) set_fix(c, "every load repacks: make %s writable or set MTPLX_PACK_CACHE to a writable directory", p);
}

static void check_cache(doctor_report *r, const char *cache) {
    char dir[PATH_MAX];
    mtplx_err err = {0};
    if (!cache) {
        if (hub_cache_dir(dir, sizeof dir, &err)) {
            doctor_check *c = add(r, "cache", DOC_WARN, "%s", err.msg);
            set_fix(c, "set HF_HOME or HF_HUB_CACHE");
            return;
        }
        cache = dir;
    }
    /* the nearest existing ancestor: pull creates the rest */
    char p[PATH_MAX];
    int exists = nearest_dir(p, sizeof p, cache);
    struct statvfs vs;
    double free_gib = statvfs(p, &vs) == 0 ? (double)vs.f_bavail * vs.f_frsize / (1024.0 * 1024.0 * 1024.0) : -1;
    int writable = access(p, W_OK | X_OK) == 0;
    doctor_status st = !writable ? DOC_FAIL : free_gib >= 0 && free_gib < 10 ? DOC_WARN : DOC_OK;
    doctor_check *c = add(r, "cache", st, "%s%s: %.1f GiB free, %s", cache, exists ? "" : " (not created yet)", free_gib,
                          writable ? "writable" : "not writable");
    if (!writable) set_fix(c, "make %s writable for this user, or point HF_HUB_CACHE elsewhere", p);
    else if (st == DOC_WARN) set_fix(c, "free some space (mtplx models rm ORG/NAME) or point HF_HUB_CACHE at a bigger disk");
}

doctor_status doctor_run(const doctor_opts *o, doctor_report *r) {
    memset(r, 0, sizeof *r);
    check_cpu(r);
    check_memory(r, o->model_dir);
    check_huge_pages(r);
    check_env(r);
    check_threads(r);
    check_model(r, o->model_dir, o->checksums);
    check_port(r, o->port);
    check_cache(r, o->cache_dir);
    check_pack_cache(r);
    doctor_status worst = DOC_OK;
    for (int i = 0; i < r->n; i++)
        if (r->checks[i].status > worst) worst = r->checks[i].status;
    return worst;
}
