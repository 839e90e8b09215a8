//! The README's Rust examples, every block in the order written, as one program: the
//! blocks are the README's text (`examples/tests/readme.rs` checks that, and runs
//! this program as a user without privileges and with default limits, under its own
//! `IOX_ROOT` and temporary directory). Outside the marked blocks there is only the
//! function around them, which the README names ("inside a function returning
//! `Result<_, Box<dyn std::error::Error>>`"); rustfmt leaves it as the README has it.

fn main() -> std::process::ExitCode {
    iox_examples::exit_with(run())
}

#[rustfmt::skip]
#[allow(unused_variables)]
fn run() -> Result<(), Box<dyn std::error::Error>> {
    // README block 1
    use iox_service::{Service, MemoryType};
    use std::time::Duration;

    let service = Service::named("camera/front")?          // name checked here (see "Service names")
        .publish_subscribe::<u64>()                         // T: ZeroCopySafe
        .memory_type(MemoryType::Locked)                    // applied on creation, checked on open
        .max_publishers(2)
        .max_subscribers(8)
        .subscriber_buffer(4)
        .open_or_create()?;                                 // also .open() and .create()

    let publisher = service.publisher_builder().pin_memory(true).create()?;  // mlock once, here
    let subscriber = service.subscriber_builder().create()?; // does not pin
    publisher.loan_uninit()?.write_payload(42).send()?;     // returns how many subscribers got it (1)
    let got = subscriber.receive_timeout(Duration::from_millis(100))?;       // futex wait, no busy-wait
    assert_eq!(*got.unwrap(), 42);

    // Slices: the pool is a list of chunk sizes; a loan uses the smallest that holds it and
    // is never zero-filled. Each size gets the worst-case number of chunks (see "Pool sizing").
    let bytes = Service::named("lidar/points")?.publish_subscribe::<[u8]>()
        .max_publishers(1).max_subscribers(2).subscriber_buffer(2)   // 11 chunks per size
        .chunk_sizes(&[4096, 1 << 20])
        .open_or_create()?;
    let p = bytes.publisher_builder().create()?;
    p.loan_slice_uninit(300_000)?.write_from_fn(|i| i as u8).send()?;
    let info = p.pool_info();                               // base, len, memory type, classes
    // README block end
    // README block 2
    use iox_service::{CallbackProgression, WaitSet, WaitSetRunResult};

    let waitset = WaitSet::new()?;                          // SIGINT/SIGTERM now end waits
    let samples = waitset.attach_deadline(&subscriber, Duration::from_secs(1))?;
    let heartbeat = waitset.attach_interval(Duration::from_millis(100))?;
    let result = waitset.wait_and_process(|id| {
        if id.has_event_from(&samples) {
            while let Ok(Some(s)) = subscriber.receive() {  // readable: receive until None
                println!("got {}", *s);
            }
            return CallbackProgression::Stop;               // ends the loop (here: the first sample)
        } else if id.has_missed_deadline(&samples) {
            println!("no sample for 1 s");
        } else if id.has_event_from(&heartbeat) {           // the heartbeat sends one
            if let Ok(loan) = publisher.loan_uninit() {
                let _ = loan.write_payload(0).send();
            }
        }
        CallbackProgression::Continue                       // wait again
    })?;
    if result == WaitSetRunResult::TerminationRequest {     // Ctrl-C: return, ports drop, files go
        return Ok(());
    }
    // README block end
    // README block 3
    use iox_service::ZeroCopySafe;

    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    #[iox(type_name = "Pose")] // the identity recorded in the static config
    struct Pose { x: f64, y: f64, yaw: f32, seq: u32 }

    let demo = std::env::temp_dir().join("iox-demo");
    std::fs::create_dir_all(&demo)?;
    let poses = Service::named("robot/pose")?
        .root(&demo)                      // instead of $IOX_ROOT or /dev/shm (must exist)
        .publish_subscribe::<Pose>()
        .open_or_create()?;
    // README block end
    // README block 4
    let chatter = Service::named("ros2/chatter")?
        .publish_subscribe::<u64>()
        .attribute("ros2/type", "std_msgs/msg/UInt64")     // recorded when it creates
        .attribute("ros2/qos", "reliable")
        .open_or_create()?;
    let reader = Service::named("ros2/chatter")?
        .publish_subscribe::<u64>()
        .require_attribute("ros2/type", "std_msgs/msg/UInt64") // checked when it opens
        .require_attribute_key("ros2/qos")                     // any value
        .open()?;                                          // else MissingAttribute / IncompatibleAttribute
    assert_eq!(reader.attributes().get("ros2/qos"), Some("reliable"));
    // README block end
    // README block 5
    #[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    #[iox(type_name = "ImageHeader")]
    struct ImageHeader { stamp_ns: u64, width: u32, height: u32, step: u32, encoding: [u8; 12] }

    let images = Service::named("camera/left")?
        .publish_subscribe::<[u8]>()
        .user_header::<ImageHeader>()             // recorded beside the payload, checked on open
        .max_slice_len(640 * 480)                 // pixels; the header's room is added
        .open_or_create()?;
    let publisher = images.publisher_builder().create()?;
    let subscriber = images.subscriber_builder().create()?;
    let header = ImageHeader { stamp_ns: 7, width: 640, height: 480, step: 640, encoding: *b"mono8\0\0\0\0\0\0\0" };
    publisher
        .loan_slice_uninit(640 * 480)?            // header and pixels in one chunk, uninitialised
        .write_header(header)                     // in place; no safe send before it is written
        .write_from_fn(|i| (i % 251) as u8)       // or payload_mut() and the unsafe assume_init()
        .send()?;
    let frame = subscriber.receive()?.ok_or("no frame")?;
    assert_eq!(*frame.user_header(), header);    // read in place, beside the pixels
    assert_eq!((frame.len(), frame[641]), (640 * 480, 139));
    // README block end
    // README block 6
    use iox_service::EventId;

    let estop = Service::named("robot/estop")?
        .event()
        .max_notifiers(4)
        .max_listeners(8)
        .event_id_max(255)
        .notifier_dead_event(EventId::new(255))  // sent by whoever recovers a dead notifier
        .open_or_create()?;                      // also .open() and .create(), as pub-sub
    let notifier = estop.notifier_builder().default_event_id(EventId::new(3)).create()?;
    let listener = estop.listener_builder().create()?;
    notifier.notify()?;                                       // how many listeners it reached
    notifier.notify_with_custom_event_id(EventId::new(7))?;
    listener.try_wait_all(|id| println!("{id:?}"))?;          // non-blocking
    listener.timed_wait_one(Duration::from_millis(10))?;     // Option<EventId>, futex sleep
    // README block end
    // README block 7
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    struct Goal { x: f64, y: f64 }
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    struct Waypoint { x: f64, y: f64 }

    let svc = Service::named("planner/plan")?
        .request_response::<Goal, Waypoint>()        // both ZeroCopySafe; [T] slices too
        .max_clients(8)
        .max_servers(2)
        .max_active_requests_per_client(4)
        .max_response_buffer(16)                      // responses queued per request
        .open_or_create()?;
    let server = svc.server_builder().create()?;      // in the server process
    let client = svc.client_builder().pin_memory(false).create()?;
    let goal = Goal { x: 4.0, y: 2.0 };
    let pending = client.loan_uninit()?.write_payload(goal).send()?;   // -> PendingResponse
    // in the server: `receive()` does not wait; `receive_timeout` sleeps until a request comes
    if let Some(active) = server.receive_timeout(Duration::from_secs(1))? { // -> ActiveRequest
        let goal: &Goal = &active;
        let halfway = Waypoint { x: goal.x / 2.0, y: goal.y / 2.0 };
        active.loan_uninit()?.write_payload(halfway).send()?; // any number of responses
    }                                                  // dropping `active` ends the stream
    while let Some(w) = pending.receive_timeout(Duration::from_millis(100))? {
        println!("waypoint {} {}", w.x, w.y);
    }
    assert!(pending.is_finished());                    // the end, not a timeout
    // README block end
    // README block 8
    let board = Service::named("robot/state")?
        .blackboard::<u32>()                               // keys: an integer (or array) type
        .add::<f64>(0, 0.0)                                // key 0: speed, initially 0.0
        .add::<[f32; 3]>(1, [0.0; 3])                      // key 1: position
        .open_or_create()?;                                // an opener's `add`s are checked
    let writer = board.writer_builder().create()?;        // max_writers(1) by default
    let reader = board.reader_builder().create()?;
    let changes = board.listener_builder().create()?;    // an event Listener: AsFd, WaitSet, tokio
    writer.entry::<f64>(&0)?.update_with_copy(1.5)?;      // or loan_uninit(): written in place
    let speed = reader.entry::<f64>(&0)?;                 // EntryError: no such key, other type
    println!("speed {} (generation {})", speed.get()?, speed.generation());
    let position = reader.entry::<[f32; 3]>(&1)?.read()?; // zero-copy guard; writers go on
    assert_eq!(*position, [0.0; 3]);
    assert_eq!(changes.try_wait_one()?, board.event_id(&0)); // key 0 changed
    // README block end
    println!("readme: every block ran");
    Ok(())
}
