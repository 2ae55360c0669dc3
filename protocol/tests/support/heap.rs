//! Heap held by the running thread, counted by a global allocator that hands every call to the
//! system's: how the randomized tests and the fuzz targets bound a parser's memory by what it
//! was given. A file that includes this declares the allocator itself:
//! `#[global_allocator] static ALLOCATOR: heap::Counting = heap::Counting;`. Counted per thread,
//! so that the tests of one file, run in parallel, each measure their own.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn note_alloc(size: usize) {
    let _ = LIVE.try_with(|live| {
        live.set(live.get() + size);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(live.get())));
    });
}

fn note_free(size: usize) {
    // A block freed by another thread than its own makes a count run low: saturate.
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(size)));
}

/// The system allocator, counting per thread.
pub struct Counting;

// SAFETY: every call is passed to `System` unchanged; the counters only observe the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_alloc(layout.size());
        // SAFETY: the caller's contract for `alloc` is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note_free(layout.size());
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_alloc(new_size);
        note_free(layout.size());
        // SAFETY: the caller's contract for `realloc` is `System.realloc`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// What `run` returns, and the most heap this thread held at once while it ran (beyond what
/// it held before).
pub fn measured<T>(run: impl FnOnce() -> T) -> (T, usize) {
    let before = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(before));
    let value = run();
    (value, PEAK.with(Cell::get) - before)
}
