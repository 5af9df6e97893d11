//! The raw C ABI of the system GSSAPI library (MIT krb5's `libgssapi_krb5`, RFC 2744) and
//! the two krb5 calls beside it: the types, constants, OIDs and `extern` declarations, and
//! nothing else. `gss_ffi.rs` is the safe layer over them; nothing else uses this module.
//!
//! Declared by hand rather than generated: the calls are a stable C ABI, and a bindgen
//! build would change the features RocksDB's own bindgen is built with.

use std::ffi::{c_char, c_int, c_void};

pub(super) type OmUint32 = u32;

#[repr(C)]
pub(super) struct Oid {
    pub(super) length: OmUint32,
    pub(super) elements: *const c_void,
}

#[repr(C)]
pub(super) struct Buffer {
    pub(super) length: usize,
    pub(super) value: *mut c_void,
}

#[repr(C)]
pub(super) struct OidSet {
    pub(super) count: usize,
    pub(super) elements: *const Oid,
}

#[repr(C)]
pub(super) struct KeyValue {
    pub(super) key: *const c_char,
    pub(super) value: *const c_char,
}

#[repr(C)]
pub(super) struct KeyValueSet {
    pub(super) count: OmUint32,
    pub(super) elements: *const KeyValue,
}

pub(super) type Name = *mut c_void;
pub(super) type CredId = *mut c_void;
pub(super) type CtxId = *mut c_void;

pub(super) const GSS_C_INITIATE: c_int = 1;
pub(super) const GSS_C_ACCEPT: c_int = 2;
/// `req_flags` of an initiator: mutual authentication, integrity (RFC 2744).
pub(super) const GSS_C_MUTUAL_FLAG: OmUint32 = 2;
pub(super) const GSS_C_INTEG_FLAG: OmUint32 = 32;
pub(super) const GSS_C_INDEFINITE: OmUint32 = 0xffff_ffff;
pub(super) const GSS_S_CONTINUE_NEEDED: OmUint32 = 1;
pub(super) const GSS_C_GSS_CODE: c_int = 1;
pub(super) const GSS_C_MECH_CODE: c_int = 2;
/// The calling and routine error fields of a major status (RFC 2744 `GSS_ERROR`).
pub(super) const ERROR_MASK: OmUint32 = 0xffff_0000;

/// 1.2.840.113554.1.2.2: the Kerberos 5 mechanism.
pub(super) const KRB5_MECH: &[u8] = b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x02";
/// 1.2.840.113554.1.2.2.1: a Kerberos principal name (`service/host@REALM`).
pub(super) const KRB5_PRINCIPAL_NAME: &[u8] = b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x02\x01";
/// 1.2.840.113554.1.2.1.4: GSS_C_NT_HOSTBASED_SERVICE (`service@host`).
pub(super) const HOSTBASED_SERVICE: &[u8] = b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x01\x04";

#[link(name = "gssapi_krb5")]
extern "C" {
    pub(super) fn gss_import_name(
        minor: *mut OmUint32,
        input: *const Buffer,
        name_type: *const Oid,
        output: *mut Name,
    ) -> OmUint32;
    pub(super) fn gss_release_name(minor: *mut OmUint32, name: *mut Name) -> OmUint32;
    pub(super) fn gss_display_name(
        minor: *mut OmUint32,
        name: Name,
        output: *mut Buffer,
        output_type: *mut *const Oid,
    ) -> OmUint32;
    pub(super) fn gss_acquire_cred(
        minor: *mut OmUint32,
        name: Name,
        time_req: OmUint32,
        mechs: *const OidSet,
        usage: c_int,
        output: *mut CredId,
        actual_mechs: *mut *mut OidSet,
        time_rec: *mut OmUint32,
    ) -> OmUint32;
    pub(super) fn gss_acquire_cred_from(
        minor: *mut OmUint32,
        name: Name,
        time_req: OmUint32,
        mechs: *const OidSet,
        usage: c_int,
        store: *const KeyValueSet,
        output: *mut CredId,
        actual_mechs: *mut *mut OidSet,
        time_rec: *mut OmUint32,
    ) -> OmUint32;
    pub(super) fn gss_release_cred(minor: *mut OmUint32, cred: *mut CredId) -> OmUint32;
    pub(super) fn gss_init_sec_context(
        minor: *mut OmUint32,
        cred: CredId,
        ctx: *mut CtxId,
        target: Name,
        mech: *const Oid,
        req_flags: OmUint32,
        time_req: OmUint32,
        bindings: *const c_void,
        input: *const Buffer,
        actual_mech: *mut *const Oid,
        output: *mut Buffer,
        ret_flags: *mut OmUint32,
        time_rec: *mut OmUint32,
    ) -> OmUint32;
    pub(super) fn gss_inquire_context(
        minor: *mut OmUint32,
        ctx: CtxId,
        src_name: *mut Name,
        targ_name: *mut Name,
        lifetime: *mut OmUint32,
        mech: *mut *const Oid,
        flags: *mut OmUint32,
        locally_initiated: *mut c_int,
        open: *mut c_int,
    ) -> OmUint32;
    pub(super) fn gss_accept_sec_context(
        minor: *mut OmUint32,
        ctx: *mut CtxId,
        cred: CredId,
        input: *const Buffer,
        bindings: *const c_void,
        src_name: *mut Name,
        mech: *mut *const Oid,
        output: *mut Buffer,
        ret_flags: *mut OmUint32,
        time_rec: *mut OmUint32,
        delegated: *mut CredId,
    ) -> OmUint32;
    pub(super) fn gss_delete_sec_context(
        minor: *mut OmUint32,
        ctx: *mut CtxId,
        output: *mut Buffer,
    ) -> OmUint32;
    pub(super) fn gss_wrap(
        minor: *mut OmUint32,
        ctx: CtxId,
        conf_req: c_int,
        qop: OmUint32,
        input: *const Buffer,
        conf_state: *mut c_int,
        output: *mut Buffer,
    ) -> OmUint32;
    pub(super) fn gss_unwrap(
        minor: *mut OmUint32,
        ctx: CtxId,
        input: *const Buffer,
        output: *mut Buffer,
        conf_state: *mut c_int,
        qop: *mut OmUint32,
    ) -> OmUint32;
    pub(super) fn gss_release_buffer(minor: *mut OmUint32, buffer: *mut Buffer) -> OmUint32;
    pub(super) fn gss_display_status(
        minor: *mut OmUint32,
        status: OmUint32,
        status_type: c_int,
        mech: *const Oid,
        message_context: *mut OmUint32,
        output: *mut Buffer,
    ) -> OmUint32;
    pub(super) fn krb5_gss_register_acceptor_identity(keytab: *const c_char) -> OmUint32;
}

#[link(name = "krb5")]
extern "C" {
    pub(super) fn krb5_init_context(ctx: *mut *mut c_void) -> i32;
    pub(super) fn krb5_free_context(ctx: *mut c_void);
    pub(super) fn krb5_get_default_realm(ctx: *mut c_void, realm: *mut *mut c_char) -> i32;
    pub(super) fn krb5_free_default_realm(ctx: *mut c_void, realm: *mut c_char);
}
