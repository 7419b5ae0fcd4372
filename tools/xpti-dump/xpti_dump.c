/* xpti_dump.c -- offtrace's reference XPTI subscriber: every notification of every stream, as
 * one JSON line each.
 *
 * It exists to check offtrace's agent from the outside: loaded next to the agent through
 * XPTI_SUBSCRIBERS, both see exactly the same notifications, so the counts and the decoded fields
 * must agree. To keep that comparison meaningful it shares no code with the agent: it is plain C
 * against the public XPTI C entry points declared below, with its own reading of the structures
 * (layouts in docs/xpti-compatibility.md), and every read through a pointer the runtime hands over
 * goes through process_vm_readv, so a wrong guess yields "unreadable" rather than a crash.
 * It is a checking tool, not a fast one: one process-wide mutex around formatting.
 *
 * Environment:
 *   DUMP_FILE     output path (default dump-<pid>.jsonl in the current directory)
 *   DUMP_STREAMS  comma-separated stream names to subscribe to (default: every stream)
 *   DUMP_SKIP     comma-separated stream names not to subscribe to (the runtime sends to a debug
 *                 stream such as sycl.debug *instead of* the normal one when it has subscribers)
 *   DUMP_DETAIL   0..3, the answer to xptiQuerySubscriberStreamDetailLevel (default 3, VERBOSE)
 *
 * Lines ("k" is the kind):
 *   init    {stream, maj, min, ver, subscribed, sid}
 *   cb      {seq, t, tid, stream, sid, tt, instance, parent, event, ud, [fwa], [ud_str], [stash],
 *            [universal_id]}; parent/event: null or {uid, instance_id, event_type, activity_type,
 *            flags, payload: null or {name, source_file, line, col}, md: {key: {type, size, v}}}
 *            fwa (ur.call* 28/29): {function_id, function_name, [ret_value] at the end};
 *            mem (mem_alloc 32-35 without an event): {mem_object, pointer, size, guard_zone};
 *            ud_str: other user data that reads as printable UTF-8
 *   finish  {stream}
 *   exit    {seq, counts: {stream: {tt: n}}} from the library destructor
 * Pointers and ids are "0x..." strings (a null pointer is null); integers that fit are JSON numbers.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- the part of the XPTI ABI this subscriber uses -------------------------------------------- */

struct payload {
  const char *name, *stack_trace, *source_file;
  uint32_t line, col;
  const void *code_ptr;
  uint64_t internal, flags;
  uint64_t uid[3];
};

struct event {
  uint64_t unique_id, data_id, instance_id;
  uint16_t event_type, activity_type;
  uint32_t unused;
  uint64_t source_id, target_id;
  struct payload *payload;
  unsigned char metadata[56]; /* a libstdc++ std::unordered_map<uint32_t, int32_t> */
  void *global_user_data;
  uint64_t flags;
};

struct object { size_t size; const char *data; uint8_t type; };

struct function_with_args {
  uint32_t function_id;
  const char *function_name;
  const void *args, *ret, *user_data;
};

typedef void (*callback_t)(uint16_t, struct event *, struct event *, uint64_t, const void *);

extern uint8_t xptiRegisterStream(const char *);
extern int32_t xptiRegisterCallback(uint8_t, uint16_t, callback_t);
extern void *xptiQueryMetadata(struct event *);
extern const char *xptiLookupString(uint32_t);
extern struct object xptiLookupObject(int32_t);
extern int32_t xptiGetStashedTuple(char **, uint64_t *);
extern uint64_t xptiGetUniversalId(void);

enum { VT_BINARY, VT_STRING, VT_SIGNED, VT_UNSIGNED, VT_FLOAT, VT_BOOL };  /* metadata value types */
enum { TT_FUNCTION_WITH_ARGS_BEGIN = 28, TT_FUNCTION_WITH_ARGS_END = 29, TT_MEM_ALLOC_BEGIN = 32, TT_MEM_RELEASE_END = 35,
       TT_SIGNAL = 16 };

/* ---- state --------------------------------------------------------------------------------------- */

#define STREAMS 32
#define TYPES 4096 /* trace types are 16 bit; the user-defined ones used here stay below 0x1000 */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static uint64_t seq;
static bool closed;
static struct { char name[128]; uint8_t sid; bool used; uint64_t counts[TYPES]; } streams[STREAMS];

/* ---- reading the application's memory without trusting it ---------------------------------------- */

/* Copies up to n bytes at p; returns how many could be read (0 when p is not readable). */
static size_t peek(const void *p, void *dst, size_t n) {
  if (!p || !n) return 0;
  struct iovec local = {dst, n}, remote = {(void *)p, n};
  ssize_t r = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (r > 0) return (size_t)r;
  /* the range may cross into an unmapped page: fall back to what lies before the boundary */
  size_t to_page = 4096 - ((uintptr_t)p & 4095);
  if (to_page >= n) return 0;
  return peek(p, dst, to_page);
}

/* Whether buf[0..n) is well-formed UTF-8 (no overlong forms, no surrogates). */
static bool utf8(const char *buf, size_t n) {
  const unsigned char *p = (const unsigned char *)buf, *end = p + n;
  while (p < end) {
    unsigned c = *p++;
    int more = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
    if (more < 0 || end - p < more) return false;
    unsigned cp = more == 0 ? c : more == 1 ? c & 0x1f : more == 2 ? c & 0x0f : c & 0x07;
    for (int k = 0; k < more; k++) {
      if ((p[k] & 0xc0) != 0x80) return false;
      cp = cp << 6 | (p[k] & 0x3f);
    }
    p += more;
    if ((more == 1 && cp < 0x80) || (more == 2 && cp < 0x800) || (more == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
  }
  return true;
}

/* Reads a NUL-terminated string of at most cap-1 bytes into buf; -1 when it is unreadable, not
 * terminated within cap, holds a control character other than \t \n \r, or is not UTF-8. */
static long peek_text(const char *p, char *buf, size_t cap) {
  size_t len = 0;
  while (len + 1 < cap) {
    size_t chunk = 256 - ((uintptr_t)(p + len) & 255); /* never crosses a page boundary */
    if (chunk > cap - 1 - len) chunk = cap - 1 - len;
    size_t got = peek(p + len, buf + len, chunk);
    if (!got) return -1;
    for (size_t i = 0; i < got; i++) {
      unsigned char c = (unsigned char)buf[len + i];
      if (c == 0) return utf8(buf, len + i) ? (long)(len + i) : -1;
      if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) return -1;
    }
    len += got;
  }
  return -1;
}

/* ---- JSON output (called with mu held) ----------------------------------------------------------- */

static void put_json_string(const char *s) {
  fputc('"', out);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
    else if (c < 0x20) fprintf(out, "\\u%04x", c);
    else fputc(c, out);
  }
  fputc('"', out);
}

static void put_text_or_null(const char *p) {
  static char buf[4096];
  if (p && peek_text(p, buf, sizeof buf) >= 0) put_json_string(buf);
  else fputs("null", out);
}

static void put_metadata(struct event *e) {
  unsigned char map[56];
  void *m = xptiQueryMetadata(e);
  fputs(",\"md\":{", out);
  /* libstdc++ hashtable: word 2 is the head of the singly linked node list; a node is
   * {next pointer, uint32_t key, int32_t value}. */
  if (m && peek(m, map, sizeof map) == sizeof map) {
    const void *node;
    memcpy(&node, map + 16, sizeof node);
    for (int n = 0; node && n < 4096; n++) {
      unsigned char nd[16];
      if (peek(node, nd, sizeof nd) != sizeof nd) break;
      uint32_t key;
      int32_t value;
      memcpy(&key, nd + 8, 4);
      memcpy(&value, nd + 12, 4);
      if (n) fputc(',', out);
      const char *k = xptiLookupString(key);
      if (k) put_text_or_null(k);
      else fprintf(out, "\"#%u\"", key);
      struct object o = xptiLookupObject(value);
      fprintf(out, ":{\"type\":%u,\"size\":%zu,\"v\":", o.type, o.size);
      uint64_t u = 0;
      if (o.type == VT_UNSIGNED && o.size <= 8 && o.data && peek(o.data, &u, o.size) == o.size) {
        fprintf(out, "%llu", (unsigned long long)u);
      } else if (o.type == VT_SIGNED && o.size <= 8 && o.data && peek(o.data, &u, o.size) == o.size) {
        int64_t s = o.size == 8 ? (int64_t)u : o.size == 4 ? (int32_t)u : o.size == 2 ? (int16_t)u : (int8_t)u;
        fprintf(out, "%lld", (long long)s);
      } else if (o.type == VT_STRING && o.data) {
        static char sbuf[4096];
        size_t n = o.size < sizeof sbuf - 1 ? o.size : sizeof sbuf - 1;
        n = peek(o.data, sbuf, n);
        sbuf[n] = 0;
        for (size_t i = 0; i < n; i++)
          if ((unsigned char)sbuf[i] < 0x20) sbuf[i] = ' ';
        put_json_string(sbuf);
      } else {
        fputs("null", out);
      }
      fputc('}', out);
      memcpy(&node, nd, sizeof node);
    }
  }
  fputc('}', out);
}

static void put_event(const char *tag, struct event *ep) {
  struct event e;
  fprintf(out, ",\"%s\":", tag);
  if (!ep || peek(ep, &e, sizeof e) != sizeof e) {
    fputs("null", out);
    return;
  }
  fprintf(out, "{\"uid\":\"0x%llx\",\"instance_id\":%llu,\"event_type\":%u,\"activity_type\":%u,\"flags\":\"0x%llx\","
               "\"payload\":",
          (unsigned long long)e.unique_id, (unsigned long long)e.instance_id, e.event_type, e.activity_type,
          (unsigned long long)e.flags);
  struct payload p;
  if (e.payload && peek(e.payload, &p, sizeof p) == sizeof p) {
    fputs("{\"name\":", out);
    put_text_or_null(p.name);
    fputs(",\"source_file\":", out);
    put_text_or_null(p.source_file);
    fprintf(out, ",\"line\":%u,\"col\":%u}", p.line, p.col);
  } else {
    fputs("null", out);
  }
  put_metadata(ep);
  fputc('}', out);
}

static void put_user_data(const char *stream, uint16_t tt, bool has_event, const void *ud) {
  if (!ud) {
    fputs(",\"ud\":null", out);
    return;
  }
  fprintf(out, ",\"ud\":\"0x%llx\"", (unsigned long long)(uintptr_t)ud);
  bool ur = strncmp(stream, "ur.call", 7) == 0;
  if (ur && (tt == TT_FUNCTION_WITH_ARGS_BEGIN || tt == TT_FUNCTION_WITH_ARGS_END)) {
    struct function_with_args f;
    if (peek(ud, &f, sizeof f) != sizeof f) return;
    fprintf(out, ",\"fwa\":{\"function_id\":%u,\"function_name\":", f.function_id);
    put_text_or_null(f.function_name);
    int32_t r;
    if (tt == TT_FUNCTION_WITH_ARGS_END && f.ret && peek(f.ret, &r, sizeof r) == sizeof r)
      fprintf(out, ",\"ret_value\":%d", r);
    fputc('}', out);
    return;
  }
  /* The buffer and image streams pass structs, never text. */
  if (strstr(stream, "buffer") || strstr(stream, "image")) return;
  /* Memory notifications without an event carry a mem_alloc_data_t; with one, a C string. */
  if (strstr(stream, "mem_alloc") && tt >= TT_MEM_ALLOC_BEGIN && tt <= TT_MEM_RELEASE_END && !has_event) {
    uint64_t m[4]; /* mem_object_handle, alloc_pointer, alloc_size, guard_zone_size */
    if (peek(ud, m, sizeof m) == sizeof m)
      fprintf(out, ",\"mem\":{\"mem_object\":\"0x%llx\",\"pointer\":\"0x%llx\",\"size\":%llu,\"guard_zone\":%llu}",
              (unsigned long long)m[0], (unsigned long long)m[1], (unsigned long long)m[2], (unsigned long long)m[3]);
    return;
  }
  /* A SYCL signal carries the command's UR event handle: an opaque pointer, never text. */
  if ((!strcmp(stream, "sycl") || !strcmp(stream, "sycl.debug")) && tt == TT_SIGNAL) return;
  /* Elsewhere user data that reads as printable UTF-8 text is reported as a string. */
  static char buf[4096];
  if (peek_text(ud, buf, sizeof buf) >= 0) {
    fputs(",\"ud_str\":", out);
    put_json_string(buf);
  }
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the callback: one trampoline per stream, since a callback is not told its stream ----------- */

static void on_notification(int slot, uint16_t tt, struct event *parent, struct event *ev, uint64_t instance,
                            const void *ud) {
  uint64_t t = now_ns();
  long tid = syscall(SYS_gettid);
  char *stash_key = NULL;
  uint64_t stash_value = 0;
  bool stashed = xptiGetStashedTuple(&stash_key, &stash_value) == 0 && stash_key;
  uint64_t universal = xptiGetUniversalId();
  pthread_mutex_lock(&mu);
  if (tt < TYPES) streams[slot].counts[tt]++;
  if (out && !closed) {
    fprintf(out, "{\"k\":\"cb\",\"seq\":%llu,\"t\":%llu,\"tid\":%ld,\"stream\":", (unsigned long long)++seq,
            (unsigned long long)t, tid);
    put_json_string(streams[slot].name);
    fprintf(out, ",\"sid\":%u,\"tt\":%u,\"instance\":%llu", streams[slot].sid, tt, (unsigned long long)instance);
    put_event("parent", parent);
    put_event("event", ev);
    put_user_data(streams[slot].name, tt, ev != NULL, ud);
    if (stashed) {
      fputs(",\"stash\":{\"key\":", out);
      put_text_or_null(stash_key);
      fprintf(out, ",\"value\":%llu}", (unsigned long long)stash_value);
    }
    if (universal) fprintf(out, ",\"universal_id\":\"0x%llx\"", (unsigned long long)universal);
    fputs("}\n", out);
  }
  pthread_mutex_unlock(&mu);
}

#define T(n) \
  static void on_##n(uint16_t tt, struct event *p, struct event *e, uint64_t i, const void *u) { \
    on_notification(n, tt, p, e, i, u);                                                        \
  }
T(0) T(1) T(2) T(3) T(4) T(5) T(6) T(7) T(8) T(9) T(10) T(11) T(12) T(13) T(14) T(15)
T(16) T(17) T(18) T(19) T(20) T(21) T(22) T(23) T(24) T(25) T(26) T(27) T(28) T(29) T(30) T(31)
#undef T
static const callback_t trampolines[STREAMS] = {
    on_0,  on_1,  on_2,  on_3,  on_4,  on_5,  on_6,  on_7,  on_8,  on_9,  on_10, on_11, on_12, on_13, on_14, on_15,
    on_16, on_17, on_18, on_19, on_20, on_21, on_22, on_23, on_24, on_25, on_26, on_27, on_28, on_29, on_30, on_31};

/* ---- subscriber entry points ---------------------------------------------------------------------- */

static bool listed(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; p && *p;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len == n && !strncmp(p, name, n)) return true;
    p = comma ? comma + 1 : NULL;
  }
  return false;
}

static void open_output(void) { /* with mu held */
  if (out) return;
  char def[64];
  const char *path = getenv("DUMP_FILE");
  if (!path || !*path) {
    snprintf(def, sizeof def, "dump-%d.jsonl", (int)getpid());
    path = def;
  }
  out = fopen(path, "w");
  if (out) setvbuf(out, NULL, _IOFBF, 1 << 20);
}

__attribute__((visibility("default"))) void xptiTraceInit(unsigned maj, unsigned min, const char *ver,
                                                          const char *stream) {
  if (!stream) return;
  const char *only = getenv("DUMP_STREAMS");
  bool subscribe = (!only || !*only || listed(only, stream)) && !listed(getenv("DUMP_SKIP"), stream);
  int slot = -1;
  pthread_mutex_lock(&mu);
  open_output();
  if (subscribe) {
    for (int i = 0; i < STREAMS && slot < 0; i++)
      if (streams[i].used && !strcmp(streams[i].name, stream)) slot = i;
    for (int i = 0; i < STREAMS && slot < 0; i++)
      if (!streams[i].used) {
        slot = i;
        streams[i].used = true;
        snprintf(streams[i].name, sizeof streams[i].name, "%s", stream);
      }
  }
  pthread_mutex_unlock(&mu);
  /* Registration re-enters the dispatcher: no lock of ours is held across it. */
  int registered = 0;
  uint8_t sid = 0;
  if (slot >= 0) {
    sid = xptiRegisterStream(stream);
    streams[slot].sid = sid;
    for (unsigned tt = 0; tt < 256; tt++) registered += xptiRegisterCallback(sid, (uint16_t)tt, trampolines[slot]) == 0;
    /* user-defined trace types of tools 1..15: (tool << 8) | 0x80..0xff */
    for (unsigned tool = 1; tool < 16; tool++)
      for (unsigned t = 0x80; t < 0x100; t++)
        registered += xptiRegisterCallback(sid, (uint16_t)(tool << 8 | t), trampolines[slot]) == 0;
  }
  pthread_mutex_lock(&mu);
  if (out && !closed) {
    fputs("{\"k\":\"init\",\"stream\":", out);
    put_json_string(stream);
    fprintf(out, ",\"maj\":%u,\"min\":%u,\"ver\":", maj, min);
    put_text_or_null(ver);
    fprintf(out, ",\"subscribed\":%s", slot >= 0 ? "true" : "false");
    if (slot >= 0) fprintf(out, ",\"sid\":%u,\"registered\":%d", sid, registered);
    fputs("}\n", out);
    fflush(out);
  }
  pthread_mutex_unlock(&mu);
}

__attribute__((visibility("default"))) void xptiTraceFinish(const char *stream) {
  pthread_mutex_lock(&mu);
  if (out && !closed) {
    fputs("{\"k\":\"finish\",\"stream\":", out);
    put_text_or_null(stream);
    fputs("}\n", out);
    fflush(out);
  }
  pthread_mutex_unlock(&mu);
}

__attribute__((visibility("default"))) bool xptiQuerySubscriberStreamDetailLevel(const char *stream,
                                                                                 uint8_t *level) {
  (void)stream;
  const char *d = getenv("DUMP_DETAIL");
  int v = d && *d ? atoi(d) : 3;
  if (!level || v < 0 || v > 3) return false;
  *level = (uint8_t)v;
  return true;
}

__attribute__((destructor)) static void write_exit_line(void) {
  pthread_mutex_lock(&mu);
  if (out && !closed) {
    fprintf(out, "{\"k\":\"exit\",\"seq\":%llu,\"counts\":{", (unsigned long long)seq);
    bool first_stream = true;
    for (int i = 0; i < STREAMS; i++) {
      if (!streams[i].used) continue;
      if (!first_stream) fputc(',', out);
      first_stream = false;
      put_json_string(streams[i].name);
      fputs(":{", out);
      bool first = true;
      for (int tt = 0; tt < TYPES; tt++) {
        if (!streams[i].counts[tt]) continue;
        fprintf(out, "%s\"%d\":%llu", first ? "" : ",", tt, (unsigned long long)streams[i].counts[tt]);
        first = false;
      }
      fputc('}', out);
    }
    fputs("}}\n", out);
    fclose(out);
    closed = true;
  }
  pthread_mutex_unlock(&mu);
}
