/* Two (or more) threads registering NEW strings concurrently (Intel's dispatcher crashes here,
 * docs/reference/xpti-abi.md §10), then checking that every string got one id and round-trips. */
#include "xpti_min.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PER_THREAD 20000
static pthread_barrier_t g_bar;
static uint32_t g_ids[4][PER_THREAD];

static void *worker(void *arg) {
  int t = (int)(intptr_t)arg;
  char buf[64];
  char *out;
  pthread_barrier_wait(&g_bar);
  for (int i = 0; i < PER_THREAD; i++) {
    /* half the strings are shared between threads, half private */
    if (i & 1) snprintf(buf, sizeof buf, "mt.shared.%d", i);
    else snprintf(buf, sizeof buf, "mt.t%d.%d", t, i);
    g_ids[t][i] = xptiRegisterString(buf, &out);
    if (g_ids[t][i] == 0xFFFFFFFFu || strcmp(out, buf) != 0) return (void *)1;
  }
  return NULL;
}

int main(int argc, char **argv) {
  int nt = argc > 1 ? atoi(argv[1]) : 2;
  if (nt < 2 || nt > 4) nt = 2;
  pthread_t th[4];
  pthread_barrier_init(&g_bar, NULL, (unsigned)nt);
  for (int t = 0; t < nt; t++) pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
  int bad = 0;
  for (int t = 0; t < nt; t++) {
    void *r;
    pthread_join(th[t], &r);
    bad += r != NULL;
  }
  for (int t = 1; t < nt; t++)
    for (int i = 1; i < PER_THREAD; i += 2) bad += g_ids[t][i] != g_ids[0][i];
  for (int t = 0; t < nt; t++)
    for (int i = 0; i < PER_THREAD; i++) {
      const char *s = xptiLookupString(g_ids[t][i]);
      char buf[64];
      if (i & 1) snprintf(buf, sizeof buf, "mt.shared.%d", i);
      else snprintf(buf, sizeof buf, "mt.t%d.%d", t, i);
      bad += !s || strcmp(s, buf) != 0;
    }
  printf("mt_regstr: %d threads, %d errors\n", nt, bad);
  return bad != 0;
}
