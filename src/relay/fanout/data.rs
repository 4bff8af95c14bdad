//! The fan-out's data path: each object from the owner goes to every subscription of this
//! core that wants it, on the subscriber's own subgroup stream (opened at its first object,
//! reset when late, finished when the upstream stream ends), or as a datagram.

use super::*;
use crate::cx::unheeded;
use wire::model::{DatagramHeader, SubgroupObject};

/// An object of upstream stream `key`: sent on each wanting subscription's stream for it.
pub(super) fn object_out(
    cx: &mut Cx,
    sessions: &mut Sessions,
    st: &mut SubTrack,
    key: StreamKey,
    object: &SubgroupObject,
    payload: Bytes,
    received: Instant,
) {
    let Some(fs) = st.streams.get_mut(&key) else { return };
    let at = Location { group: fs.header.group_id, object: object.object_id };
    if st.info.largest.is_none_or(|l| at > l) {
        st.info.largest = Some(at);
    }
    let first = fs.objects == 0;
    if first && !object.properties.is_empty() {
        fs.timeouts = Timeouts::from_properties(&st.info.properties, Some(&object.properties));
    }
    fs.objects += 1;
    let now = cx.now;
    let default_publisher = default_publisher_priority(&st.info.properties);
    for sub in st.subs.iter_mut() {
        if !sub.wants(at) {
            continue;
        }
        let Some(s) = sessions.get_mut(sub.conn) else { continue };
        let budget = smaller(sub.timeouts.with(fs.timeouts).object, cx.config.max_lag);
        let expires = budget.map(|t| received + t);
        let open = sub.open.iter().position(|(k, _)| *k == key);
        if expires.is_some_and(|e| e <= now) {
            // Late already (the mesh or this core was slow): the subgroup is over
            // for this subscriber, its stream reset if it had one.
            match open {
                Some(i) => {
                    if let Down::Open(id) = std::mem::replace(&mut sub.open[i].1, Down::TimedOut) {
                        unheeded(s.reset_stream(id, ResetCode::DeliveryTimeout), "reset");
                        cx.stats.delivery_timeouts += 1;
                    }
                }
                None => sub.open.push((key, Down::TimedOut)),
            }
            continue;
        }
        let stream = match open.map(|i| sub.open[i].1) {
            Some(Down::TimedOut) => continue,
            Some(Down::Open(id)) => id,
            None => {
                let mut header = fs.header;
                // FIRST_OBJECT exists only in draft-22 (a draft-16 header cannot
                // carry it), and only when this stream starts at the first object.
                header.first_object &= first && s.marks_first_object();
                match s.open_subgroup(&header) {
                    Ok(id) => {
                        let publisher = header.publisher_priority.unwrap_or(default_publisher);
                        let urgency = data_urgency(sub.priority, publisher);
                        unheeded(s.set_priority_ordered(id, urgency, sub.descending), "priority");
                        sub.streams += 1;
                        sub.open.push((key, Down::Open(id)));
                        sub.losses.recent.push(id, at.group);
                        id
                    }
                    Err(e) => {
                        debug!(conn = %sub.conn, error = %e, "subgroup stream not opened");
                        continue;
                    }
                }
            }
        };
        match s.send_object_until(stream, object, payload.clone(), expires) {
            Ok(()) => {
                cx.stats.objects_out += 1;
                cx.stats.bytes_out += payload.len() as u64;
            }
            Err(e) => debug!(conn = %sub.conn, error = %e, "object not sent"),
        }
    }
    let delay = now.saturating_duration_since(received).as_micros();
    let _ = cx.stats.latency.record(u64::try_from(delay).unwrap_or(u64::MAX).max(1));
}

/// Upstream stream `key` ended (FIN, or reset with `reset`): each subscription's stream for it
/// is finished, within its SUBGROUP_DELIVERY_TIMEOUT, or reset alike.
pub(super) fn stream_end(
    cx: &mut Cx,
    sessions: &mut Sessions,
    st: &mut SubTrack,
    key: StreamKey,
    reset: Option<ResetCode>,
) {
    let Some(fs) = st.streams.remove(&key) else { return };
    let now = cx.now;
    for sub in st.subs.iter_mut() {
        let Some(pos) = sub.open.iter().position(|(k, _)| *k == key) else { continue };
        let Down::Open(id) = sub.open.swap_remove(pos).1 else { continue };
        let Some(s) = sessions.get_mut(sub.conn) else { continue };
        // SUBGROUP_DELIVERY_TIMEOUT runs from the FIN: delivered in full by then,
        // or reset.
        let deliver_by = sub.timeouts.with(fs.timeouts).subgroup.map(|t| now + t);
        let ended = match reset {
            None => s.finish_data_stream_by(id, deliver_by),
            Some(c) => s.reset_stream(id, c),
        };
        unheeded(ended, "end stream");
    }
}

/// An object datagram: sent to each wanting subscription unless already late.
pub(super) fn datagram_out(
    cx: &mut Cx,
    sessions: &mut Sessions,
    st: &mut SubTrack,
    header: &DatagramHeader,
    payload: &Bytes,
    received: Instant,
) {
    let at = Location { group: header.group_id, object: header.object_id };
    if st.info.largest.is_none_or(|l| at > l) {
        st.info.largest = Some(at);
    }
    for sub in st.subs.iter() {
        if !sub.wants(at) {
            continue;
        }
        // Datagrams: the smaller of the two timeouts (draft-22 §5.2); a late one is
        // dropped. (Once in quiche's datagram queue it can no longer be.)
        let t = sub.timeouts.with(st.timeouts);
        let budget = smaller(smaller(t.object, t.subgroup), cx.config.max_lag);
        if budget.is_some_and(|t| received + t <= cx.now) {
            cx.stats.delivery_timeouts += 1;
            continue;
        }
        let Some(s) = sessions.get_mut(sub.conn) else { continue };
        let publisher = header.publisher_priority.unwrap_or(default_publisher_priority(&st.info.properties));
        let urgency = data_urgency(sub.priority, publisher);
        match s.send_datagram_with_urgency(header, payload, urgency) {
            Ok(()) => {
                cx.stats.objects_out += 1;
                cx.stats.bytes_out += payload.len() as u64;
            }
            Err(e) => debug!(conn = %sub.conn, error = %e, "datagram not sent"),
        }
    }
}
