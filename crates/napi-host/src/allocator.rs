//! The addon's allocator: mimalloc, tuned to give memory back as soon as it is free.
//!
//! A write-tool call allocates and frees buffers of a file's size, which glibc's bins merge and
//! split again on every call; mimalloc does not (see `docs/benchmarks.md`). With its default
//! options, though, a message's re-check, which reads its files on several threads, left about
//! twice the memory it read resident in the process (40 MiB for 18.8 MiB of files, against
//! 21 MiB with glibc): pages freed on one thread stayed committed in another's heap and arenas
//! were committed whole. So freed pages are purged at once and arenas are committed as they are
//! used; that re-check then adds about 2 MiB (`benches/store-memory.mjs`).
//!
//! Node's own allocations are not affected: this is the allocator of the addon's Rust code.

use std::os::raw::{c_int, c_long};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

// The C library the `mimalloc` crate builds and links (mimalloc 3, by `libmimalloc-sys`
// 0.1.49, pinned by `Cargo.lock`).
unsafe extern "C" {
    fn mi_option_set(option: c_int, value: c_long);
    #[cfg(test)]
    fn mi_option_get(option: c_int) -> c_long;
}

/// `mi_option_arena_eager_commit` in mimalloc 3's `mi_option_t` (its `mimalloc.h`; default 2:
/// commit a new arena whole where the system overcommits).
const ARENA_EAGER_COMMIT: c_int = 4;
/// `mi_option_purge_delay` (default 10 ms; 0: purge freed pages at once).
const PURGE_DELAY: c_int = 15;

/// The options [`tune`] sets, and their values.
const TUNED: [(c_int, c_long); 2] = [(ARENA_EAGER_COMMIT, 0), (PURGE_DELAY, 0)];

/// Sets the options above; run once when the addon is loaded.
fn tune() {
    for (option, value) in TUNED {
        // SAFETY: `mi_option_set` takes any option number and value; an option number it does
        // not know is ignored. The numbers are those of the linked mimalloc's `mimalloc.h`
        // (the memory bench shows their effect).
        unsafe { mi_option_set(option, value) };
    }
}

#[napi_derive::module_init]
fn init() {
    tune();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_options_are_set_when_the_library_is_loaded() {
        // `module_init` runs when any binary linking this crate is loaded, this test's too.
        for (n, value) in TUNED {
            // SAFETY: a plain read of mimalloc's option table.
            let now = unsafe { mi_option_get(n) };
            assert_eq!(now, value, "mimalloc option {n} not set at load");
        }
    }
}
