//! skillcat: a skill catalog service for LLM agents.
//!
//! The protocol lives in `skillcat-core`. Here, from the bottom up: the configuration and the
//! sources it names (`sources`, one seam for every kind), the catalog API every surface calls
//! (`catalog`), what the HTTP surfaces share (`http`), the surfaces themselves (`rest`,
//! `wellknown`, `pages`, `mcp`, and the command line, `cli`), the one router that puts the HTTP
//! surfaces behind the same gate (`router`), and the server that binds and serves it (`server`).
//! ARCHITECTURE.md at the repository's root is the map.

pub mod app;
pub mod auth;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod http;
pub mod json;
pub mod limits;
pub mod listen;
pub mod mcp;
pub mod observability;
pub mod pages;
mod parallel;
pub mod rest;
pub mod router;
pub mod server;
pub mod shutdown;
pub mod sources;
pub mod spec;
pub mod watch;
pub mod wellknown;
