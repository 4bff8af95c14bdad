//! The relay's counters, each defined once (ARCHITECTURE.md, "How to add a metric"): its
//! field in [`RelayStats`] (a plain integer its core alone writes), the Prometheus family it
//! is exported as, an optional label that tells it apart from the family's other members, and
//! the family's help text. The runtime copies [`RelayStats::values`] into per-core atomics once
//! per turn and the metrics endpoint renders [`RelayStats::COUNTERS`]; neither names a counter.

/// How one counter is exported.
#[derive(Debug, Clone, Copy)]
pub struct CounterDef {
    /// The Prometheus family (a `_total` counter).
    pub family: &'static str,
    /// `name="value"` of the label that tells this member of the family apart; empty when
    /// the family has no other member.
    pub label: &'static str,
    /// The family's help text.
    pub help: &'static str,
}

macro_rules! counters {
    ($( $(#[$doc:meta])* $field:ident => $family:literal, $label:literal, $help:literal; )*) => {
        /// One core's relay counters: plain integers written by its core only (the host copies
        /// them into the metrics' atomics once per turn; nothing on the data path takes a lock
        /// or an atomic for them), and its latency histogram.
        #[derive(Debug, Clone)]
        pub struct RelayStats {
            $( $(#[$doc])* pub $field: u64, )*
            /// Relay-added delay: from an object's arrival at its ingest core to its write at a
            /// subscriber core (before QUIC), in microseconds; one sample per object per core.
            pub latency: hdrhistogram::Histogram<u64>,
        }

        impl Default for RelayStats {
            fn default() -> Self {
                RelayStats { $( $field: 0, )* latency: latency_histogram() }
            }
        }

        impl RelayStats {
            /// How many counters there are.
            pub const N: usize = [$( stringify!($field) ),*].len();

            /// Every counter's export, in the order of [`RelayStats::values`].
            pub const COUNTERS: [CounterDef; Self::N] =
                [$( CounterDef { family: $family, label: $label, help: $help } ),*];

            /// The counters' values, in the order of [`RelayStats::COUNTERS`].
            pub fn values(&self) -> [u64; Self::N] {
                [$( self.$field ),*]
            }
        }
    };
}

counters! {
    /// Objects (and datagrams) received from publishers and upstream links.
    objects_in => "moq_edge_objects_in_total", "",
        "Objects received from publishers and parent relays.";
    /// Their payload bytes.
    bytes_in => "moq_edge_object_bytes_in_total", "",
        "Payload bytes of objects received.";
    /// Objects (and datagrams) written to subscriber sessions.
    objects_out => "moq_edge_objects_out_total", "",
        "Objects written to subscribers (one per subscriber).";
    /// Their payload bytes.
    bytes_out => "moq_edge_object_bytes_out_total", "",
        "Payload bytes of objects written to subscribers.";
    /// FETCHes answered wholly from the cache.
    fetch_hits => "moq_edge_fetch_cache_hits_total", "",
        "FETCHes answered wholly from the cache.";
    /// FETCHes that needed the upstream.
    fetch_misses => "moq_edge_fetch_cache_misses_total", "",
        "FETCHes that needed the upstream for part of their range.";
    /// Tracks this core owns that moved to a replacement upstream link without a gap (a
    /// parent's GOAWAY).
    tracks_moved => "moq_edge_upstream_moves_total", "",
        "Tracks moved to a replacement upstream link after the parent's GOAWAY.";
    /// Subgroup streams this core (their track's owner) did not forward to a subscriber core
    /// its mesh queue was backed up to (shed whole, at their start).
    mesh_shed_streams => "moq_edge_mesh_shed_streams_total", "",
        "Subgroup streams not forwarded to a subscriber core that was behind (mesh queue backed up), shed whole.";
    /// Tracks this core owns that ended as malformed (draft-22 §12.1).
    malformed_tracks => "moq_edge_malformed_tracks_total", "",
        "Tracks ended as malformed (every subscription got PUBLISH_DONE MALFORMED_TRACK).";
    /// Subscriber streams reset (or objects dropped) for DELIVERY_TIMEOUT.
    delivery_timeouts => "moq_edge_resets_total", "reason=\"delivery_timeout\"",
        "Subscriber streams reset or objects dropped, by reason.";
    /// Subscriber streams reset because the session's backlog was over its limit.
    backlog_resets => "moq_edge_resets_total", "reason=\"backlog\"",
        "Subscriber streams reset or objects dropped, by reason.";
    /// Subscriber streams reset by the transport because an object's time ran out before
    /// QUIC took it (the freshness budget or the subscriber's delivery timeout).
    lag_resets => "moq_edge_resets_total", "reason=\"expired\"",
        "Subscriber streams reset or objects dropped, by reason.";
    /// Subscriptions ended with PUBLISH_DONE TOO_FAR_BEHIND (they kept losing streams while
    /// the core was not overloaded).
    too_far_behind => "moq_edge_subscriptions_ended_total", "reason=\"too_far_behind\"",
        "Subscriptions the relay ended, by reason.";
    /// Sessions closed (CONTROL_MESSAGE_TIMEOUT) because the peer gave no flow-control credit
    /// for our control stream while its messages piled up (`moqt::CONTROL_QUEUE_LIMIT`).
    control_not_read => "moq_edge_sessions_closed_total", "reason=\"control_not_read\"",
        "Sessions the relay closed, by reason.";
    /// SUBSCRIBEs refused with EXCESSIVE_LOAD because the core was over its admission
    /// threshold.
    admission_subscribes => "moq_edge_admission_refused_total", "request=\"subscribe\"",
        "New requests refused with EXCESSIVE_LOAD because the core was over its admission threshold, by request.";
    /// FETCHes refused so.
    admission_fetches => "moq_edge_admission_refused_total", "request=\"fetch\"",
        "New requests refused with EXCESSIVE_LOAD because the core was over its admission threshold, by request.";
    /// SUBSCRIBE_NAMESPACE and SUBSCRIBE_TRACKS refused so.
    admission_namespaces => "moq_edge_admission_refused_total", "request=\"namespace\"",
        "New requests refused with EXCESSIVE_LOAD because the core was over its admission threshold, by request.";
}

/// An empty histogram of 1 µs .. 60 s at 3 significant digits (about 40 KiB).
pub fn latency_histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 60_000_000, 3).unwrap_or_else(|_| {
        // The bounds above are valid; this branch is unreachable in practice.
        hdrhistogram::Histogram::new(3).unwrap_or_else(|_| unreachable!("3 significant digits is valid"))
    })
}
