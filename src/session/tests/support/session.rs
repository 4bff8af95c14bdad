//! Delivery of one session's transmits to its peer, for the pair harnesses.

use session::{Session, Transmit};

/// Whole writes, or every stream write cut into single bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Split {
    Whole,
    Bytes,
}

/// Applies one transmit of a session to its peer (a `Close` is the transport's business).
pub fn deliver(to: &mut Session, t: &Transmit, split: Split) {
    match t {
        Transmit::Stream { id, data, fin, .. } => {
            if split == Split::Bytes && data.len() > 1 {
                for (i, b) in data.iter().enumerate() {
                    to.on_stream_data(*id, &[*b], *fin && i + 1 == data.len());
                }
            } else {
                to.on_stream_data(*id, data, *fin);
            }
        }
        Transmit::Reset { id, code } => to.on_stream_reset(*id, *code),
        Transmit::StopSending { id, code } => to.on_stop_sending(*id, *code),
        Transmit::Datagram { data, .. } => to.on_datagram(data.clone()),
        Transmit::Close { .. }
        | Transmit::Priority { .. }
        | Transmit::DeliverBy { .. }
        | Transmit::Hold { .. } => {}
    }
}
