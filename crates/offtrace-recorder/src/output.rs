//! The trace file of one traced process, claimed so that no process's trace replaces another's.
//!
//! Every backend's host opens its trace here: the SYCL agent, the OpenCL layer and the CUDA
//! injection. `OFFTRACE_OUTPUT` is inherited by child processes, and a program may run traced
//! programs one after another (a parent that runs a child to completion, then uses the runtime
//! itself; a shell script running two programs): each keeps its trace. The rule:
//!
//! - `%p` in the path becomes the pid.
//! - `<path>` is created only if it does not exist yet (`O_EXCL`): the first traced process
//!   writes it, and nothing ever truncates an existing trace.
//! - Otherwise the process writes `<path>.<pid>`, created likewise; a file of that name that
//!   exists already was left by an earlier process with this pid (no live process has it) and
//!   is replaced.
//! - A path that exists and is not a regular file (`/dev/null`, a FIFO) is written as it is.
//!
//! A claimed regular file is locked (`flock`, exclusive) until the process exits, so that
//! `offtrace record`, which removes an earlier recording's files before it starts the program,
//! can refuse to remove a trace that a running process still writes. Cost: two or three system
//! calls, once per process.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use crate::{Config, StartError};

/// Opens the trace file for this process by the rule above; returns it and its path.
#[cold]
pub fn claim_output(path: &Path) -> io::Result<(File, PathBuf)> {
    let pid = std::process::id();
    let path = PathBuf::from(path.to_string_lossy().replace("%p", &pid.to_string()));
    if path.metadata().is_ok_and(|m| !m.is_file()) {
        let f = OpenOptions::new().write(true).open(&path)?;
        return Ok((f, path));
    }
    match OpenOptions::new().write(true).create_new(true).open(&path) {
        Ok(f) => return Ok((locked(f), path)),
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        Err(_) => {}
    }
    let mut own = path.into_os_string();
    own.push(format!(".{pid}"));
    let own = PathBuf::from(own);
    let f = OpenOptions::new().write(true).create(true).truncate(true).open(&own)?;
    Ok((locked(f), own))
}

/// The lock lives as long as the descriptor: the writer owns it until the trace is finished,
/// and a finished trace needs no protection. A failed lock (a file system without locks) only
/// loses `record`'s check.
fn locked(f: File) -> File {
    let _ = f.try_lock();
    f
}

/// [`claim_output`], then [`crate::start_open`] into it: returns the path written.
#[cold]
pub fn start_claimed(config: Config, path: &Path, info: &[(&str, &str)]) -> Result<PathBuf, StartError> {
    let (file, path) = claim_output(path).map_err(|source| StartError::Create { path: path.into(), source })?;
    crate::start_open(config, file, info)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_trace_is_kept_and_this_process_writes_path_dot_pid() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("t.offtrace");
        // A trace that a finished process left (no lock held): it used to be truncated.
        std::fs::write(&path, b"the first process's trace").expect("write");
        let (_, got) = claim_output(&path).expect("claim");
        assert_eq!(got, dir.path().join(format!("t.offtrace.{}", std::process::id())));
        assert_eq!(std::fs::read(&path).expect("read"), b"the first process's trace");
    }

    #[test]
    fn the_first_process_writes_the_path_itself_and_percent_p_is_the_pid() {
        let dir = tempfile::tempdir().expect("dir");
        let (_, got) = claim_output(&dir.path().join("t.offtrace")).expect("claim");
        assert_eq!(got, dir.path().join("t.offtrace"));
        let (_, got) = claim_output(&dir.path().join("u-%p.offtrace")).expect("claim");
        assert_eq!(got, dir.path().join(format!("u-{}.offtrace", std::process::id())));
    }

    #[test]
    fn a_claimed_trace_is_locked_and_a_stale_pid_file_is_replaced() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("t.offtrace");
        let (_held, first) = claim_output(&path).expect("claim");
        let other = File::open(&first).expect("open");
        assert!(other.try_lock().is_err(), "a trace being written is locked");
        let own = dir.path().join(format!("t.offtrace.{}", std::process::id()));
        std::fs::write(&own, b"left by an earlier process with this pid").expect("write");
        let (_, got) = claim_output(&path).expect("claim");
        assert_eq!(got, own);
        assert_eq!(std::fs::metadata(&own).expect("meta").len(), 0);
    }

    #[test]
    fn a_path_that_is_no_regular_file_is_written_as_it_is() {
        let (_, got) = claim_output(Path::new("/dev/null")).expect("claim");
        assert_eq!(got, Path::new("/dev/null"));
    }
}
