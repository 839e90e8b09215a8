//! The WebSocket side of `iox foxglove`: a server speaking the Foxglove WebSocket
//! protocol (its messages encoded and parsed by the SDK, `foxglove::ws_protocol`) to
//! any number of clients, each with its own [`Outbox`].
//!
//! Threads: the server runs on one thread of its own (a current-thread tokio runtime):
//! it accepts connections, and per client a reader (subscriptions, garbage) and a
//! writer (the outbox, in order). The bridge calls in from its thread
//! ([`Server::advertise`], [`Server::publish`], ...); those calls take a lock, queue,
//! and wake the writers: they never wait on a client.
//!
//! Invariants:
//! - a client learns of every channel before any of its samples (the advertisement is
//!   queued, as control, when the channel is made or the client connects, under the
//!   lock that publishing takes too);
//! - a subscription refers to an advertised channel; unadvertising a channel ends
//!   every subscription of it (the client is told, as the protocol says);
//! - [`Server::wanted`] changes only with [`Server::generation`], so the bridge looks
//!   it up only when a subscription came or went;
//! - admission: at most `max_clients` connections at once, handshakes in flight
//!   included (HTTP 503 beyond), and from this machine only this process's own user and
//!   root unless other users were allowed (HTTP 403; see `peer`);
//! - a client is disconnected when it leaves [`super::outbox::CONTROL_MAX`] control
//!   messages unread (at once, even mid-send), or when one message takes longer than
//!   [`STALLED_FOR`] to go out (it reads nothing at all);
//! - handshakes: the client must offer `foxglove.websocket.v1` (the subprotocol the
//!   protocol's specification names, which its reference client
//!   `@foxglove/ws-protocol` offers) or `foxglove.sdk.v1` (the SDK's name for the same
//!   messages); others get HTTP 400. A connection that does
//!   not finish its handshake within [`HANDSHAKE`] is closed; a client message longer
//!   than [`MAX_CLIENT_MESSAGE`] closes the connection (clients send only small JSON);
//!   any message that is not a subscribe or unsubscribe is answered with an error
//!   status and otherwise ignored.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use foxglove::ws_protocol::client::{ClientMessage, Subscription};
use foxglove::ws_protocol::schema::Schema;
use foxglove::ws_protocol::server::advertise::Channel;
use foxglove::ws_protocol::server::status::Level;
use foxglove::ws_protocol::server::{Advertise, MessageData, ServerInfo, Status, Unadvertise};
use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use iox_cli::foxglove_form::ChannelSpec;

use super::outbox::{Data, Limits, Next, Outbox};
use super::peer::{self, Peer};

/// Subprotocols accepted, in the order preferred.
pub const SUBPROTOCOLS: [&str; 2] = ["foxglove.websocket.v1", "foxglove.sdk.v1"];
/// Longest a connection may take to finish its WebSocket handshake.
pub const HANDSHAKE: Duration = Duration::from_secs(5);
/// Longest client message read (subscribe and unsubscribe messages are small).
pub const MAX_CLIENT_MESSAGE: usize = 1 << 20;
/// Longest one message may take to go out before its client is disconnected (a client
/// that reads nothing at all holds its slot no longer).
pub const STALLED_FOR: Duration = Duration::from_secs(60);

/// What one client was sent and lost, for the tool's report.
#[derive(Debug, Clone)]
pub struct ClientReport {
    /// Its address.
    pub addr: SocketAddr,
    /// Samples handed to its connection.
    pub sent: u64,
    /// Samples dropped (its queue was full), by topic.
    pub dropped: BTreeMap<String, u64>,
    /// Samples larger than its queue's byte limit, by topic.
    pub too_big: BTreeMap<String, u64>,
}

/// Who may connect.
#[derive(Debug, Clone, Copy)]
pub struct Admission {
    /// Clients served at once; more are refused (HTTP 503).
    pub max_clients: usize,
    /// Whether other users of this machine may connect (module docs of `peer`).
    pub other_users: bool,
}

/// A running server (module docs); stops when dropped.
pub struct Server {
    shared: Arc<Shared>,
    addr: SocketAddr,
    stop: Arc<Notify>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    state: Mutex<State>,
    generation: AtomicU64,
    limits: Limits,
    admission: Admission,
    /// This process's effective uid.
    uid: u32,
    /// Connections admitted and not yet gone (handshakes in flight included).
    admitted: AtomicUsize,
}

#[derive(Default)]
struct State {
    channels: BTreeMap<u64, Channel<'static>>,
    clients: BTreeMap<u64, Arc<Client>>,
    next_channel: u64,
    next_client: u64,
}

/// One connected client.
struct Client {
    addr: SocketAddr,
    outbox: Mutex<Outbox>,
    /// Wakes the writer: something was queued, or the client is to go.
    wake: Notify,
    /// Set when the client is to be disconnected (it left control messages unread).
    kicked: AtomicBool,
    /// Wakes the writer out of a send when the client is kicked.
    kick: Notify,
    /// Its subscriptions: id to channel, and channel to id.
    subs: Mutex<(BTreeMap<u32, u64>, BTreeMap<u64, u32>)>,
    /// Samples dropped that the client was told of.
    told: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while a lock is held is a bug; the data it guards stays usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Client {
    /// Queues a control message; a client with too many unread is disconnected.
    fn control(&self, message: Message) {
        if lock(&self.outbox).push_control(message).is_err() {
            self.kicked.store(true, Ordering::Relaxed);
            self.kick.notify_one();
        }
        self.wake.notify_one();
    }

    fn status(&self, level: Level, text: impl Into<String>) {
        self.control(Message::from(&Status::new(level, text)));
    }
}

impl Server {
    /// Listens on `addr` and serves clients with `limits` of data each; fails if the
    /// address cannot be bound.
    pub fn start(addr: &str, limits: Limits, admission: Admission) -> std::io::Result<Server> {
        let listener = StdListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let bound = listener.local_addr()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            generation: AtomicU64::new(0),
            limits,
            admission,
            uid: rustix::process::geteuid().as_raw(),
            admitted: AtomicUsize::new(0),
        });
        let stop = Arc::new(Notify::new());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (s, st) = (shared.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("foxglove-server".into())
            .spawn(move || runtime.block_on(serve(s, listener, st)))?;
        Ok(Server {
            shared,
            addr: bound,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Advertises a channel to every client (and to each that connects later); its id.
    pub fn advertise(&self, spec: &ChannelSpec) -> Result<u64, String> {
        let mut state = lock(&self.shared.state);
        let id = state.next_channel;
        let channel = Channel::builder(id, spec.topic.clone(), spec.encoding.clone())
            .with_schema(Schema::new(
                spec.schema_name.clone(),
                spec.schema_encoding.clone(),
                spec.schema.clone(),
            ))
            .with_metadata(spec.metadata.clone())
            .build()
            .map_err(|e| e.to_string())?;
        state.next_channel += 1;
        let message = Message::from(&Advertise::new([channel.clone()]));
        for client in state.clients.values() {
            client.control(message.clone());
        }
        state.channels.insert(id, channel);
        Ok(id)
    }

    /// Takes channel `id` away from every client, ending their subscriptions of it.
    pub fn unadvertise(&self, id: u64) {
        let mut state = lock(&self.shared.state);
        if state.channels.remove(&id).is_none() {
            return;
        }
        let message = Message::from(&Unadvertise::new([id]));
        for client in state.clients.values() {
            let mut subs = lock(&client.subs);
            if let Some(sub) = subs.1.remove(&id) {
                subs.0.remove(&sub);
                lock(&client.outbox).forget(sub);
            }
            drop(subs);
            client.control(message.clone());
        }
        self.shared.generation.fetch_add(1, Ordering::Release);
    }

    /// A number that changes whenever [`Server::wanted`] may have.
    pub fn generation(&self) -> u64 {
        self.shared.generation.load(Ordering::Acquire)
    }

    /// The channels some client subscribes to.
    pub fn wanted(&self) -> BTreeSet<u64> {
        let state = lock(&self.shared.state);
        state
            .clients
            .values()
            .flat_map(|c| lock(&c.subs).1.keys().copied().collect::<Vec<_>>())
            .collect()
    }

    /// Queues a sample of channel `id` for every client subscribed to it.
    pub fn publish(&self, id: u64, log_time: u64, bytes: Vec<u8>) {
        let bytes = Arc::new(bytes);
        let state = lock(&self.shared.state);
        for client in state.clients.values() {
            let subs = lock(&client.subs);
            let Some(&subscription) = subs.1.get(&id) else {
                continue;
            };
            lock(&client.outbox).push_data(Data {
                channel: id,
                subscription,
                log_time,
                bytes: bytes.clone(),
            });
            client.wake.notify_one();
        }
    }

    /// Tells each client that lost samples since it was last told, in a status message
    /// (a warning Foxglove shows in its problems list); returns what each lost in all.
    pub fn tell_drops(&self) -> Vec<ClientReport> {
        let state = lock(&self.shared.state);
        let mut reports = Vec::new();
        for client in state.clients.values() {
            let report = report(&state, client);
            let total = report.lost();
            if total > client.told.swap(total, Ordering::Relaxed) {
                client.control(Message::from(
                    &Status::new(Level::Warning, format!("iox {}", report.losses())).with_id("iox.dropped"),
                ));
                reports.push(report);
            }
        }
        reports
    }
}

impl ClientReport {
    /// Samples the client lost, for either reason.
    pub fn lost(&self) -> u64 {
        self.dropped.values().sum::<u64>() + self.too_big.values().sum::<u64>()
    }

    /// What the client lost, in words (by topic).
    pub fn losses(&self) -> String {
        let by_topic = |m: &BTreeMap<String, u64>| {
            m.iter()
                .map(|(t, n)| format!("{t}: {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut parts = Vec::new();
        if !self.dropped.is_empty() {
            parts.push(format!(
                "dropped {} sample(s), the oldest first, as the client read too slowly ({})",
                self.dropped.values().sum::<u64>(),
                by_topic(&self.dropped)
            ));
        }
        if !self.too_big.is_empty() {
            parts.push(format!(
                "sent no {} sample(s) larger than a client's queue holds (--backlog-bytes) ({})",
                self.too_big.values().sum::<u64>(),
                by_topic(&self.too_big)
            ));
        }
        parts.join("; ")
    }
}

/// What `client` was sent and lost so far.
fn report(state: &State, client: &Client) -> ClientReport {
    let outbox = lock(&client.outbox);
    let named = |counts: &BTreeMap<u64, u64>| {
        counts
            .iter()
            .map(|(id, n)| {
                let topic = state
                    .channels
                    .get(id)
                    .map_or_else(|| format!("channel {id} (gone)"), |c| c.topic.to_string());
                (topic, *n)
            })
            .collect()
    };
    ClientReport {
        addr: client.addr,
        sent: outbox.sent(),
        dropped: named(outbox.dropped()),
        too_big: named(outbox.too_big()),
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Accepts connections until told to stop.
async fn serve(shared: Arc<Shared>, listener: StdListener, stop: Arc<Notify>) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("iox foxglove: cannot listen: {e}");
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            loop {
                tokio::select! {
                    _ = stop.notified() => return,
                    accepted = listener.accept() => match accepted {
                        Ok((stream, addr)) => {
                            tokio::task::spawn_local(session(shared.clone(), stream, addr));
                        }
                        // Out of descriptors and the like: the listener stays; try again
                        // after a moment rather than spinning.
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    },
                }
            }
        })
        .await;
}

/// Why a connection from `client` (to this side's `server` address) is refused, if it
/// is: another user of this machine, or one whose user cannot be told (module docs of
/// `peer`).
fn refusal(shared: &Shared, client: SocketAddr, server: SocketAddr) -> Option<(StatusCode, String)> {
    if shared.admission.other_users {
        return None;
    }
    let me = shared.uid;
    match peer::peer(client, server) {
        Peer::Local(uid) if uid == me || uid == 0 => None,
        Peer::Remote => None,
        Peer::Local(uid) => Some((
            StatusCode::FORBIDDEN,
            format!(
                "this iox foxglove was started by uid {me} and shows its services; uid {uid} may not see them (uid {me} can start it with --allow-other-users)"
            ),
        )),
        Peer::Unknown => Some((
            StatusCode::FORBIDDEN,
            "iox foxglove cannot tell which user of this machine is connecting".into(),
        )),
    }
}

/// A connection's slot among `--max-clients`, from before its handshake until it is
/// gone.
struct Slot<'a>(&'a AtomicUsize);

impl<'a> Slot<'a> {
    fn take(admitted: &'a AtomicUsize, max: usize) -> Option<Self> {
        admitted
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(admitted))
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn error_response(status: StatusCode, text: String) -> ErrorResponse {
    let mut response = ErrorResponse::new(Some(text));
    *response.status_mut() = status;
    response
}

/// Picks the subprotocol from the client's offer, or refuses the handshake.
fn choose(request: &Request, mut response: Response) -> Result<Response, ErrorResponse> {
    let offered: Vec<&str> = request
        .headers()
        .get_all("sec-websocket-protocol")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(str::trim))
        .collect();
    match SUBPROTOCOLS.iter().find(|p| offered.contains(p)) {
        Some(p) => {
            response
                .headers_mut()
                .insert("sec-websocket-protocol", HeaderValue::from_static(p));
            Ok(response)
        }
        None => Err(error_response(
            StatusCode::BAD_REQUEST,
            format!(
                "offer one of the WebSocket subprotocols {}",
                SUBPROTOCOLS.join(", ")
            ),
        )),
    }
}

/// One client's connection, from handshake to goodbye.
async fn session(shared: Arc<Shared>, stream: TcpStream, addr: SocketAddr) {
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_CLIENT_MESSAGE))
        .max_frame_size(Some(MAX_CLIENT_MESSAGE));
    let max = shared.admission.max_clients;
    let slot = Slot::take(&shared.admitted, max);
    let refused = match (&slot, stream.local_addr()) {
        (None, _) => Some((
            StatusCode::SERVICE_UNAVAILABLE,
            format!("iox foxglove serves at most {max} client(s) at once (--max-clients)"),
        )),
        (Some(_), Err(e)) => Some((StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
        (Some(_), Ok(server)) => refusal(&shared, addr, server),
    };
    if let Some((_, why)) = &refused {
        eprintln!("iox foxglove: refused {addr}: {why}");
    }
    let callback = move |request: &Request, response: Response| match refused {
        Some((status, why)) => Err(error_response(status, why)),
        None => choose(request, response),
    };
    let handshake = tokio_tungstenite::accept_hdr_async_with_config(stream, callback, Some(config));
    let ws = match tokio::time::timeout(HANDSHAKE, handshake).await {
        Ok(Ok(ws)) => ws,
        // Not a WebSocket client, one offering no Foxglove subprotocol, or too slow.
        _ => return,
    };
    let client = Arc::new(Client {
        addr,
        outbox: Mutex::new(Outbox::new(shared.limits)),
        wake: Notify::new(),
        kicked: AtomicBool::new(false),
        kick: Notify::new(),
        subs: Mutex::new((BTreeMap::new(), BTreeMap::new())),
        told: AtomicU64::new(0),
    });
    let id = {
        let mut state = lock(&shared.state);
        let id = state.next_client;
        state.next_client += 1;
        let info = ServerInfo::new("iox foxglove")
            .with_capabilities([])
            .with_supported_encodings(["cdr", "json"]);
        client.control(Message::from(&info));
        if !state.channels.is_empty() {
            client.control(Message::from(&Advertise::new(state.channels.values().cloned())));
        }
        state.clients.insert(id, client.clone());
        id
    };
    eprintln!("iox foxglove: client {addr} connected");
    let (sink, stream) = ws.split();
    let ended = tokio::select! {
        ended = write(&client, sink) => ended,
        () = read(&shared, &client, stream) => Ended::Gone,
    };
    let report = {
        let mut state = lock(&shared.state);
        state.clients.remove(&id);
        report(&state, &client)
    };
    shared.generation.fetch_add(1, Ordering::Release);
    eprintln!(
        "iox foxglove: client {addr} left: {} sample(s) sent{}{}",
        report.sent,
        if report.lost() > 0 {
            format!("; {}", report.losses())
        } else {
            String::new()
        },
        match ended {
            Ended::Kicked => "; disconnected: it left too many control messages unread",
            Ended::Stalled => "; disconnected: it read nothing for a minute",
            Ended::Gone => "",
        }
    );
    drop(slot);
}

/// Why a client's writer stopped.
enum Ended {
    /// The connection closed or failed (or the reader ended it).
    Gone,
    /// It left too many control messages unread.
    Kicked,
    /// One message did not go out within [`STALLED_FOR`].
    Stalled,
}

type Sink = futures_util::stream::SplitSink<WebSocketStream<TcpStream>, Message>;
type Stream = futures_util::stream::SplitStream<WebSocketStream<TcpStream>>;

/// Sends the client's outbox, in order, until the connection fails, the client is
/// kicked, or a message does not go out within [`STALLED_FOR`].
async fn write(client: &Client, mut sink: Sink) -> Ended {
    loop {
        if client.kicked.load(Ordering::Relaxed) {
            return Ended::Kicked;
        }
        let next = lock(&client.outbox).pop();
        let message = match next {
            Some(Next::Control(m)) => m,
            Some(Next::Data(d)) => Message::from(&MessageData::new(d.subscription, d.log_time, &d.bytes[..])),
            None => {
                tokio::select! {
                    () = client.wake.notified() => {}
                    () = client.kick.notified() => return Ended::Kicked,
                }
                continue;
            }
        };
        tokio::select! {
            sent = tokio::time::timeout(STALLED_FOR, sink.send(message)) => match sent {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Ended::Gone,
                Err(_) => return Ended::Stalled,
            },
            () = client.kick.notified() => return Ended::Kicked,
        }
    }
}

/// Reads the client's messages until it closes the connection or it fails.
async fn read(shared: &Shared, client: &Client, mut stream: Stream) {
    while let Some(message) = stream.next().await {
        match message {
            Ok(Message::Text(text)) => match ClientMessage::parse_json(text.as_str()) {
                Ok(ClientMessage::Subscribe(s)) => subscribe(shared, client, s.subscriptions),
                Ok(ClientMessage::Unsubscribe(u)) => unsubscribe(shared, client, u.subscription_ids),
                Ok(_) => client.status(
                    Level::Warning,
                    "iox foxglove offers channels to subscribe to only (no publishing, parameters, services or assets)",
                ),
                Err(e) => client.status(Level::Error, format!("iox foxglove could not read a message: {e}")),
            },
            Ok(Message::Binary(_)) => client.status(
                Level::Error,
                "iox foxglove takes no binary messages (it offers no publishing, services or playback)",
            ),
            Ok(Message::Close(_)) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

fn subscribe(shared: &Shared, client: &Client, subscriptions: Vec<Subscription>) {
    let state = lock(&shared.state);
    let mut subs = lock(&client.subs);
    for s in subscriptions {
        if !state.channels.contains_key(&s.channel_id) {
            client.status(
                Level::Warning,
                format!("no channel {} (it may have gone)", s.channel_id),
            );
        } else if subs.0.contains_key(&s.id) || subs.1.contains_key(&s.channel_id) {
            client.status(
                Level::Error,
                format!(
                    "subscription {} or channel {} is already in use by this connection",
                    s.id, s.channel_id
                ),
            );
        } else {
            subs.0.insert(s.id, s.channel_id);
            subs.1.insert(s.channel_id, s.id);
        }
    }
    shared.generation.fetch_add(1, Ordering::Release);
}

fn unsubscribe(shared: &Shared, client: &Client, ids: Vec<u32>) {
    // The state lock first, as `Server::publish` takes it: no sample of an ended
    // subscription is queued after it ends.
    let _state = lock(&shared.state);
    let mut subs = lock(&client.subs);
    for id in ids {
        if let Some(channel) = subs.0.remove(&id) {
            subs.1.remove(&channel);
            lock(&client.outbox).forget(id);
        }
    }
    shared.generation.fetch_add(1, Ordering::Release);
}
