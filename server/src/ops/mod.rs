//! The operator surface: ZooKeeper's four-letter words on the client port and the
//! Prometheus endpoint. Both read one gathered [`view::View`] of the member, and `mntr` and
//! Prometheus print the same list of figures ([`catalogue`]) under ZooKeeper's names.

mod catalogue;
mod environment;
pub mod four_letter;
pub mod prometheus;
mod view;
