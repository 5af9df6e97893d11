//! raft-rs logs through slog; this drain forwards its records to `tracing` (target `raft`),
//! so one subscriber and one `RUST_LOG` control all of zooraft's logs.

use std::fmt::Write as _;

use slog::{Drain, Key, OwnedKVList, Record, KV};

struct KvText(String);

impl slog::Serializer for KvText {
    fn emit_arguments(&mut self, key: Key, val: &std::fmt::Arguments) -> slog::Result {
        let _ = write!(self.0, " {key}={val}");
        Ok(())
    }
}

/// See the module docs.
pub struct TracingDrain;

impl Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &Record, values: &OwnedKVList) -> Result<(), slog::Never> {
        let mut kv = KvText(String::new());
        let _ = record.kv().serialize(record, &mut kv);
        let _ = values.serialize(record, &mut kv);
        let msg = record.msg();
        match record.level() {
            slog::Level::Critical | slog::Level::Error => {
                tracing::error!(target: "raft", "{msg}{}", kv.0)
            }
            slog::Level::Warning => tracing::warn!(target: "raft", "{msg}{}", kv.0),
            slog::Level::Info => tracing::info!(target: "raft", "{msg}{}", kv.0),
            slog::Level::Debug => tracing::debug!(target: "raft", "{msg}{}", kv.0),
            slog::Level::Trace => tracing::trace!(target: "raft", "{msg}{}", kv.0),
        }
        Ok(())
    }
}

/// A slog logger for raft-rs that writes through `tracing`.
pub fn logger(member: u64) -> slog::Logger {
    slog::Logger::root(TracingDrain.fuse(), slog::o!("member" => member))
}
