//! The traces of one recording: one per traced process. The first traced process writes the
//! trace path itself; every later one (a child, or a program run after another under the same
//! `OFFTRACE_OUTPUT`) writes `<path>.<pid>`, and a CUDA backend beside another backend writes
//! `<path>.cuda` (`<path>.cuda.<pid>` likewise): `offtrace_recorder::claim_output`. `record`
//! removes an earlier recording's files before it starts the program and lists every trace
//! written after it; `report` of the path names the others.

use std::path::{Path, PathBuf};

use anyhow::bail;
use offtrace_format::{Record, TraceReader};

/// The other traces of the recording whose first trace is `path`, ordered by pid (the CUDA
/// backend's after the rest): files beside it named `<name>.<pid>`, `<name>.cuda` or
/// `<name>.cuda.<pid>` that are traces (they start with the format's magic: a file of the
/// user's that happens to have such a name is neither listed nor removed).
pub fn siblings(path: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Vec::new();
    };
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let mut found: Vec<(bool, u64, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let file = e.file_name();
            let rest = file.to_str()?.strip_prefix(name)?.strip_prefix('.')?;
            let (cuda, pid) = match rest.strip_prefix("cuda") {
                Some("") => (true, ""),
                Some(p) => (true, p.strip_prefix('.')?),
                None => (false, rest),
            };
            (pid.is_empty() && cuda || digits(pid))
                .then(|| (cuda, pid.parse().unwrap_or(0), path.with_file_name(&file)))
        })
        .filter(|(_, _, p)| is_trace(p))
        .collect();
    found.sort();
    found.into_iter().map(|(_, _, p)| p).collect()
}

fn is_trace(p: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 8];
    std::fs::File::open(p).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && magic == offtrace_format::MAGIC
}

/// Removes an earlier recording's trace at `path` and its siblings before a new recording
/// (an explicit `-o` replaces what it names). A trace that a running process still writes (it
/// holds the file's lock) is an error, not removed. Only regular files are touched.
pub fn clear_earlier(path: &Path) -> anyhow::Result<()> {
    let mut all = vec![path.to_path_buf()];
    all.extend(siblings(path));
    let files: Vec<PathBuf> = all.into_iter().filter(|p| p.symlink_metadata().is_ok_and(|m| m.is_file())).collect();
    for p in &files {
        let busy = std::fs::File::open(p).is_ok_and(|f| matches!(f.try_lock(), Err(std::fs::TryLockError::WouldBlock)));
        if busy {
            bail!(
                "cannot record to {}: a running process is still writing {}: choose another -o",
                path.display(),
                p.display()
            );
        }
    }
    for p in &files {
        if let Err(e) = std::fs::remove_file(p) {
            bail!("cannot replace {}: {e}: choose another -o", p.display());
        }
    }
    Ok(())
}

/// The pid and command a trace names (its first `Info` records), as far as they can be read.
pub fn process_of(path: &Path) -> (Option<String>, Option<String>) {
    let (mut pid, mut command) = (None, None);
    if let Ok(reader) = TraceReader::open(path) {
        for r in reader.take(64) {
            match r {
                Ok(Record::Info { key, value }) if key == "pid" => pid = Some(value),
                Ok(Record::Info { key, value }) if key == "command" => command = Some(value),
                Ok(_) => {}
                Err(_) => break,
            }
            if pid.is_some() && command.is_some() {
                break;
            }
        }
    }
    (pid, command)
}

/// `path` as the user wrote it (`shown`) with a sibling's suffix.
pub fn shown_as(shown: &Path, main: &Path, sibling: &Path) -> PathBuf {
    let suffix = sibling.file_name().and_then(|s| s.to_str()).zip(main.file_name().and_then(|m| m.to_str()));
    match suffix.and_then(|(s, m)| s.strip_prefix(m)) {
        Some(rest) => {
            let mut p = shown.as_os_str().to_owned();
            p.push(rest);
            PathBuf::from(p)
        }
        None => sibling.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siblings_are_the_pid_and_cuda_files_beside_the_trace_and_nothing_else() {
        let dir = tempfile::tempdir().expect("dir");
        let main = dir.path().join("t.offtrace");
        for n in [
            "t.offtrace",
            "t.offtrace.900",
            "t.offtrace.31",
            "t.offtrace.cuda",
            "t.offtrace.cuda.77",
            "t.offtrace.x1",
            "t.offtrace.cudax",
            "t.offtrace.",
            "t.offtrace2.5",
            "u.offtrace.5",
        ] {
            std::fs::write(dir.path().join(n), TRACE).expect("write");
        }
        std::fs::write(dir.path().join("t.offtrace.44"), b"a file of the user's, no trace").expect("write");
        let names: Vec<String> =
            siblings(&main).iter().map(|p| p.file_name().expect("a name").to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["t.offtrace.31", "t.offtrace.900", "t.offtrace.cuda", "t.offtrace.cuda.77"]);
    }

    #[test]
    fn clearing_removes_an_earlier_recording_but_not_a_trace_being_written() {
        let dir = tempfile::tempdir().expect("dir");
        let main = dir.path().join("t.offtrace");
        std::fs::write(&main, TRACE).expect("write");
        std::fs::write(dir.path().join("t.offtrace.12"), TRACE).expect("write");
        std::fs::write(dir.path().join("t.offtrace.14"), b"no trace").expect("write");
        std::fs::write(dir.path().join("other.offtrace"), TRACE).expect("write");
        clear_earlier(&main).expect("clear");
        assert!(!main.exists() && !dir.path().join("t.offtrace.12").exists());
        assert!(dir.path().join("other.offtrace").exists() && dir.path().join("t.offtrace.14").exists());

        let (_held, written) = offtrace_recorder_like_claim(&dir.path().join("t.offtrace.13"));
        let e = clear_earlier(&main).expect_err("a trace being written");
        assert!(e.to_string().contains("still writing"), "{e}");
        assert!(written.exists());
    }

    /// The start of a trace file (what `siblings` looks at).
    const TRACE: &[u8] = b"OFFTRACE and the rest";

    /// A file locked as a traced process's recorder locks its trace.
    fn offtrace_recorder_like_claim(p: &Path) -> (std::fs::File, PathBuf) {
        std::fs::write(p, TRACE).expect("write");
        let f = std::fs::OpenOptions::new().write(true).open(p).expect("open");
        f.try_lock().expect("lock");
        (f, p.to_path_buf())
    }

    #[test]
    fn a_sibling_is_shown_as_the_user_wrote_the_path() {
        let got = shown_as(
            Path::new("out/t.offtrace"),
            Path::new("/abs/out/t.offtrace"),
            Path::new("/abs/out/t.offtrace.42"),
        );
        assert_eq!(got, Path::new("out/t.offtrace.42"));
    }
}
