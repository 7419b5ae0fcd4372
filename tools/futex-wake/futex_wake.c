/*
 * What waking a sleeping thread costs the thread that wakes it: the floor under the buffer
 * services' hand-over at each watermark (docs/overhead.md, "Tool API"), which wakes the sleeping
 * delivery thread with a futex wake.
 *
 * One thread sleeps in FUTEX_WAIT; the main thread, every ~50 us (long enough for the other to be
 * asleep again), bumps the word and calls FUTEX_WAKE, and counts the TSC cycles of that call;
 * getpid is measured beside it as the cost of a system call that wakes nobody.
 *
 *   cc -O2 -o /tmp/futex_wake tools/futex-wake/futex_wake.c -lpthread
 *   chrt -f 10 /tmp/futex_wake     # the other CPU otherwise idle; or plain, as the machine is
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

static atomic_int word;
static atomic_int stop;

static void* sleeper(void* arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        int v = atomic_load(&word);
        syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
    }
    return NULL;
}

int main(void) {
    enum { N = 2000 };
    pthread_t t;
    if (pthread_create(&t, NULL, sleeper, NULL) != 0) {
        return 1;
    }
    uint64_t wake = 0, plain = 0;
    struct timespec pause = {0, 30000};
    for (int i = 0; i < N; i++) {
        nanosleep(&pause, NULL);
        uint64_t s = __rdtsc();
        while (__rdtsc() - s < 50000) {
        }
        uint64_t t0 = __rdtsc();
        atomic_fetch_add(&word, 1);
        syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        uint64_t t1 = __rdtsc();
        syscall(SYS_getpid);
        uint64_t t2 = __rdtsc();
        wake += t1 - t0;
        plain += t2 - t1;
    }
    atomic_store(&stop, 1);
    atomic_fetch_add(&word, 1);
    syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    pthread_join(t, NULL);
    printf("futex_wake of a sleeping thread: %.0f TSC cycles; getpid: %.0f\n", (double)wake / N, (double)plain / N);
    return 0;
}
