/* The agent's UR pair and task-graph notifications with the agent as applications load it:
 * Intel's dispatcher (dlopen'd) loads libofftrace_agent.so from XPTI_SUBSCRIBERS and calls its
 * xptiTraceInit per stream, so every thread-local access in the agent is a __tls_get_addr call.
 * The same notifications as crates/offtrace-agent/tests/cost.rs (which links the agent as an
 * rlib: its thread-locals are %fs accesses there). Count only measured_batch under callgrind:
 * scripts/tls/agent-tls-count.sh. Usage: agent-notify DISPATCHER ur_pair|graph N
 * With AGENT_NOTIFY_TIME set it also prints `cpu_ns_per_iter OP X`: the calling thread's CPU
 * time (CLOCK_THREAD_CPUTIME_ID) in measured_batch, per pair or command
 * (scripts/tls/agent-time-ab.sh). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct { uint64_t p1, p2, p3; } uid128;
typedef struct {
  const char *name, *stack_trace, *source_file;
  uint32_t line_no, column_no;
  const void *code_ptr_va;
  uint64_t internal, flags;
  uid128 uid;
} payload_t;
typedef struct { uint32_t function_id; const char *function_name; void *args_data, *ret_data, *user_data; } fwa_t;

typedef int (*notify_fn)(uint8_t, uint16_t, void *, void *, uint64_t, const void *);
static notify_fn notify;
static void *ur_event, *task_event;
static uint8_t ur_stream, sycl_stream;
static uint64_t vars[8] = {0x564683000000ull, 1, 0x7f001000, 0x7f002000, 4096, 0, 0, 0};
static uint64_t out_event;
static const void *params[8];
static int result;

enum { FWA_BEGIN = 28, FWA_END = 29, NODE_CREATE = 4, TASK_BEGIN = 10, TASK_END = 11, SIGNAL = 16 };

__attribute__((noinline)) static void pair(uint64_t inst) {
  fwa_t begin = {33, "urEnqueueUSMMemcpy", params, 0, 0};
  notify(ur_stream, FWA_BEGIN, 0, ur_event, inst, &begin);
  out_event = 0x564684000000ull + inst;
  fwa_t end = begin;
  end.ret_data = &result;
  notify(ur_stream, FWA_END, 0, ur_event, inst, &end);
}

__attribute__((noinline)) static void graph(uint64_t i) {
  const char *name = "command_group_node";
  notify(sycl_stream, NODE_CREATE, 0, task_event, i, name);
  notify(sycl_stream, TASK_BEGIN, 0, task_event, i, name);
  notify(sycl_stream, SIGNAL, 0, task_event, i, (const void *)(0x7f0000000000ull + i * 64));
  notify(sycl_stream, TASK_END, 0, task_event, i, name);
}

__attribute__((noinline)) void measured_batch(const char *op, uint64_t *inst, uint64_t n) {
  for (uint64_t k = 0; k < n; k++) {
    *inst += 1;
    if (op[0] == 'u') pair(*inst); else graph(*inst);
  }
}

static void *sym(void *h, const char *n) {
  void *p = dlsym(h, n);
  if (!p) { fprintf(stderr, "%s missing\n", n); exit(2); }
  return p;
}

static void *mk(void *h, const char *name) {
  void *(*make_event)(const char *, payload_t *, uint16_t, int, uint64_t *) = sym(h, "xptiMakeEvent");
  payload_t p = {name, 0, "<unknown-file>", 0, 0, 0, 0, 0x1 | 0x2 | 0x8 | 0x10, {0, 0, 0}};
  uint64_t inst = 0;
  void *e = make_event(name, &p, 2, 1, &inst);
  if (!e) { fprintf(stderr, "xptiMakeEvent\n"); exit(2); }
  return e;
}

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: %s DISPATCHER ur_pair|graph N\n", argv[0]); return 2; }
  const char *op = argv[2];
  uint64_t n = strtoull(argv[3], 0, 10);
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) { fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror()); return 2; }
  ((void (*)(int))sym(h, "xptiForceSetTraceEnabled"))(1);
  ((void (*)(void))sym(h, "xptiFrameworkInitialize"))();
  int (*init)(const char *, uint32_t, uint32_t, const char *) = sym(h, "xptiInitialize");
  init("ur.call", 0, 12, "0.12");
  init("sycl", 9, 0, "sycl 9.0");
  uint8_t (*reg_stream)(const char *) = sym(h, "xptiRegisterStream");
  int (*reg_obj)(const void *, size_t, uint8_t) = sym(h, "xptiRegisterObject");
  int (*add_md)(void *, const char *, int) = sym(h, "xptiAddMetadata");
  int (*stash)(const char *, uint64_t) = sym(h, "xptiStashTuple");
  notify = sym(h, "xptiNotifySubscribers");
  ur_stream = reg_stream("ur.call");
  sycl_stream = reg_stream("sycl");
  ur_event = mk(h, "Unified Runtime call");
  task_event = mk(h, "typeinfo name for dpnp::tensor::kernels::copy_kernel");
  uint64_t dev = 0x5646827691e0ull, q = 2;
  add_md(task_event, "sycl_device", reg_obj(&dev, 8, 3));
  add_md(task_event, "sycl_device_name", reg_obj("AMD EPYC", 8, 1));
  add_md(task_event, "sycl_device_type", reg_obj("CPU", 3, 1));
  add_md(task_event, "queue_id", reg_obj(&q, 8, 3));
  add_md(task_event, "kernel_name", reg_obj("copy_kernel", 11, 1));
  add_md(task_event, "from_source", reg_obj("\x01", 1, 5));
  stash("queue_id", 2);
  vars[7] = (uint64_t)&out_event;
  for (int i = 0; i < 8; i++) params[i] = &vars[i];
  uint64_t inst = 0;
  /* As in tests/cost.rs: a UR call first for the graph, so a task's end does not dispatch itself. */
  if (op[0] == 'g') pair(++inst);
  /* Batches of 256 commands or pairs, a pause between them for the agent's writer. */
  uint64_t spent = 0;
  for (uint64_t left = n; left > 0;) {
    uint64_t k = left < 256 ? left : 256;
    struct timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    measured_batch(op, &inst, k);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    spent += (uint64_t)(b.tv_sec - a.tv_sec) * 1000000000ull + (uint64_t)b.tv_nsec - (uint64_t)a.tv_nsec;
    left -= k;
    usleep(getenv("AGENT_NOTIFY_TIME") ? 2000 : 20000);
  }
  if (getenv("AGENT_NOTIFY_TIME")) printf("cpu_ns_per_iter %s %.2f\n", op, (double)spent / (double)n);
  return 0;
}
