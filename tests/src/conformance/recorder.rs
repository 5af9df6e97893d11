//! What goes into a scenario's transcript, and how: the one writer of the [`Transcript`].
//!
//! Every line is either compared (the two servers must agree on it) or only shown (a
//! documented allowed difference). Frames are described by [`describe`]; a handshake also
//! tells the transcript which label a session id belongs to, so that ids are compared by
//! the label that was given them.

use jute::Request;

use super::describe;
use super::transcript::{LineBuf, Transcript};
use crate::raw_client::{Event, Incoming};

/// The transcript being written, and how ACL lists are recorded.
#[derive(Debug, Default)]
pub(super) struct Recorder {
    transcript: Transcript,
    /// Sort ACL lists in getACL replies (see [`Ctx::unordered_acls`](super::Ctx::unordered_acls)).
    sort_acls: bool,
}

impl Recorder {
    pub(super) fn transcript(&self) -> &Transcript {
        &self.transcript
    }

    pub(super) fn into_transcript(self) -> Transcript {
        self.transcript
    }

    pub(super) fn mask_times(&mut self) {
        self.transcript.mask_times = true;
    }

    pub(super) fn sort_acls(&mut self) {
        self.sort_acls = true;
    }

    /// A compared line.
    pub(super) fn line(&mut self, l: &LineBuf) {
        self.transcript.push(l.build(true));
    }

    /// A compared free-form line.
    pub(super) fn note(&mut self, text: impl Into<String>) {
        self.line(&LineBuf::new(text));
    }

    /// A line shown but never compared.
    pub(super) fn allowed(&mut self, text: impl Into<String>) {
        self.transcript.push(LineBuf::new(text).build(false));
    }

    /// `label` sent `req` with `xid`.
    pub(super) fn sent(&mut self, label: &str, xid: i32, req: &Request) {
        let mut l = LineBuf::new(format!("{label} -> xid={xid} "));
        describe::request(req, &mut l);
        self.line(&l);
    }

    /// What `label`'s server wrote, compared; a handshake names its session by `label`.
    pub(super) fn incoming(&mut self, label: &str, inc: &Incoming) {
        let mut l = LineBuf::new(format!("{label} <- "));
        if self.sort_acls {
            describe::incoming(&describe::sorted_acls(inc), &mut l);
        } else {
            describe::incoming(inc, &mut l);
        }
        self.line(&l);
        if let Incoming::Handshake(h) = inc {
            let id = h.response.session_id;
            if id != 0 {
                let labels = &mut self.transcript.labels;
                labels.entry(id).or_insert_with(|| label.to_string());
            }
        }
    }

    /// What `label`'s server wrote, shown but not compared.
    pub(super) fn not_compared(&mut self, label: &str, inc: &Incoming) {
        let mut l = LineBuf::new(format!("{label} <- (not compared) "));
        describe::incoming(inc, &mut l);
        self.transcript.push(l.build(false));
    }

    /// Watch events `label` received whose order the servers may differ on: compared,
    /// sorted.
    pub(super) fn events_any_order(&mut self, label: &str, events: &[Event]) {
        let mut built: Vec<_> = events
            .iter()
            .map(|e| {
                let mut l = LineBuf::new(format!("{label} <- (any order) "));
                describe::event(e, &mut l);
                l.build(true)
            })
            .collect();
        built.sort_by_key(|l| format!("{:?}", l.toks));
        for l in built {
            self.transcript.push(l);
        }
    }
}
