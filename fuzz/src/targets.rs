//! The targets (see the crate docs): one function per decoder, taking any bytes.

use std::path::Path;

use iox_core::attributes::Attributes;
use iox_core::handover::wire;
use iox_core::static_config::StaticConfig;
use iox_core::tensor::{DType, TensorLayout, WORDS};
use iox_ros2::carried::FramedKind;
use iox_ros2::cdr;
use iox_ros2::library::Library;

/// The MCAP schema encodings `iox replay` decodes (see `iox_cli`'s record module).
const ROS2_SCHEMA_ENCODING: &str = "ros2msg";
const CONFIG_SCHEMA_ENCODING: &str = "iox.static_config.ron";
const CONFIG_METADATA: &str = "iox.static_config";

/// An MCAP file as `iox replay` reads it: its messages (`iox_cli::mcap_read`), each
/// channel's schema as replay takes it (a ROS definition, and the message checked
/// against it as CDR; or a static config), and a config in the channel's metadata.
pub fn mcap(data: &[u8]) {
    let _ = iox_cli::mcap_read::messages(data, |m| {
        if let Some(schema) = &m.channel.schema
            && let Ok(text) = std::str::from_utf8(&schema.data)
        {
            match schema.encoding.as_str() {
                ROS2_SCHEMA_ENCODING => {
                    if let Ok(mut library) = Library::from_definition_text(&schema.name, text) {
                        let _ = cdr::check(&mut library, &schema.name, &m.data);
                    }
                }
                CONFIG_SCHEMA_ENCODING => {
                    let _ = StaticConfig::parse(text, Path::new("fuzz"));
                }
                _ => {}
            }
        }
        if let Some(text) = m.channel.metadata.get(CONFIG_METADATA) {
            let _ = StaticConfig::parse(text, Path::new("fuzz"));
        }
        Ok::<(), ()>(())
    });
}

/// A `ros2msg` definition text (MCAP's form: the type's fields, then each type it uses
/// after a `===` line and `MSG: pkg/Name`): the first line is the type's name, the rest
/// the text. One that loads is written again (`definition_text`) and must load to the
/// same fields.
pub fn ros2msg(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (name, text) = text.split_once('\n').unwrap_or((text, ""));
    let Ok(mut library) = Library::from_definition_text(name, text) else {
        return;
    };
    let Ok(written) = library.definition_text(name) else {
        return;
    };
    let again = Library::from_definition_text(name, &written)
        .unwrap_or_else(|e| panic!("a loaded definition, written again, does not load: {e}\n{written}"));
    let top = iox_ros2::library::full_name(name).unwrap_or_else(|| name.to_owned());
    let mut pending = vec![top];
    while let Some(t) = pending.pop() {
        let (a, b) = (library.get(&t), again.get(&t));
        assert_eq!(
            a.map(|d| &d.fields),
            b.map(|d| &d.fields),
            "{t} changed when written again"
        );
        for f in a.map(|d| d.fields.as_slice()).unwrap_or_default() {
            if let iox_ros2::msg::BaseType::Message(m) = &f.base
                && !pending.contains(m)
                && m != &t
            {
                pending.push(m.clone());
            }
        }
    }
}

/// A CDR message against a definition: the bytes up to the first 0 are the definition
/// text of `fuzz/msg/T`, the rest the message (checked against it, decoded to values
/// and encoded from them); the message also as
/// an image and as a point cloud (the framed conversions, which need no definition).
pub fn cdr(data: &[u8]) {
    let (definition, message) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    if let Ok(text) = std::str::from_utf8(definition)
        && let Ok(mut library) = Library::from_definition_text("fuzz/msg/T", text)
    {
        let checked = cdr::check(&mut library, "fuzz/msg/T", message).is_ok();
        // The decoder is the check's walk: it takes exactly what the check takes, and
        // what it makes encodes to a message that decodes and encodes the same again
        // (a string that was not UTF-8 may no longer fit its bound once decoded
        // lossily: then the encoder refuses it, which is what it is for).
        match iox_ros2::value::decode(&mut library, "fuzz/msg/T", message, usize::MAX) {
            Ok(value) => {
                assert!(checked, "decode took a message the check refused");
                let mut once = Vec::new();
                if iox_ros2::value::encode(&mut library, "fuzz/msg/T", &value, &mut once).is_ok() {
                    let again = iox_ros2::value::decode(&mut library, "fuzz/msg/T", &once, usize::MAX)
                        .expect("an encoded message decodes");
                    let mut twice = Vec::new();
                    iox_ros2::value::encode(&mut library, "fuzz/msg/T", &again, &mut twice)
                        .expect("a decoded encoding encodes");
                    assert_eq!(once, twice, "encode(decode(x)) is not stable");
                }
            }
            Err(_) => assert!(!checked, "decode refused a message the check took"),
        }
    }
    for kind in [FramedKind::Image, FramedKind::PointCloud2] {
        if let Ok(sample) = kind.sample_of(message) {
            let mut out = Vec::new();
            assert!(
                kind.cdr_of(&sample, &mut out),
                "{kind:?}: a decoded sample must encode"
            );
        }
    }
}

/// A static config's text, as read from a service's file or a recording: parsed and
/// checked (its payload identity, schema, user header, pattern section and attributes
/// with it); one that parses is written again and must parse to the same config, and
/// what the ROS tools read of its attributes is read.
pub fn static_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = StaticConfig::parse(text, Path::new("fuzz")) else {
        return;
    };
    let again = StaticConfig::parse(&config.to_ron(), Path::new("fuzz"))
        .unwrap_or_else(|e| panic!("a parsed config, written again, does not parse: {e}"));
    assert_eq!(config, again);
    let _ = config.tensor_element();
    let _ = iox_ros2::carried::route_of(&config);
}

/// Service attributes as another user's creator set them: lines `key=value`, each
/// checked as an opener checks them; values read as the ROS 2 gateway reads its QoS
/// attribute and as a ROS type name.
pub fn attributes(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut attributes = Attributes::new();
    for line in text.lines() {
        let (key, value) = line.split_once('=').unwrap_or((line, ""));
        let _ = attributes.insert(key, value);
        let _ = value.parse::<iox_ros2_gateway::qos::Qos>();
        let _ = iox_ros2::library::full_name(value);
    }
    let _ = attributes.check();
}

/// A hand-over message as a peer sends it: as a request and as a reply; a request that
/// parses is the one its stem makes.
pub fn handover(data: &[u8]) {
    if let Some(stem) = wire::parse_request(data) {
        assert_eq!(wire::request(stem), data);
    }
    let _ = wire::parse_reply(data);
}

/// A tensor record's words as a writer left them in shared memory (the bytes cut or
/// padded to the record's size): a record that reads is checked against every element
/// type and a capacity (from the first word), and must read back from its own words.
pub fn tensor_record(data: &[u8]) {
    let mut words = [0u64; WORDS];
    for (w, chunk) in words.iter_mut().zip(data.chunks(8)) {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        *w = u64::from_le_bytes(b);
    }
    let Ok(layout) = TensorLayout::from_words(&words) else {
        return;
    };
    assert_eq!(TensorLayout::from_words(&layout.to_words()), Ok(layout));
    let _ = (layout.span_bytes(), layout.elements(), layout.is_contiguous());
    let capacity = words[0] as usize;
    for dtype in DType::ALL {
        let _ = layout.check(dtype, capacity);
    }
}

/// A process's `smaps` as `iox show` reads it (`/proc/<pid>/smaps`: the kernel writes
/// it, but the mappings' names come from the processes): the first line is the name
/// suffix to look for (with device 0:1 and inode 42, as the seeds' mappings have), the
/// rest the text; looked up by that and by each start address its first lines have, it
/// never panics whatever the text.
pub fn smaps(data: &[u8]) {
    use iox_mempool::pages::{Mapping, parse_smaps};
    let text = String::from_utf8_lossy(data);
    let (suffix, body) = text.split_once('\n').unwrap_or(("", &text));
    let dev = iox_mempool::pages::makedev(0, 1);
    let _ = parse_smaps(body, Mapping::Memfd { dev, ino: 42, suffix });
    for line in body.lines().take(16) {
        if let Some(start) = line
            .split('-')
            .next()
            .and_then(|a| u64::from_str_radix(a, 16).ok())
        {
            let _ = parse_smaps(body, Mapping::At(start));
        }
    }
}

/// A service's static config (RON, up to the first NUL byte) and one sample as `iox
/// foxglove` copies it out of shared memory (the rest): the config's Foxglove form is
/// made (`iox_cli::foxglove_form`), and the sample converted to its message, never
/// panicking. On a tensor service the sample's first 3 bytes are its shape (each a
/// dimension, a 0 ends it), as its tensor record would give it.
pub fn foxglove_sample(data: &[u8]) {
    use iox_cli::foxglove_form::{Copied, form_of};
    let Some(nul) = data.iter().position(|&b| b == 0) else {
        return;
    };
    let Ok(text) = std::str::from_utf8(&data[..nul]) else {
        return;
    };
    let Ok(config) = StaticConfig::parse(text, Path::new("fuzz")) else {
        return;
    };
    let Ok(form) = form_of("fuzz", &config) else {
        return;
    };
    let mut sample = &data[nul + 1..];
    let mut layout = None;
    if let Some(dtype) = config.tensor_element() {
        let (dims, rest) = sample.split_at(sample.len().min(3));
        let shape: Vec<usize> = dims
            .iter()
            .take_while(|&&d| d != 0)
            .map(|&d| usize::from(d))
            .collect();
        layout = TensorLayout::contiguous(dtype, &shape).ok();
        sample = rest;
    }
    let mut out = Vec::new();
    let _ = form.encode(
        &Copied {
            bytes: sample,
            tensor: layout.as_ref(),
            at: 0,
        },
        &mut out,
    );
}

/// A message a Foxglove client sends `iox foxglove` (a WebSocket text or binary
/// message): parsed as both by the protocol's decoder the server uses.
pub fn foxglove_client(data: &[u8]) {
    use foxglove::ws_protocol::client::ClientMessage;
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = ClientMessage::parse_json(text);
    }
    let _ = ClientMessage::parse_binary(data);
}
