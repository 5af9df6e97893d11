//! ZooKeeper's error codes (`KeeperException.Code`), as they travel in `ReplyHeader.err`.

/// A ZooKeeper error code. `Ok` is 0; every other value is negative.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum ErrorCode {
    Ok = 0,
    SystemError = -1,
    RuntimeInconsistency = -2,
    DataInconsistency = -3,
    ConnectionLoss = -4,
    MarshallingError = -5,
    Unimplemented = -6,
    OperationTimeout = -7,
    BadArguments = -8,
    NewConfigNoQuorum = -13,
    ReconfigInProgress = -14,
    UnknownSession = -12,
    ApiError = -100,
    NoNode = -101,
    NoAuth = -102,
    BadVersion = -103,
    NoChildrenForEphemerals = -108,
    NodeExists = -110,
    NotEmpty = -111,
    SessionExpired = -112,
    InvalidCallback = -113,
    InvalidAcl = -114,
    AuthFailed = -115,
    SessionMoved = -118,
    NotReadOnly = -119,
    EphemeralOnLocalSession = -120,
    NoWatcher = -121,
    RequestTimeout = -122,
    ReconfigDisabled = -123,
    SessionClosedRequireSaslAuth = -124,
    QuotaExceeded = -125,
    Throttled = -127,
}

impl ErrorCode {
    /// The wire value.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The code for a wire value, if ZooKeeper defines one.
    pub fn from_code(code: i32) -> Option<ErrorCode> {
        use ErrorCode::*;
        Some(match code {
            0 => Ok,
            -1 => SystemError,
            -2 => RuntimeInconsistency,
            -3 => DataInconsistency,
            -4 => ConnectionLoss,
            -5 => MarshallingError,
            -6 => Unimplemented,
            -7 => OperationTimeout,
            -8 => BadArguments,
            -12 => UnknownSession,
            -13 => NewConfigNoQuorum,
            -14 => ReconfigInProgress,
            -100 => ApiError,
            -101 => NoNode,
            -102 => NoAuth,
            -103 => BadVersion,
            -108 => NoChildrenForEphemerals,
            -110 => NodeExists,
            -111 => NotEmpty,
            -112 => SessionExpired,
            -113 => InvalidCallback,
            -114 => InvalidAcl,
            -115 => AuthFailed,
            -118 => SessionMoved,
            -119 => NotReadOnly,
            -120 => EphemeralOnLocalSession,
            -121 => NoWatcher,
            -122 => RequestTimeout,
            -123 => ReconfigDisabled,
            -124 => SessionClosedRequireSaslAuth,
            -125 => QuotaExceeded,
            -127 => Throttled,
            _ => return None,
        })
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} ({})", self, self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips() {
        for c in -200..=0 {
            if let Some(e) = ErrorCode::from_code(c) {
                assert_eq!(e.code(), c);
            }
        }
        assert_eq!(ErrorCode::from_code(-101), Some(ErrorCode::NoNode));
        assert_eq!(ErrorCode::from_code(-9999), None);
    }
}
