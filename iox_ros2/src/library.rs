//! Message definitions from a ROS 2 install found at run time: `pkg/msg/Name` is the
//! file `share/pkg/msg/Name.msg` under one of the install's prefixes
//! (`AMENT_PREFIX_PATH`, as a sourced ROS environment sets it, or the prefixes given),
//! parsed with every message type it uses, recursively. Nothing is generated per type.
//!
//! Invariants: a [`Library`] caches each definition it read, so a type used by many
//! others is read once; a definition that uses itself (directly or through others) is
//! refused, not followed forever; a type that is not installed is a [`LoadError`]
//! naming it and every directory looked in. Every type a library holds from
//! [`Library::load`] or [`Library::from_definition_text`] has every type it uses in the
//! library too, and nests at most [`MAX_DEPTH`] types deep, so a walk over a message
//! ends, whatever text the definitions came from (another user's service attribute, a
//! recording): checked without recursion, so a chain of any length is refused, not a
//! stack overflow.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::msg::{self, BaseType, MsgDef, ParseError};

/// The deepest a message type may nest others, in types below it (a field of a message
/// type whose field is of a message type ...: a chain of `MAX_DEPTH + 1` types is the
/// deepest accepted): ROS's own messages nest a handful deep.
pub const MAX_DEPTH: usize = 64;

/// Why a message type could not be loaded.
#[derive(Debug, Error)]
pub enum LoadError {
    /// The type name is not `pkg/msg/Name` (or `pkg/Name`).
    #[error("`{0}` is not a ROS message type name (pkg/msg/Name)")]
    Name(String),
    /// No prefix holds the type's `.msg`.
    #[error(
        "ROS message type {name} is not installed: no {} under {} (source the ROS environment, or give the install's prefix)",
        relative.display(),
        if looked.is_empty() { "any prefix (AMENT_PREFIX_PATH is empty)".to_string() } else { looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ") }
    )]
    NotInstalled {
        /// The type.
        name: String,
        /// The file looked for under each prefix.
        relative: PathBuf,
        /// The prefixes looked in.
        looked: Vec<PathBuf>,
    },
    /// The `.msg` could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The `.msg` does not parse.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// A type that contains itself.
    #[error("ROS message type {0} contains itself")]
    Recursive(String),
    /// A definition text uses a type it does not define.
    #[error("ROS message type {user} uses {name}, which its definition does not define")]
    Undefined {
        /// The type used.
        name: String,
        /// The type using it.
        user: String,
    },
    /// Types nested deeper than [`MAX_DEPTH`].
    #[error("ROS message type {0} nests message types more than {MAX_DEPTH} deep")]
    TooDeep(String),
}

/// The message definitions of one ROS install (module docs).
#[derive(Debug, Clone)]
pub struct Library {
    prefixes: Vec<PathBuf>,
    defs: BTreeMap<String, MsgDef>,
}

impl Library {
    /// A library over the prefixes in `AMENT_PREFIX_PATH` (a sourced ROS 2 install),
    /// then the active Python virtual environment (`VIRTUAL_ENV`), where ROS 2 from
    /// PyPI puts its `share/<pkg>/msg`.
    pub fn from_env() -> Self {
        let mut prefixes: Vec<PathBuf> = std::env::var_os("AMENT_PREFIX_PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        if let Some(venv) = std::env::var_os("VIRTUAL_ENV").map(PathBuf::from)
            && venv.join("share").is_dir()
            && !prefixes.contains(&venv)
        {
            prefixes.push(venv);
        }
        Self::with_prefixes(prefixes)
    }

    /// A library over `prefixes` (directories holding `share/<pkg>/msg/*.msg`).
    pub fn with_prefixes(prefixes: Vec<PathBuf>) -> Self {
        Self {
            prefixes,
            defs: BTreeMap::new(),
        }
    }

    /// The prefixes looked in, in order.
    pub fn prefixes(&self) -> &[PathBuf] {
        &self.prefixes
    }

    /// Loads `name` (`pkg/msg/Name` or `pkg/Name`) and every type it uses.
    pub fn load(&mut self, name: &str) -> Result<&MsgDef, LoadError> {
        let full = full_name(name).ok_or_else(|| LoadError::Name(name.to_owned()))?;
        self.load_full(&full, &mut Vec::new())?;
        Ok(&self.defs[&full])
    }

    /// The definitions in `text`, MCAP's `ros2msg` form of type `name` (what
    /// [`definition_text`](Self::definition_text) writes, and what rosbag2 and
    /// Foxglove write: the message's own fields, then each type it uses after a line of
    /// `=` and `MSG: pkg/Name`), with no install behind them. The text must be whole:
    /// a type it uses but does not define, a type that contains itself, or nesting
    /// deeper than [`MAX_DEPTH`] is a [`LoadError`] (the text may come from anyone).
    ///
    /// ```
    /// use iox_ros2::library::{Library, LoadError};
    /// let text = "demo/Stamp stamp\n====\nMSG: demo/Stamp\nint32 sec\n";
    /// let lib = Library::from_definition_text("demo/msg/Tick", text)?;
    /// assert_eq!(lib.get("demo/msg/Stamp").unwrap().fields[0].name, "sec");
    /// let endless = Library::from_definition_text("evil/msg/Loop", "evil/Loop next\n");
    /// assert!(matches!(endless, Err(LoadError::Recursive(_))));
    /// let missing = Library::from_definition_text("demo/msg/Tick", "demo/Stamp stamp\n");
    /// assert!(matches!(missing, Err(LoadError::Undefined { .. })));
    /// # Ok::<(), LoadError>(())
    /// ```
    pub fn from_definition_text(name: &str, text: &str) -> Result<Self, LoadError> {
        let mut lib = Self::with_prefixes(Vec::new());
        let mut current = full_name(name).unwrap_or_else(|| name.to_owned());
        let mut body = String::new();
        let flush = |current: &str, body: &mut String, lib: &mut Self| -> Result<(), ParseError> {
            let def = msg::parse(current, "ros2msg definition", body)?;
            lib.defs.insert(def.name.clone(), def);
            body.clear();
            Ok(())
        };
        let mut lines = text.lines().peekable();
        while let Some(line) = lines.next() {
            let separator = line.len() >= 3 && line.trim_end().chars().all(|c| c == '=');
            if separator && let Some(next) = lines.peek().and_then(|l| l.strip_prefix("MSG:")) {
                let next = next.trim().to_owned();
                lines.next();
                flush(&current, &mut body, &mut lib)?;
                current = full_name(&next).unwrap_or(next);
                continue;
            }
            body.push_str(line);
            body.push('\n');
        }
        flush(&current, &mut body, &mut lib)?;
        lib.check_whole()?;
        Ok(lib)
    }

    /// Checks that every type held uses only types held, none contains itself and
    /// none nests deeper than [`MAX_DEPTH`]: a depth-first walk with a stack of its
    /// own (no recursion), each type finished once.
    fn check_whole(&self) -> Result<(), LoadError> {
        // Types whose walk is finished, with the depth below them.
        let mut done: BTreeMap<&str, usize> = BTreeMap::new();
        for top in self.defs.keys() {
            if done.contains_key(top.as_str()) {
                continue;
            }
            // The path from `top` down: (type, next field to look at).
            let mut path: Vec<(&str, usize)> = vec![(top, 0)];
            while let Some(&mut (name, ref mut next)) = path.last_mut() {
                let def = &self.defs[name];
                let Some(field) = def.fields.get(*next) else {
                    let below = def
                        .fields
                        .iter()
                        .filter_map(|f| match &f.base {
                            BaseType::Message(m) => done.get(m.as_str()).map(|d| d + 1),
                            _ => None,
                        })
                        .max()
                        .unwrap_or(0);
                    done.insert(name, below);
                    path.pop();
                    continue;
                };
                *next += 1;
                let BaseType::Message(used) = &field.base else {
                    continue;
                };
                if done.contains_key(used.as_str()) {
                    // `used` is `path.len()` types below `top`, with its own depth below.
                    if path.len() + done[used.as_str()] > MAX_DEPTH {
                        return Err(LoadError::TooDeep(top.clone()));
                    }
                    continue;
                }
                if path.iter().any(|(on, _)| on == used) {
                    return Err(LoadError::Recursive(used.clone()));
                }
                let Some((used, _)) = self.defs.get_key_value(used) else {
                    return Err(LoadError::Undefined {
                        name: used.clone(),
                        user: name.to_owned(),
                    });
                };
                // `used` would be `path.len()` types below `top`.
                if path.len() > MAX_DEPTH {
                    return Err(LoadError::TooDeep(top.clone()));
                }
                path.push((used, 0));
            }
        }
        Ok(())
    }

    /// Adds a definition made elsewhere (generated, see [`crate::generate`]); it is
    /// found before the install's files.
    pub fn insert(&mut self, def: MsgDef) {
        self.defs.insert(def.name.clone(), def);
    }

    /// A definition loaded before (by [`load`](Self::load) of it or of a type using it).
    pub fn get(&self, full_name: &str) -> Option<&MsgDef> {
        self.defs.get(full_name)
    }

    /// The definition of `name` and every type it uses, as MCAP's `ros2msg` encoding
    /// and rosbag2 hold it: the message's fields, then each type it uses (first use
    /// first, once) after a line of 80 `=` and `MSG: pkg/Name`. Fields only: comments
    /// and constants are left out, as they do not change the encoding.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let msg = dir.path().join("share/demo/msg");
    /// # std::fs::create_dir_all(&msg).unwrap();
    /// # std::fs::write(msg.join("Stamp.msg"), "int32 sec # seconds\nuint32 nanosec\n").unwrap();
    /// # std::fs::write(msg.join("Tick.msg"), "Stamp stamp\nstring label\n").unwrap();
    /// let mut ros = iox_ros2::library::Library::with_prefixes(vec![dir.path().to_owned()]);
    /// let text = ros.definition_text("demo/msg/Tick")?;
    /// assert_eq!(text, format!("demo/Stamp stamp\nstring label\n{}\nMSG: demo/Stamp\nint32 sec\nuint32 nanosec\n", "=".repeat(80)));
    /// # Ok::<(), iox_ros2::library::LoadError>(())
    /// ```
    pub fn definition_text(&mut self, name: &str) -> Result<String, LoadError> {
        let top = self.load(name)?.name.clone();
        let mut order = vec![top];
        let mut i = 0;
        while i < order.len() {
            for field in &self.defs[&order[i]].fields {
                if let BaseType::Message(m) = &field.base
                    && !order.contains(m)
                {
                    order.push(m.clone());
                }
            }
            i += 1;
        }
        let mut text = String::new();
        for (i, full) in order.iter().enumerate() {
            if i > 0 {
                text.push_str(&"=".repeat(80));
                text.push_str(&format!("\nMSG: {}\n", short_name(full)));
            }
            for field in &self.defs[full].fields {
                let base = match &field.base {
                    BaseType::Message(m) => short_name(m),
                    other => other.to_string(),
                };
                let suffix = field
                    .type_text()
                    .strip_prefix(&field.base.to_string())
                    .unwrap_or("")
                    .to_owned();
                text.push_str(&format!("{base}{suffix} {}\n", field.name));
            }
        }
        Ok(text)
    }

    fn load_full(&mut self, full: &str, stack: &mut Vec<String>) -> Result<(), LoadError> {
        if self.defs.contains_key(full) {
            return Ok(());
        }
        if stack.iter().any(|s| s == full) {
            return Err(LoadError::Recursive(full.to_owned()));
        }
        // `full` is `stack.len()` types below the one loaded first.
        if stack.len() > MAX_DEPTH {
            return Err(LoadError::TooDeep(stack[0].clone()));
        }
        let def = self.read(full)?;
        stack.push(full.to_owned());
        for field in &def.fields {
            if let BaseType::Message(m) = &field.base {
                self.load_full(m, stack)?;
            }
        }
        stack.pop();
        self.defs.insert(full.to_owned(), def);
        Ok(())
    }

    /// Reads and parses `pkg/msg/Name` from the first prefix that has it.
    fn read(&self, full: &str) -> Result<MsgDef, LoadError> {
        let (pkg, name) = full
            .split_once("/msg/")
            .ok_or_else(|| LoadError::Name(full.to_owned()))?;
        let relative = Path::new("share")
            .join(pkg)
            .join("msg")
            .join(format!("{name}.msg"));
        for prefix in &self.prefixes {
            let path = prefix.join(&relative);
            match std::fs::read_to_string(&path) {
                Ok(text) => return Ok(msg::parse(full, &path, &text)?),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => return Err(LoadError::Read { path, source }),
            }
        }
        Err(LoadError::NotInstalled {
            name: full.to_owned(),
            relative,
            looked: self.prefixes.clone(),
        })
    }
}

/// `pkg/Name` for `pkg/msg/Name`, as definitions refer to other types.
fn short_name(full: &str) -> String {
    full.replacen("/msg/", "/", 1)
}

/// `pkg/msg/Name` for `pkg/msg/Name` or `pkg/Name`.
pub fn full_name(name: &str) -> Option<String> {
    let parts: Vec<&str> = name.split('/').collect();
    let valid = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    match parts.as_slice() {
        [pkg, name] if valid(pkg) && valid(name) => Some(format!("{pkg}/msg/{name}")),
        [pkg, "msg", name] if valid(pkg) && valid(name) => Some(format!("{pkg}/msg/{name}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn install(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (rel, text) in files {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn nested_types_load_once_and_missing_ones_name_where_it_looked() {
        let dir = install(&[
            ("share/geo/msg/Point.msg", "float64 x\nfloat64 y\n"),
            ("share/geo/msg/Segment.msg", "Point a\ngeo/Point b\n"),
            ("share/geo/msg/Loop.msg", "Loop next\n"),
            ("share/geo/msg/Bad.msg", "float64 x\nfloat64\n"),
            ("share/geo/msg/Gap.msg", "other/Missing m\n"),
        ]);
        let mut lib = Library::with_prefixes(vec![dir.path().to_owned()]);
        let seg = lib.load("geo/msg/Segment").unwrap();
        assert_eq!(seg.fields.len(), 2);
        assert!(lib.get("geo/msg/Point").is_some());
        assert!(matches!(lib.load("geo/Loop"), Err(LoadError::Recursive(_))));
        let e = lib.load("geo/msg/Bad").unwrap_err().to_string();
        assert!(e.contains("Bad.msg:2"), "{e}");
        let e = lib.load("geo/msg/Gap").unwrap_err().to_string();
        assert!(
            e.contains("other/msg/Missing") && e.contains(&dir.path().display().to_string()),
            "{e}"
        );
        assert!(matches!(lib.load("not a type"), Err(LoadError::Name(_))));
    }

    /// `n` types in a chain, `chain/T0` using `chain/T1` ... , as a definition text.
    fn chain_text(n: usize) -> String {
        let mut text = String::from("chain/T1 next\n");
        for i in 1..n {
            text.push_str(&format!("{}\nMSG: chain/T{i}\n", "=".repeat(80)));
            if i + 1 < n {
                text.push_str(&format!("chain/T{} next\n", i + 1));
            } else {
                text.push_str("int32 end\n");
            }
        }
        text
    }

    /// Definition texts come from other users' services and from files: a type that
    /// uses itself, one that uses a type the text does not define, and a chain of any
    /// length are refused with their error, never followed until the stack overflows.
    #[test]
    fn definition_texts_that_would_never_end_are_refused() {
        let looped = Library::from_definition_text("evil/msg/Loop", "evil/Loop next\n");
        assert!(
            matches!(looped, Err(LoadError::Recursive(ref t)) if t == "evil/msg/Loop"),
            "{looped:?}"
        );
        let two = "evil/B b\n================\nMSG: evil/B\nevil/A a\n";
        assert!(matches!(
            Library::from_definition_text("evil/msg/A", two),
            Err(LoadError::Recursive(_))
        ));
        let missing = Library::from_definition_text("evil/msg/A", "evil/Gone g\n").unwrap_err();
        assert!(
            matches!(&missing, LoadError::Undefined { name, user } if name == "evil/msg/Gone" && user == "evil/msg/A"),
            "{missing}"
        );
        Library::from_definition_text("chain/msg/T0", &chain_text(MAX_DEPTH)).unwrap();
        for n in [MAX_DEPTH + 2, 100_000] {
            let deep = Library::from_definition_text("chain/msg/T0", &chain_text(n));
            assert!(matches!(deep, Err(LoadError::TooDeep(_))), "{n}: {deep:?}");
        }
    }

    /// The same from an install: a chain of files longer than [`MAX_DEPTH`].
    #[test]
    fn an_installed_chain_deeper_than_the_limit_is_refused() {
        let files: Vec<(String, String)> = (0..MAX_DEPTH + 5)
            .map(|i| (format!("share/chain/msg/T{i}.msg"), format!("T{} next\n", i + 1)))
            .collect();
        let refs: Vec<(&str, &str)> = files.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        let dir = install(&refs);
        let mut lib = Library::with_prefixes(vec![dir.path().to_owned()]);
        assert!(matches!(lib.load("chain/T0"), Err(LoadError::TooDeep(_))));
    }
}
