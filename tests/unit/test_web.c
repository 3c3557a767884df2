/* test_web.c — the embedded browser UI (src/server/web.h): URL to file mapping, that each embedded
 * file is byte-identical to web/ (the build step loses nothing), content types, and the process
 * gauges appended to /metrics. (tests/integration/webui.sh drives the pages in a browser.) */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/base/file.h"
#include "../../src/server/web.h"
#include "test.h"

TEST(test_urls_map_to_pages_and_files) {
    const web_file *f = web_file_for_url("/");
    CHECK(f && !strcmp(f->name, "index.html"));
    f = web_file_for_url("/index.html");
    CHECK(f && !strcmp(f->name, "index.html"));
    f = web_file_for_url("/dashboard");
    CHECK(f && !strcmp(f->name, "dashboard.html"));
    f = web_file_for_url("/chat.js");
    CHECK(f && !strcmp(f->name, "chat.js"));
    /* nothing outside the embedded set: no API path, no traversal, no prefix match */
    CHECK(web_file_for_url("/v1/models") == NULL);
    CHECK(web_file_for_url("/../Makefile") == NULL);
    CHECK(web_file_for_url("/chat.js/x") == NULL);
    CHECK(web_file_for_url("/chat") == NULL);
    CHECK(web_file_for_url("") == NULL);
    CHECK(web_file_for_url(NULL) == NULL);
}

TEST(test_content_types) {
    CHECK_STR(web_content_type("index.html"), "text/html; charset=utf-8");
    CHECK_STR(web_content_type("chat.js"), "text/javascript; charset=utf-8");
    CHECK_STR(web_content_type("app.css"), "text/css; charset=utf-8");
    CHECK_STR(web_content_type("favicon.svg"), "image/svg+xml");
    CHECK_STR(web_content_type("README"), "application/octet-stream");
}

/* Every file of web/ is embedded, byte for byte, and nothing else is. */
TEST(test_embedded_files_equal_web_folder) {
    DIR *d = opendir("web");
    if (!d) {
        SKIP("web/ not found from the working directory (run from the repository root)");
        return;
    }
    int on_disk = 0;
    size_t total = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        on_disk++;
        char path[512], url[300];
        snprintf(path, sizeof path, "web/%s", e->d_name);
        snprintf(url, sizeof url, "/%s", e->d_name);
        mtplx_err err;
        size_t len = 0;
        char *bytes = file_read_all(path, &len, &err);
        const web_file *f = web_file_for_url(url);
        CHECK_MSG(bytes && f, "%s is not embedded", path);
        if (bytes && f) {
            CHECK_INT((long)f->len, (long)len);
            CHECK_MSG(f->len == len && !memcmp(f->data, bytes, len), "%s differs from its embedded copy", path);
            CHECK_INT(f->data[f->len], 0);
            total += len;
        }
        free(bytes);
    }
    closedir(d);
    int embedded = 0;
    for (const web_file *f = WEB_FILES; f->name; f++) embedded++;
    CHECK_INT(embedded, on_disk);
    CHECK_INT((long)web_total_bytes(), (long)total);
}

TEST(test_process_metrics) {
    char *m = web_process_metrics();
    CHECK(m != NULL);
    if (!m) return;
    const char *p = strstr(m, "\nprocess_resident_memory_bytes ");
    CHECK(p != NULL);
    if (p) CHECK(strtoll(p + 31, NULL, 10) > 1 << 20); /* this process holds more than 1 MiB */
    CHECK(strstr(m, "# TYPE process_cpu_seconds_total counter\n") != NULL);
    CHECK(strstr(m, "\nprocess_threads ") != NULL);
    free(m);
}

int main(void) {
    RUN(test_urls_map_to_pages_and_files);
    RUN(test_content_types);
    RUN(test_embedded_files_equal_web_folder);
    RUN(test_process_metrics);
    return TEST_SUMMARY();
}
