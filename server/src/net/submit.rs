//! A connection's writes on their way to the Raft thread, one message per read.
//!
//! A pipelining client's read from the socket usually holds many requests; each write among
//! them used to be its own message into the Raft thread's inbox, each a channel operation
//! (and often a wake-up) that the serial Raft thread pays for. The connection gathers the
//! writes of one read here and submits them together, in arrival order, once the read's
//! frames are taken: the Raft thread proposes them exactly as if they had come one by one.
//!
//! The connection also encodes them for the log here (`Command::encode`), on its own task:
//! the Raft thread appends those bytes to the turn's entry instead of encoding every write
//! itself (`raft/proposed.rs`).

use bytes::BytesMut;

use crate::raft::{Input, Replica};
use crate::state::command::Command;

/// See the module docs.
#[derive(Default)]
pub struct Submitter {
    commands: Vec<Command>,
    encoded: BytesMut,
    /// How many the last submission carried: the next one's vector starts that large.
    last: usize,
}

impl Submitter {
    /// Queues a command for the next [`Self::submit`].
    pub fn push(&mut self, command: Command) {
        if self.commands.capacity() == 0 {
            self.commands.reserve(self.last.max(4));
        }
        if self.encoded.capacity() == 0 {
            self.encoded.reserve(self.last.max(4) * command.size_hint());
        }
        command.encode(&mut self.encoded);
        self.commands.push(command);
    }

    /// Hands the queued commands to the Raft thread, in order. False once the Raft thread
    /// is gone (the member is stopping). Nothing stays allocated here in between (an idle
    /// connection holds no buffer).
    pub fn submit(&mut self, replica: &Replica) -> bool {
        self.last = self.commands.len();
        if self.commands.is_empty() {
            return true;
        }
        let commands = std::mem::take(&mut self.commands);
        let encoded = std::mem::take(&mut self.encoded).freeze();
        replica.submit(Input::Commands(commands, encoded))
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
        let expect = |cs: Vec<Command>| {
            let mut encoded = BytesMut::new();
            for c in &cs {
                c.encode(&mut encoded);
            }
            (cs, encoded.freeze())
        };
        match rx.try_recv() {
            Ok(Input::Commands(cs, e)) => assert_eq!((cs, e), expect(vec![close(1)])),
            _ => panic!("expected one message with one command"),
        }
        for i in 2..5 {
            s.push(close(i));
        }
        assert!(s.submit(&replica));
        match rx.try_recv() {
            Ok(Input::Commands(cs, e)) => {
                assert_eq!((cs, e), expect(vec![close(2), close(3), close(4)]))
            }
            _ => panic!("expected one message with three commands"),
        }
        assert!(rx.try_recv().is_err());
        drop(rx);
        s.push(close(5));
        assert!(!s.submit(&replica), "the Raft thread is gone");
    }
}
