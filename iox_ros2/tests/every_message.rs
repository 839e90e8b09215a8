//! Every message type the ROS 2 install holds, in every sequence, string and array form,
//! against what rclpy (Fast CDR) writes and reads: generated over the `.msg` files of
//! the ROS venv, not a hand list.
//!
//! A Python process from the ROS venv builds, for each message type installed
//! (`share/<pkg>/msg/*.msg`), four messages: `empty` (every sequence and string
//! empty), `one` (one element each), `full` (three elements, or the bound, nested
//! messages filled the same way) and `alternate` (one element, then none, then one:
//! what a robot's `JointState` with positions but no velocities is), with
//! every number distinct (negative, past 2^63 for `uint64`, multi-byte UTF-8 in strings),
//! and serialises them with `rclpy.serialization`. Here each message must pass
//! `cdr::check` (what the gateway's import and export, and `iox replay`, call), decode
//! (`value::decode`, what `iox echo` prints) to exactly the fields rclpy set, and encode
//! back (`value::encode`) to no more bytes; a second Python process then reads the
//! bytes encoded here with rclpy and compares them with the message it built.
//!
//! What it pins down: Fast CDR writes an empty sequence as its count alone (no padding
//! to the element's alignment), and its serialised length may still count that padding
//! (bytes at the end nobody wrote); a reader that aligned there read the next count
//! from garbage (a `JointState` with empty `velocity`/`effort`: "field `effort` needs
//! 32740 bytes").
//!
//! Needs the ROS venv (`scripts/ros-venv.sh DIR`; `IOX_ROS_VENV=DIR`). Without it the
//! test says so and skips, unless `IOX_REQUIRE_ROS=1` (CI) makes that a failure.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use iox_ros2::cdr;
use iox_ros2::library::Library;

use common::{hex, unhex};
use iox_ros2::value::{self, Value};

/// The Python side. `gen`: a JSON line per message `{type, variant, hex, fields}`.
/// `verify`: reads `{type, variant, hex}` lines and prints, for each, `ok` or what
/// rclpy decoded differently.
const PEER: &str = r#"
import importlib, json, os, sys
from rclpy.serialization import serialize_message, deserialize_message
from rosidl_parser.definition import (AbstractNestedType, AbstractString, AbstractWString,
    Array, BasicType, BoundedSequence, BoundedString, BoundedWString, NamespacedType)

def types():
    share = os.path.join(sys.prefix, "share")
    for pkg in sorted(os.listdir(share)):
        d = os.path.join(share, pkg, "msg")
        if os.path.isdir(d):
            for f in sorted(os.listdir(d)):
                if f.endswith(".msg"):
                    yield f"{pkg}/msg/{f[:-4]}"

def cls_of(name):
    pkg, kind, cls = name.split("/")
    return getattr(importlib.import_module(f"{pkg}.{kind}"), cls)

class Gen:
    def __init__(self, variant):
        self.variant, self.k, self.seqs = variant, 0, 0
    def n(self, bound=None):
        self.seqs += 1
        n = {"empty": 0, "one": 1, "full": 3, "alternate": self.seqs % 2}[self.variant]
        return n if bound is None else min(n, bound)
    def basic(self, t):
        self.k += 1
        k = self.k
        name = t.typename
        if name == "boolean": return k % 2 == 1
        if name == "octet": return bytes([(k * 7) % 256])
        if name in ("char", "uint8"): return (k * 7) % 256
        if name == "int8": return -((k * 3) % 128)
        if name == "int16": return -((k * 1001) % 32768)
        if name == "uint16": return (k * 1001) % 65536
        if name == "int32": return -((k * 100003) % 2**31)
        if name == "uint32": return 2**31 + k
        if name == "int64": return -(k * 10**12 + 5)
        if name == "uint64": return 2**63 + k
        if name == "float": return k + 0.25
        if name == "double": return -(k * 1e10 + 0.5)
        raise ValueError(f"basic type {name}")
    def text(self, t, wide):
        self.k += 1
        s = ("wé" if wide else "sé") + str(self.k)
        if self.variant == "empty": s = ""
        if isinstance(t, (BoundedString, BoundedWString)):
            s = s[: t.maximum_size] if wide else s.encode()[: t.maximum_size].decode(errors="ignore")
        return s
    def one(self, t):
        if isinstance(t, BasicType): return self.basic(t)
        if isinstance(t, AbstractWString): return self.text(t, True)
        if isinstance(t, AbstractString): return self.text(t, False)
        if isinstance(t, NamespacedType):
            return self.message(cls_of("/".join(t.namespaces + [t.name])))
        raise ValueError(f"type {t}")
    def value(self, t):
        if isinstance(t, Array):
            return [self.one(t.value_type) for _ in range(t.size)]
        if isinstance(t, AbstractNestedType):
            bound = t.maximum_size if isinstance(t, BoundedSequence) else None
            return [self.one(t.value_type) for _ in range(self.n(bound))]
        return self.one(t)
    def message(self, cls):
        m = cls()
        for name, t in zip(cls.get_fields_and_field_types(), cls.SLOT_TYPES):
            setattr(m, name, self.value(t))
        return m

def dump(v):
    if hasattr(v, "get_fields_and_field_types"):
        return {k: dump(getattr(v, k)) for k in v.get_fields_and_field_types()}
    if isinstance(v, bytes) and len(v) == 1: return v[0]
    if hasattr(v, "tolist"): v = v.tolist()
    if isinstance(v, (list, tuple)): return [dump(x) for x in v]
    return v

def build(name, variant):
    return Gen(variant).message(cls_of(name))

if sys.argv[1] == "gen":
    for name in types():
        for variant in ("empty", "one", "full", "alternate"):
            m = build(name, variant)
            print(json.dumps({"type": name, "variant": variant,
                              "hex": serialize_message(m).hex(), "fields": dump(m)}), flush=True)
else:
    for line in sys.stdin:
        req = json.loads(line)
        want = build(req["type"], req["variant"])
        try:
            got = deserialize_message(bytes.fromhex(req["hex"]), cls_of(req["type"]))
            print("ok" if got == want else f"differs: {dump(got)} != {dump(want)}", flush=True)
        except Exception as e:
            print(f"refused: {e}", flush=True)
"#;

fn json(v: &Value) -> serde_json::Value {
    match v {
        Value::Bool(b) => (*b).into(),
        Value::Int(n) => (*n).into(),
        Value::UInt(n) => (*n).into(),
        Value::Float(f) => serde_json::Number::from_f64(*f).map_or(serde_json::Value::Null, Into::into),
        Value::Text(t) => t.as_str().into(),
        Value::Array(items) => items.iter().map(json).collect(),
        Value::More(n) => panic!("{n} elements left undecoded"),
        Value::Message(fields) => fields
            .iter()
            .map(|(k, v)| (k.clone(), json(v)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
    }
}

fn python(venv: &std::path::Path, mode: &str) -> Command {
    let mut cmd = Command::new(venv.join("bin/python"));
    cmd.args(["-c", PEER, mode]);
    cmd
}

#[test]
fn every_installed_message_matches_what_rclpy_writes_and_reads() {
    const TEST: &str = "every_installed_message_matches_what_rclpy_writes_and_reads";
    let Some(venv) = std::env::var_os("IOX_ROS_VENV").map(PathBuf::from) else {
        iox_testkit::skip(
            TEST,
            "IOX_REQUIRE_ROS",
            "IOX_ROS_VENV is not set (scripts/ros-venv.sh DIR makes one)",
        );
        return;
    };
    let generated = python(&venv, "gen").output().unwrap();
    assert!(
        generated.status.success(),
        "{}",
        String::from_utf8_lossy(&generated.stderr)
    );
    let mut library = Library::with_prefixes(vec![venv.clone()]);
    let mut failures = Vec::new();
    let mut ours = Vec::new();
    let mut types = std::collections::BTreeSet::new();
    let lines: Vec<serde_json::Value> = String::from_utf8(generated.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for line in &lines {
        let name = line["type"].as_str().unwrap();
        let variant = line["variant"].as_str().unwrap();
        types.insert(name.to_owned());
        let theirs = unhex(line["hex"].as_str().unwrap());
        let case = format!("{name} ({variant}, {} bytes)", theirs.len());
        if let Err(e) = cdr::check(&mut library, name, &theirs) {
            failures.push(format!("{case}: check refused rclpy's message: {e}"));
            continue;
        }
        let decoded = match value::decode(&mut library, name, &theirs, usize::MAX) {
            Ok(v) => v,
            Err(e) => {
                failures.push(format!("{case}: decode refused: {e}"));
                continue;
            }
        };
        if json(&decoded) != line["fields"] {
            failures.push(format!(
                "{case}: decoded {} but rclpy set {}",
                json(&decoded),
                line["fields"]
            ));
            continue;
        }
        let mut encoded = Vec::new();
        if let Err(e) = value::encode(&mut library, name, &decoded, &mut encoded) {
            failures.push(format!("{case}: encode refused its own decode: {e}"));
            continue;
        }
        // Ours is padded to 4, as on the wire. rclpy's length is Fast CDR's estimate,
        // which counts alignment before the elements of an empty sequence that its
        // writer does not write: a `JointState` with empty `velocity` and `effort`
        // ends in 8 bytes of whatever the buffer held. Ours is never longer, and rclpy
        // reads it back to the same message (below).
        if encoded.len() > theirs.len().next_multiple_of(4) {
            failures.push(format!(
                "{case}: encoded to {} bytes, rclpy wrote {}\n ours   {}\n theirs {}",
                encoded.len(),
                theirs.len(),
                hex(&encoded),
                hex(&theirs)
            ));
            continue;
        }
        ours.push(serde_json::json!({"type": name, "variant": variant, "hex": hex(&encoded)}));
    }
    // Every package the venv installs, and each type in all four forms.
    assert!(types.len() >= 100, "only {} message types found", types.len());
    assert_eq!(lines.len(), 4 * types.len());
    let mut verify = python(&venv, "verify")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = verify.stdin.take().unwrap();
    for o in &ours {
        writeln!(input, "{o}").unwrap();
    }
    drop(input);
    let verified = verify.wait_with_output().unwrap();
    let answers = String::from_utf8(verified.stdout).unwrap();
    assert_eq!(answers.lines().count(), ours.len(), "verify stopped early");
    for (o, answer) in ours.iter().zip(answers.lines()) {
        if answer != "ok" {
            failures.push(format!(
                "{} ({}): rclpy read ours: {answer}",
                o["type"], o["variant"]
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} messages failed:\n{}",
        failures.len(),
        lines.len(),
        failures.join("\n")
    );
}
