//! Commands of in-order queues, completed in batches instead of one event callback each.
//!
//! The commands of an in-order queue complete in the order they were enqueued, so the layer
//! needs no completion callback per command: each in-order queue (without Codeplay counters)
//! has a FIFO of its commands ([`Fifo`]: the retained event and what the launch knew), and a
//! harvest takes the completed prefix of it, reads each command's profiling results, emits its
//! activity record (`enqueue::complete`) and releases the event. The harvest runs on the
//! harvest thread (`offtrace-opencl`), not on the program's: what completed is known
//!
//! - without asking the runtime after `clFinish` (everything pushed before the call) and after a
//!   non-kernel command found complete by one `CL_EVENT_COMMAND_EXECUTION_STATUS` query (a
//!   blocking read completes before its enqueue returns): the program's thread notes the
//!   sequence number (`Fifo::completed_upto`, one atomic `fetch_max`) and wakes the harvest
//!   thread (a condition variable), which reports those commands without a status query;
//! - by the harvest thread's own polls: after the program's `clWaitForEvents` (it is woken), and
//!   every millisecond while commands complete (less often, down to every 20 ms, while none
//!   does), so that commands are reported also for programs that never wait, and the FIFOs stay
//!   short. A poll asks for the status of the FIFO's newest command, else binary-searches the
//!   FIFO (`O(log n)` status queries). The same thread polls the commands of out-of-order
//!   queues, which have no completion callback either (`enqueue::poll_unordered`: one status
//!   query per outstanding command and round).
//!
//! The program's thread pays one mutex push per command (no `clSetEventCallback`, no callback
//! on the runtime's thread, no pending table, no event release) and, per `clFinish`, a store and
//! a wake; the profiling queries, emits and releases all run on the harvest thread. Its rounds
//! take whole blocks of a FIFO: a completed part of a block waits until its block completes,
//! rather than being moved out command by command, and the last block, which the program's
//! pushes fill, is taken once full, once a `clFinish` made all of the FIFO known complete, or
//! once no push came since the previous round (taken while the program pushes, its next push
//! would allocate a new block).
//!
//! At exit (an `atexit` handler registered when the thread starts, after the runtime registered
//! its own, so it runs before them) the harvest thread is stopped: its round in progress puts
//! back what it has not reported yet and ends (`STOPPING`), and the stop itself reports, while
//! the runtime still answers, every command known complete or found complete by one last poll
//! (in-order and out-of-order). A program that exits right after its `clFinish` gets every
//! command with its device times; that reporting then runs on the exiting thread.
//!
//! Concurrency: commands are pushed at the back under `entries`; they leave from the front only
//! under `harvest`, held by one harvester at a time, so the events a harvester reads stay
//! retained while it reads them. Neither lock is held by anything the runtime calls back (the
//! layer's event callbacks never touch a FIFO), and `entries` is never held across a call into
//! the runtime: a runtime that runs callbacks inside a status query cannot deadlock the layer.
//! The program's thread takes neither `harvest` nor `ROUND`: a harvest in progress never
//! delays its `clFinish`.
//!
//! Out-of-order queues and queues the layer did not create have no FIFO: their commands are
//! polled one by one by the same thread (`enqueue::poll_unordered`). Queues with Codeplay
//! counters (read when each command starts and ends) keep the per-event callbacks
//! (`enqueue.rs`). Commands still in a FIFO or the unordered list when the trace ends are
//! reported as never completed, as the per-event path reports commands whose callback never
//! came. The harvest thread does not call the runtime after the stop; a `clFinish` of the
//! program's after it (in an exit handler registered before its first OpenCL call) reports what
//! it completed on the program's thread, the runtime having answered the program's own call.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Once, TryLockError};
use std::time::Duration;

use crate::api::next;
use crate::call::*;
use crate::enqueue::{Pending, complete};

/// The commands of one in-order queue whose device times have not been read yet.
#[derive(Default)]
pub(crate) struct Fifo {
    entries: Mutex<Entries>,
    /// Held by the one thread harvesting this queue (entries leave the FIFO only under it); the
    /// blocks the harvest took, reused.
    harvest: Mutex<Vec<Block>>,
    /// The program released the queue: the harvest thread forgets the FIFO once it is empty.
    released: AtomicBool,
    /// The commands pushed before this sequence number are known complete (a `clFinish` returned,
    /// a blocking command completed): the harvest takes them without a status query.
    known: AtomicU64,
    /// `pushed` at the harvest thread's previous round of this FIFO (unchanged: the program
    /// pushed nothing meanwhile).
    polled_at: AtomicU64,
}

impl std::fmt::Debug for Fifo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fifo").field("released", &self.released).finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Entries {
    commands: Blocks,
    /// Commands ever pushed: the front's sequence number is `pushed - commands.len()`.
    pushed: u64,
    /// Emptied blocks kept for the next pushes (at most [`SPARE_BLOCKS`]).
    spare: Vec<Block>,
}

/// The room of a FIFO's first block (a quarter of a millisecond of 1 µs kernels; about 36 KiB).
const BLOCK: usize = 256;
/// Emptied blocks a FIFO keeps for reuse (the rest is freed).
const SPARE_BLOCKS: usize = 4;
/// The largest block kept for reuse (commands; about 1.2 MiB): a FIFO that once held a very
/// long backlog does not keep its memory.
const MAX_SPARE: usize = 8192;

/// Commands in order, in the room allocated for the block (never grown: a full block gets a new
/// block after it).
type Block = VecDeque<Pending>;

/// A FIFO's commands, in blocks: a program that enqueues thousands of commands before it waits
/// (in these benchmarks the FIFO holds all of them until the program's `clFinish`) adds a block
/// as large as what the FIFO holds when the last one is full, so the blocks double as one
/// growing ring buffer would, and nothing they hold moves, where the ring buffer copied all of
/// it at each doubling (about 230 instructions per kernel at 3,000 kernels under callgrind,
/// `docs/overhead.md`). As many allocations as the ring buffer's growth: each allocation of this
/// size has malloc consolidate the small blocks the runtime freed meanwhile, so blocks of a
/// fixed small size cost more there than they saved. The harvest takes whole blocks.
#[derive(Default)]
struct Blocks {
    blocks: VecDeque<Block>,
    len: usize,
}

impl Blocks {
    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A spare block with room for `room` commands, else a new one with room for that many.
    #[cold]
    #[inline(never)]
    fn new_block(spare: &mut Vec<Block>, room: usize) -> Block {
        let room = room.max(BLOCK);
        match spare.iter().position(|b| b.capacity() >= room) {
            Some(i) => spare.swap_remove(i),
            None => VecDeque::with_capacity(room),
        }
    }

    #[inline]
    fn push_back(&mut self, p: Pending, spare: &mut Vec<Block>) {
        match self.blocks.back_mut() {
            Some(b) if b.len() < b.capacity() => b.push_back(p),
            _ => {
                let mut b = Self::new_block(spare, self.len);
                b.push_back(p);
                self.blocks.push_back(b);
            }
        }
        self.len += 1;
    }

    /// A command put back at the front (a harvest found it still running); a full first block
    /// gets a new block before it.
    fn push_front(&mut self, p: Pending, spare: &mut Vec<Block>) {
        match self.blocks.front_mut() {
            Some(b) if b.len() < b.capacity() => b.push_front(p),
            _ => {
                let mut b = Self::new_block(spare, BLOCK);
                b.push_front(p);
                self.blocks.push_front(b);
            }
        }
        self.len += 1;
    }

    fn back(&self) -> Option<&Pending> {
        self.blocks.back().and_then(|b| b.back())
    }

    /// The command at index `i` (a walk over the blocks, which are few: they double).
    fn get(&self, mut i: usize) -> Option<&Pending> {
        for b in &self.blocks {
            if i < b.len() {
                return b.get(i);
            }
            i -= b.len();
        }
        None
    }

    /// How many of the first `n` commands fill whole blocks at the front: blocks the program's
    /// pushes are done with (all but the last, and the last once full), unless `with_last`.
    fn whole_blocks(&self, n: usize, with_last: bool) -> usize {
        let mut whole = 0;
        for (i, b) in self.blocks.iter().enumerate() {
            if whole + b.len() > n || (!with_last && i + 1 == self.blocks.len() && b.len() < b.capacity()) {
                break;
            }
            whole += b.len();
        }
        whole
    }

    /// Moves the first `n` commands into `into`: whole blocks as they are, a part of a block
    /// command by command.
    fn take_front(&mut self, n: usize, into: &mut Vec<Block>, spare: &mut Vec<Block>) {
        let mut n = n.min(self.len);
        self.len -= n;
        while n > 0 {
            let Some(front) = self.blocks.front_mut() else { return };
            if front.len() <= n {
                n -= front.len();
                if let Some(b) = self.blocks.pop_front() {
                    into.push(b);
                }
            } else {
                let mut b = Self::new_block(spare, n);
                b.extend(front.drain(..n));
                into.push(b);
                n = 0;
            }
        }
        // A block left empty at the front (the FIFO taken whole) goes to the spares.
        if self.blocks.front().is_some_and(|b| b.is_empty())
            && let Some(b) = self.blocks.pop_front()
        {
            keep_spare(spare, b);
        }
    }

    fn drain_all(&mut self) -> impl Iterator<Item = Pending> + '_ {
        self.len = 0;
        self.blocks.drain(..).flatten()
    }
}

/// Keeps an emptied block for reuse: up to [`SPARE_BLOCKS`] of them, the largest (at most
/// [`MAX_SPARE`] commands each).
fn keep_spare(spare: &mut Vec<Block>, mut b: Block) {
    if b.capacity() > MAX_SPARE {
        return;
    }
    b.clear();
    if spare.len() < SPARE_BLOCKS {
        spare.push(b);
    } else if let Some(smallest) = spare.iter_mut().min_by_key(|s| s.capacity())
        && smallest.capacity() < b.capacity()
    {
        *smallest = b;
    }
}

/// Every FIFO of a live queue or with outstanding commands (the harvest thread's list).
static FIFOS: Mutex<Vec<Arc<Fifo>>> = Mutex::new(Vec::new());
/// Commands in all FIFOs (a hint for the harvest thread: Relaxed, the FIFOs' locks are the truth).
static OUTSTANDING: AtomicU64 = AtomicU64::new(0);
/// Set at exit: the harvest thread calls the runtime no more.
static STOPPED: AtomicBool = AtomicBool::new(false);
/// Set when the stop begins: the harvest thread's round puts back what it has not reported yet
/// and ends, so that the stop does not wait for a long batch (the stop reports it instead).
static STOPPING: AtomicBool = AtomicBool::new(false);
/// Held by the harvest thread during a round (`stop` waits for the round in progress).
static ROUND: Mutex<()> = Mutex::new(());
/// Set (under its mutex) by [`wake`]; the harvest thread waits on [`WAKE`] between rounds.
static WOKEN: Mutex<bool> = Mutex::new(false);
static WAKE: Condvar = Condvar::new();

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The FIFO of a new in-order queue.
pub(crate) fn fifo_for_new_queue() -> Arc<Fifo> {
    let f = Arc::new(Fifo::default());
    lock(&FIFOS).push(f.clone());
    f
}

/// `event`'s `CL_EVENT_COMMAND_EXECUTION_STATUS` (None when the runtime does not answer).
pub(crate) fn execution_status(event: usize) -> Option<i32> {
    let info = next().clGetEventInfo?;
    let mut status = 1i32;
    // SAFETY: an event the layer holds a reference of; a 4-byte out value.
    #[allow(unsafe_code)]
    let r = unsafe {
        info(event as *mut c_void, CL_EVENT_COMMAND_EXECUTION_STATUS, 4, (&raw mut status).cast(), ptr::null_mut())
    };
    (r == CL_SUCCESS).then_some(status)
}

/// Whether `event`'s command is final (`CL_EVENT_COMMAND_EXECUTION_STATUS` complete, or an
/// error).
pub(crate) fn terminal(event: usize) -> bool {
    execution_status(event).is_some_and(|s| s <= CL_COMPLETE)
}

impl Fifo {
    /// Files a command (its event retained by the layer); returns how many commands the queue
    /// has pushed with it (the sequence number after it).
    #[inline]
    pub(crate) fn push(&self, p: Pending) -> u64 {
        let pushed = {
            let mut guard = lock(&self.entries);
            let e = &mut *guard;
            e.commands.push_back(p, &mut e.spare);
            e.pushed += 1;
            e.pushed
        };
        OUTSTANDING.fetch_add(1, Ordering::Relaxed);
        start_harvest_thread();
        pushed
    }

    /// How many commands were pushed so far (taken before a `clFinish`).
    pub(crate) fn pushed(&self) -> u64 {
        lock(&self.entries).pushed
    }

    pub(crate) fn release(&self) {
        self.released.store(true, Ordering::Relaxed);
    }

    fn is_done(&self) -> bool {
        self.released.load(Ordering::Relaxed) && lock(&self.entries).commands.is_empty()
    }

    /// The commands pushed before sequence number `upto` are complete (a `clFinish` returned):
    /// noted for the harvest thread, which is woken to report them. The program's thread reads
    /// no profiling result and releases no event here.
    pub(crate) fn completed_upto(&self, upto: u64) {
        // Release: pairs with the harvest's Acquire load (the sequence number is all it carries;
        // the commands themselves are under `entries`).
        if self.known.fetch_max(upto, Ordering::Release) < upto {
            // Acquire: pairs with the stop's store.
            if STOPPED.load(Ordering::Acquire) {
                // The harvest thread is gone: a `clFinish` in an exit handler the program
                // registered before its first OpenCL call (it runs after the layer's stop). The
                // runtime answered the program's own call: reported here, as before the stop.
                self.harvest_upto(upto);
            } else {
                wake();
            }
        }
    }

    /// Reports the commands pushed before sequence number `upto`, known to be complete, on the
    /// calling thread (after the stop, and tests).
    pub(crate) fn harvest_upto(&self, upto: u64) {
        let mut batch = lock(&self.harvest);
        self.take(&mut batch, upto);
        self.report(&mut batch, false);
    }

    /// After a command that may have completed before its enqueue returned (a blocking copy):
    /// if it did (one status query), it and everything before it are known complete.
    pub(crate) fn harvest_if_complete(&self, event: usize, pushed: u64) {
        if terminal(event) {
            self.completed_upto(pushed);
        }
    }

    /// The stop's poll of this FIFO (tests): every complete command, a part of a block too.
    #[cfg(test)]
    pub(crate) fn poll(&self) -> usize {
        self.poll_round(false)
    }

    /// The harvest thread's poll of this FIFO (tests): whole blocks only.
    #[cfg(test)]
    pub(crate) fn poll_whole_blocks(&self) -> usize {
        self.poll_round(true)
    }

    /// Reports the completed prefix of the FIFO: what is known complete without asking, the rest
    /// found with a status query of its newest command, else a binary search (completion is
    /// monotone along an in-order queue; where threads pushed in another order than they
    /// enqueued, `report` puts back what is not complete). Skips the FIFO when another thread is
    /// harvesting it. `interruptible` (the harvest thread's rounds): takes whole blocks only
    /// (the last one once full, or once all is complete and known so or nothing was pushed
    /// since the previous round), and once the stop began puts back what it has not reported
    /// yet.
    /// Returns how many commands it found complete.
    fn poll_round(&self, interruptible: bool) -> usize {
        let mut batch = match self.harvest.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return 0,
        };
        // Acquire: pairs with `completed_upto`'s Release.
        let known = self.known.load(Ordering::Acquire);
        let (front, len, newest, pushed) = {
            let e = lock(&self.entries);
            let Some(newest) = e.commands.back() else { return 0 };
            (e.pushed - e.commands.len() as u64, e.commands.len(), newest.event, e.pushed)
        };
        // Relaxed: read and written under `harvest` only.
        let idle = self.polled_at.swap(pushed, Ordering::Relaxed) == pushed;
        let known_n = (known.saturating_sub(front) as usize).min(len);
        let complete = if known_n == len || terminal(newest) {
            len
        } else {
            // The first command not complete, in [lo, hi]; the newest is not.
            let (mut lo, mut hi) = (known_n, len - 1);
            while lo < hi {
                let mid = (lo + hi) / 2;
                // Under `harvest` the front does not move: index `mid` is the same command.
                let event = lock(&self.entries).commands.get(mid).map(|p| p.event);
                if event.is_some_and(terminal) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo
        };
        // The harvest thread takes whole blocks only: a part of a block would be moved command
        // by command into a block of its own (about 210 instructions a command under
        // callgrind), and a block completes soon after it is full. The last block, which the
        // program's pushes are filling, only once full, or when all is complete and nothing was
        // pushed since the previous round (taken while the program pushes, the next push needs
        // a new block: an allocation on the program's thread, with malloc's consolidation).
        // Known complete or not, the rest waits for a later round (or the stop, which takes
        // everything complete).
        // A `clFinish` that made all of it known complete is a pause of the program's pushes as
        // well: all of it is taken (what is left when the program exits right after it would be
        // reported on its thread, by the stop).
        let take = if interruptible {
            lock(&self.entries).commands.whole_blocks(complete, complete == len && (idle || known_n == len))
        } else {
            complete
        };
        if take > 0 {
            self.take(&mut batch, front + take as u64);
            self.report(&mut batch, interruptible);
        }
        complete
    }

    fn take(&self, batch: &mut Vec<Block>, upto: u64) {
        let mut guard = lock(&self.entries);
        let e = &mut *guard;
        let front = e.pushed - e.commands.len() as u64;
        let n = upto.saturating_sub(front) as usize;
        e.commands.take_front(n, batch, &mut e.spare);
    }

    /// Emits each command of `batch` with its device times and drops the layer's event
    /// reference. A command found not complete after all goes back to the front of the FIFO:
    /// commands pushed by several threads may sit in the FIFO in another order than the
    /// runtime's, so a prefix found by the binary search may hold one that is still running.
    /// `interruptible`: once the stop begins, what is not reported yet goes back too (the stop
    /// reports it).
    fn report(&self, batch: &mut Vec<Block>, interruptible: bool) {
        if batch.is_empty() {
            return;
        }
        let release = next().clReleaseEvent;
        let mut not_yet = Vec::new();
        let mut cached = crate::calibration::Cached::default();
        let mut interrupted = false;
        let mut reported = 0;
        for block in batch.iter_mut() {
            if interrupted {
                not_yet.extend(block.drain(..));
                continue;
            }
            // Read in place (a command is 140 bytes): only one found still running moves.
            let mut running = Vec::new();
            let mut reported_upto = block.len();
            for (i, p) in block.iter().enumerate() {
                // Relaxed: a hint; the stop takes `ROUND` before it reports what went back.
                if interruptible && STOPPING.load(Ordering::Relaxed) {
                    interrupted = true;
                    reported_upto = i;
                    break;
                }
                let event = p.event;
                if !complete(p, event as *mut c_void, CL_COMPLETE, None, &mut cached) {
                    running.push(i);
                    continue;
                }
                reported += 1;
                if let Some(release) = release {
                    // SAFETY: the FIFO held one reference of the event; the command leaves the
                    // FIFO here, and this is not inside a runtime callback.
                    #[allow(unsafe_code)]
                    unsafe {
                        release(event as *mut c_void)
                    };
                }
            }
            for (removed, &i) in running.iter().enumerate() {
                not_yet.extend(block.remove(i - removed));
            }
            if interrupted {
                not_yet.extend(block.drain(reported_upto - running.len()..));
            }
        }
        // Once per batch, not per command: the program's thread adds to the same counter at
        // every push.
        OUTSTANDING.fetch_sub(reported, Ordering::Relaxed);
        // Under `harvest`: nothing else takes from the front meanwhile.
        let mut guard = lock(&self.entries);
        let e = &mut *guard;
        for p in not_yet.into_iter().rev() {
            e.commands.push_front(p, &mut e.spare);
        }
        for b in batch.drain(..) {
            keep_spare(&mut e.spare, b);
        }
    }
}

/// Wakes the harvest thread for commands now known complete.
fn wake() {
    *lock(&WOKEN) = true;
    WAKE.notify_one();
}

/// After `clWaitForEvents` returned: the harvest thread polls the in-order queues now.
pub(crate) fn wake_harvest() {
    if OUTSTANDING.load(Ordering::Relaxed) != 0 {
        wake();
    }
}

/// On the harvest thread (`interruptible`) and at the stop: every in-order queue's completed
/// prefix. Returns how many commands it found complete.
fn poll_all(interruptible: bool) -> usize {
    if OUTSTANDING.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    let fifos: Vec<Arc<Fifo>> = lock(&FIFOS).clone();
    fifos.iter().map(|f| f.poll_round(interruptible)).sum()
}

#[cold]
pub(crate) fn start_harvest_thread() {
    static START: Once = Once::new();
    START.call_once(|| {
        let started = std::thread::Builder::new().name("offtrace-opencl".into()).spawn(|| {
            let _ = std::panic::catch_unwind(harvest_thread);
        });
        if started.is_ok() {
            // The thread stops calling the runtime before the runtime's own exit handlers and
            // destructors run: handlers registered later run earlier, and the runtime registered
            // its own when it was loaded, before the first command.
            // SAFETY: registers a plain `extern "C"` function that never unwinds.
            #[allow(unsafe_code)]
            unsafe {
                libc::atexit(stop_at_exit)
            };
        }
    });
}

extern "C" fn stop_at_exit() {
    let _ = std::panic::catch_unwind(stop_harvest_thread);
}

fn harvest_thread() {
    // 1 ms while commands complete; doubling up to 20 ms while none does (nothing outstanding,
    // or a command waiting long, e.g. behind a user event). Woken at once when the program
    // learns that commands completed (`clFinish`, `clWaitForEvents`, a blocking command).
    let mut sleep_ms = 1;
    loop {
        {
            let woken = lock(&WOKEN);
            let mut woken = if *woken {
                woken
            } else {
                WAKE.wait_timeout(woken, Duration::from_millis(sleep_ms)).map_or_else(|e| e.into_inner().0, |r| r.0)
            };
            *woken = false;
        }
        let _round = lock(&ROUND);
        // Acquire: pairs with `stop_harvest_thread`'s store, after which the runtime is not called.
        if STOPPED.load(Ordering::Acquire) {
            return;
        }
        let took = poll_all(true) + crate::enqueue::poll_unordered();
        sleep_ms = if took > 0 { 1 } else { (sleep_ms * 2).min(20) };
        lock(&FIFOS).retain(|f| !f.is_done());
    }
}

/// Stops the harvest thread: after this returns it calls the runtime no more. Its round in
/// progress ends at the next command it would report (`STOPPING`), or may be inside the runtime,
/// which at exit may not answer: waits for it at most 200 ms. In its place, a last poll of every
/// in-order queue (what a `clFinish` made known complete, and what a status query finds
/// complete) and of every out-of-order command (`enqueue.rs`), neither bounded as a round is:
/// this runs where the thread's next round would have, before the runtime's own exit handlers,
/// so that a program that exits right after its `clFinish` gets every command with its device
/// times.
fn stop_harvest_thread() {
    // Relaxed: a hint for the thread's round; `ROUND` orders what follows.
    STOPPING.store(true, Ordering::Relaxed);
    for _ in 0..200 {
        let round = match ROUND.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
        };
        // Acquire / Release: as the harvest thread's own check; set once, by the first stop.
        if !STOPPED.swap(true, Ordering::AcqRel) {
            let _ = poll_all(false);
            crate::enqueue::poll_unordered_at_stop();
        }
        drop(round);
        return;
    }
    STOPPED.store(true, Ordering::Release);
}

/// At exit: stops the harvest thread (waiting a bounded time for its round in progress) and
/// returns every command still outstanding, to be reported as never completed.
pub(crate) fn stop() -> Vec<Pending> {
    stop_harvest_thread();
    let fifos = std::mem::take(&mut *lock(&FIFOS));
    let mut left = Vec::new();
    for f in fifos {
        left.extend(lock(&f.entries).commands.drain_all());
    }
    OUTSTANDING.store(0, Ordering::Relaxed);
    left
}

/// Commands in this FIFO (tests).
#[cfg(test)]
pub(crate) fn fifo_len(f: &Fifo) -> usize {
    lock(&f.entries).commands.len()
}

/// Commands waiting in in-order FIFOs (tests).
pub(crate) fn outstanding() -> u64 {
    OUTSTANDING.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(b: &Blocks) -> Vec<usize> {
        (0..b.len()).map(|i| b.get(i).map_or(0, |p| p.event)).collect()
    }

    fn taken(batch: &[Block]) -> Vec<usize> {
        batch.iter().flatten().map(|p| p.event).collect()
    }

    /// The blocks hold the commands in order through pushes, partial and whole takes and
    /// commands put back at the front: every index answers the command a single ring buffer
    /// would, and no block grows past the room it was allocated with.
    #[test]
    fn blocks_keep_the_order_of_one_fifo_across_takes_and_put_backs() {
        let (mut b, mut spare, mut batch) = (Blocks::default(), Vec::new(), Vec::new());
        let mut model = std::collections::VecDeque::new();
        let mut next = 1;
        let mut push = |b: &mut Blocks, spare: &mut Vec<Block>, model: &mut VecDeque<usize>, n: usize| {
            for _ in 0..n {
                b.push_back(Pending::for_test(next), spare);
                model.push_back(next);
                next += 1;
            }
        };
        push(&mut b, &mut spare, &mut model, 2 * BLOCK + 10);
        // 256, 256 (as large as what the FIFO held), 512: the blocks double.
        assert_eq!(b.blocks.len(), 3);
        assert!(b.blocks.get(2).is_some_and(|blk| blk.capacity() >= 2 * BLOCK));
        assert_eq!(events(&b), Vec::from(model.clone()));
        assert_eq!(b.back().map(|p| p.event), model.back().copied());
        assert!(b.get(b.len()).is_none());

        // Part of the first block, then the rest of it and a whole block, then the rest.
        for n in [7, BLOCK - 7 + BLOCK, 10] {
            b.take_front(n, &mut batch, &mut spare);
            let expect: Vec<usize> = model.drain(..n).collect();
            assert_eq!(taken(&batch), expect);
            assert_eq!(events(&b), Vec::from(model.clone()));
            for blk in batch.drain(..) {
                keep_spare(&mut spare, blk);
            }
        }
        assert!(b.is_empty() && b.blocks.is_empty(), "a FIFO taken whole keeps no block");
        assert!(spare.len() <= SPARE_BLOCKS && spare.iter().all(|s| s.is_empty()));

        // Pushes after a partial take, and commands put back in front of a full first block.
        push(&mut b, &mut spare, &mut model, BLOCK + 3);
        b.take_front(3, &mut batch, &mut spare);
        let back: Vec<usize> = model.drain(..3).collect();
        for e in back.iter().rev() {
            b.push_front(Pending::for_test(*e), &mut spare);
            model.push_front(*e);
        }
        batch.clear();
        assert_eq!(events(&b), Vec::from(model.clone()));
        // The first block filled, two commands put back in front of it: a new first block.
        if b.blocks.len() == 1 {
            let room = b.blocks.front().map_or(0, |f| f.capacity() - f.len());
            push(&mut b, &mut spare, &mut model, room);
        }
        assert!(b.blocks.front().is_some_and(|f| f.len() == f.capacity()));
        let blocks = b.blocks.len();
        for e in [90_001, 90_002].into_iter().rev() {
            b.push_front(Pending::for_test(e), &mut spare);
            model.push_front(e);
        }
        assert_eq!(b.blocks.len(), blocks + 1);
        assert_eq!(events(&b), Vec::from(model.clone()));
        let rooms: Vec<usize> = b.blocks.iter().map(|blk| blk.capacity()).collect();
        push(&mut b, &mut spare, &mut model, 2 * BLOCK);
        assert_eq!(events(&b), Vec::from(model.clone()));
        for (blk, room) in b.blocks.iter().zip(&rooms) {
            assert_eq!(blk.capacity(), *room, "a block kept its room");
        }
        assert!(b.blocks.len() <= rooms.len() + 2, "{} blocks for {} commands", b.blocks.len(), b.len());
        let all: Vec<usize> = b.drain_all().map(|p| p.event).collect();
        assert_eq!(all, Vec::from(model));
        assert_eq!(b.len(), 0);
    }

    /// The harvest's path through a FIFO of several blocks: `take` by sequence number, a
    /// command found still running put back at the front in its place.
    #[test]
    fn a_fifo_of_several_blocks_is_taken_by_sequence_number() {
        let fifo = Fifo::default();
        for e in 1..=(3 * BLOCK + 5) {
            let _ = fifo.push(Pending::for_test(e));
        }
        assert_eq!(fifo.pushed(), (3 * BLOCK + 5) as u64);
        let mut batch = Vec::new();
        fifo.take(&mut batch, (BLOCK + 1) as u64);
        assert_eq!(taken(&batch), (1..=BLOCK + 1).collect::<Vec<_>>());
        assert_eq!(fifo_len(&fifo), 2 * BLOCK + 4);
        batch.clear();
        fifo.take(&mut batch, u64::MAX);
        assert_eq!(taken(&batch), (BLOCK + 2..=3 * BLOCK + 5).collect::<Vec<_>>());
        assert_eq!(fifo_len(&fifo), 0);
        // Not reported: the events are not real (the tests' runtime is not loaded).
        batch.clear();
        OUTSTANDING.fetch_sub((3 * BLOCK + 5) as u64, Ordering::Relaxed);
    }
}
