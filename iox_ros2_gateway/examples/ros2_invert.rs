//! The iox side of the README's "With ROS 2" walk-through: reads the images an rclpy
//! node publishes on `/camera/front` (imported by `iox-ros2` into the iox service
//! `camera/front`, header and pixels in one chunk) in place, and publishes each one
//! inverted on `camera/inverted`, which the gateway exports back to ROS as
//! `/camera/inverted`. Runs until interrupted.
//!
//! ```text
//! target/release/examples/ros2_invert
//! ```

use std::time::Duration;

use iox_ros2::carried::ros_service;
use iox_ros2::image::{IMAGE_DEFINITION, IMAGE_TYPE, ImageHeader};
use iox_service::{OpenError, Service};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The gateway creates `camera/front` when it sees the topic.
    let frames = loop {
        let service = Service::named("camera/front")?
            .publish_subscribe::<[u8]>()
            .user_header::<ImageHeader>()
            .open();
        match service {
            Ok(s) => break s,
            Err(OpenError::DoesNotExist(_)) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(e.into()),
        }
    };
    let images = Service::named("camera/inverted")?
        .publish_subscribe::<[u8]>()
        .user_header::<ImageHeader>();
    let inverted = ros_service(images, IMAGE_TYPE, IMAGE_DEFINITION).open_or_create()?;
    let subscriber = frames.subscriber_builder().create()?;
    let publisher = inverted.publisher_builder().create()?;
    eprintln!("ros2_invert: reading camera/front, writing camera/inverted");
    loop {
        let Some(image) = subscriber.receive_timeout(Duration::from_secs(1))? else {
            continue;
        };
        // `image` derefs to the pixels in shared memory: no copy, no decoding.
        let pixels: &[u8] = &image;
        publisher
            .loan_slice_uninit(pixels.len())?
            .write_header(*image.user_header())
            .write_from_fn(|i| 255 - pixels[i])
            .send()?;
    }
}
