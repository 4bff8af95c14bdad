//! moq-edge binary: wires configuration, logging, signals and the runtime together.

use std::sync::Arc;

use clap::Parser;
use moq_edge::config::{Cli, Command, Config, Tls};
use moq_edge::runtime::{self, cid::generate_secret, relay_host::RelayFactory};
use moq_edge::session::SessionConfig;
use moq_edge::wire::Version;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use tracing::info;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let cli = Cli::parse();
    if let Some(Command::Token { key, namespace, publish, subscribe, ttl }) = &cli.command {
        return mint_token(key, namespace, *publish, *subscribe, *ttl);
    }
    let available = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let config = Config::resolve(&cli, available)?;
    let tls = match &config.tls {
        Tls::Files { cert, key } => format!("certificate {} / key {}", cert.display(), key.display()),
        Tls::SelfSigned => "self-signed ECDSA P-256 certificate, valid 14 days".to_string(),
    };
    let alpns: Vec<&str> = Version::ALL.iter().map(|v| v.alpn()).collect();
    println!("moq-edge {}", env!("CARGO_PKG_VERSION"));
    println!("  listen     udp {}", config.listen);
    println!("  cores      {}", config.cores);
    println!("  alpn       {}", alpns.join(", "));
    println!("  tls        {tls}");
    println!("  linger     {} ms", config.linger.as_millis());
    println!("  backlog    {} KiB per session", config.max_backlog / 1024);
    println!(
        "  cache      {} MiB ({} MiB per core)",
        config.cache >> 20,
        (config.cache / config.cores) >> 20
    );
    match (config.auth_required, config.auth_keys.len()) {
        (true, n) => println!("  auth       tokens required ({n} key(s))"),
        (false, _) => println!("  auth       open (no token needed)"),
    }
    match config.goaway_uri.as_str() {
        "" => println!("  shutdown   GOAWAY, then {} ms", config.goaway_timeout.as_millis()),
        uri => println!("  shutdown   GOAWAY to {uri}, then {} ms", config.goaway_timeout.as_millis()),
    }
    if cli.check_config {
        println!("configuration ok");
        return Ok(());
    }

    // Every connection runs a MoQT session in the relay (see README "Status" for what it
    // does and what it does not yet).
    let secret = generate_secret(&ring::rand::SystemRandom::new())
        .map_err(|_| anyhow::anyhow!("the system random number generator failed"))?;
    let factory = RelayFactory::new(config.relay(), SessionConfig::default(), &secret);
    let server = runtime::start(config.runtime(), Arc::new(factory))?;
    println!("  serving    udp {} (certificate sha-256 {})", server.local_addr(), server.fingerprint());
    info!(fingerprint = server.fingerprint(), addr = %server.local_addr(), "certificate");

    let trigger = server.shutdown_trigger();
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new().name("signals".into()).spawn(move || {
        if let Some(sig) = signals.forever().next() {
            info!(signal = sig, "shutting down: closing connections");
            trigger.trigger();
        }
    })?;
    let reports = server.join()?;
    let cpu: std::time::Duration = reports.iter().map(|r| r.cpu).sum();
    info!(cpu_s = cpu.as_secs_f64(), "stopped");
    Ok(())
}

/// `moq-edge token`: prints a token signed with `key` (`ID=SECRET`).
fn mint_token(key: &str, namespace: &str, publish: bool, subscribe: bool, ttl: u64) -> anyhow::Result<()> {
    use base64::Engine;
    anyhow::ensure!(publish || subscribe, "grant --publish, --subscribe or both");
    let (id, secret) = key.split_once('=').ok_or_else(|| anyhow::anyhow!("--key: ID=SECRET"))?;
    moq_edge::auth::Keys::parse(&[key.to_string()])?;
    let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(secret.trim_end_matches('='))?;
    let ns = namespace.split('/').filter(|f| !f.is_empty()).map(str::to_string).collect();
    let claims = moq_edge::auth::Claims { ns, publish, subscribe, exp: moq_edge::auth::unix_now() + ttl };
    println!("{}", moq_edge::auth::mint(id, &secret, &claims)?);
    Ok(())
}
