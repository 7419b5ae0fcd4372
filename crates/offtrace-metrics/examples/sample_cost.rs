//! The cost of one sample per group, split into collection (reading the source) and
//! calculation, measured as the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID) over many
//! samples: `cargo run --release -p offtrace-metrics --example sample_cost [samples]`.

use offtrace_metrics::{Metrics, RawReport, calculate, thread_cpu_ns};

fn main() -> Result<(), offtrace_metrics::MetricsError> {
    let n: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let m = Metrics::global();
    for g in &m.catalog().groups {
        let mut c = g.open()?;
        let mut base = vec![0u64; g.slots];
        c.read(&mut base)?;
        let mut now = base.clone();
        let t0 = thread_cpu_ns();
        for _ in 0..n {
            c.read(&mut now)?;
        }
        let read = (thread_cpu_ns() - t0) as f64 / n as f64;
        let r = RawReport { ts_ns: 2, prev_ts_ns: 1, now: now.clone(), prev: base.clone(), base: base.clone() };
        let t0 = thread_cpu_ns();
        let mut keep = 0.0;
        for _ in 0..n {
            keep += calculate(&g.info.metrics, std::hint::black_box(&r))[0].as_f64();
        }
        let calc = (thread_cpu_ns() - t0) as f64 / n as f64;
        std::hint::black_box(keep);
        println!(
            "{:<15} dev{} {:>2} metrics: collect {:>7.2} us, calculate {:>6.3} us per sample",
            g.info.name,
            g.info.device,
            g.info.metrics.len(),
            read / 1000.0,
            calc / 1000.0
        );
    }
    // The per-command path of `record --query-metrics`: a query created, begun, ended, read,
    // calculated and destroyed (one command), on the process group.
    if let Some(&gi) = m.catalog().find("cpu.sw").first() {
        let g = offtrace_metrics::GroupHandle(gi);
        m.activate(0, &[g])?;
        let pool = m.query_pool_create(0, g, u32::MAX)?;
        let t0 = thread_cpu_ns();
        for _ in 0..n {
            let q = m.query_create(pool, 0)?;
            m.query_begin(q)?;
            m.query_end(q)?;
            let raw = m.query_get_data(q)?;
            std::hint::black_box(m.calculate(g, &raw)?);
            m.query_destroy(q)?;
        }
        let per = (thread_cpu_ns() - t0) as f64 / n as f64;
        println!("cpu.sw query per command (create, begin, end, data, calculate, destroy): {:.2} us", per / 1000.0);
        m.query_pool_destroy(pool)?;
        m.activate(0, &[])?;
    }
    Ok(())
}
