//! A connection's writes on their way to the Raft thread, one message per read.
//!
//! A pipelining client's read from the socket usually holds many requests; each write among
//! them used to be its own message into the Raft thread's inbox, each a channel operation
//! (and often a wake-up) that the serial Raft thread pays for. The connection gathers the
//! writes of one read here and submits them together, in arrival order, once the read's
//! frames are taken: the Raft thread proposes them exactly as if they had come one by one.

use crate::raft::{Input, Replica};
use crate::state::command::Command;

/// See the module docs.
#[derive(Default)]
pub struct Submitter {
    commands: Vec<Command>,
    /// How many the last submission carried: the next one's vector starts that large.
    last: usize,
}

impl Submitter {
    /// Queues a command for the next [`Self::submit`].
    pub fn push(&mut self, command: Command) {
        if self.commands.capacity() == 0 {
            self.commands.reserve(self.last.max(4));
        }
        self.commands.push(command);
    }

    /// Hands the queued commands to the Raft thread, in order. False once the Raft thread
    /// is gone (the member is stopping).
    pub fn submit(&mut self, replica: &Replica) -> bool {
        self.last = self.commands.len();
        match self.commands.len() {
            0 => true,
            1 => match self.commands.pop() {
                Some(c) => replica.submit(Input::Command(c)),
                None => true,
            },
            _ => replica.submit(Input::Commands(std::mem::take(&mut self.commands))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::state::tree::TreeOptions;
    use crate::state::StateMachine;

    fn close(session: i64) -> Command {
        Command::CloseSession {
            session,
            reason: crate::state::command::CloseReason::Expired,
        }
    }

    #[test]
    fn one_message_per_read_in_arrival_order() {
        let (tx, rx) = std::sync::mpsc::channel();
        let replica = Replica::new(
            Config::default(),
            StateMachine::new(TreeOptions::default()),
            tx,
        );
        let mut s = Submitter::default();
        assert!(s.submit(&replica));
        assert!(rx.try_recv().is_err(), "nothing queued, nothing sent");
        s.push(close(1));
        assert!(s.submit(&replica));
        assert!(matches!(rx.try_recv(), Ok(Input::Command(c)) if c == close(1)));
        for i in 2..5 {
            s.push(close(i));
        }
        assert!(s.submit(&replica));
        match rx.try_recv() {
            Ok(Input::Commands(cs)) => assert_eq!(cs, vec![close(2), close(3), close(4)]),
            _ => panic!("expected one message with three commands"),
        }
        assert!(rx.try_recv().is_err());
        drop(rx);
        s.push(close(5));
        assert!(!s.submit(&replica), "the Raft thread is gone");
    }
}
