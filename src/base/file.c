/* file.c — see file.h. */
#define _POSIX_C_SOURCE 200809L
#include "file.h"
#include "fault.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

char *file_read_all(const char *path, size_t *len, mtplx_err *err) {
    FILE *f = fault_io_point(path) ? NULL : fopen(path, "rb");
    if (!f) {
        err_set(err, MTPLX_EIO, "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (n < cap - 1) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf) {
        err_set(err, MTPLX_ENOMEM, "%s: out of memory reading file", path);
        return NULL;
    }
    if (bad) {
        free(buf);
        err_set(err, MTPLX_EIO, "%s: read error", path);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

int file_map_open(const char *path, file_map *out, mtplx_err *err) {
    out->data = NULL;
    out->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_set(err, MTPLX_EIO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return err_set(err, MTPLX_EIO, "%s: %s", path, strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(err, MTPLX_EIO, "%s: not a regular file", path);
    }
    if (st.st_size > 0) {
        void *p = fault_io_point(path) ? MAP_FAILED : mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            close(fd);
            return err_set(err, MTPLX_EIO, "%s: mmap: %s", path, strerror(errno));
        }
        out->data = p;
        out->size = (size_t)st.st_size;
    }
    close(fd);
    return 0;
}

void file_unmap(file_map *m) {
    if (m->data) munmap((void *)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}

int file_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}
