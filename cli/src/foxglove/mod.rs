//! `iox foxglove [GLOBS]`: every matching publish-subscribe service, live in Foxglove
//! (or Lichtblick) over the Foxglove WebSocket protocol, without ROS.
//!
//! What it does:
//! - serves `ws://127.0.0.1:8765` (`--listen HOST:PORT` to listen elsewhere; the
//!   default keeps the data on this machine);
//! - advertises one channel per matching service (default: every service), its topic
//!   `/` + the service name and its schema what the service records (`iox_cli::foxglove_form`),
//!   appearing and disappearing as services do (the root is listed every
//!   [`RESCAN_EVERY`]; a service re-created with another config is a new channel);
//! - opens a service, and a subscriber of it, only while some client subscribes to its
//!   channel, and closes them when the last one leaves; the open runs off this thread
//!   (`iox_service::opener`, short timeout, back-off), so one service whose holders
//!   do not answer delays no other;
//! - copies each sample out of shared memory at once and releases it, converts it
//!   (`Form::encode`), and queues the message for each subscribed client
//!   ([`outbox`]): a bounded queue per client (`--backlog` samples, `--backlog-bytes`)
//!   that drops the oldest when the client reads too slowly. Drops are counted per
//!   client and channel, shown to the client as a status warning (Foxglove lists it
//!   under problems) at most every [`TELL_EVERY`], and printed here; so a slow or
//!   stalled client never holds a publisher's chunk or makes the publisher wait (this
//!   subscriber's own queue overflows only if this thread falls behind, as any slow
//!   subscriber's would);
//! - admits at most `--max-clients` clients, and from this machine only its own user
//!   and root (`peer`: a client on this machine would see this user's services),
//!   unless `--allow-other-users`; clients from other machines reach it only where
//!   `--listen` names an address beyond loopback, and are not authenticated;
//! - survives clients that vanish mid-message, connect and disconnect in loops, or send
//!   garbage ([`server`]).
//!
//! Decision: a subcommand of `iox` rather than a binary of its own: it is one more way
//! to look at services, next to `echo` and `record`, and shares their service
//! matching, opening and conversions (`topic`, `ros_form`, `value`, `foxglove_form`); the price is the
//! tokio and WebSocket crates in the tool's build.
//!
//! Decision: the protocol's messages are the official SDK's (`foxglove::ws_protocol`:
//! every server message encoded and every client message parsed by it), the WebSocket
//! server around them is this module's (`server`), on tokio-tungstenite as the SDK's
//! is. The SDK's own server (0.30) was tried first and does not do what this command
//! must: it drops a slow client's oldest messages without counting them anywhere
//! (its per-client queue is private), and it accepts only the `foxglove.sdk.v1`
//! subprotocol, which the protocol's reference client (`@foxglove/ws-protocol`, and
//! viewers built on it, such as Lichtblick, a fork of Foxglove Studio) does not offer:
//! it offers `foxglove.websocket.v1`, the specification's name for the same messages.
//! This server accepts both.
//!
//! Capabilities offered: none beyond subscribing (no client publishing, parameters,
//! services or assets); clients asking for them are told so in a status message.

mod outbox;
mod peer;
mod server;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use iox_service::opener::{Backoff, DAEMON_OPEN_TIMEOUT, Opener};
use iox_service::{
    CallbackProgression, Service, StaticConfig, Subscriber, TensorSubscriber, WaitSet, WaitSetRunResult,
};

use self::outbox::Limits;
use self::server::{Admission, Server};
use crate::record::now_ns;
use crate::topic::{Topic, glob_match};
use crate::{Failure, fail};
use iox_cli::foxglove_form::{Copied, Encoding, Form, form_of};

/// How often the root is listed for services that came or went.
pub const RESCAN_EVERY: Duration = Duration::from_millis(500);
/// How often clients that lost samples are told.
pub const TELL_EVERY: Duration = Duration::from_secs(1);
/// Longest the bridge waits for samples before it looks at subscriptions again.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// What `iox foxglove` was asked for.
#[derive(clap::Args)]
pub struct FoxgloveArgs {
    /// Service names or globs ('robot/*'); default: every service.
    pub services: Vec<String>,
    /// Address to listen on (HOST:PORT; port 0 picks a free one, printed at start).
    #[arg(long, default_value = "127.0.0.1:8765")]
    pub listen: String,
    /// Samples queued per client; beyond it the oldest are dropped (and counted).
    #[arg(long, default_value_t = 256)]
    pub backlog: usize,
    /// Message bytes queued per client (K, M, G); beyond it the oldest are dropped.
    #[arg(long, value_parser = crate::parse_size, default_value = "64M")]
    pub backlog_bytes: u64,
    /// Clients served at once; more are refused.
    #[arg(long, default_value_t = 16)]
    pub max_clients: usize,
    /// Let other users of this machine connect (by default only this user and root
    /// may: they would see this user's services).
    #[arg(long)]
    pub allow_other_users: bool,
    /// Stop after this long (default: until Ctrl-C / SIGTERM).
    #[arg(long, value_parser = crate::events::parse_duration)]
    pub duration: Option<Duration>,
}

/// A service shown as a channel.
struct Shown {
    id: u64,
    config: StaticConfig,
    form: Form,
    /// Samples not shown (see `Form::encode`), and whether that was said.
    unshown: u64,
    said: bool,
}

/// The subscriber of a shown service, while a client subscribes.
enum Port {
    Plain(Subscriber<[u8]>),
    Tensor(TensorSubscriber),
}

impl AsFd for Port {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Port::Plain(s) => s.as_fd(),
            Port::Tensor(s) => s.as_fd(),
        }
    }
}

/// An open service and its subscriber, by channel.
struct Live {
    name: String,
    topic: Topic,
    port: Port,
}

/// `iox foxglove`.
pub fn foxglove(root: &Path, args: FoxgloveArgs) -> Result<u8, Failure> {
    if args.backlog == 0 {
        return Err(fail(2, "--backlog must be at least 1"));
    }
    let patterns = if args.services.is_empty() {
        vec!["*".to_owned()]
    } else {
        args.services.clone()
    };
    let limits = Limits {
        messages: args.backlog,
        bytes: usize::try_from(args.backlog_bytes).unwrap_or(usize::MAX),
    };
    let admission = Admission {
        max_clients: args.max_clients,
        other_users: args.allow_other_users,
    };
    let server = Server::start(&args.listen, limits, admission).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::InvalidInput {
            " (give HOST:PORT, e.g. 127.0.0.1:8765 or [::1]:8765)"
        } else {
            ""
        };
        fail(2, format!("cannot listen on {}: {e}{hint}", args.listen))
    })?;
    let addr = server.addr();
    eprintln!(
        "iox foxglove: serving {} on ws://{addr} (Foxglove or Lichtblick: Open connection, Foxglove WebSocket)",
        patterns.join(" "),
    );
    if !addr.ip().is_loopback() {
        eprintln!(
            "iox foxglove: listening beyond this machine{}: clients from other machines are not authenticated, and see every service shown",
            if addr.ip().is_unspecified() {
                format!(" (every address of it: ws://HOST:{})", addr.port())
            } else {
                String::new()
            }
        );
    }
    let waitset = WaitSet::new().map_err(|e| fail(2, e.to_string()))?;
    let end = args.duration.and_then(|d| Instant::now().checked_add(d));
    let mut bridge = Bridge {
        root,
        patterns,
        server,
        shown: BTreeMap::new(),
        skipped: HashSet::new(),
        live: BTreeMap::new(),
        opener: Opener::new(Backoff::default()),
        said: HashSet::new(),
        wanted: BTreeSet::new(),
        generation: u64::MAX,
    };
    let mut next_scan = Instant::now();
    let mut next_tell = Instant::now() + TELL_EVERY;
    let mut said_none = false;
    let mut scratch = Vec::new();
    loop {
        if Instant::now() >= next_scan {
            bridge.scan();
            next_scan = Instant::now() + RESCAN_EVERY;
            if bridge.shown.is_empty() && bridge.skipped.is_empty() && !said_none {
                eprintln!(
                    "iox foxglove: no publish-subscribe service matches {} yet (channels appear as services are created)",
                    bridge.patterns.join(" ")
                );
                said_none = true;
            }
        }
        bridge.follow_subscriptions();
        let guards = bridge
            .live
            .values()
            .map(|l| waitset.attach_notification(&l.port))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| fail(2, e.to_string()))?;
        let result = waitset
            .wait_and_process_once_with_timeout(|_| CallbackProgression::Continue, LOOK_EVERY)
            .map_err(|e| fail(2, e.to_string()))?;
        drop(guards);
        bridge.forward(&mut scratch);
        if Instant::now() >= next_tell {
            for r in bridge.server.tell_drops() {
                eprintln!(
                    "iox foxglove: client {} ({} sample(s) sent so far): {}",
                    r.addr,
                    r.sent,
                    r.losses()
                );
            }
            next_tell = Instant::now() + TELL_EVERY;
        }
        if result == WaitSetRunResult::TerminationRequest || end.is_some_and(|e| Instant::now() >= e) {
            break;
        }
    }
    for (name, s) in bridge.shown.iter().filter(|(_, s)| s.unshown > 0) {
        eprintln!("iox foxglove: /{name}: {} sample(s) not shown", s.unshown);
    }
    eprintln!("iox foxglove: stopped");
    Ok(0)
}

/// The bridge's state: which services are channels, and which are open.
struct Bridge<'a> {
    root: &'a Path,
    patterns: Vec<String>,
    server: Server,
    /// Shown services, by name.
    shown: BTreeMap<String, Shown>,
    /// Services not shown (said once), by name, until they leave the root.
    skipped: HashSet<String>,
    /// Open services, by channel.
    live: BTreeMap<u64, Live>,
    opener: Opener<(Topic, Port)>,
    /// Lines said once.
    said: HashSet<String>,
    /// The channels some client subscribes to, as of `generation`.
    wanted: BTreeSet<u64>,
    generation: u64,
}

impl Bridge<'_> {
    fn say_once(&mut self, line: String) {
        if self.said.insert(line.clone()) {
            eprintln!("{line}");
        }
    }

    /// Lists the root: channels for services that came, none for those that went or
    /// changed their config.
    fn scan(&mut self) {
        let Ok(configs) = Service::list_in(self.root) else {
            return; // the root may not exist yet
        };
        let configs: BTreeMap<String, StaticConfig> = configs
            .into_iter()
            .flatten()
            .filter(|c| {
                c.publish_subscribe().is_some() && self.patterns.iter().any(|p| glob_match(p, &c.name))
            })
            .map(|c| (c.name.clone(), c))
            .collect();
        let gone: Vec<String> = self
            .shown
            .iter()
            .filter(|(name, s)| configs.get(*name).is_none_or(|c| *c != s.config))
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            let s = self.shown.remove(&name).expect("listed above");
            self.server.unadvertise(s.id);
            self.live.remove(&s.id);
            self.opener.forget(&name);
            eprintln!("iox foxglove: /{name} went away");
        }
        self.skipped.retain(|name| configs.contains_key(name));
        for (name, config) in configs {
            if self.shown.contains_key(&name) || self.skipped.contains(&name) {
                continue;
            }
            let form = match form_of(&name, &config) {
                Ok(form) => form,
                Err(why) => {
                    eprintln!("iox foxglove: not showing {name}: {why}");
                    self.skipped.insert(name);
                    continue;
                }
            };
            match self.server.advertise(&form.spec) {
                Ok(id) => {
                    eprintln!(
                        "iox foxglove: /{name} ({}, {})",
                        form.spec.schema_name, form.spec.encoding
                    );
                    self.shown.insert(
                        name,
                        Shown {
                            id,
                            config,
                            form,
                            unshown: 0,
                            said: false,
                        },
                    );
                }
                Err(e) => {
                    eprintln!("iox foxglove: not showing {name}: {e}");
                    self.skipped.insert(name);
                }
            }
        }
    }

    /// Opens the services clients subscribe to (off this thread) and closes those no
    /// client subscribes to any more.
    fn follow_subscriptions(&mut self) {
        let generation = self.server.generation();
        if generation != self.generation {
            self.generation = generation;
            self.wanted = self.server.wanted();
            self.live.retain(|id, _| self.wanted.contains(id));
        }
        for f in self.opener.finished() {
            match f.result {
                Ok((topic, port)) => match self.shown.get(&f.name) {
                    Some(s) if self.wanted.contains(&s.id) && topic.config == s.config => {
                        self.live.insert(
                            s.id,
                            Live {
                                name: f.name,
                                topic,
                                port,
                            },
                        );
                    }
                    _ => {} // no longer wanted, or changed meanwhile: closed here
                },
                Err(failed) => {
                    self.say_once(format!(
                        "iox foxglove: cannot open {} yet: {}",
                        f.name, failed.why
                    ));
                }
            }
        }
        for (name, s) in &self.shown {
            if self.wanted.contains(&s.id) && !self.live.contains_key(&s.id) && self.opener.ready(name) {
                let root = self.root.to_owned();
                let config = s.config.clone();
                let tensor = matches!(s.form.encoding, Encoding::TensorImage | Encoding::TensorValues(_));
                self.opener.open(name, move || {
                    let topic = Topic::open_config_within(&root, config, false, Some(DAEMON_OPEN_TIMEOUT))
                        .map_err(|e| e.text)?;
                    let port = if tensor {
                        Port::Tensor(
                            topic
                                .service
                                .tensor_subscriber_builder()
                                .create()
                                .map_err(|e| e.to_string())?,
                        )
                    } else {
                        Port::Plain(topic.subscriber().map_err(|e| e.text)?)
                    };
                    Ok((topic, port))
                });
            }
        }
    }

    /// Copies out, converts and queues every sample waiting on an open service.
    fn forward(&mut self, scratch: &mut Vec<u8>) {
        let mut failed = Vec::new();
        for (&id, live) in &self.live {
            let Some(shown) = self.shown.get_mut(&live.name) else {
                continue;
            };
            loop {
                let at = now_ns();
                scratch.clear();
                let received = match &live.port {
                    Port::Plain(s) => s.receive_raw().map(|sample| {
                        sample.map(|sample| {
                            let copied = live.topic.copy_header_into(&sample, scratch)
                                && live.topic.copy_payload_into(&sample, scratch);
                            (copied, None)
                        })
                    }),
                    Port::Tensor(s) => s
                        .receive()
                        .map(|sample| sample.map(|sample| copy_tensor(&sample, scratch))),
                };
                let (copied, layout) = match received {
                    Ok(Some(r)) => r,
                    Ok(None) => break,
                    Err(e) => {
                        failed.push((id, live.name.clone(), e.to_string()));
                        break;
                    }
                };
                let mut message = Vec::new();
                let encoded = if copied {
                    shown.form.encode(
                        &Copied {
                            bytes: scratch,
                            tensor: layout.as_ref(),
                            at,
                        },
                        &mut message,
                    )
                } else {
                    Err(layout_error(layout.as_ref()))
                };
                match encoded {
                    Ok(()) => self.server.publish(id, at, message),
                    Err(why) => {
                        shown.unshown += 1;
                        if !shown.said {
                            shown.said = true;
                            eprintln!(
                                "iox foxglove: /{}: a sample is not shown: {why} (said once; such samples are counted)",
                                live.name
                            );
                        }
                    }
                }
            }
        }
        // A subscriber that cannot receive (its service damaged): closed, and opened
        // again after the opener's back-off while a client still subscribes.
        for (id, name, why) in failed {
            self.live.remove(&id);
            let f = self.opener.failed_later(&name, why);
            self.say_once(format!("iox foxglove: cannot receive from {name}: {f}"));
        }
    }
}

/// Why a sample could not be copied out.
fn layout_error(layout: Option<&iox_service::tensor::TensorLayout>) -> String {
    match layout {
        Some(l) if !l.is_contiguous() => "a strided tensor (only contiguous tensors are shown)".into(),
        Some(_) | None => "its bytes could not be copied out (padding no schema names)".into(),
    }
}

/// Copies a tensor sample's elements into `out` if it is contiguous; (copied, layout).
fn copy_tensor(
    sample: &iox_service::TensorSample,
    out: &mut Vec<u8>,
) -> (bool, Option<iox_service::tensor::TensorLayout>) {
    let Ok(layout) = sample.tensor() else {
        return (false, None);
    };
    let span = layout.span_bytes().map_or(usize::MAX, |s| s as usize);
    if !layout.is_contiguous() || span > sample.len() {
        return (false, Some(layout));
    }
    // SAFETY: the sample's `len()` bytes at `as_ptr()` are mapped while `sample` lives
    // (`span` is within them, checked above); a contiguous tensor's span is exactly its
    // elements, which its publisher wrote before sending (a strided one may have
    // unwritten bytes between elements, and is not read).
    out.extend_from_slice(unsafe { std::slice::from_raw_parts(sample.as_ptr(), span) });
    (true, Some(layout))
}
