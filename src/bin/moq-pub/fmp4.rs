//! `moq-pub --fmp4`: publishes fragmented MP4 read from standard input (what ffmpeg writes with
//! `-f mp4 -movflags cmaf+frag_every_frame+empty_moov+default_base_moof -`) as a hang broadcast
//! or an MSF one (`media`, `--format`): the namespace is the broadcast, `catalog.json` (hang)
//! or `catalog` (MSF) carries the catalog, one track per rendition carries its frames, one
//! group per GOP (one per audio frame), one object per frame (with its LOC timestamp as an
//! object property in `msf-loc`).
//!
//! The catalog is a track whose latest object is all a viewer needs: every new subscription to
//! it (a relay subscribing because a viewer came) is sent the current catalog as a new group,
//! so a viewer that joins late gets it at once. A new subscription to a media track is given
//! the group in progress from its start (`Publisher::join_group`), so its first frame is the
//! GOP's keyframe, not the next one's, where its filter admits it.

use std::collections::HashSet;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, TryRecvError};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use moq_edge::client::codes::publish_done;
use moq_edge::client::{ClientError, Publisher, RequestState};
use moq_edge::media::{ImportConfig, Importer, MediaKind, Output, Packaging};
use moq_edge::wire::model::{FullTrackName, KvValue, Properties, RequestId, TrackNamespace};

/// The most bytes of a group in progress kept for subscriptions that begin during it.
const GOP_KEEP: usize = 16 << 20;

/// Standard input in chunks, read on its own thread; the channel closes at the end of input.
/// Bounded: a publisher that cannot keep up stops reading (ffmpeg then blocks on its pipe).
fn stdin_chunks() -> Receiver<Vec<u8>> {
    let (tx, rx) = sync_channel(64);
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
            }
        }
    });
    rx
}

/// One rendition's track: its group in progress, and that group's objects so far (kept up to
/// `GOP_KEEP` bytes) for subscriptions that begin during it.
struct MediaTrack {
    track: FullTrackName,
    group: Option<u64>,
    gop: Vec<(Bytes, Properties)>,
    gop_bytes: usize,
}

/// The broadcast being published: the current catalog, the media tracks.
struct Broadcast {
    namespace: TrackNamespace,
    packaging: Packaging,
    catalog: Option<Bytes>,
    catalog_group: u64,
    media: Vec<MediaTrack>,
    /// Subscriptions already served their start: the catalog, or a media track's group in
    /// progress.
    seen: HashSet<RequestId>,
    /// Ages (µs) of the video frames published since the last report, where the encoder
    /// stamps them with the wall clock.
    ages: Vec<u64>,
}

/// Video frames per age report.
const AGES_PER_REPORT: usize = 150;
/// A timestamp within this of the wall clock is taken to be a wall-clock stamp.
const WALL_CLOCK_WINDOW_US: u64 = 60_000_000;

/// How long after its timestamp a frame is published, if its timestamp is a wall-clock stamp
/// (ffmpeg's `-output_ts_offset`, as README's demo and the player test use).
fn wall_clock_age_us(timestamp_us: u64) -> Option<u64> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_micros();
    let age = u64::try_from(now).ok()?.checked_sub(timestamp_us)?;
    (age < WALL_CLOCK_WINDOW_US).then_some(age)
}

impl Broadcast {
    fn track(&self, name: &str) -> FullTrackName {
        FullTrackName { namespace: self.namespace.clone(), name: Bytes::copy_from_slice(name.as_bytes()) }
    }

    /// Sends the current catalog as a new group of the catalog track.
    fn send_catalog(&mut self, p: &mut Publisher) -> Result<(), ClientError> {
        let Some(json) = self.catalog.clone() else { return Ok(()) };
        let track = self.track(self.packaging.catalog_track());
        p.begin_group(&track, self.catalog_group)?;
        p.send_object(&track, json)?;
        p.end_group(&track)?;
        self.catalog_group += 1;
        Ok(())
    }

    /// Each new subscription gets its start: the catalog again, or a media track's group in
    /// progress from its first object.
    fn serve_new_subscriptions(&mut self, p: &mut Publisher) -> Result<(), ClientError> {
        // Forget the ones that ended (a relay that reconnects subscribes again).
        self.seen.retain(|rid| p.core().subscription(*rid).is_some());
        let fresh: Vec<(RequestId, FullTrackName)> = p
            .core()
            .subscriptions()
            .filter(|(rid, d)| d.state == RequestState::Accepted && d.forward && !self.seen.contains(rid))
            .map(|(rid, d)| (rid, d.track.clone()))
            .collect();
        let catalog = self.track(self.packaging.catalog_track());
        let mut catalog_wanted = false;
        for (rid, track) in fresh {
            if track == catalog {
                self.seen.insert(rid);
                catalog_wanted = true;
            } else if let Some(m) = self.media.iter().find(|m| m.track == track) {
                self.seen.insert(rid);
                if m.gop_bytes <= GOP_KEEP {
                    p.join_group_with(rid, &m.gop)?;
                }
            }
        }
        if catalog_wanted {
            self.send_catalog(p)?;
        }
        Ok(())
    }

    /// Every [`AGES_PER_REPORT`] stamped video frames, how long after their timestamps they
    /// were published: the encoder's and the import's part of the glass-to-glass latency.
    fn report_ages(&mut self) {
        if self.ages.len() < AGES_PER_REPORT {
            return;
        }
        self.ages.sort_unstable();
        let ms = |q: usize| self.ages[(self.ages.len() - 1) * q / 100] as f64 / 1e3;
        eprintln!(
            "moq-pub: video frames published {:.1} ms after their timestamps (median; p95 {:.1} ms)",
            ms(50),
            ms(95)
        );
        self.ages.clear();
    }

    fn on_output(&mut self, p: &mut Publisher, out: Output) -> anyhow::Result<()> {
        match out {
            Output::Catalog(update) => {
                for name in update.catalog.track_names() {
                    let track = self.track(name);
                    if !self.media.iter().any(|m| m.track == track) {
                        if self.packaging == Packaging::MsfLoc {
                            p.add_track_with_properties(track.clone());
                        } else {
                            p.add_track(track.clone());
                        }
                        self.media.push(MediaTrack { track, group: None, gop: Vec::new(), gop_bytes: 0 });
                    }
                }
                eprintln!("moq-pub: catalog {}", String::from_utf8_lossy(&update.json));
                self.catalog = Some(update.json);
                self.send_catalog(p)?;
            }
            Output::Frame(f) => {
                if f.kind == MediaKind::Video {
                    self.ages.extend(wall_clock_age_us(f.timestamp_us));
                    self.report_ages();
                }
                let track = self.track(&f.track);
                let Some(m) = self.media.iter_mut().find(|m| m.track == track) else {
                    bail!("frame for {} before the catalog named it", f.track);
                };
                if f.new_group || m.group.is_none() {
                    if m.group.is_some() {
                        p.end_group(&track)?;
                    }
                    p.begin_group(&track, f.group)?;
                    m.group = Some(f.group);
                    m.gop.clear();
                    m.gop_bytes = 0;
                }
                let mut properties = Properties::new();
                for (ty, value) in f.properties {
                    properties.push(ty, KvValue::Int(value));
                }
                m.gop_bytes = m.gop_bytes.saturating_add(f.payload.len());
                if m.gop_bytes <= GOP_KEEP {
                    m.gop.push((f.payload.clone(), properties.clone()));
                }
                p.send_object_with(&track, f.payload, properties)?;
            }
            Output::Skipped(s) => eprintln!("moq-pub: track {} skipped: {}", s.track_id, s.reason),
        }
        Ok(())
    }
}

/// Publishes standard input's fMP4 as the broadcast `namespace` until the input ends (or
/// Ctrl-C), then ends its tracks and closes the session.
pub fn publish(
    mut publisher: Publisher,
    namespace: TrackNamespace,
    packaging: Packaging,
    wait: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    run(&mut publisher, namespace, packaging, wait, stop)?;
    // Let the last objects and PUBLISH_DONE reach the relay before closing.
    publisher.pump(Instant::now() + Duration::from_secs(1))?;
    publisher.close()?;
    Ok(())
}

/// Publishes standard input's fMP4 as the broadcast `namespace` until the input ends (or
/// Ctrl-C), serving the relay meanwhile.
fn run(
    publisher: &mut Publisher,
    namespace: TrackNamespace,
    packaging: Packaging,
    wait: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let catalog_track = packaging.catalog_track();
    publisher.add_track(FullTrackName {
        namespace: namespace.clone(),
        name: Bytes::from_static(catalog_track.as_bytes()),
    });
    publisher.announce(namespace.clone(), Instant::now() + wait).context("PUBLISH_NAMESPACE")?;
    let mut b = Broadcast {
        namespace,
        packaging,
        catalog: None,
        catalog_group: 0,
        media: Vec::new(),
        seen: HashSet::new(),
        ages: Vec::new(),
    };
    let mut importer = Importer::new(ImportConfig { packaging, ..ImportConfig::default() });
    let input = stdin_chunks();
    let mut ended = false;
    while !ended && !stop.load(Ordering::Relaxed) {
        match input.try_recv() {
            Ok(chunk) => importer.push(&chunk).context("reading fMP4")?,
            Err(TryRecvError::Empty) => {
                match publisher.pump_until(Instant::now() + Duration::from_millis(5), |_| false) {
                    Ok(()) | Err(ClientError::Deadline) => {}
                    Err(e) => return Err(e).context("serving the relay"),
                }
            }
            Err(TryRecvError::Disconnected) => {
                importer.end_stream().context("the end of the fMP4 input")?;
                ended = true;
            }
        }
        while let Some(out) = importer.poll().context("reading fMP4")? {
            b.on_output(publisher, out)?;
        }
        b.serve_new_subscriptions(publisher)?;
    }
    let stats = importer.stats();
    for m in &b.media {
        if m.group.is_some() {
            publisher.end_group(&m.track)?;
        }
        publisher.done(&m.track, publish_done::TRACK_ENDED, "moq-pub finished")?;
    }
    publisher.done(&b.track(catalog_track), publish_done::TRACK_ENDED, "moq-pub finished")?;
    eprintln!("moq-pub: {} frames, {} catalogs published", stats.frames, stats.catalogs);
    Ok(())
}
