//! The integration suite: one test binary for conformance, security and the command line.

mod api;
mod auth;
mod cli;
mod client;
mod conformance;
mod image;
mod live;
mod openapi;
mod reference;
mod security;
mod support;
