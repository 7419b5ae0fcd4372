//! How `record` puts the OpenCL layer into a program: through the ICD loader's layer list
//! (`OPENCL_LAYERS`), or, when the loader the program would load has no layer support,
//! through `LD_PRELOAD` (the layer's preload mode: `crates/offtrace-opencl/src/preload.rs`).
//!
//! The loader is found as the dynamic loader finds `libOpenCL.so.1` for the program: its ELF
//! `DT_RPATH` (when it has no `DT_RUNPATH`), `LD_LIBRARY_PATH`, its `DT_RUNPATH`, the ld.so cache
//! (`ldconfig -p`), the default folders. A loader supports layers when it names `clInitLayer`
//! (it looks that symbol up in each layer): ocl-icd >= 2.3.0 and the Khronos loader do, CUDA's
//! `libOpenCL.so.1` (an old Khronos loader) does not. What the program loads is not changed
//! beyond the one preloaded library (docs/cli.md).

use std::ffi::OsStr;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

const SONAME: &str = "libOpenCL.so.1";

/// `--opencl-interpose`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Interpose {
    /// The layer where the program's loader supports layers, else preload.
    #[default]
    Auto,
    /// `OPENCL_LAYERS` only.
    Layer,
    /// `LD_PRELOAD` (with `OPENCL_LAYERS` too, for loaders the program reaches otherwise).
    Preload,
}

/// What `record` does for OpenCL, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// Whether the layer goes into `LD_PRELOAD`.
    pub preload: bool,
    /// The loader the program would load (None: none found).
    pub loader: Option<PathBuf>,
    /// Whether `--opencl-interpose` forced the mode.
    pub forced: bool,
    /// Preload was due (auto) but held back: `--tool` libraries with a CUDA program that links
    /// no ICD loader (see [`Choice::hold_back_for_tools`]).
    pub held_back_for_tools: bool,
}

impl Choice {
    /// A tool's `offtrace_*` references bind to the first copy of the services in the process's
    /// global scope, which a preloaded layer is: with the CUDA injection beside it, a `--tool`
    /// got none of the CUDA backend's callbacks. So auto mode does not preload the layer into a
    /// program that links no ICD loader when tools and the CUDA injection are both there (a
    /// Python or CUDA program; its OpenCL calls through a loader without layers go untraced,
    /// and the summary says so). `--opencl-interpose preload` still preloads.
    pub fn hold_back_for_tools(&mut self, program: &Path, tools: bool, cuda: bool) {
        if self.preload && !self.forced && tools && cuda && !links_opencl(program) {
            self.preload = false;
            self.held_back_for_tools = true;
        }
    }

    /// The one summary line of a recording whose mode is not the layer's (None for the layer).
    pub fn summary_line(&self) -> Option<String> {
        if self.held_back_for_tools {
            let loader = self.loader.as_ref().map_or_else(String::new, |l| l.display().to_string());
            return Some(format!(
                "offtrace: OpenCL layer not preloaded: --tool libraries bind to one backend's services, here the CUDA injection's, and the program links no ICD loader; its OpenCL calls through {loader} (no layer support) are not traced (--opencl-interpose preload traces them, and the tool gets OpenCL's instead)"
            ));
        }
        if !self.preload {
            return None;
        }
        let loader =
            self.loader.as_ref().map_or_else(|| "no libOpenCL.so.1 found".to_owned(), |l| l.display().to_string());
        Some(if self.forced {
            // The path is what the search found for the executable, which the exports prefer
            // where it is loaded; a program that opens a loader of its own (pyopencl's) is
            // forwarded to that one, so the line does not call the path the program's loader.
            format!(
                "offtrace: OpenCL layer in preload mode (--opencl-interpose preload; the libOpenCL.so.1 found for the program: {loader})"
            )
        } else {
            format!("offtrace: OpenCL layer in preload mode: the program's ICD loader {loader} has no layer support")
        })
    }
}

/// Chooses the mode for `program` under this process's environment.
pub fn choose(mode: Interpose, program: &Path) -> Choice {
    let ld_library_path = std::env::var_os("LD_LIBRARY_PATH");
    let loader = find_loader(program, ld_library_path.as_deref(), &ld_cache_paths(), DEFAULT_DIRS);
    let preload = match mode {
        Interpose::Auto => loader.as_deref().is_some_and(|l| !supports_layers(l)),
        Interpose::Layer => false,
        Interpose::Preload => true,
    };
    Choice { preload, loader, forced: mode != Interpose::Auto, held_back_for_tools: false }
}

/// Whether the loader at `path` supports layers: it names `clInitLayer`.
pub fn supports_layers(path: &Path) -> bool {
    file_names(path, b"clInitLayer")
}

/// Whether the file at `path` holds the bytes `name` (a symbol's name in its string tables).
pub fn file_names(path: &Path, name: &[u8]) -> bool {
    std::fs::read(path).is_ok_and(|b| b.windows(name.len()).any(|w| w == name))
}

const DEFAULT_DIRS: &[&str] =
    &["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"];

/// The `libOpenCL.so.1` the dynamic loader would find for `program` (see the module docs).
pub fn find_loader(
    program: &Path,
    ld_library_path: Option<&OsStr>,
    cache: &[PathBuf],
    defaults: &[&str],
) -> Option<PathBuf> {
    let paths = elf_search_paths(program).unwrap_or_default();
    let origin = program.canonicalize().ok().and_then(|p| p.parent().map(Path::to_path_buf)).unwrap_or_default();
    let expand = |list: &str| -> Vec<PathBuf> {
        list.split(':')
            .filter(|d| !d.is_empty())
            .map(|d| {
                PathBuf::from(
                    d.replace("${ORIGIN}", &origin.to_string_lossy()).replace("$ORIGIN", &origin.to_string_lossy()),
                )
            })
            .collect()
    };
    let mut dirs: Vec<PathBuf> = Vec::new();
    if paths.runpath.is_none()
        && let Some(rpath) = &paths.rpath
    {
        dirs.extend(expand(rpath));
    }
    if let Some(lp) = ld_library_path {
        // An empty entry is the current folder, as for the dynamic loader.
        dirs.extend(std::env::split_paths(lp).map(|d| if d.as_os_str().is_empty() { PathBuf::from(".") } else { d }));
    }
    if let Some(runpath) = &paths.runpath {
        dirs.extend(expand(runpath));
    }
    dirs.into_iter()
        .map(|d| d.join(SONAME))
        .chain(cache.iter().cloned())
        .chain(defaults.iter().map(|d| Path::new(d).join(SONAME)))
        .find(|p| p.is_file())
        .map(|p| p.canonicalize().unwrap_or(p))
}

/// The ld.so cache's `libOpenCL.so.1` entries for this machine's word size (`ldconfig -p`).
fn ld_cache_paths() -> Vec<PathBuf> {
    let out = ["/sbin/ldconfig", "/usr/sbin/ldconfig"]
        .iter()
        .filter(|p| Path::new(p).is_file())
        .find_map(|p| std::process::Command::new(p).arg("-p").output().ok().filter(|o| o.status.success()));
    out.map(|o| parse_ld_cache(&String::from_utf8_lossy(&o.stdout))).unwrap_or_default()
}

/// The paths of `libOpenCL.so.1` in `ldconfig -p` output, 64-bit entries only.
pub fn parse_ld_cache(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| {
            let (left, path) = l.trim().split_once(" => ")?;
            let (name, tags) = left.split_once(' ')?;
            (name == SONAME && tags.contains("64")).then(|| PathBuf::from(path.trim()))
        })
        .collect()
}

/// An ELF program's `DT_RPATH` and `DT_RUNPATH`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SearchPaths {
    pub rpath: Option<String>,
    pub runpath: Option<String>,
    /// `DT_NEEDED`: the libraries the program links.
    pub needed: Vec<String>,
}

/// Whether the program at `path` links an ICD loader (`libOpenCL.so*` in its `DT_NEEDED`): a
/// program that only opens one at run time (Python's pyopencl) or never uses OpenCL does not.
pub fn links_opencl(path: &Path) -> bool {
    elf_search_paths(path).is_some_and(|p| p.needed.iter().any(|n| n.starts_with("libOpenCL.so")))
}

/// Reads `DT_RPATH`/`DT_RUNPATH` of a 64-bit little-endian ELF file (None: not one, or
/// unreadable; a script has none). Reads the headers and the dynamic section only.
pub fn elf_search_paths(path: &Path) -> Option<SearchPaths> {
    let mut f = std::fs::File::open(path).ok()?;
    let mut eh = [0u8; 64];
    f.read_exact(&mut eh).ok()?;
    if &eh[..4] != b"\x7fELF" || eh[4] != 2 || eh[5] != 1 {
        return None;
    }
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
    let (phoff, phentsize, phnum) = (u64_at(&eh, 0x20), u16_at(&eh, 0x36) as usize, u16_at(&eh, 0x38) as usize);
    if phentsize < 56 || phnum == 0 || phnum > 256 {
        return None;
    }
    let mut ph = vec![0u8; phentsize * phnum];
    f.seek(SeekFrom::Start(phoff)).ok()?;
    f.read_exact(&mut ph).ok()?;
    // (p_type, p_offset, p_vaddr, p_filesz)
    let segs: Vec<(u32, u64, u64, u64)> = ph
        .chunks(phentsize)
        .map(|p| (u32::from_le_bytes([p[0], p[1], p[2], p[3]]), u64_at(p, 8), u64_at(p, 16), u64_at(p, 32)))
        .collect();
    let &(_, dyn_off, _, dyn_size) = segs.iter().find(|s| s.0 == 2)?;
    let dyn_size = usize::try_from(dyn_size).ok().filter(|&s| s <= 1 << 20)?;
    let mut dynamic = vec![0u8; dyn_size];
    f.seek(SeekFrom::Start(dyn_off)).ok()?;
    f.read_exact(&mut dynamic).ok()?;
    let (mut strtab, mut rpath, mut runpath, mut needed) = (None, None, None, Vec::new());
    for e in dynamic.chunks_exact(16) {
        match u64_at(e, 0) {
            0 => break,
            1 if needed.len() < 256 => needed.push(u64_at(e, 8)),
            5 => strtab = Some(u64_at(e, 8)),
            15 => rpath = Some(u64_at(e, 8)),
            29 => runpath = Some(u64_at(e, 8)),
            _ => {}
        }
    }
    let strtab = strtab?;
    // DT_STRTAB is an address: the file offset is found through the PT_LOAD that maps it.
    let &(_, off, vaddr, _) = segs.iter().find(|s| s.0 == 1 && s.2 <= strtab && strtab < s.2.saturating_add(s.3))?;
    let strtab_off = strtab - vaddr + off;
    let mut read_str = |at: u64| -> Option<String> {
        let mut buf = vec![0u8; 4096];
        f.seek(SeekFrom::Start(strtab_off.checked_add(at)?)).ok()?;
        let n = f.read(&mut buf).ok()?;
        let end = buf[..n].iter().position(|&b| b == 0)?;
        Some(String::from_utf8_lossy(&buf[..end]).into_owned())
    };
    Some(SearchPaths {
        rpath: rpath.and_then(&mut read_str),
        runpath: runpath.and_then(&mut read_str),
        needed: needed.into_iter().filter_map(&mut read_str).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().expect("parent")).expect("dir");
        std::fs::write(p, b"x").expect("write");
    }

    #[test]
    fn ld_library_path_comes_before_the_cache_and_the_default_folders() {
        let t = tempfile::tempdir().expect("tmp");
        let (first, cached, default) = (t.path().join("cuda"), t.path().join("cache"), t.path().join("lib"));
        for d in [&first, &cached, &default] {
            touch(&d.join(SONAME));
        }
        let prog = t.path().join("prog");
        touch(&prog);
        let cache = [cached.join(SONAME)];
        let lp = std::env::join_paths([t.path().join("empty"), first.clone()]).expect("join");
        let d = default.to_string_lossy().into_owned();
        let found = find_loader(&prog, Some(&lp), &cache, &[&d]);
        assert_eq!(found, Some(first.join(SONAME).canonicalize().expect("canon")));
        assert_eq!(find_loader(&prog, None, &cache, &[&d]), Some(cached.join(SONAME).canonicalize().expect("c")));
        assert_eq!(find_loader(&prog, None, &[], &[&d]), Some(default.join(SONAME).canonicalize().expect("c")));
        assert_eq!(find_loader(&prog, None, &[], &[]), None);
    }

    #[test]
    fn the_ld_cache_lists_64_bit_entries_of_the_soname_only() {
        let text = "3 libs found in cache `/etc/ld.so.cache'\n\
            \tlibOpenCL.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libOpenCL.so.1\n\
            \tlibOpenCL.so.1 (libc6) => /lib/i386-linux-gnu/libOpenCL.so.1\n\
            \tlibOpenCL.so (libc6,x86-64) => /lib/x86_64-linux-gnu/libOpenCL.so\n";
        assert_eq!(parse_ld_cache(text), vec![PathBuf::from("/lib/x86_64-linux-gnu/libOpenCL.so.1")]);
    }

    #[test]
    fn layer_support_is_the_clinitlayer_name() {
        let t = tempfile::tempdir().expect("tmp");
        let (with, without) = (t.path().join("a"), t.path().join("b"));
        std::fs::write(&with, b"\0clGetPlatformIDs\0clInitLayer\0").expect("w");
        std::fs::write(&without, b"\0clGetPlatformIDs\0clInitLaye\0").expect("w");
        assert!(supports_layers(&with));
        assert!(!supports_layers(&without));
        assert!(!supports_layers(&t.path().join("missing")));
    }

    /// A program linked by `cc` here with a RUNPATH and one with an RPATH: the RPATH folder
    /// comes before `LD_LIBRARY_PATH`, the RUNPATH folder after it; `$ORIGIN` is the program's
    /// folder. Skipped without a C compiler.
    #[test]
    fn rpath_and_runpath_are_read_from_the_program() {
        let t = tempfile::tempdir().expect("tmp");
        let src = t.path().join("m.c");
        std::fs::write(&src, "int main(void) { return 0; }\n").expect("src");
        let (runpath, rpath) = (t.path().join("runpath"), t.path().join("rpath"));
        let ok = |out: &Path, flag: &str| {
            std::process::Command::new("cc")
                .arg(&src)
                .arg("-o")
                .arg(out)
                .arg(format!("-Wl,-rpath,$ORIGIN/rp,{flag}"))
                .status()
                .is_ok_and(|s| s.success())
        };
        if !ok(&runpath, "--enable-new-dtags") || !ok(&rpath, "--disable-new-dtags") {
            eprintln!("no working cc: skipped");
            return;
        }
        assert_eq!(
            elf_search_paths(&runpath),
            Some(SearchPaths { rpath: None, runpath: Some("$ORIGIN/rp".into()), needed: vec!["libc.so.6".into()] })
        );
        assert_eq!(
            elf_search_paths(&rpath),
            Some(SearchPaths { rpath: Some("$ORIGIN/rp".into()), runpath: None, needed: vec!["libc.so.6".into()] })
        );
        let lp_dir = t.path().join("lp");
        touch(&lp_dir.join(SONAME));
        touch(&t.path().join("rp").join(SONAME));
        let lp = lp_dir.clone().into_os_string();
        let in_rp = t.path().join("rp").join(SONAME).canonicalize().expect("c");
        let in_lp = lp_dir.join(SONAME).canonicalize().expect("c");
        assert_eq!(find_loader(&rpath, Some(&lp), &[], &[]), Some(in_rp.clone()));
        assert_eq!(find_loader(&runpath, Some(&lp), &[], &[]), Some(in_lp));
        assert_eq!(find_loader(&runpath, None, &[], &[]), Some(in_rp));
        assert_eq!(elf_search_paths(&src), None, "a text file is no ELF program");
    }

    #[test]
    fn the_summary_line_names_preload_mode_only() {
        let layer = Choice { preload: false, loader: None, forced: false, held_back_for_tools: false };
        assert_eq!(layer.summary_line(), None);
        let auto = Choice {
            preload: true,
            loader: Some("/cuda/libOpenCL.so.1".into()),
            forced: false,
            held_back_for_tools: false,
        };
        let line = auto.summary_line().expect("line");
        assert!(
            line.contains("preload mode") && line.contains("/cuda/libOpenCL.so.1") && line.contains("no layer support"),
            "{line}"
        );
        let forced = Choice { forced: true, ..auto.clone() };
        let line = forced.summary_line().expect("line");
        assert!(
            line.contains("--opencl-interpose preload")
                && line.contains("the libOpenCL.so.1 found for the program: /cuda/libOpenCL.so.1"),
            "{line}"
        );
    }

    /// A `--tool` binds to the first copy of the services in the global scope: with the CUDA
    /// injection beside the layer, auto mode does not preload the layer into a program that links
    /// no ICD loader (this test's own executable links none), and says so; every other case
    /// keeps its mode.
    #[test]
    fn tools_beside_the_cuda_injection_hold_preload_back_for_a_program_without_an_icd_loader() {
        let exe = std::env::current_exe().expect("exe");
        assert!(!links_opencl(&exe));
        let auto = Choice {
            preload: true,
            loader: Some("/cuda/libOpenCL.so.1".into()),
            forced: false,
            held_back_for_tools: false,
        };
        let mut c = auto.clone();
        c.hold_back_for_tools(&exe, true, true);
        assert!(!c.preload && c.held_back_for_tools);
        let line = c.summary_line().expect("line");
        assert!(line.contains("not preloaded") && line.contains("--opencl-interpose preload"), "{line}");
        for (tools, cuda, forced) in [(false, true, false), (true, false, false), (true, true, true)] {
            let mut c = Choice { forced, ..auto.clone() };
            c.hold_back_for_tools(&exe, tools, cuda);
            assert!(c.preload && !c.held_back_for_tools, "tools {tools} cuda {cuda} forced {forced}");
        }
        // A program that links the ICD loader keeps preload (a C program built with -lOpenCL).
        let t = tempfile::tempdir().expect("tmp");
        let src = t.path().join("p.c");
        std::fs::write(&src, "int clGetPlatformIDs(unsigned, void *, unsigned *);\nint main(void) { return clGetPlatformIDs(0, 0, 0) == 12345; }\n").expect("src");
        let prog = t.path().join("p");
        let built = std::process::Command::new("cc").arg(&src).arg("-o").arg(&prog).arg("-lOpenCL").status();
        if built.is_ok_and(|s| s.success()) {
            assert!(links_opencl(&prog));
            let mut c = auto.clone();
            c.hold_back_for_tools(&prog, true, true);
            assert!(c.preload && !c.held_back_for_tools);
        } else {
            // No compiler or ICD loader here: tier 2 (e2e_opencl) covers the C programs.
            eprintln!("skipped the linked case: cc -lOpenCL failed");
        }
    }
}
