//! `per-call` requests: a fresh kernel for the request, ended after it (a cell asking for
//! a reset gets another), each kept in the pool's
//! [`PerCalls`](crate::session::per_calls::PerCalls) while it runs.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use crate::error::{KernelError, Result};
use crate::eval::executor::{Cell, EvalOptions, EvalResult, Evaluation};
use crate::kernel::AbortHandle;
use crate::session::inner::PoolInner;
use crate::session::per_calls::Running;
use crate::session::pooled::PooledKernel;
use crate::session::request_end::{reset_failed, stopped, until_deadline};
use crate::session::site::Site;
use crate::wire::events::KernelEvent;

/// A request's entry in [`PerCalls`], removed when it is dropped.
struct Entry<K: PooledKernel> {
    pool: Arc<PoolInner<K>>,
    id: u64,
}

impl<K: PooledKernel> Entry<K> {
    fn new(pool: &Arc<PoolInner<K>>, abort: Arc<AbortHandle>) -> Self {
        let calls = &pool.per_calls;
        let id = calls.next.fetch_add(1, Ordering::SeqCst);
        calls.running.lock().unwrap().insert(
            id,
            Running {
                abort,
                kernel: None,
            },
        );
        Entry {
            pool: pool.clone(),
            id,
        }
    }

    fn set_kernel(&self, kernel: Option<Arc<K>>) {
        if let Some(running) = self
            .pool
            .per_calls
            .running
            .lock()
            .unwrap()
            .get_mut(&self.id)
        {
            running.kernel = kernel;
        }
    }
}

impl<K: PooledKernel> Drop for Entry<K> {
    fn drop(&mut self) {
        let calls = &self.pool.per_calls;
        calls.running.lock().unwrap().remove(&self.id);
        calls.ended.notify_waiters();
    }
}

/// A `per-call` request: a fresh kernel, shut down after; a cell asking for a reset gets
/// another. Disposal of the pool stops it: one stopped before its first cell ran fails
/// with [`KernelError::PoolDisposed`].
pub(super) async fn run_per_call<K: PooledKernel>(
    pool: &Arc<PoolInner<K>>,
    site: Site,
    cells: Vec<Cell>,
    options: EvalOptions,
    deadline: Option<tokio::time::Instant>,
    on_event: &mut (impl FnMut(usize, KernelEvent) + Send),
) -> Result<EvalResult> {
    let abort = options.abort.clone().unwrap_or_default();
    let entry = Entry::new(pool, abort.clone());
    // Checked once entered: a disposal that began before either found it or is seen here.
    let disposed = || pool.disposing.load(Ordering::SeqCst);
    if disposed() {
        return Err(KernelError::PoolDisposed);
    }
    let mut evaluation = Evaluation::new(cells, options);
    // Placed once: a cell's reset runs on the same launcher.
    let Some((config, mut load)) = pool.placed(&Mutex::new(site), &abort).await? else {
        if disposed() {
            return Err(KernelError::PoolDisposed);
        }
        return Ok(stopped(evaluation, super::room::Stopped::WaitingForRoom));
    };
    let config = until_deadline(&config, deadline);
    let mut first = true;
    loop {
        let started = match pool.new_kernel(&config, None, &abort, load.take()).await {
            Ok(started) => started,
            Err(err) if !first => return Ok(reset_failed(evaluation, err, deadline)),
            Err(err) => return Err(err),
        };
        first = false;
        let live = match started {
            Ok(live) => live,
            Err(_) if disposed() && evaluation.nothing_started() => {
                return Err(KernelError::PoolDisposed)
            }
            Err(why) => return Ok(stopped(evaluation, why)),
        };
        entry.set_kernel(Some(live.kernel.clone()));
        let turn = live.kernel.queue().turn().await;
        let ran = evaluation.run(&*live.kernel, &turn, &mut *on_event).await;
        drop(turn);
        entry.set_kernel(None);
        pool.end(live).await;
        pool.refill_spares();
        ran?;
        if !evaluation.reset_due() {
            return Ok(evaluation.finish());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::{sleep, Instant};

    use crate::session::config::PoolMode;
    use crate::session::fake::{fake_pool, request, run};
    use crate::session::pooled::PooledKernel;

    fn per_call(id: &str, code: &str) -> crate::session::config::PoolRequest {
        let mut request = request(id, code);
        request.mode = Some(PoolMode::PerCall);
        request
    }

    #[tokio::test(start_paused = true)]
    async fn a_per_call_request_in_a_session_pool_runs_in_a_kernel_of_its_own() {
        let (pool, fakes) = fake_pool(|_| {});
        run(&pool, "a", "1").await.unwrap(); // the session's kernel, 1000
        for code in ["x", "y"] {
            let r = pool
                .admit(per_call("a", code))
                .unwrap()
                .run(|_, _| {})
                .await;
            assert_eq!(r.unwrap().exit_code, Some(0));
        }
        assert_eq!(fakes.ran("x"), [1001]);
        assert_eq!(fakes.ran("y"), [1002]);
        assert_eq!(fakes.shut_down(), [1001, 1002], "each ended after its call");
        assert_eq!(pool.sessions().len(), 1, "no session of its own");
        assert_eq!(pool.sessions()[0].pid, Some(1000));
        run(&pool, "a", "2").await.unwrap();
        assert_eq!(fakes.ran("2"), [1000], "the session's kernel is untouched");
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_request_in_a_per_call_pool_keeps_its_kernel() {
        let (pool, fakes) = fake_pool(|c| c.mode = PoolMode::PerCall);
        for code in ["1", "2"] {
            let mut r = request("s", code);
            r.mode = Some(PoolMode::Session);
            pool.admit(r).unwrap().run(|_, _| {}).await.unwrap();
        }
        run(&pool, "s", "3").await.unwrap();
        assert_eq!(fakes.ran("1"), [1000]);
        assert_eq!(fakes.ran("2"), [1000]);
        assert_eq!(
            fakes.ran("3"),
            [1001],
            "the pool's own mode: a fresh kernel"
        );
        assert_eq!(fakes.shut_down(), [1001]);
    }

    #[tokio::test(start_paused = true)]
    async fn per_call_kernels_count_against_the_pools_cap() {
        let (pool, fakes) = fake_pool(|c| {
            c.max_sessions = 2;
            c.acquire_timeout = Duration::from_secs(60);
        });
        let busy = tokio::spawn(pool.admit(request("a", "sleep 5")).unwrap().run(|_, _| {}));
        let one = tokio::spawn(pool.admit(per_call("p", "sleep 5")).unwrap().run(|_, _| {}));
        sleep(Duration::from_secs(1)).await;
        let asked = Instant::now();
        let two = pool.admit(per_call("q", "z")).unwrap().run(|_, _| {}).await;
        assert_eq!(two.unwrap().exit_code, Some(0));
        assert_eq!(asked.elapsed(), Duration::from_secs(4), "waited for room");
        assert_eq!(fakes.ran("z"), [1002]);
        busy.await.unwrap().unwrap();
        one.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_per_call_request_aborted_while_its_kernel_starts_is_cancelled_and_its_kernel_ended()
    {
        let (pool, fakes) = fake_pool(|c| c.mode = PoolMode::PerCall);
        fakes.set_start_delay(Duration::from_secs(5));
        let mut slow = request("a", "1");
        let abort = crate::kernel::AbortHandle::new();
        slow.abort = Some(abort.clone());
        let running = tokio::spawn(pool.admit(slow).unwrap().run(|_, _| {}));
        sleep(Duration::from_secs(1)).await;
        abort.abort();
        let r = running.await.unwrap().unwrap();
        assert!(r.cancelled && !r.timed_out);
        assert_eq!(r.exit_code, None);
        assert_eq!(
            r.annotations,
            ["Cancelled while its kernel was starting; nothing ran."]
        );
        assert_eq!(
            r.output,
            "[Cancelled while its kernel was starting; nothing ran.]\n"
        );
        assert!(fakes.ran("1").is_empty());
        assert_eq!(fakes.shut_down(), [1000], "ended once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_per_call_request_whose_deadline_passed_before_it_started_times_out() {
        let (pool, fakes) = fake_pool(|c| c.mode = PoolMode::PerCall);
        fakes.set_spawn_delay(Duration::from_millis(1));
        let mut late = request("a", "1");
        late.deadline = Some(Duration::ZERO);
        let r = pool.admit(late).unwrap().run(|_, _| {}).await.unwrap();
        assert!(r.timed_out && r.cancelled);
        assert_eq!(r.exit_code, None);
        assert!(!r.output.contains("(no output)"), "{}", r.output);
        assert!(
            r.annotations
                .last()
                .unwrap()
                .starts_with("Command timed out after 0 ms (the request's deadline) before its first cell started"),
            "{:?}",
            r.annotations
        );
        assert!(fakes.ran("1").is_empty());
        assert!(fakes.shut_down().len() <= 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_per_call_kernel_whose_deadline_passes_during_its_cell_is_shut_down_once() {
        let (pool, fakes) = fake_pool(|c| c.mode = PoolMode::PerCall);
        let mut slow = request("a", "sleep 10");
        slow.deadline = Some(Duration::from_secs(2));
        let r = pool.admit(slow).unwrap().run(|_, _| {}).await.unwrap();
        assert!(r.timed_out && r.cancelled);
        assert_eq!(r.exit_code, None);
        assert_eq!(
            r.annotations,
            ["Command timed out after 2 s (the request's deadline) during cell 1; the kernel was interrupted and later cells did not run."]
        );
        assert_eq!(fakes.shut_down(), [1000]);
        assert!(!fakes.kernel(1000).alive());
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_that_passes_while_a_reset_cells_kernel_starts_is_told_once() {
        let (pool, fakes) = fake_pool(|c| c.mode = PoolMode::PerCall);
        fakes.set_start_delay(Duration::from_secs(2));
        let mut two = request("a", "1");
        two.cells.push(crate::eval::executor::Cell {
            code: "2".into(),
            reset: true,
            ..Default::default()
        });
        two.deadline = Some(Duration::from_secs(3));
        let r = pool.admit(two).unwrap().run(|_, _| {}).await.unwrap();
        assert!(r.timed_out && r.cancelled);
        assert_eq!(
            r.annotations,
            ["Command timed out after 3 s (the request's deadline) before its next cell started; that cell and later ones did not run."]
        );
        assert!(r.output.contains("ran 1"), "{}", r.output);
        assert!(!r.output.contains("Cancelled"), "{}", r.output);
        assert!(fakes.ran("2").is_empty());
        assert_eq!(fakes.shut_down(), [1000, 1001], "each kernel ended once");
    }

    #[tokio::test(start_paused = true)]
    async fn dispose_all_stops_a_running_per_call_request_and_ends_its_kernel() {
        let (pool, fakes) = fake_pool(|c| c.mode = PoolMode::PerCall);
        let running = tokio::spawn(pool.admit(request("a", "sleep 60")).unwrap().run(|_, _| {}));
        sleep(Duration::from_secs(1)).await;
        pool.dispose_all(Duration::from_secs(3)).await;
        assert!(!fakes.kernel(1000).alive(), "ended by the disposal");
        let r = running.await.unwrap().unwrap();
        assert!(r.cancelled);
        assert_eq!(r.exit_code, None);
        let err = run(&pool, "b", "1").await.unwrap_err();
        assert_eq!(err.code(), "ERR_POOL_DISPOSED");
    }
}
