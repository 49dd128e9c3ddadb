//! skillcat: a skill catalog service for LLM agents.
//!
//! The protocol lives in `skillcat-core`; this crate holds the configuration, the configured
//! sources, the live catalog, the HTTP API, the server, the command line, and the agentskills.io
//! rules that `check --spec` reports.

pub mod api;
pub mod app;
pub mod auth;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod limits;
pub mod listen;
pub mod mcp;
pub mod observability;
pub mod server;
pub mod shutdown;
pub mod sources;
pub mod spec;
