/* web.h — the browser UI's files (web/ at the repository root), compiled into the binary by
 * scripts/embed-web.sh, and how URLs map to them: `/` is the chat page, `/dashboard` the live
 * dashboard, `/<name>` any other file of web/. Nothing is read from disk at run time. */
#ifndef MTPLX_SERVER_WEB_H
#define MTPLX_SERVER_WEB_H

#include <stddef.h>

typedef struct {
    const char          *name;  /* file name inside web/, e.g. "chat.js"; NULL ends WEB_FILES */
    const unsigned char *data;  /* the file's bytes (NUL-terminated for convenience) */
    size_t               len;   /* bytes, without the terminator */
} web_file;

/* The embedded files, ending with a {NULL} entry (generated: build/gen/web_files.c). */
extern const web_file WEB_FILES[];

/* The file served at url (its path, no query string), or NULL when url is not a UI page. */
const web_file *web_file_for_url(const char *url);

/* MIME type for a file name by its extension ("application/octet-stream" when unknown). */
const char *web_content_type(const char *name);

/* Total bytes of the embedded files (what a browser downloads for both pages). */
size_t web_total_bytes(void);

/* Process gauges in Prometheus text (resident memory, CPU seconds, threads) appended to the
 * /metrics exposition so the dashboard can chart memory. Returns a malloc'd string (caller frees)
 * or NULL when /proc is unreadable. */
char *web_process_metrics(void);

#endif
