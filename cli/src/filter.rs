//! `iox list --attribute KEY=VALUE` / `--attribute KEY`: which services to list by
//! their attributes. Every filter given must hold: `KEY=VALUE` that the service has
//! the attribute with exactly that value, `KEY` that it has the attribute. The key
//! ends at the first `=` (keys never contain one; values may). A service whose static
//! config cannot be read has no attributes, so no filter holds for it.

use iox_service::inspect::ServiceInfo;

/// One `--attribute` argument: the key, and the value it must have (`None`: any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttributeFilter {
    key: String,
    value: Option<String>,
}

impl AttributeFilter {
    /// Parses `KEY=VALUE` or `KEY`; the key must be a valid attribute key (the error
    /// says why not).
    pub fn parse(arg: &str) -> Result<Self, String> {
        let (key, value) = match arg.split_once('=') {
            Some((k, v)) => (k, Some(v.to_owned())),
            None => (arg, None),
        };
        iox_service::attributes::check_key(key)
            .map_err(|e| format!("--attribute {arg:?}: {e} (write KEY=VALUE, or KEY alone)"))?;
        Ok(Self {
            key: key.to_owned(),
            value,
        })
    }

    /// Whether `s` passes this filter.
    pub fn holds(&self, s: &ServiceInfo) -> bool {
        let found = s.config.as_ref().and_then(|c| c.attributes.get(&self.key));
        match (&self.value, found) {
            (None, found) => found.is_some(),
            (Some(want), found) => found == Some(want.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_ends_at_the_first_equals_sign() {
        assert_eq!(
            AttributeFilter::parse("ros2/qos=depth=10").unwrap(),
            AttributeFilter {
                key: "ros2/qos".into(),
                value: Some("depth=10".into())
            }
        );
        assert_eq!(
            AttributeFilter::parse("k=").unwrap().value.as_deref(),
            Some(""),
            "an empty value is a value"
        );
        assert_eq!(AttributeFilter::parse("k").unwrap().value, None);
    }

    #[test]
    fn invalid_keys_are_refused_naming_the_argument() {
        for bad in ["=v", "a b=c", ""] {
            let e = AttributeFilter::parse(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }
}
