//! Service attributes: key-value strings a service's creator records in its static
//! config, so that a service says what it is for without a naming convention (a ROS 2
//! gateway records a topic's message type and QoS, say). Openers may require some
//! (see the builders' `require_attribute`), and tools list and filter by them
//! (`iox list --attribute KEY=VALUE`).
//!
//! **Invariants** of an [`Attributes`] (what [`Attributes::check`] verifies, and what
//! [`Attributes::insert`] keeps):
//! - at most [`MAX_ATTRIBUTES`] attributes;
//! - a key is 1 to [`MAX_KEY_LEN`] bytes of printable ASCII, without `=` and without
//!   whitespace (so `KEY=VALUE` on a command line is unambiguous);
//! - a value is at most [`MAX_VALUE_LEN`] bytes of UTF-8 without control characters
//!   other than `\n` and `\t` (a message definition fits; nothing can rewrite a
//!   terminal when a tool prints it);
//! - the keys are unique and sorted (byte order), so two configs with the same
//!   attributes have the same text, and lookups are binary searches.
//!
//! A static config read from a file is untrusted: its attributes are parsed as written
//! (in file order, duplicates kept) and then checked, so a file edited by hand is
//! refused with the [`AttributeError`] naming what is wrong, never half-trusted.
//!
//! In the static config (RON) and in `iox ... --json` the attributes are a map, key to
//! value:
//!
//! ```text
//!     attributes: {
//!         "ros2/qos": "reliable",
//!         "ros2/type": "std_msgs/msg/String",
//!     },
//! ```
//!
//! ```
//! use iox_service::attributes::{AttributeError, Attributes};
//! let mut a = Attributes::new();
//! a.insert("ros2/type", "std_msgs/msg/String")?;
//! a.insert("ros2/qos", "reliable")?;
//! assert_eq!(a.get("ros2/type"), Some("std_msgs/msg/String"));
//! // Sorted by key, whatever the order of insertion.
//! let keys: Vec<&str> = a.iter().map(|(k, _)| k).collect();
//! assert_eq!(keys, ["ros2/qos", "ros2/type"]);
//! assert!(matches!(a.insert("bad key", "x"), Err(AttributeError::KeyCharacter { .. })));
//! # Ok::<(), AttributeError>(())
//! ```

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

/// Most attributes one service may have.
pub const MAX_ATTRIBUTES: usize = 32;
/// Longest attribute key, in bytes.
pub const MAX_KEY_LEN: usize = 128;
/// Longest attribute value, in bytes (a message definition fits).
pub const MAX_VALUE_LEN: usize = 8192;

/// The attributes of a service: key-value strings, sorted by key, keys unique (see
/// the module docs for the rules).
///
/// ```
/// use iox_service::attributes::Attributes;
/// let mut a = Attributes::new();
/// assert_eq!(a.insert("unit", "m/s").unwrap(), None);
/// assert_eq!(a.insert("unit", "km/h").unwrap(), Some("m/s".to_string())); // replaced
/// assert_eq!((a.len(), a.get("unit")), (1, Some("km/h")));
/// assert!(a.contains_key("unit") && a.get("other").is_none());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Attributes {
    /// (key, value) pairs; sorted by key and unique once checked (a file's are kept
    /// as read until [`Attributes::check`] refuses them).
    pairs: Vec<(String, String)>,
}

impl Attributes {
    /// No attributes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` to `value`, keeping the keys sorted; returns the value it replaced.
    /// Refused (and nothing changed) if the key or value breaks a rule, or if this
    /// would be attribute number [`MAX_ATTRIBUTES`] + 1.
    ///
    /// ```
    /// use iox_service::attributes::{AttributeError, Attributes};
    /// let mut a = Attributes::new();
    /// let e = a.insert("k", "a\rb").unwrap_err();
    /// assert!(matches!(&e, AttributeError::ValueCharacter { key, found: '\r' } if key == "k"));
    /// assert!(e.to_string().contains("\"k\""));
    /// ```
    pub fn insert(&mut self, key: &str, value: &str) -> Result<Option<String>, AttributeError> {
        check_key(key)?;
        check_value(key, value)?;
        match self.position(key) {
            Ok(i) => Ok(Some(std::mem::replace(&mut self.pairs[i].1, value.to_owned()))),
            Err(_) if self.pairs.len() >= MAX_ATTRIBUTES => Err(AttributeError::TooMany {
                count: self.pairs.len() + 1,
            }),
            Err(i) => {
                self.pairs.insert(i, (key.to_owned(), value.to_owned()));
                Ok(None)
            }
        }
    }

    /// The value of `key`, if the service has it.
    ///
    /// ```
    /// # use iox_service::attributes::Attributes;
    /// let mut a = Attributes::new();
    /// a.insert("dds/topic", "rt/chatter").unwrap();
    /// assert_eq!(a.get("dds/topic"), Some("rt/chatter"));
    /// ```
    pub fn get(&self, key: &str) -> Option<&str> {
        self.position(key).ok().map(|i| self.pairs[i].1.as_str())
    }

    /// Whether the service has `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The (key, value) pairs, sorted by key.
    ///
    /// ```
    /// # use iox_service::attributes::Attributes;
    /// let mut a = Attributes::new();
    /// a.insert("b", "2").unwrap();
    /// a.insert("a", "1").unwrap();
    /// assert_eq!(a.iter().collect::<Vec<_>>(), [("a", "1"), ("b", "2")]);
    /// ```
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// How many attributes there are.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Checks every rule of the module docs: what a static config read from a file
    /// must pass ([`crate::StaticConfig::check`] calls it).
    ///
    /// ```
    /// # use iox_service::attributes::Attributes;
    /// let mut a = Attributes::new();
    /// a.insert("k", "v").unwrap();
    /// assert_eq!(a.check(), Ok(()));
    /// ```
    pub fn check(&self) -> Result<(), AttributeError> {
        if self.pairs.len() > MAX_ATTRIBUTES {
            return Err(AttributeError::TooMany {
                count: self.pairs.len(),
            });
        }
        let mut previous: Option<&str> = None;
        for (key, value) in &self.pairs {
            check_key(key)?;
            check_value(key, value)?;
            if let Some(p) = previous {
                match p.cmp(key.as_str()) {
                    std::cmp::Ordering::Equal => return Err(AttributeError::Duplicate { key: key.clone() }),
                    std::cmp::Ordering::Greater => {
                        return Err(AttributeError::Unsorted {
                            key: key.clone(),
                            previous: p.to_owned(),
                        });
                    }
                    std::cmp::Ordering::Less => {}
                }
            }
            previous = Some(key);
        }
        Ok(())
    }

    /// Where `key` is (`Ok`), or would go (`Err`); the pairs are sorted.
    fn position(&self, key: &str) -> Result<usize, usize> {
        self.pairs.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }
}

impl<'a> IntoIterator for &'a Attributes {
    type Item = (&'a str, &'a str);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, String)>,
        fn(&'a (String, String)) -> (&'a str, &'a str),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// `Ok` if `key` is a valid attribute key: 1 to [`MAX_KEY_LEN`] bytes of printable
/// ASCII without `=` or whitespace.
///
/// ```
/// use iox_service::attributes::check_key;
/// assert!(check_key("ros2/type").is_ok());
/// assert!(check_key("a=b").is_err() && check_key("").is_err());
/// ```
pub fn check_key(key: &str) -> Result<(), AttributeError> {
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(AttributeError::KeyLength {
            key: shown(key),
            len: key.len(),
        });
    }
    match key.chars().find(|&c| !c.is_ascii_graphic() || c == '=') {
        Some(found) => Err(AttributeError::KeyCharacter {
            key: key.to_owned(),
            found,
        }),
        None => Ok(()),
    }
}

/// `Ok` if `value` is a valid value of attribute `key` (named in the error): at most
/// [`MAX_VALUE_LEN`] bytes, no control characters but `\n` and `\t`.
///
/// ```
/// use iox_service::attributes::check_value;
/// assert!(check_value("msg", "int32 x\nint32 y\n").is_ok());
/// assert!(check_value("msg", "\x1b[2J").is_err());
/// ```
pub fn check_value(key: &str, value: &str) -> Result<(), AttributeError> {
    if value.len() > MAX_VALUE_LEN {
        return Err(AttributeError::ValueLength {
            key: shown(key),
            len: value.len(),
        });
    }
    match value.chars().find(|&c| c.is_control() && c != '\n' && c != '\t') {
        Some(found) => Err(AttributeError::ValueCharacter {
            key: shown(key),
            found,
        }),
        None => Ok(()),
    }
}

/// `text` as an error message shows it: at most 64 characters, then `...`.
pub fn shown(text: &str) -> String {
    const MOST: usize = 64;
    match text.char_indices().nth(MOST) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_owned(),
    }
}

/// Why attributes were refused: each names the key (cut to 64 characters when longer)
/// and the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum AttributeError {
    /// More than [`MAX_ATTRIBUTES`] attributes.
    #[error(
        "{count} attributes; at most {MAX_ATTRIBUTES} per service: record fewer (one attribute can hold a list)"
    )]
    TooMany {
        /// How many there are (or would be).
        count: usize,
    },
    /// A key that is empty or longer than [`MAX_KEY_LEN`].
    #[error("attribute key {key:?} is {len} bytes; a key is 1 to {MAX_KEY_LEN} bytes")]
    KeyLength {
        /// The key.
        key: String,
        /// Its length in bytes.
        len: usize,
    },
    /// A key with a character outside printable ASCII, `=` or whitespace.
    #[error(
        "attribute key {key:?} contains {found:?}; a key is printable ASCII without '=' or whitespace (e.g. \"ros2/type\")"
    )]
    KeyCharacter {
        /// The key.
        key: String,
        /// The first character refused.
        found: char,
    },
    /// A value longer than [`MAX_VALUE_LEN`].
    #[error("the value of attribute {key:?} is {len} bytes; a value is at most {MAX_VALUE_LEN} bytes")]
    ValueLength {
        /// The key.
        key: String,
        /// The value's length in bytes.
        len: usize,
    },
    /// A value with a control character other than `\n` and `\t`.
    #[error(
        "the value of attribute {key:?} contains the control character {found:?}; a value may hold '\\n' and '\\t' but no other control characters"
    )]
    ValueCharacter {
        /// The key.
        key: String,
        /// The first character refused.
        found: char,
    },
    /// A key that appears twice (a file edited by hand).
    #[error("attribute {key:?} appears twice; keys are unique")]
    Duplicate {
        /// The key.
        key: String,
    },
    /// Keys out of order (a file edited by hand).
    #[error("attribute {key:?} comes after {previous:?}; attributes are stored sorted by key")]
    Unsorted {
        /// The key out of place.
        key: String,
        /// The key before it.
        previous: String,
    },
    /// The static config would be larger than any static config may be.
    #[error(
        "with its attributes the static config is {len} bytes, more than a static config may be ({max}): record fewer or shorter attributes"
    )]
    ConfigTooLarge {
        /// The config's length in bytes.
        len: usize,
        /// The limit ([`crate::static_config::MAX_CONFIG_LEN`]).
        max: u64,
    },
    /// A builder that creates requires an attribute it does not record itself: the
    /// service it made would not pass its own check.
    #[error(
        "attribute {key:?} is required{} but this builder records {}: a builder that creates must satisfy its own requirements; record it with .attribute({key:?}, ..) or drop the requirement",
        required.as_deref().map(|v| format!(" as {:?}", shown(v))).unwrap_or_default(),
        recorded.as_deref().map(|v| format!("{:?}", shown(v))).unwrap_or_else(|| "none".into())
    )]
    Unsatisfied {
        /// The key.
        key: String,
        /// The value required (`None`: the key must exist).
        required: Option<String>,
        /// The value the builder records, if any.
        recorded: Option<String>,
    },
}

impl Serialize for Attributes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.pairs.len()))?;
        for (k, v) in &self.pairs {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Attributes {
    /// A map, read as written: order and duplicates kept for [`Attributes::check`] to
    /// judge (so a damaged file is named as such, not silently repaired).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct AsWritten;
        impl<'de> Visitor<'de> for AsWritten {
            type Value = Attributes;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of attribute keys to values (strings)")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Attributes, M::Error> {
                let mut pairs = Vec::new();
                // All of them (the file's size bounds how many), so that too many is
                // reported as such by the check.
                while let Some(pair) = map.next_entry::<String, String>()? {
                    pairs.push(pair);
                }
                Ok(Attributes { pairs })
            }
        }
        d.deserialize_map(AsWritten)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(pairs: &[(&str, &str)]) -> Attributes {
        Attributes {
            pairs: pairs.iter().map(|&(k, v)| (k.into(), v.into())).collect(),
        }
    }

    #[test]
    fn keys_follow_the_rules() {
        assert!(check_key("a").is_ok());
        assert!(check_key(&"k".repeat(MAX_KEY_LEN)).is_ok());
        assert!(matches!(
            check_key(&"k".repeat(MAX_KEY_LEN + 1)),
            Err(AttributeError::KeyLength { len: 129, .. })
        ));
        assert!(matches!(
            check_key(""),
            Err(AttributeError::KeyLength { len: 0, .. })
        ));
        for (bad, found) in [
            ("a=b", '='),
            ("a b", ' '),
            ("a\tb", '\t'),
            ("ä", 'ä'),
            ("a\u{7f}", '\u{7f}'),
        ] {
            assert_eq!(
                check_key(bad),
                Err(AttributeError::KeyCharacter {
                    key: bad.into(),
                    found
                }),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn values_follow_the_rules() {
        assert!(check_value("k", "").is_ok());
        assert!(check_value("k", "line 1\n\tline 2 ünïcode").is_ok());
        assert!(check_value("k", &"v".repeat(MAX_VALUE_LEN)).is_ok());
        let e = check_value("k", &"v".repeat(MAX_VALUE_LEN + 1)).unwrap_err();
        assert_eq!(
            e,
            AttributeError::ValueLength {
                key: "k".into(),
                len: MAX_VALUE_LEN + 1
            }
        );
        assert!(
            e.to_string().contains("\"k\"") && e.to_string().contains("8192"),
            "{e}"
        );
        for c in ['\0', '\r', '\u{1b}', '\u{85}'] {
            assert!(matches!(
                check_value("k", &format!("a{c}")),
                Err(AttributeError::ValueCharacter { found, .. }) if found == c
            ));
        }
    }

    #[test]
    fn insert_keeps_the_keys_sorted_unique_and_bounded() {
        let mut a = Attributes::new();
        for i in (0..MAX_ATTRIBUTES).rev() {
            assert_eq!(a.insert(&format!("k{i:02}"), "v").unwrap(), None);
        }
        assert_eq!(a.check(), Ok(()));
        assert_eq!(a.iter().next(), Some(("k00", "v")));
        assert_eq!(
            a.insert("zz", "v"),
            Err(AttributeError::TooMany {
                count: MAX_ATTRIBUTES + 1
            })
        );
        // Replacing one is not one more.
        assert_eq!(a.insert("k05", "w").unwrap().as_deref(), Some("v"));
        assert_eq!(a.get("k05"), Some("w"));
        assert_eq!(a.len(), MAX_ATTRIBUTES);
    }

    #[test]
    fn check_names_duplicate_unsorted_and_too_many() {
        assert_eq!(
            raw(&[("a", "1"), ("a", "2")]).check(),
            Err(AttributeError::Duplicate { key: "a".into() })
        );
        assert_eq!(
            raw(&[("b", "1"), ("a", "2")]).check(),
            Err(AttributeError::Unsorted {
                key: "a".into(),
                previous: "b".into()
            })
        );
        let many: Vec<(String, String)> = (0..=MAX_ATTRIBUTES)
            .map(|i| (format!("k{i:02}"), "v".into()))
            .collect();
        assert_eq!(
            Attributes { pairs: many }.check(),
            Err(AttributeError::TooMany {
                count: MAX_ATTRIBUTES + 1
            })
        );
    }

    #[test]
    fn ron_round_trip_is_a_map_and_keeps_what_was_written() {
        let mut a = Attributes::new();
        a.insert("msg", "int32 x\n\"quoted\"\t").unwrap();
        a.insert("b", "").unwrap();
        let text = ron::to_string(&a).unwrap();
        assert!(text.starts_with('{'), "{text}");
        assert_eq!(ron::from_str::<Attributes>(&text).unwrap(), a);
        // As written, for check to judge.
        let read: Attributes = ron::from_str(r#"{"b": "1", "a": "2", "a": "3"}"#).unwrap();
        assert_eq!(read, raw(&[("b", "1"), ("a", "2"), ("a", "3")]));
    }

    #[test]
    fn long_keys_are_cut_in_messages() {
        let long = "k".repeat(1000);
        let e = check_key(&long).unwrap_err();
        assert!(e.to_string().len() < 300, "{e}");
        assert!(e.to_string().contains("1000 bytes"), "{e}");
    }
}
