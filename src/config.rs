//! Configuration: command-line flags, each also settable in a TOML file. Flags win over the
//! file, the file wins over the defaults. Unknown keys and bad values are rejected with the
//! key's name.
//!
//! Layers: config belongs to the `moq-edge` package, above the relay and the runtime; the
//! settings types those crates define (an upstream parent, the PUBLISH forward policy, the
//! retry policy) are theirs, re-exported here. The relay's and the runtime's views of a
//! [`Config`] are built by the glue that puts the relay on the runtime (`host`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use clap::Parser;
use serde::Deserialize;

use crate::host::admission::AdmissionConfig;
use crate::host::events::EventsConfig;
use platform::{resolve_access, resolve_events};
pub use relay::links::{moqt_host_port, Parent, MAX_ROUTES_PER_UPSTREAM};
pub use relay::PublishForward;
pub use runtime::RetryPolicy;
use runtime::{RuntimeConfig, TlsSource, UpstreamTls};
use wire::model::TrackNamespace;
use wire::Version;

/// Default listen address: every interface, UDP 4443.
pub const DEFAULT_LISTEN: &str = "[::]:4443";

/// Declares every key once, by concern: each concern is a struct of optional values that
/// clap reads from the command line (flattened into [`Settings`]), and every key is also a
/// field of the flat TOML file, whose unknown keys are refused by name. [`Settings::or_file`]
/// lays the file under the flags.
macro_rules! settings {
    ($(
        $(#[$group_meta:meta])*
        $group:ident in $field:ident {
            $( $(#[$key_meta:meta])* $key:ident: $ty:ty, )*
        }
    )*) => {
        $(
            #[derive(Debug, Default, Clone, clap::Args)]
            $(#[$group_meta])*
            pub struct $group {
                $( $(#[$key_meta])* pub $key: $ty, )*
            }
        )*

        /// Every setting, by concern: what the flags say, over what the file says.
        #[derive(Debug, Default, Clone, clap::Args)]
        pub struct Settings {
            $( #[command(flatten)] pub $field: $group, )*
        }

        /// The TOML file: every key of [`Settings`], flat.
        #[derive(Debug, Default, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        struct FileConfig {
            $( $( $key: $ty, )* )*
        }

        impl Settings {
            /// These settings, each key the file sets and they do not taken from `file`.
            fn or_file(mut self, file: FileConfig) -> Settings {
                $( $( self.$field.$key = self.$field.$key.take().or(file.$key); )* )*
                self
            }
        }
    };
}

/// moq-edge: a thread-per-core Media over QUIC Transport (MoQT) edge relay.
#[derive(Debug, Parser)]
#[command(name = "moq-edge", version, about, long_about = None)]
pub struct Cli {
    /// TOML configuration file; every flag below is also a key in it (e.g. `listen = "[::]:4443"`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Load and validate this configuration file (with the other flags), print the result,
    /// and exit: 0 when it is valid, else 1 with the key and the reason.
    #[arg(long, value_name = "FILE")]
    pub check_config: Option<PathBuf>,

    /// Every setting, by concern: each is also a key of the file.
    #[command(flatten)]
    pub settings: Settings,

    #[command(subcommand)]
    pub command: Option<Command>,
}

settings! {
    /// Where and how QUIC is served: the address, the cores, the TLS identity, the drafts offered,
    /// the connections' timeouts and limits.
    #[command(next_help_heading = "Serving")]
    ServeKeys in serve {
        /// UDP address to serve QUIC on [default: [::]:4443].
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
        /// Number of cores (one executor and one UDP socket each) [default: all available].
        #[arg(long, value_name = "N")]
        cores: Option<usize>,
        /// TLS certificate chain (PEM). Without --cert/--key a self-signed certificate is generated.
        #[arg(long, value_name = "PEM", requires = "key")]
        cert: Option<PathBuf>,
        /// TLS private key (PEM) for --cert.
        #[arg(long, value_name = "PEM", requires = "cert")]
        key: Option<PathBuf>,
        /// MoQT drafts offered to clients, over raw QUIC (one ALPN each) and WebTransport
        /// (WT-Protocol), e.g. `16,22` [default: every draft this build speaks: 22,20,18,16,14].
        #[arg(long, value_name = "N,...", value_delimiter = ',')]
        drafts: Option<Vec<u32>>,
        /// Stateless retry (address validation): never, always, or auto (only while a core has
        /// more than 1024 handshakes in progress) [default: auto].
        #[arg(long, value_name = "POLICY")]
        retry: Option<String>,
        /// QUIC idle timeout in milliseconds [default: 30000].
        #[arg(long, value_name = "MS")]
        idle_timeout_ms: Option<u64>,
        /// A connection that has not completed MoQT SETUP this many milliseconds after it was
        /// accepted is closed (CONTROL_MESSAGE_TIMEOUT) [default: 5000].
        #[arg(long, value_name = "MS")]
        setup_timeout_ms: Option<u64>,
        /// Connections one core accepts before refusing more [default: 10000].
        #[arg(long, value_name = "N")]
        max_connections_per_core: Option<usize>,
    }
    /// How each core spends its time: congestion control, admission under load, GSO and the
    /// batching of sends and receives.
    #[command(next_help_heading = "Cores")]
    CoreKeys in core {
        /// Congestion control: bbr2, cubic, reno [default: bbr2: the lowest latency on lossy
        /// viewer links and across lossy tiers, about cubic's CPU on clean ones for small objects,
        /// more for objects of many packets on sub-millisecond paths; bench/README.md "Impaired
        /// viewer links", "The 2x target"].
        #[arg(long, value_name = "NAME")]
        congestion_control: Option<String>,
        /// Admission under load: a core busy more than this percentage of the last second refuses
        /// new work (new connections; SUBSCRIBE, FETCH and namespace subscriptions get
        /// REQUEST_ERROR EXCESSIVE_LOAD) while what it serves goes on; 0 or 100 turns it off
        /// [default: 90].
        #[arg(long, value_name = "PCT")]
        admission_busy_pct: Option<u8>,
        /// Send with UDP GSO (segmentation offload) [default: true].
        #[arg(long, value_name = "BOOL")]
        gso: Option<bool>,
        /// While a core is busy (half of the last second or more), a connection's packets are
        /// held up to this many microseconds so that several leave in one GSO train: less CPU per
        /// byte at high load for that much more latency (bench/README.md); 0: never [default: 0].
        #[arg(long, value_name = "US")]
        send_coalesce_us: Option<u64>,
        /// While datagrams arrive fast enough that this many microseconds gather four or more, a
        /// core that has just read some reads again only this long after that turn began (or at
        /// its next timer), so that a turn handles many at once: less CPU per byte for at most this much
        /// more latency (bench/README.md); 0: wake for every datagram [default: 500].
        #[arg(long, value_name = "US")]
        recv_coalesce_us: Option<u64>,
    }
    /// The relay's timers, queues and cache, and how it leaves (GOAWAY).
    #[command(next_help_heading = "Delivery")]
    DeliveryKeys in delivery {
        /// How long an upstream subscription outlives its last subscriber, in milliseconds
        /// [default: 2000].
        #[arg(long, value_name = "MS")]
        linger_ms: Option<u64>,
        /// What the relay asks of a publisher's PUBLISH: `always` (objects at once: the track is
        /// cached, and the first subscriber starts from the cache) or `on-demand` (FORWARD=0 until
        /// someone subscribes, then REQUEST_UPDATE; saves ingest, but publishers that ignore
        /// REQUEST_UPDATE then never send) [default: always].
        #[arg(long, value_name = "POLICY")]
        publish_forward: Option<String>,
        /// Bytes (in KiB) a subscriber session may have queued beyond QUIC flow control before
        /// its oldest subgroup streams are reset [default: 1024].
        #[arg(long, value_name = "KIB")]
        max_backlog_kib: Option<u64>,
        /// Subgroup data (in KiB) a subscriber connection's QUIC stack may hold not yet sent;
        /// beyond it the data waits in the session's queue, where --max-backlog-kib and
        /// --max-lag-ms apply [default: 128].
        #[arg(long, value_name = "KIB")]
        max_unsent_kib: Option<u64>,
        /// Objects (in MiB, payloads and their messages) one core may have queued toward another
        /// core that has not taken them yet: past half of it, new subgroup streams are not
        /// forwarded to that core; an object that would pass it resets its stream there
        /// (EXCESSIVE_LOAD) [default: 8].
        #[arg(long, value_name = "MIB")]
        mesh_queue_mib: Option<u64>,
        /// Freshness budget of live delivery, in milliseconds: an object a subscriber's connection
        /// has not taken within this of its arrival is not sent, and its subgroup stream is reset
        /// (a subscription that keeps losing streams so ends with TOO_FAR_BEHIND); a subscriber's
        /// smaller delivery timeouts apply as they are; 0 turns it off [default: 2000].
        #[arg(long, value_name = "MS")]
        max_lag_ms: Option<u64>,
        /// Object cache for late joiners and FETCH, in MiB for the whole relay (split evenly
        /// between the cores); 0 disables it [default: 1024].
        #[arg(long, value_name = "MIB")]
        cache_mib: Option<u64>,
        /// Graceful shutdown (SIGTERM/SIGINT): every session gets GOAWAY and is served this long,
        /// in milliseconds, before the rest are closed with GOAWAY_TIMEOUT; 0 closes at once
        /// [default: 5000].
        #[arg(long, value_name = "MS")]
        goaway_timeout_ms: Option<u64>,
        /// New Session URI sent in GOAWAY (for example moqt://other-edge:4443); empty: clients
        /// reconnect to the URI they used [default: empty].
        #[arg(long, value_name = "URI")]
        goaway_uri: Option<String>,
    }
    /// Who may do what: the authorization mode, its keys, or the platform's admission service.
    #[command(next_help_heading = "Authorization")]
    AccessKeys in access {
        /// Authorization: `open` (tokens are not needed), or the token formats every request
        /// needs one of, comma-separated: `tokens` (this relay's own, signed with an --auth-key),
        /// `jwt` (JSON Web Tokens verified with --auth-jwt-keys), `cat` (Common Access Tokens
        /// verified with --auth-cat-keys); e.g. `jwt,tokens`; or `http`: the platform's service at
        /// --auth-url admits each session [default: open].
        #[arg(long, value_name = "MODE")]
        auth: Option<String>,
        /// With `--auth http`: the platform's admission service, POSTed a JSON question about each
        /// session (its tokens and URL) and asked again when the answer's time is up.
        #[arg(long, value_name = "URL")]
        auth_url: Option<String>,
        /// With `--auth http`: what a service that cannot be reached (or answers garbage) means:
        /// `deny`, or `allow-known` (what it last allowed for the same question stays allowed)
        /// [default: allow-known].
        #[arg(long, value_name = "POLICY")]
        auth_failure: Option<String>,
        /// A token key, `ID=SECRET` (SECRET: base64url, at least 16 bytes); repeat to rotate keys.
        #[arg(long = "auth-key", value_name = "ID=SECRET")]
        auth_keys: Option<Vec<String>>,
        /// JWT keys: a JWK set (`{"keys": [...]}`, HS256, ES256, EdDSA or RS256 keys with `kid`), one
        /// JWK, or a file holding an HS256 secret. Reloaded on SIGHUP and when it changes; repeat
        /// for several files.
        #[arg(long = "auth-jwt-keys", value_name = "FILE")]
        auth_jwt_keys: Option<Vec<PathBuf>>,
        /// CAT keys: a JWK set of `oct` (HMAC-SHA256) and `EC` P-256 (ES256) keys with `kid`.
        /// Reloaded on SIGHUP and when it changes; repeat for several files.
        #[arg(long = "auth-cat-keys", value_name = "FILE")]
        auth_cat_keys: Option<Vec<PathBuf>>,
    }
    /// Parent relays and the cluster's namespace directory.
    #[command(next_help_heading = "Tiers")]
    TierKeys in tiers {
        /// A parent relay: `moqt://HOST:PORT` (the default route) or `PREFIX=moqt://HOST:PORT`
        /// (namespaces under PREFIX, fields separated by `/`; the longest prefix wins). Tracks no
        /// local publisher serves are subscribed there; local announcements are forwarded there.
        /// Repeat for several.
        #[arg(long = "upstream", value_name = "[PREFIX=]URL")]
        upstream: Option<Vec<String>>,
        /// Authorization token this relay sends to its upstreams.
        #[arg(long, value_name = "TOKEN")]
        upstream_token: Option<String>,
        /// PEM bundle of CAs that upstream certificates must chain to [default: system roots].
        #[arg(long, value_name = "PEM")]
        upstream_ca: Option<PathBuf>,
        /// Do not check upstream certificates (labs and tests only) [default: false].
        #[arg(long, value_name = "BOOL")]
        upstream_insecure: Option<bool>,
        /// A namespace directory shared by the relays of a cluster:
        /// `redis://[USER:PASSWORD@]HOST:PORT[/DB]`, or `rediss://…` for TLS.
        /// Namespaces announced here are registered there; tracks no local publisher and no
        /// upstream route serves are looked up there and subscribed from the relay that has them
        /// [default: off]. Needs --advertise.
        #[arg(long, value_name = "URL")]
        directory: Option<String>,
        /// PEM bundle of CAs the directory's certificate (`rediss://`) must chain to [default:
        /// the system roots].
        #[arg(long, value_name = "PEM")]
        directory_ca: Option<PathBuf>,
        /// Key prefix of this cluster's entries in the directory (several clusters may share one
        /// Redis) [default: moq-edge].
        #[arg(long, value_name = "PREFIX")]
        directory_prefix: Option<String>,
        /// How long a directory entry outlives the relay that wrote it, in milliseconds (refreshed
        /// every third of it) [default: 6000].
        #[arg(long, value_name = "MS")]
        directory_lease_ms: Option<u64>,
        /// The URL other relays reach this one at, `moqt://HOST:PORT`, written in the directory.
        #[arg(long, value_name = "URL")]
        advertise: Option<String>,
    }
    /// What an operator reads: metrics, the web listener, logs and qlog.
    #[command(next_help_heading = "Operations")]
    OpsKeys in ops {
        /// Serve Prometheus metrics (/metrics) and health (/healthz, /readyz) over HTTP on this
        /// TCP address, e.g. 127.0.0.1:9090 [default: off].
        #[arg(long, value_name = "ADDR")]
        metrics: Option<String>,
        /// Serve the watch page and /certificate.sha256 over HTTP on this TCP address, or `off`
        /// [default: the --listen address, so TCP and UDP share the port].
        #[arg(long, value_name = "ADDR|off")]
        web: Option<String>,
        /// Log format: human or json [default: human].
        #[arg(long, value_name = "FORMAT")]
        log_format: Option<String>,
        /// Log filter (tracing syntax, e.g. `info,moq_edge::relay=debug`); RUST_LOG wins when set
        /// [default: info].
        #[arg(long, value_name = "FILTER")]
        log_level: Option<String>,
        /// Write a qlog file per QUIC connection into this directory [default: off].
        #[arg(long, value_name = "DIR")]
        qlog_dir: Option<PathBuf>,
    }
    /// The platform's event hooks.
    #[command(next_help_heading = "Event hooks")]
    EventKeys in events {
        /// Event hooks: POST each batch of events (broadcast, track and session starts and ends)
        /// as a JSON array to this http:// or https:// URL [default: off].
        #[arg(long, value_name = "URL")]
        events_url: Option<String>,
        /// Event hooks: append events as JSON lines to this file, or `-` for standard output
        /// [default: off].
        #[arg(long, value_name = "PATH")]
        events_file: Option<PathBuf>,
        /// Events held while the hook's sink does not take them; the oldest are dropped beyond
        /// (counted) [default: 10000].
        #[arg(long, value_name = "N")]
        events_queue: Option<usize>,
    }
}

/// Subcommands (without one, the relay runs).
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Mint an authorization token and print it (for testing: a platform mints its own).
    Token {
        /// The format: `tokens` (this relay's own), `jwt` (HS256, with moq-dev's `root`,
        /// `put` and `get` claims) or `cat` (a Common Access Token in COSE_Mac0, HMAC-SHA256,
        /// with a `moqt` scope claim; printed as base64url).
        #[arg(long, value_name = "FORMAT", default_value = "tokens")]
        format: String,
        /// The signing key, `ID=SECRET` (SECRET: base64url) as given to --auth-key, or as the
        /// `kid` and `k` of an `oct` key in an --auth-jwt-keys / --auth-cat-keys JWK set.
        #[arg(long, value_name = "ID=SECRET")]
        key: String,
        /// Namespace prefix the token covers, fields separated by `/` (e.g. `live/cam`).
        #[arg(long, value_name = "PREFIX")]
        namespace: String,
        /// Grant publishing (PUBLISH_NAMESPACE, PUBLISH).
        #[arg(long)]
        publish: bool,
        /// Grant subscribing (SUBSCRIBE, FETCH, TRACK_STATUS, SUBSCRIBE_NAMESPACE).
        #[arg(long)]
        subscribe: bool,
        /// Seconds until it expires.
        #[arg(long, value_name = "S", default_value_t = 3600)]
        ttl: u64,
    },
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Human,
    Json,
}

/// Where the web listener (the watch page, `/certificate.sha256`) listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Web {
    /// TCP on the address and port the QUIC listener bound (the default).
    Listen,
    /// TCP on this address.
    At(SocketAddr),
    /// No web listener.
    Off,
}

/// Where the TLS identity comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tls {
    /// Certificate chain and key from PEM files.
    Files { cert: PathBuf, key: PathBuf },
    /// A self-signed ECDSA P-256 certificate generated at start.
    SelfSigned,
}

/// The resolved configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub listen: SocketAddr,
    pub cores: usize,
    pub tls: Tls,
    pub congestion_control: String,
    /// The MoQT drafts offered to clients, newest first.
    pub drafts: Vec<Version>,
    pub retry: RetryPolicy,
    pub idle_timeout: Duration,
    /// MoQT SETUP must complete this long after a connection is accepted.
    pub setup_timeout: Duration,
    pub max_connections_per_core: usize,
    /// A core busier than this percentage refuses new work; 0 (or 100): never.
    pub admission_busy_pct: u8,
    pub gso: bool,
    /// See `RuntimeConfig::send_coalesce`.
    pub send_coalesce: Duration,
    /// See `RuntimeConfig::recv_coalesce`.
    pub recv_coalesce: Duration,
    pub linger: Duration,
    pub publish_forward: PublishForward,
    /// Bytes; see `RelayConfig::max_backlog`.
    pub max_backlog: usize,
    /// See `RelayConfig::max_lag` (`None`: off).
    pub max_lag: Option<Duration>,
    /// Bytes; see `RelayConfig::max_unsent`.
    pub max_unsent: usize,
    /// Bytes; see `RelayConfig::mesh_queue`.
    pub mesh_queue: usize,
    /// Bytes for the whole relay; see `RelayConfig::cache_budget` (per core).
    pub cache: usize,
    pub goaway_timeout: Duration,
    pub goaway_uri: String,
    /// The keys that verify tokens when every request needs one (`auth` other than `open`);
    /// `None`: open.
    pub auth: Option<auth::KeyRing>,
    /// Admission by the platform's service (`auth = "http"`).
    pub admission: Option<AdmissionConfig>,
    /// Parent relays, one per distinct URL with its routes.
    pub upstreams: Vec<Parent>,
    pub upstream_ca: Option<PathBuf>,
    pub upstream_insecure: bool,
    /// The cluster's namespace directory, when one is configured.
    pub directory: Option<Directory>,
    pub metrics: Option<SocketAddr>,
    pub web: Web,
    pub log_format: LogFormat,
    pub log_level: String,
    pub qlog_dir: Option<PathBuf>,
    /// The event hooks, when configured.
    pub events: Option<EventsConfig>,
}

/// A namespace directory on Redis (`directory`, ARCHITECTURE.md "Namespace directory").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directory {
    /// `redis://[USER:PASSWORD@]HOST:PORT[/DB]` or `rediss://…` (TLS).
    pub url: String,
    /// CAs a `rediss://` directory's certificate must chain to (`None`: the system roots).
    pub ca: Option<PathBuf>,
    /// Every key and the change channel start with it.
    pub prefix: String,
    /// What this relay writes as its address (`moqt://HOST:PORT`).
    pub advertise: String,
    /// How long an entry lives unless refreshed.
    pub lease: Duration,
    /// Authorization token sent on the links this relay opens to relays the directory names
    /// (`upstream_token`).
    pub token: Option<String>,
}

/// `upstream` entries (`[PREFIX=]moqt://HOST:PORT`) grouped by URL: one link per parent.
fn parse_upstreams(entries: &[String], token: Option<&str>) -> anyhow::Result<Vec<Parent>> {
    let mut out: Vec<Parent> = Vec::new();
    for entry in entries {
        let (prefix, url) = match entry.split_once("=moqt://") {
            Some((p, rest)) => (p, format!("moqt://{rest}")),
            None => ("", entry.clone()),
        };
        if !url.starts_with("moqt://") {
            bail!("config key `upstream`: {entry:?} is not [PREFIX=]moqt://HOST:PORT");
        }
        let (host, port) =
            moqt_host_port(&url).map_err(|why| anyhow!("config key `upstream`: {why} in {entry:?}"))?;
        let authority = url["moqt://".len()..].split('/').next().unwrap_or_default();
        let fields: Vec<&str> = prefix.split('/').filter(|f| !f.is_empty()).collect();
        if fields.len() > 32 {
            bail!("config key `upstream`: the prefix of {entry:?} has more than 32 fields");
        }
        let route = TrackNamespace::from_strs(&fields);
        match out.iter_mut().find(|u| u.host == host && u.port == port) {
            Some(u) if u.routes.contains(&route) => {
                bail!("config key `upstream`: prefix {prefix:?} given twice")
            }
            Some(u) => u.routes.push(route),
            None => out.push(Parent {
                url: format!("moqt://{authority}"),
                host,
                port,
                routes: vec![route],
                token: token.map(str::to_string),
            }),
        }
    }
    if let Some(u) = out.iter().find(|u| u.routes.len() > MAX_ROUTES_PER_UPSTREAM) {
        bail!("config key `upstream`: more than {MAX_ROUTES_PER_UPSTREAM} prefixes for {}", u.url);
    }
    let defaults = out.iter().flat_map(|u| &u.routes).filter(|r| r.fields().is_empty()).count();
    if defaults > 1 {
        bail!("config key `upstream`: more than one default route (a URL without PREFIX=)");
    }
    Ok(out)
}

/// The drafts named (each once, at least one), newest first; `None`: every draft.
fn parse_drafts(numbers: Option<&[u32]>) -> anyhow::Result<Vec<Version>> {
    let Some(numbers) = numbers else { return Ok(Version::ALL.to_vec()) };
    let mut drafts = Vec::new();
    for n in numbers {
        let v = client::cli::parse_draft(&n.to_string()).map_err(|e| anyhow!("config key `drafts`: {e}"))?;
        if !drafts.contains(&v) {
            drafts.push(v);
        }
    }
    if drafts.is_empty() {
        bail!("config key `drafts`: name at least one draft");
    }
    drafts.sort_by_key(|v| Version::KNOWN.iter().position(|a| a == v));
    Ok(drafts)
}

fn parse_retry(s: &str) -> anyhow::Result<RetryPolicy> {
    match s {
        "never" => Ok(RetryPolicy::Never),
        "always" => Ok(RetryPolicy::Always),
        "auto" => Ok(RetryPolicy::Auto { pending_handshakes: 1024 }),
        other => bail!("config key `retry`: {other:?} is not one of never, always, auto"),
    }
}

impl Config {
    /// Resolves flags, the optional file and defaults. `available_cores` is what the machine has.
    pub fn resolve(cli: &Cli, available_cores: usize) -> anyhow::Result<Config> {
        let file = match cli.check_config.as_ref().or(cli.config.as_ref()) {
            Some(path) => load_file(path)?,
            None => FileConfig::default(),
        };
        let s = &cli.settings.clone().or_file(file);
        let listen = resolve_listen(s)?;
        let cores = s.serve.cores.unwrap_or(available_cores);
        if cores == 0 || cores > 256 {
            bail!("config key `cores`: {cores} is out of range (1..=256)");
        }
        let tls = match (s.serve.cert.clone(), s.serve.key.clone()) {
            (Some(cert), Some(key)) => Tls::Files { cert, key },
            (None, None) => Tls::SelfSigned,
            (Some(_), None) => bail!("config key `key`: required when `cert` is set"),
            (None, Some(_)) => bail!("config key `cert`: required when `key` is set"),
        };
        let Serving {
            congestion_control,
            drafts,
            retry,
            idle_ms,
            setup_ms,
            max_connections_per_core,
            admission_busy_pct,
            gso,
            coalesce_us,
            recv_coalesce_us,
        } = resolve_serving(s)?;
        let RelayLimits {
            linger_ms,
            backlog_kib,
            lag_ms,
            unsent_kib,
            mesh_mib,
            cache_mib,
            goaway_ms,
            publish_forward,
            goaway_uri,
        } = resolve_relay_limits(s)?;
        let (auth, admission) = resolve_access(s)?;
        let token = s.tiers.upstream_token.clone();
        let upstreams = parse_upstreams(s.tiers.upstream.as_deref().unwrap_or_default(), token.as_deref())?;
        let upstream_ca = s.tiers.upstream_ca.clone();
        if let Some(ca) = &upstream_ca {
            if !ca.is_file() {
                bail!("config key `upstream_ca`: {} is not a readable file", ca.display());
            }
        }
        let upstream_insecure = s.tiers.upstream_insecure.unwrap_or(false);
        let directory = resolve_directory(s, token.as_ref())?;
        let Ops { metrics, web, log_format, log_level, qlog_dir } = resolve_ops(s)?;
        let events = resolve_events(s, directory.as_ref(), listen)?;
        Ok(Config {
            upstreams,
            upstream_ca,
            upstream_insecure,
            directory,
            metrics,
            web,
            log_format,
            log_level,
            qlog_dir,
            events,
            auth,
            admission,
            listen,
            cores,
            tls,
            congestion_control,
            drafts,
            retry,
            idle_timeout: Duration::from_millis(idle_ms),
            setup_timeout: Duration::from_millis(setup_ms),
            max_connections_per_core,
            admission_busy_pct: if admission_busy_pct == 100 { 0 } else { admission_busy_pct },
            gso,
            send_coalesce: Duration::from_micros(coalesce_us),
            recv_coalesce: Duration::from_micros(recv_coalesce_us),
            linger: Duration::from_millis(linger_ms),
            publish_forward,
            max_backlog: backlog_kib as usize * 1024,
            max_lag: (lag_ms > 0).then(|| Duration::from_millis(lag_ms)),
            max_unsent: unsent_kib as usize * 1024,
            mesh_queue: (mesh_mib as usize) << 20,
            cache: cache_mib as usize * 1024 * 1024,
            goaway_timeout: Duration::from_millis(goaway_ms),
            goaway_uri,
        })
    }
}

impl Config {
    /// The runtime's view of this configuration.
    pub fn runtime(&self) -> RuntimeConfig {
        let mut rc = RuntimeConfig::new(self.listen, self.cores);
        rc.tls = match &self.tls {
            Tls::Files { cert, key } => TlsSource::Files { cert: cert.clone(), key: key.clone() },
            Tls::SelfSigned => TlsSource::SelfSigned,
        };
        rc.congestion_control = self.congestion_control.clone();
        rc.retry = self.retry;
        rc.idle_timeout = self.idle_timeout;
        rc.setup_timeout = self.setup_timeout;
        rc.max_connections_per_core = self.max_connections_per_core;
        rc.admission_busy_pct = self.admission_busy_pct;
        rc.gso = self.gso;
        rc.send_coalesce = self.send_coalesce;
        rc.recv_coalesce = self.recv_coalesce;
        rc.drain_grace = self.goaway_timeout;
        rc.upstream_tls = UpstreamTls { ca: self.upstream_ca.clone(), insecure: self.upstream_insecure };
        rc.qlog_dir = self.qlog_dir.clone();
        rc
    }
}

/// The namespace directory (`directory` and the keys that go with it), if one is configured.
fn resolve_directory(s: &Settings, token: Option<&String>) -> anyhow::Result<Option<Directory>> {
    Ok(match s.tiers.directory.clone().filter(|d| !d.is_empty()) {
        None => None,
        Some(url) => {
            let parsed = url::Url::parse(&url)
                .map_err(|e| anyhow!("config key `directory`: {url:?} is not a URL: {e}"))?;
            if !matches!(parsed.scheme(), "redis" | "rediss") {
                bail!("config key `directory`: {url:?} is not redis://HOST:PORT[/DB] or rediss://…");
            }
            let ca = s.tiers.directory_ca.clone();
            if let Some(ca) = &ca {
                if !ca.is_file() {
                    bail!("config key `directory_ca`: {} is not a readable file", ca.display());
                }
            }
            if parsed.host_str().is_none_or(str::is_empty) {
                bail!("config key `directory`: {url:?} names no host");
            }
            let advertise = s.tiers.advertise.clone().unwrap_or_default();
            if let Err(why) = moqt_host_port(&advertise) {
                bail!("config key `advertise`: {advertise:?}: {why} (a directory needs moqt://HOST:PORT)");
            }
            let prefix = s.tiers.directory_prefix.clone();
            let prefix = prefix.unwrap_or_else(|| "moq-edge".into());
            if prefix.is_empty()
                || prefix.len() > 64
                || prefix.contains(|c: char| c.is_whitespace() || "*?[]".contains(c))
            {
                bail!("config key `directory_prefix`: {prefix:?} must be 1 to 64 characters, without spaces or * ? [ ]");
            }
            let lease_ms = s.tiers.directory_lease_ms.unwrap_or(6000);
            if !(300..=600_000).contains(&lease_ms) {
                bail!("config key `directory_lease_ms`: {lease_ms} is not between 300 and 600000");
            }
            let lease = Duration::from_millis(lease_ms);
            Some(Directory { url, ca, prefix, advertise, lease, token: token.cloned() })
        }
    })
}

/// What an operator reads: the metrics endpoint, the web listener, logs and qlog.
struct Ops {
    metrics: Option<SocketAddr>,
    web: Web,
    log_format: LogFormat,
    log_level: String,
    qlog_dir: Option<PathBuf>,
}

fn resolve_ops(s: &Settings) -> anyhow::Result<Ops> {
    let metrics = match s.ops.metrics.as_deref() {
        None | Some("") => None,
        Some(a) => Some(a.parse().with_context(|| format!("config key `metrics`: bad address {a:?}"))?),
    };
    let web = match s.ops.web.as_deref() {
        None => Web::Listen,
        Some("off") => Web::Off,
        Some(a) => Web::At(a.parse().with_context(|| {
            format!("config key `web`: {a:?} is neither an address (HOST:PORT) nor `off`")
        })?),
    };
    let log_format = match s.ops.log_format.as_deref().unwrap_or("human") {
        "human" => LogFormat::Human,
        "json" => LogFormat::Json,
        other => bail!("config key `log_format`: {other:?} is not one of human, json"),
    };
    let log_level = s.ops.log_level.clone().unwrap_or_else(|| "info".into());
    if let Err(e) = tracing_subscriber::EnvFilter::try_new(&log_level) {
        bail!("config key `log_level`: {log_level:?}: {e}");
    }
    let qlog_dir = s.ops.qlog_dir.clone().filter(|d| !d.as_os_str().is_empty());
    if let Some(d) = &qlog_dir {
        if !d.is_dir() {
            bail!("config key `qlog_dir`: {} is not a directory", d.display());
        }
    }
    Ok(Ops { metrics, web, log_format, log_level, qlog_dir })
}

/// `listen`, or the default.
fn resolve_listen(s: &Settings) -> anyhow::Result<SocketAddr> {
    Ok(match s.serve.listen.as_deref() {
        Some(a) => a.parse().with_context(|| format!("config key `listen`: bad address {a:?}"))?,
        None => DEFAULT_LISTEN.parse().context("default listen address")?,
    })
}

/// `auth` and the keys of each format it names: the key ring that verifies tokens, or `None`
/// in open mode. Each format named needs keys of its own; key files are read now.
fn resolve_auth(s: &Settings) -> anyhow::Result<Option<auth::KeyRing>> {
    let tokens = s.access.auth_keys.clone().unwrap_or_default();
    let jwt_files = s.access.auth_jwt_keys.clone().unwrap_or_default();
    let cat_files = s.access.auth_cat_keys.clone().unwrap_or_default();
    // The keys are checked in open mode too: a typo is an error before it matters.
    auth::Keys::parse(&tokens).map_err(|e| anyhow!("config key `auth_keys`: {e}"))?;
    let mode = s.access.auth.clone().unwrap_or_else(|| "open".into());
    if mode == "open" {
        return Ok(None);
    }
    let formats = auth::Formats::parse(&mode).map_err(|e| anyhow!("config key `auth`: {e}; or `open`"))?;
    let named = |on: bool, empty: bool, key: &str, what: &str| {
        if on && empty {
            bail!("config key `{key}`: `auth` names {what}, which needs at least one key");
        }
        Ok(())
    };
    named(formats.tokens, tokens.is_empty(), "auth_keys", "tokens")?;
    named(formats.jwt, jwt_files.is_empty(), "auth_jwt_keys", "jwt")?;
    named(formats.cat, cat_files.is_empty(), "auth_cat_keys", "cat")?;
    if !(formats.tokens || formats.jwt || formats.cat) {
        bail!("config key `auth`: name `open` or at least one of tokens, jwt, cat");
    }
    let sources = auth::AuthSources { tokens, jwt_files, cat_files, formats };
    Ok(Some(auth::KeyRing::load(sources).map_err(|e| anyhow!("config key `auth`: {e:#}"))?))
}

/// QUIC and the cores: congestion control, retry, timeouts, limits, batching.
struct Serving {
    congestion_control: String,
    drafts: Vec<Version>,
    retry: RetryPolicy,
    idle_ms: u64,
    setup_ms: u64,
    max_connections_per_core: usize,
    admission_busy_pct: u8,
    gso: bool,
    coalesce_us: u64,
    recv_coalesce_us: u64,
}

fn resolve_serving(s: &Settings) -> anyhow::Result<Serving> {
    let congestion_control = s.core.congestion_control.clone().unwrap_or_else(|| "bbr2".into());
    if !["cubic", "reno", "bbr2", "bbr2_gcongestion"].contains(&congestion_control.as_str()) {
        bail!("config key `congestion_control`: {congestion_control:?} is not one of cubic, reno, bbr2");
    }
    let drafts = parse_drafts(s.serve.drafts.as_deref())?;
    let retry = parse_retry(s.serve.retry.as_deref().unwrap_or("auto"))?;
    let idle_ms = s.serve.idle_timeout_ms.unwrap_or(30_000);
    if idle_ms == 0 {
        bail!("config key `idle_timeout_ms`: must be greater than 0");
    }
    let setup_ms = s.serve.setup_timeout_ms.unwrap_or(5_000);
    if setup_ms == 0 {
        bail!("config key `setup_timeout_ms`: must be greater than 0");
    }
    let max_connections_per_core = s.serve.max_connections_per_core.unwrap_or(10_000);
    if max_connections_per_core == 0 {
        bail!("config key `max_connections_per_core`: must be greater than 0");
    }
    let admission_busy_pct = s.core.admission_busy_pct.unwrap_or(90);
    if admission_busy_pct > 100 {
        bail!("config key `admission_busy_pct`: {admission_busy_pct} is more than 100");
    }
    let gso = s.core.gso.unwrap_or(true);
    let coalesce_us = s.core.send_coalesce_us.unwrap_or(0);
    if coalesce_us > 20_000 {
        bail!("config key `send_coalesce_us`: {coalesce_us} is more than 20000 (20 ms)");
    }
    let recv_coalesce_us = s.core.recv_coalesce_us.unwrap_or(500);
    if recv_coalesce_us > 5_000 {
        bail!("config key `recv_coalesce_us`: {recv_coalesce_us} is more than 5000 (5 ms)");
    }
    Ok(Serving {
        congestion_control,
        drafts,
        retry,
        idle_ms,
        setup_ms,
        max_connections_per_core,
        admission_busy_pct,
        gso,
        coalesce_us,
        recv_coalesce_us,
    })
}

/// The relay's timers, queues and cache, and how it leaves (GOAWAY).
struct RelayLimits {
    linger_ms: u64,
    backlog_kib: u64,
    lag_ms: u64,
    unsent_kib: u64,
    mesh_mib: u64,
    cache_mib: u64,
    goaway_ms: u64,
    publish_forward: PublishForward,
    goaway_uri: String,
}

fn resolve_relay_limits(s: &Settings) -> anyhow::Result<RelayLimits> {
    let linger_ms = s.delivery.linger_ms.unwrap_or(2_000);
    if linger_ms > 3_600_000 {
        bail!("config key `linger_ms`: {linger_ms} is more than an hour");
    }
    let backlog_kib = s.delivery.max_backlog_kib.unwrap_or(1024);
    if !(64..=1 << 20).contains(&backlog_kib) {
        bail!("config key `max_backlog_kib`: {backlog_kib} is out of range (64..=1048576)");
    }
    let lag_ms = s.delivery.max_lag_ms.unwrap_or(2_000);
    if lag_ms > 600_000 {
        bail!("config key `max_lag_ms`: {lag_ms} is more than 10 minutes");
    }
    let unsent_kib = s.delivery.max_unsent_kib.unwrap_or(128);
    if !(16..=1 << 16).contains(&unsent_kib) {
        bail!("config key `max_unsent_kib`: {unsent_kib} is out of range (16..=65536)");
    }
    let mesh_mib = s.delivery.mesh_queue_mib.unwrap_or(8);
    if !(1..=4096).contains(&mesh_mib) {
        bail!("config key `mesh_queue_mib`: {mesh_mib} is out of range (1..=4096)");
    }
    let cache_mib = s.delivery.cache_mib.unwrap_or(1024);
    if cache_mib > 1 << 20 {
        bail!("config key `cache_mib`: {cache_mib} is more than 1 TiB");
    }
    let goaway_ms = s.delivery.goaway_timeout_ms.unwrap_or(5_000);
    if goaway_ms > 600_000 {
        bail!("config key `goaway_timeout_ms`: {goaway_ms} is more than 10 minutes");
    }
    let publish_forward = match s.delivery.publish_forward.as_deref() {
        None | Some("always") => PublishForward::Always,
        Some("on-demand") => PublishForward::OnDemand,
        Some(other) => {
            bail!("config key `publish_forward`: {other:?} is neither \"always\" nor \"on-demand\"")
        }
    };
    let goaway_uri = s.delivery.goaway_uri.clone().unwrap_or_default();
    // draft-22 §9.2: at most 8,192 bytes, and it should use the same scheme.
    if goaway_uri.len() > 8192 {
        bail!("config key `goaway_uri`: longer than 8192 bytes");
    }
    if !goaway_uri.is_empty() && !goaway_uri.starts_with("moqt://") {
        bail!("config key `goaway_uri`: {goaway_uri:?} is not a moqt:// URI");
    }
    Ok(RelayLimits {
        linger_ms,
        backlog_kib,
        lag_ms,
        unsent_kib,
        mesh_mib,
        cache_mib,
        goaway_ms,
        publish_forward,
        goaway_uri,
    })
}

fn load_file(path: &Path) -> anyhow::Result<FileConfig> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

mod platform;
#[cfg(test)]
mod tests;
