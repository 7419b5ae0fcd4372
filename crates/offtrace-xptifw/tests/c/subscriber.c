/* A test subscriber: logs xptiTraceInit/xptiTraceFinish/detail queries to the file named by
 * $XPTIFW_TEST_LOG, registers a callback from inside xptiTraceInit (re-entrancy) and answers
 * the detail-level query with $XPTIFW_TEST_DETAIL (default 3). */
#include "xpti_min.h"
#include <stdio.h>
#include <stdlib.h>

static FILE *g_log;
static int g_calls;
static void log_line(const char *kind, const char *stream) {
  if (!g_log) {
    const char *p = getenv("XPTIFW_TEST_LOG");
    g_log = fopen(p ? p : "/dev/null", "a");
  }
  fprintf(g_log, "%s %s\n", kind, stream);
  fflush(g_log);
}
static void cb(uint16_t t, xt_event_t *p, xt_event_t *e, uint64_t i, const void *u) {
  (void)t; (void)p; (void)e; (void)i; (void)u;
  g_calls++;
}
__attribute__((visibility("default"))) void xptiTraceInit(unsigned maj, unsigned min, const char *ver, const char *stream) {
  (void)maj; (void)min; (void)ver;
  log_line("init", stream);
  uint8_t id = xptiRegisterStream(stream);
  xptiRegisterCallback(id, 10, cb);
}
__attribute__((visibility("default"))) void xptiTraceFinish(const char *stream) {
  char buf[128];
  snprintf(buf, sizeof buf, "%s calls=%d", stream, g_calls);
  log_line("finish", buf);
}
__attribute__((visibility("default"))) bool xptiQuerySubscriberStreamDetailLevel(const char *stream, uint8_t *level) {
  log_line("query", stream);
  const char *d = getenv("XPTIFW_TEST_DETAIL");
  *level = (uint8_t)(d ? atoi(d) : 3);
  return true;
}
