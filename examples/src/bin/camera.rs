//! Frames with a per-sample user header: a [`FrameHeader`] (stamp, width, height,
//! step, encoding) in front of each frame's pixels, written in place by the publisher
//! and read in place by the subscriber, on the service `examples/camera`. The C++
//! example `iox_ffi/examples/camera.cpp` and the Python tests speak the same service.
//!
//! - `camera publish [--count N]` (default 5): waits up to 30 s for a subscriber, sends
//!   frames `0..N` ([`iox_examples::frame_header`], [`iox_examples::frame_pixel`]),
//!   then waits (up to 30 s) until no subscriber is connected, so the reader gets
//!   them all.
//! - `camera subscribe [--count N]`: prints `ready`, then receives N frames (30 s each
//!   at most), checks every header field and pixel, and prints one line a frame:
//!   `camera: frame I stamp S WxH mono8 ok`.

use std::time::{Duration, Instant};

use iox_examples::{
    CAMERA_BUFFER, CAMERA_MAX_PIXELS, CAMERA_SERVICE, FrameHeader, PATIENCE, frame_header, frame_pixel,
};
use iox_service::{PubSubService, Service};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn camera() -> Result<PubSubService<[u8], FrameHeader>> {
    Ok(Service::named(CAMERA_SERVICE)?
        .publish_subscribe::<[u8]>()
        .user_header::<FrameHeader>()
        .max_slice_len(CAMERA_MAX_PIXELS)
        .subscriber_buffer(CAMERA_BUFFER)
        .open_or_create()?)
}

/// Polls `done` every 5 ms for up to 30 s.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) -> Result<()> {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > PATIENCE {
            return Err(format!("{what} within 30 s").into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

fn publish(count: u64) -> Result<()> {
    let svc = camera()?;
    let publisher = svc.publisher_builder().create()?;
    wait_until("no subscriber connected", || svc.port_counts().1 > 0)?;
    for i in 0..count {
        let header = frame_header(i);
        let len = (header.width * header.height) as usize;
        // The header first (the loan has no safe way to be sent without it), then
        // the pixels, both in place in the chunk.
        let mut loan = publisher.loan_slice_uninit(len)?.write_header(header);
        for (j, px) in loan.payload_mut().iter_mut().enumerate() {
            px.write(frame_pixel(i, j));
        }
        // SAFETY: the header was written by `write_header`, every pixel above.
        unsafe { loan.assume_init() }.send()?;
    }
    wait_until("the subscriber did not leave", || svc.port_counts().1 == 0)
}

fn subscribe(count: u64) -> Result<()> {
    let svc = camera()?;
    let subscriber = svc.subscriber_builder().create()?;
    println!("ready");
    for _ in 0..count {
        let frame = subscriber
            .receive_timeout(PATIENCE)?
            .ok_or("no frame within 30 s")?;
        let h = *frame.user_header();
        let i = h.stamp_ns.wrapping_sub(1_000_000);
        if h != frame_header(i) {
            return Err(format!("frame {i}: header {h:?}, expected {:?}", frame_header(i)).into());
        }
        if frame.len() != (h.width * h.height) as usize {
            return Err(format!("frame {i}: {} bytes for {}x{}", frame.len(), h.width, h.height).into());
        }
        if let Some(j) = (0..frame.len()).find(|&j| frame[j] != frame_pixel(i, j)) {
            return Err(format!(
                "frame {i}: pixel {j} is {}, expected {}",
                frame[j],
                frame_pixel(i, j)
            )
            .into());
        }
        let encoding = String::from_utf8_lossy(&h.encoding);
        println!(
            "camera: frame {i} stamp {} {}x{} {} ok",
            h.stamp_ns,
            h.width,
            h.height,
            encoding.trim_end_matches('\0')
        );
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    iox_examples::exit_with(run())
}

fn run() -> Result<()> {
    let count = iox_examples::count_arg(5);
    match std::env::args().nth(1).as_deref() {
        Some("publish") => publish(count),
        Some("subscribe") => subscribe(count),
        _ => Err("usage: camera publish|subscribe [--count N]".into()),
    }
}
