//! Generates the prototype sections of `include/offtrace/offtrace.h` and `offtrace_testing.h`
//! from the `#[unsafe(no_mangle)] pub ... extern "C" fn` declarations in `src/`, and fails when
//! the checked-in headers differ. `OFFTRACE_BLESS=1` rewrites them instead.
//!
//! Type names map one to one: the crate declares Rust aliases with the C names
//! (`offtrace_context_id_t`, ...); primitive and pointer types map as in `c_type`.

#![allow(clippy::unwrap_used)]

use std::path::Path;

const BEGIN: &str = "/* BEGIN GENERATED FUNCTIONS */";
const END: &str = "/* END GENERATED FUNCTIONS */";

fn c_type(rust: &str) -> String {
    let t = rust.trim();
    if let Some(inner) = t.strip_prefix("Option<").and_then(|s| s.strip_suffix('>')) {
        return c_type(inner);
    }
    if let Some(inner) = t.strip_prefix("*const ") {
        return format!("const {}*", c_type(inner));
    }
    if let Some(inner) = t.strip_prefix("*mut ") {
        let c = c_type(inner);
        return format!("{c}*");
    }
    match t {
        "u8" => "uint8_t".into(),
        "u32" => "uint32_t".into(),
        "u64" => "uint64_t".into(),
        "f64" => "double".into(),
        "i32" => "int32_t".into(),
        "usize" => "size_t".into(),
        "c_int" => "int".into(),
        "c_char" => "char".into(),
        "c_void" => "void".into(),
        other if other.starts_with("offtrace_") => other.into(),
        other => panic!("no C mapping for Rust type `{other}`: add one in tests/header.rs"),
    }
}

struct Function {
    docs: Vec<String>,
    name: String,
    params: Vec<(String, String)>,
    ret: String,
}

fn parse(src: &str) -> Vec<Function> {
    let mut out = Vec::new();
    let mut docs: Vec<String> = Vec::new();
    let lines: Vec<&str> = src.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim();
        if let Some(d) = l.strip_prefix("///") {
            docs.push(d.strip_prefix(' ').unwrap_or(d).to_string());
        } else if l == "#[unsafe(no_mangle)]" {
            let mut sig = String::new();
            i += 1;
            while !lines[i].contains('{') {
                sig.push_str(lines[i].trim());
                sig.push(' ');
                i += 1;
            }
            sig.push_str(lines[i].split('{').next().unwrap());
            let after_fn = sig.split("fn ").nth(1).unwrap();
            let name = after_fn.split('(').next().unwrap().trim().to_string();
            let open = after_fn.find('(').unwrap();
            let close = after_fn.rfind(')').unwrap();
            let params = after_fn[open + 1..close]
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (n, t) = p.split_once(':').unwrap();
                    (n.trim().to_string(), c_type(t))
                })
                .collect();
            let ret = match after_fn[close + 1..].split_once("->") {
                Some((_, r)) => c_type(r),
                None => "void".into(),
            };
            out.push(Function { docs: std::mem::take(&mut docs), name, params, ret });
        } else if !l.starts_with("#[") {
            docs.clear();
        }
        i += 1;
    }
    out
}

fn render(fns: &[Function]) -> String {
    let mut s = String::new();
    for f in fns {
        s.push_str("\n/**\n");
        for d in &f.docs {
            let d = d.replace("# Safety", "Safety:").replace('`', "");
            if d.is_empty() {
                s.push_str(" *\n");
            } else {
                s.push_str(&format!(" * {d}\n"));
            }
        }
        s.push_str(" */\n");
        let params = if f.params.is_empty() {
            "void".to_string()
        } else {
            f.params.iter().map(|(n, t)| format!("{t} {n}")).collect::<Vec<_>>().join(", ")
        };
        s.push_str(&format!("{} {}({});\n", f.ret, f.name, params));
    }
    s.push('\n');
    s
}

fn check(header: &str, sources: &[&str]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fns: Vec<Function> =
        sources.iter().flat_map(|f| parse(&std::fs::read_to_string(root.join("src").join(f)).unwrap())).collect();
    assert!(!fns.is_empty());
    let path = root.join("include/offtrace").join(header);
    let text = std::fs::read_to_string(&path).unwrap();
    let (head, rest) = text.split_once(BEGIN).expect("BEGIN marker");
    let (_, tail) = rest.split_once(END).expect("END marker");
    let want = format!("{head}{BEGIN}{}{END}{tail}", render(&fns));
    if std::env::var_os("OFFTRACE_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    } else {
        assert!(
            text == want,
            "{header} is stale: run `OFFTRACE_BLESS=1 cargo test -p offtrace-capi --test header` and commit it"
        );
    }
}

#[test]
fn offtrace_h_is_current() {
    check("offtrace.h", &["lib.rs", "tools.rs", "metrics.rs", "sysman.rs"]);
}

#[test]
fn offtrace_testing_h_is_current() {
    check("offtrace_testing.h", &["testing.rs"]);
}

#[test]
fn type_mapping() {
    assert_eq!(c_type("*mut *const c_char"), "const char**");
    assert_eq!(c_type("Option<offtrace_callback_tracing_cb_t>"), "offtrace_callback_tracing_cb_t");
    assert_eq!(c_type("*const offtrace_tracing_operation_t"), "const offtrace_tracing_operation_t*");
}
