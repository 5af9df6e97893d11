//! Real client libraries against a real server: kazoo (Python), Apache Curator (Java), the
//! C, Go and Node.js clients, zkCli.sh, and the two Rust clients. Each scenario runs against
//! a fresh Apache ZooKeeper 3.8 and a fresh zooraft (`against_both!`), so a difference a
//! client library sees is a failure on one kind only.
//!
//! They are grouped because they test one thing, the wire protocol as the clients
//! applications use decode it, and share one shape: a client program (or library) with its
//! own connection and session state machine, run with a time bound, its checks parsed or
//! asserted. One module per client: [`kazoo`], [`curator`], [`c_client`], [`go_client`],
//! [`node_client`], [`zkcli`], [`rust_clients`].

mod c_client;
mod curator;
mod go_client;
mod kazoo;
mod node_client;
mod rust_clients;
mod zkcli;
