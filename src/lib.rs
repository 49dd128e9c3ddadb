//! skillcat: a skill catalog service for LLM agents.
//!
//! The protocol lives in `skillcat-core`; this crate holds the configuration, the sources as
//! configured, and the command line.

pub mod cli;
pub mod config;
pub mod sources;
