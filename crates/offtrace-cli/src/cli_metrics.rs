//! Command-line syntax of the metrics commands (`metrics list`, `monitor`) and of `record`'s
//! `--metrics`/`--sample-period`/`--telemetry`; parsed into the plain configs of
//! `metrics_cmd.rs`.

use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use crate::metrics_cmd::{ListConfig, MonitorConfig, RecordMetrics};

#[derive(Debug, Args)]
pub struct MetricsArgs {
    #[command(subcommand)]
    pub command: MetricsCommand,
}

#[derive(Debug, Subcommand)]
pub enum MetricsCommand {
    /// Every metric group, metric, domain and sampling type available on this machine, per device.
    List(ListArgs),
    /// (Internal) The OpenCL devices' Codeplay counters, asked through the OpenCL layer: run by
    /// `metrics list` and `record --query-metrics codeplay` in a process of their own.
    #[command(hide = true)]
    OpenclProbe,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ListFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[arg(long, value_enum, default_value_t = ListFormat::Text)]
    pub format: ListFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum MonitorFormat {
    Text,
    Csv,
}

#[derive(Debug, Args)]
pub struct MonitorArgs {
    /// Metric groups to show besides the telemetry (`name` or `name@device`; repeatable or
    /// comma-separated).
    #[arg(long = "group", value_delimiter = ',', value_name = "GROUP")]
    pub groups: Vec<String>,
    /// Refresh interval.
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
    pub interval: Duration,
    /// Stop after this many refreshes [default: run until interrupted].
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// `text`: one line per group and refresh; `csv`: `ts_ns,device,group,metric,value,unit`.
    #[arg(long, value_enum, default_value_t = MonitorFormat::Text)]
    pub format: MonitorFormat,
}

/// `record`'s metric options (flattened into `RecordArgs`).
#[derive(Debug, Args, Clone, Default)]
pub struct RecordMetricsArgs {
    /// Metric groups to sample into the trace as counters (`offtrace metrics list` names them;
    /// `name` or `name@device`, comma-separated).
    #[arg(long = "metrics", value_delimiter = ',', value_name = "GROUP[,GROUP...]")]
    pub metrics: Vec<String>,
    /// Sampling period of --metrics and --telemetry (e.g. 10ms, 1ms, 500us, 1s).
    #[arg(long, default_value = "10ms", value_parser = parse_duration, value_name = "DURATION")]
    pub sample_period: Duration,
    /// Sample the device telemetry too (system /proc, /sys, NVML GPUs: whatever is present).
    #[arg(long)]
    pub telemetry: bool,
    /// Event-based metric groups measured per command: a query begins at each kernel, copy or
    /// fill launch and ends at its completion; the values go into the trace as counter samples
    /// with the command's correlation id (counters `<group>.<metric>.per_command`). In a CUDA
    /// program `cupti.range_profiler` measures every kernel (kernel replay; no CUDA device times
    /// are recorded then); `codeplay` is the OpenCL layer's Codeplay counters of every command.
    #[arg(long = "query-metrics", value_delimiter = ',', value_name = "GROUP[,GROUP...]")]
    pub query_metrics: Vec<String>,
}

/// `10ms`, `1ms`, `500us`, `2s`, `100ns`; a bare number is milliseconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().map_err(|_| format!("not a duration: {s:?} (e.g. 10ms)"))?;
    let ns = match unit {
        "" | "ms" => v * 1e6,
        "us" | "µs" => v * 1e3,
        "ns" => v,
        "s" => v * 1e9,
        _ => return Err(format!("unknown unit {unit:?} in {s:?} (ns, us, ms, s)")),
    };
    if !(1.0..=3.6e12).contains(&ns) {
        return Err(format!("duration out of range: {s:?}"));
    }
    Ok(Duration::from_nanos(ns as u64))
}

impl ListArgs {
    pub fn into_config(self) -> ListConfig {
        ListConfig { json: self.format == ListFormat::Json }
    }
}

impl MonitorArgs {
    pub fn into_config(self) -> MonitorConfig {
        MonitorConfig {
            groups: self.groups,
            interval: self.interval,
            count: self.count,
            csv: self.format == MonitorFormat::Csv,
        }
    }
}

impl RecordMetricsArgs {
    pub fn into_config(self) -> RecordMetrics {
        RecordMetrics {
            groups: self.metrics,
            period: self.sample_period,
            telemetry: self.telemetry,
            query_groups: self.query_metrics,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10ms"), Ok(Duration::from_millis(10)));
        assert_eq!(parse_duration("1"), Ok(Duration::from_millis(1)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("0ms").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("ms").is_err());
    }
}
