//! Unit tests of the configuration: flags, the file, defaults and refusals.

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
fn linger_is_configurable_and_bounded() {
    assert_eq!(Config::resolve(&cli(&[]), 8).expect("defaults").relay().linger, Duration::from_secs(2));
    let c = Config::resolve(&cli(&["--linger-ms", "250"]), 8).expect("linger");
    assert_eq!(c.relay().linger, Duration::from_millis(250));
    assert!(Config::resolve(&cli(&["--linger-ms", "3600001"]), 8).is_err());
    assert_eq!(Config::resolve(&cli(&[]), 8).expect("defaults").relay().max_backlog, 1 << 20);
    assert_eq!(
        Config::resolve(&cli(&[]), 8).expect("defaults").relay().max_lag,
        Some(Duration::from_secs(2))
    );
    let off = Config::resolve(&cli(&["--max-lag-ms", "0"]), 8).expect("off");
    assert_eq!(off.relay().max_lag, None);
    assert!(Config::resolve(&cli(&["--max-lag-ms", "700000"]), 8).is_err());
}

#[test]
fn admission_threshold_defaults_to_90_and_0_or_100_turn_it_off() {
    let c = Config::resolve(&cli(&[]), 8).expect("defaults");
    assert_eq!(
        (c.admission_busy_pct, c.relay().admission_busy_pct, c.runtime().admission_busy_pct),
        (90, 90, 90)
    );
    for off in ["0", "100"] {
        let c = Config::resolve(&cli(&["--admission-busy-pct", off]), 8).expect("off");
        assert_eq!((c.relay().admission_busy_pct, c.runtime().admission_busy_pct), (0, 0));
    }
    assert!(Config::resolve(&cli(&["--admission-busy-pct", "101"]), 8).is_err());
    assert_eq!(Config::resolve(&cli(&[]), 8).expect("defaults").relay().max_unsent, 128 << 10);
    assert!(Config::resolve(&cli(&["--max-unsent-kib", "8"]), 8).is_err());
    assert_eq!(Config::resolve(&cli(&[]), 8).expect("defaults").relay().mesh_queue, 8 << 20);
    let c = Config::resolve(&cli(&["--mesh-queue-mib", "64"]), 8).expect("mesh queue");
    assert_eq!(c.relay().mesh_queue, 64 << 20);
    assert!(Config::resolve(&cli(&["--mesh-queue-mib", "0"]), 8).is_err());
    assert_eq!(Config::resolve(&cli(&[]), 8).expect("defaults").relay().cache_budget, 128 << 20);
    let c = Config::resolve(&cli(&["--cache-mib", "0", "--cores", "2"]), 8).expect("no cache");
    assert_eq!(c.relay().cache_budget, 0);
    assert!(Config::resolve(&cli(&["--cache-mib", "2000000"]), 8).is_err());
    let c = Config::resolve(&cli(&["--max-backlog-kib", "256"]), 8).expect("backlog");
    assert_eq!(c.relay().max_backlog, 256 * 1024);
    assert!(Config::resolve(&cli(&["--max-backlog-kib", "63"]), 8).is_err());
    let c = Config::resolve(&cli(&[]), 8).expect("defaults");
    assert_eq!((c.runtime().drain_grace, c.relay().goaway_uri.len()), (Duration::from_secs(5), 0));
    let c = Config::resolve(&cli(&["--goaway-timeout-ms", "0", "--goaway-uri", "moqt://b:4443"]), 8)
        .expect("goaway");
    assert_eq!(c.runtime().drain_grace, Duration::ZERO);
    assert_eq!(&c.relay().goaway_uri[..], b"moqt://b:4443");
    assert!(Config::resolve(&cli(&["--goaway-uri", "https://b"]), 8).is_err());
    assert!(Config::resolve(&cli(&["--goaway-timeout-ms", "600001"]), 8).is_err());
}

#[test]
fn upstreams_route_prefixes_and_bad_ones_are_named() {
    let c = Config::resolve(
        &cli(&[
            "--upstream",
            "moqt://origin:4443",
            "--upstream",
            "live/sports=moqt://sports:5000",
            "--upstream",
            "news=moqt://origin:4443",
            "--upstream-token",
            "tok",
        ]),
        2,
    )
    .expect("upstreams");
    assert_eq!(c.upstreams.len(), 2, "one link per parent");
    assert_eq!((c.upstreams[0].host.as_str(), c.upstreams[0].port), ("origin", 4443));
    assert_eq!(
        c.upstreams[0].routes,
        vec![TrackNamespace::from_strs::<&str>(&[]), TrackNamespace::from_strs(&["news"])]
    );
    assert_eq!(c.upstreams[1].routes, vec![TrackNamespace::from_strs(&["live", "sports"])]);
    assert_eq!(c.upstreams[1].token.as_deref(), Some("tok"));
    for bad in ["http://x:1", "moqt://:1", "moqt://x:0", "moqt://x:notaport"] {
        let err = Config::resolve(&cli(&["--upstream", bad]), 2).expect_err(bad);
        assert!(err.to_string().contains("upstream"), "{err}");
    }
    let many: Vec<String> = (0..=MAX_ROUTES_PER_UPSTREAM).map(|i| format!("p{i}=moqt://a:1")).collect();
    let mut args = vec!["moq-edge".to_string()];
    for m in &many {
        args.extend(["--upstream".to_string(), m.clone()]);
    }
    let err = Config::resolve(&Cli::parse_from(args), 2).expect_err("too many prefixes");
    assert!(err.to_string().contains("prefixes"), "{err}");
    let two_defaults = cli(&["--upstream", "moqt://a:1", "--upstream", "moqt://b:1"]);
    assert!(Config::resolve(&two_defaults, 2).is_err());
    assert!(Config::resolve(&cli(&["--log-format", "xml"]), 2).is_err());
    assert_eq!(Config::resolve(&cli(&[]), 2).expect("default").publish_forward, PublishForward::Always);
    let on_demand = Config::resolve(&cli(&["--publish-forward", "on-demand"]), 2).expect("on-demand");
    assert_eq!(on_demand.relay().publish_forward, PublishForward::OnDemand);
    assert!(Config::resolve(&cli(&["--publish-forward", "sometimes"]), 2).is_err());
    assert!(Config::resolve(&cli(&["--log-level", "info,=[bad"]), 2).is_err());
    assert!(Config::resolve(&cli(&["--qlog-dir", "/nonexistent/qlog"]), 2).is_err());
    let c = Config::resolve(&cli(&["--metrics", "127.0.0.1:9090", "--log-format", "json"]), 2).expect("ok");
    assert_eq!((c.metrics.map(|a| a.port()), c.log_format), (Some(9090), LogFormat::Json));
}

#[test]
fn web_follows_listen_moves_or_is_off() {
    assert_eq!(Config::resolve(&cli(&[]), 2).expect("defaults").web, Web::Listen);
    let c = Config::resolve(&cli(&["--web", "127.0.0.1:8080"]), 2).expect("an address");
    assert_eq!(c.web, Web::At("127.0.0.1:8080".parse().expect("addr")));
    assert_eq!(Config::resolve(&cli(&["--web", "off"]), 2).expect("off").web, Web::Off);
    let err = Config::resolve(&cli(&["--web", "on"]), 2).expect_err("neither");
    assert!(err.to_string().contains("`web`"), "{err}");
    let dir = std::env::temp_dir().join(format!("moq-edge-cfg-web-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("edge.toml");
    std::fs::write(&path, "web = \"off\"\n").expect("write");
    let p = path.to_str().expect("utf8 path");
    assert_eq!(Config::resolve(&cli(&["--config", p]), 2).expect("file").web, Web::Off);
    let c = Config::resolve(&cli(&["--config", p, "--web", "[::1]:80"]), 2).expect("flag wins");
    assert_eq!(c.web, Web::At("[::1]:80".parse().expect("addr")));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn cert_needs_key_and_cores_range() {
    assert!(Cli::try_parse_from(["moq-edge", "--cert", "a.pem"]).is_err());
    assert!(Config::resolve(&cli(&["--cores", "0"]), 8).is_err());
    assert!(Config::resolve(&cli(&["--cores", "257"]), 8).is_err());
}

#[test]
fn drafts_offered() {
    let all = Config::resolve(&cli(&[]), 2).expect("defaults");
    assert_eq!(all.drafts, Version::ALL.to_vec(), "every draft by default");
    let two = Config::resolve(&cli(&["--drafts", "16,22,16"]), 2).expect("resolves");
    assert_eq!(two.drafts, vec![Version::Draft22, Version::Draft16], "newest first, each once");
    assert!(Config::resolve(&cli(&["--drafts", "17"]), 2).is_err(), "a draft not spoken");
    assert!(parse_drafts(Some(&[])).is_err(), "none at all");
}

#[test]
fn runtime_knobs() {
    let c =
        Config::resolve(&cli(&["--retry", "always", "--gso", "false", "--congestion-control", "reno"]), 2)
            .expect("resolves");
    let rc = c.runtime();
    assert_eq!(rc.retry, RetryPolicy::Always);
    assert!(!rc.gso);
    assert_eq!(rc.congestion_control, "reno");
    assert_eq!(rc.send_coalesce, Duration::ZERO, "off by default");
    let c = Config::resolve(&cli(&["--send-coalesce-us", "4000"]), 2).expect("resolves");
    assert_eq!(c.runtime().send_coalesce, Duration::from_millis(4));
    assert!(Config::resolve(&cli(&["--send-coalesce-us", "20001"]), 2).is_err());
    assert_eq!(rc.recv_coalesce, Duration::from_micros(500), "on by default");
    let c = Config::resolve(&cli(&["--recv-coalesce-us", "300"]), 2).expect("resolves");
    assert_eq!(c.runtime().recv_coalesce, Duration::from_micros(300));
    assert!(Config::resolve(&cli(&["--recv-coalesce-us", "5001"]), 2).is_err());
    assert!(Config::resolve(&cli(&["--retry", "sometimes"]), 2).is_err());
    assert!(Config::resolve(&cli(&["--congestion-control", "vegas"]), 2).is_err());
    assert!(Config::resolve(&cli(&["--idle-timeout-ms", "0"]), 2).is_err());
    assert_eq!(
        Config::resolve(&cli(&[]), 2).expect("defaults").runtime().setup_timeout,
        Duration::from_secs(5)
    );
    let c = Config::resolve(&cli(&["--setup-timeout-ms", "250"]), 2).expect("setup timeout");
    assert_eq!(c.runtime().setup_timeout, Duration::from_millis(250));
    assert!(Config::resolve(&cli(&["--setup-timeout-ms", "0"]), 2).is_err());
}

#[test]
fn auth_modes_and_keys_are_checked() {
    let c = Config::resolve(&cli(&[]), 8).expect("open by default");
    assert!(c.auth.is_none() && c.relay().auth.is_none());
    let err = Config::resolve(&cli(&["--auth", "tokens"]), 8).expect_err("tokens need a key");
    assert!(err.to_string().contains("auth_keys"), "{err}");
    assert!(Config::resolve(&cli(&["--auth", "maybe"]), 8).is_err());
    assert!(Config::resolve(&cli(&["--auth", "tokens", "--auth-key", "k1=short"]), 8).is_err());
    let key = "k1=MDEyMzQ1Njc4OWFiY2RlZg";
    let c = Config::resolve(&cli(&["--auth", "tokens", "--auth-key", key]), 8).expect("a 16-byte key");
    assert!(c.relay().auth.is_some());
    assert_eq!(c.relay().server_setup().max_auth_token_cache_size, Some(4096));

    // JWT and CAT keys come from files; each format named needs keys of its own.
    let dir = std::env::temp_dir().join(format!("moq-edge-config-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let jwks = dir.join("jwks.json");
    std::fs::write(&jwks, r#"{"keys":[{"kty":"oct","kid":"j1","k":"MDEyMzQ1Njc4OWFiY2RlZg"}]}"#)
        .expect("written");
    let jwks_arg = jwks.to_str().expect("a UTF-8 path");
    let err = Config::resolve(&cli(&["--auth", "jwt,tokens", "--auth-jwt-keys", jwks_arg]), 8)
        .expect_err("no v1 key");
    assert!(err.to_string().contains("auth_keys"), "{err}");
    let err =
        Config::resolve(&cli(&["--auth", "cat", "--auth-jwt-keys", jwks_arg]), 8).expect_err("no CAT key");
    assert!(err.to_string().contains("auth_cat_keys"), "{err}");
    let c = Config::resolve(
        &cli(&["--auth", "jwt,cat", "--auth-jwt-keys", jwks_arg, "--auth-cat-keys", jwks_arg]),
        8,
    )
    .expect("JWT and CAT keys");
    assert_eq!(c.relay().auth.expect("required").files().len(), 2);
    let missing = dir.join("missing.json");
    assert!(Config::resolve(
        &cli(&["--auth", "jwt", "--auth-jwt-keys", missing.to_str().expect("a UTF-8 path")]),
        8
    )
    .is_err());
    assert!(Config::resolve(&cli(&["--auth", "jwt,paseto", "--auth-jwt-keys", jwks_arg]), 8).is_err());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_directory_needs_a_redis_url_and_an_advertised_moqt_url() {
    let c = Config::resolve(&cli(&[]), 8).expect("off by default");
    assert!(c.directory.is_none() && !c.relay().directory);
    let ok = ["--directory", "redis://u:p@10.0.0.1:6379/2", "--advertise", "moqt://edge-a:4443"];
    let c = Config::resolve(&cli(&ok), 8).expect("a directory");
    let d = c.directory.as_ref().expect("configured");
    assert_eq!(
        (d.prefix.as_str(), d.lease, d.advertise.as_str()),
        ("moq-edge", Duration::from_secs(6), "moqt://edge-a:4443")
    );
    assert!(c.relay().directory);
    let err = Config::resolve(&cli(&["--directory", "redis://r:6379"]), 8).expect_err("no advertise");
    assert!(err.to_string().contains("advertise"), "{err}");
    let tls = ["--directory", "rediss://r:6379", "--advertise", "moqt://a:1"];
    assert!(Config::resolve(&cli(&tls), 8).expect("TLS").directory.is_some_and(|d| d.ca.is_none()));
    let other = ["--directory", "http://r:6379", "--advertise", "moqt://a:1"];
    assert!(Config::resolve(&cli(&other), 8).is_err());
    let no_ca =
        ["--directory", "rediss://r:6379", "--advertise", "moqt://a:1", "--directory-ca", "/nonexistent"];
    assert!(Config::resolve(&cli(&no_ca), 8).expect_err("no CA file").to_string().contains("directory_ca"));
    for bad in [["--directory-prefix", "a b"], ["--directory-prefix", "x*"], ["--directory-lease-ms", "100"]]
    {
        let args: Vec<&str> = ok.iter().chain(bad.iter()).copied().collect();
        assert!(Config::resolve(&cli(&args), 8).is_err(), "{bad:?}");
    }
}
