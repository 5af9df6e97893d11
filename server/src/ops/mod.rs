//! The operator surface: ZooKeeper's four-letter words on the client port, its AdminServer
//! (`admin`, over `http`) and the Prometheus endpoint. Both read one gathered [`view::View`] of the member, and `mntr` and
//! Prometheus print the same list of figures ([`catalogue`]) under ZooKeeper's names.

pub mod admin;
mod catalogue;
mod console;
mod environment;
pub mod four_letter;
mod http;
pub mod prometheus;
mod view;
