//! moq-impair: a UDP proxy that impairs the path between QUIC clients and a relay.

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use impair::config::{parse_cli, usage};
use impair::proxy::Proxy;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse_cli(&args) {
        Ok(Some(a)) => a,
        Ok(None) => {
            print!("{}", usage());
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("moq-impair: {e}\n\n{}", usage());
            return ExitCode::from(2);
        }
    };
    let mut proxy = match Proxy::bind(args.config.clone()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("moq-impair: bind {}: {e}", args.config.listen);
            return ExitCode::FAILURE;
        }
    };
    let listening = proxy.local_addr().map(|a| a.to_string()).unwrap_or_default();
    eprintln!("moq-impair: {listening} -> {}", args.config.upstream);
    let until = args.duration.map(|d| Instant::now() + d);
    let stop = AtomicBool::new(false);
    match proxy.run(&stop, until, args.stats_every, &mut std::io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("moq-impair: {e}");
            ExitCode::FAILURE
        }
    }
}
