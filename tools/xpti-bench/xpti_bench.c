/* xpti_bench.c -- time the XPTI dispatcher calls the SYCL runtime makes most, in two dispatchers
 * side by side (Intel's libxptifw.so.1 and offtrace's), through the public C entry points only.
 *
 * usage: xpti_bench [-n N] [-r REPS] [-t THREADS] LIB [LIB...]
 *
 * Each repetition of a (case, library) runs in a forked child that dlopens the library privately,
 * forces tracing on and runs the case once: THREADS threads (default 1) run the same loop of N
 * operations at once. The figure is the median over REPS repetitions (default 9) of the loop
 * thread CPU time / N, in ns per operation per thread. Intel's `xptiMakeEvent` gets slower as events
 * accumulate, so N (default 100000) is part of every figure. Prints one markdown table: a column per library and, with two, the
 * ratio first / second.
 *
 * Cases (what the SYCL runtime does around every traced call):
 *   notify        xptiNotifySubscribers of a task_begin to one no-op callback
 *   make_new      xptiMakeEvent of a payload never seen (a new function name each time, made
 *                 before timing; N/4 operations, since every new key is kept for the process's life)
 *   make_seen     xptiMakeEvent of a known payload, cycling over 1024 kernels (a new instance of a
 *                 known key, never released: as a program submitting the same kernels again)
 *   make_release  xptiMakeEvent of one of the 1024 known payloads, then xptiReleaseEvent
 *   scope_pair    xptiRegisterTracepointScope + xptiSetTracepointScopeData +
 *                 xptiUnsetTracepointScopeData + xptiDeleteTracepoint
 *   query_md      xptiQueryMetadata
 *   trace_enabled xptiTraceEnabled
 *   unique_id     xptiGetUniqueId
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct payload {
  const char *name, *stack_trace, *source_file;
  uint32_t line, col;
  const void *code_ptr;
  uint64_t internal, flags;
  uint64_t uid[3];
};
typedef void (*callback_t)(uint16_t, void *, void *, uint64_t, const void *);

static struct {
  void (*force)(bool);
  uint8_t (*stream)(const char *);
  int32_t (*reg_cb)(uint8_t, uint16_t, callback_t);
  int32_t (*notify)(uint8_t, uint16_t, void *, void *, uint64_t, const void *);
  void *(*make)(const char *, struct payload *, uint16_t, int32_t, uint64_t *);
  void (*release)(void *);
  void *(*scope)(const char *, const char *, uint32_t, uint32_t, void *);
  int32_t (*set_scope)(void *);
  void (*unset_scope)(void);
  int32_t (*del_tp)(void *);
  void *(*query_md)(void *);
  bool (*enabled)(void);
  uint64_t (*unique)(void);
} x;

static long n_ops_total = 100000;
static int reps = 9, threads = 1;
static const char *which;
static uint8_t sid;
static void *event;
static pthread_barrier_t start_line;

static void noop(uint16_t t, void *p, void *e, uint64_t i, const void *u) { (void)t, (void)p, (void)e, (void)i, (void)u; }

/* The calling thread's CPU time: on a shared machine a loop preempted by other work would
 * otherwise count the other work, and long loops (Intel's event creation) more than short ones. */
static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct payload known(const char *name, uint32_t line) {
  struct payload p = {0};
  p.name = name;
  p.source_file = "/src/bench.cpp";
  p.line = line;
  p.col = 7;
  p.flags = 1 | 2 | 8 | 16; /* name, file, line, column */
  return p;
}

/* Names made before timing: KEYS kernels that are seen again and again, and one fresh name per
 * make_new operation (a new kernel each time, as a program that JIT-compiles many would). Each
 * key has its own line too: keys that differ only in the function name share a hash bucket in
 * Intel's dispatcher, which no real program's kernels do. */
#define KEYS 1024
static char (*names)[40];
static long fresh_base(int rep, int thread, long n) { return KEYS + ((long)rep * threads + thread) * n; }

/* One repetition of the case on this thread; `base` keeps new keys distinct across threads and
 * repetitions. Returns ns per operation. */
static double run_once(int rep, int thread) {
  /* new keys are retained for the process's life: a quarter of the operations keeps memory low */
  long n_ops = !strcmp(which, "make_new") ? (n_ops_total / 4 > 0 ? n_ops_total / 4 : 1) : n_ops_total;
  uint64_t inst = 0;
  volatile uint64_t sink = 0;
  uint64_t t0 = now_ns();
  if (!strcmp(which, "notify")) {
    for (long i = 0; i < n_ops; i++) x.notify(sid, 10, NULL, event, (uint64_t)i, NULL);
  } else if (!strcmp(which, "make_new")) {
    long base = fresh_base(rep, thread, n_ops);
    for (long i = 0; i < n_ops; i++) {
      struct payload p = known(names[base + i], (uint32_t)(base + i));
      sink += (uintptr_t)x.make(p.name, &p, 2, 1, &inst);
    }
  } else if (!strcmp(which, "make_seen")) {
    for (long i = 0; i < n_ops; i++) {
      struct payload p = known(names[i % KEYS], (uint32_t)(i % KEYS));
      sink += (uintptr_t)x.make(p.name, &p, 2, 1, &inst);
    }
  } else if (!strcmp(which, "make_release")) {
    for (long i = 0; i < n_ops; i++) {
      struct payload p = known(names[i % KEYS], (uint32_t)(KEYS + i % KEYS));
      x.release(x.make(p.name, &p, 2, 1, &inst));
    }
  } else if (!strcmp(which, "scope_pair")) {
    for (long i = 0; i < n_ops; i++) {
      void *tp = x.scope("bench_fn", "/src/scope.cpp", 42, 3, NULL);
      x.set_scope(tp);
      x.unset_scope();
      x.del_tp(tp);
    }
  } else if (!strcmp(which, "query_md")) {
    for (long i = 0; i < n_ops; i++) sink += (uintptr_t)x.query_md(event);
  } else if (!strcmp(which, "trace_enabled")) {
    for (long i = 0; i < n_ops; i++) sink += x.enabled();
  } else if (!strcmp(which, "unique_id")) {
    for (long i = 0; i < n_ops; i++) sink += x.unique();
  } else {
    fprintf(stderr, "xpti_bench: unknown case %s\n", which);
    exit(2);
  }
  (void)sink;
  return (double)(now_ns() - t0) / (double)n_ops;
}

static int cmp_double(const void *a, const void *b) {
  double d = *(const double *)a - *(const double *)b;
  return (d > 0) - (d < 0);
}

struct worker { int index; double ns; };

static void *worker(void *arg) {
  struct worker *w = arg;
  pthread_barrier_wait(&start_line); /* the threads start together */
  w->ns = run_once(0, w->index);
  return NULL;
}

#define SYM(field, name)                                       \
  do {                                                         \
    *(void **)&x.field = dlsym(h, name);                       \
    if (!x.field) {                                            \
      fprintf(stderr, "xpti_bench: %s lacks %s\n", lib, name); \
      exit(3);                                                 \
    }                                                          \
  } while (0)

/* In the forked child: load `lib`, run the case, write the median to `fd`. */
static void child(const char *lib, int fd) {
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "xpti_bench: %s\n", dlerror());
    exit(3);
  }
  SYM(force, "xptiForceSetTraceEnabled");
  SYM(stream, "xptiRegisterStream");
  SYM(reg_cb, "xptiRegisterCallback");
  SYM(notify, "xptiNotifySubscribers");
  SYM(make, "xptiMakeEvent");
  SYM(release, "xptiReleaseEvent");
  SYM(scope, "xptiRegisterTracepointScope");
  SYM(set_scope, "xptiSetTracepointScopeData");
  SYM(unset_scope, "xptiUnsetTracepointScopeData");
  SYM(del_tp, "xptiDeleteTracepoint");
  SYM(query_md, "xptiQueryMetadata");
  SYM(enabled, "xptiTraceEnabled");
  SYM(unique, "xptiGetUniqueId");
  x.force(true);
  sid = x.stream("bench.stream");
  x.reg_cb(sid, 10, noop);
  uint64_t inst = 0;
  long fresh = fresh_base(1, 0, n_ops_total / 4 > 0 ? n_ops_total / 4 : 1);
  names = malloc((size_t)fresh * sizeof *names);
  if (!names) exit(5);
  for (long i = 0; i < fresh; i++) snprintf(names[i], sizeof names[i], "bench_kernel_%ld", i);
  /* the KEYS kernels exist before timing, with one instance each */
  for (int k = 0; k < KEYS; k++) {
    struct payload pk = known(names[k], (uint32_t)k);
    x.make(pk.name, &pk, 2, 1, &inst);
    pk = known(names[k], (uint32_t)(KEYS + k));
    x.make(pk.name, &pk, 2, 1, &inst);
  }
  struct payload p = known("bench_notify", 1);
  event = x.make(p.name, &p, 2, 1, &inst);
  pthread_barrier_init(&start_line, NULL, (unsigned)threads);
  struct worker w[16];
  pthread_t t[16];
  for (int i = 0; i < threads; i++) {
    w[i].index = i;
    pthread_create(&t[i], NULL, worker, &w[i]);
  }
  double mean = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(t[i], NULL);
    mean += w[i].ns / threads;
  }
  if (write(fd, &mean, sizeof mean) != sizeof mean) exit(4);
  exit(0);
}

/* One repetition in a fresh child: nothing an earlier repetition made is still there. */
static double measure_once(const char *lib) {
  int fds[2];
  fflush(stdout); /* the child must not inherit buffered output */
  if (pipe(fds)) exit(5);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    child(lib, fds[1]);
  }
  close(fds[1]);
  double v = -1;
  if (read(fds[0], &v, sizeof v) != sizeof v) v = -1;
  close(fds[0]);
  int st;
  waitpid(pid, &st, 0);
  return v;
}

static double measure(const char *lib) {
  double v[64];
  for (int r = 0; r < reps; r++) {
    v[r] = measure_once(lib);
    if (v[r] < 0) return -1;
  }
  qsort(v, (size_t)reps, sizeof v[0], cmp_double);
  return v[reps / 2];
}

int main(int argc, char **argv) {
  int opt;
  while ((opt = getopt(argc, argv, "n:r:t:")) != -1) {
    if (opt == 'n') n_ops_total = atol(optarg);
    else if (opt == 'r') reps = atoi(optarg);
    else if (opt == 't') threads = atoi(optarg);
    else return 2;
  }
  if (optind >= argc || reps < 1 || reps > 64 || threads < 1 || threads > 16 || n_ops_total < 1) {
    fprintf(stderr, "usage: xpti_bench [-n N] [-r REPS(1-64)] [-t THREADS(1-16)] LIB [LIB...]\n");
    return 2;
  }
  static const char *cases[] = {"notify", "make_new", "make_seen", "make_release", "scope_pair", "query_md",
                                "trace_enabled", "unique_id"};
  int libs = argc - optind;
  printf("ns of thread CPU time per operation per thread, %d thread(s), median of %d repetitions of %ld operations (make_new: a quarter)\n\n",
         threads, reps, n_ops_total);
  printf("| case |");
  for (int l = 0; l < libs; l++) printf(" %s |", argv[optind + l]);
  if (libs == 2) printf(" first / second |");
  printf("\n|---|");
  for (int l = 0; l < libs + (libs == 2); l++) printf("---:|");
  printf("\n");
  int failed = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    which = cases[c];
    double v[8] = {0};
    printf("| %s |", which);
    for (int l = 0; l < libs && l < 8; l++) {
      v[l] = measure(argv[optind + l]);
      failed += v[l] < 0;
      printf(" %.1f |", v[l]);
    }
    if (libs == 2) printf(" %.1fx |", v[1] > 0 ? v[0] / v[1] : 0.0);
    printf("\n");
    fflush(stdout);
  }
  return failed ? 1 : 0;
}
