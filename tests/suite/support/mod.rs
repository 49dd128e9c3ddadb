//! What the tests share, once: the server under test, skill files, waiting with a deadline,
//! requests over a raw socket, event streams, live nagents, and the conformance fixtures.

pub mod churn;
pub mod conformance;
pub mod events;
pub mod files;
pub mod git;
pub mod http;
pub mod nagents;
pub mod process;
pub mod server;
pub mod skills;
pub mod tree;
pub mod wait;
