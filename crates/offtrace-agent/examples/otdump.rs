//! Prints a trace's records one per line (debugging aid): `cargo run --example otdump -- FILE`.
use offtrace_format::{Record, TraceReader};

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: otdump FILE");
        std::process::exit(2);
    };
    let reader = match TraceReader::open(&path) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    println!("{:?}", reader.header());
    let mut strings = std::collections::HashMap::new();
    for r in reader {
        match r {
            Ok(Record::String { id, text }) => {
                println!("String {} {text:?}", id.0);
                strings.insert(id, text);
            }
            Ok(Record::Notification(n)) => {
                let f = match n.user_data {
                    offtrace_format::UserData::FunctionWithArgs { name, .. } => {
                        strings.get(&name).cloned().unwrap_or_default()
                    }
                    _ => String::new(),
                };
                println!(
                    "N tid={} s={} tt={} inst={} {f} {:?}",
                    n.tid, n.stream, n.trace_type, n.instance, n.user_data
                );
            }
            Ok(r) => println!("{r:?}"),
            Err(e) => {
                println!("ERROR {e}");
                break;
            }
        }
    }
}
