//! `offtrace report`: the summary of a trace as text tables, JSON or CSV sections.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use comfy_table::{CellAlignment, ContentArrangement, LineStyle, Table, TableStyle};
use offtrace_analysis::{KernelAllocationSummary, Summary, SummaryBuilder};
use offtrace_format::TraceReader;

use crate::cli::{ReportConfig, ReportFormat};
use crate::format::{bytes, count, duration, shorten};

/// Reads a whole trace into a summary. A truncated or damaged trace gives the summary of what
/// was read and a warning on stderr; a file that is no trace at all is an error.
pub fn read_summary(path: &Path) -> anyhow::Result<Summary> {
    let reader = TraceReader::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut builder = SummaryBuilder::new();
    for item in reader {
        match item {
            Ok(r) => builder.push(&r),
            Err(e) => {
                if e.is_truncated() {
                    eprintln!("offtrace: warning: trace truncated, reporting what was read: {e}");
                } else {
                    eprintln!("offtrace: warning: reporting what was read before an error: {e}");
                }
                break;
            }
        }
    }
    Ok(builder.finish())
}

pub fn run(cfg: &ReportConfig) -> anyhow::Result<u8> {
    let summary = read_summary(&cfg.file)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match cfg.format {
        ReportFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &summary).context("writing JSON")?;
            writeln!(out)?;
        }
        ReportFormat::Text => write_text(&mut out, &cfg.file, &summary)?,
        ReportFormat::Csv => {
            for (i, (title, header, rows)) in sections(&summary).into_iter().enumerate() {
                if i > 0 {
                    writeln!(out)?;
                }
                writeln!(out, "# {title}")?;
                let mut w = csv::Writer::from_writer(&mut out);
                w.write_record(&header)?;
                for r in rows {
                    w.write_record(&r)?;
                }
                w.flush()?;
            }
        }
    }
    out.flush()?;
    Ok(0)
}

fn opt_dur(v: Option<u64>) -> String {
    v.map_or_else(|| "n/a".to_owned(), duration)
}

type Section = (&'static str, Vec<&'static str>, Vec<Vec<String>>);

/// Every table of the report, as raw values (for CSV; the text report formats its own).
fn sections(s: &Summary) -> Vec<Section> {
    let mut v: Vec<Section> = Vec::new();
    v.push(("trace", vec!["key", "value"], {
        let mut rows: Vec<Vec<String>> = s.trace.info.iter().map(|(k, val)| vec![k.clone(), val.clone()]).collect();
        rows.push(vec!["records".into(), s.trace.records.to_string()]);
        rows.push(vec!["notifications".into(), s.trace.notifications.to_string()]);
        rows.push(vec!["wall_ns".into(), s.trace.wall_ns.to_string()]);
        rows.push(vec!["complete".into(), s.trace.complete.to_string()]);
        rows.push(vec!["drops".into(), s.drops.total.to_string()]);
        rows
    }));
    v.push((
        "ur_calls",
        vec!["function", "function_id", "calls", "total_ns", "mean_ns", "min_ns", "max_ns", "wall_share", "errors"],
        s.ur_calls
            .iter()
            .map(|c| {
                vec![
                    c.name.clone(),
                    c.function_id.to_string(),
                    c.calls.to_string(),
                    c.total_ns.to_string(),
                    c.mean_ns.to_string(),
                    c.min_ns.to_string(),
                    c.max_ns.to_string(),
                    format!("{:.6}", c.wall_share),
                    c.errors.to_string(),
                ]
            })
            .collect(),
    ));
    v.push((
        "sycl_commands",
        vec![
            "command",
            "kind",
            "count",
            "host_total_ns",
            "host_mean_ns",
            "host_max_ns",
            "device_count",
            "device_total_ns",
            "device_mean_ns",
            "queues",
        ],
        s.commands
            .iter()
            .map(|c| {
                vec![
                    c.name.clone(),
                    c.kind.clone(),
                    c.count.to_string(),
                    c.host_total_ns.to_string(),
                    c.host_mean_ns.to_string(),
                    c.host_max_ns.to_string(),
                    c.device_count.to_string(),
                    c.device_total_ns.map_or("n/a".into(), |v| v.to_string()),
                    c.device_mean_ns.map_or("n/a".into(), |v| v.to_string()),
                    c.queues.iter().map(u64::to_string).collect::<Vec<_>>().join(" "),
                ]
            })
            .collect(),
    ));
    v.push((
        "memory_allocations",
        vec!["kind", "device", "count", "bytes", "max_bytes"],
        s.memory
            .allocations
            .iter()
            .map(|a| {
                vec![
                    a.kind.clone(),
                    a.device.clone(),
                    a.count.to_string(),
                    a.bytes.to_string(),
                    a.max_bytes.to_string(),
                ]
            })
            .collect(),
    ));
    let m = &s.memory;
    v.push((
        "memory",
        vec!["key", "value"],
        vec![
            vec!["peak_live_bytes".into(), m.peak_live_bytes.to_string()],
            vec!["live_bytes_at_end".into(), m.live_bytes_at_end.to_string()],
            vec!["releases".into(), m.releases.to_string()],
            vec!["buffers_constructed".into(), m.buffers.constructed.to_string()],
            vec!["buffers_destructed".into(), m.buffers.destructed.to_string()],
            vec!["buffer_bytes".into(), m.buffers.bytes.to_string()],
            vec!["buffer_associations".into(), m.buffers.associations.to_string()],
            vec!["accessors".into(), m.buffers.accessors.to_string()],
        ],
    ));
    v.push((
        "memory_ops",
        vec!["op", "source", "count", "bytes", "host_ns", "device_ns", "rate_gb_s"],
        m.ops
            .iter()
            .map(|o| {
                vec![
                    o.op.clone(),
                    o.source.clone(),
                    o.count.to_string(),
                    o.bytes.to_string(),
                    o.host_ns.to_string(),
                    o.device_ns.map_or("n/a".into(), |v| v.to_string()),
                    o.rate_gb_s.map_or("n/a".into(), |r| format!("{r:.3}")),
                ]
            })
            .collect(),
    ));
    v.push((
        "queues",
        vec!["queue_id", "device", "in_order", "commands", "host_ns", "device_ns", "created_ns", "destroyed_ns"],
        s.queues
            .iter()
            .map(|q| {
                vec![
                    q.queue_id.to_string(),
                    q.device.clone(),
                    q.is_inorder.map_or(String::new(), |b| b.to_string()),
                    q.commands.to_string(),
                    q.host_ns.to_string(),
                    q.device_ns.to_string(),
                    q.created_ns.map_or(String::new(), |v| v.to_string()),
                    q.destroyed_ns.map_or(String::new(), |v| v.to_string()),
                ]
            })
            .collect(),
    ));
    let g = &s.graph;
    v.push((
        "task_graph",
        vec!["key", "value"],
        vec![
            vec!["nodes".into(), g.nodes.to_string()],
            vec!["edges".into(), g.edges.to_string()],
            vec!["unresolved_edges".into(), g.unresolved_edges.to_string()],
            vec!["longest_chain_len".into(), g.longest_chain_len.to_string()],
            vec!["longest_chain_host_ns".into(), g.longest_chain_host_ns.to_string()],
            vec!["longest_chain".into(), g.longest_chain.join(" -> ")],
        ],
    ));
    v.push((
        "kernel_allocations",
        vec![
            "kernel",
            "dispatches",
            "linked",
            "distinct_sets",
            "arg_index",
            "size",
            "memory_type",
            "arg_dispatches",
            "first_base",
            "distinct_bases",
        ],
        s.kernel_allocations
            .kernels
            .iter()
            .flat_map(|k| {
                let head =
                    [k.kernel.clone(), k.dispatches.to_string(), k.linked.to_string(), k.distinct_sets.to_string()];
                let empty = k.allocations.is_empty().then(|| {
                    let mut r = head.to_vec();
                    r.extend(std::iter::repeat_n(String::new(), 6));
                    r
                });
                k.allocations
                    .iter()
                    .map(move |a| {
                        let mut r = head.to_vec();
                        r.extend([
                            a.arg_index.to_string(),
                            a.size.to_string(),
                            a.memory_type.clone(),
                            a.dispatches.to_string(),
                            format!("0x{:x}", a.first_base),
                            a.distinct_bases.to_string(),
                        ]);
                        r
                    })
                    .chain(empty)
                    .collect::<Vec<_>>()
            })
            .collect(),
    ));
    v.push((
        "threads",
        vec!["tid", "name", "notifications", "drops"],
        s.threads
            .iter()
            .map(|t| vec![t.tid.to_string(), t.name.clone(), t.notifications.to_string(), t.drops.to_string()])
            .collect(),
    ));
    v.push((
        "notifications",
        vec!["stream", "trace_type", "count"],
        s.notifications
            .iter()
            .flat_map(|(stream, types)| types.iter().map(move |(t, n)| vec![stream.clone(), t.clone(), n.to_string()]))
            .collect(),
    ));
    v
}

/// Header underlined, no other lines: compact, and easy to grep.
const STYLE: TableStyle = TableStyle::new().header_separator(LineStyle::none().fill('─').junction('─'));

/// A table fitted to the terminal's width when stdout is a terminal (comfy-table's dynamic
/// arrangement), unconstrained otherwise.
fn table(header: &[&str], right_from: usize) -> Table {
    let mut t = Table::new();
    t.load_style(STYLE).set_content_arrangement(ContentArrangement::Dynamic).set_header(header.to_vec());
    for i in right_from..header.len() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

fn write_text(out: &mut dyn Write, file: &Path, s: &Summary) -> anyhow::Result<()> {
    let t = &s.trace;
    writeln!(out, "offtrace report: {}", file.display())?;
    if let Some(cmd) = t.info.get("command") {
        let pid = t.info.get("pid").map(|p| format!(" (pid {p})")).unwrap_or_default();
        writeln!(out, "program: {cmd}{pid}")?;
    }
    writeln!(
        out,
        "trace: {} records, {} notifications over {}, {} dropped, {}",
        count(t.records),
        count(t.notifications),
        duration(t.wall_ns),
        count(s.drops.total),
        if t.complete { "complete" } else { "INCOMPLETE (no End record: the recording was cut off)" }
    )?;
    if t.unmatched_ends + t.unclosed_begins > 0 {
        writeln!(out, "pairing: {} ends without a begin, {} begins never ended", t.unmatched_ends, t.unclosed_begins)?;
    }

    let calls: u64 = s.ur_calls.iter().map(|c| c.calls).sum();
    writeln!(out, "\nUR calls: {} calls of {} functions", count(calls), s.ur_calls.len())?;
    if !s.ur_calls.is_empty() {
        let mut tb = table(&["function", "calls", "total", "mean", "min", "max", "% wall"], 1);
        for c in &s.ur_calls {
            tb.add_row(vec![
                c.name.clone(),
                count(c.calls),
                duration(c.total_ns),
                duration(c.mean_ns),
                duration(c.min_ns),
                duration(c.max_ns),
                format!("{:.1}", c.wall_share * 100.0),
            ]);
        }
        writeln!(out, "{tb}")?;
    }

    let n: u64 = s.commands.iter().map(|c| c.count).sum();
    writeln!(
        out,
        "\nSYCL commands: {} commands of {} kinds (host = enqueue, task_begin→task_end; device = from the program's profiling queries, n/a otherwise)",
        count(n),
        s.commands.len()
    )?;
    if !s.commands.is_empty() {
        let mut tb =
            table(&["command", "kind", "count", "host total", "host mean", "device total", "device mean", "queues"], 2);
        for c in &s.commands {
            tb.add_row(vec![
                shorten(&c.name, 60),
                c.kind.clone(),
                count(c.count),
                duration(c.host_total_ns),
                duration(c.host_mean_ns),
                match c.device_total_ns {
                    Some(t) if c.device_count < c.count => {
                        format!("{} ({} of {})", duration(t), c.device_count, c.count)
                    }
                    other => opt_dur(other),
                },
                opt_dur(c.device_mean_ns),
                c.queues.iter().map(u64::to_string).collect::<Vec<_>>().join(" "),
            ]);
        }
        writeln!(out, "{tb}")?;
    }

    let m = &s.memory;
    writeln!(
        out,
        "\nMemory: peak {} live, {} live at the end, {} releases",
        bytes(m.peak_live_bytes),
        bytes(m.live_bytes_at_end),
        count(m.releases)
    )?;
    if !m.allocations.is_empty() {
        let mut tb = table(&["allocations", "device", "count", "bytes", "largest"], 2);
        for a in &m.allocations {
            tb.add_row(vec![a.kind.clone(), a.device.clone(), count(a.count), bytes(a.bytes), bytes(a.max_bytes)]);
        }
        writeln!(out, "{tb}")?;
    }
    if m.buffers.constructed + m.buffers.accessors > 0 {
        writeln!(
            out,
            "buffers: {} constructed ({}), {} destructed, {} associations, {} accessors",
            m.buffers.constructed,
            bytes(m.buffers.bytes),
            m.buffers.destructed,
            m.buffers.associations,
            m.buffers.accessors
        )?;
    }
    if !m.ops.is_empty() {
        writeln!(out)?;
        let mut tb = table(&["copies and fills", "source", "count", "bytes", "host time", "device time", "rate"], 2);
        for o in &m.ops {
            tb.add_row(vec![
                o.op.clone(),
                o.source.clone(),
                count(o.count),
                bytes(o.bytes),
                duration(o.host_ns),
                opt_dur(o.device_ns),
                o.rate_gb_s.map_or("n/a".into(), |r| format!("{r:.2} GB/s")),
            ]);
        }
        writeln!(out, "{tb}")?;
    }

    writeln!(out, "\nQueues: {}", s.queues.len())?;
    if !s.queues.is_empty() {
        let mut tb = table(&["queue", "device", "order", "commands", "host time", "device time", "lifetime"], 3);
        for q in &s.queues {
            let life = match (q.created_ns, q.destroyed_ns) {
                (Some(c), Some(d)) => duration(d.saturating_sub(c)),
                (Some(_), None) => "not destroyed".into(),
                _ => String::new(),
            };
            tb.add_row(vec![
                q.queue_id.to_string(),
                q.device.clone(),
                q.is_inorder.map_or("?".into(), |b| if b { "in-order".into() } else { "out-of-order".to_owned() }),
                count(q.commands),
                duration(q.host_ns),
                if q.device_ns > 0 { duration(q.device_ns) } else { "n/a".into() },
                life,
            ]);
        }
        writeln!(out, "{tb}")?;
    }

    let g = &s.graph;
    writeln!(
        out,
        "\nTask graph: {} nodes, {} edges{}; longest dependency chain: {} commands ({} host enqueue time)",
        count(g.nodes),
        count(g.edges),
        if g.unresolved_edges > 0 { format!(" ({} unresolved)", g.unresolved_edges) } else { String::new() },
        g.longest_chain_len,
        duration(g.longest_chain_host_ns)
    )?;
    if g.longest_chain_len > 1 {
        let chain: Vec<String> = g.longest_chain.iter().map(|n| shorten(n, 40)).collect();
        writeln!(out, "  {}", chain.join(" → "))?;
    }

    write_kernel_allocations(out, &s.kernel_allocations)?;

    writeln!(out, "\nThreads: {}", s.threads.len())?;
    let mut tb = table(&["tid", "name", "notifications", "dropped"], 2);
    for th in &s.threads {
        tb.add_row(vec![th.tid.to_string(), th.name.clone(), count(th.notifications), count(th.drops)]);
    }
    writeln!(out, "{tb}")?;
    writeln!(out, "Dropped records: {}", count(s.drops.total))?;

    writeln!(out, "\nNotifications by stream and trace type:")?;
    let mut tb = table(&["stream", "trace type", "count"], 2);
    for (stream, types) in &s.notifications {
        for (tt, n) in types {
            tb.add_row(vec![stream.clone(), tt.clone(), count(*n)]);
        }
    }
    writeln!(out, "{tb}")?;
    Ok(())
}

/// Kernels listed in the text report; the JSON lists them all.
const MAX_KERNELS: usize = 40;
/// Distinct (argument, size, type) lines per kernel in the text report.
const MAX_ALLOCATION_LINES: usize = 16;

/// Per kernel: how many dispatches, then one line per distinct (argument, size, memory type)
/// with the dispatches that used it and where it lives: the base if it never moved, else how
/// many bases and the first. Thousands of dispatches of a kernel that always uses the same
/// buffers stay a handful of lines; the JSON report has every dispatch.
fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", count(n), if n == 1 { one } else { many })
}

fn write_kernel_allocations(out: &mut dyn Write, k: &KernelAllocationSummary) -> anyhow::Result<()> {
    if k.dispatches.is_empty() {
        writeln!(out, "\nKernel allocations: none recorded (no kernel dispatch records in this trace)")?;
        return Ok(());
    }
    let n = k.dispatches.len() as u64;
    writeln!(
        out,
        "\nKernel allocations: {} of {}, {} linked to a SYCL command (every allocation a kernel used; implicit = not passed as an argument)",
        plural(n, "dispatch", "dispatches"),
        plural(k.kernels.len() as u64, "kernel", "kernels"),
        count(k.linked)
    )?;
    for kernel in k.kernels.iter().take(MAX_KERNELS) {
        let mut facts = vec![plural(kernel.dispatches, "dispatch", "dispatches")];
        if kernel.linked < kernel.dispatches {
            facts.push(format!("{} not linked to a SYCL command", count(kernel.dispatches - kernel.linked)));
        }
        if kernel.allocations.is_empty() {
            facts.push("no allocations".into());
        } else {
            if kernel.distinct_sets > 1 {
                facts.push(format!("{} different allocation sets", count(kernel.distinct_sets)));
            }
            facts.push(format!("up to {} per dispatch", bytes(kernel.max_dispatch_bytes)));
        }
        writeln!(out, "  {}: {}", shorten(&kernel.kernel, 80), facts.join(", "))?;
        for a in kernel.allocations.iter().take(MAX_ALLOCATION_LINES) {
            let arg = if a.arg_index < 0 { "implicit".to_owned() } else { format!("arg {}", a.arg_index) };
            let size =
                if a.size < 1024 { format!("{} B", a.size) } else { format!("{} B ({})", a.size, bytes(a.size)) };
            let uses = if a.dispatches == kernel.dispatches && kernel.dispatches > 1 {
                format!("all {} dispatches", count(a.dispatches))
            } else {
                plural(a.dispatches, "dispatch", "dispatches")
            };
            let base = if a.distinct_bases <= 1 {
                format!("base 0x{:x}", a.first_base)
            } else {
                format!("{} bases, first 0x{:x}", count(a.distinct_bases), a.first_base)
            };
            writeln!(out, "    {arg}: {size} {} ({uses}), {base}", a.memory_type)?;
        }
        if kernel.allocations.len() > MAX_ALLOCATION_LINES {
            writeln!(
                out,
                "    … {} more (argument, size, type) combinations (--format json lists every dispatch)",
                kernel.allocations.len() - MAX_ALLOCATION_LINES
            )?;
        }
    }
    if k.kernels.len() > MAX_KERNELS {
        writeln!(out, "  … {} more kernels (--format json lists them all)", k.kernels.len() - MAX_KERNELS)?;
    }
    Ok(())
}
