//! Basic operations: create/create2 in every mode, delete, exists, getData, setData,
//! getChildren(2), sync, check, Stat fields and sequential numbering.

use crate::conformance::req::*;
use crate::conformance::{Ctx, Res};

pub fn list() -> Vec<crate::conformance::Scenario> {
    vec![sc!(create_persistent)]
}

/// create (op 1) returns only the path; exists then shows a fresh node's Stat.
async fn create_persistent(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let a = c.p("a");
    c.call("s1", create(&a, b"hello", PERSISTENT)).await?;
    c.call("s1", exists(&a, false)).await?;
    c.call("s1", get_data(&a, false)).await?;
    Ok(())
}
