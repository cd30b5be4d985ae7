//! How many threads a job over many items is split into.

use std::sync::OnceLock;

/// Threads for `items` items: one per `per_thread` items, at most `max`
/// and the CPUs this process may use, at least one. A job too small to
/// split never asks for the CPUs, and they are asked once per process:
/// std's `available_parallelism` reads the cgroup's quota files on every
/// call (about a dozen system calls).
pub fn for_items(items: usize, per_thread: usize, max: usize) -> usize {
    let wanted = items / per_thread.max(1);
    if wanted <= 1 {
        return 1;
    }
    wanted.min(max).min(cpus()).max(1)
}

/// The CPUs this process may use (1 when that cannot be told).
fn cpus() -> usize {
    static CPUS: OnceLock<usize> = OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_gets_a_thread_per_share_within_the_cap_and_the_cpus() {
        assert_eq!(for_items(0, 256, 4), 1);
        assert_eq!(for_items(511, 256, 4), 1);
        assert_eq!(for_items(512, 256, 4), 2.min(cpus()));
        assert_eq!(for_items(1 << 20, 256, 4), 4.min(cpus()));
        assert_eq!(for_items(1 << 20, 256, 1), 1);
        assert_eq!(for_items(10, 0, 4), 4.min(cpus()));
    }
}
