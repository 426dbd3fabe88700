//! Times `GitState::read` on a work tree: `cargo run --release -p rewind-git-state
//! --example read_cost -- <work tree> [rounds]`.

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("usage: read_cost <work tree> [rounds]"));
    let rounds: u32 = args.next().and_then(|r| r.parse().ok()).unwrap_or(200);
    let first = git_state::GitState::read(&dir).expect("read");
    if let git_state::Found::State(r) = &first {
        println!(
            "{} refs, index {} bytes, HEAD {}",
            r.state.refs.len(),
            r.state.index.as_ref().map_or(0, |i| i.len),
            r.state.describe_head()
        );
    }
    let t = std::time::Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(git_state::GitState::read(&dir).expect("read"));
    }
    println!(
        "{:.3} ms per read",
        t.elapsed().as_secs_f64() * 1000.0 / f64::from(rounds)
    );
}
