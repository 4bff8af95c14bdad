//! Wire bytes written by hand for test vectors: vi64 integers (draft-18, draft-20, draft-22).

use wire::{VarInt, Vi64};

/// Builds wire bytes by hand.
#[derive(Default, Clone)]
pub struct B(pub Vec<u8>);

impl B {
    pub fn new() -> Self {
        B(Vec::new())
    }
    pub fn int(mut self, v: u64) -> Self {
        Vi64::encode(v, &mut self.0).expect("vi64 encodes every u64");
        self
    }
    pub fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    pub fn raw(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
    /// A length-prefixed byte string.
    pub fn lp(self, b: &[u8]) -> Self {
        self.int(b.len() as u64).raw(b)
    }
    /// A Track Namespace of string fields.
    pub fn ns(self, fields: &[&str]) -> Self {
        let mut s = self.int(fields.len() as u64);
        for f in fields {
            s = s.lp(f.as_bytes());
        }
        s
    }
    /// A control message frame around `self` as the body.
    pub fn frame(self, ty: u64) -> Vec<u8> {
        let mut out = B::new().int(ty).0;
        out.extend_from_slice(&(self.0.len() as u16).to_be_bytes());
        out.extend_from_slice(&self.0);
        out
    }
}
