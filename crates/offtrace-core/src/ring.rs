//! A bounded single-producer/single-consumer ring of fixed-size `Copy` records.
//!
//! The producer is an application thread recording inside a runtime callback; the consumer is
//! the writer thread. [`Producer::push`] is wait-free: a few plain loads and stores, one
//! `Release` store, and an `Acquire` load of the consumer's index only when the cached copy says
//! the ring looks full. It returns `false` when the ring is full: the caller counts a drop.
//! [`Producer::reserve`] + [`Reservation::commit`] write a multi-slot record in place (no copy
//! through a staging buffer). [`Consumer::snapshot`] reads how far the producer got; [`Consumer::drain_to`] copies records
//! out up to such a snapshot, so a writer can order other work (definitions) between the two.
//!
//! Cost: a push is one slot copy plus a few loads and stores of indices (no RMW, no fence). The two indices
//! sit on separate cache lines (128-byte padding against adjacent-line prefetch), and each side
//! caches the other's index, so in the steady state the lines only move when the consumer drains.
//!
//! Indices are free-running `usize` counters (wrapping is harmless: only differences are used);
//! slot = index & (capacity - 1).

use std::mem::MaybeUninit;

use crate::sync::{Arc, AtomicUsize, Ordering, UnsafeCell};

#[repr(align(128))]
#[derive(Debug)]
struct CachePadded<T>(T);

#[derive(Debug)]
struct Shared<T> {
    /// Next index the producer writes (published by the producer).
    tail: CachePadded<AtomicUsize>,
    /// Next index the consumer reads (published by the consumer).
    head: CachePadded<AtomicUsize>,
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
    mask: usize,
}

// SAFETY:
// - a slot is written only by the single `Producer` while it is outside [head, tail), and read
//   only by the single `Consumer` while it is inside; the Release/Acquire pairs on `tail` and
//   `head` order those accesses, so no slot is ever accessed by both sides at once;
// - `T: Send` because values move from the producer's thread to the consumer's.
#[allow(unsafe_code)]
unsafe impl<T: Copy + Send> Sync for Shared<T> {}
#[allow(unsafe_code)]
unsafe impl<T: Copy + Send> Send for Shared<T> {}

/// The writing end. Not `Clone`: there is exactly one producer.
#[derive(Debug)]
pub struct Producer<T> {
    shared: Arc<Shared<T>>,
    tail: usize,
    cached_head: usize,
}

/// The reading end. Not `Clone`: there is exactly one consumer.
#[derive(Debug)]
pub struct Consumer<T> {
    shared: Arc<Shared<T>>,
    head: usize,
}

/// Creates a ring holding `capacity` records, rounded up to a power of two (minimum 2).
pub fn ring<T: Copy + Send>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    let cap = capacity.max(2).next_power_of_two();
    let slots = (0..cap).map(|_| UnsafeCell::new(MaybeUninit::uninit())).collect();
    let shared = Arc::new(Shared {
        tail: CachePadded(AtomicUsize::new(0)),
        head: CachePadded(AtomicUsize::new(0)),
        slots,
        mask: cap - 1,
    });
    (Producer { shared: shared.clone(), tail: 0, cached_head: 0 }, Consumer { shared, head: 0 })
}

impl<T: Copy + Send> Producer<T> {
    /// Appends `value`; `false` (value discarded) when the ring is full. Wait-free.
    #[inline]
    pub fn push(&mut self, value: T) -> bool {
        let cap = self.shared.mask + 1;
        if self.tail.wrapping_sub(self.cached_head) >= cap {
            // Acquire: pairs with the consumer's Release in `drain_to`; its reads of the freed
            // slots happen-before our overwrite below.
            self.cached_head = self.shared.head.0.load(Ordering::Acquire);
            if self.tail.wrapping_sub(self.cached_head) >= cap {
                return false;
            }
        }
        let slot = &self.shared.slots[self.tail & self.shared.mask];
        // SAFETY:
        // - the slot index is outside [head, tail) (checked above), so the consumer does not
        //   read it until the Release store below publishes it;
        // - we are the only producer (`Producer` is not `Clone`, and `push` takes `&mut self`).
        #[allow(unsafe_code)]
        slot.with_mut(|p| unsafe { (*p).write(value) });
        self.tail = self.tail.wrapping_add(1);
        // Release: publishes the slot write above to the consumer's Acquire in `snapshot`.
        self.shared.tail.0.store(self.tail, Ordering::Release);
        true
    }

    /// Appends all of `items` or nothing (`false` when they do not fit). The consumer sees
    /// them together: one Release store publishes the whole slice. Wait-free.
    #[inline]
    pub fn push_slice(&mut self, items: &[T]) -> bool {
        let cap = self.shared.mask + 1;
        let n = items.len();
        if self.tail.wrapping_sub(self.cached_head) + n > cap {
            // Acquire: as in `push`.
            self.cached_head = self.shared.head.0.load(Ordering::Acquire);
            if self.tail.wrapping_sub(self.cached_head) + n > cap {
                return false;
            }
        }
        #[cfg(not(loom))]
        {
            // Two block copies at most (the part before the end of the slot array, the rest
            // from its start): a slot-by-slot loop with index masking cost ~3 instructions a word
            // more on the record path.
            let start = self.tail & self.shared.mask;
            let first = n.min(cap - start);
            let base = self.shared.slots.as_ptr().cast::<T>().cast_mut();
            // SAFETY: as in `push`: these `n` slots are outside [head, tail) (checked above) and
            // not visible to the consumer before the Release store below; we are the only
            // producer. `start + first <= cap` and `n - first <= cap` slots exist.
            // `UnsafeCell<MaybeUninit<T>>` is `repr(transparent)` over `T`'s storage (as in
            // `Reservation::contiguous`), and writing through a shared `UnsafeCell` is allowed.
            #[allow(unsafe_code)]
            unsafe {
                std::ptr::copy_nonoverlapping(items.as_ptr(), base.add(start), first);
                std::ptr::copy_nonoverlapping(items.as_ptr().add(first), base, n - first);
            }
        }
        #[cfg(loom)]
        for (i, &v) in items.iter().enumerate() {
            let slot = &self.shared.slots[self.tail.wrapping_add(i) & self.shared.mask];
            // SAFETY: as in `push`: these `n` slots are outside [head, tail) (checked above)
            // and not visible to the consumer before the Release store below.
            #[allow(unsafe_code)]
            slot.with_mut(|p| unsafe { (*p).write(v) });
        }
        self.tail = self.tail.wrapping_add(n);
        // Release: as in `push`, for all `n` slots at once.
        self.shared.tail.0.store(self.tail, Ordering::Release);
        true
    }

    /// Reserves room for up to `max` records and returns a [`Reservation`] to write them in
    /// place (no intermediate copy); `None` (nothing reserved) when fewer than `max` slots are
    /// free. Nothing is visible to the consumer until [`Reservation::commit`]; dropping the
    /// reservation abandons it. Wait-free.
    #[inline]
    pub fn reserve(&mut self, max: usize) -> Option<Reservation<'_, T>> {
        let cap = self.shared.mask + 1;
        if self.tail.wrapping_sub(self.cached_head) + max > cap {
            // Acquire: as in `push`.
            self.cached_head = self.shared.head.0.load(Ordering::Acquire);
            if self.tail.wrapping_sub(self.cached_head) + max > cap {
                return None;
            }
        }
        let (tail, mask, slots) = (self.tail, self.shared.mask, self.shared.slots.as_ptr());
        Some(Reservation { producer: self, slots, tail, mask, max })
    }

    /// Records written and not yet known to be consumed (an upper bound; no shared access).
    #[inline]
    pub fn approx_len(&self) -> usize {
        self.tail.wrapping_sub(self.cached_head)
    }

    /// The ring's capacity in records.
    pub fn capacity(&self) -> usize {
        self.shared.mask + 1
    }
}

/// Room for up to `max` records at the producer's tail, from [`Producer::reserve`]. Write with
/// [`Reservation::set`] in any order, then publish the first `n` with [`Reservation::commit`].
#[derive(Debug)]
pub struct Reservation<'a, T> {
    producer: &'a mut Producer<T>,
    /// Copies of the slot array's address, the producer's tail and the mask, so that `set`
    /// keeps them in registers (otherwise reloaded after every slot store, which could alias).
    slots: *const UnsafeCell<MaybeUninit<T>>,
    tail: usize,
    mask: usize,
    max: usize,
}

impl<T: Copy + Send> Reservation<'_, T> {
    /// The number of records reserved.
    #[inline(always)]
    pub fn max(&self) -> usize {
        self.max
    }

    /// The reserved slots as one slice of [`Self::max`] records, when they do not wrap around
    /// the end of the slot array (all but one reservation position per lap): writing them
    /// through it is plain stores, no index masking. Like [`Self::set`], nothing written is
    /// visible before [`Self::commit`].
    #[cfg(not(loom))]
    #[inline(always)]
    pub fn contiguous(&mut self) -> Option<&mut [MaybeUninit<T>]> {
        let start = self.tail & self.mask;
        if start + self.max > self.mask + 1 {
            return None;
        }
        // SAFETY: slots `start..start + max` exist (checked above; `max <= capacity` since
        // `reserve` succeeded) and, as in `set`, are outside [head, tail), invisible to the
        // consumer before `commit`, and ours alone while `self` (which borrows the producer
        // mutably) is borrowed mutably by the returned slice. `UnsafeCell<MaybeUninit<T>>` is
        // `repr(transparent)` over `MaybeUninit<T>` (`sync::UnsafeCell` and
        // `std::cell::UnsafeCell` both), and writing through a shared `UnsafeCell` is allowed.
        #[allow(unsafe_code)]
        unsafe {
            Some(std::slice::from_raw_parts_mut(self.slots.add(start).cast_mut().cast::<MaybeUninit<T>>(), self.max))
        }
    }

    /// Writes record `i` (< [`Self::max`]; larger indices are ignored) of the reservation.
    #[inline(always)]
    pub fn set(&mut self, i: usize, value: T) {
        if i >= self.max {
            return;
        }
        let idx = self.tail.wrapping_add(i) & self.mask;
        // SAFETY: `idx <= mask` and the slot array (kept alive by the borrowed producer's
        // `Arc`) has `mask + 1` elements.
        #[allow(unsafe_code)]
        let slot = unsafe { &*self.slots.add(idx) };
        // SAFETY: as in `push`: slot `tail + i` (i < max) is outside [head, tail) (checked by
        // `reserve`) and not visible to the consumer before `commit`'s Release store; we are the
        // only producer (`reserve` borrows the `Producer` mutably).
        #[allow(unsafe_code)]
        slot.with_mut(|p| unsafe { (*p).write(value) });
    }

    /// Publishes the first `n` records (`n` ≤ [`Self::max`], else `max`) with one Release store:
    /// the consumer sees them together. Every one of them must have been [`Self::set`].
    #[inline(always)]
    pub fn commit(self, n: usize) {
        let n = n.min(self.max);
        let p = self.producer;
        p.tail = p.tail.wrapping_add(n);
        // Release: as in `push`, for all `n` slots at once.
        p.shared.tail.0.store(p.tail, Ordering::Release);
    }
}

impl<T: Copy + Send> Consumer<T> {
    /// The producer's progress: every record before the returned index is readable.
    #[inline]
    pub fn snapshot(&self) -> usize {
        // Acquire: pairs with the producer's Release in `push`; the slot writes before the
        // returned index are visible to us.
        self.shared.tail.0.load(Ordering::Acquire)
    }

    /// Number of records readable now.
    pub fn len(&self) -> usize {
        self.snapshot().wrapping_sub(self.head)
    }

    /// Whether nothing is readable now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Passes every record before `snapshot` (a value from [`Self::snapshot`]) to `f`, in order,
    /// then frees their slots. Returns how many were passed.
    pub fn drain_to(&mut self, snapshot: usize, mut f: impl FnMut(T)) -> usize {
        // A snapshot older than `head` (already drained past) wraps to a huge count: read nothing.
        let n = snapshot.wrapping_sub(self.head);
        let n = if n > self.shared.mask + 1 { 0 } else { n };
        for _ in 0..n {
            let slot = &self.shared.slots[self.head & self.shared.mask];
            // SAFETY:
            // - the slot is inside [head, snapshot), written by the producer before its Release
            //   store of an index >= snapshot, which our Acquire in `snapshot` observed;
            // - the producer does not overwrite it until our Release store of `head` below.
            #[allow(unsafe_code)]
            let v = slot.with(|p| unsafe { (*p).assume_init() });
            f(v);
            self.head = self.head.wrapping_add(1);
        }
        // Release: our slot reads above happen-before the producer's Acquire of `head` in
        // `push`, after which it may overwrite those slots.
        self.shared.head.0.store(self.head, Ordering::Release);
        n
    }

    /// [`Self::drain_to`] appending to `out` with at most two block copies (the writer's drain:
    /// a call per record cost ~6 instructions a word more).
    pub fn drain_to_vec(&mut self, snapshot: usize, out: &mut Vec<T>) -> usize {
        #[cfg(loom)]
        {
            self.drain_to(snapshot, |v| out.push(v))
        }
        #[cfg(not(loom))]
        {
            let cap = self.shared.mask + 1;
            let n = snapshot.wrapping_sub(self.head);
            let n = if n > cap { 0 } else { n };
            let start = self.head & self.shared.mask;
            let first = n.min(cap - start);
            out.reserve(n);
            let base = self.shared.slots.as_ptr().cast::<T>();
            // SAFETY: as in `drain_to`: slots [head, snapshot) were written by the producer
            // before its Release store of an index >= snapshot, which our Acquire in `snapshot`
            // observed, and are not overwritten before our Release store of `head` below;
            // `start + first <= cap` and `n - first <= cap` slots exist; `UnsafeCell<MaybeUninit<T>>`
            // has `T`'s layout (as in `Reservation::contiguous`). `out` has room for `n` more.
            #[allow(unsafe_code)]
            unsafe {
                let len = out.len();
                let dst = out.as_mut_ptr().add(len);
                std::ptr::copy_nonoverlapping(base.add(start), dst, first);
                std::ptr::copy_nonoverlapping(base, dst.add(first), n - first);
                out.set_len(len + n);
            }
            self.head = self.head.wrapping_add(n);
            // Release: as in `drain_to`.
            self.shared.head.0.store(self.head, Ordering::Release);
            n
        }
    }

    /// The records before `snapshot` (a value from [`Self::snapshot`]), read in place: the part
    /// before the end of the slot array and the rest from its start. Nothing is freed until
    /// [`Self::release`] (the recorder's writer decodes its entries straight from the ring
    /// instead of copying them out first).
    #[cfg(not(loom))]
    pub fn peek(&self, snapshot: usize) -> (&[T], &[T]) {
        let cap = self.shared.mask + 1;
        let n = snapshot.wrapping_sub(self.head);
        let n = if n > cap { 0 } else { n };
        let start = self.head & self.shared.mask;
        let first = n.min(cap - start);
        let base = self.shared.slots.as_ptr().cast::<T>();
        // SAFETY: as in `drain_to_vec`: slots [head, snapshot) were written by the producer
        // before its Release store of an index >= snapshot, which our Acquire in `snapshot`
        // observed; the producer does not write them again before `release` moves `head` past
        // them, which takes `&mut self` and so ends these borrows first. `start + first <= cap`
        // and `n - first <= cap` slots exist; `UnsafeCell<MaybeUninit<T>>` has `T`'s layout.
        #[allow(unsafe_code)]
        unsafe {
            (std::slice::from_raw_parts(base.add(start), first), std::slice::from_raw_parts(base, n - first))
        }
    }

    /// Frees the first `n` records (at most those readable now) for the producer.
    #[cfg(not(loom))]
    pub fn release(&mut self, n: usize) {
        let n = n.min(self.snapshot().wrapping_sub(self.head));
        self.head = self.head.wrapping_add(n);
        // Release: as in `drain_to`, for the reads of the slices `peek` returned.
        self.shared.head.0.store(self.head, Ordering::Release);
    }

    /// Drains everything readable now.
    pub fn drain(&mut self, f: impl FnMut(T)) -> usize {
        let s = self.snapshot();
        self.drain_to(s, f)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn capacity_rounds_up() {
        let (p, _c) = ring::<u64>(5);
        assert_eq!(p.capacity(), 8);
        let (p, _c) = ring::<u64>(0);
        assert_eq!(p.capacity(), 2);
    }

    #[test]
    fn full_then_drain() {
        let (mut p, mut c) = ring::<u32>(4);
        for i in 0..4 {
            assert!(p.push(i));
        }
        assert!(!p.push(99));
        let mut got = vec![];
        assert_eq!(c.drain(|v| got.push(v)), 4);
        assert_eq!(got, [0, 1, 2, 3]);
        assert!(p.push(4));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn drain_to_vec_wraps_and_stops_at_the_snapshot() {
        let (mut p, mut c) = ring::<u32>(8);
        assert!(p.push_slice(&[1, 2, 3, 4, 5, 6]));
        let mut got = vec![0];
        let s = c.snapshot();
        assert!(p.push_slice(&[7]));
        assert_eq!(c.drain_to_vec(s, &mut got), 6);
        assert!(p.push_slice(&[8, 9, 10, 11])); // wraps around the end
        assert_eq!(c.drain_to_vec(c.snapshot(), &mut got), 5);
        assert_eq!(got, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        assert_eq!(c.drain_to_vec(c.snapshot().wrapping_sub(1), &mut got), 0, "an old snapshot reads nothing");
    }

    #[test]
    fn peek_reads_in_place_until_release_frees_the_slots() {
        let (mut p, mut c) = ring::<u32>(8);
        assert!(p.push_slice(&[1, 2, 3, 4, 5, 6]));
        let s = c.snapshot();
        assert!(p.push_slice(&[7]));
        assert_eq!(c.peek(s), (&[1, 2, 3, 4, 5, 6][..], &[][..]));
        assert!(!p.push_slice(&[8, 9]), "peeked slots are not free");
        c.release(4);
        assert_eq!(c.peek(c.snapshot()), (&[5, 6, 7][..], &[][..]));
        assert!(p.push_slice(&[8, 9, 10, 11])); // wraps around the end
        assert_eq!(c.peek(c.snapshot()), (&[5, 6, 7, 8][..], &[9, 10, 11][..]));
        assert_eq!(c.peek(c.snapshot().wrapping_sub(8)), (&[][..], &[][..]), "an old snapshot reads nothing");
        c.release(100); // at most what is readable
        assert!(c.is_empty());
        assert!(p.push_slice(&[1; 8]));
    }

    #[test]
    fn push_slice_is_all_or_nothing() {
        let (mut p, mut c) = ring::<u8>(4);
        assert!(p.push_slice(&[1, 2, 3]));
        assert!(!p.push_slice(&[4, 5]));
        assert!(p.push_slice(&[4]));
        let mut got = vec![];
        c.drain(|v| got.push(v));
        assert!(p.push_slice(&[5, 6, 7])); // wraps around the end
        c.drain(|v| got.push(v));
        assert_eq!(got, [1, 2, 3, 4, 5, 6, 7]);
    }

    #[test]
    fn reserve_set_commit() {
        let (mut p, mut c) = ring::<u32>(8);
        assert!(p.push_slice(&[1, 2, 3, 4, 5]));
        let mut got = vec![];
        c.drain(|v| got.push(v));
        assert!(p.reserve(9).is_none());
        // Written out of order, across the end of the slot array; index past `max` ignored.
        let mut r = p.reserve(4).expect("room");
        assert_eq!(r.max(), 4);
        r.set(2, 8);
        r.set(0, 6);
        r.set(1, 7);
        r.set(4, 99);
        r.commit(3);
        // Abandoned: nothing published.
        {
            let mut r = p.reserve(2).expect("room");
            r.set(0, 42);
        }
        assert!(p.reserve(6).is_none());
        assert!(p.reserve(5).is_some());
        c.drain(|v| got.push(v));
        assert_eq!(got, [1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn contiguous_reservation_only_when_not_wrapping() {
        let (mut p, mut c) = ring::<u32>(8);
        let mut r = p.reserve(4).expect("room");
        let s = r.contiguous().expect("slots 0..4");
        assert_eq!(s.len(), 4);
        s[0].write(1);
        s[1].write(2);
        r.commit(2);
        {
            let mut r = p.reserve(6).expect("room");
            assert!(r.contiguous().is_some(), "slots 2..8");
        }
        assert!(p.push_slice(&[3, 4, 5]));
        let mut got = vec![];
        c.drain(|v| got.push(v));
        // Tail at 5: 4 slots would wrap.
        let mut r = p.reserve(4).expect("room");
        assert!(r.contiguous().is_none());
        r.set(3, 9);
        r.set(0, 6);
        r.set(1, 7);
        r.set(2, 8);
        r.commit(4);
        c.drain(|v| got.push(v));
        assert_eq!(got, [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    }

    #[test]
    fn drain_to_snapshot_stops_there() {
        let (mut p, mut c) = ring::<u32>(8);
        p.push(1);
        p.push(2);
        let s = c.snapshot();
        p.push(3);
        let mut got = vec![];
        c.drain_to(s, |v| got.push(v));
        assert_eq!(got, [1, 2]);
        c.drain(|v| got.push(v));
        assert_eq!(got, [1, 2, 3]);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(u32),
        Drain,
        Snap,
        DrainToSnap,
    }

    proptest! {
        /// Sequential model: the ring behaves as a bounded FIFO queue.
        #[test]
        fn matches_bounded_fifo(cap in 1usize..9, ops in prop::collection::vec(
            prop_oneof![any::<u32>().prop_map(Op::Push), Just(Op::Drain), Just(Op::Snap), Just(Op::DrainToSnap)], 0..200)) {
            let (mut p, mut c) = ring::<u32>(cap);
            let cap = p.capacity();
            let mut model = VecDeque::new();
            let mut snap = (0usize, 0usize); // (ring snapshot, model length at snapshot)
            let mut consumed = 0usize;
            for op in ops {
                match op {
                    Op::Push(v) => {
                        let ok = p.push(v);
                        prop_assert_eq!(ok, model.len() < cap);
                        if ok { model.push_back(v); }
                    }
                    Op::Drain => {
                        let mut got = vec![];
                        c.drain(|v| got.push(v));
                        consumed += got.len();
                        let want: Vec<u32> = model.drain(..).collect();
                        prop_assert_eq!(got, want);
                    }
                    Op::Snap => snap = (c.snapshot(), consumed + model.len()),
                    Op::DrainToSnap => {
                        let mut got = vec![];
                        let n = snap.1.saturating_sub(consumed);
                        if snap.1 >= consumed { c.drain_to(snap.0, |v| got.push(v)); }
                        consumed += got.len();
                        let want: Vec<u32> = model.drain(..n.min(model.len())).collect();
                        prop_assert_eq!(got, want);
                    }
                }
            }
        }
    }

    #[test]
    fn two_threads_every_record_once_in_order() {
        let (mut p, mut c) = ring::<u64>(64);
        // Under miri (an interpreter, ~10^4 times slower) a few laps of the ring are enough to
        // check every access; natively, enough records for the threads to interleave at random.
        const N: u64 = if cfg!(miri) { 2_000 } else { 200_000 };
        let t = std::thread::spawn(move || {
            let mut i = 0;
            while i < N {
                if p.push(i) {
                    i += 1;
                } else {
                    std::hint::spin_loop();
                }
            }
        });
        let mut next = 0;
        while next < N {
            c.drain(|v| {
                assert_eq!(v, next);
                next += 1;
            });
        }
        t.join().expect("producer");
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// Producer pushes 3 values into a 2-slot ring (so it wraps and sees "full"), consumer
    /// drains concurrently: every value pushed successfully arrives once, in order.
    #[test]
    fn loom_spsc() {
        loom::model(|| {
            let (mut p, mut c) = ring::<u32>(2);
            let t = loom::thread::spawn(move || {
                let mut ok = vec![];
                for v in 1..=3u32 {
                    if p.push(v) {
                        ok.push(v);
                    }
                }
                ok
            });
            let mut got = vec![];
            let s = c.snapshot();
            c.drain_to(s, |v| got.push(v));
            let ok = t.join().expect("producer");
            c.drain(|v| got.push(v));
            assert_eq!(got, ok);
        });
    }

    /// Multi-slot records: a snapshot never splits a `push_slice`.
    #[test]
    fn loom_push_slice_is_atomic() {
        loom::model(|| {
            let (mut p, mut c) = ring::<u32>(4);
            let t = loom::thread::spawn(move || {
                let a = p.push_slice(&[1, 1]);
                let b = p.push_slice(&[2, 2, 2]);
                (a, b)
            });
            let mut got = vec![];
            let s = c.snapshot();
            c.drain_to(s, |v| got.push(v));
            assert!(matches!(got.as_slice(), [] | [1, 1] | [1, 1, 2, 2, 2] | [2, 2, 2]), "{got:?}");
            let _ = t.join().expect("producer");
        });
    }

    /// In-place records: a snapshot never shows a reservation before its commit, nor part of
    /// one; an abandoned reservation is never seen; a reservation that does not fit is refused.
    #[test]
    fn loom_reserve_commit_is_atomic() {
        loom::model(|| {
            let (mut p, mut c) = ring::<u32>(4);
            let t = loom::thread::spawn(move || {
                let mut r = p.reserve(3).expect("empty ring");
                r.set(1, 1);
                r.set(0, 1);
                r.commit(2);
                if let Some(mut r) = p.reserve(2) {
                    r.set(0, 9);
                }
                match p.reserve(2) {
                    Some(mut r) => {
                        r.set(1, 2);
                        r.set(0, 2);
                        r.commit(2);
                        true
                    }
                    None => false,
                }
            });
            let mut got = vec![];
            let s = c.snapshot();
            c.drain_to(s, |v| got.push(v));
            assert!(matches!(got.as_slice(), [] | [1, 1] | [1, 1, 2, 2] | [2, 2]), "{got:?}");
            let second = t.join().expect("producer");
            c.drain(|v| got.push(v));
            assert_eq!(got, if second { vec![1, 1, 2, 2] } else { vec![1, 1] });
        });
    }
}
