//! Ensembles, membership and failover: 3- and 5-member ensembles (and observers) of real
//! processes on loopback, members killed, restarted, cut off and reconfigured, quorum TLS,
//! read-only members, and reads under `linearizableReads`.
//!
//! They are grouped because each starts a `TestEnsemble` (or several servers that form one)
//! and checks what a quorum guarantees while members come and go: writes acknowledged or
//! refused, sessions kept, and every member ending with the same tree. One module per
//! subject: [`ensemble`] (kills and restarts), [`failover`], [`reconfig`], [`rolling`]
//! (rolling restarts, leader transfer), [`read_only`], [`quorum_tls`], [`one_way_cuts`],
//! [`linearizable_reads`].

mod ensemble;
mod failover;
mod linearizable_reads;
mod one_way_cuts;
mod quorum_tls;
mod read_only;
mod reconfig;
mod rolling;
