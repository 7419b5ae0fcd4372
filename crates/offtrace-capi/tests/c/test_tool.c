/* A tool for the loader tests. TEST_TOOL_MODE: "ok" (default), "decline" (configure returns
 * NULL), "fail" (initialize returns 7), "self_finalize" (finalizes itself in initialize). */
#include <offtrace/offtrace.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static offtrace_context_id_t ctx;
static int calls;
static const char* mode(void) { const char* m = getenv("TEST_TOOL_MODE"); return m ? m : "ok"; }
static offtrace_client_id_t me;

static void on_call(offtrace_callback_tracing_record_t r, offtrace_user_data_t* u, void* d) {
    (void)r; (void)u; (void)d;
    calls++;
}

static int tool_init(offtrace_client_finalize_t fini, void* data) {
    printf("init %s data=%s ctx_ok=%d\n", me.name, (const char*)data, offtrace_create_context(&ctx) == 0);
    offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_UR_API, NULL, 0, on_call, NULL);
    offtrace_start_context(ctx);
    if (strcmp(mode(), "fail") == 0) return 7;
    if (strcmp(mode(), "self_finalize") == 0) fini(me);
    return 0;
}

static void tool_fini(void* data) {
    offtrace_destroy_context(ctx);
    printf("fini %s data=%s calls=%d\n", me.name, (const char*)data, calls);
    fflush(stdout);
}

static offtrace_tool_configure_result_t result = {sizeof(offtrace_tool_configure_result_t), tool_init, tool_fini,
                                                  (void*)"hello"};

offtrace_tool_configure_result_t* offtrace_configure(uint32_t version, const char* runtime, uint32_t priority,
                                                     offtrace_client_id_t* id) {
    printf("configure version=%u runtime=%s priority=%u handle=%u\n", version, runtime, priority, id->handle);
    if (strcmp(mode(), "decline") == 0) return NULL;
    id->name = "test-tool";
    me = *id;
    return &result;
}
