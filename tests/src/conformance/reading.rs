//! Reading one labelled connection: everything its server writes is recorded (or, where
//! a scenario says so, shown but not compared) and learnt by the session, in the order it
//! is read. The scenario decides when to read, so the order of lines does not depend on
//! thread timing.

use std::time::Duration;

use super::fail::{raw_fail, Fail, Res};
use super::recorder::Recorder;
use super::sessions::Sess;
use crate::raw_client::{Incoming, RawClient, RawError};

/// One connection being read, with the transcript its frames go into.
pub(super) struct Reading<'a> {
    pub(super) label: &'a str,
    pub(super) sess: &'a mut Sess,
    pub(super) rec: &'a mut Recorder,
}

impl Reading<'_> {
    fn client(&mut self) -> Res<&mut RawClient> {
        let label = self.label;
        self.sess
            .client
            .as_mut()
            .ok_or_else(|| Fail(format!("{label}: no open connection")))
    }

    /// Records `inc` (compared) and lets the session learn from it.
    fn keep(&mut self, inc: &Incoming) {
        self.rec.incoming(self.label, inc);
        self.sess.learn(inc);
    }

    /// The next frame (or close) within `wait`; `Ok(None)` on timeout.
    async fn next(&mut self, wait: Duration) -> Res<Option<Incoming>> {
        let label = self.label;
        match self.client()?.recv(wait).await {
            Ok(i) => Ok(Some(i)),
            Err(RawError::Timeout(_)) => Ok(None),
            Err(e) => Err(raw_fail(label, "recv", e)),
        }
    }

    /// The next thing within `wait`, recorded; nothing in time is a failure.
    pub(super) async fn recv(&mut self, wait: Duration) -> Res<Incoming> {
        match self.next(wait).await? {
            Some(i) => {
                self.keep(&i);
                Ok(i)
            }
            None => {
                self.rec
                    .note(format!("{} !! nothing received in time", self.label));
                Err(Fail(format!(
                    "{}: nothing received within {wait:?}",
                    self.label
                )))
            }
        }
    }

    /// The next thing within `wait`, recorded, or `None` (recorded as quiet).
    pub(super) async fn recv_or_quiet(&mut self, wait: Duration) -> Res<Option<Incoming>> {
        let got = self.next(wait).await?;
        match &got {
            Some(i) => self.keep(i),
            None => self.rec.note(format!("{} .. nothing arrives", self.label)),
        }
        Ok(got)
    }

    /// The next thing within `wait`, not recorded, or `None`.
    pub(super) async fn take(&mut self, wait: Duration) -> Res<Option<Incoming>> {
        self.next(wait).await
    }

    /// Reads (recording everything, each read within `wait`) until `step` gives an
    /// answer; a close is a failure that says what was awaited, unless `step` answers it.
    pub(super) async fn until<T>(
        &mut self,
        wait: Duration,
        awaited: &str,
        mut step: impl FnMut(Incoming) -> Option<T>,
    ) -> Res<T> {
        loop {
            let inc = self.recv(wait).await?;
            let closed = matches!(inc, Incoming::Closed { .. });
            if let Some(answer) = step(inc) {
                return Ok(answer);
            }
            if closed {
                return Err(Fail(format!(
                    "{}: closed while waiting for {awaited}",
                    self.label
                )));
            }
        }
    }

    /// Reads (each read within `wait`) until `n` watch events arrived, recorded sorted;
    /// anything else is recorded as it comes.
    pub(super) async fn events_any_order(&mut self, wait: Duration, n: usize) -> Res {
        let mut events = Vec::new();
        while events.len() < n {
            match self.next(wait).await? {
                Some(Incoming::Event(e)) => events.push(e),
                Some(other) => {
                    let closed = matches!(other, Incoming::Closed { .. });
                    self.keep(&other);
                    if closed {
                        let label = self.label;
                        return Err(Fail(format!("{label}: closed while waiting for events")));
                    }
                }
                None => {
                    self.rec
                        .note(format!("{} !! nothing received in time", self.label));
                    return Err(Fail(format!("{}: events did not arrive", self.label)));
                }
            }
        }
        self.rec.events_any_order(self.label, &events);
        Ok(())
    }

    /// Records what arrives within `wait` (up to a close); says whether anything did.
    pub(super) async fn quiet(&mut self, wait: Duration) -> Res {
        let deadline = tokio::time::Instant::now() + wait;
        let mut any = false;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                break;
            }
            let Some(i) = self.next(left).await? else {
                break;
            };
            any = true;
            let closed = matches!(i, Incoming::Closed { .. });
            self.keep(&i);
            if closed {
                break;
            }
        }
        if any {
            self.rec
                .allowed(format!("{} (quiet period saw traffic)", self.label));
        } else {
            self.rec.note(format!("{} .. nothing arrives", self.label));
        }
        Ok(())
    }

    /// Reads (recording) until the server closes; records "still open" if it does not
    /// within `wait`. Whether it closed.
    pub(super) async fn wait_closed(&mut self, wait: Duration) -> Res<bool> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let Some(i) = self.next(left).await? else {
                self.rec
                    .note(format!("{} .. connection still open", self.label));
                return Ok(false);
            };
            let closed = matches!(i, Incoming::Closed { .. });
            self.keep(&i);
            if closed {
                return Ok(true);
            }
        }
    }

    /// Reads until the server closes, each read within `wait`, showing what came before
    /// the close but comparing nothing. Whether it closed.
    pub(super) async fn probe_closed(&mut self, wait: Duration) -> Res<bool> {
        let mut seen = Vec::new();
        let closed = loop {
            match self.client()?.recv(wait).await {
                Ok(Incoming::Closed { .. }) => break true,
                Ok(i) => seen.push(i),
                Err(_) => break false,
            }
        };
        for i in &seen {
            self.rec.not_compared(self.label, i);
        }
        Ok(closed)
    }
}
