//! The operator surface: ZooKeeper's four-letter words on the client port and the
//! Prometheus endpoint, both built from one gathered [`view::View`] of the metrics.

pub mod four_letter;
pub mod prometheus;
mod view;
