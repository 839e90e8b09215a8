//! The Rust side of the Python request-response tests
//! (`iox_python/tests/test_request_response.py`), on the service `examples/route`:
//! requests are a [`RouteGoal`], each answered with a stream of `steps` [`Waypoint`]s
//! (waypoint `i` of `steps` lies `(i + 1) / steps` of the way from the origin to the
//! goal).
//!
//! - `reqres_peer serve --count N`: opens or creates the service, makes a server,
//!   prints `ready`, answers N requests (waiting up to 30 s for each), then exits.
//! - `reqres_peer ask X,Y,STEPS...`: opens or creates the service, waits up to 30 s for
//!   a server, sends each goal and prints every waypoint of its stream as
//!   `waypoint INDEX X Y`, then `end` when the stream ends.

use std::time::{Duration, Instant};

use iox_service::{RequestResponseService, Service, ZeroCopySafe};

/// A request: where to go, in how many steps.
#[derive(Debug, Clone, Copy, ZeroCopySafe)]
#[repr(C)]
struct RouteGoal {
    x: f64,
    y: f64,
    steps: u64,
}

/// One response of a request's stream.
#[derive(Debug, Clone, Copy, ZeroCopySafe)]
#[repr(C)]
struct Waypoint {
    index: u64,
    x: f64,
    y: f64,
}

type Route = RequestResponseService<RouteGoal, Waypoint>;

fn open() -> Result<Route, Box<dyn std::error::Error>> {
    Ok(Service::named("examples/route")?
        .request_response::<RouteGoal, Waypoint>()
        .max_response_buffer(4)
        .open_or_create()?)
}

fn serve(count: u64) -> Result<(), Box<dyn std::error::Error>> {
    let svc = open()?;
    let server = svc.server_builder().create()?;
    println!("ready");
    for _ in 0..count {
        let request = server
            .receive_timeout(iox_examples::PATIENCE)?
            .ok_or("no request within 30 s")?;
        let goal = *request;
        for i in 0..goal.steps {
            let f = (i + 1) as f64 / goal.steps as f64;
            let w = Waypoint {
                index: i,
                x: goal.x * f,
                y: goal.y * f,
            };
            request.loan_uninit()?.write_payload(w).send()?;
        }
    } // each request's stream ends as it drops
    Ok(())
}

fn ask(goals: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let svc = open()?;
    let client = svc.client_builder().create()?;
    let start = Instant::now();
    while svc.port_counts().1 == 0 {
        if start.elapsed() > iox_examples::PATIENCE {
            return Err("no server within 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    for goal in goals {
        let parts: Vec<&str> = goal.split(',').collect();
        let [x, y, steps] = parts[..] else {
            return Err(format!("a goal is X,Y,STEPS, not {goal:?}").into());
        };
        let goal = RouteGoal {
            x: x.parse()?,
            y: y.parse()?,
            steps: steps.parse()?,
        };
        let pending = client.loan_uninit()?.write_payload(goal).send()?;
        loop {
            match pending.receive_timeout(iox_examples::PATIENCE)? {
                Some(w) => println!("waypoint {} {} {}", w.index, w.x, w.y),
                None if pending.is_finished() => break,
                None => return Err("no response within 30 s".into()),
            }
        }
        println!("end");
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    iox_examples::exit_with(match args.as_slice() {
        [mode, flag, n] if mode == "serve" && flag == "--count" => n
            .parse()
            .map_err(|e| format!("--count: {e}").into())
            .and_then(serve),
        [mode, goals @ ..] if mode == "ask" && !goals.is_empty() => ask(goals),
        _ => Err("usage: reqres_peer serve --count N | reqres_peer ask X,Y,STEPS...".into()),
    })
}
