//! Hash maps for the data path. std's default hasher (SipHash-1-3) was 7-9% of the relay's
//! instructions under callgrind (perf/README.md); aHash with per-process random keys is
//! several times faster and still resists collision flooding by peers who choose keys
//! (stream IDs, connection IDs, track aliases).

/// `std::collections::HashMap` with aHash's randomly keyed hasher.
pub type HashMap<K, V> = std::collections::HashMap<K, V, ahash::RandomState>;
/// `std::collections::HashSet` with aHash's randomly keyed hasher.
pub type HashSet<T> = std::collections::HashSet<T, ahash::RandomState>;
