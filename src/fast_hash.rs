//! Hash maps and sets for the daemon's per-look paths, hashed with foldhash instead of the
//! standard SipHash. Their keys are the fleet's own names (placement keys, paths, object
//! indices), read from the repository the daemon follows, not from an untrusted network; and
//! these maps are on the per-look hot path, where SipHash over short strings is a cost a
//! non-cryptographic hasher avoids. foldhash is hashbrown's default hasher, already in the build.

pub type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
pub type HashSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;
