//! The hasher of names chosen by whoever pushes (group names, messages) in the module's
//! in-memory tables: keyed with a random seed per process (from the OS) and per table, so
//! no one can choose names that collide. aHash, not std's SipHash-1-3: as resistant to such
//! floods (its claim), and a fifth of the cost on short names.

pub type Keyed = ahash::RandomState;
