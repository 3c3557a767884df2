/* file.h — whole-file reads and read-only mappings. */
#ifndef MTPLX_BASE_FILE_H
#define MTPLX_BASE_FILE_H

#include <stddef.h>
#include "err.h"

/* Read the whole file into a NUL-terminated heap buffer (caller frees). *len gets the byte count
 * (excluding the NUL) when len is non-NULL. Returns NULL with err set on failure. */
char *file_read_all(const char *path, size_t *len, mtplx_err *err);

/* A read-only mmap of a whole file. */
typedef struct {
    const unsigned char *data;  /* mapping start, NULL for an empty file */
    size_t size;                /* bytes */
} file_map;

/* Map path read-only. Returns 0 or an error code. Release with file_unmap. */
int file_map_open(const char *path, file_map *out, mtplx_err *err);
void file_unmap(file_map *m);

/* 1 if path is an existing directory / regular file. */
int file_is_dir(const char *path);
int file_exists(const char *path);

#endif
