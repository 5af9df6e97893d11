//! What the Raft side (through `delivery.rs`) and other connections tell a connection's
//! task. Replies themselves go through the connection's pipeline; these are the events
//! that change what the task does next.
//!
//! A connection's [`ConnEvents`] is one byte of pending kinds and a wake-up, not a queue:
//! every kind is handled by looking at the connection's state when it is taken (a second
//! `LeaderChanged` before the first was seen changes nothing), and a queue per connection
//! cost half a kilobyte of each session's memory (a tokio channel's cache-padded state and
//! its first block) for four one-bit events.

use std::sync::atomic::{AtomicU8, Ordering};

use tokio::sync::Notify;

/// See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ConnEvent {
    /// The session ended (closed by the client, expired, or taken over by a reconnect).
    SessionClosed = 1,
    /// This member stopped serving clients (no quorum, or shutting down).
    StopServing = 2,
    /// The leader changed; writes in flight may never be answered.
    LeaderChanged = 4,
    /// A sync was answered: the requests held back behind it may go on.
    Resume = 8,
}

/// The order in which pending events are handed out: the ones that may end the
/// connection first.
const ORDER: [ConnEvent; 4] = [
    ConnEvent::SessionClosed,
    ConnEvent::StopServing,
    ConnEvent::LeaderChanged,
    ConnEvent::Resume,
];

/// A connection's pending events (see the module docs).
#[derive(Default)]
pub struct ConnEvents {
    pending: AtomicU8,
    wake: Notify,
}

impl ConnEvents {
    /// Marks `c` pending and wakes the connection's task.
    pub fn send(&self, c: ConnEvent) {
        self.pending.fetch_or(c as u8, Ordering::AcqRel);
        // A permit is kept if the task is not waiting yet: the next wait returns at once.
        self.wake.notify_one();
    }

    /// Waits until something is pending and takes all of it. Cancel-safe: what it takes,
    /// it returns in the same poll.
    pub async fn recv(&self) -> Pending {
        loop {
            let bits = self.pending.swap(0, Ordering::AcqRel);
            if bits != 0 {
                return Pending(bits);
            }
            self.wake.notified().await;
        }
    }
}

/// ConnEvents taken together, handed out in [`ORDER`].
#[derive(Debug)]
pub struct Pending(u8);

impl Iterator for Pending {
    type Item = ConnEvent;

    fn next(&mut self) -> Option<ConnEvent> {
        let c = ORDER.into_iter().find(|c| self.0 & *c as u8 != 0)?;
        self.0 &= !(c as u8);
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime")
            .block_on(f)
    }

    #[test]
    fn pending_kinds_come_once_each_the_decisive_first() {
        let c = ConnEvents::default();
        c.send(ConnEvent::Resume);
        c.send(ConnEvent::LeaderChanged);
        c.send(ConnEvent::Resume);
        c.send(ConnEvent::SessionClosed);
        let got: Vec<ConnEvent> = block_on(c.recv()).collect();
        assert_eq!(
            got,
            vec![
                ConnEvent::SessionClosed,
                ConnEvent::LeaderChanged,
                ConnEvent::Resume
            ]
        );
        // All of it was taken: the next wait lasts until something new is sent.
        let waited = block_on(async {
            tokio::time::timeout(std::time::Duration::from_millis(50), c.recv()).await
        });
        assert!(waited.is_err(), "nothing pending: {waited:?}");
    }

    #[test]
    fn a_send_from_another_thread_wakes_a_waiting_task() {
        let c = std::sync::Arc::new(ConnEvents::default());
        let sender = c.clone();
        let got = block_on(async move {
            let waiting = tokio::spawn(async move { c.recv().await.collect::<Vec<_>>() });
            tokio::task::yield_now().await;
            std::thread::spawn(move || sender.send(ConnEvent::StopServing))
                .join()
                .expect("the sender thread");
            tokio::time::timeout(std::time::Duration::from_secs(10), waiting).await
        });
        assert_eq!(
            got.expect("woken").expect("joined"),
            vec![ConnEvent::StopServing]
        );
    }
}
