//! Why a scenario step failed: the error every step of the scenario language returns. A
//! failure stops the scenario and is written into its transcript, so both servers' runs
//! show where they parted.

use crate::raw_client::RawError;

/// Why a scenario stopped early (recorded in the transcript).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fail(pub String);

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A scenario step's result.
pub type Res<T = ()> = Result<T, Fail>;

/// The raw client's error while `label` was doing `what`.
pub(super) fn raw_fail(label: &str, what: &str, e: RawError) -> Fail {
    Fail(format!("{label}: {what}: {e}"))
}
