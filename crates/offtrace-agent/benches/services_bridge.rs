//! The services bridge's cost per UR call (`services_bridge::on_notification`), without the
//! dispatcher and without the recorder: a `function_with_args_begin` + `end` pair of
//! `urEnqueueUSMMemcpy` with a real params struct, per pair.
//!
//! - `bridge/disabled`: no tool loaded (the bridge off): what every notification pays.
//! - `bridge/on_no_context`: the bridge on, no started context: arguments read, no delivery.
//! - `bridge/callback_noop`: one context with a no-op `UR_API` callback: enter + exit delivered.
#![allow(unsafe_code, missing_docs)]

use std::ffi::c_void;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use offtrace_agent::decode::{Raw, StreamKind};
use offtrace_agent::services_bridge;
use offtrace_core::{
    Kind, configure_callback_tracing_closure, create_context, register_kind_operations, start_context,
};
use offtrace_xpti::abi::{FunctionWithArgs, trace_type as tt};

fn bench(c: &mut Criterion) {
    let f = offtrace_xpti::ur::function_by_name("urEnqueueUSMMemcpy").expect("memcpy");
    let (queue, blocking, dst, src, size, nwait, wait_list, event) =
        (0x1111u64, 0u8, 0x2000u64, 0x3000u64, 64u64, 0u32, 0u64, 0u64);
    let ph_event = &event as *const u64 as u64;
    let params: [*const c_void; 8] = [
        (&queue as *const u64).cast(),
        (&blocking as *const u8).cast(),
        (&dst as *const u64).cast(),
        (&src as *const u64).cast(),
        (&size as *const u64).cast(),
        (&nwait as *const u32).cast(),
        (&wait_list as *const u64).cast(),
        (&ph_event as *const u64).cast(),
    ];
    let result: i32 = 0;
    let fwa = FunctionWithArgs {
        function_id: f.id,
        function_name: c"urEnqueueUSMMemcpy".as_ptr(),
        args_data: params.as_ptr().cast_mut().cast(),
        ret_data: (&result as *const i32).cast_mut().cast(),
        user_data: std::ptr::null_mut(),
    };
    let raw = |trace_type| Raw {
        trace_type,
        parent: std::ptr::null(),
        event: std::ptr::null(),
        instance: 7,
        user_data: (&fwa as *const FunctionWithArgs).cast(),
    };
    let (begin, end) = (raw(tt::FUNCTION_WITH_ARGS_BEGIN), raw(tt::FUNCTION_WITH_ARGS_END));
    let pair = || {
        // SAFETY: `begin`/`end` point at the bench's live function_with_args and event.
        unsafe {
            services_bridge::on_notification(StreamKind::UrCall, 1, c"ur.call", black_box(&begin));
            services_bridge::on_notification(StreamKind::UrCall, 1, c"ur.call", black_box(&end));
        }
    };
    let _ = register_kind_operations(Kind::UrApi, services_bridge::ur_operations());

    let mut g = c.benchmark_group("bridge");
    services_bridge::set_active(false);
    g.bench_function("disabled", |b| b.iter(pair));
    services_bridge::set_active(true);
    g.bench_function("on_no_context", |b| b.iter(pair));
    let ctx = create_context().expect("context");
    configure_callback_tracing_closure(ctx, Kind::UrApi, None, |r, _| {
        black_box(r);
    })
    .expect("configure");
    start_context(ctx).expect("start");
    g.bench_function("callback_noop", |b| b.iter(pair));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
