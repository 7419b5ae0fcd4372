/* Concurrency stress: threads notifying while others register and unregister callbacks, create
 * and delete tracepoints, add metadata and register strings. Checks no crash, that a callback
 * that stays registered throughout sees every notification, and that counts add up. */
#include "xpti_min.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define NOTIFIERS 2
#define ITER 200000
static atomic_long g_steady, g_flappy;
static atomic_int g_stop;
static uint8_t g_stream;
static xt_event_t *g_ev;

static void cb_steady(uint16_t t, xt_event_t *p, xt_event_t *e, uint64_t i, const void *u) {
  (void)t; (void)p; (void)i; (void)u;
  if (e) atomic_fetch_add_explicit(&g_steady, 1, memory_order_relaxed);
}
static void cb_flappy(uint16_t t, xt_event_t *p, xt_event_t *e, uint64_t i, const void *u) {
  (void)t; (void)p; (void)e; (void)i; (void)u;
  atomic_fetch_add_explicit(&g_flappy, 1, memory_order_relaxed);
}
#define DEF_CB(n) static void cb_x##n(uint16_t t, xt_event_t *p, xt_event_t *e, uint64_t i, const void *u) { (void)t; (void)p; (void)e; (void)i; (void)u; }
DEF_CB(0) DEF_CB(1) DEF_CB(2) DEF_CB(3) DEF_CB(4) DEF_CB(5) DEF_CB(6) DEF_CB(7) DEF_CB(8) DEF_CB(9)
DEF_CB(10) DEF_CB(11) DEF_CB(12) DEF_CB(13) DEF_CB(14) DEF_CB(15) DEF_CB(16) DEF_CB(17) DEF_CB(18) DEF_CB(19)
static xt_cb_t g_extra[20] = {cb_x0, cb_x1, cb_x2, cb_x3, cb_x4, cb_x5, cb_x6, cb_x7, cb_x8, cb_x9,
                              cb_x10, cb_x11, cb_x12, cb_x13, cb_x14, cb_x15, cb_x16, cb_x17, cb_x18, cb_x19};

static void *notifier(void *arg) {
  (void)arg;
  for (int i = 0; i < ITER; i++) {
    if (xptiCheckTraceEnabled(g_stream, 10)) xptiNotifySubscribers(g_stream, 10, NULL, g_ev, (uint64_t)i, NULL);
    else return (void *)1; /* the steady callback keeps the check true */
  }
  return NULL;
}

static void *flipper(void *arg) {
  (void)arg;
  int k = 0;
  while (!atomic_load(&g_stop)) {
    xptiRegisterCallback(g_stream, 10, cb_flappy);
    xptiRegisterCallback(g_stream, 10, g_extra[k % 20]); /* grows the list past its inline capacity */
    xptiUnregisterCallback(g_stream, 10, cb_flappy);
    xptiUnregisterCallback(g_stream, 10, g_extra[k % 20]);
    k++;
  }
  return NULL;
}

static void *creator(void *arg) {
  (void)arg;
  char buf[48], *out;
  int i = 0;
  while (!atomic_load(&g_stop)) {
    void *tp = xptiCreateTracepoint("stress_fn", "stress.c", (uint32_t)(i % 500) + 1, 1, NULL);
    /* the event of a tracepoint interface: slot 7 (event_ref) of its vtable */
    typedef xt_event_t *(*event_ref_fn)(void *);
    event_ref_fn event_ref = (*(event_ref_fn **)tp)[7];
    if (xptiAddMetadata(event_ref(tp), "stress_key", i) != XR_SUCCESS) return (void *)1;
    if (xptiDeleteTracepoint(tp) != XR_SUCCESS) return (void *)1;
    snprintf(buf, sizeof buf, "stress.%d", i++);
    if (xptiRegisterString(buf, &out) == 0xFFFFFFFFu) return (void *)1;
  }
  return NULL;
}

int main(void) {
  xptiForceSetTraceEnabled(true);
  g_stream = xptiRegisterStream("stress");
  xt_payload_t p = {0};
  p.name = "stress_event";
  p.flags = PF_NAME;
  uint64_t inst;
  g_ev = xptiMakeEvent("stress_event", &p, 2, 1, &inst);
  xptiRegisterCallback(g_stream, 10, cb_steady);
  pthread_t n[NOTIFIERS], f, c;
  pthread_create(&f, NULL, flipper, NULL);
  pthread_create(&c, NULL, creator, NULL);
  for (int i = 0; i < NOTIFIERS; i++) pthread_create(&n[i], NULL, notifier, NULL);
  int bad = 0;
  for (int i = 0; i < NOTIFIERS; i++) {
    void *r;
    pthread_join(n[i], &r);
    bad += r != NULL;
  }
  atomic_store(&g_stop, 1);
  void *rf, *rc;
  pthread_join(f, &rf);
  pthread_join(c, &rc);
  bad += rf != NULL;
  bad += rc != NULL;
  long steady = atomic_load(&g_steady);
  bad += steady != (long)NOTIFIERS * ITER;
  printf("stress: steady=%ld (expected %ld) flappy=%ld errors=%d\n", steady, (long)NOTIFIERS * ITER, (long)atomic_load(&g_flappy), bad);
  return bad != 0;
}
