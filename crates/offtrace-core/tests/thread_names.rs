//! Every thread offtrace starts inside a traced program is named within Linux's 15-byte limit
//! (`pthread_setname_np` / `PR_SET_NAME` cut longer names: the report's thread list showed
//! `offtrace-cl-har`). Scans the workspace's sources for `Builder::new().name("...")`.

use std::path::Path;

fn scan(dir: &Path, found: &mut Vec<(String, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "target") {
                scan(&p, found);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            for (i, _) in text.match_indices(".name(\"") {
                let rest = &text[i + 7..];
                if let Some(end) = rest.find('"') {
                    found.push((rest[..end].to_owned(), p.display().to_string()));
                }
            }
        }
    }
}

#[test]
fn offtraces_threads_are_named_within_fifteen_bytes() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    scan(&crates, &mut found);
    let ours: Vec<_> = found.iter().filter(|(n, _)| n.starts_with("offtrace-")).collect();
    assert!(ours.len() >= 8, "the scan found offtrace's thread names: {found:?}");
    let long: Vec<_> = ours.iter().filter(|(n, _)| n.len() > 15).collect();
    assert!(long.is_empty(), "thread names past 15 bytes (cut by the kernel): {long:?}");
}
