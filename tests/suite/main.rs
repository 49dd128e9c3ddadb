//! The integration suite: one test binary for conformance, security and the command line.

mod conformance;
mod reference;
mod support;
