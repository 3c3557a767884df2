/* fuzz_server_request.c — libFuzzer harness for the server's request validation: arbitrary bytes as
 * the body of /v1/chat/completions, /v1/completions, /v1/messages and /v1/responses go through the same parsers
 * the HTTP layer uses. Checks: no crash, no leak, no UB; a rejected request always names a status
 * 4xx/5xx and a message; an accepted chat/messages request always yields a render request with a
 * messages array. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/server/internal.h"

static srv_backend BE = {.model_id = "fuzz", .tier = "test", .ctx = 4096, .max_depth = 3};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_error_t je;
    json_t *body = json_loadb((const char *)data, size, 0, &je);
    if (!json_is_object(body)) {
        json_decref(body);
        return 0;
    }
    for (int api = 0; api < 4; api++) {
        srv_job *j = job_new();
        if (!j) abort();
        srv_reqerr e = {0};
        json_t *req = NULL;
        char *prompt = NULL;
        int think = -1, rc;
        if (api == 0) rc = openai_parse_chat(body, &BE, j, &req, &think, &e);
        else if (api == 1) rc = openai_parse_completion(body, &BE, j, &prompt, &e);
        else if (api == 2) rc = anthropic_parse(body, &BE, j, &req, &think, &e);
        else rc = responses_parse(body, &BE, j, &req, &think, &e);
        if (rc) {
            if (e.status < 400 || e.status > 599 || !e.msg[0]) abort();
        } else if (api != 1) {
            if (!json_is_array(json_object_get(req, "messages"))) abort();
            char *s = json_dumps(req, JSON_COMPACT);
            if (!s) abort();
            free(s);
        } else if (!prompt) {
            abort();
        }
        json_decref(req);
        free(prompt);
        job_unref(j);
    }
    json_decref(body);
    return 0;
}
