use iox_service::Service;
fn main() {
    let n: u64 = std::env::args().nth(1).unwrap().parse().unwrap();
    let dir = std::env::temp_dir().join(format!("ic-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svc = Service::named("ic").unwrap().root(&dir).publish_subscribe::<u64>().open_or_create().unwrap();
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    let mut sum = 0u64;
    for i in 0..n {
        p.loan_uninit().unwrap().write_payload(i).send().unwrap();
        let got = s.receive().unwrap().unwrap();
        sum = sum.wrapping_add(*got);
    }
    println!("{sum}");
    drop((p, s, svc));
    let _ = std::fs::remove_dir_all(&dir);
}
