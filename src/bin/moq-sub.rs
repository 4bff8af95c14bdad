//! moq-sub: subscribes to one track at a MoQT relay, any draft (16, 18, 20 or 22), and prints one line per
//! object (group, object, size; for payloads made by moq-pub also the sequence number and
//! the one-way latency), then a summary: objects received, sequence numbers missing (gaps),
//! late or duplicate ones, latency. Ends after `--count` objects, on PUBLISH_DONE, or on
//! Ctrl-C (then it unsubscribes).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, ValueEnum};
use moq_edge::client::cli::TrackArgs;
use moq_edge::client::stamp::{now_micros, read_stamp, SeqStats};
use moq_edge::client::{ClientError, Received, Subscriber};
use moq_edge::wire::model::LocationFilter;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Start {
    /// The next object published (draft-16 "Largest Object" filter).
    NextObject,
    /// The start of the next group (draft-16 "Next Group Start").
    NextGroup,
}

#[derive(Debug, Parser)]
#[command(name = "moq-sub", version, about = "Subscribe to a MoQT track and print its objects")]
struct Args {
    #[command(flatten)]
    at: TrackArgs,
    /// Objects to receive before unsubscribing (default: until PUBLISH_DONE or Ctrl-C).
    #[arg(long)]
    count: Option<u64>,
    /// Where the subscription starts.
    #[arg(long, value_enum, default_value_t = Start::NextObject)]
    start: Start,
    /// Print only the summary.
    #[arg(long)]
    quiet: bool,
    /// Seconds allowed for connecting and for the SUBSCRIBE answer.
    #[arg(long, default_value_t = 10)]
    timeout_s: u64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let peer = args.at.peer()?;
    let version = args.at.draft;
    let track = args.at.full_track_name()?;
    let filter = match args.start {
        Start::NextObject => LocationFilter::NextObject,
        Start::NextGroup => LocationFilter::RelativeStart { groups_back: 0 },
    };
    let wait = Duration::from_secs(args.timeout_s);

    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, stop.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone())?;

    let mut sub = Subscriber::connect_setup(peer.clone(), version, args.at.setup(), Instant::now() + wait)
        .with_context(|| format!("connecting to {peer} ({})", version.alpn()))?;
    let rid = match sub.subscribe(track, Some(filter), Instant::now() + wait) {
        Ok(rid) => rid,
        Err(ClientError::Refused { code, reason }) => {
            anyhow::bail!("SUBSCRIBE refused: REQUEST_ERROR {code:#x} {reason:?}")
        }
        Err(e) => return Err(e).context("SUBSCRIBE"),
    };
    eprintln!(
        "moq-sub: subscribed to {}/{} at {peer} ({})",
        args.at.namespace,
        args.at.track,
        version.alpn()
    );

    let mut tally = Tally::default();
    let out = std::io::stdout();
    let started = Instant::now();
    let mut goaway_seen = false;
    let reason = loop {
        let slice = Instant::now() + Duration::from_millis(500);
        let wake = |c: &moq_edge::client::SubscriberCore| {
            stop.load(Ordering::Relaxed)
                || !c.received(rid).is_empty()
                || c.subscription(rid).is_some_and(|s| s.done.is_some())
        };
        match sub.pump_until(slice, wake) {
            Ok(()) | Err(ClientError::Deadline) => {}
            Err(e) => return Err(e).context("receiving"),
        }
        let mut lines = out.lock();
        for r in sub.take_received(rid) {
            let line = tally.record(&r);
            if !args.quiet {
                writeln!(lines, "{line}")?;
            }
            if args.count.is_some_and(|n| tally.objects >= n) {
                break;
            }
        }
        lines.flush()?;
        drop(lines);
        if let (false, Some(g)) = (goaway_seen, sub.core().goaway()) {
            goaway_seen = true;
            let uri = String::from_utf8_lossy(&g.new_session_uri);
            eprintln!("moq-sub: GOAWAY from the relay, New Session URI {uri:?}");
        }
        if args.count.is_some_and(|n| tally.objects >= n) {
            sub.unsubscribe(rid)?;
            break "count reached".to_string();
        }
        if let Some(done) = sub.core().subscription(rid).and_then(|s| s.done.clone()) {
            break format!(
                "PUBLISH_DONE status {:#x} {:?}",
                done.status,
                String::from_utf8_lossy(&done.reason)
            );
        }
        if stop.load(Ordering::Relaxed) {
            sub.unsubscribe(rid)?;
            break "interrupted".to_string();
        }
    };
    let resets = sub.core().subscription(rid).map_or(0, |s| s.resets.len());
    sub.close()?;
    tally.summary(&reason, started.elapsed().as_secs_f64(), resets);
    Ok(())
}

/// What was received: counts, sequence gaps and latency of stamped payloads.
#[derive(Default)]
struct Tally {
    stats: SeqStats,
    objects: u64,
    bytes: u64,
    latency_sum: u128,
    latency_max: u64,
    latency_n: u64,
}

impl Tally {
    /// Counts object `r`; returns its output line.
    fn record(&mut self, r: &Received) -> String {
        self.objects += 1;
        self.bytes += r.payload.len() as u64;
        let mut line = format!("group {} object {} size {}", r.group, r.object, r.payload.len());
        if let Some(stamp) = read_stamp(&r.payload) {
            self.stats.record(stamp.seq);
            let latency = now_micros().saturating_sub(stamp.micros);
            self.latency_sum += u128::from(latency);
            self.latency_max = self.latency_max.max(latency);
            self.latency_n += 1;
            line.push_str(&format!(" seq {} latency_us {latency}", stamp.seq));
        }
        if r.via_datagram {
            line.push_str(" datagram");
        }
        line
    }

    /// The closing lines: why it ended, what came in `secs`, and the latency.
    fn summary(&self, reason: &str, secs: f64, resets: usize) {
        let (objects, bytes, stats) = (self.objects, self.bytes, &self.stats);
        println!(
            "moq-sub: {reason}; received {objects} objects ({bytes} bytes) in {secs:.1} s; gaps {} ({} missing), \
             late/duplicate {}, streams reset {resets}",
            stats.gaps, stats.missing, stats.out_of_order
        );
        if self.latency_n > 0 {
            let avg = self.latency_sum / u128::from(self.latency_n);
            println!("moq-sub: latency avg {avg} us, max {} us", self.latency_max);
        }
    }
}
