//! Independent work over many items, split across the cores: what a first catalog (or a large
//! change) prepares on the way to ready.

/// `work` of consecutive chunks of `items`, one chunk per core when each would hold at least
/// `per_thread` items (otherwise one chunk, on this thread): its results in the order of the
/// chunks. `work` keeps what it needs from one item to the next (a compressor, a buffer).
pub(crate) fn in_chunks<T: Sync, R: Send>(items: &[T], per_thread: usize, work: impl Fn(&[T]) -> R + Sync) -> Vec<R> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let threads = cores.min(items.len() / per_thread.max(1)).max(1);
    if threads == 1 {
        return vec![work(items)];
    }
    let work = &work;
    std::thread::scope(|scope| {
        let mut chunks = items.chunks(items.len().div_ceil(threads));
        let first = chunks.next().unwrap_or_default();
        let others: Vec<_> = chunks.map(|items| scope.spawn(move || work(items))).collect();
        let mut results = Vec::with_capacity(threads);
        results.push(work(first));
        results.extend(
            others.into_iter().map(|other| other.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))),
        );
        results
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_keep_the_order_of_the_items() {
        let items: Vec<usize> = (0..1000).collect();
        for per_thread in [1, 7, 300, 999, 1000, 5000] {
            let chunks = in_chunks(&items, per_thread, |chunk| chunk.to_vec());
            assert_eq!(chunks.concat(), items, "{per_thread}");
            let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
            assert_eq!(chunks.len(), cores.min(1000 / per_thread).max(1), "{per_thread}");
        }
        assert_eq!(in_chunks(&[] as &[u8], 1, <[u8]>::len), vec![0]);
    }
}
