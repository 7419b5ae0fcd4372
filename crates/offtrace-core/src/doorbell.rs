//! The delivery thread's doorbell: how producing threads wake the buffers' delivery thread
//! without a system call in the common case.
//!
//! The delivery thread is in one of three states, published in one word that producers only
//! read (a line that stays shared in every core's cache: no transfer per record):
//!
//! - **awake**: delivering, or polling the rings' marks (it finds a ring's watermark by itself);
//! - **napping**: in a timed wait (at most the poll period, `buffer::POLL_PERIOD`): it polls
//!   the marks when the wait ends, so a producer rings only when its ring is *urgent* (nearly
//!   full, or full), when waiting out the nap could make it block or drop;
//! - **asleep**: in a wait without a timeout (its last naps found no mark): every watermark
//!   rings.
//!
//! Ringing when the state asks for it is a lock, a flag and a condition variable's notify (a
//! futex wake: on a VM 8-10 µs of the waker's CPU, an inter-processor interrupt); not ringing
//! is one `Relaxed` load after a `SeqCst` fence. A producing thread that writes records
//! continuously while the delivery thread keeps up rings never: the delivery thread stays awake
//! or naps, and the producer's only shared writes are its ring's `tail` and, once per
//! watermark, its ring's mark.
//!
//! The protocol against a lost wakeup (the model at the end runs the shipped functions under
//! loom): the producer publishes its mark, then a `SeqCst` fence, then reads the state; the
//! delivery thread publishes its state, then a `SeqCst` fence, then reads the marks
//! (`has_work`) before it waits. The two fences are ordered: either the producer's read sees
//! the sleeping state (it rings; the ring's flag is set under the lock the waiter holds until
//! it waits, so the notification cannot fall between its check and its wait), or the delivery
//! thread's read sees the mark (it does not wait).

use std::time::{Duration, Instant};

use crate::sync::{AtomicU32, Condvar, Mutex, Ordering, fence};

const AWAKE: u32 = 0;
const NAPPING: u32 = 1;
const ASLEEP: u32 = 2;

/// Why [`Doorbell::sleep`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woken {
    /// `has_work` said so after the state was published: it did not wait.
    Work,
    /// A producer rang because its ring was urgent (nearly full) while the thread napped: the
    /// naps are too long for the rate the records come at.
    Urgent,
    /// Rung for another reason (a watermark while asleep, a flush, a thread's exit).
    Rung,
    /// The nap ended.
    Timeout,
}

/// A ring's urgency as its producer reports it to [`Doorbell::ring`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Urgency {
    /// At a watermark, the ring below its urgent fill: wakes only a thread asleep without a
    /// timeout (a napping one polls within the poll period).
    Watermark,
    /// The ring is nearly full or full: wakes a napping thread too.
    Urgent,
}

/// What [`Doorbell::sleep`] waits with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sleep {
    /// A timed wait: producers ring only when urgent.
    Nap(Duration),
    /// No timeout: producers ring at every watermark.
    Deep,
}

/// The rings pending for the sleeper, under the doorbell's lock.
#[derive(Debug, Default)]
struct Rung {
    rung: bool,
    urgent: bool,
}

#[repr(align(128))]
struct CachePadded<T>(T);

pub(crate) struct Doorbell {
    /// `AWAKE`, `NAPPING` or `ASLEEP`. Stored by the delivery thread (and set back to `AWAKE`
    /// by a producer that rings, under the lock); read by producers at their watermarks. Alone
    /// in its block: read-mostly.
    state: CachePadded<AtomicU32>,
    rung: Mutex<Rung>,
    bell: Condvar,
}

impl Doorbell {
    pub(crate) fn new() -> Self {
        Self { state: CachePadded(AtomicU32::new(AWAKE)), rung: Mutex::new(Rung::default()), bell: Condvar::new() }
    }

    /// Producer, after publishing its mark (the caller's `Release` store): rings when the
    /// delivery thread would otherwise not see the mark in time. `true` when it rang.
    #[inline]
    pub(crate) fn ring_if_needed(&self, urgency: Urgency) -> bool {
        // SeqCst: orders the caller's mark before the state's read, against the sleeper's
        // fence between its state store and its read of the marks (see the module's doc).
        fence(Ordering::SeqCst);
        // Relaxed: the fence above orders it; the value only selects whether to ring.
        let ring = match self.state.0.load(Ordering::Relaxed) {
            AWAKE => false,
            NAPPING => urgency == Urgency::Urgent,
            _ => true,
        };
        if ring {
            self.ring(urgency == Urgency::Urgent);
        }
        ring
    }

    /// Wakes the delivery thread whatever its state (a flush, a thread's exit; rare).
    #[cold]
    #[inline(never)]
    pub(crate) fn ring(&self, urgent: bool) {
        let mut r = lock(&self.rung);
        r.rung = true;
        r.urgent |= urgent;
        // Relaxed: under the lock; it only spares the producers after this one a ring (the
        // sleeper republishes its state before every wait).
        self.state.0.store(AWAKE, Ordering::Relaxed);
        self.bell.notify_one();
    }

    /// Delivery thread: waits as `how` says unless `has_work()` (read after the state is
    /// published) or a ring is pending. Returns awake.
    pub(crate) fn sleep(&self, how: Sleep, has_work: impl Fn() -> bool) -> Woken {
        let mut r = lock(&self.rung);
        let state = if matches!(how, Sleep::Deep) { ASLEEP } else { NAPPING };
        // Relaxed + SeqCst fence: see the module's doc (pairs with the fence in
        // `ring_if_needed`).
        self.state.0.store(state, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let woken = if r.rung {
            Self::take(&mut r)
        } else if has_work() {
            Woken::Work
        } else {
            // Until rung (a spurious wake-up is waited out), or the nap's end.
            let deadline = match how {
                Sleep::Nap(t) => Some(Instant::now() + t),
                Sleep::Deep => None,
            };
            while !r.rung {
                r = match deadline {
                    None => self.bell.wait(r).unwrap_or_else(|e| e.into_inner()),
                    Some(end) => {
                        let Some(left) = end.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) else {
                            break;
                        };
                        self.bell.wait_timeout(r, left).unwrap_or_else(|e| e.into_inner()).0
                    }
                };
            }
            if r.rung { Self::take(&mut r) } else { Woken::Timeout }
        };
        // Relaxed: only this thread leaves `AWAKE` (under the lock, before it waits).
        self.state.0.store(AWAKE, Ordering::Relaxed);
        woken
    }

    fn take(r: &mut Rung) -> Woken {
        let urgent = std::mem::take(&mut r.urgent);
        r.rung = false;
        if urgent { Woken::Urgent } else { Woken::Rung }
    }
}

fn lock<T>(m: &Mutex<T>) -> crate::sync::MutexGuard<'_, T> {
    // A poisoned doorbell holds two flags: nothing to repair.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{Doorbell, Sleep, Urgency, Woken};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Real threads (and miri, which reports a program that deadlocks): a producer marks many
    /// times, ringing only when the doorbell says so; the sleeper, asleep without a timeout
    /// whenever it has seen every mark, still sees the last one.
    #[test]
    fn a_sleeping_thread_sees_every_mark() {
        const MARKS: usize = if cfg!(miri) { 50 } else { 20_000 };
        let bell = Arc::new(Doorbell::new());
        let mark = Arc::new(AtomicUsize::new(0));
        let producer = {
            let (bell, mark) = (bell.clone(), mark.clone());
            std::thread::spawn(move || {
                let mut rang = 0;
                for m in 1..=MARKS {
                    mark.store(m, Ordering::Release);
                    rang += usize::from(bell.ring_if_needed(Urgency::Watermark));
                }
                rang
            })
        };
        let mut seen = 0;
        while seen < MARKS {
            seen = seen.max(mark.load(Ordering::Acquire));
            if seen < MARKS {
                bell.sleep(Sleep::Deep, || mark.load(Ordering::Acquire) > seen);
            }
        }
        let rang = producer.join().expect("producer");
        assert!(rang <= MARKS);
    }

    #[test]
    fn a_nap_ends_by_itself_and_a_pending_ring_ends_the_next_sleep() {
        let bell = Doorbell::new();
        assert_eq!(bell.sleep(Sleep::Nap(Duration::from_millis(1)), || false), Woken::Timeout);
        assert_eq!(bell.sleep(Sleep::Nap(Duration::from_millis(1)), || true), Woken::Work);
        // Awake: nobody rings.
        assert!(!bell.ring_if_needed(Urgency::Urgent));
        bell.ring(true);
        assert_eq!(bell.sleep(Sleep::Deep, || false), Woken::Urgent);
        bell.ring(false);
        assert_eq!(bell.sleep(Sleep::Nap(Duration::from_secs(60)), || false), Woken::Rung);
    }

    /// A napping thread is rung by an urgent ring only; an asleep one by any.
    #[test]
    fn a_watermark_rings_an_asleep_thread_and_only_an_urgent_ring_a_napping_one() {
        for (how, state) in [(Sleep::Nap(Duration::from_secs(60)), super::NAPPING), (Sleep::Deep, super::ASLEEP)] {
            let bell = Arc::new(Doorbell::new());
            let sleeper = {
                let bell = bell.clone();
                std::thread::spawn(move || bell.sleep(how, || false))
            };
            while bell.state.0.load(Ordering::Relaxed) != state {
                std::thread::yield_now();
            }
            if state == super::NAPPING {
                assert!(!bell.ring_if_needed(Urgency::Watermark), "a napping thread polls by itself");
                assert!(bell.ring_if_needed(Urgency::Urgent));
                assert_eq!(sleeper.join().expect("sleeper"), Woken::Urgent);
            } else {
                assert!(bell.ring_if_needed(Urgency::Watermark));
                assert_eq!(sleeper.join().expect("sleeper"), Woken::Rung);
            }
            assert!(!bell.ring_if_needed(Urgency::Urgent), "awake again");
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::{Doorbell, Sleep, Urgency, Woken};
    use crate::sync::{Arc, AtomicUsize, Ordering};

    /// A producer publishes marks (a counter standing for its ring's mark, stored `Release`
    /// as the ring's is) and rings through the shipped `ring_if_needed` at each; the delivery
    /// thread consumes marks and sleeps through the shipped `sleep` with `has_work` reading
    /// the marks. With the thread asleep without a timeout, every mark must reach it: a lost
    /// wakeup leaves it waiting forever, which loom reports as a deadlock.
    #[test]
    fn loom_every_watermark_reaches_a_sleeping_delivery_thread() {
        loom::model(|| {
            let bell = Arc::new(Doorbell::new());
            let mark = Arc::new(AtomicUsize::new(0));
            let producer = {
                let (bell, mark) = (bell.clone(), mark.clone());
                loom::thread::spawn(move || {
                    for m in 1..=2 {
                        mark.store(m, Ordering::Release);
                        bell.ring_if_needed(Urgency::Watermark);
                    }
                })
            };
            let mut seen = 0;
            while seen < 2 {
                let m = mark.load(Ordering::Acquire);
                if m > seen {
                    seen = m;
                    continue;
                }
                bell.sleep(Sleep::Deep, || mark.load(Ordering::Acquire) > seen);
            }
            producer.join().expect("producer");
        });
    }

    /// The delivery thread naps (loom's timed wait never times out, so here a nap that no
    /// ring ends lasts forever: the strictest case): a watermark below the urgent fill does
    /// not ring it, the urgent mark must. The thread wakes `Urgent` (and so stops napping)
    /// or finds the mark itself.
    #[test]
    fn loom_an_urgent_ring_reaches_a_napping_delivery_thread() {
        loom::model(|| {
            let bell = Arc::new(Doorbell::new());
            let mark = Arc::new(AtomicUsize::new(0));
            let producer = {
                let (bell, mark) = (bell.clone(), mark.clone());
                loom::thread::spawn(move || {
                    mark.store(1, Ordering::Release);
                    bell.ring_if_needed(Urgency::Watermark);
                    mark.store(2, Ordering::Release);
                    bell.ring_if_needed(Urgency::Urgent);
                })
            };
            let nap = Sleep::Nap(std::time::Duration::from_millis(1));
            loop {
                if mark.load(Ordering::Acquire) == 2 {
                    break;
                }
                match bell.sleep(nap, || mark.load(Ordering::Acquire) == 2) {
                    Woken::Work | Woken::Urgent => {}
                    Woken::Rung => panic!("a watermark below the urgent fill rang a napping thread"),
                    Woken::Timeout => {}
                }
            }
            producer.join().expect("producer");
        });
    }
}
