//! moq-edge binary: wires configuration, logging, signals and the runtime together.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use moq_edge::config::{Cli, Command, Config, LogFormat, Tls, Web};
use moq_edge::host::admission::Admission;
use moq_edge::host::events::Hooks;
use moq_edge::host::side_door::SideDoor;
use moq_edge::host::RelayFactory;
use moq_edge::runtime::{self, cid::generate_secret, TlsReloader};
use moq_edge::session::SessionConfig;
use moq_edge::{metrics, web};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use tracing::{info, warn};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(Command::Token { format, key, namespace, publish, subscribe, ttl }) = &cli.command {
        return mint_token(format, key, namespace, *publish, *subscribe, *ttl);
    }
    let available = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let config = Config::resolve(&cli, available)?;
    init_logs(&config);
    print_summary(&config);
    if cli.check_config.is_some() {
        println!("configuration ok");
        return Ok(());
    }

    let secret = generate_secret(&ring::rand::SystemRandom::new())
        .map_err(|_| anyhow::anyhow!("the system random number generator failed"))?;
    let mut factory = RelayFactory::new(config.relay(), SessionConfig::default(), &secret);
    factory.upstreams = config.upstreams.clone();
    factory.drafts = config.drafts.clone();
    let directory = match &config.directory {
        Some(d) => {
            let (handle, ports) = moq_edge::host::redis_client::start(d.clone(), config.cores)?;
            let ports = Arc::new(std::sync::Mutex::new(ports.into_iter().map(Some).collect()));
            factory.directory = Some((ports, d.token.clone()));
            Some(handle)
        }
        None => None,
    };
    let (hooks, side_door, admission) = platform(&config, &mut factory)?;
    let drain_to = factory.drain_to.clone();
    let gauges = factory.gauges();
    let server = runtime::start(config.runtime(), Arc::new(factory))?;
    if let Some(d) = &directory {
        d.set_wakers(server.wakers());
    }
    side_door.set_wakers(server.wakers());
    admission.iter().for_each(|a| a.set_wakers(server.wakers()));
    println!("  serving    udp {} (certificate sha-256 {})", server.local_addr(), server.fingerprint());
    info!(fingerprint = server.fingerprint(), addr = %server.local_addr(), "certificate");
    let trigger = server.shutdown_trigger();
    let reloader = server.tls_reloader();
    let web = serve_web(&config, &server, side_door, admission.clone())?;
    if let Some(addr) = config.metrics {
        let sources = metrics::Sources {
            cores: config.cores,
            shards: server.stats_arc(),
            relay: gauges,
            shutdown: trigger.clone(),
            directory: directory.as_ref().map(|d| d.stats.clone()),
            web: web.as_ref().map(|w| w.stats.clone()),
            events: hooks.as_ref().map(|h| h.stats.clone()),
            admission: admission.as_ref().map(|a| a.stats.clone()),
        };
        let bound = metrics::serve(addr, sources).with_context(|| format!("metrics endpoint on {addr}"))?;
        println!("  metrics    serving http://{bound}");
    }
    // After the metrics line: tools that read these lines take the web line as the last.
    if let Some(w) = &web {
        println!("  web        serving http://{}/", w.addr);
    }
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    let reload = reloader.clone();
    let keys = config.auth.clone();
    std::thread::Builder::new().name("signals".into()).spawn(move || {
        for sig in signals.forever() {
            if sig == SIGHUP {
                reload_tls(&reload, "SIGHUP");
                if let Some(ring) = &keys {
                    reload_keys(ring, "SIGHUP");
                }
                continue;
            }
            info!(signal = sig, "shutting down: GOAWAY to every session, then close");
            if let Some(d) = &directory {
                // Out of the directory first, so that no relay sends new subscribers here.
                let sibling = d.drain(std::time::Duration::from_secs(1));
                if let Ok(mut to) = drain_to.lock() {
                    *to = sibling;
                }
            }
            trigger.trigger();
            break;
        }
    })?;
    watch_reloadable(reloader, config.auth.clone())?;
    let reports = server.join()?;
    if let Some(h) = &hooks {
        // The sessions the drain closed, told before the process ends (a sink that is down
        // loses them: the queue lives in this process).
        h.flush(std::time::Duration::from_secs(2));
    }
    let cpu: std::time::Duration = reports.iter().map(|r| r.cpu).sum();
    info!(cpu_s = cpu.as_secs_f64(), "stopped");
    Ok(())
}

/// What a platform plugs in, started beside the cores: the event hooks, the HTTP side doors'
/// way to the cores, and admission by the platform's service.
fn platform(
    config: &Config,
    factory: &mut RelayFactory,
) -> anyhow::Result<(Option<Hooks>, SideDoor, Option<Admission>)> {
    let hooks = config.events.clone().map(moq_edge::host::events::start).transpose()?;
    factory.events = hooks.clone();
    let side_door = factory.side_door(config.cores);
    if let Some(a) = &config.admission {
        factory.admission = Some(moq_edge::host::admission::start(a.clone(), config.cores)?);
    }
    let admission = factory.admission.as_ref().map(|(a, _)| a.clone());
    Ok((hooks, side_door, admission))
}

/// The configuration in force, one line per setting, on standard output.
fn print_summary(config: &Config) {
    let tls = match &config.tls {
        Tls::Files { cert, key } => format!("certificate {} / key {}", cert.display(), key.display()),
        Tls::SelfSigned => "self-signed ECDSA P-256 certificate, valid 14 days".to_string(),
    };
    let alpns = moq_edge::moqt::draft_alpns(&config.drafts);
    println!("moq-edge {}", env!("CARGO_PKG_VERSION"));
    println!("  listen     udp {}", config.listen);
    println!("  cores      {}", config.cores);
    println!("  alpn       {}", alpns.join(", "));
    println!("  tls        {tls}");
    println!("  linger     {} ms", config.linger.as_millis());
    println!("  backlog    {} KiB per session", config.max_backlog / 1024);
    match config.max_lag {
        Some(lag) => println!("  max lag    {} ms", lag.as_millis()),
        None => println!("  max lag    off"),
    }
    println!(
        "  cache      {} MiB ({} MiB per core)",
        config.cache >> 20,
        (config.cache / config.cores) >> 20
    );
    match &config.auth {
        Some(_) if config.admission.is_some() => {
            println!("  auth       admitted by the platform's service (auth_url)")
        }
        Some(ring) => println!("  auth       tokens required: {:?}", ring.keys()),
        None => println!("  auth       open (no token needed)"),
    }
    match config.goaway_uri.as_str() {
        "" => println!("  shutdown   GOAWAY, then {} ms", config.goaway_timeout.as_millis()),
        uri => println!("  shutdown   GOAWAY to {uri}, then {} ms", config.goaway_timeout.as_millis()),
    }
    if config.upstreams.is_empty() {
        println!("  upstream   none (this relay is an origin)");
    }
    for u in &config.upstreams {
        let routes: Vec<String> = u
            .routes
            .iter()
            .map(|r| match r.fields().len() {
                0 => "(default)".to_string(),
                _ => r
                    .fields()
                    .iter()
                    .map(|f| String::from_utf8_lossy(f).into_owned())
                    .collect::<Vec<_>>()
                    .join("/"),
            })
            .collect();
        let check = if config.upstream_insecure { ", certificate NOT checked" } else { "" };
        println!("  upstream   {} for {}{check}", u.url, routes.join(", "));
    }
    match config.metrics {
        Some(a) => println!("  metrics    http://{a}/metrics, /healthz, /readyz"),
        None => println!("  metrics    off"),
    }
    match config.web {
        Web::Listen => println!("  web        tcp {} (watch page, /certificate.sha256)", config.listen),
        Web::At(a) => println!("  web        tcp {a} (watch page, /certificate.sha256)"),
        Web::Off => println!("  web        off"),
    }
    if let Some(d) = &config.qlog_dir {
        println!("  qlog       {}", d.display());
    }
}

/// Logs: `log_level` as the filter unless RUST_LOG is set; human-readable or JSON lines.
/// At debug (`moq_edge=debug`) every MoQT message in and out of the relay, with its connection.
fn init_logs(config: &Config) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&config.log_level));
    // Colour only on a terminal: logs piped into a file or another program stay plain text
    // (and NO_COLOR turns it off there too).
    use std::io::IsTerminal;
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match config.log_format {
        LogFormat::Json => builder.json().with_current_span(true).init(),
        LogFormat::Human => builder.init(),
    }
}

fn reload_tls(reloader: &TlsReloader, why: &str) {
    match reloader.reload() {
        Ok(fingerprint) => info!(why, %fingerprint, "TLS certificate reloaded; sessions stay up"),
        Err(e) => warn!(why, error = %format!("{e:#}"), "TLS certificate reload failed; keeping the old one"),
    }
}

/// Reloads the certificate, and the token keys, when their files change.
fn watch_reloadable(tls: TlsReloader, keys: Option<moq_edge::auth::KeyRing>) -> anyhow::Result<()> {
    let tls_files = tls.files();
    watch_files("tls-watch", tls_files, move || reload_tls(&tls, "file changed"))?;
    if let Some(ring) = keys {
        watch_files("keys-watch", ring.files(), move || reload_keys(&ring, "file changed"))?;
    }
    Ok(())
}

fn reload_keys(ring: &moq_edge::auth::KeyRing, why: &str) {
    match ring.reload() {
        Ok(()) => info!(why, keys = ?ring.keys(), "token keys reloaded"),
        Err(e) => warn!(why, error = %format!("{e:#}"), "token key reload failed; keeping the old keys"),
    }
}

/// Calls `changed` when `files` change (checked every 2 s: modification time and size), so
/// that a certificate renewal by certbot, a Kubernetes secret update or a new token key needs
/// no signal.
fn watch_files(name: &str, files: Vec<PathBuf>, changed: impl Fn() + Send + 'static) -> anyhow::Result<()> {
    if files.is_empty() {
        return Ok(());
    }
    let stamp = move || -> Vec<Option<(std::time::SystemTime, u64)>> {
        files
            .iter()
            .map(|f| std::fs::metadata(f).ok().and_then(|m| Some((m.modified().ok()?, m.len()))))
            .collect()
    };
    std::thread::Builder::new().name(name.into()).spawn(move || {
        let mut last = stamp();
        loop {
            std::thread::sleep(std::time::Duration::from_secs(2));
            let now = stamp();
            if now != last && now.iter().all(Option::is_some) {
                last = now;
                changed();
            }
        }
    })?;
    Ok(())
}

/// `moq-edge token`: prints a token of `format` signed with `key` (`ID=SECRET`).
fn mint_token(
    format: &str,
    key: &str,
    namespace: &str,
    publish: bool,
    subscribe: bool,
    ttl: u64,
) -> anyhow::Result<()> {
    use base64::Engine;
    use moq_edge::auth::{self, Format};
    anyhow::ensure!(publish || subscribe, "grant --publish, --subscribe or both");
    let (id, secret) = key.split_once('=').ok_or_else(|| anyhow::anyhow!("--key: ID=SECRET"))?;
    auth::Keys::parse(&[key.to_string()])?;
    let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(secret.trim_end_matches('='))?;
    let fields: Vec<String> = namespace.split('/').filter(|f| !f.is_empty()).map(str::to_string).collect();
    let now = auth::unix_now();
    let token = match format.parse::<Format>()? {
        Format::Tokens => {
            let claims = auth::Claims { ns: fields, publish, subscribe, exp: now + ttl };
            auth::mint(id, &secret, &claims)?
        }
        Format::Jwt => {
            let all = |on: bool| if on { vec![String::new()] } else { Vec::new() };
            let claims = auth::JwtClaims {
                root: fields.join("/"),
                put: all(publish),
                get: all(subscribe),
                exp: Some(now + ttl),
                nbf: None,
                iat: Some(now),
            };
            auth::mint_jwt(&auth::JwtSigner::hs256(&secret).with_kid(id), &claims)?
        }
        Format::Cat => {
            // draft-ietf-moq-c4m actions: PUBLISH_NAMESPACE 2, SUBSCRIBE 4, PUBLISH 6.
            let mut actions = Vec::new();
            if publish {
                actions.extend([2, 6]);
            }
            if subscribe {
                actions.push(4);
            }
            let scope = auth::MoqtScope {
                actions,
                namespace: fields.iter().map(|f| f.as_bytes().to_vec()).collect(),
            };
            let claims =
                auth::CatClaims { exp: now + ttl, iat: Some(now), moqt: vec![scope], ..Default::default() };
            let signer = auth::CatSigner::Hmac { kid: id.as_bytes().to_vec(), secret };
            auth::base64url(&auth::mint_cat(&signer, &claims)?)
        }
    };
    println!("{token}");
    Ok(())
}

/// The web listener on the TCP port (`--web`): the page, the certificate's hash, HTTPS, and
/// WebSocket upgrades to MoQT over QMux handed to the cores. The listener, when it runs.
fn serve_web(
    config: &Config,
    server: &moq_edge::runtime::ServerHandle,
    side_door: SideDoor,
    admission: Option<Admission>,
) -> anyhow::Result<Option<web::Listener>> {
    let addr = match config.web {
        // The port the UDP socket bound (the kernel's choice when --listen asked for port 0).
        Web::Listen => server.local_addr(),
        Web::At(a) => a,
        Web::Off => return Ok(None),
    };
    let (current, tls) = (server.tls_reloader(), server.tls_reloader());
    let sources = web::Sources {
        certificate: Arc::new(move || current.identity().sha256),
        https: Some(Arc::new(move || tls.https_context())),
        websocket: Some(moq_edge::websocket::WebSocketSink::new(server.stream_acceptor(), &config.drafts)),
        side_door: Some(side_door),
        auth: config.auth.clone(),
        admission,
    };
    let listener = web::serve(addr, sources)
        .with_context(|| format!("web listener on tcp {addr} (move it with --web ADDR, or --web off)"))?;
    Ok(Some(listener))
}
