// Built by scripts/overhead-breakdown.py (configuration null-sub): cc -O2 -shared -fPIC -o libnullsub.so null-subscriber.c -L<venv>/lib -l:libxptifw.so.1
// An XPTI subscriber that subscribes like the offtrace agent (same streams, every named trace
// point type, detail level normal) and does nothing in its callbacks: the runtime's own cost of
// being observed.
#include <stdint.h>
#include <string.h>
#include <stdbool.h>
typedef struct trace_event_data_t trace_event_data_t;
typedef void (*cb_t)(uint16_t, trace_event_data_t *, trace_event_data_t *, uint64_t, const void *);
extern uint8_t xptiRegisterStream(const char *);
extern int xptiRegisterCallback(uint8_t, uint16_t, cb_t);
static void empty(uint16_t t, trace_event_data_t *p, trace_event_data_t *e, uint64_t i, const void *u) {}
static const uint16_t types[] = {0,2,4,6,8,9,10,11,12,13,14,15,16,18,19,20,21,22,23,24,25,26,28,29,32,33,34,35,36,37,38,39,40,42,43,126,128};
void xptiTraceInit(unsigned major, unsigned minor, const char *version, const char *stream) {
  if (!stream) return;
  const char *want[] = {"sycl", "sycl.experimental.buffer", "sycl.experimental.image", "sycl.experimental.mem_alloc", "ur.call"};
  for (unsigned w = 0; w < 5; w++) {
    if (strcmp(stream, want[w]) == 0) {
      uint8_t id = xptiRegisterStream(stream);
      for (unsigned k = 0; k < sizeof types / sizeof types[0]; k++) xptiRegisterCallback(id, types[k], empty);
    }
  }
}
void xptiTraceFinish(const char *stream) {}
bool xptiQuerySubscriberStreamDetailLevel(const char *stream, uint8_t *level) { if (level) *level = 2; return level != 0; }
