/* web.c — serves the embedded browser UI (web.h) and the process gauges for the dashboard. */
#include "web.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/sbuf.h"

const web_file *web_file_for_url(const char *url) {
    if (!url || url[0] != '/') return NULL;
    const char *name = url + 1;
    if (!strcmp(url, "/") || !strcmp(url, "/index.html")) name = "index.html";
    else if (!strcmp(url, "/dashboard") || !strcmp(url, "/dashboard/")) name = "dashboard.html";
    for (const web_file *f = WEB_FILES; f->name; f++)
        if (!strcmp(f->name, name)) return f;
    return NULL;
}

const char *web_content_type(const char *name) {
    static const char *const TYPES[][2] = {
        {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},   {".svg", "image/svg+xml"},
        {".json", "application/json"},         {".png", "image/png"},
    };
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < sizeof TYPES / sizeof *TYPES; i++)
        if (!strcmp(dot, TYPES[i][0])) return TYPES[i][1];
    return "application/octet-stream";
}

size_t web_total_bytes(void) {
    size_t n = 0;
    for (const web_file *f = WEB_FILES; f->name; f++) n += f->len;
    return n;
}

/* The value after `key` in /proc/self/status (kB units for Vm* lines), or -1. */
static long status_field(const char *text, const char *key) {
    const char *p = strstr(text, key);
    return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

char *web_process_metrics(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return NULL;
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    long rss_kb = status_field(buf, "\nVmRSS:"), hwm_kb = status_field(buf, "\nVmHWM:"), thr = status_field(buf, "\nThreads:");
    double cpu_s = -1;
    f = fopen("/proc/self/stat", "r");
    if (f) {
        unsigned long ut = 0, st = 0;
        char line[1024];
        if (fgets(line, sizeof line, f)) {
            const char *p = strrchr(line, ')'); /* fields 14, 15 (utime, stime) follow the comm in parentheses */
            if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
                cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
        }
        fclose(f);
    }
    sbuf b = {0};
    if (rss_kb >= 0)
        sbuf_printf(&b, "# HELP process_resident_memory_bytes Resident memory of the server process.\n"
                        "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %ld\n", rss_kb * 1024);
    if (hwm_kb >= 0)
        sbuf_printf(&b, "# HELP process_resident_memory_max_bytes Peak resident memory of the server process.\n"
                        "# TYPE process_resident_memory_max_bytes gauge\nprocess_resident_memory_max_bytes %ld\n", hwm_kb * 1024);
    if (cpu_s >= 0)
        sbuf_printf(&b, "# HELP process_cpu_seconds_total User and system CPU time of the server process.\n"
                        "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.2f\n", cpu_s);
    if (thr >= 0)
        sbuf_printf(&b, "# HELP process_threads Threads of the server process.\n# TYPE process_threads gauge\nprocess_threads %ld\n", thr);
    return sbuf_take(&b);
}
