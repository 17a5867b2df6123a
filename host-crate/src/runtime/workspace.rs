//! Workspaces kept for reuse, by key: the buffers a family's call needs (a reduction's partials,
//! ticket and result slot), made on first use and handed to one caller at a time.
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Free workspaces, a list per key. The lock guards the lists only: a caller takes a workspace
/// out, uses it with no lock held, and puts it back. So a call that needs a workspace while it
/// uses another (of the same key or not) never waits for itself, and concurrent callers of one
/// key each get their own workspace (a second one is made when the first is out), never each
/// other's.
pub(crate) struct WorkspacePool<K, W> {
    free: Mutex<HashMap<K, Vec<W>>>,
}

impl<K, W> Default for WorkspacePool<K, W> {
    fn default() -> Self {
        Self {
            free: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq, W> WorkspacePool<K, W> {
    /// The lists. A panic while the lock is held (in `HashMap` itself, or an allocation
    /// failure) leaves them consistent, so a poisoned lock is taken as it is.
    fn lists(&self) -> MutexGuard<'_, HashMap<K, Vec<W>>> {
        self.free.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` with a free workspace of `key`, or with a new one from `make` when none is
    /// free, and puts it back afterwards, whatever `f` returned: a workspace must stay usable
    /// after a failed call (reset itself on its next use where the failure may have left it
    /// dirty). If `f` panics, the workspace is dropped instead of being put back.
    pub(crate) fn with<R, E>(
        &self,
        key: K,
        make: impl FnOnce() -> Result<W, E>,
        f: impl FnOnce(&mut W) -> Result<R, E>,
    ) -> Result<R, E> {
        let taken = self.lists().get_mut(&key).and_then(Vec::pop);
        let mut workspace = match taken {
            Some(workspace) => workspace,
            None => make()?,
        };
        let outcome = f(&mut workspace);
        self.lists().entry(key).or_default().push(workspace);
        outcome
    }

    /// Free workspaces of `key` now.
    #[cfg(test)]
    fn free(&self, key: &K) -> usize {
        self.lists().get(key).map_or(0, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};
    use std::time::Duration;

    use super::WorkspacePool;

    /// Runs `f` on another thread and fails if it has not returned within ten seconds: a
    /// deadlock shows as a failure, not as a test run that never ends.
    fn within_time<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = send.send(std::thread::spawn(f).join());
        });
        match receive.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(value)) => value,
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(_) => panic!("did not return within 10 s: deadlocked"),
        }
    }

    /// A workspace that counts how many were made and how many dropped.
    struct Counted {
        id: usize,
        dropped: Arc<AtomicUsize>,
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            self.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }

    struct Fixture {
        pool: WorkspacePool<&'static str, Counted>,
        made: AtomicUsize,
        dropped: Arc<AtomicUsize>,
    }

    impl Fixture {
        fn new() -> Arc<Self> {
            Arc::new(Self {
                pool: WorkspacePool::default(),
                made: AtomicUsize::new(0),
                dropped: Arc::new(AtomicUsize::new(0)),
            })
        }

        fn make(&self) -> Result<Counted, String> {
            Ok(Counted {
                id: self.made.fetch_add(1, Ordering::SeqCst),
                dropped: self.dropped.clone(),
            })
        }

        fn made(&self) -> usize {
            self.made.load(Ordering::SeqCst)
        }
    }

    #[test]
    fn sequential_calls_reuse_one_workspace_even_after_a_failure() {
        let fx = Fixture::new();
        for round in 0..3 {
            let id = fx.pool.with("sum", || fx.make(), |w| Ok::<_, String>(w.id));
            assert_eq!(id, Ok(0), "round {round}");
        }
        let failed = fx.pool.with(
            "sum",
            || fx.make(),
            |_| Err::<(), _>("kernel failed".to_string()),
        );
        assert_eq!(failed, Err("kernel failed".to_string()));
        assert_eq!(
            fx.pool.free(&"sum"),
            1,
            "a failed call puts its workspace back"
        );
        let id = fx.pool.with("sum", || fx.make(), |w| Ok::<_, String>(w.id));
        assert_eq!((id, fx.made()), (Ok(0), 1));
    }

    #[test]
    fn a_failed_make_is_reported_and_leaves_the_pool_usable() {
        let fx = Fixture::new();
        let failed = fx.pool.with(
            "sum",
            || Err::<Counted, _>("out of memory".to_string()),
            |_| Ok(()),
        );
        assert_eq!(failed, Err("out of memory".to_string()));
        assert_eq!(fx.pool.free(&"sum"), 0);
        assert_eq!(fx.pool.with("sum", || fx.make(), |w| Ok(w.id)), Ok(0));
    }

    #[test]
    fn a_nested_call_of_the_same_key_gets_a_second_workspace_instead_of_deadlocking() {
        let fx = Fixture::new();
        let ids = within_time({
            let fx = fx.clone();
            move || {
                fx.pool.with(
                    "sum",
                    || fx.make(),
                    |outer| {
                        let inner = fx.pool.with("sum", || fx.make(), |inner| Ok(inner.id))?;
                        // Another key inside, as a cooperative launch inside a reduction.
                        let other = fx.pool.with("barrier", || fx.make(), |w| Ok(w.id))?;
                        Ok::<_, String>((outer.id, inner, other))
                    },
                )
            }
        });
        assert_eq!(ids, Ok((0, 1, 2)));
        assert_eq!((fx.pool.free(&"sum"), fx.pool.free(&"barrier")), (2, 1));
    }

    #[test]
    fn two_threads_use_one_key_at_the_same_time_with_separate_workspaces() {
        let fx = Fixture::new();
        // Both threads must be inside `f` at once to pass the barrier: with one lock held
        // while `f` runs, the second would wait for the first forever.
        let both_inside = Arc::new(Barrier::new(2));
        let ids = within_time({
            let fx = fx.clone();
            move || {
                let threads: Vec<_> = (0..2)
                    .map(|_| {
                        let (fx, both_inside) = (fx.clone(), both_inside.clone());
                        std::thread::spawn(move || {
                            fx.pool.with(
                                "sum",
                                || fx.make(),
                                |w| {
                                    both_inside.wait();
                                    Ok::<_, String>(w.id)
                                },
                            )
                        })
                    })
                    .collect();
                let mut ids: Vec<usize> = threads
                    .into_iter()
                    .map(|t| t.join().unwrap().unwrap())
                    .collect();
                ids.sort();
                ids
            }
        });
        assert_eq!(ids, [0, 1], "each thread had its own workspace");
        assert_eq!(fx.pool.free(&"sum"), 2);
    }

    #[test]
    fn a_panic_in_f_drops_its_workspace_and_poisons_nothing() {
        let fx = Fixture::new();
        fx.pool
            .with("sum", || fx.make(), |_| Ok::<_, String>(()))
            .unwrap();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            fx.pool.with(
                "sum",
                || fx.make(),
                |_| -> Result<(), String> { panic!("in f") },
            )
        }));
        assert!(caught.is_err());
        assert_eq!(
            fx.dropped.load(Ordering::SeqCst),
            1,
            "the workspace was dropped"
        );
        assert_eq!(fx.pool.free(&"sum"), 0, "and not put back");
        let id = within_time({
            let fx = fx.clone();
            move || fx.pool.with("sum", || fx.make(), |w| Ok::<_, String>(w.id))
        });
        assert_eq!(id, Ok(1), "the next call makes a new one");
    }
}
