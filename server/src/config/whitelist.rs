//! `4lw.commands.whitelist`: which four-letter words a member answers.

use std::collections::BTreeSet;

/// Which four-letter words are enabled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Whitelist {
    All,
    Only(BTreeSet<String>),
}

impl Whitelist {
    pub fn allows(&self, word: &str) -> bool {
        match self {
            Whitelist::All => true,
            Whitelist::Only(s) => s.contains(word),
        }
    }

    pub(super) fn parse(value: &str) -> Whitelist {
        let words: BTreeSet<String> = value
            .split(',')
            .map(|w| w.trim().to_string())
            .filter(|w| !w.is_empty())
            .collect();
        if words.contains("*") {
            Whitelist::All
        } else {
            Whitelist::Only(words)
        }
    }
}
