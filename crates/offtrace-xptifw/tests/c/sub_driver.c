/* Drives a dispatcher with XPTI_SUBSCRIBERS set (by the Rust test): prints what it observes. */
#include "xpti_min.h"
#include <stdio.h>

int main(void) {
  xptiFrameworkInitialize();
  printf("trace_enabled=%d\n", (int)xptiTraceEnabled());
  uint8_t s = xptiRegisterStream("drv.stream");
  printf("init=%d\n", xptiInitialize("drv.stream", 9, 0, "drv 9.0"));
  printf("detail=%d\n", (int)xptiGetEffectiveStreamDetailLevel(s));
  printf("check=%d\n", (int)xptiCheckTraceEnabled(s, 10));
  xt_payload_t p = {0};
  p.name = "drv";
  p.flags = PF_NAME;
  uint64_t inst;
  xt_event_t *e = xptiMakeEvent("drv", &p, 2, 1, &inst);
  printf("notify=%d\n", xptiNotifySubscribers(s, 10, NULL, e, 1, NULL));
  xptiFinalize("drv.stream");
  xptiFinalize("drv.stream");
  printf("check_after_finalize=%d\n", (int)xptiCheckTraceEnabled(s, 10));
  xptiFrameworkFinalize();
  return 0;
}
