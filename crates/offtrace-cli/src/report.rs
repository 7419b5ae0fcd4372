//! `offtrace report`: the report of a trace as text tables, JSON or CSV sections.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use comfy_table::{CellAlignment, ColumnConstraint, ContentArrangement, LineStyle, Table, TableStyle, Width};
use offtrace_analysis::{Report, analyze_file};

use crate::cli::{ReportConfig, ReportFormat};
use crate::format::{bandwidth, bytes, count, duration, value};

/// Reads a whole trace into a report. Damage is stepped over with a warning on stderr for
/// each stretch skipped; a file that is no trace at all (or empty) is an error.
pub fn read_report(path: &Path) -> anyhow::Result<Report> {
    let report = analyze_file(path, |w| eprintln!("offtrace: warning: {w}"))
        .with_context(|| format!("cannot read {}", path.display()))?;
    if let Some(p) = &report.trace.problem {
        eprintln!("offtrace: warning: {p}; reporting what was read");
    }
    Ok(report)
}

pub fn run(cfg: &ReportConfig) -> anyhow::Result<u8> {
    let report = read_report(&cfg.file)?;
    let others = crate::traces::siblings(&cfg.file);
    if !others.is_empty() && !matches!(cfg.format, ReportFormat::Text) {
        // The text report says so in its header; JSON and CSV keep their shape.
        let names: Vec<String> = others.iter().map(|p| p.display().to_string()).collect();
        eprintln!("offtrace: note: other traces of this recording (one per traced process): {}", names.join(", "));
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    match cfg.format {
        ReportFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &report).context("writing JSON")?;
            writeln!(out)?;
        }
        ReportFormat::Text => write_text(&mut out, &cfg.file, &report)?,
        ReportFormat::Csv => {
            for (i, (title, header, rows)) in sections(&report).into_iter().enumerate() {
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

fn opt_num(v: Option<u64>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

fn queues_text(q: &[u64]) -> String {
    q.iter().map(|q| format!("{q:#x}")).collect::<Vec<_>>().join(" ")
}

/// The text report's queue column: the handles when there are a few, else how many (the
/// queues section lists each; CSV and JSON keep the whole list).
fn queues_short(q: &[u64]) -> String {
    if q.len() <= 3 { queues_text(q) } else { format!("{} queues", q.len()) }
}

type Section = (&'static str, Vec<&'static str>, Vec<Vec<String>>);

/// Every table of the report, as raw values (for CSV; the text report formats its own).
fn sections(r: &Report) -> Vec<Section> {
    let mut v: Vec<Section> = Vec::new();
    let t = &r.trace;
    v.push(("trace", vec!["key", "value"], {
        let mut rows: Vec<Vec<String>> = t.info.iter().map(|(k, val)| vec![k.clone(), val.clone()]).collect();
        rows.push(vec!["format_version".into(), t.format_version.to_string()]);
        rows.push(vec!["records".into(), t.records.to_string()]);
        rows.push(vec!["wall_ns".into(), t.wall_ns.to_string()]);
        rows.push(vec!["complete".into(), t.complete.to_string()]);
        rows.push(vec!["drops".into(), r.drops.total.to_string()]);
        rows.push(vec!["warnings".into(), t.warnings.len().to_string()]);
        rows
    }));
    v.push((
        "api_calls",
        vec!["kind", "operation", "calls", "total_ns", "mean_ns", "min_ns", "max_ns", "errors", "device_activities"],
        r.api_calls
            .iter()
            .map(|c| {
                vec![
                    c.kind.clone(),
                    c.operation.clone(),
                    c.calls.to_string(),
                    c.total_ns.to_string(),
                    c.mean_ns.to_string(),
                    c.min_ns.to_string(),
                    c.max_ns.to_string(),
                    c.errors.to_string(),
                    c.device_activities.to_string(),
                ]
            })
            .collect(),
    ));
    v.push((
        "device_activity",
        vec![
            "kind",
            "name",
            "count",
            "device_count",
            "device_total_ns",
            "device_mean_ns",
            "device_min_ns",
            "device_max_ns",
            "host_enqueue_count",
            "host_enqueue_total_ns",
            "host_enqueue_mean_ns",
            "bytes",
            "queues",
        ],
        r.device_activity
            .iter()
            .map(|d| {
                vec![
                    d.kind.clone(),
                    d.name.clone(),
                    d.count.to_string(),
                    d.device_count.to_string(),
                    opt_num(d.device_total_ns),
                    opt_num(d.device_mean_ns),
                    opt_num(d.device_min_ns),
                    opt_num(d.device_max_ns),
                    d.host_enqueue_count.to_string(),
                    d.host_enqueue_total_ns.to_string(),
                    d.host_enqueue_mean_ns.to_string(),
                    d.bytes.to_string(),
                    queues_text(&d.queues),
                ]
            })
            .collect(),
    ));
    let m = &r.memory;
    v.push((
        "memory_allocations",
        vec!["memory_type", "device", "count", "bytes", "max_bytes", "peak_live_bytes"],
        m.allocations
            .iter()
            .map(|a| {
                vec![
                    a.memory_type.clone(),
                    a.device.clone(),
                    a.count.to_string(),
                    a.bytes.to_string(),
                    a.max_bytes.to_string(),
                    a.peak_live_bytes.to_string(),
                ]
            })
            .collect(),
    ));
    v.push((
        "memory",
        vec!["key", "value"],
        vec![
            vec!["peak_live_bytes".into(), m.peak_live_bytes.to_string()],
            vec!["live_bytes_at_end".into(), m.live_bytes_at_end.to_string()],
            vec!["frees".into(), m.frees.to_string()],
            vec!["unmatched_frees".into(), m.unmatched_frees.to_string()],
            vec!["sub_allocations".into(), m.sub_allocations.count.to_string()],
            vec!["sub_allocation_bytes".into(), m.sub_allocations.bytes.to_string()],
            vec!["fills".into(), m.fills.count.to_string()],
            vec!["fill_bytes".into(), m.fills.bytes.to_string()],
            vec!["maps".into(), m.maps.count.to_string()],
            vec!["map_bytes".into(), m.maps.bytes.to_string()],
        ],
    ));
    v.push((
        "memory_copies",
        vec!["direction", "count", "bytes", "device_count", "device_bytes", "device_ns", "bandwidth_gb_s"],
        m.copies
            .iter()
            .map(|c| {
                vec![
                    c.direction.clone(),
                    c.count.to_string(),
                    c.bytes.to_string(),
                    c.device_count.to_string(),
                    c.device_bytes.to_string(),
                    c.device_ns.to_string(),
                    c.bandwidth_gb_s.map_or(String::new(), |b| format!("{b:.3}")),
                ]
            })
            .collect(),
    ));
    v.push((
        "queues",
        vec![
            "queue",
            "device",
            "context",
            "in_order",
            "profiling",
            "commands",
            "by_kind",
            "device_busy_ns",
            "device_time_sum_ns",
            "created_ns",
            "destroyed_ns",
        ],
        r.queues
            .iter()
            .map(|q| {
                vec![
                    format!("{:#x}", q.queue),
                    q.device.clone(),
                    format!("{:#x}", q.context),
                    q.in_order.map_or(String::new(), |b| b.to_string()),
                    q.profiling.map_or(String::new(), |b| b.to_string()),
                    q.total_commands.to_string(),
                    q.commands.iter().map(|(k, n)| format!("{k}={n}")).collect::<Vec<_>>().join(" "),
                    q.device_busy_ns.to_string(),
                    q.device_time_sum_ns.to_string(),
                    opt_num(q.created_ns),
                    opt_num(q.destroyed_ns),
                ]
            })
            .collect(),
    ));
    let g = &r.task_graph;
    v.push((
        "task_graph",
        vec!["key", "value"],
        vec![
            vec!["nodes".into(), g.nodes.to_string()],
            vec!["edges".into(), g.edges.to_string()],
            vec!["signals".into(), g.signals.to_string()],
            vec!["unresolved_edges".into(), g.unresolved_edges.to_string()],
            vec!["longest_chain_len".into(), g.longest_chain_len.to_string()],
            vec!["longest_chain".into(), g.longest_chain.join(" -> ")],
        ],
    ));
    v.push((
        "threads",
        vec!["tid", "name", "api_calls", "api_total_ns", "device_activities", "drops"],
        r.threads
            .iter()
            .map(|t| {
                vec![
                    t.tid.to_string(),
                    t.name.clone(),
                    t.api_calls.to_string(),
                    t.api_total_ns.to_string(),
                    t.device_activities.to_string(),
                    t.drops.to_string(),
                ]
            })
            .collect(),
    ));
    v.push((
        "counters",
        vec!["name", "unit", "device", "samples", "min", "max", "mean", "last"],
        r.counters
            .iter()
            .map(|c| {
                vec![
                    c.name.clone(),
                    c.unit.clone(),
                    c.device.clone(),
                    c.samples.to_string(),
                    c.min.to_string(),
                    c.max.to_string(),
                    c.mean.to_string(),
                    c.last.to_string(),
                ]
            })
            .collect(),
    ));
    v.push((
        "command_metrics",
        vec!["kind", "name", "metric", "unit", "device", "commands", "total", "mean", "min", "max"],
        r.command_metrics
            .iter()
            .map(|m| {
                vec![
                    m.kind.clone(),
                    m.name.clone(),
                    m.metric.clone(),
                    m.unit.clone(),
                    m.device.clone(),
                    m.commands.to_string(),
                    m.total.to_string(),
                    m.mean.to_string(),
                    m.min.to_string(),
                    m.max.to_string(),
                ]
            })
            .collect(),
    ));
    v.push((
        "code_objects",
        vec![
            "operation",
            "loads",
            "unloads",
            "unmatched_unloads",
            "loaded_at_end",
            "sized_loads",
            "bytes",
            "max_bytes",
            "unnamed_loads",
        ],
        r.code_objects
            .iter()
            .map(|c| {
                vec![
                    c.operation.clone(),
                    c.loads.to_string(),
                    c.unloads.to_string(),
                    c.unmatched_unloads.to_string(),
                    c.loaded_at_end.to_string(),
                    c.sized_loads.to_string(),
                    opt_num(c.bytes),
                    opt_num(c.max_bytes),
                    c.unnamed_loads.to_string(),
                ]
            })
            .collect(),
    ));
    v.push((
        "code_object_names",
        vec!["operation", "name", "loads", "unloads", "bytes", "max_bytes"],
        r.code_objects
            .iter()
            .flat_map(|c| {
                c.names.iter().map(|n| {
                    vec![
                        c.operation.clone(),
                        n.name.clone(),
                        n.loads.to_string(),
                        n.unloads.to_string(),
                        opt_num(n.bytes),
                        opt_num(n.max_bytes),
                    ]
                })
            })
            .collect(),
    ));
    v.push((
        "markers",
        vec!["name", "kind", "count", "total_ns"],
        r.markers
            .iter()
            .map(|m| vec![m.name.clone(), m.kind.clone(), m.count.to_string(), m.total_ns.to_string()])
            .collect(),
    ));
    v.push((
        "other",
        vec!["kind", "operation", "count"],
        r.other.iter().map(|o| vec![o.kind.clone(), o.operation.clone(), o.count.to_string()]).collect(),
    ));
    v.push((
        "notifications",
        vec!["stream", "type", "count"],
        r.notifications
            .iter()
            .flat_map(|(stream, types)| types.iter().map(move |(t, n)| vec![stream.clone(), t.clone(), n.to_string()]))
            .collect(),
    ));
    v
}

/// Header underlined, no other lines: compact, and easy to grep.
const STYLE: TableStyle = TableStyle::new().header_separator(LineStyle::none().fill('─').junction('─'));

/// A table fitted to the terminal's width when stdout is a terminal (comfy-table wraps long
/// cells, so names stay whole), unconstrained otherwise.
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

/// `tb` with each column at least as wide as its longest word (up to [`WORD_MAX`]): on a narrow
/// terminal comfy-table wraps cells at spaces, and cuts a longer word in the middle
/// (`KERNEL_DISPAT` / `CH 11`, `pthread-skyla` / `ke-avx512-AMD`) unless told not to.
fn whole_words(mut tb: Table) -> Table {
    let longest_word = |text: String| text.split_whitespace().map(|w| w.chars().count()).max().unwrap_or(0);
    let header: Vec<usize> =
        tb.header().map(|h| h.cell_iter().map(|c| longest_word(c.content())).collect()).unwrap_or_default();
    let widths: Vec<usize> = (0..tb.column_count())
        .map(|i| {
            tb.column_cells_iter(i)
                .flatten()
                .map(|c| longest_word(c.content()))
                .chain(header.get(i).copied())
                .max()
                .unwrap_or(0)
                .min(WORD_MAX)
        })
        .collect();
    for (column, width) in tb.column_iter_mut().zip(widths) {
        // comfy-table's boundaries count the cell's padding.
        if let Ok(w) = u16::try_from(width + usize::from(column.padding_width()))
            && width > 0
        {
            column.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(w)));
        }
    }
    tb
}

/// Words longer than this may still be cut on a narrow terminal.
const WORD_MAX: usize = 40;

/// Writes `tb` with a last column of names appended unpadded: the header line gets `header`,
/// each row line its name, in `tb`'s row order. Names stay whole and never widen the other
/// rows (PyTorch's kernel names run past 1,000 characters; padding every row to the longest
/// made each line that wide). The table is not wrapped, so each row is one line.
fn write_named(out: &mut dyn Write, mut tb: Table, header: &str, names: &[&str]) -> anyhow::Result<()> {
    tb.set_content_arrangement(ContentArrangement::Disabled);
    let text = tb.to_string();
    let mut lines = text.lines();
    if let Some(h) = lines.next() {
        writeln!(out, "{h}  {header}")?;
    }
    if let Some(sep) = lines.next() {
        let width = header.chars().count().min(NAME_RULE_MAX);
        writeln!(out, "{sep}{}", "─".repeat(width + 2))?;
    }
    for (line, name) in lines.zip(names.iter().copied().chain(std::iter::repeat(""))) {
        writeln!(out, "{}", format!("{line}  {name}").trim_end())?;
    }
    Ok(())
}

/// The rule under a name column goes as far as its header (names are as long as they are).
const NAME_RULE_MAX: usize = 40;

/// Queues with no commands shown before the rest are counted on one line.
const EMPTY_QUEUES_SHOWN: usize = 4;

/// Damage warnings listed under the trace line (a badly damaged file can have thousands).
const WARNINGS_SHOWN: usize = 10;

/// Commands shown at each end of the longest chain.
const CHAIN_ENDS: usize = 4;

/// The longest chain goes on one line (`a → b → c`) up to this width, else a command per line.
const CHAIN_LINE_MAX: usize = 160;

fn write_text(out: &mut dyn Write, file: &Path, r: &Report) -> anyhow::Result<()> {
    let t = &r.trace;
    writeln!(out, "offtrace report: {}", file.display())?;
    if let Some(cmd) = t.info.get("command") {
        let pid = t.info.get("pid").map(|p| format!(" (pid {p})")).unwrap_or_default();
        writeln!(out, "program: {cmd}{pid}")?;
    }
    let others = crate::traces::siblings(file);
    if !others.is_empty() {
        // The recording traced several processes: this trace is the first one's.
        let names: Vec<String> = others.iter().map(|p| p.display().to_string()).collect();
        writeln!(out, "other traces of this recording (one per traced process): {}", names.join(", "))?;
    }
    writeln!(
        out,
        "trace: {} records over {}, {} dropped, {}",
        count(t.records),
        duration(t.wall_ns),
        count(r.drops.total),
        if t.complete {
            "complete".to_owned()
        } else if !t.warnings.is_empty() {
            let n = t.warnings.len();
            format!("DAMAGED ({n} {} skipped, listed below)", if n == 1 { "stretch" } else { "stretches" })
        } else {
            "INCOMPLETE (the recording was cut off)".to_owned()
        }
    )?;
    // The report is often kept in a file while stderr scrolls away: what was lost goes with it.
    for w in t.warnings.iter().take(WARNINGS_SHOWN) {
        writeln!(out, "  warning: {w}")?;
    }
    if t.warnings.len() > WARNINGS_SHOWN {
        writeln!(
            out,
            "  … {} more warnings (all in --format json: trace.warnings)",
            t.warnings.len() - WARNINGS_SHOWN
        )?;
    }
    if let Some(p) = &t.problem {
        writeln!(out, "  {p}")?;
    }
    // The recorder's note of a fatal signal (`offtrace-recorder`'s `crash.rs`).
    if let Some(c) = t.info.get("crash") {
        writeln!(out, "  fatal {c}: every record up to it was written before the process died (or went on)")?;
    }

    let calls: u64 = r.api_calls.iter().map(|c| c.calls).sum();
    let mut kinds: Vec<&str> = r.api_calls.iter().map(|c| c.kind.as_str()).collect();
    kinds.dedup();
    kinds.sort_unstable();
    kinds.dedup();
    writeln!(
        out,
        "\nAPI calls: {} calls ({})",
        count(calls),
        if kinds.is_empty() { "none".into() } else { kinds.join(", ") }
    )?;
    for kind in &kinds {
        let rows: Vec<_> = r.api_calls.iter().filter(|c| c.kind == *kind).collect();
        let n: u64 = rows.iter().map(|c| c.calls).sum();
        writeln!(out, "{kind}: {} calls of {} operations", count(n), rows.len())?;
        let mut tb = table(&["calls", "total", "mean", "min", "max", "errors", "device work"], 0);
        let names: Vec<&str> = rows.iter().map(|c| c.operation.as_str()).collect();
        for c in rows {
            tb.add_row(vec![
                count(c.calls),
                duration(c.total_ns),
                duration(c.mean_ns),
                duration(c.min_ns),
                duration(c.max_ns),
                count(c.errors),
                count(c.device_activities),
            ]);
        }
        write_named(out, tb, "operation", &names)?;
    }

    let n: u64 = r.device_activity.iter().map(|d| d.count).sum();
    writeln!(
        out,
        "\nDevice activity: {} (device = start → end on the device, n/a where the runtime gave no device time; host = the enqueuing call)",
        count(n)
    )?;
    if !r.device_activity.is_empty() {
        let mut tb =
            table(&["kind", "count", "device total", "device mean", "min", "max", "host mean", "bytes", "queues"], 1);
        // The queues column is left-aligned text of any length: right-aligned it would pad.
        if let Some(c) = tb.column_mut(8) {
            c.set_cell_alignment(CellAlignment::Left);
        }
        let names: Vec<&str> = r.device_activity.iter().map(|d| d.name.as_str()).collect();
        for d in &r.device_activity {
            let total = match d.device_total_ns {
                Some(t) if d.device_count < d.count => format!("{} ({} of {})", duration(t), d.device_count, d.count),
                other => opt_dur(other),
            };
            tb.add_row(vec![
                d.kind.clone(),
                count(d.count),
                total,
                opt_dur(d.device_mean_ns),
                opt_dur(d.device_min_ns),
                opt_dur(d.device_max_ns),
                if d.host_enqueue_count > 0 { duration(d.host_enqueue_mean_ns) } else { "n/a".into() },
                if d.bytes > 0 { bytes(d.bytes) } else { String::new() },
                queues_short(&d.queues),
            ]);
        }
        write_named(out, tb, "name", &names)?;
    }

    let m = &r.memory;
    writeln!(
        out,
        "\nMemory: peak {} live, {} live at the end, {} frees{}",
        bytes(m.peak_live_bytes),
        bytes(m.live_bytes_at_end),
        count(m.frees),
        if m.unmatched_frees > 0 {
            format!(" ({} of unknown allocations)", count(m.unmatched_frees))
        } else {
            String::new()
        }
    )?;
    if !m.allocations.is_empty() {
        let mut tb = table(&["allocations", "device", "count", "bytes", "largest", "peak live"], 2);
        for a in &m.allocations {
            tb.add_row(vec![
                a.memory_type.clone(),
                a.device.clone(),
                count(a.count),
                bytes(a.bytes),
                bytes(a.max_bytes),
                bytes(a.peak_live_bytes),
            ]);
        }
        writeln!(out, "{}", whole_words(tb))?;
    }
    if m.sub_allocations.count > 0 {
        writeln!(
            out,
            "  {} sub-allocations (OpenCL sub-buffers) cover {} inside the allocations above, not counted again",
            count(m.sub_allocations.count),
            bytes(m.sub_allocations.bytes)
        )?;
    }
    if !m.copies.is_empty() {
        let mut tb = table(&["copies", "count", "bytes", "device time", "bandwidth"], 1);
        for c in &m.copies {
            tb.add_row(vec![
                c.direction.clone(),
                count(c.count),
                bytes(c.bytes),
                if c.device_count > 0 {
                    format!("{} ({} of {})", duration(c.device_ns), count(c.device_count), count(c.count))
                } else {
                    "n/a".into()
                },
                c.bandwidth_gb_s.map_or("n/a".into(), bandwidth),
            ]);
        }
        writeln!(out, "{}", whole_words(tb))?;
    }
    if m.fills.count > 0 {
        writeln!(out, "fills: {}, {}", count(m.fills.count), bytes(m.fills.bytes))?;
    }
    if m.maps.count > 0 {
        writeln!(
            out,
            "maps and unmaps: {}, {} mapped, device time {} (not counted as copies: a map of memory the host can reach copies nothing)",
            count(m.maps.count),
            bytes(m.maps.bytes),
            if m.maps.device_count > 0 { duration(m.maps.device_ns) } else { "n/a".into() }
        )?;
    }

    write_code_objects(out, &r.code_objects)?;

    writeln!(out, "\nQueues: {}", r.queues.len())?;
    if !r.queues.is_empty() {
        writeln!(
            out,
            " device busy = time the device ran at least one of the queue's commands (overlapping commands of an out-of-order queue count once)"
        )?;
        let mut tb = table(&["queue", "device", "order", "commands", "by kind", "device busy", "lifetime"], 3);
        // Streams a program created and never used (PyTorch makes 128): a few shown, the rest
        // counted.
        let empty = r.queues.iter().filter(|q| q.total_commands == 0).count();
        let mut empty_shown = 0;
        for q in &r.queues {
            if q.total_commands == 0 && empty > EMPTY_QUEUES_SHOWN + 1 {
                if empty_shown == EMPTY_QUEUES_SHOWN {
                    continue;
                }
                empty_shown += 1;
            }
            let life = match (q.created_ns, q.destroyed_ns) {
                (Some(c), Some(d)) => duration(d.saturating_sub(c)),
                (Some(_), None) => "not destroyed".into(),
                _ => String::new(),
            };
            tb.add_row(vec![
                format!("{:#x}", q.queue),
                q.device.clone(),
                match (q.in_order, q.profiling) {
                    (None, _) => "?".into(),
                    (Some(true), Some(true)) => "in-order, profiling".into(),
                    (Some(false), Some(true)) => "out-of-order, profiling".into(),
                    (Some(b), _) => if b { "in-order" } else { "out-of-order" }.into(),
                },
                count(q.total_commands),
                q.commands.iter().map(|(k, n)| format!("{k} {}", count(*n))).collect::<Vec<_>>().join(", "),
                if q.device_busy_ns > 0 { duration(q.device_busy_ns) } else { "n/a".into() },
                life,
            ]);
        }
        writeln!(out, "{}", whole_words(tb))?;
        if empty > EMPTY_QUEUES_SHOWN + 1 {
            writeln!(out, " … {} more queues with no commands", count((empty - EMPTY_QUEUES_SHOWN) as u64))?;
        }
    }

    let g = &r.task_graph;
    if g.nodes == 0 && g.edges == 0 && g.signals == 0 && !r.device_activity.is_empty() {
        // Not "0 commands": the dependencies were not recorded, which is not the same as none.
        let opencl = r.api_calls.iter().any(|c| c.kind == "OPENCL_API");
        writeln!(
            out,
            "\nTask graph: none recorded (no backend of this trace reports dependencies{})",
            if opencl { "; no OpenCL command had an event wait list" } else { "" }
        )?;
    } else {
        write_task_graph(out, g)?;
    }

    writeln!(out, "\nThreads: {}", r.threads.len())?;
    // Threads the runtimes started and that made no call (worker pools): counted, not listed.
    let idle = |th: &&offtrace_analysis::ThreadStats| th.api_calls == 0 && th.device_activities == 0 && th.drops == 0;
    let idle_threads = r.threads.iter().filter(idle).count();
    if idle_threads < r.threads.len() {
        let mut tb = table(&["tid", "name", "API calls", "API time", "device work", "dropped"], 2);
        for th in r.threads.iter().filter(|th| idle_threads <= 1 || !idle(th)) {
            tb.add_row(vec![
                th.tid.to_string(),
                th.name.clone(),
                count(th.api_calls),
                duration(th.api_total_ns),
                count(th.device_activities),
                count(th.drops),
            ]);
        }
        writeln!(out, "{}", whole_words(tb))?;
    }
    if idle_threads > 1 || (idle_threads == 1 && r.threads.len() == 1) {
        let names: std::collections::BTreeSet<&str> =
            r.threads.iter().filter(idle).map(|t| t.name.as_str()).filter(|n| !n.is_empty()).collect();
        let names = names.into_iter().collect::<Vec<_>>().join(", ");
        let named = if names.is_empty() { String::new() } else { format!(" ({names})") };
        let what = if idle_threads == 1 { "thread" } else { "threads" };
        writeln!(out, " … {} {what} with no API calls{named}", count(idle_threads as u64))?;
    }

    if !r.counters.is_empty() {
        writeln!(out, "\nCounters: {}", r.counters.len())?;
        let mut tb = table(&["counter", "unit", "device", "samples", "min", "mean", "max", "last"], 3);
        for c in &r.counters {
            tb.add_row(vec![
                c.name.clone(),
                c.unit.clone(),
                c.device.clone(),
                count(c.samples),
                value(c.min),
                value(c.mean),
                value(c.max),
                value(c.last),
            ]);
        }
        writeln!(out, "{}", whole_words(tb))?;
    }
    if !r.command_metrics.is_empty() {
        writeln!(out, "\nMetrics per command (event-based queries), per device activity: {}", r.command_metrics.len())?;
        let mut tb = table(&["kind", "name", "metric", "unit", "commands", "total", "mean", "min", "max"], 4);
        for m in &r.command_metrics {
            tb.add_row(vec![
                if m.kind.is_empty() { "(no device activity)".to_owned() } else { m.kind.clone() },
                m.name.clone(),
                m.metric.clone(),
                m.unit.clone(),
                count(m.commands),
                value(m.total),
                value(m.mean),
                value(m.min),
                value(m.max),
            ]);
        }
        writeln!(out, "{}", whole_words(tb))?;
    }
    if !r.markers.is_empty() {
        writeln!(out, "\nMarkers: {}", r.markers.len())?;
        let mut tb = table(&["kind", "count", "total"], 1);
        let names: Vec<&str> = r.markers.iter().map(|m| m.name.as_str()).collect();
        for mk in &r.markers {
            tb.add_row(vec![mk.kind.clone(), count(mk.count), duration(mk.total_ns)]);
        }
        write_named(out, tb, "marker", &names)?;
    }

    if !r.other.is_empty() {
        writeln!(out, "\nOther records (kinds without a typed record):")?;
        let mut tb = table(&["kind", "operation", "count"], 2);
        for o in &r.other {
            tb.add_row(vec![o.kind.clone(), o.operation.clone(), count(o.count)]);
        }
        writeln!(out, "{}", whole_words(tb))?;
    }

    writeln!(out, "\nDropped records: {}", count(r.drops.total))?;
    for (tid, n) in &r.drops.by_thread {
        writeln!(out, "  thread {tid}: {}", count(*n))?;
    }

    if !r.notifications.is_empty() {
        writeln!(out, "\nRaw notifications by stream and type (the optional raw layer):")?;
        let mut tb = table(&["stream", "type", "count"], 2);
        for (stream, types) in &r.notifications {
            for (tt, n) in types {
                tb.add_row(vec![stream.clone(), tt.clone(), count(*n)]);
            }
        }
        writeln!(out, "{}", whole_words(tb))?;
    }
    Ok(())
}

/// Names listed per code-object operation (the rest counted): PyTorch loads hundreds of modules.
const CODE_OBJECT_NAMES_SHOWN: usize = 5;

/// What the runtimes loaded: a row per operation, then its largest (or most loaded) names.
fn write_code_objects(out: &mut dyn Write, objects: &[offtrace_analysis::CodeObjectStats]) -> anyhow::Result<()> {
    if objects.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\nCode objects (bytes: the binary, IL or source size a load passed; n/a where no record carries one)"
    )?;
    let mut tb = table(&["operation", "loaded", "unloaded", "at end", "bytes", "largest", "names"], 1);
    for c in objects {
        // A build is no object of its own: it is never unloaded, and nothing stays loaded.
        let build = c.operation == "program_build";
        tb.add_row(vec![
            c.operation.clone(),
            count(c.loads),
            match (build, c.unmatched_unloads) {
                (true, _) => String::new(),
                (false, 0) => count(c.unloads),
                (false, n) => format!("{} ({} without a load)", count(c.unloads), count(n)),
            },
            if build { String::new() } else { count(c.loaded_at_end) },
            match c.bytes {
                None => "n/a".into(),
                Some(b) if c.sized_loads < c.loads => {
                    format!("{} ({} of {} sized)", bytes(b), count(c.sized_loads), count(c.loads))
                }
                Some(b) => bytes(b),
            },
            c.max_bytes.map_or_else(|| "n/a".into(), bytes),
            match (c.names.len(), c.unnamed_loads) {
                (n, 0) => count(n as u64),
                (n, u) => {
                    let names = if n == 0 { "none".to_owned() } else { count(n as u64) };
                    let loads = if u == 1 { "load" } else { "loads" };
                    // A build's name is its options.
                    let without = if build { "without options" } else { "unnamed" };
                    format!("{names} ({} {loads} {without})", count(u))
                }
            },
        ]);
    }
    writeln!(out, "{}", whole_words(tb))?;
    for c in objects.iter().filter(|c| !c.names.is_empty()) {
        let build = c.operation == "program_build";
        let sized = c.bytes.is_some();
        writeln!(out, " {}, {}:", c.operation, if sized { "most bytes first" } else { "most loaded first" })?;
        let shown = &c.names[..c.names.len().min(CODE_OBJECT_NAMES_SHOWN)];
        let mut header = vec!["loaded"];
        if !build {
            header.push("unloaded");
        }
        if sized {
            header.push("bytes");
        }
        let mut tb = table(&header, 0);
        for n in shown {
            let mut row = vec![count(n.loads)];
            if !build {
                row.push(count(n.unloads));
            }
            if sized {
                row.push(n.bytes.map_or_else(|| "n/a".into(), bytes));
            }
            tb.add_row(row);
        }
        let names: Vec<&str> = shown.iter().map(|n| n.name.as_str()).collect();
        write_named(out, tb, if build { "build options" } else { "name" }, &names)?;
        if c.names.len() > shown.len() {
            writeln!(out, " … {} more names", count((c.names.len() - shown.len()) as u64))?;
        }
    }
    Ok(())
}

/// The task graph's line and its longest chain.
fn write_task_graph(out: &mut dyn Write, g: &offtrace_analysis::TaskGraphReport) -> anyhow::Result<()> {
    writeln!(
        out,
        "\nTask graph: {} nodes, {} edges{}, {} signals; longest dependency chain over real commands: {} {}",
        count(g.nodes),
        count(g.edges),
        if g.unresolved_edges > 0 { format!(" ({} unresolved)", count(g.unresolved_edges)) } else { String::new() },
        count(g.signals),
        count(g.longest_chain_len),
        if g.longest_chain_len == 1 { "command" } else { "commands" },
    )?;
    if g.longest_chain_len > 1 && !g.longest_chain.is_empty() {
        let n = g.longest_chain.len();
        let more = n.saturating_sub(2 * CHAIN_ENDS);
        // Both ends of a long chain; `more` commands between them are counted.
        let shown: Vec<(usize, &str)> = g
            .longest_chain
            .iter()
            .map(String::as_str)
            .enumerate()
            .filter(|&(i, _)| more == 0 || i < CHAIN_ENDS || i >= n - CHAIN_ENDS)
            .collect();
        let gap = format!("… {} more …", count(more as u64));
        let mut parts: Vec<&str> = Vec::with_capacity(shown.len() + 1);
        for &(i, name) in &shown {
            if more > 0 && i == n - CHAIN_ENDS {
                parts.push(&gap);
            }
            parts.push(name);
        }
        let line = parts.join(" → ");
        if line.chars().count() <= CHAIN_LINE_MAX {
            writeln!(out, "  {line}")?;
        } else {
            // Names stay whole (cut, dpnp's read the same at either end): a command per line.
            for &(i, name) in &shown {
                if more > 0 && i == n - CHAIN_ENDS {
                    writeln!(out, "        {gap}")?;
                }
                writeln!(out, "  {:>4}  {name}", i + 1)?;
            }
        }
    }
    if g.host_tasks > 0 {
        writeln!(
            out,
            "  {} host tasks (`host task`): they run later on the SYCL runtime's thread pool; the trace has their \
             submission, not their execution, so they have no time here",
            count(g.host_tasks)
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use offtrace_analysis::{DeviceActivityStats, MarkerStats, QueueStats};

    fn text_of(r: &Report) -> String {
        let mut out = Vec::new();
        write_text(&mut out, Path::new("t.offtrace"), r).expect("write");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn long_kernel_names_come_last_whole_and_pad_no_other_row() {
        let long = format!("void at::native::elementwise_kernel<128, 2, {}>(int)", "x".repeat(1200));
        let mut r = Report::default();
        for (name, n) in [(long.as_str(), 3), ("scale(float*, float const*, float, int)", 17)] {
            r.device_activity.push(DeviceActivityStats {
                kind: "KERNEL_DISPATCH".into(),
                name: name.into(),
                count: n,
                queues: vec![0x1_0000_000d],
                ..Default::default()
            });
        }
        r.markers.push(MarkerStats { name: "step".into(), kind: "RANGE".into(), count: 7, total_ns: 5_000 });
        let s = text_of(&r);
        let line_of = |needle: &str| s.lines().find(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle}: {s}"));
        let short = line_of("scale(float*");
        assert!(short.ends_with("scale(float*, float const*, float, int)"), "name last: {short:?}");
        assert!(short.chars().count() < 200, "a short name's row is short: {} chars", short.chars().count());
        let longest = line_of("elementwise_kernel");
        assert!(longest.ends_with(&long), "the long name whole, at the end");
        assert!(s.lines().all(|l| l == l.trim_end()), "no trailing padding");
        let header = line_of("device total");
        assert!(header.ends_with("name") && header.chars().count() < 200, "{header:?}");
        let step = line_of("step");
        assert!(step.contains("RANGE") && step.ends_with("step"), "{step:?}");
    }

    #[test]
    fn hundreds_of_modules_make_a_short_code_object_section_and_builds_list_their_options() {
        use offtrace_analysis::{CodeObjectNameStats, CodeObjectStats};
        let modules: Vec<CodeObjectNameStats> = (0..438u64)
            .map(|i| CodeObjectNameStats {
                name: format!("triton_poi_fused_{i} (+1 kernels)"),
                loads: 1,
                bytes: Some(20_000 - i),
                max_bytes: Some(20_000 - i),
                ..Default::default()
            })
            .collect();
        let code_objects = vec![
            CodeObjectStats {
                operation: "program".into(),
                loads: 439,
                unloads: 2,
                unmatched_unloads: 1,
                loaded_at_end: 438,
                sized_loads: 438,
                bytes: Some(modules.iter().filter_map(|m| m.bytes).sum()),
                max_bytes: Some(20_000),
                unnamed_loads: 1,
                names: modules,
            },
            CodeObjectStats {
                operation: "program_build".into(),
                loads: 2,
                loaded_at_end: 2,
                names: vec![CodeObjectNameStats {
                    name: "-cl-fast-relaxed-math".into(),
                    loads: 2,
                    ..Default::default()
                }],
                ..Default::default()
            },
        ];
        let r = Report { code_objects, ..Default::default() };
        let s = text_of(&r);
        let start = s.find("\nCode objects").unwrap_or_else(|| panic!("{s}"));
        let section: Vec<&str> = s[start..].lines().skip(1).take_while(|l| !l.is_empty()).collect();
        assert!(section.len() <= 20, "{}", section.join("\n"));
        let line_of =
            |needle: &str| *section.iter().find(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle}: {s}"));
        let program = line_of("program ");
        assert!(program.contains("439") && program.contains("2 (1 without a load)"), "{program}");
        assert!(program.contains("438 of 439 sized") && program.contains("438 (1 load unnamed)"), "{program}");
        assert!(line_of("most bytes first").starts_with(" program,"));
        assert!(line_of("triton_poi_fused_0 ").contains("19.5 KiB"), "{s}");
        assert!(!s.contains("triton_poi_fused_5 "), "only the largest five: {s}");
        assert!(line_of("more names").contains("433 more names"));
        let build = line_of("program_build ");
        assert!(build.contains("n/a"), "no size: {build}");
        assert!(line_of("build options").contains("loaded"));
        assert!(line_of("-cl-fast-relaxed-math").trim_start().starts_with('2'));
        assert!(!text_of(&Report::default()).contains("Code objects"), "no section without records");
    }

    #[test]
    fn damage_and_truncation_are_told_in_the_report_itself() {
        let mut r = Report::default();
        r.trace.warnings = vec!["corrupt trace: chunk 1 at byte 463: checksum mismatch; skipped 2576 bytes".into()];
        let s = text_of(&r);
        assert!(s.contains("DAMAGED (1 stretch skipped, listed below)"), "{s}");
        assert!(s.contains("\n  warning: corrupt trace: chunk 1 at byte 463"), "{s}");
        r.trace.warnings = (0..25).map(|i| format!("corrupt trace: chunk {i}")).collect();
        let s = text_of(&r);
        assert!(s.contains("DAMAGED (25 stretches skipped"), "{s}");
        assert_eq!(s.lines().filter(|l| l.starts_with("  warning: ")).count(), WARNINGS_SHOWN, "{s}");
        assert!(s.contains("… 15 more warnings"), "{s}");
        let mut r = Report::default();
        r.trace.problem = Some("trace truncated at byte 5913, after 3 complete chunks".into());
        let s = text_of(&r);
        assert!(s.contains("INCOMPLETE") && s.contains("\n  trace truncated at byte 5913"), "{s}");
        r.trace.info.insert("crash".into(), "signal 11 on thread 42".into());
        let s = text_of(&r);
        assert!(s.contains("\n  fatal signal 11 on thread 42: every record up to it was written"), "{s}");
    }

    /// An OpenCL program's report said "0 nodes, 0 edges, ... 0 commands" when the layer recorded
    /// no wait lists: not recorded is not none. The layer records them now, so an OpenCL trace
    /// without a graph is one whose commands had none (an in-order queue orders its commands).
    #[test]
    fn a_trace_without_task_graph_records_says_so_and_why() {
        let mut r = Report::default();
        r.device_activity.push(DeviceActivityStats {
            kind: "KERNEL_DISPATCH".into(),
            name: "k".into(),
            count: 2,
            ..Default::default()
        });
        r.api_calls.push(offtrace_analysis::ApiCallStats {
            kind: "OPENCL_API".into(),
            operation: "clFinish".into(),
            calls: 1,
            ..Default::default()
        });
        let s = text_of(&r);
        assert!(
            s.contains("Task graph: none recorded (no backend of this trace reports dependencies; no OpenCL command had an event wait list)\n"),
            "{s}"
        );
        assert!(!s.contains("longest dependency chain"), "{s}");
        r.task_graph.nodes = 3;
        assert!(text_of(&r).contains("Task graph: 3 nodes, 0 edges"), "{}", text_of(&r));
    }

    #[test]
    fn the_longest_chain_shows_whole_names_on_one_line_or_one_per_line() {
        let mut r = Report::default();
        r.task_graph.longest_chain_len = 1;
        assert!(text_of(&r).contains("over real commands: 1 command\n"), "{}", text_of(&r));
        r.task_graph.longest_chain = ["usm_memcpy", "scale_add", "host task"].map(String::from).to_vec();
        r.task_graph.longest_chain_len = 3;
        assert!(text_of(&r).contains("\n  usm_memcpy → scale_add → host task\n"), "{}", text_of(&r));
        // dpnp's names differ in the middle; cut at either end two would read the same.
        let name = |t: &str| {
            format!(
                "dpnp::tensor::kernels::merge_sort_detail::sort_over_work_group_contig_krn<{t}, \
                 dpnp::tensor::rich_comparisons::detail::ExtendedRealFPLess<float> >"
            )
        };
        let names: Vec<String> = (0..12).map(|i| if i % 2 == 0 { name("long") } else { name("float") }).collect();
        r.task_graph.longest_chain = names.clone();
        r.task_graph.longest_chain_len = 12;
        let s = text_of(&r);
        for (pos, n) in [(1, &names[0]), (2, &names[1]), (4, &names[3]), (9, &names[8]), (12, &names[11])] {
            assert!(s.contains(&format!("\n  {pos:>4}  {n}\n")), "{pos}: {s}");
        }
        assert!(!s.contains("     5  ") && s.contains("\n        … 4 more …\n     9  "), "{s}");
    }

    #[test]
    fn a_narrow_terminal_wraps_cells_between_words_never_inside_one() {
        let mut tb = table(&["queue", "device", "order", "commands", "by kind", "device busy", "lifetime"], 3);
        // What the queues of dpnp's sort needed at 100 columns (a terminal of 100 columns).
        tb.set_width(100);
        tb.add_row(vec![
            "0x55da4c15ff40",
            "pthread-skylake-avx512-AMD EPYC",
            "out-of-order",
            "19",
            "KERNEL_DISPATCH 11, MEMORY_COPY 8",
            "2.33 ms",
            "not destroyed",
        ]);
        let s = whole_words(tb).to_string();
        for word in ["pthread-skylake-avx512-AMD", "KERNEL_DISPATCH", "out-of-order", "0x55da4c15ff40"] {
            assert!(s.contains(word), "{word} cut:\n{s}");
        }
    }

    #[test]
    fn threads_that_made_no_call_are_counted_on_one_line() {
        use offtrace_analysis::ThreadStats;
        let mut r = Report::default();
        let th = |tid, name: &str, api_calls| ThreadStats { tid, name: name.into(), api_calls, ..Default::default() };
        r.threads =
            vec![th(100, "python", 244), th(101, "python", 0), th(102, "pocl-worker", 0), th(103, "python", 598)];
        let s = text_of(&r);
        assert!(s.contains("Threads: 4\n"), "{s}");
        assert!(s.contains(" 100 ") && s.contains(" 103 ") && !s.contains(" 101 ") && !s.contains(" 102 "), "{s}");
        assert!(s.contains(" … 2 threads with no API calls (pocl-worker, python)"), "{s}");
        // One such thread keeps its row.
        r.threads.truncate(2);
        let s = text_of(&r);
        assert!(s.contains(" 101 ") && !s.contains("with no API calls"), "{s}");
    }

    #[test]
    fn queues_with_no_commands_are_counted_on_one_line() {
        let mut r = Report::default();
        let q = |queue, total_commands| QueueStats { queue, total_commands, ..Default::default() };
        r.queues.push(q(0x1_0000_0007, 428));
        r.queues.extend((0..131).map(|i| q(0x1_0000_000d + i, 0)));
        let s = text_of(&r);
        assert!(s.contains("0x100000007"), "{s}");
        let empty_rows = s.lines().filter(|l| l.trim_start().starts_with("0x1") && l.contains(" 0 ")).count();
        assert_eq!(empty_rows, EMPTY_QUEUES_SHOWN, "{s}");
        assert!(s.contains(&format!("… {} more queues with no commands", 131 - EMPTY_QUEUES_SHOWN)), "{s}");
        // Below the threshold every queue has its row.
        r.queues.truncate(1 + EMPTY_QUEUES_SHOWN + 1);
        let s = text_of(&r);
        assert!(!s.contains("more queues"), "{s}");
    }
}
