//! A small safe layer over the system GSSAPI library (MIT krb5's `libgssapi_krb5`), just
//! what SASL GSSAPI needs on either side: for an acceptor (the client port), credentials
//! for the server's principal from a keytab; for an initiator (a quorum learner logging in
//! to a ZooKeeper leader), credentials from a client keytab into a ccache of the process's
//! memory (`gss_acquire_cred_from`, so nothing process-wide changes); a security context
//! per connection, and `wrap`/`unwrap` for the handshake's security-layer step.
//!
//! The C declarations are in `gss_sys.rs`. Every pointer the library returns is released
//! by a `Drop`.

use std::ffi::{c_int, c_void, CString};
use std::ptr;

use super::gss_sys::*;

/// A GSSAPI failure, with the library's own words.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{call}: {message}")]
pub struct GssError {
    pub call: &'static str,
    pub message: String,
}

fn oid(bytes: &'static [u8]) -> Oid {
    Oid {
        length: bytes.len() as OmUint32,
        elements: bytes.as_ptr().cast(),
    }
}

fn input(bytes: &[u8]) -> Buffer {
    Buffer {
        length: bytes.len(),
        value: bytes.as_ptr() as *mut c_void,
    }
}

fn empty() -> Buffer {
    Buffer {
        length: 0,
        value: ptr::null_mut(),
    }
}

/// Copies a buffer the library allocated and releases it.
fn take(mut buf: Buffer) -> Vec<u8> {
    let out = if buf.value.is_null() || buf.length == 0 {
        Vec::new()
    } else {
        // SAFETY: the library filled `buf` with `length` readable bytes at `value`.
        unsafe { std::slice::from_raw_parts(buf.value as *const u8, buf.length) }.to_vec()
    };
    let mut minor = 0;
    // SAFETY: `buf` came from the library (or is empty, which it accepts).
    unsafe { gss_release_buffer(&mut minor, &mut buf) };
    out
}

fn status_text(status: OmUint32, kind: c_int) -> String {
    let mech = oid(KRB5_MECH);
    let mut parts = Vec::new();
    let mut context = 0;
    loop {
        let (mut minor, mut buf) = (0, empty());
        // SAFETY: all pointers are to live locals; the buffer is released by `take`.
        let major =
            unsafe { gss_display_status(&mut minor, status, kind, &mech, &mut context, &mut buf) };
        if major & ERROR_MASK != 0 {
            break;
        }
        parts.push(String::from_utf8_lossy(&take(buf)).into_owned());
        if context == 0 || parts.len() > 8 {
            break;
        }
    }
    parts.join("; ")
}

fn check(call: &'static str, major: OmUint32, minor: OmUint32) -> Result<OmUint32, GssError> {
    if major & ERROR_MASK == 0 {
        return Ok(major);
    }
    let mut message = status_text(major, GSS_C_GSS_CODE);
    if minor != 0 {
        let mech = status_text(minor, GSS_C_MECH_CODE);
        if !mech.is_empty() {
            message = format!("{message} ({mech})");
        }
    }
    Err(GssError { call, message })
}

/// The default realm of the Kerberos configuration (`KRB5_CONFIG` or /etc/krb5.conf), if any.
pub fn default_realm() -> Option<String> {
    let mut ctx = ptr::null_mut();
    // SAFETY: `ctx` is freed below; the realm string is freed by its own call.
    unsafe {
        if krb5_init_context(&mut ctx) != 0 {
            return None;
        }
        let mut realm = ptr::null_mut();
        let out = if krb5_get_default_realm(ctx, &mut realm) == 0 && !realm.is_null() {
            let s = std::ffi::CStr::from_ptr(realm)
                .to_string_lossy()
                .into_owned();
            krb5_free_default_realm(ctx, realm);
            Some(s)
        } else {
            None
        };
        krb5_free_context(ctx);
        out
    }
}

/// The acceptor credentials of the server's principal, from its keytab.
pub struct Credentials {
    cred: CredId,
}

// SAFETY: MIT krb5 credentials are immutable after acquisition and guarded by the library's
// own lock; contexts accepted with them on different threads are independent.
unsafe impl Send for Credentials {}
// SAFETY: as above.
unsafe impl Sync for Credentials {}

impl Credentials {
    /// Acquires accept credentials for `principal` from `keytab`. The keytab becomes the
    /// process's acceptor identity (there is one per server).
    pub fn acquire(principal: &str, keytab: &str) -> Result<Credentials, GssError> {
        let bad = |what: &str| GssError {
            call: "acquire",
            message: format!("{what} contains a NUL byte"),
        };
        let keytab_c = CString::new(keytab).map_err(|_| bad("keyTab"))?;
        // SAFETY: a valid C string; the library copies it.
        let major = unsafe { krb5_gss_register_acceptor_identity(keytab_c.as_ptr()) };
        check("krb5_gss_register_acceptor_identity", major, 0)?;
        let name = ImportedName::new(principal, KRB5_PRINCIPAL_NAME)?;
        let mech = oid(KRB5_MECH);
        let mechs = OidSet {
            count: 1,
            elements: &mech,
        };
        let (mut minor, mut cred) = (0, ptr::null_mut());
        // SAFETY: pointers to live locals; `cred` is owned by the result.
        let major = unsafe {
            gss_acquire_cred(
                &mut minor,
                name.name,
                GSS_C_INDEFINITE,
                &mechs,
                GSS_C_ACCEPT,
                &mut cred,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        check("gss_acquire_cred", major, minor).map(|_| Credentials { cred })
    }

    /// Initiator credentials for `principal` from the client keytab `keytab`, their tickets
    /// kept in the credential cache `ccache` (e.g. `MEMORY:name`, private to this process).
    /// The library gets a ticket-granting ticket from the keytab (asking the KDC) when the
    /// cache has none, and a new one when it is about to expire. Neither
    /// `KRB5_CLIENT_KTNAME` nor `KRB5CCNAME` is read or set: the cred store names both.
    pub fn initiate(principal: &str, keytab: &str, ccache: &str) -> Result<Credentials, GssError> {
        let bad = |what: &str| GssError {
            call: "acquire",
            message: format!("{what} contains a NUL byte"),
        };
        let keys = [c"client_keytab", c"ccache"];
        let values = [
            CString::new(keytab).map_err(|_| bad("keyTab"))?,
            CString::new(ccache).map_err(|_| bad("the credential cache name"))?,
        ];
        let elements = [
            KeyValue {
                key: keys[0].as_ptr(),
                value: values[0].as_ptr(),
            },
            KeyValue {
                key: keys[1].as_ptr(),
                value: values[1].as_ptr(),
            },
        ];
        let store = KeyValueSet {
            count: elements.len() as OmUint32,
            elements: elements.as_ptr(),
        };
        let name = ImportedName::new(principal, KRB5_PRINCIPAL_NAME)?;
        let mech = oid(KRB5_MECH);
        let mechs = OidSet {
            count: 1,
            elements: &mech,
        };
        let (mut minor, mut cred) = (0, ptr::null_mut());
        // SAFETY: pointers to live locals (the store's strings outlive the call, which
        // copies what it keeps); `cred` is owned by the result.
        let major = unsafe {
            gss_acquire_cred_from(
                &mut minor,
                name.name,
                GSS_C_INDEFINITE,
                &mechs,
                GSS_C_INITIATE,
                &store,
                &mut cred,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        check("gss_acquire_cred_from", major, minor).map(|_| Credentials { cred })
    }

    /// No credentials (GSS_C_NO_CREDENTIAL), for tests of paths that never reach them.
    #[cfg(test)]
    pub fn null_for_tests() -> Credentials {
        Credentials {
            cred: ptr::null_mut(),
        }
    }
}

impl Drop for Credentials {
    fn drop(&mut self) {
        if self.cred.is_null() {
            return;
        }
        let mut minor = 0;
        // SAFETY: `cred` came from gss_acquire_cred and is released once.
        unsafe { gss_release_cred(&mut minor, &mut self.cred) };
    }
}

/// A name imported into the library, released on drop.
struct ImportedName {
    name: Name,
}

impl ImportedName {
    fn new(text: &str, name_type: &'static [u8]) -> Result<ImportedName, GssError> {
        let (mut minor, mut name) = (0, ptr::null_mut());
        let name_type = oid(name_type);
        let buf = input(text.as_bytes());
        // SAFETY: pointers to live locals; the library copies the text; `name` is
        // released by `release`.
        let major = unsafe { gss_import_name(&mut minor, &buf, &name_type, &mut name) };
        check("gss_import_name", major, minor)?;
        Ok(ImportedName { name })
    }
}

impl Drop for ImportedName {
    fn drop(&mut self) {
        let mut minor = 0;
        // SAFETY: `name` came from gss_import_name and is released once.
        unsafe { gss_release_name(&mut minor, &mut self.name) };
    }
}

/// The service an initiator authenticates to, as a host-based service name
/// (`service@host`, which the library maps to the principal `service/host@REALM`, the
/// realm from krb5.conf's `domain_realm`, or the client's own by referral).
pub struct Target {
    name: ImportedName,
    shown: String,
}

// SAFETY: an imported name is not changed after import; the library does not tie it to a
// thread.
unsafe impl Send for Target {}

impl Target {
    pub fn host_based(service: &str, host: &str) -> Result<Target, GssError> {
        let shown = format!("{service}@{host}");
        Ok(Target {
            name: ImportedName::new(&shown, HOSTBASED_SERVICE)?,
            shown,
        })
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

/// What one initiate step produced.
pub struct Initiated {
    /// The token to send (may be empty).
    pub token: Vec<u8>,
    /// Whether the context is established (no more context tokens are expected).
    pub established: bool,
}

/// What one accept step produced.
pub struct Accepted {
    /// The token to send back (may be empty).
    pub token: Vec<u8>,
    /// The client's principal, once the context is established.
    pub peer: Option<String>,
}

/// One connection's security context (acceptor side).
pub struct Context {
    ctx: CtxId,
}

// SAFETY: a context is used by one connection at a time (`&mut self`), and MIT krb5
// contexts are not tied to the thread that created them.
unsafe impl Send for Context {}

impl Default for Context {
    fn default() -> Self {
        Context {
            ctx: ptr::null_mut(),
        }
    }
}

impl Context {
    /// Feeds the client's token to `gss_accept_sec_context`.
    pub fn accept(&mut self, cred: &Credentials, token: &[u8]) -> Result<Accepted, GssError> {
        let (mut minor, mut src, mut out) = (0, ptr::null_mut(), empty());
        let buf = input(token);
        // SAFETY: pointers to live locals; `out` and `src` are released below.
        let major = unsafe {
            gss_accept_sec_context(
                &mut minor,
                &mut self.ctx,
                cred.cred,
                &buf,
                ptr::null(),
                &mut src,
                ptr::null_mut(),
                &mut out,
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        let token = take(out);
        let result = check("gss_accept_sec_context", major, minor);
        let peer = match result {
            Ok(m) if m & GSS_S_CONTINUE_NEEDED == 0 && !src.is_null() => Some(display(src)),
            _ => None,
        };
        if !src.is_null() {
            let mut m2 = 0;
            // SAFETY: `src` came from gss_accept_sec_context.
            unsafe { gss_release_name(&mut m2, &mut src) };
        }
        let peer = match (result?, peer) {
            (_, Some(p)) => Some(p?),
            _ => None,
        };
        Ok(Accepted { token, peer })
    }

    /// Feeds the acceptor's token (empty at first) to `gss_init_sec_context`, asking for
    /// mutual authentication and integrity.
    pub fn initiate(
        &mut self,
        cred: &Credentials,
        target: &Target,
        token: &[u8],
    ) -> Result<Initiated, GssError> {
        let (mut minor, mut out) = (0, empty());
        let mech = oid(KRB5_MECH);
        let buf = input(token);
        // SAFETY: pointers to live locals and to the live credentials and target name;
        // `out` is released by `take`.
        let major = unsafe {
            gss_init_sec_context(
                &mut minor,
                cred.cred,
                &mut self.ctx,
                target.name.name,
                &mech,
                GSS_C_MUTUAL_FLAG | GSS_C_INTEG_FLAG,
                0,
                ptr::null(),
                &buf,
                ptr::null_mut(),
                &mut out,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        let token = take(out);
        let major = check("gss_init_sec_context", major, minor)?;
        Ok(Initiated {
            token,
            established: major & GSS_S_CONTINUE_NEEDED == 0,
        })
    }

    /// The initiator's principal of an established context (`name/host@REALM`): who this
    /// side authenticated as, when it initiated.
    pub fn initiator(&self) -> Result<String, GssError> {
        let (mut minor, mut src) = (0, ptr::null_mut());
        // SAFETY: an established context; `src` is released below.
        let major = unsafe {
            gss_inquire_context(
                &mut minor,
                self.ctx,
                &mut src,
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        check("gss_inquire_context", major, minor)?;
        let shown = display(src);
        let mut m2 = 0;
        // SAFETY: `src` came from gss_inquire_context.
        unsafe { gss_release_name(&mut m2, &mut src) };
        shown
    }

    /// Wraps `data` with integrity only (no confidentiality), as SASL GSSAPI's handshake does.
    pub fn wrap(&self, data: &[u8]) -> Result<Vec<u8>, GssError> {
        let (mut minor, mut out) = (0, empty());
        let buf = input(data);
        // SAFETY: an established context; pointers to live locals.
        let major =
            unsafe { gss_wrap(&mut minor, self.ctx, 0, 0, &buf, ptr::null_mut(), &mut out) };
        let token = take(out);
        check("gss_wrap", major, minor).map(|_| token)
    }

    /// Unwraps a token from the peer.
    pub fn unwrap(&self, data: &[u8]) -> Result<Vec<u8>, GssError> {
        let (mut minor, mut out) = (0, empty());
        let buf = input(data);
        // SAFETY: an established context; pointers to live locals.
        let major = unsafe {
            gss_unwrap(
                &mut minor,
                self.ctx,
                &buf,
                &mut out,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        let token = take(out);
        check("gss_unwrap", major, minor).map(|_| token)
    }
}

fn display(name: Name) -> Result<String, GssError> {
    let (mut minor, mut out) = (0, empty());
    // SAFETY: `name` is a live name; `out` is released by `take`.
    let major = unsafe { gss_display_name(&mut minor, name, &mut out, ptr::null_mut()) };
    let text = take(out);
    check("gss_display_name", major, minor)?;
    Ok(String::from_utf8_lossy(&text).into_owned())
}

impl Drop for Context {
    fn drop(&mut self) {
        if !self.ctx.is_null() {
            let mut minor = 0;
            // SAFETY: `ctx` came from gss_accept_sec_context and is deleted once.
            unsafe { gss_delete_sec_context(&mut minor, &mut self.ctx, ptr::null_mut()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_tokens_are_errors_not_crashes() {
        // No credentials are needed to see a malformed token refused: accept with none.
        let cred = Credentials::null_for_tests();
        for token in [&b""[..], b"\x60\x00", b"garbage", &[0x60u8; 300][..]] {
            let mut ctx = Context::default();
            let e = ctx.accept(&cred, token).err();
            assert!(e.is_some(), "{token:?} accepted");
        }
    }

    #[test]
    fn missing_keytab_is_a_clear_error() {
        let e = Credentials::acquire("zookeeper/localhost@NO.SUCH.REALM", "/nonexistent/kt")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("gss_acquire_cred"), "{e}");
    }
}
