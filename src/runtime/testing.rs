//! In-memory QUIC for tests of applications on the runtime: a client and a server connection
//! of this crate's kind, established by moving packets between them without sockets.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::SystemTime;

use crate::cid::{CidGenerator, ResetKey, ShardId};
use crate::retry::RetryTokens;
use crate::tls::{client_config, server_config, Identity};
use crate::{QuicConnection, RuntimeConfig};

/// The pair's transport settings: the defaults, but cubic. The pair advances no clock between
/// exchanges, and bbr2 models the path from delivery rates over elapsed time: with none, its
/// window stays near the initial one and the tests that fill a peer's window would measure
/// that instead of the pump. (The relay's own default, bbr2, is measured in real time by
/// bench/impaired.sh and the process tests.)
fn rc() -> RuntimeConfig {
    let mut rc = RuntimeConfig::new("127.0.0.1:4433".parse().unwrap(), 1);
    rc.congestion_control = "cubic".to_string();
    rc
}

const CLIENT: &str = "127.0.0.1:50000";
const SERVER: &str = "127.0.0.1:4433";

/// The client's address in the tests' in-memory pairs.
pub fn client_addr() -> SocketAddr {
    CLIENT.parse().unwrap()
}

/// The server's address in the tests' in-memory pairs.
pub fn server_addr() -> SocketAddr {
    SERVER.parse().unwrap()
}

/// Moves packets both ways (in memory) until neither side has more to send.
pub fn exchange(client: &mut QuicConnection, server: &mut QuicConnection) {
    let mut buf = vec![0u8; 65_535];
    for _ in 0..100 {
        let mut moved = false;
        while let Ok((len, _)) = client.send(&mut buf) {
            let info = quiche::RecvInfo { from: client_addr(), to: server_addr() };
            let _ = server.recv(&mut buf[..len], info);
            moved = true;
        }
        while let Ok((len, _)) = server.send(&mut buf) {
            let info = quiche::RecvInfo { from: server_addr(), to: client_addr() };
            let _ = client.recv(&mut buf[..len], info);
            moved = true;
        }
        if !moved {
            return;
        }
    }
}

/// A client and a server connection, established in memory.
pub fn handshake(alpns: &[&str], retry: bool) -> (QuicConnection, QuicConnection, Identity, ResetKey) {
    let alpns_owned: Vec<String> = alpns.iter().map(|a| a.to_string()).collect();
    let (mut server_cfg, id) = server_config(&rc(), &alpns_owned).unwrap();
    let mut client_cfg = client_config(alpns, false).unwrap();
    let cids = CidGenerator::new();
    let reset = ResetKey::new(&[9; 32]);
    let tokens = RetryTokens::new(&[9; 32]);
    let now = SystemTime::now();

    let client_scid = cids.new_cid(ShardId(200));
    let mut client = quiche::connect_with_buffer_factory(
        Some("localhost"),
        &client_scid,
        client_addr(),
        server_addr(),
        &mut client_cfg,
    )
    .unwrap();
    let mut buf = vec![0u8; 65_535];
    let (mut len, _) = client.send(&mut buf).unwrap();

    let mut odcid = None;
    if retry {
        let hdr = quiche::Header::from_slice(&mut buf[..len], quiche::MAX_CONN_ID_LEN).unwrap();
        assert!(hdr.token.as_deref().unwrap_or_default().is_empty());
        let new_scid = cids.new_cid(ShardId(3));
        let token = tokens.mint(client_addr(), &hdr.dcid, now);
        let mut out = vec![0u8; 1500];
        let rlen = quiche::retry(&hdr.scid, &hdr.dcid, &new_scid, &token, hdr.version, &mut out).unwrap();
        let info = quiche::RecvInfo { from: server_addr(), to: client_addr() };
        client.recv(&mut out[..rlen], info).unwrap();
        len = client.send(&mut buf).unwrap().0;
        let hdr = quiche::Header::from_slice(&mut buf[..len], quiche::MAX_CONN_ID_LEN).unwrap();
        assert_eq!(hdr.dcid.as_ref(), new_scid.as_ref());
        let token = hdr.token.unwrap();
        odcid = Some(tokens.validate(&token, client_addr(), now).unwrap());
    }

    let hdr = quiche::Header::from_slice(&mut buf[..len], quiche::MAX_CONN_ID_LEN).unwrap();
    let scid = if retry { hdr.dcid.clone().into_owned() } else { cids.new_cid(ShardId(3)) };
    server_cfg.set_stateless_reset_token(Some(reset.token(&scid)));
    let mut server =
        quiche::accept_with_buf_factory(&scid, odcid.as_ref(), server_addr(), client_addr(), &mut server_cfg)
            .unwrap();
    let info = quiche::RecvInfo { from: client_addr(), to: server_addr() };
    server.recv(&mut buf[..len], info).unwrap();
    exchange(&mut client, &mut server);
    assert!(client.is_established(), "client not established");
    assert!(server.is_established(), "server not established");
    (client, server, id, reset)
}
