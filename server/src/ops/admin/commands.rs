//! ZooKeeper 3.8's AdminServer commands: each by its name and its short names, whether it
//! needs a serving member (as in ZooKeeper: asked of a member that is not serving, it
//! answers with `error` "This ZooKeeper instance is not currently serving requests"), and
//! what it answers. Every answer is a JSON object closed by `command` (the command's full
//! name, whichever name was asked) and `error` (`null` when it ran).

use std::sync::atomic::{AtomicI64, Ordering};

use serde_json::{json, Value};

use super::reports::{self, Fields};
use crate::net::ClientPort;

/// ZooKeeper's answer from a member that is not serving.
pub const NOT_SERVING: &str = "This ZooKeeper instance is not currently serving requests";

/// ZooKeeper's trace mask (`gtmk`, `stmk`): kept and reported, as ZooKeeper's default mask
/// is; zooraft's tracing is set by `RUST_LOG`, not by this mask.
static TRACE_MASK: AtomicI64 = AtomicI64::new(306);

/// The commands that change something: the only ones POST may ask for.
pub const CHANGING: [&str; 3] = ["connection_stat_reset", "set_trace_mask", "stat_reset"];

/// What a command is given: the member and the request's query parameters.
pub struct Asked<'a> {
    pub shared: &'a ClientPort,
    pub query: &'a [(String, String)],
}

/// One command.
pub struct Command {
    /// The full name first, then the short ones.
    pub names: &'static [&'static str],
    /// Whether it answers only while the member serves.
    pub needs_serving: bool,
    pub run: fn(&Asked) -> Result<Fields, String>,
}

fn ok(v: Value) -> Result<Fields, String> {
    match v {
        Value::Object(m) => Ok(m),
        _ => Ok(Fields::new()),
    }
}

/// Every command, in ZooKeeper's order of names.
pub static COMMANDS: &[Command] = &[
    Command {
        names: &["configuration", "conf", "config"],
        needs_serving: true,
        run: |a| {
            let c = a.shared.replica.config();
            let dir = c.data_dir.display().to_string();
            ok(json!({
                "client_port": c.client_port,
                "data_dir": dir,
                "data_log_dir": dir,
                "tick_time": c.tick_time_ms,
                "max_client_cnxns": c.max_client_cnxns,
                "min_session_timeout": c.min_session_timeout_ms,
                "max_session_timeout": c.max_session_timeout_ms,
                "server_id": if c.is_standalone() { 0 } else { c.my_id },
                "client_port_listen_backlog": -1,
            }))
        },
    },
    Command {
        names: &["connection_stat_reset", "crst"],
        needs_serving: true,
        run: |a| {
            super::super::four_letter::reset_connection_stats(a.shared);
            ok(json!({}))
        },
    },
    Command {
        names: &["connections", "cons"],
        needs_serving: true,
        run: |a| Ok(reports::connections(a.shared)),
    },
    Command {
        names: &["dirs"],
        needs_serving: true,
        run: |a| {
            let size = super::super::four_letter::dir_size(&a.shared.replica.config().data_dir);
            ok(json!({"datadir_size": size, "logdir_size": size}))
        },
    },
    Command {
        names: &["dump"],
        needs_serving: true,
        run: |a| Ok(reports::dump(a.shared)),
    },
    Command {
        names: &["environment", "env", "envi"],
        needs_serving: false,
        run: |a| {
            let me = a.shared.replica.me;
            let version = super::super::four_letter::full_version();
            Ok(super::super::environment::properties(&version, me)
                .into_iter()
                .map(|(k, v)| (k.to_string(), Value::String(v)))
                .collect())
        },
    },
    Command {
        names: &["get_trace_mask", "gtmk"],
        needs_serving: false,
        run: |_| ok(json!({"tracemask": TRACE_MASK.load(Ordering::Relaxed)})),
    },
    Command {
        names: &["hash"],
        needs_serving: true,
        run: |a| {
            let state = a.shared.replica.state.read();
            let digest = crate::state::snapshot::tree_digest(&state.tree);
            ok(json!({"digests": [{
                "zxid": state.last_zxid,
                "digest_version": 2,
                "digest": digest,
            }]}))
        },
    },
    Command {
        names: &["initial_configuration", "icfg"],
        needs_serving: true,
        run: |a| {
            // ZooKeeper keeps the file's text for a standalone server only (a quorum peer
            // answers null).
            let c = a.shared.replica.config();
            let text = c.is_standalone().then_some(c.initial_text.as_str());
            ok(json!({ "initial_configuration": text }))
        },
    },
    Command {
        names: &["is_read_only", "isro"],
        needs_serving: true,
        run: |a| ok(json!({"read_only": a.shared.replica.is_read_only()})),
    },
    Command {
        names: &["last_snapshot", "lsnp"],
        needs_serving: true,
        run: |a| {
            let (zxid, secs) = *a.shared.replica.status.last_snapshot.lock();
            ok(json!({"zxid": format!("{zxid:x}"), "timestamp": secs}))
        },
    },
    Command {
        names: &["leader", "lead"],
        needs_serving: true,
        run: |a| reports::leader(a.shared),
    },
    Command {
        names: &["monitor", "mntr"],
        needs_serving: true,
        run: |a| Ok(reports::monitor(a.shared)),
    },
    Command {
        names: &["observer_connection_stat_reset", "orst"],
        needs_serving: true,
        // Observers here are Raft learners: they keep no per-connection statistics.
        run: |_| ok(json!({})),
    },
    Command {
        names: &["observers", "obsr"],
        needs_serving: true,
        run: |a| {
            let synced = a.shared.replica.status.observers.load(Ordering::Relaxed);
            ok(json!({"synced_observers": synced, "observers": []}))
        },
    },
    Command {
        names: &["ruok"],
        needs_serving: true,
        run: |_| ok(json!({})),
    },
    Command {
        names: &["server_stats", "srvr"],
        needs_serving: true,
        run: |a| Ok(reports::server_stats(a.shared)),
    },
    Command {
        names: &["set_trace_mask", "stmk"],
        needs_serving: false,
        run: |a| {
            let given = a.query.iter().find(|(k, _)| k == "traceMask");
            match given.map(|(_, v)| v.parse::<i64>()) {
                Some(Ok(mask)) => {
                    TRACE_MASK.store(mask, Ordering::Relaxed);
                    ok(json!({"tracemask": mask}))
                }
                _ => Err("setTraceMask requires long traceMask argument".into()),
            }
        },
    },
    Command {
        names: &["stat_reset", "srst"],
        needs_serving: true,
        run: |a| {
            super::super::four_letter::reset_server_stats(a.shared);
            ok(json!({}))
        },
    },
    Command {
        names: &["stats", "stat"],
        needs_serving: true,
        run: |a| {
            let mut out = reports::server_stats(a.shared);
            out.extend(reports::connections(a.shared));
            Ok(out)
        },
    },
    Command {
        names: &["system_properties", "sysp"],
        needs_serving: false,
        run: |a| {
            let me = a.shared.replica.me;
            let version = super::super::four_letter::full_version();
            Ok(super::super::environment::system_properties(&version, me)
                .into_iter()
                .map(|(k, v)| (k.to_string(), Value::String(v)))
                .collect())
        },
    },
    Command {
        names: &["voting_view"],
        needs_serving: true,
        run: |a| Ok(reports::voting_view(a.shared)),
    },
    Command {
        names: &["watch_summary", "wchs"],
        needs_serving: true,
        run: |a| {
            let w = a.shared.watches.lock();
            ok(json!({
                "num_connections": w.watching_connections(),
                "num_paths": w.watched_paths(),
                "num_total_watches": w.data_watch_count(),
            }))
        },
    },
    Command {
        names: &["watches", "wchc"],
        needs_serving: true,
        run: |a| Ok(reports::watches(a.shared)),
    },
    Command {
        names: &["watches_by_path", "wchp"],
        needs_serving: true,
        run: |a| Ok(reports::watches_by_path(a.shared)),
    },
    Command {
        names: &["zabstate"],
        needs_serving: false,
        run: |a| Ok(reports::zabstate(a.shared)),
    },
];

/// The command a name (full or short) asks for.
pub fn find(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.names.contains(&name))
}

/// Runs a command: its fields, then `command` and `error`.
pub fn run(command: &Command, asked: &Asked) -> Value {
    let serving = asked.shared.replica.is_serving() || asked.shared.replica.is_read_only();
    let result = if command.needs_serving && !serving {
        Err(NOT_SERVING.to_string())
    } else {
        (command.run)(asked)
    };
    closed(command.names[0], result)
}

/// An answer closed by `command` and `error`, as every ZooKeeper admin answer is.
pub fn closed(command: &str, result: Result<Fields, String>) -> Value {
    let (mut fields, error) = match result {
        Ok(f) => (f, Value::Null),
        Err(e) => (Fields::new(), Value::String(e)),
    };
    fields.insert("command".into(), command.into());
    fields.insert("error".into(), error);
    Value::Object(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_one_commands() {
        let mut seen = std::collections::BTreeSet::new();
        for c in COMMANDS {
            for n in c.names {
                assert!(seen.insert(*n), "{n} named twice");
                assert!(std::ptr::eq(find(n).unwrap(), c));
            }
        }
        // ZooKeeper 3.8's commands, by full name.
        assert_eq!(COMMANDS.len(), 26);
        assert!(find("nope").is_none());
    }

    #[test]
    fn answers_close_with_command_and_error() {
        let ok = closed("ruok", Ok(Fields::new()));
        assert_eq!(ok, json!({"command": "ruok", "error": null}));
        let failed = closed("leader", Err("server is not initialized".into()));
        assert_eq!(failed["error"], "server is not initialized");
    }
}
