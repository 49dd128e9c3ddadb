//! The header timeout: a connection on which nothing happens for a while (no request head
//! arrives, no answer is in flight, none ends) is closed. It bounds how long a client may take to
//! send a request head, since a client that sends a byte now and then holds its connection no
//! longer than one that sends nothing, and how long a kept-alive connection may sit idle between
//! requests.
//!
//! hyper has the same limit (`header_read_timeout`), but arms a timer for every request head: a
//! boxed sleep, put in the runtime's timer wheel and taken out again, which took a tenth of a
//! 304's instructions and one of its allocations (docs/BENCHMARKS.md). Here each connection has
//! one timer, which wakes once per period and reads two counters its requests move ([`Activity`]):
//! a connection goes between one and two periods without a head or an answer before it is closed.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, Wake, Waker, ready};
use std::time::Duration;

use futures_util::task::AtomicWaker;
use hyper::body::{Body, Frame, SizeHint};
use hyper::http::{Request, Response};
use tokio::time::Sleep;

/// What a connection's requests have done: heads received, answers ended.
#[derive(Default)]
pub(super) struct Activity {
    heads: AtomicU64,
    answered: AtomicU64,
}

impl Activity {
    /// Whether nothing was done since the last check, which saw `seen` (updated), and no answer is
    /// in flight.
    fn idle_since(&self, seen: &mut (u64, u64)) -> bool {
        let now = (self.heads.load(Ordering::Relaxed), self.answered.load(Ordering::Relaxed));
        let idle = now == *seen && now.0 == now.1;
        *seen = now;
        idle
    }
}

pin_project_lite::pin_project! {
    /// A connection that is closed (dropped) once its [`Activity`], checked every period, has done
    /// nothing between two checks and has no answer in flight: between one and two periods after
    /// it fell idle, or after it opened if no head ever arrives. Its output is the connection's,
    /// `None` if it was closed idle.
    ///
    /// The timer is polled only when it rang (its own waker, the [`Alarm`], says so), not every
    /// time the connection is woken, which cost a 304 420 instructions (docs/BENCHMARKS.md).
    pub(super) struct UntilIdle<C> {
        #[pin]
        connection: C,
        #[pin]
        timer: Sleep,
        alarm: Arc<Alarm>,
        alarm_waker: Waker,
        activity: Arc<Activity>,
        seen: (u64, u64),
        period: Duration,
    }
}

impl<C> UntilIdle<C> {
    pub(super) fn new(connection: C, activity: Arc<Activity>, period: Duration) -> Self {
        // Rung to start with: the first poll arms the timer.
        let alarm = Arc::new(Alarm { rang: AtomicBool::new(true), task: AtomicWaker::new() });
        UntilIdle {
            connection,
            timer: tokio::time::sleep(period),
            alarm_waker: Waker::from(Arc::clone(&alarm)),
            alarm,
            activity,
            seen: (0, 0),
            period,
        }
    }
}

impl<C: Future> Future for UntilIdle<C> {
    type Output = Option<C::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        this.alarm.task.register(cx.waker());
        if let Poll::Ready(output) = this.connection.poll(cx) {
            return Poll::Ready(Some(output));
        }
        if this.alarm.rang.swap(false, Ordering::Acquire) {
            let mut alarm = Context::from_waker(this.alarm_waker);
            while this.timer.as_mut().poll(&mut alarm).is_ready() {
                if this.activity.idle_since(this.seen) {
                    return Poll::Ready(None);
                }
                // From now, not from when it rang: checks are a period apart however late this runs.
                this.timer.as_mut().reset(tokio::time::Instant::now() + *this.period);
            }
        }
        Poll::Pending
    }
}

/// The waker of an [`UntilIdle`]'s timer: it notes that the timer rang and wakes the task.
struct Alarm {
    rang: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Alarm {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.rang.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// A connection's service, counting its requests' heads and the ends of their answers in an
/// [`Activity`].
pub(super) struct Counted<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Counted<S> {
    pub(super) fn new(inner: S, activity: Arc<Activity>) -> Self {
        Counted { inner, activity }
    }
}

impl<S, B, Q> hyper::service::Service<Request<Q>> for Counted<S>
where
    S: hyper::service::Service<Request<Q>, Response = Response<B>>,
{
    type Response = Response<CountedBody<B>>;
    type Error = S::Error;
    type Future = CountedFuture<S::Future>;

    fn call(&self, request: Request<Q>) -> Self::Future {
        self.activity.heads.fetch_add(1, Ordering::Relaxed);
        CountedFuture { future: self.inner.call(request), answer: Some(Answer(Arc::clone(&self.activity))) }
    }
}

/// An answer in flight: counted as ended when dropped, with the body that carried it, or with the
/// future that failed to make it.
struct Answer(Arc<Activity>);

impl Drop for Answer {
    fn drop(&mut self) {
        self.0.answered.fetch_add(1, Ordering::Relaxed);
    }
}

pin_project_lite::pin_project! {
    pub(super) struct CountedFuture<F> {
        #[pin]
        future: F,
        answer: Option<Answer>,
    }
}

impl<F, B, E> Future for CountedFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<CountedBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = ready!(this.future.poll(cx))?;
        let answer = this.answer.take().expect("a counted future is polled to its end once");
        Poll::Ready(Ok(response.map(|body| CountedBody { body, _answer: answer })))
    }
}

pin_project_lite::pin_project! {
    /// An answer's body, in flight until it is dropped.
    pub(super) struct CountedBody<B> {
        #[pin]
        body: B,
        _answer: Answer,
    }
}

impl<B: Body> Body for CountedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tokio::time::Instant;

    use super::*;

    const PERIOD: Duration = Duration::from_secs(10);

    /// A service answering with a body that the test holds, as hyper holds one while it sends it.
    struct Echo;

    impl hyper::service::Service<Request<()>> for Echo {
        type Response = Response<http_body_util::Empty<hyper::body::Bytes>>;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Self::Response, Infallible>>;

        fn call(&self, _: Request<()>) -> Self::Future {
            std::future::ready(Ok(Response::new(http_body_util::Empty::new())))
        }
    }

    /// How long a connection that never ends by itself, with `activity`, takes to be closed idle.
    /// A connection still open after 20 periods fails the test rather than hanging it.
    async fn idle_after(activity: Arc<Activity>) -> Duration {
        let started = Instant::now();
        let closing = UntilIdle::new(std::future::pending::<()>(), activity, PERIOD);
        let closed = tokio::time::timeout(20 * PERIOD, closing).await.expect("closed within 20 periods");
        assert!(closed.is_none(), "closed idle");
        started.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_without_a_head_is_closed_after_one_period() {
        assert_eq!(idle_after(Arc::default()).await, PERIOD);
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_ends_gives_its_output() {
        let started = Instant::now();
        let connection = async {
            tokio::time::sleep(PERIOD / 2).await;
            "ended"
        };
        assert_eq!(UntilIdle::new(connection, Arc::default(), PERIOD).await, Some("ended"));
        assert_eq!(started.elapsed(), PERIOD / 2);
    }

    /// A head, or the end of an answer, counts as activity: the connection falls idle a period or
    /// two later, never while an answer is in flight however long it takes.
    #[tokio::test(start_paused = true)]
    async fn heads_and_answers_keep_a_connection_from_being_idle() {
        use hyper::service::Service as _;

        let activity = Arc::new(Activity::default());
        let service = Counted::new(Echo, Arc::clone(&activity));
        let watching = tokio::spawn(idle_after(Arc::clone(&activity)));
        // A head in the first period: the check at its end sees it, the second finds nothing new.
        tokio::time::sleep(PERIOD / 2).await;
        let answer = service.call(Request::new(())).await.expect("an answer");
        drop(answer);
        assert_eq!(watching.await.expect("the watch"), 2 * PERIOD);

        // An answer in flight for five periods, ended in the middle of one.
        let watching = tokio::spawn(idle_after(Arc::clone(&activity)));
        let answer = service.call(Request::new(())).await.expect("an answer");
        tokio::time::sleep(PERIOD * 9 / 2).await;
        assert!(!watching.is_finished(), "idle while an answer was in flight");
        drop(answer);
        assert_eq!(watching.await.expect("the watch"), 6 * PERIOD, "the end of an answer counts as activity");
    }

    /// An answer whose future is dropped before it answers (its connection closed) is not left in
    /// flight.
    #[tokio::test(start_paused = true)]
    async fn an_answer_never_made_is_not_left_in_flight() {
        use hyper::service::Service as _;

        let activity = Arc::new(Activity::default());
        let service = Counted::new(Echo, Arc::clone(&activity));
        drop(service.call(Request::new(())));
        assert_eq!(idle_after(activity).await, 2 * PERIOD);
    }
}
