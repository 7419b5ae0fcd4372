//! `/sys`: CPU frequency (`cpufreq/scaling_cur_freq`), thermal zones (`thermal_zone*/temp`) and
//! RAPL energy (`powercap/intel-rapl:*/energy_uj`), each only where the files exist and read.
//! The group's metrics are decided at discovery from what is there.

use std::path::{Path, PathBuf};

use crate::error::MetricsError;
use crate::model::{Calc, MetricInfo, MetricType};

/// What the `sys.cpu` group reads: one file per raw slot, and the metrics over them.
#[derive(Debug, Clone, PartialEq)]
pub struct SysPlan {
    pub files: Vec<PathBuf>,
    pub metrics: Vec<MetricInfo>,
}

fn read_u64(p: &Path) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

fn sorted_dirs(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(prefix)))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Discovers what `root` (`/sys` or a test directory) offers; `None` when nothing reads.
pub fn discover(root: &Path) -> Option<SysPlan> {
    let mut plan = SysPlan { files: Vec::new(), metrics: Vec::new() };
    // CPU frequency: each CPU's current frequency (kHz) as its own slot, the mean as the metric.
    let cpus: Vec<PathBuf> = sorted_dirs(&root.join("devices/system/cpu"), "cpu")
        .into_iter()
        .map(|d| d.join("cpufreq/scaling_cur_freq"))
        .filter(|f| read_u64(f).is_some())
        .collect();
    if !cpus.is_empty() {
        // The metric reads slot 0 .. n: its calculation is the mean of a range, expressed as
        // slot 0's scaled gauge of the sum that `read` writes there.
        let n = cpus.len() as f64;
        plan.files.extend(cpus);
        plan.metrics.push(MetricInfo::new(
            "cpu_frequency",
            "mean current frequency of the CPUs (cpufreq scaling_cur_freq)",
            "cpu",
            "MHz",
            MetricType::Raw,
            Calc::GaugeScaled(0, 1e-3 / n),
        ));
    }
    for z in sorted_dirs(&root.join("class/thermal"), "thermal_zone") {
        let f = z.join("temp");
        if read_u64(&f).is_none() {
            continue;
        }
        let ty = std::fs::read_to_string(z.join("type")).map(|s| s.trim().to_owned()).unwrap_or_default();
        let zone = z.file_name().and_then(|n| n.to_str()).unwrap_or("zone").to_owned();
        let slot = plan.files.len();
        plan.files.push(f);
        plan.metrics.push(MetricInfo::new(
            &format!("temperature.{zone}"),
            &format!("thermal zone {zone} ({ty})"),
            "thermal",
            "C",
            MetricType::Raw,
            Calc::GaugeScaled(slot, 1e-3),
        ));
    }
    for d in sorted_dirs(&root.join("class/powercap"), "intel-rapl:") {
        let f = d.join("energy_uj");
        if read_u64(&f).is_none() {
            continue;
        }
        let name = std::fs::read_to_string(d.join("name")).map(|s| s.trim().to_owned()).unwrap_or_default();
        let dom = d.file_name().and_then(|n| n.to_str()).unwrap_or("rapl").to_owned();
        let slot = plan.files.len();
        plan.files.push(f);
        plan.metrics.push(MetricInfo::new(
            &format!("energy.{dom}"),
            &format!("RAPL energy of {name} since the start"),
            "power",
            "J",
            MetricType::Event,
            Calc::TotalScaled(slot, 1e-6),
        ));
        plan.metrics.push(MetricInfo::new(
            &format!("power.{dom}"),
            &format!("RAPL power of {name}"),
            "power",
            "W",
            MetricType::Throughput,
            Calc::Rate(slot, 1e3),
        ));
    }
    (!plan.metrics.is_empty()).then_some(plan)
}

/// Reads every file of `plan` into `out`; the CPU frequency slots are summed into slot 0 first.
pub fn read(plan: &SysPlan, out: &mut [u64]) -> Result<(), MetricsError> {
    for (o, f) in out.iter_mut().zip(&plan.files) {
        *o = read_u64(f).ok_or(MetricsError::DeviceLost)?;
    }
    let ncpu = plan.files.iter().take_while(|f| f.ends_with("cpufreq/scaling_cur_freq")).count();
    if ncpu > 1 {
        out[0] = out[..ncpu].iter().sum();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RawReport, TypedValue, calculate};

    #[test]
    fn discovers_what_is_there_and_nothing_else() {
        let d = tempfile::tempdir().expect("tmp");
        assert!(discover(d.path()).is_none());
        let w = |p: &str, s: &str| {
            let p = d.path().join(p);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("dir");
            std::fs::write(p, s).expect("write");
        };
        w("devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", "2000000\n");
        w("devices/system/cpu/cpu1/cpufreq/scaling_cur_freq", "3000000\n");
        w("class/thermal/thermal_zone0/temp", "45500\n");
        w("class/thermal/thermal_zone0/type", "x86_pkg_temp\n");
        w("class/powercap/intel-rapl:0/energy_uj", "1000000\n");
        w("class/powercap/intel-rapl:0/name", "package-0\n");
        let plan = discover(d.path()).expect("plan");
        let names: Vec<&str> = plan.metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["cpu_frequency", "temperature.thermal_zone0", "energy.intel-rapl:0", "power.intel-rapl:0"]);
        let mut base = vec![0; plan.files.len()];
        read(&plan, &mut base).expect("read");
        w("class/powercap/intel-rapl:0/energy_uj", "3000000\n");
        let mut now = vec![0; plan.files.len()];
        read(&plan, &mut now).expect("read");
        let r = RawReport { ts_ns: 2_000_000_000, prev_ts_ns: 1_000_000_000, now, prev: base.clone(), base };
        let v = calculate(&plan.metrics, &r);
        assert_eq!(v[0], TypedValue::F64(2500.0));
        assert_eq!(v[1], TypedValue::F64(45.5));
        assert_eq!(v[2], TypedValue::F64(2.0));
        assert_eq!(v[3], TypedValue::F64(2.0));
    }
}
