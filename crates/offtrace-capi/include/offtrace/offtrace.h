/*
 * offtrace.h: the C API of offtrace's tracing services.
 *
 * The types below are hand-written; tests/c_api.rs checks every struct's size and field
 * offsets against the Rust definitions. The function prototypes between the GENERATED markers
 * are generated from the `extern "C"` declarations in crates/offtrace-capi/src/ by
 * tests/header.rs: `OFFTRACE_BLESS=1 cargo test -p offtrace-capi --test header` rewrites them;
 * without it the test fails when this file is stale.
 *
 * Strings returned by offtrace (kind, operation and argument names) stay valid for the life of
 * the process. Payload pointers in callback records are valid only during the callback.
 */
#ifndef OFFTRACE_OFFTRACE_H
#define OFFTRACE_OFFTRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ status codes */

typedef int32_t offtrace_status_t;
enum {
    OFFTRACE_STATUS_SUCCESS = 0,
    OFFTRACE_STATUS_ERROR = 1,
    OFFTRACE_STATUS_ERROR_CONTEXT_INVALID = 2,
    OFFTRACE_STATUS_ERROR_KIND_NOT_FOUND = 3,
    OFFTRACE_STATUS_ERROR_OPERATION_NOT_FOUND = 4,
    OFFTRACE_STATUS_ERROR_SERVICE_ALREADY_CONFIGURED = 5,
    OFFTRACE_STATUS_ERROR_BUFFER_NOT_FOUND = 6,
    OFFTRACE_STATUS_ERROR_INVALID_ARGUMENT = 7,
    OFFTRACE_STATUS_ERROR_OUT_OF_RESOURCES = 8,
    OFFTRACE_STATUS_ERROR_CONTEXT_ACTIVE = 9,
    OFFTRACE_STATUS_ERROR_BUSY = 10,
    OFFTRACE_STATUS_ERROR_NOT_AVAILABLE = 11,
    OFFTRACE_STATUS_ERROR_STACK_EMPTY = 12,
    OFFTRACE_STATUS_ERROR_TOOL_LOAD = 13,
    OFFTRACE_STATUS_ERROR_INTERNAL = 14
};

/* ------------------------------------------------------------------ kinds, operations, phases */

typedef uint32_t offtrace_tracing_kind_t;
enum {
    OFFTRACE_TRACING_KIND_NONE = 0,
    OFFTRACE_TRACING_KIND_UR_API = 1,          /* operation = ur_function_t */
    OFFTRACE_TRACING_KIND_QUEUE = 2,           /* queues / streams as definitions */
    OFFTRACE_TRACING_KIND_SYCL_QUEUE = 2,      /* former name of QUEUE */
    OFFTRACE_TRACING_KIND_KERNEL_DISPATCH = 3,
    OFFTRACE_TRACING_KIND_MEMORY_COPY = 4,
    OFFTRACE_TRACING_KIND_MEMORY_FILL = 5,
    OFFTRACE_TRACING_KIND_MEMORY_ALLOC = 6,
    OFFTRACE_TRACING_KIND_TASK_GRAPH = 7,
    OFFTRACE_TRACING_KIND_SYNC = 8,
    OFFTRACE_TRACING_KIND_CODE_OBJECT = 9,
    OFFTRACE_TRACING_KIND_MARKER = 10,
    OFFTRACE_TRACING_KIND_XPTI = 11,           /* raw layer (XPTI notifications); operation = trace_point_type_t */
    OFFTRACE_TRACING_KIND_OPENCL_API = 12,     /* operation = the OpenCL backend's function id */
    OFFTRACE_TRACING_KIND_CUDA_RUNTIME_API = 13, /* operation = CUpti_runtime_api_trace_cbid */
    OFFTRACE_TRACING_KIND_CUDA_DRIVER_API = 14,  /* operation = CUpti_driver_api_trace_cbid */
    OFFTRACE_TRACING_KIND_DEVICE = 15,         /* devices and contexts as definitions */
    OFFTRACE_TRACING_KIND_COUNTER = 16,        /* counter definitions and samples */
    OFFTRACE_TRACING_KIND_LAST = 17
};

typedef uint32_t offtrace_tracing_operation_t;
enum {
    OFFTRACE_SYCL_QUEUE_CREATE = 0,
    OFFTRACE_SYCL_QUEUE_DESTROY = 1,
    OFFTRACE_SYCL_QUEUE_SUBMIT = 2,
    OFFTRACE_KERNEL_DISPATCH_LAUNCH = 0,
    OFFTRACE_MEMORY_COPY_USM_MEMCPY = 0,
    OFFTRACE_MEMORY_COPY_BUFFER_READ = 1,
    OFFTRACE_MEMORY_COPY_BUFFER_WRITE = 2,
    OFFTRACE_MEMORY_COPY_BUFFER_COPY = 3,
    OFFTRACE_MEMORY_FILL_USM_FILL = 0,
    OFFTRACE_MEMORY_FILL_BUFFER_FILL = 1,
    OFFTRACE_MEMORY_ALLOC_ALLOC = 0,
    OFFTRACE_MEMORY_ALLOC_FREE = 1,
    OFFTRACE_TASK_GRAPH_NODE_CREATE = 0,
    OFFTRACE_TASK_GRAPH_EDGE_CREATE = 1,
    OFFTRACE_TASK_GRAPH_TASK = 2,
    OFFTRACE_TASK_GRAPH_SIGNAL = 3,
    OFFTRACE_SYNC_WAIT = 0,
    OFFTRACE_SYNC_BARRIER = 1,
    OFFTRACE_SYNC_MARKER = 2,               /* a marker enqueued on a queue (clEnqueueMarker*) */
    OFFTRACE_CODE_OBJECT_PROGRAM = 0,       /* LOAD = create, UNLOAD = release */
    OFFTRACE_CODE_OBJECT_PROGRAM_BUILD = 1, /* LOAD */
    OFFTRACE_CODE_OBJECT_KERNEL = 2,        /* LOAD = create, UNLOAD = release */
    OFFTRACE_MARKER_MARK = 0,
    OFFTRACE_MARKER_RANGE = 1,              /* ENTER = push, EXIT = pop */
    OFFTRACE_DEVICE_DEVICE = 0,
    OFFTRACE_DEVICE_CONTEXT = 1,
    OFFTRACE_COUNTER_DEFINE = 0,
    OFFTRACE_COUNTER_SAMPLE = 1,
    OFFTRACE_XPTI_FUNCTION_WITH_ARGS_BEGIN = 28, /* XPTI: any xpti::trace_point_type_t value */
    OFFTRACE_XPTI_FUNCTION_WITH_ARGS_END = 29
};

/* Phases by kind (the `phase` of a callback record; a buffer record of an API call is one
 * record at its exit, phase NONE, with start/end timestamps):
 *   API kinds (UR_API, OPENCL_API, CUDA_*): ENTER then EXIT on the calling thread, same
 *     correlation id; the exit's payload has the result;
 *   KERNEL_DISPATCH, MEMORY_COPY, MEMORY_FILL: NONE at the enqueue (inside its API call, with
 *     its correlation id), then COMPLETE with device_start/device_end when the backend learns
 *     the device times (same correlation id, possibly on another thread);
 *   SYNC: ENTER/EXIT around a host wait, NONE for a barrier enqueued (COMPLETE as above);
 *   TASK_GRAPH: NONE for node/edge/signal, ENTER/EXIT around a task;
 *   MEMORY_ALLOC, QUEUE, DEVICE, MARKER (mark), COUNTER, XPTI: NONE;
 *   MARKER ranges: ENTER at offtrace_marker_range_push, EXIT at its pop;
 *   CODE_OBJECT: LOAD when created/built, UNLOAD when the last reference is released. */
typedef uint32_t offtrace_callback_phase_t;
enum {
    OFFTRACE_CALLBACK_PHASE_NONE = 0, /* a one-shot record */
    OFFTRACE_CALLBACK_PHASE_ENTER = 1,
    OFFTRACE_CALLBACK_PHASE_EXIT = 2,
    OFFTRACE_CALLBACK_PHASE_LOAD = 3,
    OFFTRACE_CALLBACK_PHASE_UNLOAD = 4,
    OFFTRACE_CALLBACK_PHASE_COMPLETE = 5 /* device activity with device times (device_start/end) */
};

typedef uint32_t offtrace_buffer_policy_t;
enum {
    OFFTRACE_BUFFER_POLICY_DISCARD = 1,  /* never blocks: drops and counts when full */
    OFFTRACE_BUFFER_POLICY_LOSSLESS = 2  /* never drops: the producing thread waits for the delivery thread when full */
};

typedef uint32_t offtrace_memory_type_t;
enum {
    OFFTRACE_MEMORY_TYPE_UNKNOWN = 0,
    OFFTRACE_MEMORY_TYPE_HOST = 1,
    OFFTRACE_MEMORY_TYPE_DEVICE = 2,
    OFFTRACE_MEMORY_TYPE_SHARED = 3
};

typedef uint32_t offtrace_copy_direction_t;
enum {
    OFFTRACE_COPY_DIRECTION_UNKNOWN = 0,
    OFFTRACE_COPY_DIRECTION_HOST_TO_DEVICE = 1,
    OFFTRACE_COPY_DIRECTION_DEVICE_TO_HOST = 2,
    OFFTRACE_COPY_DIRECTION_DEVICE_TO_DEVICE = 3,
    OFFTRACE_COPY_DIRECTION_HOST_TO_HOST = 4
};

typedef uint32_t offtrace_device_type_t;
enum {
    OFFTRACE_DEVICE_TYPE_UNKNOWN = 0,
    OFFTRACE_DEVICE_TYPE_CPU = 1,
    OFFTRACE_DEVICE_TYPE_GPU = 2,
    OFFTRACE_DEVICE_TYPE_ACCELERATOR = 3
};

typedef uint32_t offtrace_counter_value_type_t;
enum {
    OFFTRACE_COUNTER_VALUE_U64 = 0,
    OFFTRACE_COUNTER_VALUE_I64 = 1,
    OFFTRACE_COUNTER_VALUE_F64 = 2
};

/* ------------------------------------------------------------------ identities and records */

typedef uint64_t offtrace_timestamp_t; /* CLOCK_MONOTONIC nanoseconds */
typedef uint64_t offtrace_thread_id_t; /* kernel thread id */

typedef struct offtrace_context_id_t { uint64_t handle; } offtrace_context_id_t;
typedef struct offtrace_buffer_id_t { uint64_t handle; } offtrace_buffer_id_t;

typedef union offtrace_user_data_t {
    uint64_t value;
    void* ptr;
} offtrace_user_data_t;

typedef struct offtrace_correlation_id_t {
    uint64_t internal;             /* unique per process; ties device work to its API call */
    offtrace_user_data_t external; /* top of the thread's external stack for the context; 0 = none */
} offtrace_correlation_id_t;

typedef struct offtrace_callback_tracing_record_t {
    offtrace_context_id_t context_id;
    offtrace_thread_id_t thread_id;
    offtrace_correlation_id_t correlation_id;
    offtrace_tracing_kind_t kind;
    offtrace_tracing_operation_t operation;
    offtrace_callback_phase_t phase;
    void* payload; /* offtrace_callback_tracing_<kind>_data_t*, valid during the callback */
} offtrace_callback_tracing_record_t;

#define OFFTRACE_MAX_API_ARGS 17
#define OFFTRACE_MAX_KERNEL_ARGS 32

/* Every API kind (UR_API, OPENCL_API, CUDA_RUNTIME_API, CUDA_DRIVER_API): args[i] is the i-th
 * argument variable itself (handle, pointer, size, enum). */
typedef struct offtrace_callback_tracing_api_data_t {
    uint32_t function_id;
    uint32_t arg_count;
    int32_t result;      /* ur_result_t, cl_int, cudaError_t, CUresult; meaningful when has_result (exit) */
    uint32_t has_result;
    uint64_t args[OFFTRACE_MAX_API_ARGS];
} offtrace_callback_tracing_api_data_t;
typedef offtrace_callback_tracing_api_data_t offtrace_callback_tracing_ur_api_data_t;

typedef struct offtrace_callback_tracing_queue_data_t {
    uint64_t queue, device, context, flags; /* flags bit 0: in-order */
} offtrace_callback_tracing_queue_data_t;
typedef offtrace_callback_tracing_queue_data_t offtrace_callback_tracing_sycl_queue_data_t;

typedef struct offtrace_implicit_allocation_t {
    uint64_t base;
    uint64_t size;
    offtrace_memory_type_t type;
} offtrace_implicit_allocation_t;

typedef struct offtrace_callback_tracing_kernel_dispatch_data_t {
    uint64_t queue;
    uint64_t kernel;
    const char* kernel_name; /* readable: demangled, a SYCL kernel's type name (`axpy`, not `_ZTS4axpy`),
                                the same in KERNEL_DISPATCH and CODE_OBJECT records */
    uint32_t work_dim;
    uint32_t kernel_arg_count;
    uint64_t global_size[3]; /* dimensions past work_dim are 1 */
    uint64_t local_size[3];  /* all 0: chosen by the runtime; else dimensions past work_dim are 1 */
    uint64_t kernel_args[OFFTRACE_MAX_KERNEL_ARGS];
    const offtrace_implicit_allocation_t* implicit_allocations;
    uint64_t implicit_allocation_count;
    uint64_t device;
    offtrace_timestamp_t device_start, device_end; /* 0 = unknown; set at phase COMPLETE */
} offtrace_callback_tracing_kernel_dispatch_data_t;

typedef struct offtrace_callback_tracing_memory_copy_data_t {
    uint64_t queue, dst, src, size, device;
    offtrace_copy_direction_t direction;
    offtrace_memory_type_t src_type, dst_type;
    offtrace_timestamp_t device_start, device_end; /* 0 = unknown */
} offtrace_callback_tracing_memory_copy_data_t;

typedef struct offtrace_callback_tracing_memory_fill_data_t {
    uint64_t queue, dst, pattern, pattern_size, size, device;
    offtrace_timestamp_t device_start, device_end; /* 0 = unknown */
} offtrace_callback_tracing_memory_fill_data_t;

typedef struct offtrace_callback_tracing_memory_alloc_data_t {
    uint64_t ptr;
    uint64_t size;
    offtrace_memory_type_t type;
    uint64_t device;
} offtrace_callback_tracing_memory_alloc_data_t;

typedef struct offtrace_callback_tracing_task_graph_data_t {
    uint64_t node, source, target;
    const char* name;
    uint64_t event; /* the runtime event a signal carries */
    uint64_t queue; /* the command's queue, 0 = unknown */
} offtrace_callback_tracing_task_graph_data_t;

typedef struct offtrace_callback_tracing_sync_data_t {
    uint64_t object;
    uint32_t event_count;
    uint64_t queue, device;                        /* a barrier enqueued on a queue */
    offtrace_timestamp_t device_start, device_end; /* 0 = unknown */
} offtrace_callback_tracing_sync_data_t;

typedef struct offtrace_callback_tracing_code_object_data_t {
    uint64_t handle;
    uint64_t program;
    const char* name;
    uint64_t binary_size;
} offtrace_callback_tracing_code_object_data_t;

typedef struct offtrace_callback_tracing_marker_data_t {
    const char* message; /* NULL at a range's EXIT */
    uint64_t range_id;   /* at EXIT: the range's correlation id */
} offtrace_callback_tracing_marker_data_t;

/* DEVICE: a device or a context. */
typedef struct offtrace_callback_tracing_device_data_t {
    uint64_t handle;
    uint64_t parent; /* a device's context or platform; a context's first device */
    const char* name;
    offtrace_device_type_t device_type;
} offtrace_callback_tracing_device_data_t;

/* COUNTER: DEFINE (value = offtrace_counter_value_type_t) or SAMPLE (value = the bits; ts = the
 * time the value belongs to on the trace clock, 0 = the emit's time; it may be earlier than
 * records already emitted, e.g. a GPU sample decoded a period after it ended). */
typedef struct offtrace_callback_tracing_counter_data_t {
    uint64_t counter;
    uint64_t device;
    uint64_t value;
    const char* name;
    const char* unit;
    uint64_t ts;
} offtrace_callback_tracing_counter_data_t;

/* XPTI (the SYCL backend's raw layer): one notification exactly as the dispatcher passed it to
 * the subscriber (phase NONE). Declared by the SYCL backend; core passes it through as is. */
typedef struct offtrace_callback_tracing_xpti_data_t {
    const char* stream;   /* the stream's name, e.g. "ur.call"; may be NULL */
    uint64_t stream_id;   /* the dispatcher's 8-bit stream id */
    uint64_t parent;      /* xpti::trace_event_data_t*, may be 0 */
    uint64_t event;       /* xpti::trace_event_data_t*, may be 0 */
    uint64_t instance;    /* begin and end of one call share it */
    uint64_t user_data;   /* trace-type-specific user data (function_with_args_t*, ...), may be 0 */
    uint32_t trace_type;  /* = the record's operation */
    uint32_t stream_class; /* backend-private */
} offtrace_callback_tracing_xpti_data_t;

/* ------------------------------------------------------------------ buffer records
 *
 * A buffer delivers typed records (since 0.2.0; 0.1 had one flat 104-byte record with six data
 * words). Every record starts with offtrace_buffer_tracing_record_t, whose first field `size` is
 * the whole record's size in bytes (fixed fields and inline data; a multiple of 8), as
 * rocprofiler-sdk's rocprofiler_buffer_tracing_*_record_t are versioned: later versions only
 * append fixed fields, so read a field only when `size` covers it, e.g.
 *     if (r->header.size >= offsetof(offtrace_buffer_tracing_kernel_dispatch_record_t, x) + sizeof r->x)
 * Switch on header.kind to pick the struct:
 *   UR_API, OPENCL_API, CUDA_RUNTIME_API, CUDA_DRIVER_API -> ..._api_call_record_t (one per call,
 *     at its exit: phase NONE, start/end = host enter/exit)
 *   KERNEL_DISPATCH -> ..._kernel_dispatch_record_t    MEMORY_COPY -> ..._memory_copy_record_t
 *   MEMORY_FILL -> ..._memory_fill_record_t            MEMORY_ALLOC -> ..._memory_alloc_record_t
 *   SYNC -> ..._sync_record_t        QUEUE -> ..._queue_record_t   TASK_GRAPH -> ..._task_graph_record_t
 *   CODE_OBJECT -> ..._code_object_record_t            MARKER -> ..._marker_record_t
 *   DEVICE -> ..._device_record_t    COUNTER -> ..._counter_record_t
 *   XPTI -> the header alone (the raw layer's struct lives during the emit only: callbacks only)
 * A record whose backend passed no payload of its kind is the header alone (size = 64).
 * phase: the emit's (NONE, LOAD/UNLOAD, ENTER/EXIT of instants); COMPLETE for device activity
 * with device times, whose start/end timestamps are then the device times, as its
 * device_start/device_end. Device times are in the trace clock (CLOCK_MONOTONIC ns), 0 = unknown.
 * The fixed fields of MEMORY_COPY, MEMORY_FILL, MEMORY_ALLOC, SYNC and QUEUE records follow their
 * callback payloads' order. Data of variable length is inline after the fixed fields, at an offset from the record's
 * start (0 = absent): strings are NUL-terminated (cut at 1023 bytes), arguments one uint64_t
 * each. Records, and the array of pointers to them, are valid during the buffer callback only.
 */

typedef struct offtrace_buffer_tracing_record_t {
    uint32_t size;                        /* this record's bytes, header and inline data included */
    offtrace_tracing_kind_t kind;         /* which offtrace_buffer_tracing_*_record_t follows */
    offtrace_tracing_operation_t operation;
    offtrace_callback_phase_t phase;
    offtrace_context_id_t context_id;
    offtrace_correlation_id_t correlation_id;
    offtrace_thread_id_t thread_id;
    offtrace_timestamp_t start_timestamp; /* API call: host enter; COMPLETE: device start; else emit time */
    offtrace_timestamp_t end_timestamp;   /* API call: host exit; COMPLETE: device end; else emit time */
} offtrace_buffer_tracing_record_t;

#define OFFTRACE_BUFFER_RECORD_AT(record, offset) ((const void*)((const char*)(record) + (offset)))

/* An API call; its arguments (raw values, as the callback payload's args, named and typed by
 * offtrace_iterate_kind_operation_args / the kind's operation table) at args_offset. */
typedef struct offtrace_buffer_tracing_api_call_record_t {
    offtrace_buffer_tracing_record_t header;
    uint32_t function_id;
    uint32_t arg_count;
    int32_t result;
    uint32_t args_offset; /* (const uint64_t*)OFFTRACE_BUFFER_RECORD_AT(r, r->args_offset) */
} offtrace_buffer_tracing_api_call_record_t;

typedef struct offtrace_buffer_tracing_kernel_dispatch_record_t {
    offtrace_buffer_tracing_record_t header;
    uint64_t queue;
    uint64_t kernel;
    uint64_t device;
    uint32_t work_dim;
    uint32_t kernel_arg_count;
    uint64_t global_size[3]; /* dimensions past work_dim are 1 */
    uint64_t local_size[3];  /* all 0: chosen by the runtime; else dimensions past work_dim are 1 */
    offtrace_timestamp_t device_start;
    offtrace_timestamp_t device_end;
    uint32_t name_offset;    /* the kernel's readable name (demangled), 0 = unknown */
    uint32_t args_offset;    /* kernel_arg_count uint64_t argument values (pointers as USM addresses);
                                offtrace_buffer_kernel_get_allocation_properties matches them */
} offtrace_buffer_tracing_kernel_dispatch_record_t;

typedef struct offtrace_buffer_tracing_memory_copy_record_t {
    offtrace_buffer_tracing_record_t header;
    uint64_t queue;
    uint64_t dst;
    uint64_t src;
    uint64_t bytes;
    uint64_t device;
    offtrace_copy_direction_t direction;
    offtrace_memory_type_t src_type;
    offtrace_memory_type_t dst_type;
    uint32_t reserved;
    offtrace_timestamp_t device_start;
    offtrace_timestamp_t device_end;
} offtrace_buffer_tracing_memory_copy_record_t;

typedef struct offtrace_buffer_tracing_memory_fill_record_t {
    offtrace_buffer_tracing_record_t header;
    uint64_t queue;
    uint64_t dst;
    uint64_t pattern; /* its first 8 bytes */
    uint64_t pattern_size;
    uint64_t bytes;
    uint64_t device;
    offtrace_timestamp_t device_start;
    offtrace_timestamp_t device_end;
} offtrace_buffer_tracing_memory_fill_record_t;

/* operation OFFTRACE_MEMORY_ALLOC_ALLOC or _FREE */
typedef struct offtrace_buffer_tracing_memory_alloc_record_t {
    offtrace_buffer_tracing_record_t header;
    uint64_t ptr;
    uint64_t bytes;
    offtrace_memory_type_t memory_type;
    uint32_t reserved;
    uint64_t device;
} offtrace_buffer_tracing_memory_alloc_record_t;

/* A host wait or a barrier (device activity when queue is set). */
typedef struct offtrace_buffer_tracing_sync_record_t {
    offtrace_buffer_tracing_record_t header;
    uint64_t object;
    uint32_t event_count;
    uint32_t reserved;
    uint64_t queue;
    uint64_t device;
    offtrace_timestamp_t device_start;
    offtrace_timestamp_t device_end;
} offtrace_buffer_tracing_sync_record_t;

typedef struct offtrace_buffer_tracing_queue_record_t {
    offtrace_buffer_tracing_record_t header;
    uint64_t queue;
    uint64_t device;
    uint64_t context;
    uint64_t flags; /* bit 0: in-order */
} offtrace_buffer_tracing_queue_record_t;

typedef struct offtrace_buffer_tracing_task_graph_record_t {
    offtrace_buffer_tracing_record_t header;
    uint64_t node;
    uint64_t source;
    uint64_t target;
    uint64_t event;
    uint64_t queue;
    uint32_t name_offset;
    uint32_t reserved;
} offtrace_buffer_tracing_task_graph_record_t;

typedef struct offtrace_buffer_tracing_code_object_record_t {
    offtrace_buffer_tracing_record_t header;
    uint64_t handle;
    uint64_t program;
    uint64_t binary_size;
    uint32_t name_offset;
    uint32_t reserved;
} offtrace_buffer_tracing_code_object_record_t;

typedef struct offtrace_buffer_tracing_marker_record_t {
    offtrace_buffer_tracing_record_t header;
    uint64_t range_id;
    uint32_t message_offset;
    uint32_t reserved;
} offtrace_buffer_tracing_marker_record_t;

typedef struct offtrace_buffer_tracing_device_record_t {
    offtrace_buffer_tracing_record_t header;
    uint64_t handle;
    uint64_t parent;
    offtrace_device_type_t device_type;
    uint32_t name_offset;
} offtrace_buffer_tracing_device_record_t;

/* COUNTER: DEFINE (value = offtrace_counter_value_type_t) or SAMPLE (value = the bits). */
typedef struct offtrace_buffer_tracing_counter_record_t {
    offtrace_buffer_tracing_record_t header;
    uint64_t counter;
    uint64_t device;
    uint64_t value;
    uint32_t name_offset;
    uint32_t unit_offset;
} offtrace_buffer_tracing_counter_record_t;

/* The largest record any kind makes: a buffer of at least this size holds every record (a
 * record larger than the buffer is dropped and counted). */
#define OFFTRACE_BUFFER_RECORD_MAX_SIZE 2144

typedef struct offtrace_kernel_allocation_properties_t {
    uint64_t base;
    uint64_t size;
    int32_t arg_index; /* -1: implicit (not named by an argument) */
    offtrace_memory_type_t type;
} offtrace_kernel_allocation_properties_t;

/* ------------------------------------------------------------------ callbacks */

typedef void (*offtrace_callback_tracing_cb_t)(offtrace_callback_tracing_record_t record,
                                               offtrace_user_data_t* user_data, void* callback_data);
/* records[0..count] point at typed records (see "buffer records"); runs on offtrace's delivery
 * thread (offtrace-buffer), never concurrently with another delivery of the same buffer. */
typedef void (*offtrace_buffer_tracing_cb_t)(offtrace_context_id_t context, offtrace_buffer_id_t buffer,
                                             const offtrace_buffer_tracing_record_t* const* records, size_t count,
                                             void* data, uint64_t drop_count);
typedef int (*offtrace_tracing_kind_cb_t)(offtrace_tracing_kind_t kind, void* data);
typedef int (*offtrace_tracing_kind_operation_cb_t)(offtrace_tracing_kind_t kind,
                                                    offtrace_tracing_operation_t operation, void* data);
typedef int (*offtrace_callback_tracing_operation_args_cb_t)(
    offtrace_tracing_kind_t kind, offtrace_tracing_operation_t operation, uint32_t arg_number,
    const void* arg_value_addr, int32_t arg_indirection_count, const char* arg_type, const char* arg_name,
    const char* arg_value_str, int32_t arg_dereference_count, void* data);

/* ------------------------------------------------------------------ tools */

typedef struct offtrace_client_id_t {
    const char* name; /* the tool may set it in offtrace_configure */
    uint32_t handle;
} offtrace_client_id_t;

typedef void (*offtrace_client_finalize_t)(offtrace_client_id_t client_id);
typedef int (*offtrace_tool_initialize_t)(offtrace_client_finalize_t finalize, void* tool_data);
typedef void (*offtrace_tool_finalize_t)(void* tool_data);

typedef struct offtrace_tool_configure_result_t {
    size_t size; /* sizeof(offtrace_tool_configure_result_t) */
    offtrace_tool_initialize_t initialize;
    offtrace_tool_finalize_t finalize;
    void* tool_data;
} offtrace_tool_configure_result_t;

/* Version encoding of `version` below and of offtrace_get_version's three numbers. */
#define OFFTRACE_VERSION_MAJOR 0
#define OFFTRACE_VERSION_MINOR 2
#define OFFTRACE_VERSION_PATCH 0
#define OFFTRACE_VERSION_ENCODE(major, minor, patch) ((major) * 10000 + (minor) * 100 + (patch))
#define OFFTRACE_VERSION OFFTRACE_VERSION_ENCODE(OFFTRACE_VERSION_MAJOR, OFFTRACE_VERSION_MINOR, OFFTRACE_VERSION_PATCH)

/* What a tool library exports (return NULL to decline). */
typedef offtrace_tool_configure_result_t* (*offtrace_configure_func_t)(uint32_t version, const char* runtime_version,
                                                                       uint32_t priority,
                                                                       offtrace_client_id_t* client_id);

/*
 * The registration entry point a tool library defines (rocprofiler-sdk's rocprofiler_configure).
 * The loader (OFFTRACE_TOOLS, `offtrace record --tool LIB`, offtrace_load_tools) dlopens the
 * library and calls it once, on the thread that loads tools, before any record is delivered:
 *   version         OFFTRACE_VERSION_ENCODE(major, minor, patch) of the loading offtrace;
 *   runtime_version a text such as "offtrace 0.2.0";
 *   priority        0 for the first tool loaded, 1 for the next, ...;
 *   client_id       the tool's identity: it may set client_id->name (static storage).
 * Return convention: NULL declines (the tool is not counted and nothing of it is called again);
 * otherwise a pointer to static storage whose `size` is sizeof(offtrace_tool_configure_result_t).
 * Then initialize(client_finalize, tool_data) runs: 0 = success, where the tool creates,
 * configures and starts its contexts. Nonzero = failure: every context the tool created during
 * initialize is stopped and destroyed with its buffers (flushed), and nothing of the tool runs
 * again (no finalize). finalize(tool_data) runs once: at the end of the process, in reverse load
 * order, or earlier when the tool calls client_finalize(client_id); called from inside one of
 * its callbacks, client_finalize is deferred to a thread of offtrace and runs as soon as that
 * callback returns (so finalize can still flush and destroy; the end of the process waits for it).
 */
offtrace_tool_configure_result_t* offtrace_configure(uint32_t version, const char* runtime_version, uint32_t priority,
                                                     offtrace_client_id_t* client_id);

/* ------------------------------------------------------------------ metrics (zet-shaped) */

/* Results are Level Zero ze_result_t values (same numbers). */
typedef uint32_t offtrace_metric_result_t;
#define OFFTRACE_METRIC_RESULT_SUCCESS 0u
#define OFFTRACE_METRIC_RESULT_NOT_READY 1u
#define OFFTRACE_METRIC_RESULT_ERROR_DEVICE_LOST 0x70000001u
#define OFFTRACE_METRIC_RESULT_ERROR_INSUFFICIENT_PERMISSIONS 0x70010000u
#define OFFTRACE_METRIC_RESULT_ERROR_NOT_AVAILABLE 0x70010001u /* two groups of one domain; second streamer */
#define OFFTRACE_METRIC_RESULT_ERROR_UNINITIALIZED 0x78000001u
#define OFFTRACE_METRIC_RESULT_ERROR_UNSUPPORTED_FEATURE 0x78000003u
#define OFFTRACE_METRIC_RESULT_ERROR_INVALID_ARGUMENT 0x78000004u /* wrong sampling type, group not active */
#define OFFTRACE_METRIC_RESULT_ERROR_INVALID_NULL_HANDLE 0x78000005u /* null, closed or destroyed handle */
#define OFFTRACE_METRIC_RESULT_ERROR_HANDLE_OBJECT_IN_USE 0x78000006u
#define OFFTRACE_METRIC_RESULT_ERROR_INVALID_NULL_POINTER 0x78000007u
#define OFFTRACE_METRIC_RESULT_ERROR_INVALID_SIZE 0x78000008u
#define OFFTRACE_METRIC_RESULT_ERROR_UNKNOWN 0x7fffffffu

#define OFFTRACE_METRIC_GROUP_SAMPLING_TYPE_EVENT_BASED 1u
#define OFFTRACE_METRIC_GROUP_SAMPLING_TYPE_TIME_BASED 2u
#define OFFTRACE_METRIC_VALUE_TYPE_UINT64 1u
#define OFFTRACE_METRIC_VALUE_TYPE_FLOAT64 3u
#define OFFTRACE_METRIC_STRING_SIZE 256

typedef uint32_t offtrace_metric_device_t;          /* 0: the host CPU; 1..: GPUs */
typedef uint64_t offtrace_metric_group_handle_t;    /* 0: null */
typedef uint64_t offtrace_metric_handle_t;
typedef uint64_t offtrace_metric_streamer_handle_t;
typedef uint64_t offtrace_metric_query_pool_handle_t;
typedef uint64_t offtrace_metric_query_handle_t;

typedef struct offtrace_metric_device_properties_t {
    uint32_t id;
    uint32_t type; /* 0 cpu, 1 gpu */
    char name[OFFTRACE_METRIC_STRING_SIZE];
    char uuid[64];
} offtrace_metric_device_properties_t;

typedef struct offtrace_metric_group_properties_t {
    char name[OFFTRACE_METRIC_STRING_SIZE];
    char description[OFFTRACE_METRIC_STRING_SIZE];
    uint32_t device;
    uint32_t domain;
    uint32_t sampling_type; /* OFFTRACE_METRIC_GROUP_SAMPLING_TYPE_* bits */
    uint32_t metric_count;
    uint64_t raw_report_size; /* bytes of one raw report */
} offtrace_metric_group_properties_t;

typedef struct offtrace_metric_properties_t {
    char name[OFFTRACE_METRIC_STRING_SIZE];
    char description[OFFTRACE_METRIC_STRING_SIZE];
    char component[OFFTRACE_METRIC_STRING_SIZE];
    char result_units[OFFTRACE_METRIC_STRING_SIZE];
    uint32_t metric_type; /* zet_metric_type_t */
    uint32_t result_type; /* OFFTRACE_METRIC_VALUE_TYPE_* */
} offtrace_metric_properties_t;

typedef struct offtrace_metric_streamer_desc_t {
    uint64_t sampling_period_ns;
    uint32_t notify_every_n_reports;
    uint32_t reserved;
} offtrace_metric_streamer_desc_t;

typedef struct offtrace_metric_typed_value_t {
    uint32_t type; /* OFFTRACE_METRIC_VALUE_TYPE_*: value is a uint64 or the bits of a double */
    uint32_t reserved;
    uint64_t value;
} offtrace_metric_typed_value_t;

/* ------------------------------------------------------------------ sysman (zes-shaped) */

typedef struct offtrace_sysman_energy_counter_t {
    uint64_t energy_uj;
    uint64_t timestamp_us; /* CLOCK_MONOTONIC */
} offtrace_sysman_energy_counter_t;

typedef struct offtrace_sysman_freq_state_t {
    double actual_mhz;
    uint64_t throttle_reasons; /* GPUs: NVML clock event reason bits */
} offtrace_sysman_freq_state_t;

typedef struct offtrace_sysman_mem_state_t {
    uint64_t size;
    uint64_t free;
} offtrace_sysman_mem_state_t;

typedef struct offtrace_sysman_pci_stats_t {
    uint64_t tx_kbs;
    uint64_t rx_kbs;
} offtrace_sysman_pci_stats_t;

typedef struct offtrace_sysman_ras_state_t {
    uint64_t corrected;
    uint64_t uncorrected;
} offtrace_sysman_ras_state_t;

typedef struct offtrace_sysman_event_t {
    uint32_t device;
    uint32_t reserved;
    uint64_t xid; /* the XID critical error's code */
} offtrace_sysman_event_t;

/* ------------------------------------------------------------------ functions */

/* BEGIN GENERATED FUNCTIONS */
/**
 * The library's version.
 *
 * Safety:
 * Each pointer must be null or writable.
 */
offtrace_status_t offtrace_get_version(uint32_t* major, uint32_t* minor, uint32_t* patch);

/**
 * A static description of a status code ("unknown status" for values it does not know).
 */
const char* offtrace_get_status_string(offtrace_status_t status);

/**
 * Creates a stopped context with no services (at most 8 exist at once).
 *
 * Safety:
 * context_id must be null or writable.
 */
offtrace_status_t offtrace_create_context(offtrace_context_id_t* context_id);

/**
 * Starts delivering records for the context's services. Idempotent.
 */
offtrace_status_t offtrace_start_context(offtrace_context_id_t context_id);

/**
 * Stops the context: when it returns, no enter is delivered any more and no callback of the
 * context runs (except the caller's own); exits of enters already delivered still arrive.
 */
offtrace_status_t offtrace_stop_context(offtrace_context_id_t context_id);

/**
 * Stops the context, waits for its callbacks in flight and its open enter/exit pairs, flushes
 * and releases its buffers, and frees it. OFFTRACE_STATUS_ERROR_BUSY inside a callback.
 */
offtrace_status_t offtrace_destroy_context(offtrace_context_id_t context_id);

/**
 * Writes 1 to status when the context is started, else 0.
 *
 * Safety:
 * status must be null or writable.
 */
offtrace_status_t offtrace_context_is_active(offtrace_context_id_t context_id, int* status);

/**
 * Calls callback(record, user_data, callback_args) on the emitting thread for the kind's
 * operations in operations[0..operations_count] (NULL/0 = all). A second configuration of the
 * same kind in the context fails with OFFTRACE_STATUS_ERROR_SERVICE_ALREADY_CONFIGURED.
 *
 * Safety:
 * operations must be null or hold operations_count ids; callback must be callable from
 * any thread with callback_args until the context is destroyed.
 */
offtrace_status_t offtrace_configure_callback_tracing_service(offtrace_context_id_t context_id, offtrace_tracing_kind_t kind, const offtrace_tracing_operation_t* operations, size_t operations_count, offtrace_callback_tracing_cb_t callback, void* callback_args);

/**
 * Creates a buffer in the context. Each producing thread stages up to size bytes of typed
 * records, rounded up to a power of two (size at least 64, at most 1 GiB; the staging is at
 * most twice size; with OFFTRACE_BUFFER_RECORD_MAX_SIZE or more
 * every record fits, a larger record is dropped and counted) and, when its records reach
 * watermark bytes, hands them to offtrace's delivery thread (offtrace-buffer) and goes
 * on: callback(context, buffer, records, count, data, drop_count) runs on that thread, never
 * concurrently with another delivery of the buffer, never on an application thread. The
 * callback for a watermark comes at most 1 ms (the delivery thread's poll period) after it was
 * reached, later only behind deliveries queued before it or while that thread waits for a CPU.
 * offtrace_flush_buffer delivers every thread's staged records. policy:
 * OFFTRACE_BUFFER_POLICY_LOSSLESS (never drops; a producing thread whose staging is full
 * waits until the delivery thread has made room) or OFFTRACE_BUFFER_POLICY_DISCARD (never
 * blocks; drops and counts a record that finds the staging full).
 *
 * Safety:
 * buffer_id must be null or writable; callback must be callable from any thread with data
 * until the context is destroyed.
 */
offtrace_status_t offtrace_create_buffer(offtrace_context_id_t context_id, size_t size, size_t watermark, offtrace_buffer_policy_t policy, offtrace_buffer_tracing_cb_t callback, void* data, offtrace_buffer_id_t* buffer_id);

/**
 * Sends records of the kind (operations as for callback tracing) to buffer_id, a buffer of
 * the same context. A second configuration of the kind fails.
 *
 * Safety:
 * operations must be null or hold operations_count ids.
 */
offtrace_status_t offtrace_configure_buffer_tracing_service(offtrace_context_id_t context_id, offtrace_tracing_kind_t kind, const offtrace_tracing_operation_t* operations, size_t operations_count, offtrace_buffer_id_t buffer_id);

/**
 * Has the delivery thread deliver every record written to the buffer before the call (all
 * threads, and records of threads in teardown), and returns when the callback has returned
 * for them; an empty buffer calls nothing (except to report drops counted since the last
 * delivery). OFFTRACE_STATUS_ERROR_BUSY inside a callback.
 */
offtrace_status_t offtrace_flush_buffer(offtrace_buffer_id_t buffer_id);

/**
 * Delivers what the buffer holds, then destroys it: its callback is never called again once
 * this returns and the id names nothing. OFFTRACE_STATUS_ERROR_CONTEXT_ACTIVE while its
 * context is started (stop it first); OFFTRACE_STATUS_ERROR_BUSY inside a callback. Records
 * its services still send (exits of calls entered before the stop) are dropped and counted.
 * offtrace_destroy_context destroys the context's buffers too.
 */
offtrace_status_t offtrace_destroy_buffer(offtrace_buffer_id_t buffer_id);

/**
 * Total records a discard-policy buffer dropped since it was created.
 *
 * Safety:
 * count must be null or writable.
 */
offtrace_status_t offtrace_buffer_get_dropped_count(offtrace_buffer_id_t buffer_id, uint64_t* count);

/**
 * The kind's name ("UR_API", ...), valid for the life of the process, and its length.
 *
 * Safety:
 * name and name_len must each be null or writable (not both null).
 */
offtrace_status_t offtrace_query_callback_tracing_kind_name(offtrace_tracing_kind_t kind, const char** name, uint64_t* name_len);

/**
 * The operation's name (for UR_API: the UR function, "urEnqueueKernelLaunch").
 *
 * Safety:
 * name and name_len must each be null or writable (not both null).
 */
offtrace_status_t offtrace_query_callback_tracing_kind_operation_name(offtrace_tracing_kind_t kind, offtrace_tracing_operation_t operation, const char** name, uint64_t* name_len);

/**
 * Calls callback(kind, data) for every tracing kind until it returns nonzero.
 *
 * Safety:
 * callback must be callable with data.
 */
offtrace_status_t offtrace_iterate_callback_tracing_kinds(offtrace_tracing_kind_cb_t callback, void* data);

/**
 * Calls callback(kind, operation, data) for every operation of the kind until nonzero.
 *
 * Safety:
 * callback must be callable with data.
 */
offtrace_status_t offtrace_iterate_callback_tracing_kind_operations(offtrace_tracing_kind_t kind, offtrace_tracing_kind_operation_cb_t callback, void* data);

/**
 * Calls callback for each argument of the record, in order, until it returns nonzero:
 * index, address of the raw value, indirection count, C type, name, value as text (a
 * const char* argument is printed as a quoted string when max_dereference_count > 0).
 * Call it inside the callback that received the record (the payload is valid only then).
 *
 * Safety:
 * record.payload must be the payload delivered with the record, still valid; callback must
 * be callable with user_data.
 */
offtrace_status_t offtrace_iterate_callback_tracing_kind_operation_args(offtrace_callback_tracing_record_t record, offtrace_callback_tracing_operation_args_cb_t callback, int32_t max_dereference_count, void* user_data);

/**
 * Pushes an external correlation id on the calling thread's stack for the context; records of
 * the context from this thread carry the top of the stack. thread_id must be 0 or the
 * calling thread's id (stacks are per thread).
 */
offtrace_status_t offtrace_push_external_correlation_id(offtrace_context_id_t context_id, offtrace_thread_id_t thread_id, offtrace_user_data_t external_correlation_id);

/**
 * Sets the context's process-wide external correlation id (0 clears it). Records of the
 * context from any thread whose own stack for the context is empty carry it (worker threads
 * of the runtime included); a thread's own pushed id wins. Call it from any thread.
 */
offtrace_status_t offtrace_set_process_external_correlation_id(offtrace_context_id_t context_id, offtrace_user_data_t external_correlation_id);

/**
 * Pops the top external correlation id of the calling thread's stack for the context into
 * external_correlation_id (may be null). OFFTRACE_STATUS_ERROR_STACK_EMPTY when empty.
 *
 * Safety:
 * external_correlation_id must be null or writable.
 */
offtrace_status_t offtrace_pop_external_correlation_id(offtrace_context_id_t context_id, offtrace_thread_id_t thread_id, offtrace_user_data_t* external_correlation_id);

/**
 * CLOCK_MONOTONIC now, in nanoseconds (the clock of every record).
 *
 * Safety:
 * ts must be null or writable.
 */
offtrace_status_t offtrace_get_timestamp(offtrace_timestamp_t* ts);

/**
 * The calling thread's kernel thread id (what records carry as thread_id).
 *
 * Safety:
 * thread_id must be null or writable.
 */
offtrace_status_t offtrace_get_thread_id(offtrace_thread_id_t* thread_id);

/**
 * The allocations a KERNEL_DISPATCH record's kernel uses, two-step: with properties NULL,
 * writes the number to *count; else fills up to *count entries and writes how many it
 * filled. Each entry: base, size, argument index (-1 = implicit), memory type.
 *
 * Safety:
 * record must be a KERNEL_DISPATCH record delivered to a callback, used during it; count
 * writable; properties null or writable for *count entries.
 */
offtrace_status_t offtrace_kernel_get_allocation_properties(const offtrace_callback_tracing_record_t* record, uint32_t* count, offtrace_kernel_allocation_properties_t* properties);

/**
 * The allocations a typed KERNEL_DISPATCH buffer record's kernel uses, two-step as
 * offtrace_kernel_get_allocation_properties: its inline argument values matched against the
 * live allocation table *as it is at this call* (in a buffer callback, later than the dispatch:
 * an allocation freed since is not found). No implicit allocations (a buffer record does not
 * carry them).
 *
 * Safety:
 * record must be a record delivered to a buffer callback, used during it; count writable;
 * properties null or writable for *count entries.
 */
offtrace_status_t offtrace_buffer_kernel_get_allocation_properties(const offtrace_buffer_tracing_record_t* record, uint32_t* count, offtrace_kernel_allocation_properties_t* properties);

/**
 * A one-shot MARKER record with the message.
 *
 * Safety:
 * message must be null or a NUL-terminated string (read during the call).
 */
void offtrace_marker_mark(const char* message);

/**
 * Opens a nested range on the calling thread; returns the depth before the push (0-based),
 * or -1 on error.
 *
 * Safety:
 * message must be null or a NUL-terminated string (read during the call).
 */
int32_t offtrace_marker_range_push(const char* message);

/**
 * Closes the innermost range of the calling thread; returns its depth, or -1 when none is open.
 */
int32_t offtrace_marker_range_pop(void);

/**
 * Loads the tools in paths (,- or :-separated; NULL = the OFFTRACE_TOOLS environment variable)
 * and initialises them. OFFTRACE_STATUS_ERROR_TOOL_LOAD when one cannot be loaded or fails
 * to initialise (the reason goes to stderr).
 *
 * Safety:
 * paths must be null or NUL-terminated.
 */
offtrace_status_t offtrace_load_tools(const char* paths);

/**
 * Calls every loaded tool's finalize once, in reverse load order.
 */
offtrace_status_t offtrace_finalize_tools(void);

/**
 * Devices with metrics (zeDeviceGet-like): ids, the host CPU first.
 *
 * Safety:
 * count must be writable; devices null or writable for *count ids.
 */
offtrace_metric_result_t offtrace_metric_device_get(uint32_t* count, offtrace_metric_device_t* devices);

/**
 * A device's properties.
 *
 * Safety:
 * props must be writable.
 */
offtrace_metric_result_t offtrace_metric_device_get_properties(offtrace_metric_device_t device, offtrace_metric_device_properties_t* props);

/**
 * zetMetricGroupGet.
 *
 * Safety:
 * count must be writable; groups null or writable for *count handles.
 */
offtrace_metric_result_t offtrace_metric_group_get(offtrace_metric_device_t device, uint32_t* count, offtrace_metric_group_handle_t* groups);

/**
 * zetMetricGroupGetProperties.
 *
 * Safety:
 * props must be writable.
 */
offtrace_metric_result_t offtrace_metric_group_get_properties(offtrace_metric_group_handle_t group, offtrace_metric_group_properties_t* props);

/**
 * zetMetricGet: a metric handle is group << 16 | (index + 1).
 *
 * Safety:
 * count must be writable; metrics null or writable for *count handles.
 */
offtrace_metric_result_t offtrace_metric_get(offtrace_metric_group_handle_t group, uint32_t* count, offtrace_metric_handle_t* metrics);

/**
 * zetMetricGetProperties.
 *
 * Safety:
 * props must be writable.
 */
offtrace_metric_result_t offtrace_metric_get_properties(offtrace_metric_handle_t metric, offtrace_metric_properties_t* props);

/**
 * zetDeviceActivateMetricGroups: exactly groups[0..count] active on device (0: none).
 * Two groups of one domain: OFFTRACE_METRIC_RESULT_ERROR_NOT_AVAILABLE.
 *
 * Safety:
 * groups must be readable for count handles (may be null when count is 0).
 */
offtrace_metric_result_t offtrace_metric_group_activate(offtrace_metric_device_t device, uint32_t count, const offtrace_metric_group_handle_t* groups);

/**
 * zetMetricTracerOpen (streamer). Group not time-based or not active:
 * OFFTRACE_METRIC_RESULT_ERROR_INVALID_ARGUMENT.
 *
 * Safety:
 * desc must be readable; streamer writable.
 */
offtrace_metric_result_t offtrace_metric_streamer_open(offtrace_metric_device_t device, offtrace_metric_group_handle_t group, const offtrace_metric_streamer_desc_t* desc, offtrace_metric_streamer_handle_t* streamer);

/**
 * zetMetricTracerReadData: *size == 0 (or data null) → the bytes of up to max_reports
 * reports now; else reads the whole reports that fit and sets *size to the bytes written.
 * A closed streamer: OFFTRACE_METRIC_RESULT_ERROR_INVALID_NULL_HANDLE.
 *
 * Safety:
 * size must be writable; data null or writable for *size bytes.
 */
offtrace_metric_result_t offtrace_metric_streamer_read_data(offtrace_metric_streamer_handle_t streamer, uint32_t max_reports, size_t* size, uint8_t* data);

/**
 * Waits for the streamer's notification (every N reports) at most timeout_ns:
 * OFFTRACE_METRIC_RESULT_NOT_READY on timeout.
 */
offtrace_metric_result_t offtrace_metric_streamer_wait(offtrace_metric_streamer_handle_t streamer, uint64_t timeout_ns);

/**
 * zetMetricTracerClose. Twice: OFFTRACE_METRIC_RESULT_ERROR_INVALID_NULL_HANDLE.
 */
offtrace_metric_result_t offtrace_metric_streamer_close(offtrace_metric_streamer_handle_t streamer);

/**
 * zetMetricQueryPoolCreate. Group not event-based or not active:
 * OFFTRACE_METRIC_RESULT_ERROR_INVALID_ARGUMENT.
 *
 * Safety:
 * pool must be writable.
 */
offtrace_metric_result_t offtrace_metric_query_pool_create(offtrace_metric_device_t device, offtrace_metric_group_handle_t group, uint32_t count, offtrace_metric_query_pool_handle_t* pool);

/**
 * zetMetricQueryPoolDestroy.
 */
offtrace_metric_result_t offtrace_metric_query_pool_destroy(offtrace_metric_query_pool_handle_t pool);

/**
 * zetMetricQueryCreate.
 *
 * Safety:
 * query must be writable.
 */
offtrace_metric_result_t offtrace_metric_query_create(offtrace_metric_query_pool_handle_t pool, uint32_t index, offtrace_metric_query_handle_t* query);

/**
 * zetMetricQueryDestroy.
 */
offtrace_metric_result_t offtrace_metric_query_destroy(offtrace_metric_query_handle_t query);

/**
 * zetMetricQueryReset.
 */
offtrace_metric_result_t offtrace_metric_query_reset(offtrace_metric_query_handle_t query);

/**
 * zetCommandListAppendMetricQueryBegin for a host command: the group's values now.
 */
offtrace_metric_result_t offtrace_metric_query_begin(offtrace_metric_query_handle_t query);

/**
 * zetCommandListAppendMetricQueryEnd for a host command.
 */
offtrace_metric_result_t offtrace_metric_query_end(offtrace_metric_query_handle_t query);

/**
 * zetMetricQueryGetData: one raw report; *size == 0 (or data null) → its size. Before
 * the query's end: OFFTRACE_METRIC_RESULT_NOT_READY.
 *
 * Safety:
 * size must be writable; data null or writable for *size bytes.
 */
offtrace_metric_result_t offtrace_metric_query_get_data(offtrace_metric_query_handle_t query, size_t* size, uint8_t* data);

/**
 * zetMetricGroupCalculateMetricValues: one value per metric per report, report after
 * report. *count == 0 (or values null) → the number of values; else writes up to *count.
 * A partial report: OFFTRACE_METRIC_RESULT_ERROR_INVALID_SIZE.
 *
 * Safety:
 * raw readable for size bytes; count writable; values null or writable for *count.
 */
offtrace_metric_result_t offtrace_metric_group_calculate_metric_values(offtrace_metric_group_handle_t group, size_t size, const uint8_t* raw, uint32_t* count, offtrace_metric_typed_value_t* values);

/**
 * zesDeviceGet: *count == 0 (or devices null) → the number of devices.
 *
 * Safety:
 * count writable; devices null or writable for *count ids.
 */
offtrace_metric_result_t offtrace_sysman_device_get(uint32_t* count, offtrace_metric_device_t* devices);

/**
 * zesDeviceGetProperties.
 *
 * Safety:
 * props writable.
 */
offtrace_metric_result_t offtrace_sysman_device_get_properties(offtrace_metric_device_t device, offtrace_metric_device_properties_t* props);

/**
 * zesPowerGetEnergyCounter.
 *
 * Safety:
 * energy writable.
 */
offtrace_metric_result_t offtrace_sysman_power_get_energy_counter(offtrace_metric_device_t device, offtrace_sysman_energy_counter_t* energy);

/**
 * zesPowerGetLimits: the sustained (enforced) limit in mW.
 *
 * Safety:
 * sustained_mw writable.
 */
offtrace_metric_result_t offtrace_sysman_power_get_limit(offtrace_metric_device_t device, uint64_t* sustained_mw);

/**
 * zesFrequencyGetState.
 *
 * Safety:
 * state writable.
 */
offtrace_metric_result_t offtrace_sysman_frequency_get_state(offtrace_metric_device_t device, offtrace_sysman_freq_state_t* state);

/**
 * zesTemperatureGetState in degrees Celsius.
 *
 * Safety:
 * celsius writable.
 */
offtrace_metric_result_t offtrace_sysman_temperature_get_state(offtrace_metric_device_t device, double* celsius);

/**
 * zesMemoryGetState.
 *
 * Safety:
 * state writable.
 */
offtrace_metric_result_t offtrace_sysman_memory_get_state(offtrace_metric_device_t device, offtrace_sysman_mem_state_t* state);

/**
 * zesPciGetStats: throughput in KB/s.
 *
 * Safety:
 * stats writable.
 */
offtrace_metric_result_t offtrace_sysman_pci_get_stats(offtrace_metric_device_t device, offtrace_sysman_pci_stats_t* stats);

/**
 * zesRasGetState: ECC errors since boot.
 *
 * Safety:
 * state writable.
 */
offtrace_metric_result_t offtrace_sysman_ras_get_state(offtrace_metric_device_t device, offtrace_sysman_ras_state_t* state);

/**
 * zesDriverEventListen: waits at most timeout_ms for an XID critical error on any GPU;
 * OFFTRACE_METRIC_RESULT_NOT_READY on timeout.
 *
 * Safety:
 * event writable.
 */
offtrace_metric_result_t offtrace_sysman_event_wait(uint32_t timeout_ms, offtrace_sysman_event_t* event);

/* END GENERATED FUNCTIONS */

#ifdef __cplusplus
}
#endif

#endif /* OFFTRACE_OFFTRACE_H */
