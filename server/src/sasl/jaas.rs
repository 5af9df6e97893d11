//! The JAAS login configuration file ZooKeeper reads (`java.security.auth.login.config`):
//! named sections of login modules, each `class flag key=value ... ;`.
//!
//! ```text
//! Server {
//!     org.apache.zookeeper.server.auth.DigestLoginModule required
//!     user_super="adminsecret"
//!     user_bob="bobsecret";
//! };
//! ```

use std::collections::BTreeMap;

/// One login module line of a section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginModule {
    pub class: String,
    pub flag: String,
    pub options: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Symbol(char),
}

fn tokens(text: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '/' {
            chars.next();
            match chars.next() {
                Some('/') => {
                    for c in chars.by_ref() {
                        if c == '\n' {
                            break;
                        }
                    }
                }
                Some('*') => {
                    let mut prev = ' ';
                    loop {
                        match chars.next() {
                            Some('/') if prev == '*' => break,
                            Some(c) => prev = c,
                            None => return Err("unterminated /* comment".into()),
                        }
                    }
                }
                _ => return Err("unexpected '/'".into()),
            }
        } else if c == '"' {
            chars.next();
            let mut s = String::new();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some(e) => s.push(e),
                        None => return Err("unterminated string".into()),
                    },
                    Some(c) => s.push(c),
                    None => return Err("unterminated string".into()),
                }
            }
            out.push(Token::Quoted(s));
        } else if matches!(c, '{' | '}' | ';' | '=') {
            chars.next();
            out.push(Token::Symbol(c));
        } else {
            let mut s = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() || matches!(c, '{' | '}' | ';' | '=' | '"') {
                    break;
                }
                s.push(c);
                chars.next();
            }
            out.push(Token::Word(s));
        }
    }
    Ok(out)
}

fn word(t: Option<Token>, what: &str) -> Result<String, String> {
    match t {
        Some(Token::Word(w)) | Some(Token::Quoted(w)) => Ok(w),
        Some(other) => Err(format!("expected {what}, found {other:?}")),
        None => Err(format!("expected {what}, found the end of the file")),
    }
}

/// Parses a whole file into its sections.
pub fn parse(text: &str) -> Result<BTreeMap<String, Vec<LoginModule>>, String> {
    let mut it = tokens(text)?.into_iter().peekable();
    let mut sections = BTreeMap::new();
    while it.peek().is_some() {
        let name = word(it.next(), "a section name")?;
        if it.next() != Some(Token::Symbol('{')) {
            return Err(format!("section {name}: expected '{{'"));
        }
        let mut modules = Vec::new();
        loop {
            match it.peek() {
                Some(Token::Symbol('}')) => {
                    it.next();
                    break;
                }
                None => return Err(format!("section {name}: missing '}}'")),
                _ => {}
            }
            let class = word(it.next(), "a login module class")?;
            let flag = word(
                it.next(),
                "a flag (required, requisite, sufficient, optional)",
            )?;
            let mut options = BTreeMap::new();
            loop {
                match it.next() {
                    Some(Token::Symbol(';')) => break,
                    Some(Token::Word(k)) => {
                        if it.next() != Some(Token::Symbol('=')) {
                            return Err(format!("section {name}: option {k}: expected '='"));
                        }
                        options.insert(k, word(it.next(), "an option value")?);
                    }
                    other => {
                        return Err(format!(
                            "section {name}: expected an option or ';', found {other:?}"
                        ))
                    }
                }
            }
            modules.push(LoginModule {
                class,
                flag,
                options,
            });
        }
        if it.peek() == Some(&Token::Symbol(';')) {
            it.next();
        }
        sections.insert(name, modules);
    }
    Ok(sections)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_zookeepers_server_section() {
        let text = "// comment\nServer {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  \
                    user_super=\"adminsecret\"\n  user_bob=\"bob\\\"s\";\n};\n/* another */\n\
                    Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=\"bob\" password=\"x\"; };";
        let s = parse(text).unwrap();
        let server = &s["Server"][0];
        assert!(server.class.ends_with("DigestLoginModule"));
        assert_eq!(server.flag, "required");
        assert_eq!(server.options["user_super"], "adminsecret");
        assert_eq!(server.options["user_bob"], "bob\"s");
        assert_eq!(s["Client"][0].options["username"], "bob");
    }

    #[test]
    fn malformed_files_are_errors() {
        assert!(parse("Server { x required a=\"1\" ").is_err());
        assert!(parse("Server x").is_err());
        assert!(parse("Server { x required a \"1\"; };").is_err());
        assert!(parse("Server { x required a=\"1; };").is_err());
        assert!(parse("/* open").is_err());
        assert_eq!(parse("").unwrap().len(), 0);
    }
}
