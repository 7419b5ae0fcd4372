/* Calls every XPTI export with null and garbage (but mapped) arguments: the dispatcher must
 * answer with error codes, never crash. Garbage here means invalid IDs, out-of-range values,
 * pointers to random bytes and objects that are not the dispatcher's. */
#include "xpti_min.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long s_rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { s_rng ^= s_rng << 13; s_rng ^= s_rng >> 7; s_rng ^= s_rng << 17; return s_rng; }

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 2000;
  static unsigned char junk[4096];
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)rnd();
  junk[sizeof junk - 1] = 0; /* keep string reads bounded */
  xt_event_t junk_event; /* a zeroed event: unique_id 0, no flags, empty (all-zero) map words */
  memset(&junk_event, 0, sizeof junk_event);
  char *out = NULL;
  uint64_t v = 0;
  int failures = 0;
  xptiFrameworkInitialize();
  for (int r = 0; r < rounds; r++) {
    uint64_t g = rnd();
    void *gp = junk + (g % 2048);
    /* nulls */
    if (xptiInitialize(NULL, 1, 0, NULL) != XR_INVALIDARG) failures++;
    xptiFinalize(NULL);
    if (xptiGetStashedTuple(NULL, NULL) != XR_INVALIDARG) failures++;
    if (xptiStashTuple(NULL, g) != XR_FAIL) failures++;
    if (xptiRegisterString(NULL, NULL) != 0xFFFFFFFFu) failures++;
    if (xptiRegisterObject(NULL, g, (uint8_t)g) != -1) failures++;
    if (xptiRegisterPayload(NULL) != 0) failures++;
    if (xptiRegisterStream(NULL) != 255) failures++;
    if (xptiUnregisterStream(NULL) != XR_INVALIDARG) failures++;
    if (xptiRegisterUserDefinedTracePoint(NULL, 1) != 0) failures++;
    if (xptiRegisterUserDefinedEventType(NULL, 1) != 0) failures++;
    if (xptiMakeEvent(NULL, NULL, 0, 0, NULL) != NULL) failures++;
    if (xptiQueryPayload(NULL) != NULL) failures++;
    if (xptiRegisterCallback((uint8_t)g, (uint16_t)(g >> 8), NULL) != XR_INVALIDARG) failures++;
    if (xptiUnregisterCallback((uint8_t)g, (uint16_t)(g >> 8), NULL) != XR_INVALIDARG) failures++;
    if (xptiAddMetadata(NULL, NULL, 0) != XR_INVALIDARG) failures++;
    if (xptiQueryMetadata(NULL) != NULL) failures++;
    if (xptiDeleteTracepoint(NULL) != XR_INVALIDARG) failures++;
    if (xptiSetTracepointScopeData(NULL) != XR_INVALIDARG) failures++;
    xptiReleaseEvent(NULL);
    /* garbage ids and values */
    (void)xptiLookupString((uint32_t)g);
    xt_object_t o = xptiLookupObject((int32_t)g);
    if (o.size == 0 && o.data == NULL) failures++;
    if (xptiFindEvent(g) != NULL && (g & 7)) failures++;
    (void)xptiQueryPayloadByUID(g);
    (void)xptiLookupPayload(g);
    (void)xptiLookupEvent(g);
    (void)xptiLookupEvent((uint64_t)(uintptr_t)gp);
    (void)xptiCheckTraceEnabled((uint8_t)g, (uint16_t)(g >> 8));
    (void)xptiGetEffectiveStreamDetailLevel((uint8_t)g);
    (void)xptiSetDefaultStreamID((uint8_t)g);
    (void)xptiSetDefaultEventType((uint16_t)g);
    (void)xptiSetDefaultTraceType((uint16_t)g);
    xptiSetUniversalId(g);
    (void)xptiGetUniversalId();
    /* garbage pointers to mapped memory that is not the dispatcher's */
    if (xptiDeleteTracepoint(gp) != XR_INVALIDARG) failures++;
    if (xptiSetTracepointScopeData(gp) != XR_INVALIDARG) failures++;
    (void)xptiGetTracepointScopeData();
    if (xptiNotifySubscribers((uint8_t)g, (uint16_t)(g >> 8), NULL, NULL, g, NULL) == XR_SUCCESS) failures++;
    xptiReleaseEvent(&junk_event);
    (void)xptiQueryPayload(&junk_event);
    (void)xptiRegisterString((const char *)gp, &out);
    (void)xptiRegisterObject((const char *)gp, g % 64, (uint8_t)g);
    (void)xptiRegisterStream((const char *)gp);
    (void)xptiRegisterUserDefinedTracePoint((const char *)gp, (uint8_t)g);
    xt_payload_t p;
    memcpy(&p, junk + (g % 1024), sizeof p);
    p.flags &= ~(uint64_t)(PF_NAME | PF_FILE | 0x20u); /* garbage pointers are not flagged valid */
    p.name = p.source_file = p.stack_trace = NULL;
    uint64_t inst = 0;
    xt_event_t *e = xptiMakeEvent((const char *)gp, &p, (uint16_t)g, (int32_t)g, &inst);
    if (e) xptiReleaseEvent(e);
    void *tp = xptiCreateTracepoint((const char *)gp, NULL, (uint32_t)g, (uint32_t)(g >> 32), gp);
    if (!tp || xptiDeleteTracepoint(tp) != XR_SUCCESS) failures++;
    (void)xptiGetStashedTuple(&out, &v);
    xptiUnstashTuple();
    (void)xptiGetUniqueId();
  }
  xptiFrameworkFinalize();
  printf("fuzz: %d rounds, %d unexpected results\n", rounds, failures);
  return failures != 0;
}
