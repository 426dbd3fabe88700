//! Runs write-tool calls (capture, the tool's write, commit) in a loop, for
//! counting system calls per call: `strace -c -f target/release/examples/one_call <dir> <n>`.
use std::path::{Path, PathBuf};

use snapshot_store::{Store, StoreOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().ok_or("usage: one_call <dir> <n>")?);
    let n: usize = args.next().ok_or("usage: one_call <dir> <n>")?.parse()?;
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws)?;
    let store = Store::open(&dir.join("store"), StoreOptions::default())?;
    let s = store.session("s", &ws)?;
    let mut data = vec![7u8; 16 << 10];
    std::fs::write(ws.join("w"), &data)?;
    for i in 0..n {
        data[..8].copy_from_slice(&(i as u64).to_le_bytes());
        let call = format!("c{i}");
        s.capture_before(&call, Path::new("w"))?;
        std::fs::write(ws.join("w"), &data)?;
        s.commit(&call, 1 + (i / 10) as u64, true)?;
    }
    Ok(())
}
