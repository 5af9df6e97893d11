//! The thread that moves the connections' inputs into the observer loop's channel (the
//! loop waits on one channel, for inputs and for what the leader sent alike), and gives
//! the inbox back when the cut-over hands it to Raft.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::raft::Input;

/// What the thread gives back: the inbox (`None` once every sender is gone, or after
/// `Shutdown`) and what it took from it after it was told to stop.
type Left = (Option<Receiver<Input>>, Vec<Input>);

/// The running thread.
pub struct Inbox {
    thread: JoinHandle<Left>,
    stop: Arc<AtomicBool>,
}

/// Moves every input into `to`, wrapped by `wrap`, until told to stop.
pub fn spawn<E: Send + 'static>(
    inbox: Receiver<Input>,
    to: Sender<E>,
    wrap: fn(Input) -> E,
) -> std::io::Result<Inbox> {
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let thread = std::thread::Builder::new()
        .name("zab-inbox".into())
        .spawn(move || -> Left {
            let mut after_stop = Vec::new();
            loop {
                match inbox.recv_timeout(Duration::from_millis(50)) {
                    Ok(input) if stopped.load(Ordering::Acquire) => after_stop.push(input),
                    Ok(input) => {
                        let last = matches!(input, Input::Shutdown);
                        if to.send(wrap(input)).is_err() || last {
                            return (None, after_stop);
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return (None, after_stop),
                }
                if stopped.load(Ordering::Acquire) {
                    return (Some(inbox), after_stop);
                }
            }
        })?;
    Ok(Inbox { thread, stop })
}

impl Inbox {
    /// Stops the thread: the inbox, and the inputs it took after everything it had
    /// already moved (`None` if the member is shutting down).
    pub fn take_back(self) -> Option<(Receiver<Input>, Vec<Input>)> {
        self.stop.store(true, Ordering::Release);
        let (inbox, after) = self.thread.join().ok()?;
        Some((inbox?, after))
    }
}
