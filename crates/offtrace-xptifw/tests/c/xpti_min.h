/* Minimal C/C++ view of the XPTI 2026.2 ABI used by offtrace's dispatcher tests (independent of
 * the Intel headers so the tests build without the SYCL wheel). Layouts: docs/reference/xpti-abi.md §4, §7. */
#ifndef OFFTRACE_XPTI_MIN_H
#define OFFTRACE_XPTI_MIN_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#include <unordered_map>
extern "C" {
#endif

typedef int32_t xpti_result_t;
#define XR_SUCCESS 0
#define XR_FALSE 1
#define XR_FAIL ((int32_t)0x80004001u)
#define XR_DUPLICATE ((int32_t)0x80004003u)
#define XR_NOTFOUND ((int32_t)0x80004004u)
#define XR_UNDELETE ((int32_t)0x80004005u)
#define XR_INVALIDARG ((int32_t)0x80004006u)

typedef struct { uint64_t p1, p2, p3; } xt_uid_t;
typedef struct {
  const char *name;
  const char *stack_trace;
  const char *source_file;
  uint32_t line_no;
  uint32_t column_no;
  const void *code_ptr_va;
  uint64_t internal;
  uint64_t flags;
  xt_uid_t uid;
} xt_payload_t;

typedef struct xt_event {
  uint64_t unique_id, data_id, instance_id;
  uint16_t event_type, activity_type;
  uint32_t unused;
  uint64_t source_id, target_id;
  xt_payload_t *payload;
#ifdef __cplusplus
  std::unordered_map<uint32_t, int32_t> metadata;
#else
  unsigned char metadata[56];
#endif
  void *global_user_data;
  uint64_t flags;
} xt_event_t;

typedef struct { size_t size; const char *data; uint8_t type; } xt_object_t;
typedef void (*xt_cb_t)(uint16_t, xt_event_t *, xt_event_t *, uint64_t, const void *);

void xptiFrameworkInitialize(void);
void xptiFrameworkFinalize(void);
xpti_result_t xptiInitialize(const char *, uint32_t, uint32_t, const char *);
void xptiFinalize(const char *);
uint64_t xptiGetUniversalId(void);
void xptiSetUniversalId(uint64_t);
xpti_result_t xptiGetStashedTuple(char **, uint64_t *);
xpti_result_t xptiStashTuple(const char *, uint64_t);
void xptiUnstashTuple(void);
uint64_t xptiGetUniqueId(void);
uint32_t xptiRegisterString(const char *, char **);
const char *xptiLookupString(uint32_t);
int32_t xptiRegisterObject(const char *, size_t, uint8_t);
xt_object_t xptiLookupObject(int32_t);
uint64_t xptiRegisterPayload(xt_payload_t *);
uint8_t xptiRegisterStream(const char *);
xpti_result_t xptiUnregisterStream(const char *);
uint16_t xptiRegisterUserDefinedTracePoint(const char *, uint8_t);
uint16_t xptiRegisterUserDefinedEventType(const char *, uint8_t);
xt_event_t *xptiMakeEvent(const char *, xt_payload_t *, uint16_t, int32_t, uint64_t *);
const xt_event_t *xptiFindEvent(uint64_t);
const xt_payload_t *xptiQueryPayload(xt_event_t *);
const xt_payload_t *xptiQueryPayloadByUID(uint64_t);
xpti_result_t xptiRegisterCallback(uint8_t, uint16_t, xt_cb_t);
xpti_result_t xptiUnregisterCallback(uint8_t, uint16_t, xt_cb_t);
xpti_result_t xptiNotifySubscribers(uint8_t, uint16_t, xt_event_t *, xt_event_t *, uint64_t, const void *);
xpti_result_t xptiAddMetadata(xt_event_t *, const char *, int32_t);
void *xptiQueryMetadata(xt_event_t *);
bool xptiTraceEnabled(void);
bool xptiCheckTraceEnabled(uint8_t, uint16_t);
void xptiReset(void);
void xptiForceSetTraceEnabled(bool);
const void *xptiLookupPayload(uint64_t);
const void *xptiLookupEvent(uint64_t);
void *xptiCreateTracepoint(const char *, const char *, uint32_t, uint32_t, void *);
xpti_result_t xptiDeleteTracepoint(void *);
const void *xptiGetTracepointScopeData(void);
xpti_result_t xptiSetTracepointScopeData(void *);
void xptiUnsetTracepointScopeData(void);
const void *xptiRegisterTracepointScope(const char *, const char *, uint32_t, uint32_t, void *);
uint8_t xptiGetDefaultStreamID(void);
xpti_result_t xptiSetDefaultStreamID(uint8_t);
uint16_t xptiGetDefaultEventType(void);
xpti_result_t xptiSetDefaultEventType(uint16_t);
uint16_t xptiGetDefaultTraceType(void);
xpti_result_t xptiSetDefaultTraceType(uint16_t);
void xptiEnableTracepointScopeNotification(bool);
bool xptiCheckTracepointScopeNotification(void);
void xptiReleaseEvent(xt_event_t *);
uint8_t xptiGetEffectiveStreamDetailLevel(uint8_t);

#ifdef __cplusplus
}

struct xpti_payload_t {
  virtual ~xpti_payload_t() {}
  virtual const char *name() const = 0;
  virtual const char *source_file() const = 0;
  virtual uint32_t line_no() const = 0;
  virtual uint32_t column_no() const = 0;
  virtual uint64_t payload_flags() const = 0;
  virtual int32_t name_string_id() const = 0;
  virtual int32_t file_string_id() const = 0;
  virtual uint64_t uid64() const = 0;
  virtual bool is_valid() const = 0;
  virtual xt_payload_t *payload_ref() = 0;
};
struct xpti_metadata_t {
  virtual ~xpti_metadata_t() {}
  virtual int32_t first_item(char **key, int32_t &value) = 0;
  virtual int32_t next_item(char **key, int32_t &value) = 0;
  virtual int32_t add_item(const char *key, int32_t value) = 0;
  virtual size_t count() = 0;
};
struct xpti_trace_event_t {
  virtual ~xpti_trace_event_t() {}
  virtual xpti_payload_t *payload() = 0;
  virtual xpti_metadata_t *metadata() = 0;
  virtual uint64_t uid64() const = 0;
  virtual uint64_t instance() const = 0;
  virtual uint16_t event_type() const = 0;
  virtual uint16_t activity_type() const = 0;
  virtual uint64_t source_uid64() const = 0;
  virtual uint64_t target_uid64() const = 0;
  virtual uint64_t event_flags() const = 0;
  virtual void set_activity_type(int type) = 0;
  virtual void set_event_type(uint16_t type) = 0;
  virtual xt_payload_t *payload_ref() = 0;
  virtual xt_event_t *event_ref() = 0;
};
struct xpti_tracepoint_t {
  virtual ~xpti_tracepoint_t() {}
  virtual xpti_payload_t *payload() = 0;
  virtual xpti_metadata_t *metadata() = 0;
  virtual xpti_trace_event_t *event() = 0;
  virtual uint64_t uid64() const = 0;
  virtual uint64_t instance() const = 0;
  virtual xt_event_t *event_ref() = 0;
  virtual xt_payload_t *payload_ref() = 0;
};
static_assert(sizeof(xt_event_t) == 128, "event layout");
static_assert(offsetof(xt_event_t, metadata) == 56, "map offset");
#else
_Static_assert(sizeof(xt_event_t) == 128, "event layout");
_Static_assert(sizeof(xt_payload_t) == 80, "payload layout");
#endif

#define PF_NAME 0x1u
#define PF_FILE 0x2u
#define PF_CODE 0x4u
#define PF_LINE 0x8u
#define PF_COL 0x10u
#endif
