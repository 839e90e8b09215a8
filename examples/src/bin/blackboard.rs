//! The blackboard `examples/robot`: key 0 a speed (`f64`), key 1 a position
//! (`[f32; 3]`), keys of type `u32`.
//!
//! ```sh
//! cargo run -p iox_examples --bin blackboard -- write 5   # five updates of both keys
//! cargo run -p iox_examples --bin blackboard -- read      # prints both keys once
//! ```
//!
//! Either side may start first: the first opens it and writes the initial values
//! (0.0 and [0, 0, 0]); readers never wait for writers, and see the latest update. Like
//! every service, the blackboard lives while some process has it open: a reader that
//! starts after every other user has gone finds a fresh one with the initial values
//! (the tests keep it open in the reading process).

use iox_service::{BlackboardService, Service};

fn board() -> Result<BlackboardService<u32>, Box<dyn std::error::Error>> {
    Ok(Service::named("examples/robot")?
        .blackboard::<u32>()
        .add::<f64>(0, 0.0)
        .add::<[f32; 3]>(1, [0.0; 3])
        .open_or_create()?)
}

fn write(updates: u64) -> Result<(), Box<dyn std::error::Error>> {
    let board = board()?;
    let writer = board.writer_builder().create()?;
    let (speed, position) = (writer.entry::<f64>(&0)?, writer.entry::<[f32; 3]>(&1)?);
    for i in 1..=updates {
        speed.update_with_copy(i as f64 * 0.5)?;
        let generation = position.update_with_copy([i as f32, 2.0 * i as f32, 0.0])?;
        println!("update {i}: generation {generation}");
    }
    Ok(())
}

fn read() -> Result<(), Box<dyn std::error::Error>> {
    let board = board()?;
    let reader = board.reader_builder().create()?;
    let speed = reader.entry::<f64>(&0)?;
    let position = reader.entry::<[f32; 3]>(&1)?;
    println!("speed {} (generation {})", speed.get()?, speed.generation());
    let p = position.read()?;
    println!("position {:?} (generation {})", *p, p.generation());
    Ok(())
}

fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let result = match (args.next().as_deref(), args.next()) {
        (Some("write"), n) => match n.map_or(Ok(1), |n| n.parse()) {
            Ok(n) => write(n),
            Err(_) => Err("usage: blackboard write [UPDATES]".into()),
        },
        (Some("read"), None) => read(),
        _ => Err("usage: blackboard write [UPDATES] | blackboard read".into()),
    };
    iox_examples::exit_with(result)
}
