//! Service names as Zenoh key expressions, and the patterns that select them.
//!
//! Service `camera/front` travels as key `<prefix>/camera/front` (prefix `iox` by
//! default); its static config is answered on `<prefix>-config/camera/front`, a key a
//! data pattern such as `iox/**` never matches. Names are never rewritten:
//! a name that is not a valid, wildcard-free key expression (empty chunks as in
//! `a//b` or a trailing `/`, the characters `* $ ? #`, a chunk starting with `@`) is
//! refused with a message naming it, since an escape scheme would have to be known to
//! every plain Zenoh program on the network too. iox's name grammar
//! (`iox_service::name`) admits no such name, so every local service can be exported
//! (`every_valid_service_name_is_a_key` below); the check remains for names that
//! arrive from elsewhere.

use zenoh::key_expr::{KeyExpr, OwnedKeyExpr, keyexpr};

/// Why a service name or pattern cannot travel as a key expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The service name is not a wildcard-free key expression.
    #[error(
        "service {name:?} cannot travel over Zenoh: {why} (names must be valid key expressions: no empty chunks ('//', leading or trailing '/'), no '*', '$', '?', '#', no chunk starting with '@'); rename it to be bridged"
    )]
    Name {
        /// The name.
        name: String,
        /// What is wrong.
        why: String,
    },
    /// A pattern given on the command line is not a key expression.
    #[error("pattern {pattern:?} is not a Zenoh key expression: {why} (e.g. 'camera/*' or 'plan/**')")]
    Pattern {
        /// The pattern.
        pattern: String,
        /// What Zenoh said.
        why: String,
    },
    /// The prefix is not a wildcard-free key expression.
    #[error("prefix {prefix:?} is not a wildcard-free key expression (e.g. 'iox' or 'robot1/iox')")]
    Prefix {
        /// The prefix.
        prefix: String,
    },
}

fn non_wild(s: &str) -> Result<&keyexpr, String> {
    if s.starts_with('@') || s.contains("/@") {
        return Err("a chunk starts with '@'".into());
    }
    if s.contains(['*', '$', '?', '#']) {
        return Err("it contains '*', '$', '?' or '#'".into());
    }
    keyexpr::new(s).map_err(|e| e.to_string())
}

/// The key mapping of one bridge: its prefix, checked once.
#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    /// Keys under `prefix`.
    pub fn new(prefix: &str) -> Result<Self, KeyError> {
        non_wild(prefix).map_err(|_| KeyError::Prefix {
            prefix: prefix.to_owned(),
        })?;
        Ok(Self {
            prefix: prefix.to_owned(),
        })
    }

    /// The data key of service `name`.
    pub fn data_key(&self, name: &str) -> Result<OwnedKeyExpr, KeyError> {
        let n = non_wild(name).map_err(|why| KeyError::Name {
            name: name.to_owned(),
            why,
        })?;
        Ok(keyexpr::new(&self.prefix).expect("checked in new") / n)
    }

    /// The key on which the static config of service `name` is answered.
    pub fn config_key(&self, name: &str) -> Result<OwnedKeyExpr, KeyError> {
        let n = non_wild(name).map_err(|why| KeyError::Name {
            name: name.to_owned(),
            why,
        })?;
        Ok(OwnedKeyExpr::try_from(format!("{}-config", self.prefix)).expect("prefix checked") / n)
    }

    /// The key expression every config key of this bridge's prefix matches.
    pub fn all_configs(&self) -> OwnedKeyExpr {
        OwnedKeyExpr::try_from(format!("{}-config/**", self.prefix)).expect("prefix checked")
    }

    /// The data key expression of a service pattern (`camera/*` -> `iox/camera/*`).
    pub fn data_pattern(&self, pattern: &Pattern) -> OwnedKeyExpr {
        keyexpr::new(&self.prefix).expect("checked in new") / &pattern.0
    }

    /// The service a data key belongs to (`iox/camera/front` -> `camera/front`).
    pub fn service_of<'a>(&self, key: &'a KeyExpr<'_>) -> Option<&'a str> {
        key.as_str().strip_prefix(&self.prefix)?.strip_prefix('/')
    }
}

/// A service pattern (`camera/*`, `plan/**`), Zenoh key-expression syntax.
#[derive(Debug, Clone)]
pub struct Pattern(OwnedKeyExpr);

impl Pattern {
    /// Parses a pattern (canonicalised, so `a/**/**` is accepted as `a/**`).
    pub fn new(pattern: &str) -> Result<Self, KeyError> {
        OwnedKeyExpr::autocanonize(pattern.to_owned())
            .map(Self)
            .map_err(|e| KeyError::Pattern {
                pattern: pattern.to_owned(),
                why: e.to_string(),
            })
    }

    /// Whether service `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        non_wild(name).is_ok_and(|n| self.0.includes(n))
    }

    /// The pattern as written (canonical form).
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_keys_and_back() {
        let keys = Keys::new("iox").unwrap();
        let key = keys.data_key("camera/front").unwrap();
        assert_eq!(key.as_str(), "iox/camera/front");
        assert_eq!(keys.service_of(&KeyExpr::from(key)), Some("camera/front"));
        assert_eq!(
            keys.config_key("camera/front").unwrap().as_str(),
            "iox-config/camera/front"
        );
    }

    #[test]
    fn bad_names_are_refused_by_name() {
        let keys = Keys::new("iox").unwrap();
        for bad in ["a//b", "/a", "a/", "a*b", "x/**", "a$b", "@a", "a/@b", "q?"] {
            let e = keys.data_key(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
        assert!(Keys::new("io*").is_err());
    }

    /// Every name iox accepts travels: each ASCII character the name grammar allows,
    /// alone, inside a segment and at segment edges, gives a key.
    #[test]
    fn every_valid_service_name_is_a_key() {
        let keys = Keys::new("iox").unwrap();
        let mut valid = 0;
        for c in (0u8..128).map(char::from) {
            for name in [
                format!("{c}"),
                format!("a{c}b"),
                format!("{c}x/y{c}"),
                format!("s/{c}{c}/t"),
            ] {
                if iox_service::ServiceName::new(&name).is_ok() {
                    valid += 1;
                    keys.data_key(&name).unwrap_or_else(|e| panic!("{name:?}: {e}"));
                    keys.config_key(&name).unwrap_or_else(|e| panic!("{name:?}: {e}"));
                    assert!(Pattern::new("**").unwrap().matches(&name), "{name:?}");
                }
            }
        }
        assert!(
            valid > 4 * 60,
            "the grammar allows letters, digits and more: {valid}"
        );
    }

    #[test]
    fn patterns_match_names() {
        let p = Pattern::new("camera/*").unwrap();
        assert!(p.matches("camera/front"));
        assert!(!p.matches("camera/front/left"));
        assert!(!p.matches("lidar"));
        let p = Pattern::new("plan/**").unwrap();
        assert!(p.matches("plan/a/b"));
        assert!(p.matches("plan"));
        assert!(Pattern::new("a//b").is_err());
    }
}
