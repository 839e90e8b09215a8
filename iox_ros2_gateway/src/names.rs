//! Which services and topics the gateway carries, and the names they have on each side.
//!
//! **Names.** iox service `camera/front` is ROS 2 topic `/camera/front`, and back: the
//! topic is the service's name with a leading `/`. The map is one-to-one on the names
//! both sides accept: a ROS name token is letters, digits and `_`, not starting with a
//! digit, without `__`; an iox service name whose segments hold other characters
//! (`- . ~ : + = ,`) has no topic and is refused naming the character
//! ([`NameError`]). ROS names are case-sensitive, as iox's are.
//!
//! **Patterns.** `--export` and `--import` take globs over service names (without the
//! leading `/`), as the Zenoh bridge's key expressions read: `*` matches within one
//! segment (`camera/*`, `cam*/front`), `**` any number of whole segments (`**`,
//! `robot/**`). A topic is imported when its service name matches an import pattern.
//! ROS 2's own infrastructure topics (`/rosout`, `/parameter_events`) and hidden ones
//! (a segment starting with `_`) are never imported.

/// Why a name has no counterpart on the other side.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// A service name that is not a ROS topic name.
    #[error("service {name:?} has no ROS 2 topic name: {why}")]
    NoTopic {
        /// The service.
        name: String,
        /// Which rule.
        why: String,
    },
    /// A topic whose name is not a service name.
    #[error("ROS 2 topic {topic:?} has no iox service name: {why}")]
    NoService {
        /// The topic.
        topic: String,
        /// Which rule.
        why: String,
    },
    /// A pattern that is not a glob over names.
    #[error("pattern {0:?} is empty or has an empty segment (use `*` or `**`)")]
    Pattern(String),
}

/// The ROS 2 topic of service `name`.
///
/// ```
/// use iox_ros2_gateway::names::{service_name, topic_name};
/// assert_eq!(topic_name("camera/front")?, "/camera/front");
/// assert_eq!(service_name("/camera/front")?, "camera/front");
/// assert!(topic_name("camera-1/front").is_err());
/// # Ok::<(), iox_ros2_gateway::names::NameError>(())
/// ```
pub fn topic_name(name: &str) -> Result<String, NameError> {
    let no = |why: String| NameError::NoTopic {
        name: name.to_owned(),
        why,
    };
    iox_service::ServiceName::new(name).map_err(|e| no(e.to_string()))?;
    for segment in name.split('/') {
        token_ok(segment).map_err(no)?;
    }
    Ok(format!("/{name}"))
}

/// The service of ROS 2 topic `topic` (a fully qualified name, `/a/b`).
pub fn service_name(topic: &str) -> Result<String, NameError> {
    let no = |why: String| NameError::NoService {
        topic: topic.to_owned(),
        why,
    };
    let Some(name) = topic.strip_prefix('/') else {
        return Err(no("it does not start with `/`".into()));
    };
    for segment in name.split('/') {
        token_ok(segment).map_err(no)?;
    }
    iox_service::ServiceName::new(name).map_err(|e| no(e.to_string()))?;
    Ok(name.to_owned())
}

fn token_ok(token: &str) -> Result<(), String> {
    if token.is_empty() {
        return Err("it has an empty segment".into());
    }
    if let Some(c) = token.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '_')) {
        return Err(format!(
            "segment {token:?} holds {c:?}; ROS names hold letters, digits and `_`"
        ));
    }
    if token.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!("segment {token:?} starts with a digit"));
    }
    if token.contains("__") {
        return Err(format!("segment {token:?} holds `__`"));
    }
    Ok(())
}

/// Whether topic `topic` is one the gateway never imports (module docs).
pub fn is_infrastructure(topic: &str) -> bool {
    matches!(topic, "/rosout" | "/parameter_events") || topic.split('/').any(|s| s.starts_with('_'))
}

/// A glob over service names (module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    text: String,
    segments: Vec<String>,
}

impl Pattern {
    /// Parses `text`.
    pub fn new(text: &str) -> Result<Self, NameError> {
        let segments: Vec<String> = text.split('/').map(str::to_owned).collect();
        if text.is_empty() || segments.iter().any(String::is_empty) {
            return Err(NameError::Pattern(text.to_owned()));
        }
        Ok(Self {
            text: text.to_owned(),
            segments,
        })
    }

    /// The pattern as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether service name `name` matches.
    ///
    /// ```
    /// use iox_ros2_gateway::names::Pattern;
    /// let p = Pattern::new("robot/**/cam*")?;
    /// assert!(p.matches("robot/camera"));
    /// assert!(p.matches("robot/left/arm/cam2"));
    /// assert!(!p.matches("robot/left/lidar"));
    /// # Ok::<(), iox_ros2_gateway::names::NameError>(())
    /// ```
    pub fn matches(&self, name: &str) -> bool {
        let name: Vec<&str> = name.split('/').collect();
        segments_match(&self.segments, &name)
    }
}

fn segments_match(pattern: &[String], name: &[&str]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((first, rest)) if first == "**" => {
            (0..=name.len()).any(|skip| segments_match(rest, &name[skip..]))
        }
        Some((first, rest)) => {
            !name.is_empty()
                && segment_match(first.as_bytes(), name[0].as_bytes())
                && segments_match(rest, &name[1..])
        }
    }
}

/// `*` within one segment.
fn segment_match(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|skip| segment_match(rest, &s[skip..])),
        Some((c, rest)) => s.first() == Some(c) && segment_match(rest, &s[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_both_ways_or_say_why_not() {
        for name in ["a", "camera/front", "robot1/arm/joint_states", "_x"] {
            let topic = topic_name(name).unwrap();
            assert_eq!(service_name(&topic).unwrap(), name);
        }
        for bad in ["cam-1", "a/1b", "a__b", "a.b", "x/~y"] {
            assert!(matches!(topic_name(bad), Err(NameError::NoTopic { .. })), "{bad}");
        }
        for bad in ["a", "/", "/a//b", "/a/", "/9a"] {
            assert!(
                matches!(service_name(bad), Err(NameError::NoService { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn globs_match_segments() {
        let p = |t: &str| Pattern::new(t).unwrap();
        assert!(p("**").matches("a"));
        assert!(p("**").matches("a/b/c"));
        assert!(p("a/*").matches("a/b"));
        assert!(!p("a/*").matches("a/b/c"));
        assert!(!p("a/*").matches("a"));
        assert!(p("a/**").matches("a"));
        assert!(p("*/x").matches("cam/x"));
        assert!(p("c*m*a").matches("camera"));
        assert!(!p("c*m*a").matches("camerb"));
        assert!(Pattern::new("a//b").is_err());
        assert!(Pattern::new("").is_err());
    }

    #[test]
    fn infrastructure_topics_are_known() {
        assert!(is_infrastructure("/rosout"));
        assert!(is_infrastructure("/parameter_events"));
        assert!(is_infrastructure("/a/_hidden/b"));
        assert!(!is_infrastructure("/camera"));
    }
}
