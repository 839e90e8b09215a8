//! Something to look at live (`iox foxglove`, the guide's "Live in Foxglove" page): a
//! robot's pose, a camera and a laser scan, published 30 times a second until Ctrl-C
//! (or `--duration SECONDS`).
//!
//! - `examples/live/pose`: a derived struct ([`Pose`]), which Foxglove shows field by
//!   field (and plots);
//! - `examples/live/camera`: a host tensor of `u8`, 240 x 320 x 3 (an RGB image, a
//!   gradient that moves), which Foxglove draws in an Image panel;
//! - `examples/live/scan`: a host tensor of 360 `f32` ranges, whose values Foxglove
//!   plots.

use std::time::{Duration, Instant};

use iox_service::tensor::{DType, TensorLayout};
use iox_service::{CallbackProgression, Service, WaitSet, WaitSetRunResult, ZeroCopySafe};

/// Where the robot is.
#[derive(ZeroCopySafe, Clone, Copy, Debug)]
#[repr(C)]
#[iox(type_name = "Pose")]
struct Pose {
    seq: u64,
    x: f64,
    y: f64,
    theta: f64,
}

const HEIGHT: usize = 240;
const WIDTH: usize = 320;
const PERIOD: Duration = Duration::from_millis(33);

fn main() -> std::process::ExitCode {
    iox_examples::exit_with(run())
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let duration = std::env::args()
        .collect::<Vec<_>>()
        .windows(2)
        .find(|w| w[0] == "--duration")
        .map(|w| w[1].parse::<f64>().map(Duration::from_secs_f64))
        .transpose()?;
    let pose = Service::named("examples/live/pose")?
        .publish_subscribe::<Pose>()
        .open_or_create()?
        .publisher_builder()
        .create()?;
    let camera = Service::named("examples/live/camera")?
        .publish_subscribe::<[u8]>()
        .max_slice_len(HEIGHT * WIDTH * 3)
        .tensors(true)
        .open_or_create()?
        .tensor_publisher_builder()
        .create()?;
    let scan = Service::named("examples/live/scan")?
        .publish_subscribe::<[f32]>()
        .max_slice_len(360)
        .tensors(true)
        .open_or_create()?
        .tensor_publisher_builder()
        .create()?;
    // Ctrl-C and SIGTERM end the loop (the WaitSet turns them into a request).
    let signals = WaitSet::new()?;
    let image = TensorLayout::contiguous(DType::U8, &[HEIGHT, WIDTH, 3])?;
    let ranges = TensorLayout::contiguous(DType::F32, &[360])?;
    let start = Instant::now();
    println!("live: publishing examples/live/pose, camera and scan (Ctrl-C ends)");
    for seq in 0u64.. {
        let t = seq as f64 * PERIOD.as_secs_f64();
        pose.loan_uninit()?
            .write_payload(Pose {
                seq,
                x: t.cos(),
                y: t.sin(),
                theta: t % std::f64::consts::TAU,
            })
            .send()?;
        let shift = seq as usize;
        let pixels: Vec<u8> = (0..HEIGHT * WIDTH)
            .flat_map(|i| {
                let (row, col) = (i / WIDTH, i % WIDTH);
                [((col + shift) % 256) as u8, ((row + shift) % 256) as u8, 128]
            })
            .collect();
        camera.loan_tensor(&image)?.send_bytes(&pixels)?;
        let distances: Vec<u8> = (0..360)
            .flat_map(|deg| (2.0 + (deg as f32 / 20.0 + t as f32).sin()).to_ne_bytes())
            .collect();
        scan.loan_tensor(&ranges)?.send_bytes(&distances)?;
        let stop = signals.wait_and_process_once_with_timeout(|_| CallbackProgression::Continue, PERIOD)?;
        if stop == WaitSetRunResult::TerminationRequest || duration.is_some_and(|d| start.elapsed() >= d) {
            println!("live: sent {} of each", seq + 1);
            return Ok(());
        }
    }
    Ok(())
}
