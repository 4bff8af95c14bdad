//! Configuration: command-line flags, each also settable in a TOML file. Flags win over the
//! file, the file wins over the defaults. Unknown keys and bad values are rejected with the
//! key's name.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Parser;
use serde::Deserialize;

/// Default listen address: every interface, UDP 4443.
pub const DEFAULT_LISTEN: &str = "[::]:4443";

/// moq-edge: a thread-per-core Media over QUIC Transport (MoQT) edge relay.
#[derive(Debug, Parser)]
#[command(name = "moq-edge", version, about, long_about = None)]
pub struct Cli {
    /// TOML configuration file; every flag below is also a key in it (e.g. `listen = "[::]:4443"`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// UDP address to serve QUIC on [default: [::]:4443].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,

    /// Number of cores (one executor and one UDP socket each) [default: all available].
    #[arg(long, value_name = "N")]
    pub cores: Option<usize>,

    /// TLS certificate chain (PEM). Without --cert/--key a self-signed certificate is generated.
    #[arg(long, value_name = "PEM", requires = "key")]
    pub cert: Option<PathBuf>,

    /// TLS private key (PEM) for --cert.
    #[arg(long, value_name = "PEM", requires = "cert")]
    pub key: Option<PathBuf>,

    /// Parse and validate the configuration, print it, and exit.
    #[arg(long)]
    pub check_config: bool,
}

/// The TOML file: the same keys as the flags.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<String>,
    cores: Option<usize>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
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
}

impl Config {
    /// Resolves flags, the optional file and defaults. `available_cores` is what the machine has.
    pub fn resolve(cli: &Cli, available_cores: usize) -> anyhow::Result<Config> {
        let file = match &cli.config {
            Some(path) => load_file(path)?,
            None => FileConfig::default(),
        };
        let listen = match (cli.listen, &file.listen) {
            (Some(a), _) => a,
            (None, Some(s)) => {
                s.parse().with_context(|| format!("config key `listen`: bad address {s:?}"))?
            }
            (None, None) => DEFAULT_LISTEN.parse().context("default listen address")?,
        };
        let cores = cli.cores.or(file.cores).unwrap_or(available_cores);
        if cores == 0 || cores > available_cores.max(1) * 4 {
            bail!("config key `cores`: {cores} is out of range (1..={})", available_cores.max(1) * 4);
        }
        let tls = match (cli.cert.clone().or(file.cert), cli.key.clone().or(file.key)) {
            (Some(cert), Some(key)) => Tls::Files { cert, key },
            (None, None) => Tls::SelfSigned,
            (Some(_), None) => bail!("config key `key`: required when `cert` is set"),
            (None, Some(_)) => bail!("config key `cert`: required when `key` is set"),
        };
        Ok(Config { listen, cores, tls })
    }
}

fn load_file(path: &Path) -> anyhow::Result<FileConfig> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(args: &[&str]) -> Cli {
        Cli::parse_from(std::iter::once("moq-edge").chain(args.iter().copied()))
    }

    #[test]
    fn defaults() {
        let c = Config::resolve(&cli(&[]), 8).expect("defaults resolve");
        assert_eq!(c.listen, "[::]:4443".parse::<SocketAddr>().expect("addr"));
        assert_eq!(c.cores, 8);
        assert_eq!(c.tls, Tls::SelfSigned);
    }

    #[test]
    fn flags_override_file() {
        let dir = std::env::temp_dir().join(format!("moq-edge-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let path = dir.join("edge.toml");
        std::fs::write(&path, "listen = \"127.0.0.1:5000\"\ncores = 2\n").expect("write");
        let p = path.to_str().expect("utf8 path");
        let c = Config::resolve(&cli(&["--config", p, "--cores", "3"]), 8).expect("resolves");
        assert_eq!(c.listen, "127.0.0.1:5000".parse::<SocketAddr>().expect("addr"));
        assert_eq!(c.cores, 3);
        std::fs::write(&path, "listen = \"127.0.0.1:5000\"\nbogus = 1\n").expect("write");
        let err = Config::resolve(&cli(&["--config", p]), 8).expect_err("unknown key rejected");
        assert!(format!("{err:#}").contains("bogus"), "{err:#}");
        std::fs::write(&path, "listen = \"nowhere\"\n").expect("write");
        let err = Config::resolve(&cli(&["--config", p]), 8).expect_err("bad address rejected");
        assert!(format!("{err:#}").contains("listen"), "{err:#}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn cert_needs_key_and_cores_range() {
        assert!(Cli::try_parse_from(["moq-edge", "--cert", "a.pem"]).is_err());
        assert!(Config::resolve(&cli(&["--cores", "0"]), 8).is_err());
    }
}
