//! Increment a shared counter under a lock from a pool of threads of a synchronous program
//! (no `async` anywhere), with `distlock::blocking`; run several copies side by side:
//!
//! ```text
//! cargo run --features blocking --example blocking_counter -- redis://127.0.0.1/ my-lock my-counter 4 50 &
//! cargo run --features blocking --example blocking_counter -- redis://127.0.0.1/ my-lock my-counter 4 50
//! redis-cli GET my-counter   # 400: no update was lost
//! ```
//!
//! The read and the write are two separate commands, so without mutual exclusion two
//! threads would overwrite each other's increments. Every thread shares one client.

use std::thread;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, lock_name, counter, threads, n] = args.as_slice() else {
        eprintln!("usage: blocking_counter URL LOCK COUNTER_KEY THREADS N");
        std::process::exit(2);
    };
    let (threads, n): (usize, u64) = (threads.parse()?, n.parse()?);
    let client = distlock::blocking::Client::connect(url)?;
    let workers: Vec<thread::JoinHandle<Result<(), String>>> = (0..threads)
        .map(|_| {
            let lock = client.lock(lock_name.as_str());
            let (url, counter) = (url.clone(), counter.clone());
            thread::spawn(move || {
                let mut con = redis::Client::open(url)
                    .and_then(|c| c.get_connection())
                    .map_err(|e| e.to_string())?;
                for _ in 0..n {
                    let guard = lock.acquire().map_err(|e| e.to_string())?;
                    let v: Option<u64> = redis::cmd("GET")
                        .arg(&counter)
                        .query(&mut con)
                        .map_err(|e| e.to_string())?;
                    redis::cmd("SET")
                        .arg(&counter)
                        .arg(v.unwrap_or(0) + 1)
                        .exec(&mut con)
                        .map_err(|e| e.to_string())?;
                    guard.release().map_err(|e| e.to_string())?;
                }
                Ok(())
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker panicked")?;
    }
    println!("done {}", threads as u64 * n);
    Ok(())
}
