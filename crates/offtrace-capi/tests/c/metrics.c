/* The offtrace_metric_* C API against the seed's rules (run by tests/c_metrics.rs). Prints one
 * line per check; exits 1 at the first failure. */
#include <offtrace/offtrace.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(cond, ...)                                                                                   \
    do {                                                                                                   \
        if (!(cond)) {                                                                                     \
            printf("FAIL line %d: ", __LINE__);                                                            \
            printf(__VA_ARGS__);                                                                           \
            printf("\n");                                                                                  \
            exit(1);                                                                                       \
        }                                                                                                  \
    } while (0)

static offtrace_metric_group_handle_t find(const char* name) {
    uint32_t n = 0;
    CHECK(offtrace_metric_group_get(0, &n, NULL) == OFFTRACE_METRIC_RESULT_SUCCESS, "group count");
    offtrace_metric_group_handle_t hs[64];
    if (n > 64) n = 64;
    CHECK(offtrace_metric_group_get(0, &n, hs) == OFFTRACE_METRIC_RESULT_SUCCESS, "groups");
    for (uint32_t i = 0; i < n; i++) {
        offtrace_metric_group_properties_t p;
        CHECK(offtrace_metric_group_get_properties(hs[i], &p) == OFFTRACE_METRIC_RESULT_SUCCESS, "props");
        if (strcmp(p.name, name) == 0) return hs[i];
    }
    return 0;
}

static double spin_ms(double ms) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    volatile unsigned long x = 0;
    for (;;) {
        x++;
        clock_gettime(CLOCK_MONOTONIC, &b);
        double d = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
        if (d >= ms) return d;
    }
}

int main(void) {
    uint32_t ndev = 0;
    CHECK(offtrace_metric_device_get(&ndev, NULL) == 0 && ndev >= 1, "devices");
    offtrace_metric_device_properties_t dp;
    CHECK(offtrace_metric_device_get_properties(0, &dp) == 0 && dp.type == 0, "cpu device");
    CHECK(offtrace_metric_device_get(NULL, NULL) == OFFTRACE_METRIC_RESULT_ERROR_INVALID_NULL_POINTER, "null");
    CHECK(offtrace_metric_group_get_properties(0, &(offtrace_metric_group_properties_t){0}) ==
              OFFTRACE_METRIC_RESULT_ERROR_INVALID_NULL_HANDLE,
          "null group");

    offtrace_metric_group_handle_t proc = find("proc.process");
    CHECK(proc != 0, "proc.process present");
    offtrace_metric_group_properties_t pp;
    offtrace_metric_group_get_properties(proc, &pp);
    CHECK(pp.sampling_type == OFFTRACE_METRIC_GROUP_SAMPLING_TYPE_TIME_BASED, "proc is time-based");
    uint32_t nm = 0;
    CHECK(offtrace_metric_get(proc, &nm, NULL) == 0 && nm == pp.metric_count, "metric count");
    offtrace_metric_handle_t mh[32];
    offtrace_metric_get(proc, &nm, mh);
    int rss_index = -1;
    for (uint32_t i = 0; i < nm; i++) {
        offtrace_metric_properties_t mp;
        CHECK(offtrace_metric_get_properties(mh[i], &mp) == 0, "metric props");
        if (strcmp(mp.name, "rss") == 0) rss_index = (int)i;
    }
    CHECK(rss_index >= 0, "rss metric");
    printf("ok enumeration: %u devices, proc.process %u metrics\n", ndev, nm);

    offtrace_metric_group_handle_t sw = find("cpu.sw"), thr = find("cpu.thread_sw");
    if (sw && thr) {
        offtrace_metric_group_handle_t both[2] = {sw, thr};
        CHECK(offtrace_metric_group_activate(0, 2, both) == OFFTRACE_METRIC_RESULT_ERROR_NOT_AVAILABLE, "domain");
        printf("ok domain rule: cpu.sw + cpu.thread_sw -> NOT_AVAILABLE\n");
        offtrace_metric_group_handle_t on[2] = {proc, thr};
        CHECK(offtrace_metric_group_activate(0, 2, on) == 0, "activate");
        offtrace_metric_streamer_desc_t d = {1000000, 1, 0};
        offtrace_metric_streamer_handle_t s;
        CHECK(offtrace_metric_streamer_open(0, thr, &d, &s) == OFFTRACE_METRIC_RESULT_ERROR_INVALID_ARGUMENT,
              "streamer on event-based");
        printf("ok streamer on an event-based group -> INVALID_ARGUMENT\n");
        offtrace_metric_query_pool_handle_t pool;
        CHECK(offtrace_metric_query_pool_create(0, proc, 1, &pool) == OFFTRACE_METRIC_RESULT_ERROR_INVALID_ARGUMENT,
              "query on time-based");
        printf("ok query on a time-based group -> INVALID_ARGUMENT\n");
        CHECK(offtrace_metric_query_pool_create(0, thr, 1, &pool) == 0, "pool");
        offtrace_metric_query_handle_t q;
        CHECK(offtrace_metric_query_create(pool, 0, &q) == 0, "query");
        size_t qs = 0;
        CHECK(offtrace_metric_query_get_data(q, &qs, NULL) == OFFTRACE_METRIC_RESULT_NOT_READY, "not ready");
        CHECK(offtrace_metric_query_begin(q) == 0, "begin");
        spin_ms(20);
        CHECK(offtrace_metric_query_end(q) == 0, "end");
        CHECK(offtrace_metric_query_get_data(q, &qs, NULL) == 0 && qs > 0, "size");
        unsigned char qraw[1024];
        CHECK(qs <= sizeof qraw && offtrace_metric_query_get_data(q, &qs, qraw) == 0, "data");
        uint32_t nv = 0;
        CHECK(offtrace_metric_group_calculate_metric_values(thr, qs, qraw, &nv, NULL) == 0 && nv > 0, "n");
        offtrace_metric_typed_value_t v[16];
        CHECK(offtrace_metric_group_calculate_metric_values(thr, qs, qraw, &nv, v) == 0, "calc");
        CHECK(v[0].type == OFFTRACE_METRIC_VALUE_TYPE_UINT64 && v[0].value > 1000000, "task clock %llu",
              (unsigned long long)v[0].value);
        printf("ok query around a 20 ms spin: task_clock > 1 ms\n");
        CHECK(offtrace_metric_query_destroy(q) == 0 && offtrace_metric_query_pool_destroy(pool) == 0, "destroy");
    } else {
        offtrace_metric_group_activate(0, 1, &proc);
        printf("skip perf_event checks: no cpu.sw group here\n");
    }

    offtrace_metric_streamer_desc_t d = {2000000, 3, 0};
    offtrace_metric_streamer_handle_t s;
    CHECK(offtrace_metric_streamer_open(0, proc, &d, &s) == 0, "open");
    CHECK(offtrace_metric_streamer_wait(s, 5000000000ull) == 0, "wait");
    size_t size = 0;
    CHECK(offtrace_metric_streamer_read_data(s, UINT32_MAX, &size, NULL) == 0 && size >= 3 * pp.raw_report_size,
          "size %zu", size);
    unsigned char* raw = malloc(size);
    CHECK(offtrace_metric_streamer_read_data(s, UINT32_MAX, &size, raw) == 0 && size % pp.raw_report_size == 0,
          "read");
    uint32_t nv = 0;
    CHECK(offtrace_metric_group_calculate_metric_values(proc, size, raw, &nv, NULL) == 0, "count");
    CHECK(nv == (size / pp.raw_report_size) * pp.metric_count, "values per report");
    offtrace_metric_typed_value_t* v = calloc(nv, sizeof *v);
    CHECK(offtrace_metric_group_calculate_metric_values(proc, size, raw, &nv, v) == 0, "calc");
    CHECK(v[rss_index].type == OFFTRACE_METRIC_VALUE_TYPE_UINT64 && v[rss_index].value > 0, "rss");
    CHECK(offtrace_metric_group_calculate_metric_values(proc, size - 1, raw, &nv, v) ==
              OFFTRACE_METRIC_RESULT_ERROR_INVALID_SIZE,
          "partial report");
    printf("ok streamer: %zu reports, rss %llu bytes\n", (size_t)(size / pp.raw_report_size),
           (unsigned long long)v[rss_index].value);
    CHECK(offtrace_metric_group_activate(0, 0, NULL) == OFFTRACE_METRIC_RESULT_ERROR_HANDLE_OBJECT_IN_USE, "in use");
    CHECK(offtrace_metric_streamer_close(s) == 0, "close");
    size = 0;
    CHECK(offtrace_metric_streamer_read_data(s, UINT32_MAX, &size, NULL) ==
              OFFTRACE_METRIC_RESULT_ERROR_INVALID_NULL_HANDLE,
          "read closed");
    CHECK(offtrace_metric_streamer_close(s) == OFFTRACE_METRIC_RESULT_ERROR_INVALID_NULL_HANDLE, "close twice");
    printf("ok reading a closed streamer -> INVALID_NULL_HANDLE\n");
    CHECK(offtrace_metric_group_activate(0, 0, NULL) == 0, "deactivate");
    free(raw);
    free(v);

    /* sysman: the CPU answers memory from /proc, has no PCI/RAS; GPUs answer through NVML. */
    uint32_t nsd = 0;
    CHECK(offtrace_sysman_device_get(&nsd, NULL) == 0 && nsd >= 1, "sysman devices");
    offtrace_sysman_mem_state_t ms;
    CHECK(offtrace_sysman_memory_get_state(0, &ms) == 0 && ms.size > 0 && ms.free <= ms.size, "cpu memory");
    offtrace_sysman_pci_stats_t ps;
    CHECK(offtrace_sysman_pci_get_stats(0, &ps) == OFFTRACE_METRIC_RESULT_ERROR_UNSUPPORTED_FEATURE, "cpu pci");
    CHECK(offtrace_sysman_memory_get_state(0, NULL) == OFFTRACE_METRIC_RESULT_ERROR_INVALID_NULL_POINTER, "null");
    printf("ok sysman cpu: memory %llu of %llu bytes free\n", (unsigned long long)ms.free,
           (unsigned long long)ms.size);
    for (uint32_t dev = 1; dev < nsd; dev++) {
        offtrace_sysman_energy_counter_t e;
        offtrace_sysman_freq_state_t f;
        double t = 0;
        CHECK(offtrace_sysman_memory_get_state(dev, &ms) == 0 && ms.size > 0, "gpu memory");
        CHECK(offtrace_sysman_power_get_energy_counter(dev, &e) == 0, "gpu energy");
        CHECK(offtrace_sysman_frequency_get_state(dev, &f) == 0 && f.actual_mhz > 0, "gpu frequency");
        CHECK(offtrace_sysman_temperature_get_state(dev, &t) == 0 && t > 5 && t < 120, "gpu temperature");
        offtrace_sysman_event_t ev;
        offtrace_metric_result_t w = offtrace_sysman_event_wait(50, &ev);
        CHECK(w == OFFTRACE_METRIC_RESULT_NOT_READY || w == OFFTRACE_METRIC_RESULT_ERROR_UNSUPPORTED_FEATURE,
              "event wait %x", w);
        printf("ok sysman gpu %u: %llu MiB, %.0f MHz, %.0f C, %llu uJ, event wait %s\n", dev,
               (unsigned long long)(ms.size >> 20), f.actual_mhz, t, (unsigned long long)e.energy_uj,
               w == OFFTRACE_METRIC_RESULT_NOT_READY ? "NOT_READY" : "unsupported");
    }
    printf("all ok\n");
    return 0;
}
