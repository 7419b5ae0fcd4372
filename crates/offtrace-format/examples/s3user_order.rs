use offtrace_format::{Record, TraceReader};
fn main() {
    let path = std::env::args().nth(1).unwrap();
    for (i, r) in TraceReader::open(&path).unwrap().enumerate() {
        match r {
            Ok(Record::Device(d)) => println!("{i} Device {:#x} name {:?}", d.handle, d.name),
            Ok(Record::CounterDef(d)) => println!("{i} CounterDef {} device {:#x}", d.counter, d.device),
            Ok(Record::CounterSample(s)) => println!("{i} CounterSample {} ts {}", s.counter, s.ts),
            Ok(Record::Queue(q)) => println!("{i} Queue {:#x} op {} device {:#x}", q.queue, q.op, q.device),
            Ok(_) => {}
            Err(e) => println!("{i} err {e}"),
        }
    }
}
