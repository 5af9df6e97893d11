//! Security, against Apache ZooKeeper 3.8 and zooraft: TLS on the client port, x509 ids
//! and ACLs, digest auth and refused TLS input ([`security`]); SASL DIGEST-MD5, Kerberos
//! (GSSAPI) and enforced authentication ([`sasl`]).
//!
//! They are grouped because both check who a server lets in and what it refuses, with
//! credentials each test makes for itself (certificates with `openssl`, a KDC of its own on
//! loopback), so no two tests share a secret or a port.

mod sasl;
mod security;
