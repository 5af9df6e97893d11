//! Every scenario, by group. Each file covers one area; each scenario is an `async fn`
//! taking the [`Ctx`](super::Ctx) and registered with `sc!`.

use super::runner::{Group, Scenario};

/// Registers a scenario function: `sc!(name)` on the group's shared server,
/// `sc!(name, fresh spec)` on a freshly started server with configuration `spec`.
macro_rules! sc {
    ($name:ident) => {
        $crate::conformance::runner::Scenario::shared(stringify!($name), |c| Box::pin($name(c)))
    };
    ($name:ident, fresh $spec:expr) => {
        $crate::conformance::runner::Scenario::fresh(stringify!($name), $spec, |c| {
            Box::pin($name(c))
        })
    };
}

mod bad_input;
mod ext_acl;
mod ext_nodes;
mod ext_watches;
mod initial;
mod multi;
mod null_strings;
mod ops;
mod paths;
mod sessions;
mod watches;

/// The scenarios of `group`.
pub fn all(group: Group) -> Vec<Scenario> {
    match group {
        Group::Core => [
            ops::list(),
            multi::list(),
            paths::list(),
            watches::list(),
            sessions::list(),
            bad_input::list(),
            initial::list(),
        ]
        .concat(),
        Group::Extended => [
            ext_nodes::list(),
            ext_watches::list(),
            ext_acl::list(),
            null_strings::list(),
        ]
        .concat(),
    }
}
