//! TLS identity and the quiche `Config`s: the server's (one identity per process, loaded once
//! with [`load_identity`]; each core builds its own `Config` from it) and the client's (tests,
//! bench, `client`).
//!
//! The identity comes from PEM files or, when none are configured, from a self-signed ECDSA
//! P-256 certificate generated at start whose validity period is exactly 14 days, the longest
//! that WebTransport's `serverCertificateHashes` accepts. Its SHA-256 fingerprint
//! ([`Identity::fingerprint`]) is what a browser must be given.
//!
//! Both paths load the certificate into one in-memory BoringSSL `SslContextBuilder` (no
//! temporary files), handed to quiche with `Config::with_boring_ssl_ctx_builder`.
//!
//! The stateless reset token a connection advertises is a `Config` field in quiche: the shard
//! calls `config.set_stateless_reset_token(Some(reset_key.token(&scid)))` before each
//! `quiche::accept` (see [`super::cid::ResetKey`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context as _};
use boring::asn1::{Asn1Time, Asn1TimeRef};
use boring::pkey::{PKey, Private};
use boring::ssl::{SslContextBuilder, SslMethod, SslVersion};
use boring::x509::X509;

use super::RuntimeConfig;

/// Validity period of the generated certificate. WebTransport `serverCertificateHashes`
/// rejects certificates whose notAfter - notBefore exceeds 14 days.
pub const SELF_SIGNED_VALIDITY: Duration = Duration::from_secs(14 * 24 * 3600);

/// How far in the past the generated certificate starts, for peers whose clock is behind.
/// It is taken out of the 14 days, not added to them.
pub const SELF_SIGNED_BACKDATE: Duration = Duration::from_secs(3600);

/// Connection-level receive window we advertise (`initial_max_data`). Only publishers send us
/// much; 16 MiB covers ~1.3 Gbit/s at 100 ms RTT before quiche's window auto-tuning (capped at
/// its 24 MiB default) even starts, and the relay reads every stream each turn, so the window
/// bounds in-flight bytes, not a backlog.
pub const INITIAL_MAX_DATA: u64 = 16 * 1024 * 1024;

/// Per-stream receive window for every stream kind. 1 MiB holds a large keyframe in one
/// subgroup stream without a flow-control round trip, while 16 such streams already fill the
/// connection window, so one stream cannot monopolise it.
pub const INITIAL_MAX_STREAM_DATA: u64 = 1024 * 1024;

/// Concurrent bidirectional streams a peer may open: a relay's peers may open one per request,
/// so a session with hundreds of tracks needs hundreds. quiche raises the limit again as streams finish.
pub const INITIAL_MAX_STREAMS_BIDI: u64 = 1_000;

/// Concurrent unidirectional streams a peer may open: a relay's peers open one per subgroup
/// (or fetch response) and publish many tracks at once, each possibly with several live
/// groups. Since the client config uses the same value, this is also how many
/// subgroup streams the relay may keep open towards one subscriber.
pub const INITIAL_MAX_STREAMS_UNI: u64 = 10_000;

/// quiche encodes a connection's transport parameters into a fixed 128-byte buffer
/// (`tls::Handshake::set_quic_transport_params`); when they do not fit, `quiche::accept` fails
/// with `BufferTooShort`. The server's worst case is an accept after Retry: original DCID
/// (up to 20 bytes), initial and retry source CIDs (16 each) and the stateless reset token
/// (16) take 76 bytes with their headers before any limit is sent. The parameters below are
/// chosen to leave room (126 of 128 bytes with a 20-byte original DCID, tested): the
/// `max_udp_payload_size` parameter is not sent (its protocol default, 65527, is what we
/// would advertise anyway), the active CID limit stays at its default 2 (not sent), and the
/// idle timeout is capped at [`MAX_IDLE_TIMEOUT_MS`] to keep its varint at 4 bytes.
pub const QUICHE_TRANSPORT_PARAMS_BUF: usize = 128;

/// Largest UDP payload we accept: the protocol default of the `max_udp_payload_size` transport
/// parameter, which we therefore do not send (see [`QUICHE_TRANSPORT_PARAMS_BUF`]). The
/// receive path must use 64 KiB buffers (it does anyway for GRO).
pub const MAX_RECV_UDP_PAYLOAD: usize = 65_527;

/// Longest idle timeout we advertise, in milliseconds: the largest 4-byte varint (about 12.4
/// days). Longer configured timeouts are capped (see [`QUICHE_TRANSPORT_PARAMS_BUF`]).
pub const MAX_IDLE_TIMEOUT_MS: u64 = (1 << 30) - 1;

/// Largest UDP payload we send after the handshake (before it, quiche sends 1200). 1350 is what
/// browsers use: it fits every path with an IP MTU of at least 1398 (IPv6) / 1378 (IPv4),
/// which includes PPPoE, WireGuard and most tunnels, without path MTU discovery. PMTUD stays
/// off: its probes break the equal-size segments of GSO batches and would gain at most 7%
/// (1452 bytes on clean 1500-byte paths).
pub const MAX_SEND_UDP_PAYLOAD: usize = 1_350;

/// DATAGRAM frames queued per direction before quiche drops new ones (objects sent as
/// datagrams are latency-sensitive; an old queue is worthless).
pub const DGRAM_QUEUE_LEN: usize = 1_024;

/// Connection IDs of the peer we are willing to store (`active_connection_id_limit`). The
/// default 2 is enough: it bounds the peer's CIDs we keep, while how many of *our* CIDs a
/// migrating client holds is the client's limit. Not sent (see
/// [`QUICHE_TRANSPORT_PARAMS_BUF`]).
pub const ACTIVE_CONNECTION_ID_LIMIT: u64 = 2;

/// Idle timeout of [`client_config`].
pub const CLIENT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The server's TLS identity, for logs and for clients that pin it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// SHA-256 of the leaf certificate's DER as 32 colon-separated uppercase hex pairs
    /// (`AB:CD:...`); a browser's `serverCertificateHashes` takes these bytes.
    pub fingerprint: String,
    /// The same digest as bytes.
    pub sha256: [u8; 32],
    /// Generated at start rather than loaded from files.
    pub self_signed: bool,
    /// The leaf certificate's notAfter, when it is representable.
    pub not_after: Option<SystemTime>,
}

/// The server's certificate chain and key, loaded or generated once per process so that every
/// core serves the same identity; each core builds its own quiche `Config` from it with
/// [`TlsMaterial::server_config`].
pub struct TlsMaterial {
    chain: Vec<X509>,
    key: PKey<Private>,
    identity: Identity,
}

/// Loads the identity of `rc.tls`: PEM files (errors name the file), or a fresh self-signed
/// certificate. The caller prints and logs [`TlsMaterial::fingerprint`].
pub fn load_identity(rc: &RuntimeConfig) -> anyhow::Result<TlsMaterial> {
    let (chain, key, self_signed) = match &rc.tls {
        super::TlsSource::Files { cert, key } => {
            let chain = load_cert_chain(cert)?;
            let key = load_private_key(key)?;
            (chain, key, false)
        }
        super::TlsSource::SelfSigned => {
            let (cert, key) = self_signed(rc.listen.ip(), SystemTime::now())?;
            (vec![cert], key, true)
        }
    };
    let identity = identity_of(&chain, self_signed)?;
    let material = TlsMaterial { chain, key, identity };
    // Fail at start, not on the first core, when the key does not match the certificate.
    material.ssl_context()?;
    Ok(material)
}

impl TlsMaterial {
    /// The identity (certificate chain and key).
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// SHA-256 of the leaf certificate, `AB:CD:...`.
    pub fn fingerprint(&self) -> &str {
        &self.identity.fingerprint
    }

    /// A server quiche config with this identity: `alpns` (the application's), DATAGRAM on,
    /// `rc.idle_timeout`, `rc.congestion_control` (an unknown name is an error naming it) and
    /// the transport limits above. Peers are not asked for certificates.
    pub fn server_config(&self, rc: &RuntimeConfig, alpns: &[String]) -> anyhow::Result<quiche::Config> {
        let builder = self.ssl_context()?;
        let mut config = quiche::Config::with_boring_ssl_ctx_builder(quiche::PROTOCOL_VERSION, builder)
            .map_err(|e| anyhow!("creating the QUIC config: {e}"))?;
        let alpns: Vec<&str> = alpns.iter().map(String::as_str).collect();
        apply_transport(&mut config, &alpns, rc.idle_timeout, &rc.congestion_control)?;
        config.verify_peer(false);
        Ok(config)
    }

    /// A TLS context for HTTPS over TCP with this identity (the web listener): the same
    /// chain and key, TLS 1.3, HTTP/1.1 (no ALPN needed).
    pub fn https_context(&self) -> anyhow::Result<boring::ssl::SslContext> {
        Ok(self.ssl_context()?.build())
    }

    /// An in-memory TLS 1.3 context holding the chain and key.
    fn ssl_context(&self) -> anyhow::Result<SslContextBuilder> {
        let mut builder = SslContextBuilder::new(SslMethod::tls()).context("creating TLS context")?;
        builder.set_min_proto_version(Some(SslVersion::TLS1_3)).context("requiring TLS 1.3")?;
        let (leaf, intermediates) =
            self.chain.split_first().ok_or_else(|| anyhow!("empty certificate chain"))?;
        builder.set_certificate(leaf).context("using the certificate")?;
        for intermediate in intermediates {
            builder
                .add_extra_chain_cert(intermediate.clone())
                .context("adding an intermediate certificate")?;
        }
        builder.set_private_key(&self.key).context("using the private key")?;
        builder.check_private_key().context("the private key does not match the certificate")?;
        Ok(builder)
    }
}

/// [`load_identity`] and one [`TlsMaterial::server_config`] in one call (tests, tools).
pub fn server_config(rc: &RuntimeConfig, alpns: &[String]) -> anyhow::Result<(quiche::Config, Identity)> {
    let material = load_identity(rc)?;
    let config = material.server_config(rc, alpns)?;
    Ok((config, material.identity))
}

/// A client quiche config with the same transport parameters as the server's, offering
/// `alpns` in order; `verify_peer` checks the server against the system roots (off for a
/// self-signed relay, whose fingerprint the caller then compares with `peer_cert()`).
pub fn client_config(alpns: &[&str], verify_peer: bool) -> anyhow::Result<quiche::Config> {
    client_config_with(alpns, verify_peer, "cubic")
}

/// [`client_config`] with congestion control `congestion_control` (cubic, reno, bbr2).
pub fn client_config_with(
    alpns: &[&str],
    verify_peer: bool,
    congestion_control: &str,
) -> anyhow::Result<quiche::Config> {
    let mut config = quiche::Config::new(quiche::PROTOCOL_VERSION)
        .map_err(|e| anyhow!("creating the QUIC config: {e}"))?;
    apply_transport(&mut config, alpns, CLIENT_IDLE_TIMEOUT, congestion_control)?;
    config.verify_peer(verify_peer);
    Ok(config)
}

/// Idle timeout of upstream links: a parent that vanished (crashed, no CONNECTION_CLOSE) is
/// noticed this soon; the link sends a keep-alive every second.
pub const LINK_IDLE_TIMEOUT: Duration = Duration::from_secs(5);

/// The quiche config of connections the server opens to upstream relays: the server's
/// transport settings, `alpns` (the application's), the peer checked against `rc.upstream_tls`.
pub fn upstream_config(rc: &RuntimeConfig, alpns: &[String]) -> anyhow::Result<quiche::Config> {
    let mut config = quiche::Config::new(quiche::PROTOCOL_VERSION)
        .map_err(|e| anyhow!("creating the QUIC config: {e}"))?;
    let alpns: Vec<&str> = alpns.iter().map(String::as_str).collect();
    apply_transport(&mut config, &alpns, LINK_IDLE_TIMEOUT, &rc.congestion_control)?;
    config.verify_peer(!rc.upstream_tls.insecure);
    if let Some(ca) = &rc.upstream_tls.ca {
        let path = ca.to_str().ok_or_else(|| anyhow!("upstream_ca: {} is not UTF-8", ca.display()))?;
        config
            .load_verify_locations_from_file(path)
            .map_err(|e| anyhow!("upstream_ca: loading {}: {e}", ca.display()))?;
    }
    Ok(config)
}

/// SHA-256 of `der` as 32 colon-separated uppercase hex pairs.
pub fn fingerprint(der: &[u8]) -> String {
    hex_pairs(ring::digest::digest(&ring::digest::SHA256, der).as_ref())
}

fn hex_pairs(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            s.push(':');
        }
        s.push_str(&format!("{b:02X}"));
    }
    s
}

/// Everything but the identity, shared by server and client.
fn apply_transport(
    config: &mut quiche::Config,
    alpns: &[&str],
    idle_timeout: Duration,
    congestion_control: &str,
) -> anyhow::Result<()> {
    let protos: Vec<&[u8]> = alpns.iter().map(|a| a.as_bytes()).collect();
    config.set_application_protos(&protos).map_err(|e| anyhow!("setting ALPN {alpns:?}: {e}"))?;
    config
        .set_cc_algorithm_name(congestion_control)
        .map_err(|_| anyhow!("unknown congestion control {congestion_control:?} (use cubic, reno, bbr2)"))?;
    let idle_ms = u64::try_from(idle_timeout.as_millis()).unwrap_or(u64::MAX);
    config.set_max_idle_timeout(idle_ms.min(MAX_IDLE_TIMEOUT_MS));
    config.enable_dgram(true, DGRAM_QUEUE_LEN, DGRAM_QUEUE_LEN);
    config.set_initial_max_data(INITIAL_MAX_DATA);
    config.set_initial_max_stream_data_bidi_local(INITIAL_MAX_STREAM_DATA);
    config.set_initial_max_stream_data_bidi_remote(INITIAL_MAX_STREAM_DATA);
    config.set_initial_max_stream_data_uni(INITIAL_MAX_STREAM_DATA);
    config.set_initial_max_streams_bidi(INITIAL_MAX_STREAMS_BIDI);
    config.set_initial_max_streams_uni(INITIAL_MAX_STREAMS_UNI);
    // 0 = do not send the parameter; the peer then assumes MAX_RECV_UDP_PAYLOAD.
    config.set_max_recv_udp_payload_size(0);
    config.set_max_send_udp_payload_size(MAX_SEND_UDP_PAYLOAD);
    // Clients may migrate (NAT rebinding, Wi-Fi to cellular): our CIDs route their packets to
    // the owning core whatever the 4-tuple.
    config.set_disable_active_migration(false);
    config.set_active_connection_id_limit(ACTIVE_CONNECTION_ID_LIMIT);
    // quiche reports each packet's release time in `SendInfo::at`; the send path honours it.
    config.enable_pacing(true);
    config.grease(true);
    Ok(())
}

/// A self-signed ECDSA P-256 certificate for `localhost`, `127.0.0.1`, `::1` and `listen_ip`
/// (when specified), valid from `now - 1 h` for exactly [`SELF_SIGNED_VALIDITY`].
fn self_signed(listen_ip: IpAddr, now: SystemTime) -> anyhow::Result<(X509, PKey<Private>)> {
    let (der, key_der) = generate_self_signed(listen_ip, now)?;
    let cert = X509::from_der(&der).context("parsing the generated certificate")?;
    let key = PKey::private_key_from_pkcs8(&key_der).context("parsing the generated key")?;
    Ok((cert, key))
}

/// The generated certificate and its PKCS#8 key, both DER.
fn generate_self_signed(listen_ip: IpAddr, now: SystemTime) -> anyhow::Result<(Vec<u8>, Vec<u8>)> {
    let mut names =
        vec!["localhost".to_string(), Ipv4Addr::LOCALHOST.to_string(), Ipv6Addr::LOCALHOST.to_string()];
    if !listen_ip.is_unspecified() && !listen_ip.is_loopback() {
        names.push(listen_ip.to_string());
    }
    let mut params = rcgen::CertificateParams::new(names).context("self-signed certificate names")?;
    params.distinguished_name.push(rcgen::DnType::CommonName, "moq-edge self-signed");
    // Whole seconds: X.509 times have no fraction, and truncating only one end could stretch
    // the period past 14 days.
    let secs = now.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let not_before = UNIX_EPOCH + Duration::from_secs(secs) - SELF_SIGNED_BACKDATE;
    params.not_before = not_before.into();
    params.not_after = (not_before + SELF_SIGNED_VALIDITY).into();
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .context("generating an ECDSA P-256 key")?;
    let cert = params.self_signed(&key).context("signing the self-signed certificate")?;
    Ok((cert.der().to_vec(), key.serialize_der()))
}

fn load_cert_chain(path: &Path) -> anyhow::Result<Vec<X509>> {
    let pem =
        std::fs::read(path).with_context(|| format!("reading TLS certificate file {}", path.display()))?;
    let chain = X509::stack_from_pem(&pem)
        .with_context(|| format!("parsing TLS certificate file {} (PEM)", path.display()))?;
    if chain.is_empty() {
        bail!("no certificate in TLS certificate file {}", path.display());
    }
    Ok(chain)
}

fn load_private_key(path: &Path) -> anyhow::Result<PKey<Private>> {
    let pem = std::fs::read(path).with_context(|| format!("reading TLS key file {}", path.display()))?;
    PKey::private_key_from_pem(&pem)
        .with_context(|| format!("parsing TLS key file {} (PEM private key)", path.display()))
}

fn identity_of(chain: &[X509], self_signed: bool) -> anyhow::Result<Identity> {
    let leaf = chain.first().ok_or_else(|| anyhow!("empty certificate chain"))?;
    let der = leaf.to_der().context("encoding the certificate")?;
    let digest = ring::digest::digest(&ring::digest::SHA256, &der);
    let mut sha256 = [0u8; 32];
    sha256.copy_from_slice(digest.as_ref());
    Ok(Identity {
        fingerprint: hex_pairs(&sha256),
        sha256,
        self_signed,
        not_after: system_time(leaf.not_after()),
    })
}

/// An ASN.1 time as `SystemTime`; `None` before the epoch or when BoringSSL cannot compare.
fn system_time(t: &Asn1TimeRef) -> Option<SystemTime> {
    let epoch = Asn1Time::from_unix(0).ok()?;
    let diff = epoch.diff(t).ok()?;
    let secs = i64::from(diff.days) * 86_400 + i64::from(diff.secs);
    Some(UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).ok()?))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::cid::{CidGenerator, ShardId};
    use crate::TlsSource;
    use std::path::PathBuf;

    fn rc() -> RuntimeConfig {
        RuntimeConfig::new("127.0.0.1:4433".parse().unwrap(), 1)
    }

    /// Two application protocols, as a server offers them.
    fn alpns() -> Vec<String> {
        vec!["app-a".to_string(), "app-b".to_string()]
    }

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            let dir = std::env::temp_dir().join(format!(
                "moq-edge-tls-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn is_fingerprint(s: &str) -> bool {
        let parts: Vec<&str> = s.split(':').collect();
        parts.len() == 32
            && parts
                .iter()
                .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_digit() || ('A'..='F').contains(&c)))
    }

    #[test]
    fn fingerprint_format() {
        let f = fingerprint(b"");
        assert!(is_fingerprint(&f), "{f}");
        // SHA-256 of the empty string.
        assert!(f.starts_with("E3:B0:C4:42:98:FC:1C:14"));
        assert!(f.ends_with("78:52:B8:55"));
    }

    #[test]
    fn self_signed_config_builds() {
        let (_config, id) = server_config(&rc(), &alpns()).unwrap();
        assert!(id.self_signed);
        assert!(is_fingerprint(&id.fingerprint), "{}", id.fingerprint);
        assert_eq!(id.fingerprint, hex_pairs(&id.sha256));
        let not_after = id.not_after.unwrap();
        let now = SystemTime::now();
        assert!(not_after > now);
        assert!(not_after <= now + SELF_SIGNED_VALIDITY);
    }

    #[test]
    fn self_signed_fingerprint_is_sha256_of_the_der() {
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let (der, _key) = generate_self_signed(ip, SystemTime::now()).unwrap();
        let cert = X509::from_der(&der).unwrap();
        let id = identity_of(&[cert], true).unwrap();
        assert_eq!(id.fingerprint, fingerprint(&der));
        let digest = ring::digest::digest(&ring::digest::SHA256, &der);
        assert_eq!(&id.sha256[..], digest.as_ref());
    }

    #[test]
    fn self_signed_validity_is_at_most_14_days_and_covers_now() {
        let now = SystemTime::now();
        let (der, _key) = generate_self_signed("0.0.0.0".parse().unwrap(), now).unwrap();
        let cert = X509::from_der(&der).unwrap();
        let period = cert.not_before().diff(cert.not_after()).unwrap();
        let secs = i64::from(period.days) * 86_400 + i64::from(period.secs);
        assert!(secs > 0);
        assert!(secs as u64 <= SELF_SIGNED_VALIDITY.as_secs(), "{secs} s");
        let nb = system_time(cert.not_before()).unwrap();
        let na = system_time(cert.not_after()).unwrap();
        assert!(nb <= now && now < na);
        assert!(now.duration_since(nb).unwrap() <= SELF_SIGNED_BACKDATE + Duration::from_secs(1));
    }

    #[test]
    fn self_signed_names() {
        let names = |ip: &str| {
            let (der, _) = generate_self_signed(ip.parse().unwrap(), SystemTime::now()).unwrap();
            let cert = X509::from_der(&der).unwrap();
            let mut out: Vec<String> = Vec::new();
            for n in cert.subject_alt_names().unwrap() {
                if let Some(d) = n.dnsname() {
                    out.push(d.to_string());
                }
                if let Some(ip) = n.ipaddress() {
                    let ip = match ip.len() {
                        4 => IpAddr::from(<[u8; 4]>::try_from(ip).unwrap()),
                        _ => IpAddr::from(<[u8; 16]>::try_from(ip).unwrap()),
                    };
                    out.push(ip.to_string());
                }
            }
            out
        };
        assert_eq!(names("0.0.0.0"), ["localhost", "127.0.0.1", "::1"]);
        assert_eq!(names("::"), ["localhost", "127.0.0.1", "::1"]);
        assert_eq!(names("192.0.2.7"), ["localhost", "127.0.0.1", "::1", "192.0.2.7"]);
    }

    /// Writes a certificate for `example.test` signed by `signer` and the key `written` as
    /// PEM files in `dir`; returns a config that loads them, and the certificate.
    fn pem_files(
        dir: &TempDir,
        signer: &rcgen::KeyPair,
        written: &rcgen::KeyPair,
    ) -> (RuntimeConfig, rcgen::Certificate) {
        let cert = rcgen::CertificateParams::new(vec!["example.test".to_string()])
            .unwrap()
            .self_signed(signer)
            .unwrap();
        let cert_path = dir.0.join("cert.pem");
        let key_path = dir.0.join("key.pem");
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, written.serialize_pem()).unwrap();
        let mut rc = rc();
        rc.tls = TlsSource::Files { cert: cert_path, key: key_path };
        (rc, cert)
    }

    #[test]
    fn files_path_loads_pem() {
        let dir = TempDir::new("files");
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let (rc, cert) = pem_files(&dir, &key, &key);
        let (_config, id) = server_config(&rc, &alpns()).unwrap();
        assert!(!id.self_signed);
        assert_eq!(id.fingerprint, fingerprint(cert.der()));
    }

    #[test]
    fn files_path_rejects_mismatched_key() {
        let dir = TempDir::new("mismatch");
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let other = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let (rc, _cert) = pem_files(&dir, &key, &other);
        assert!(server_config(&rc, &alpns()).is_err());
    }

    #[test]
    fn missing_or_invalid_files_name_the_path() {
        let dir = TempDir::new("missing");
        let missing = dir.0.join("nope-cert.pem");
        let garbage = dir.0.join("garbage.pem");
        std::fs::write(&garbage, "not a pem file").unwrap();
        let mut rc = rc();
        rc.tls = TlsSource::Files { cert: missing.clone(), key: garbage.clone() };
        let err = format!("{:#}", server_config(&rc, &alpns()).err().unwrap());
        assert!(err.contains(&missing.display().to_string()), "{err}");

        rc.tls = TlsSource::Files { cert: garbage.clone(), key: garbage.clone() };
        let err = format!("{:#}", server_config(&rc, &alpns()).err().unwrap());
        assert!(err.contains(&garbage.display().to_string()), "{err}");
    }

    #[test]
    fn unknown_congestion_control_names_the_value() {
        let mut rc = rc();
        rc.congestion_control = "warp-drive".to_string();
        let err = format!("{:#}", server_config(&rc, &alpns()).err().unwrap());
        assert!(err.contains("warp-drive"), "{err}");
        for ok in ["cubic", "reno", "bbr2"] {
            rc.congestion_control = ok.to_string();
            assert!(server_config(&rc, &alpns()).is_ok(), "{ok}");
        }
    }

    // In-memory handshakes (`crate::testing`): the configs, retry tokens and reset tokens
    // work with quiche itself.
    use crate::testing::{client_addr, exchange, handshake, server_addr};

    #[test]
    fn handshake_negotiates_each_alpn_and_pins_the_fingerprint() {
        for alpn in alpns() {
            let (client, server, id, _) = handshake(&[alpn.as_str()], false);
            assert_eq!(client.application_proto(), alpn.as_bytes());
            assert_eq!(server.application_proto(), alpn.as_bytes());
            let der = client.peer_cert().unwrap();
            assert_eq!(fingerprint(der), id.fingerprint);
            assert!(client.dgram_max_writable_len().is_some(), "DATAGRAM negotiated");
            let tp = client.peer_transport_params().unwrap();
            assert_eq!(tp.initial_max_streams_uni, INITIAL_MAX_STREAMS_UNI);
            assert_eq!(tp.initial_max_data, INITIAL_MAX_DATA);
        }
    }

    #[test]
    fn handshake_rejects_unknown_alpn() {
        let (mut server_cfg, _) = server_config(&rc(), &alpns()).unwrap();
        let mut client_cfg = client_config(&["h2"], false).unwrap();
        let cids = CidGenerator::new();
        let mut client = quiche::connect_with_buffer_factory(
            Some("localhost"),
            &cids.new_cid(ShardId(1)),
            client_addr(),
            server_addr(),
            &mut client_cfg,
        )
        .unwrap();
        let mut server = quiche::accept_with_buf_factory(
            &cids.new_cid(ShardId(2)),
            None,
            server_addr(),
            client_addr(),
            &mut server_cfg,
        )
        .unwrap();
        exchange(&mut client, &mut server);
        assert!(!client.is_established() || !server.is_established());
    }

    #[test]
    fn transport_params_fit_quiche_buffer_in_the_worst_case() {
        // Accept after Retry with the longest original DCID, a reset token and the longest
        // idle timeout: quiche must be able to encode our transport parameters.
        let mut rc = rc();
        rc.idle_timeout = Duration::from_secs(365 * 24 * 3600);
        let (mut cfg, _) = server_config(&rc, &alpns()).unwrap();
        let cids = CidGenerator::new();
        let scid = cids.new_cid(ShardId(255));
        cfg.set_stateless_reset_token(Some(u128::MAX));
        let odcid = quiche::ConnectionId::from_vec(vec![0xff; quiche::MAX_CONN_ID_LEN]);
        quiche::accept_with_buf_factory::<crate::SharedBufs>(
            &scid,
            Some(&odcid),
            server_addr(),
            client_addr(),
            &mut cfg,
        )
        .unwrap();
    }

    #[test]
    fn handshake_after_retry() {
        let (client, server, _, _) = handshake(&["app-b"], true);
        assert_eq!(server.application_proto(), b"app-b");
        assert!(client.is_established());
    }

    #[test]
    fn stateless_reset_closes_the_client() {
        let (mut client, server, _, reset) = handshake(&["app-a"], false);
        let dcid = server.source_id().into_owned();
        let rng = ring::rand::SystemRandom::new();
        let mut out = [0u8; 100];
        let len = reset.stateless_reset(&dcid, 60, &rng, &mut out).unwrap();
        let info = quiche::RecvInfo { from: server_addr(), to: client_addr() };
        let _ = client.recv(&mut out[..len], info);
        assert!(client.is_closed(), "client did not recognise the reset");
    }
}
