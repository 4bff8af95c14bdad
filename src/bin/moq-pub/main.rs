//! moq-pub: publishes generated objects on one track to a MoQT relay, any draft (16, 18, 20 or 22),
//! or, with `--fmp4`, the fragmented MP4 on standard input as a hang or MSF broadcast
//! (`fmp4.rs`).
//!
//! Each object's payload begins with an 8-byte big-endian sequence number and an 8-byte
//! big-endian send time in microseconds (`moq_edge::client::stamp`), padded to
//! `--object-size`. Objects go out at `--rate` per second, `--group-size` to a group, one
//! subgroup stream per group (or one datagram each with `--datagrams`). With `--announce`
//! (the default) the track is offered with PUBLISH_NAMESPACE and sent to whoever subscribes;
//! with `--publish` it is pushed with PUBLISH. Ends after `--count` objects (or on Ctrl-C)
//! with PUBLISH_DONE. With `--wait-stdin`, a line on standard input starts the objects and
//! another one ends the track.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;
use moq_edge::client::cli::TrackArgs;
use moq_edge::client::codes::publish_done;
use moq_edge::client::stamp::{now_micros, stamped};
use moq_edge::client::Publisher;
use moq_edge::media::Packaging;
use moq_edge::wire::model::Location;

mod fmp4;

/// What `--fmp4` publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Hang,
    MsfCmaf,
    MsfLoc,
}

impl Format {
    fn packaging(self) -> Packaging {
        match self {
            Format::Hang => Packaging::Hang,
            Format::MsfCmaf => Packaging::MsfCmaf,
            Format::MsfLoc => Packaging::MsfLoc,
        }
    }
}

#[derive(Debug, Parser)]
#[command(name = "moq-pub", version, about = "Publish generated objects on a MoQT track")]
struct Args {
    #[command(flatten)]
    at: TrackArgs,
    /// Offer the namespace with PUBLISH_NAMESPACE and serve SUBSCRIBEs (the default).
    #[arg(long, conflicts_with = "publish")]
    announce: bool,
    /// Push the track with PUBLISH instead.
    #[arg(long)]
    publish: bool,
    /// Objects per second.
    #[arg(long, default_value_t = 30.0)]
    rate: f64,
    /// Objects per group.
    #[arg(long, default_value_t = 30)]
    group_size: u64,
    /// Payload bytes per object (at least 16, the stamp).
    #[arg(long, default_value_t = 1000)]
    object_size: usize,
    /// Objects to send before finishing (default: until Ctrl-C).
    #[arg(long)]
    count: Option<u64>,
    /// Sequence number of the first object, rounded up to the start of a group (object n is
    /// group n / group-size): a publisher that takes over a track from another, elsewhere,
    /// carries on its numbering.
    #[arg(long, default_value_t = 0)]
    first_seq: u64,
    /// Send each object as a datagram instead of on subgroup streams.
    #[arg(long)]
    datagrams: bool,
    /// Wait for a line on standard input before the first object, and after the last one for
    /// another line (or the end of input) before PUBLISH_DONE, serving the relay meanwhile:
    /// subscribers can join before anything is sent, and see every object before the track
    /// ends.
    #[arg(long)]
    wait_stdin: bool,
    /// Publish the fragmented MP4 on standard input (ffmpeg's `-f mp4 -movflags
    /// cmaf+frag_every_frame+empty_moov+default_base_moof -`) as a hang broadcast named by
    /// `--namespace`: a `catalog.json` track and one track per rendition (`--track` and the
    /// object options do not apply).
    #[arg(long, conflicts_with_all = ["publish", "datagrams", "wait_stdin"])]
    fmp4: bool,
    /// With `--fmp4`, the broadcast's format: `hang` (moq-dev's: `catalog.json`, the legacy
    /// container), `msf-cmaf` (the MOQT Streaming Format: a `catalog` track, each frame a
    /// CMAF chunk) or `msf-loc` (MSF with each frame's bitstream in LOC, its timestamp an
    /// object property).
    #[arg(long, value_enum, default_value_t = Format::Hang, requires = "fmp4")]
    format: Format,
    /// Seconds allowed for connecting and for the relay's answers.
    #[arg(long, default_value_t = 10)]
    timeout_s: u64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if !(args.rate > 0.0 && args.rate.is_finite()) {
        bail!("--rate must be a positive number");
    }
    if args.group_size == 0 {
        bail!("--group-size must be at least 1");
    }
    let peer = args.at.peer()?;
    let version = args.at.draft;
    let track = args.at.full_track_name()?;
    let namespace = track.namespace.clone();
    let wait = Duration::from_secs(args.timeout_s);

    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, stop.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone())?;

    let mut publisher =
        Publisher::connect_setup(peer.clone(), version, args.at.setup(), Instant::now() + wait)
            .with_context(|| format!("connecting to {peer} ({})", version.alpn()))?;
    if args.fmp4 {
        eprintln!("moq-pub: publishing broadcast {} from standard input to {peer}", args.at.namespace);
        return fmp4::publish(publisher, namespace, args.format.packaging(), wait, &stop);
    }
    publisher.add_track(track.clone());
    if args.publish {
        publisher.publish(track.clone(), true, Instant::now() + wait).context("PUBLISH")?;
        eprintln!(
            "moq-pub: publishing {}/{} to {peer} ({})",
            args.at.namespace,
            args.at.track,
            version.alpn()
        );
    } else {
        publisher.announce(namespace, Instant::now() + wait).context("PUBLISH_NAMESPACE")?;
        eprintln!(
            "moq-pub: announced {} to {peer} ({}); serving {}",
            args.at.namespace,
            version.alpn(),
            args.at.track
        );
    }

    let lines = args.wait_stdin.then(stdin_lines);
    if let Some(lines) = &lines {
        eprintln!("moq-pub: waiting for a line on standard input to start");
        serve_until_line(&mut publisher, lines, &stop)?;
    }
    let interval = Duration::from_secs_f64(1.0 / args.rate);
    let start = Instant::now();
    let first_seq = args.first_seq.div_ceil(args.group_size).saturating_mul(args.group_size);
    let mut seq: u64 = first_seq;
    let mut active = 0;
    while args.count.is_none_or(|n| seq - first_seq < n) && !stop.load(Ordering::Relaxed) {
        let due = start + interval.mul_f64((seq - first_seq) as f64);
        match publisher.pump_until(due, |_| stop.load(Ordering::Relaxed)) {
            Ok(()) | Err(moq_edge::client::ClientError::Deadline) => {}
            Err(e) => return Err(e).context("serving the relay"),
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let now_active = publisher.core().active(&track);
        if now_active != active {
            eprintln!("moq-pub: {now_active} active subscription(s)");
            active = now_active;
        }
        let at = Location::new(seq / args.group_size, seq % args.group_size);
        let payload = stamped(seq, now_micros(), args.object_size);
        if args.datagrams {
            publisher.send_datagram(&track, at, &payload, at.object + 1 == args.group_size)?;
        } else {
            if at.object == 0 {
                publisher.begin_group(&track, at.group)?;
            }
            publisher.send_object(&track, payload)?;
            if at.object + 1 == args.group_size {
                publisher.end_group(&track)?;
            }
        }
        seq += 1;
    }
    if let Some(lines) = &lines {
        eprintln!(
            "moq-pub: sent {} objects; waiting for a line on standard input to end the track",
            seq - first_seq
        );
        serve_until_line(&mut publisher, lines, &stop)?;
    }
    let ended = publisher.done(&track, publish_done::TRACK_ENDED, "moq-pub finished")?;
    // Let the last objects and PUBLISH_DONE reach the relay before closing.
    publisher.pump(Instant::now() + Duration::from_secs(1))?;
    publisher.close()?;
    let secs = start.elapsed().as_secs_f64();
    println!("moq-pub: sent {} objects in {secs:.1} s; ended {ended} subscription(s)", seq - first_seq);
    Ok(())
}

/// Lines of standard input, read on their own thread; the channel closes at the end of input.
fn stdin_lines() -> std::sync::mpsc::Receiver<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            if line.is_err() || tx.send(()).is_err() {
                break;
            }
        }
    });
    rx
}

/// Serves the relay until a line arrives (or input ends, or Ctrl-C).
fn serve_until_line(
    publisher: &mut Publisher,
    lines: &std::sync::mpsc::Receiver<()>,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    use std::sync::mpsc::TryRecvError;
    while matches!(lines.try_recv(), Err(TryRecvError::Empty)) && !stop.load(Ordering::Relaxed) {
        match publisher.pump_until(Instant::now() + Duration::from_millis(50), |_| false) {
            Ok(()) | Err(moq_edge::client::ClientError::Deadline) => {}
            Err(e) => return Err(e).context("serving the relay"),
        }
    }
    Ok(())
}
